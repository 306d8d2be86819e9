package report

import (
	"fmt"
	"strings"

	"github.com/kilolock/kilolock/internal/plandiff"
)

// A plan's diff (plandiff.Diff, ADR 0044) is laid out as Terraform's
// renderer lays it out — one "# ADDR will be …" headline per resource
// instance, then its block of attribute lines, nested objects and arrays
// indented — as lines that the text renderer prints in Terraform's columns
// and the Markdown renderer (diffmd.go) puts in ```diff fences with the
// symbol in the first column.

// dline is one line of a resource's or an output's block.
type dline struct {
	sym   string // "+", "-", "~", "-/+", "+/-", "<=", ".", or "" (context)
	depth int    // 0: the resource line (or a root output); 1: its attributes; …
	text  string
	note  bool // a "# (…)" line: dim
}

// dblock is one resource instance (or the outputs) rendered: its
// headline, the headline's notes and its lines.
type dblock struct {
	subject, verb string
	destructive   bool
	notes         []string
	lines         []dline
}

// symOf is the symbol of a resource action, as Terraform prints it.
func symOf(r plandiff.Resource) string {
	switch r.Action {
	case plandiff.Create:
		return "+"
	case plandiff.Read:
		return "<="
	case plandiff.Update:
		return "~"
	case plandiff.Delete:
		return "-"
	case plandiff.Replace:
		if r.CreateFirst {
			return "+/-"
		}
		return "-/+"
	case plandiff.Forget:
		return "."
	}
	return ""
}

// nodeSym is the symbol of an attribute's action.
func nodeSym(a plandiff.Action) string {
	switch a {
	case plandiff.Create:
		return "+"
	case plandiff.Delete:
		return "-"
	case plandiff.Update:
		return "~"
	}
	return ""
}

// resourceBlock lays out one resource instance.
func resourceBlock(r plandiff.Resource) dblock {
	subject, verb, notes := resourceHeadline(r)
	kw := "resource"
	if r.Mode == "data" {
		kw = "data"
	}
	b := dblock{subject: subject, verb: verb, destructive: r.Destructive(), notes: notes}
	b.lines = append(b.lines, dline{sym: symOf(r), text: kw + " " + plandiff.Quote(r.Type) + " " + plandiff.Quote(r.Name) + " {"})
	b.lines = append(b.lines, members(r.Changes, 1, true)...)
	if r.Unchanged > 0 {
		b.lines = append(b.lines, hidden(r.Unchanged, 1, "attribute"))
	}
	b.lines = append(b.lines, dline{text: "}"})
	return b
}

// outputsBlock lays out the changed root outputs.
func outputsBlock(outs []plandiff.Node) dblock {
	return dblock{subject: "Changes to Outputs", lines: members(outs, 0, true)}
}

// hidden is Terraform's "# (N unchanged attributes hidden)".
func hidden(n, depth int, what string) dline {
	return dline{depth: depth, note: true, text: "# (" + plural(n, "unchanged "+what, "unchanged "+what+"s") + " hidden)"}
}

// members lays out the nodes of one object (keys aligned, as Terraform
// aligns them) or one array, at depth. top says they are a resource's
// attributes or root outputs: only there does Terraform write a deleted
// value's "-> null".
func members(ns []plandiff.Node, depth int, top bool) []dline {
	w := 0
	for _, n := range ns {
		if n.Key != nil {
			w = max(w, width(plandiff.KeyLiteral(*n.Key)))
		}
	}
	var out []dline
	for _, n := range ns {
		lead := ""
		if n.Key != nil {
			k := plandiff.KeyLiteral(*n.Key)
			lead = k + strings.Repeat(" ", w-width(k)) + " = "
		}
		out = append(out, nodeLines(n, lead, depth, top)...)
	}
	return out
}

// nodeLines lays out one node: a leaf on one line, a container as its
// opening line, its members one level deeper, the unchanged count and its
// closing line. Array elements end with a comma, as Terraform prints them.
func nodeLines(n plandiff.Node, lead string, depth int, top bool) []dline {
	sym := nodeSym(n.Action)
	comma := ""
	if n.Index != nil {
		comma = ","
	}
	force := ""
	if n.ForcesReplacement {
		force = " # forces replacement"
	}
	if n.Kind == "" {
		return []dline{{sym: sym, depth: depth, text: lead + leafText(n, top) + comma + force}}
	}
	open, closing := "{", "}"
	what := "attribute"
	if n.Kind == "array" {
		open, closing, what = "[", "]", "element"
	}
	if n.Before != nil {
		open = valueText(n.Before) + " -> " + open
	}
	out := []dline{{sym: sym, depth: depth, text: lead + open + force}}
	out = append(out, members(n.Changes, depth+1, false)...)
	if n.Unchanged > 0 {
		out = append(out, hidden(n.Unchanged, depth+1, what))
	}
	switch {
	case n.After != nil:
		closing += " -> " + valueText(n.After)
	case n.Action == plandiff.Delete && top:
		closing += " -> null"
	}
	return append(out, dline{depth: depth, text: closing + comma})
}

