package report

import (
	"fmt"
	"html"
	"net/url"
	"strings"
)

// HTML layout: the fourth renderer of the report model, for the run and
// state pages of internal/web (ADR 0064). It lays out the same doc — the
// same sentences of words.go and events.go — as an HTML fragment that a
// page template places: nothing in it is written twice. Every word is
// escaped (html.EscapeString); tones and since-plan marks are CSS classes
// (tone-good, tone-warn, tone-bad, tone-info, tone-dim), so that the three
// since-plan classes look different by their symbol and by their colour
// (ADR D8). Blocks that only the terminal lays out (a plan's diff in
// Terraform's columns, a revert's read diffs, an apply's diagnostics and
// resources) are the text renderer's lines, uncoloured, in a <pre>.

var toneClass = map[tone]string{
	toneGood: "tone-good", toneWarn: "tone-warn", toneBad: "tone-bad", toneInfo: "tone-info", toneDim: "tone-dim",
}

type htmlPainter struct{ o Options }

// esc escapes s for HTML text and attribute values.
func esc(s string) string { return html.EscapeString(s) }

// safeURL returns u when it is an absolute http(s) URL or a path on this
// server ("/runs/…"), else "": a stored URL never becomes a javascript:
// link.
func safeURL(u string) string {
	if strings.HasPrefix(u, "/") && !strings.HasPrefix(u, "//") {
		return u
	}
	p, err := url.Parse(u)
	if err != nil || (p.Scheme != "https" && p.Scheme != "http") || p.Host == "" {
		return ""
	}
	return u
}

func (p htmlPainter) toned(t tone, inner string) string {
	if c := toneClass[t]; c != "" {
		return `<span class="` + c + `">` + inner + `</span>`
	}
	return inner
}

func (p htmlPainter) span(s span) string {
	switch s.kind {
	case kCode:
		return p.toned(s.tone, "<code>"+esc(s.text)+"</code>")
	case kMark:
		return `<code class="mark ` + toneClass[s.tone] + `">` + esc(s.text) + `</code>`
	case kRun:
		c := `<code class="run">` + esc(s.text) + `</code>`
		if p.o.RunURL != nil {
			if u := safeURL(p.o.RunURL(s.text)); u != "" {
				return `<a href="` + esc(u) + `">` + c + `</a>`
			}
		}
		return c
	case kStrong:
		return p.toned(s.tone, "<strong>"+esc(s.text)+"</strong>")
	case kLink:
		if u := safeURL(s.url); u != "" {
			return `<a href="` + esc(u) + `">` + esc(s.text) + `</a>`
		}
	}
	return p.toned(s.tone, esc(s.text))
}

func (p htmlPainter) sentence(s sentence) string {
	var b strings.Builder
	for _, sp := range s {
		b.WriteString(p.span(sp))
	}
	return b.String()
}

// renderHTML lays a doc out as an <article> whose class names the
// document's tone (verdict-good, verdict-bad, …: the title's colour): the
// title as an <h2>, the summary, then one <section> per body section.
func renderHTML(d *doc, o Options) string {
	p := htmlPainter{o: o}
	var b strings.Builder
	verdict := ""
	if c := toneClass[d.tone]; c != "" {
		verdict = " verdict-" + strings.TrimPrefix(c, "tone-")
	}
	fmt.Fprintf(&b, "<article class=\"report%s\">\n<h2 class=\"title\">%s</h2>\n<div class=\"summary\">\n", verdict, p.sentence(d.title))
	for _, blk := range d.summary {
		p.block(&b, blk)
	}
	b.WriteString("</div>\n")
	for _, sec := range d.body {
		b.WriteString("<section>\n<h3>" + p.sentence(sec.title) + "</h3>\n")
		for _, blk := range sec.blocks {
			p.block(&b, blk)
		}
		b.WriteString("</section>\n")
	}
	b.WriteString("</article>\n")
	return b.String()
}

func (p htmlPainter) block(b *strings.Builder, blk block) {
	switch v := blk.(type) {
	case fields:
		b.WriteString("<dl class=\"fields\">\n")
		for _, f := range v {
			b.WriteString("<dt>" + esc(f.key) + "</dt><dd>" + p.sentence(f.val) + "</dd>\n")
		}
		b.WriteString("</dl>\n")
	case para:
		b.WriteString("<p>" + p.sentence(sentence(v)) + "</p>\n")
	case list:
		b.WriteString("<ul>\n")
		for _, it := range v {
			b.WriteString("<li>" + p.sentence(it.s) + "</li>\n")
		}
		b.WriteString("</ul>\n")
	case table:
		b.WriteString("<table>\n")
		if strings.TrimSpace(strings.Join(v.head, "")) != "" {
			b.WriteString("<thead><tr>")
			for _, h := range v.head {
				b.WriteString("<th>" + esc(h) + "</th>")
			}
			b.WriteString("</tr></thead>\n")
		}
		b.WriteString("<tbody>\n")
		for _, r := range v.rows {
			b.WriteString("<tr>")
			for _, c := range r {
				b.WriteString("<td>" + p.sentence(c) + "</td>")
			}
			b.WriteString("</tr>\n")
		}
		b.WriteString("</tbody>\n</table>\n")
	case addrList:
		fold := len(v.rows) > foldOver
		if fold {
			fmt.Fprintf(b, "<details><summary>%d addresses</summary>\n", len(v.rows))
		}
		b.WriteString("<ul class=\"addrs\">\n")
		for _, r := range v.rows {
			b.WriteString("<li><code>" + esc(r.addr) + "</code>")
			if len(r.note) > 0 {
				b.WriteString(" — " + p.sentence(r.note))
			}
			b.WriteString("</li>\n")
		}
		b.WriteString("</ul>\n")
		if fold {
			b.WriteString("</details>\n")
		}
	case legend:
		parts := make([]string, len(v))
		for i, m := range v {
			parts[i] = p.span(markSpan(m)) + " " + esc(m.label) + " (" + esc(m.meaning) + ")"
		}
		b.WriteString("<p class=\"legend\">legend: " + strings.Join(parts, " · ") + "</p>\n")
	default:
		// The terminal's layout, uncoloured (see the comment at the top).
		var t strings.Builder
		textPainter{}.block(&t, blk, "")
		b.WriteString("<pre>" + esc(t.String()) + "</pre>\n")
	}
}
