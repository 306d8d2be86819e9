package report

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// ANSI SGR codes for Options.Color.
var ansi = map[tone]string{
	toneGood: "32", toneWarn: "33", toneBad: "31", toneInfo: "36", toneDim: "2",
}

const ansiBold = "1"

// textPainter styles spans for a terminal: plain text, or ANSI colour when
// the output is a TTY.
type textPainter struct {
	color bool
	cm    *Commands // Options.Commands: next steps as klbot's comments
}

func (p textPainter) sgr(codes, s string) string {
	if !p.color || codes == "" || s == "" {
		return s
	}
	return "\x1b[" + codes + "m" + s + "\x1b[0m"
}

func (p textPainter) span(s span) string {
	if alt, ok := p.cm.painted(s); ok {
		return p.sentence(alt)
	}
	codes := ansi[s.tone]
	if s.kind == kStrong {
		codes = joinCodes(ansiBold, codes)
	}
	return p.sgr(codes, s.text)
}

func joinCodes(a, b string) string {
	if a == "" || b == "" {
		return a + b
	}
	return a + ";" + b
}

func (p textPainter) sentence(s sentence) string {
	var b strings.Builder
	for _, sp := range s {
		b.WriteString(p.span(sp))
	}
	return b.String()
}

// width is the printed width of plain text (runes; the reports use no
// wide characters).
func width(s string) int { return utf8.RuneCountInString(s) }

// pad writes painted, padded with spaces to w columns of its plain text.
func pad(painted, plain string, w int) string {
	if n := w - width(plain); n > 0 {
		return painted + strings.Repeat(" ", n)
	}
	return painted
}

const textIndent = "  "

// renderText lays a doc out for a terminal: the title, the summary
// indented below it, then each section's title with its blocks indented.
func renderText(d *doc, o Options) string {
	p := textPainter{color: o.Color, cm: o.Commands}
	var b strings.Builder
	b.WriteString(p.sgr(joinCodes(ansiBold, ansi[d.tone]), d.title.plain()))
	b.WriteString("\n")
	for _, blk := range d.summary {
		p.block(&b, blk, textIndent)
	}
	for _, sec := range d.body {
		b.WriteString("\n")
		b.WriteString(p.sgr(ansiBold, sec.title.plain()))
		b.WriteString("\n")
		for _, blk := range sec.blocks {
			p.block(&b, blk, textIndent)
		}
	}
	return b.String()
}

func (p textPainter) block(b *strings.Builder, blk block, ind string) {
	line := func(s string) {
		b.WriteString(strings.TrimRight(ind+s, " "))
		b.WriteString("\n")
	}
	switch v := blk.(type) {
	case fields:
		w := 0
		for _, f := range v {
			w = max(w, width(f.key))
		}
		for _, f := range v {
			line(pad(p.sgr(ansi[toneDim], f.key), f.key, w+2) + p.sentence(f.val))
		}
	case para:
		line(p.sentence(sentence(v)))
	case list:
		for _, it := range v {
			line("- " + p.sentence(it.s))
		}
	case table:
		p.table(line, v)
	case addrList:
		w := 0
		shown := v.rows
		if v.max > 0 && len(shown) > v.max {
			shown = shown[:v.max]
		}
		for _, r := range shown {
			if len(r.note) > 0 {
				w = max(w, width(r.addr))
			}
		}
		for _, r := range shown {
			if len(r.note) == 0 {
				line(r.addr)
				continue
			}
			line(pad(r.addr, r.addr, w+2) + p.sentence(r.note))
		}
		if n := len(v.rows) - len(shown); n > 0 {
			line(p.sgr(ansi[toneDim], fmt.Sprintf("… and %d more", n)))
		}
	case legend:
		parts := make([]string, len(v))
		for i, m := range v {
			parts[i] = p.span(markSpan(m)) + " " + m.label + " (" + m.meaning + ")"
		}
		line(p.sgr(ansi[toneDim], "legend: ") + strings.Join(parts, p.sgr(ansi[toneDim], "  ·  ")))
	case diffBody:
		p.diffText(b, v.d) // Terraform's own columns, not ind
	case readDiffs:
		p.readDiffText(b, v)
	case diagList:
		p.diagnostics(line, v)
	case resourceList:
		p.resources(line, v)
	}
}

// table aligns columns on the plain text of each cell; colour is added
// after padding so that it never shifts a column.
func (p textPainter) table(line func(string), t table) {
	ws := make([]int, len(t.head))
	for i, h := range t.head {
		ws[i] = width(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			ws[i] = max(ws[i], width(c.plain()))
		}
	}
	var hb strings.Builder
	for i, h := range t.head {
		if i < len(t.head)-1 {
			hb.WriteString(pad(p.sgr(ansi[toneDim], h), h, ws[i]+2))
		} else {
			hb.WriteString(p.sgr(ansi[toneDim], h))
		}
	}
	if strings.TrimSpace(strings.Join(t.head, "")) != "" {
		line(hb.String())
	}
	for _, r := range t.rows {
		var rb strings.Builder
		for i, c := range r {
			if i < len(r)-1 {
				rb.WriteString(pad(p.sentence(c), c.plain(), ws[i]+2))
			} else {
				rb.WriteString(p.sentence(c))
			}
		}
		line(rb.String())
	}
}
