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
	p := mdPainter{}
	head := "**Diff:** " + p.sentence(diffCountsWords(d.Counts())) + "\n"
	var destr []string
	for _, r := range d.Destructive() {
		destr = append(destr, "- "+p.sentence(destructiveWords(r, false))+"\n")
	}
	destrHead := ""
	if len(destr) > 0 {
		destrHead = "\n**" + mdEscaper.Replace(destructiveFlag(d.Counts())) + ":**\n\n"
	}
	blks := diffBlocks(d)
	rendered := make([]string, len(blks))
	total := len(head) + len(destrHead)
	for _, l := range destr {
		total += len(l)
	}
	for i, blk := range blks {
		rendered[i] = p.diffBlock(blk)
		total += len(rendered[i])
	}
	if total <= budget {
		return head + destrHead + strings.Join(destr, "") + strings.Join(rendered, "")
	}
	return cutDiff(head, destrHead, destr, rendered, budget, run)
}

// cutDiff fits a diff that is over budget (DiffMarkdown's order of what
// survives).
func cutDiff(head, destrHead string, destr, blocks []string, budget int, run string) string {
	note := func(left int) string {
		return fmt.Sprintf("\n… %s of %s blocks left out: `kl run show %s` shows the whole diff\n",
			fmtCount(left), fmtCount(len(blocks)), run)
	}
	moreDestr := func(n int) string { return fmt.Sprintf("- … and %s more to destroy or replace\n", fmtCount(n)) }
	avail := budget - len(note(len(blocks)))
	if len(head) > avail {
		return cutRunes(head, budget)
	}
	var b strings.Builder
	b.WriteString(head)
	avail -= len(head)
	if len(destr) > 0 && len(destrHead) <= avail {
		b.WriteString(destrHead)
		avail -= len(destrHead)
		for i, l := range destr {
			rest := 0
			if i < len(destr)-1 {
				rest = len(moreDestr(len(destr) - i - 1))
			}
			if len(l)+rest > avail {
				if m := moreDestr(len(destr) - i); len(m) <= avail {
					b.WriteString(m)
					avail -= len(m)
				}
				break
			}
			b.WriteString(l)
			avail -= len(l)
		}
	}
	kept := 0
	for _, blk := range blocks {
		if len(blk) > avail {
			break
		}
		b.WriteString(blk)
		avail -= len(blk)
		kept++
	}
	b.WriteString(note(len(blocks) - kept))
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
