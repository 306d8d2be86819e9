package report

import (
	"fmt"
	"html"
	"strings"

	"github.com/kilolock/kilolock/internal/plandiff"
)

// DiffMarkdown renders the diff d of plan run run as GitHub Markdown of at
// most budget bytes (ADR 0044), for a check run's summary or text, a PR
// comment or an Actions job summary (GitHub's limits: CheckRunSummaryLimit,
// CommentLimit; bytes are never fewer than the characters GitHub counts):
//
//   - the summary line with the counts, flagged "⚠ N to destroy, M to
//     replace" when the plan destroys anything;
//   - the list of destructive changes (deletes and replacements), one line
//     each;
//   - one collapsible <details> block per resource instance, destructive
//     ones first, each a ```diff fence with Terraform's lines (the symbol
//     in the first column: "+", "-", and "!" for an update or a
//     replacement), then one block for the changed outputs.
//
// What does not fit is cut in reverse order of that list: blocks from the
// end first, then destructive lines (ending "… and N more to destroy or
// replace"), never the summary line; when anything is cut, a last line says
// how many blocks were left out and that `kl run show RUN` shows them all.
// Only a budget too small for the summary line itself cuts it (at a rune
// boundary). A nil d renders nothing.
func DiffMarkdown(d *plandiff.Diff, budget int, run string) string {
	if d == nil || budget <= 0 {
		return ""
	}
	m := newMDDiff(d, run)
	if m.headSize()+m.blocksSize() <= budget {
		return m.fitHead(budget) + m.fitBlocks(budget)
	}
	avail := budget - len(m.note(len(m.blocks)))
	if len(m.head) > avail {
		return cutRunes(m.head, budget)
	}
	h := m.fitHead(avail)
	return h + m.fitBlocks(budget-len(h))
}

// mdDiff is a diff's Markdown in DiffMarkdown's pieces, each rendered
// once, for callers that place and fit them apart: the `kl plan · P`
// check run puts the blocks in its text (GitHubPlan), the sticky comment
// shares its budget among projects (RenderSticky).
type mdDiff struct {
	run       string   // the plan run, for the note on blocks left out
	head      string   // the summary line
	destrHead string   // the flag over the list of destructive changes; "" without one
	destr     []string // one line per destructive change
	blocks    []string // one <details> per resource instance, then the outputs'
}

// newMDDiff renders d's pieces (a nil d: none).
func newMDDiff(d *plandiff.Diff, run string) *mdDiff {
	if d == nil {
		return nil
	}
	p := mdPainter{}
	m := &mdDiff{run: run, head: "**Diff:** " + p.sentence(diffCountsWords(d.Counts())) + "\n"}
	for _, r := range d.Destructive() {
		m.destr = append(m.destr, "- "+p.sentence(destructiveWords(r, false))+"\n")
	}
	if len(m.destr) > 0 {
		m.destrHead = "\n**" + mdEscaper.Replace(destructiveFlag(d.Counts())) + ":**\n\n"
	}
	for _, blk := range diffBlocks(&plandiff.Diff{Resources: d.Resources}) {
		m.blocks = append(m.blocks, p.diffBlock(blk))
	}
	for _, blk := range outputBlocks(d.Outputs) {
		m.blocks = append(m.blocks, p.diffBlock(blk))
	}
	return m
}

// outputsPerBlock bounds the root outputs of one Markdown block, so that
// a plan changing many outputs is cut block by block like its resources
// (fitBlocks), not left out whole.
const outputsPerBlock = 50

// outputBlocks lays out the changed root outputs in blocks of at most
// outputsPerBlock, each headed with the range it holds when there is more
// than one ("Changes to Outputs (51–100 of 1500)").
func outputBlocks(outs []plandiff.Node) []dblock {
	var out []dblock
	for i := 0; i < len(outs); i += outputsPerBlock {
		end := min(i+outputsPerBlock, len(outs))
		b := outputsBlock(outs[i:end])
		if len(outs) > outputsPerBlock {
			b.subject = fmt.Sprintf("%s (%d–%d of %d)", b.subject, i+1, end, len(outs))
		}
		out = append(out, b)
	}
	return out
}

