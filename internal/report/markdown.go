package report

import (
	"fmt"
	"strings"
)

// Markdown layout markers. Both are HTML comments: GitHub does not show
// them, and Truncate reads them.
const (
	// mdMore names the command that shows the whole report.
	mdMore = "<!-- kilolock:more "
	// mdSummaryEnd closes the summary, which Truncate always keeps.
	mdSummaryEnd = "<!-- kilolock:summary-end -->"
)

// foldOver is the longest address list Markdown shows unfolded; longer
// ones go into <details>.
const foldOver = 8

// titleEmoji marks the document's verdict for a reader scanning a PR.
var titleEmoji = map[tone]string{
	toneGood: "✅ ", toneWarn: "⏳ ", toneBad: "⛔ ", toneInfo: "📝 ",
}

// mdEscaper escapes the characters that GitHub-flavoured Markdown would
// read as markup inside plain words (CommonMark backslash escapes). "#" is
// left alone so that "owner/name#42" stays an autolink.
var mdEscaper = strings.NewReplacer(
	`\`, `\\`, "`", "\\`", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`,
	"<", `&lt;`, ">", `&gt;`, "|", `\|`, "~", `\~`,
)

type mdPainter struct{ o Options }

// codeSpan wraps s in backticks, using a longer fence if s holds one.
func codeSpan(s string) string {
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

func (p mdPainter) span(s span) string {
	if alt, ok := p.o.Commands.painted(s); ok {
		return p.sentence(alt)
	}
	switch s.kind {
	case kCode, kMark:
		return codeSpan(s.text)
	case kRun:
		c := codeSpan(s.text)
		if p.o.RunURL != nil {
			if u := p.o.RunURL(s.text); u != "" {
				return "[" + c + "](" + u + ")"
			}
		}
		return c
	case kStrong:
		return "**" + mdEscaper.Replace(s.text) + "**"
	case kLink:
		if s.url != "" {
			return "[" + mdEscaper.Replace(s.text) + "](" + s.url + ")"
		}
	}
	return mdEscaper.Replace(s.text)
}

func (p mdPainter) sentence(s sentence) string {
	var b strings.Builder
	for _, sp := range s {
		b.WriteString(p.span(sp))
	}
	return b.String()
}

// renderMarkdown lays a doc out for GitHub: a heading ("###" unless
// o.HeadingLevel), the summary, the summary-end marker, then one section
// a level below per body section.
func renderMarkdown(d *doc, o Options) string {
	p := mdPainter{o: o}
	var b strings.Builder
	if d.more != "" {
		b.WriteString(mdMore + d.more + " -->\n")
	}
	b.WriteString(o.heading(0) + titleEmoji[d.tone] + p.sentence(d.title) + "\n")
	for _, blk := range d.summary {
		b.WriteString("\n")
		p.block(&b, blk)
	}
	b.WriteString("\n" + mdSummaryEnd + "\n")
	for _, sec := range d.body {
		b.WriteString("\n" + o.heading(1) + p.sentence(sec.title) + "\n")
		for _, blk := range sec.blocks {
			b.WriteString("\n")
			p.block(&b, blk)
		}
	}
	return b.String()
}

func (p mdPainter) block(b *strings.Builder, blk block) {
	switch v := blk.(type) {
	case fields:
		for _, f := range v {
			b.WriteString("- **" + mdEscaper.Replace(f.key) + ":** " + p.sentence(f.val) + "\n")
		}
	case para:
		b.WriteString(p.sentence(sentence(v)) + "\n")
	case list:
		for _, it := range v {
			b.WriteString("- " + p.sentence(it.s) + "\n")
		}
	case table:
		b.WriteString("|")
		for _, h := range v.head {
			b.WriteString(" " + mdEscaper.Replace(h) + " |")
		}
		b.WriteString("\n|")
		for range v.head {
			b.WriteString(" --- |")
		}
		b.WriteString("\n")
		for _, r := range v.rows {
			b.WriteString("|")
			for _, c := range r {
				// A code span cannot hold an escaped pipe on every renderer;
				// addresses never contain one, words are escaped.
				b.WriteString(" " + p.sentence(c) + " |")
			}
			b.WriteString("\n")
		}
	case addrList:
		fold := len(v.rows) > foldOver
		if fold {
			fmt.Fprintf(b, "<details><summary>%d addresses</summary>\n\n", len(v.rows))
		}
		for _, r := range v.rows {
			b.WriteString("- " + codeSpan(r.addr))
			if len(r.note) > 0 {
				b.WriteString(" — " + p.sentence(r.note))
			}
			b.WriteString("\n")
		}
		if fold {
			b.WriteString("\n</details>\n")
		}
	case legend:
		parts := make([]string, len(v))
		for i, m := range v {
			parts[i] = p.span(markSpan(m)) + " " + mdEscaper.Replace(m.label) + " (" + mdEscaper.Replace(m.meaning) + ")"
		}
		b.WriteString("<sub>legend: " + strings.Join(parts, " · ") + "</sub>\n")
	case readDiffs:
		p.readDiffMarkdown(b, v)
	case diagList:
		p.diagnostics(b, v)
	case resourceList:
		p.resources(b, v)
	}
}