// leafText is a leaf's value: "new" for a create, "old -> null" for a
// delete ("old" below the top), "old -> new" for an update — one
// "(sensitive value)" when both sides are —, "value" for context.
func leafText(n plandiff.Node, top bool) string {
	switch n.Action {
	case plandiff.Create:
		return valueText(n.After)
	case plandiff.Delete:
		if !top {
			return valueText(n.Before)
		}
		return valueText(n.Before) + " -> null"
	case plandiff.NoOp:
		return valueText(n.After)
	}
	if n.Before != nil && n.After != nil && n.Before.Sensitive && n.After.Sensitive {
		return valueText(n.After)
	}
	return valueText(n.Before) + " -> " + valueText(n.After)
}

// valueText is one side of a leaf: "(sensitive value)" — never the value
// —, "(known after apply)", or the value as Terraform prints it.
func valueText(v *plandiff.Value) string {
	switch {
	case v == nil:
		return "null"
	case v.Sensitive:
		return "(sensitive value)"
	case v.Unknown:
		return "(known after apply)"
	}
	return plandiff.Literal(v.JSON)
}

// diffBlocks lays out a whole diff: its resources in its order
// (destructive first), then the outputs.
func diffBlocks(d *plandiff.Diff) []dblock {
	out := make([]dblock, 0, len(d.Resources)+1)
	for _, r := range d.Resources {
		out = append(out, resourceBlock(r))
	}
	if len(d.Outputs) > 0 {
		out = append(out, outputsBlock(d.Outputs))
	}
	return out
}

// destructiveWords lists one destructive change: "ADDR must be replaced
// (note)", after its symbol ("-/+ ") when withSym (a terminal; in a
// Markdown list item a leading "-" would start a list).
func destructiveWords(r plandiff.Resource, withSym bool) sentence {
	subject, verb, notes := resourceHeadline(r)
	var s sentence
	if withSym {
		s = words(toned(toneBad, symOf(r)), " ")
	}
	s = s.add(code(subject), txt(" "), strongT(toneBad, verb))
	if len(notes) > 0 {
		s = s.add(txt(" " + strings.Join(notes, " ")))
	}
	return s
}

// diffLine renders a line in Terraform's columns: the symbol ends at
// column 4·depth+2, the text starts two columns later.
func (p textPainter) diffLine(l dline) string {
	col := 4*l.depth + 2
	sym := l.sym
	var b strings.Builder
	b.WriteString(strings.Repeat(" ", max(col-max(len(sym)-1, 0), 0)))
	switch {
	case sym == "":
		b.WriteString("  ")
	default:
		b.WriteString(p.sgr(ansi[symTone(sym)], sym) + " ")
	}
	if l.note {
		b.WriteString(p.sgr(ansi[toneDim], l.text))
	} else {
		b.WriteString(l.text)
	}
	return strings.TrimRight(b.String(), " ")
}

// symTone colours a symbol as Terraform does: green creates, red
// destroys and replacements, yellow updates, cyan reads.
func symTone(sym string) tone {
	switch sym {
	case "+":
		return toneGood
	case "-", "-/+", "+/-":
		return toneBad
	case "~":
		return toneWarn
	case "<=":
		return toneInfo
	}
	return toneDim
}

// diffBody is a plan's diff in a doc, under a section titled by
// diffTitle: the list of destructive changes, then every block. Only the
// text renderer lays it out; Markdown callers place DiffMarkdown
// themselves, within their budget.
type diffBody struct{ d *plandiff.Diff }

func (diffBody) isBlock() {}

// diffSection adds d's section to doc, titled "Diff: COUNTS" after prefix
// ("Diff of plan RUN"); nothing for a nil d.
func diffSection(doc *doc, prefix sentence, d *plandiff.Diff) {
	if d == nil {
		return
	}
	doc.section(words(prefix, ": ", diffCountsWords(d.Counts())), diffBody{d})
}

// diffText lays d out for a terminal, in Terraform's columns.
func (p textPainter) diffText(b *strings.Builder, d *plandiff.Diff) {
	for _, r := range d.Destructive() {
		b.WriteString(textIndent + p.sentence(destructiveWords(r, true)) + "\n")
	}
	for _, blk := range diffBlocks(d) {
		b.WriteString("\n")
		if blk.verb == "" {
			b.WriteString(textIndent + p.sgr(ansiBold, blk.subject+":") + "\n")
		} else {
			verb := inert(blk.verb)
			if blk.destructive {
				verb = p.sgr(joinCodes(ansiBold, ansi[toneBad]), verb)
			}
			b.WriteString(textIndent + p.sgr(ansiBold, "# "+inert(blk.subject)) + " " + verb + "\n")
			for _, n := range blk.notes {
				b.WriteString(textIndent + p.sgr(ansiBold, "# "+inert(n)) + "\n")
			}
		}
		for _, l := range blk.lines {
			b.WriteString(p.diffLine(l) + "\n")
		}
	}
}

// fmtCount writes n with thousands separators ("4,850").
func fmtCount(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