// headSize is the bytes of the summary line and the whole list of
// destructive changes.
func (m *mdDiff) headSize() int {
	n := len(m.head) + len(m.destrHead)
	for _, l := range m.destr {
		n += len(l)
	}
	return n
}

// blocksSize is the bytes of every block.
func (m *mdDiff) blocksSize() int {
	n := 0
	for _, b := range m.blocks {
		n += len(b)
	}
	return n
}

// note says how many of the blocks were left out and the command that
// shows them all.
func (m *mdDiff) note(left int) string {
	return fmt.Sprintf("\n… %s of %s blocks left out: `kl run show %s` shows the whole diff\n",
		fmtCount(left), fmtCount(len(m.blocks)), m.run)
}

// fitHead is the summary line, then the destructive changes that fit in
// budget bytes with it, the last line saying how many more there are
// ("- … and N more to destroy or replace") when not all fit. The summary
// line is kept whole even over budget: callers leave room for it.
func (m *mdDiff) fitHead(budget int) string {
	moreDestr := func(n int) string { return fmt.Sprintf("- … and %s more to destroy or replace\n", fmtCount(n)) }
	var b strings.Builder
	b.WriteString(m.head)
	avail := budget - len(m.head)
	if len(m.destr) == 0 || len(m.destrHead) > avail {
		return b.String()
	}
	b.WriteString(m.destrHead)
	avail -= len(m.destrHead)
	for i, l := range m.destr {
		rest := 0
		if i < len(m.destr)-1 {
			rest = len(moreDestr(len(m.destr) - i - 1))
		}
		if len(l)+rest > avail {
			if more := moreDestr(len(m.destr) - i); len(more) <= avail {
				b.WriteString(more)
			}
			break
		}
		b.WriteString(l)
		avail -= len(l)
	}
	return b.String()
}

// fitBlocks is the blocks, in order, that fit in budget bytes, then —
// when any is left out — the note saying how many and that `kl run show
// RUN` shows them all; "" when not even the note fits.
func (m *mdDiff) fitBlocks(budget int) string {
	if m.blocksSize() <= budget {
		return strings.Join(m.blocks, "")
	}
	avail := budget - len(m.note(len(m.blocks)))
	if avail < 0 {
		return ""
	}
	var b strings.Builder
	kept := 0
	for _, blk := range m.blocks {
		if len(blk) > avail {
			break
		}
		b.WriteString(blk)
		avail -= len(blk)
		kept++
	}
	b.WriteString(m.note(len(m.blocks) - kept))
	return b.String()
}

// diffBlock renders one block as <details> holding a ```diff fence.
func (p mdPainter) diffBlock(blk dblock) string {
	summary := html.EscapeString(inert(blk.subject))
	if blk.verb != "" {
		verb := html.EscapeString(inert(blk.verb))
		if blk.destructive {
			verb = "<b>" + verb + "</b>"
		}
		summary = "<code>" + summary + "</code> " + verb
	}
	for _, n := range blk.notes {
		summary += " " + html.EscapeString(inert(n))
	}
	var body strings.Builder
	for _, l := range blk.lines {
		body.WriteString(mdDiffSym(l.sym) + " " + strings.Repeat("    ", l.depth) + l.text + "\n")
	}
	fence := "```"
	for strings.Contains(body.String(), fence) {
		fence += "`"
	}
	return "\n<details><summary>" + summary + "</summary>\n\n" + fence + "diff\n" + body.String() + fence + "\n\n</details>\n"
}

// mdDiffSym is a line's first column in a ```diff fence: GitHub colours
// "+" and "-" lines; "!" marks an update or a replacement (as Atlantis's
// and tfcmt's diff output do); anything else is context.
func mdDiffSym(sym string) string {
	switch sym {
	case "+", "-":
		return sym
	case "~", "-/+", "+/-":
		return "!"
	}
	return " "
}
