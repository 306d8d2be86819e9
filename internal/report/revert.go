package report

import (
	"fmt"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/plandiff"
)

// What a plan would undo (engine.Revert, issue 12 §5) and what changed in
// what a plan reads (engine.SincePlanEntry.ReadChanges, §4): ADR 0046.

// revertsShown bounds the revert lines of one view; the rest are counted.
const revertsShown = 10

// revertWords says one revert, as a question: "⚠ would undo version 4's
// change to `terraform_data.a` (PR acme/infra#21, by alice): `input` back
// to its value before version 4. Is the branch behind the base?"
func revertWords(rv engine.Revert) sentence {
	v := fmt.Sprintf("version %d", rv.Serial)
	s := words(toned(toneWarn, "⚠ would undo "), strong(v+"'s"))
	switch rv.Kind {
	case engine.RevertCreation:
		s = s.add(txt(" creation of "), code(rv.Address))
	case engine.RevertRemoval:
		s = s.add(txt(" removal of "), code(rv.Address))
	default:
		s = s.add(txt(" change to "), code(rv.Address))
	}
	s = words(s, revertBy(rv), ": ")
	switch rv.Kind {
	case engine.RevertCreation:
		s = s.add(txt("this plan destroys what " + v + " created"))
	case engine.RevertRemoval:
		s = words(s, "this plan creates it again, with ", codes(rv.Attributes), " as before "+v)
	default:
		s = words(s, codes(rv.Attributes), " back to "+its(len(rv.Attributes))+" value before "+v)
	}
	return s.add(txt(". Is the branch behind the base?"))
}

func its(n int) string {
	if n == 1 {
		return "its"
	}
	return "their"
}

// revertBy is " (PR acme/infra#21, by alice)", " (run R, by alice)" or
// " (by alice)": who committed the version.
func revertBy(rv engine.Revert) sentence {
	var in []sentence
	switch {
	case rv.PR != nil:
		in = append(in, words("PR ", prWords(rv.PR)))
	case rv.Run != "":
		in = append(in, words("run ", runSpan(rv.Run)))
	}
	if rv.Actor != "" {
		in = append(in, words("by "+rv.Actor))
	}
	if len(in) == 0 {
		return nil
	}
	return words(" (", join(in, ", "), ")")
}

// revertBlocks are the lines of a plan's reverts, at most revertsShown,
// then how many more.
func revertBlocks(rs []engine.Revert) []block {
	var out []block
	for i, rv := range rs {
		if i == revertsShown {
			out = append(out, para(words(toned(toneWarn, fmt.Sprintf("⚠ … and %d more instances this plan would set back", len(rs)-i)))))
			break
		}
		out = append(out, para(revertWords(rv)))
	}
	return out
}

// stickyReverts writes a plan's reverts into its sticky comment section,
// one paragraph each (revertBlocks).
func stickyReverts(t *strings.Builder, rs []engine.Revert, o Options) {
	for _, b := range revertBlocks(rs) {
		if pa, ok := b.(para); ok {
			t.WriteString("\n" + mdPainter{o: o}.sentence(sentence(pa)) + "\n")
		}
	}
}

// RevertTitle is a check-run title's part for a plan that would undo
// earlier changes: "⚠ would undo version 4's change" or "⚠ would undo 3
// earlier changes"; "" for none.
func RevertTitle(rs []engine.Revert) string {
	switch len(rs) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("⚠ would undo version %d's %s", rs[0].Serial, rs[0].Kind)
	}
	return fmt.Sprintf("⚠ would undo %d earlier changes", len(rs))
}

// revertRefused says, in Markdown, why a plan of project with
// `on_revert: fail` (Applying.RevertFail) cannot be applied, and what to
// do: "it would undo earlier changes (below) and project `infra` has …".
func revertRefused(project string) string {
	return fmt.Sprintf("it would undo earlier changes (below) and project `%s` has `on_revert: fail` (kl.yaml). "+
		"Bring the branch up to date with its base and push; the new plan is checked again.", project)
}

// revertShort is one revert without its details: "version 4's change to
// `terraform_data.a` (PR acme/infra#21, by alice)".
func revertShort(rv engine.Revert) sentence {
	s := words(fmt.Sprintf("version %d's", rv.Serial))
	switch rv.Kind {
	case engine.RevertCreation:
		s = s.add(txt(" creation of "))
	case engine.RevertRemoval:
		s = s.add(txt(" removal of "))
	default:
		s = s.add(txt(" change to "))
	}
	return words(s, code(rv.Address), revertBy(rv))
}

// RevertRefusedWhy says why an apply is refused by on_revert: fail, in
// Markdown without a final period (BotRefusal.Why): "project `infra` has
// `on_revert: fail` (kl.yaml) and plan `P` would undo version 2's change
// to `terraform_data.a` (PR acme/infra#21, by alice); bring …".
func RevertRefusedWhy(project, plan string, rs []engine.Revert) string {
	p := mdPainter{}
	var parts []string
	for i, rv := range rs {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("%d more", len(rs)-i))
			break
		}
		parts = append(parts, p.sentence(revertShort(rv)))
	}
	return fmt.Sprintf("project `%s` has `on_revert: fail` (kl.yaml) and plan `%s` would undo %s; bring the branch up to date with its base and push, and apply the new plan",
		project, plan, strings.Join(parts, ", "))
}

type jRevert struct {
	Address     string   `json:"address"`
	Serial      int64    `json:"serial"`
	Kind        string   `json:"kind"`
	Attributes  []string `json:"attributes"`
	Run         string   `json:"run,omitempty"`
	PlanRun     string   `json:"plan_run,omitempty"`
	Actor       string   `json:"actor,omitempty"`
	PR          *jPR     `json:"pr,omitempty"`
	CommitMode  string   `json:"commit_mode,omitempty"`
	CommittedAt jtime    `json:"committed_at"`
	Text        string   `json:"text"`
}

func toReverts(rs []engine.Revert) []jRevert {
	if len(rs) == 0 {
		return nil
	}
	out := make([]jRevert, len(rs))
	for i, rv := range rs {
		out[i] = jRevert{Address: rv.Address, Serial: rv.Serial, Kind: string(rv.Kind), Attributes: orEmpty(rv.Attributes),
			Run: rv.Run, PlanRun: rv.PlanRun, Actor: rv.Actor, PR: toPR(rv.PR), CommitMode: string(rv.Mode),
			CommittedAt: jtime(rv.CommittedAt), Text: revertWords(rv).plain()}
	}
	return out
}

// readDiffs is what changed in the resources a plan reads between its
// source version and a later one (engine.SincePlanEntry.ReadChanges):
// Terraform's block layout, headlines in the past tense. The text
// renderer lays it out in Terraform's columns, Markdown in one
// collapsible ```diff block per instance.
type readDiffs struct{ rs []plandiff.Resource }

func (readDiffs) isBlock() {}

// readBlocks lays out rs as diff blocks, headlines in the past tense.
func readBlocks(rs []plandiff.Resource) []dblock {
	out := make([]dblock, len(rs))
	for i, r := range rs {
		b := resourceBlock(r)
		b.notes, b.destructive = nil, false
		switch r.Action {
		case plandiff.Create:
			b.verb = "was created"
		case plandiff.Delete:
			b.verb = "was destroyed"
		default:
			b.verb = "changed"
		}
		out[i] = b
	}
	return out
}

// readDiffText lays v out for a terminal.
func (p textPainter) readDiffText(b *strings.Builder, v readDiffs) {
	for _, blk := range readBlocks(v.rs) {
		b.WriteString(textIndent + p.sgr(ansiBold, "# "+inert(blk.subject)) + " " + inert(blk.verb) + "\n")
		for _, l := range blk.lines {
			b.WriteString(p.diffLine(l) + "\n")
		}
	}
}

// readDiffMarkdown lays v out in Markdown.
func (p mdPainter) readDiffMarkdown(b *strings.Builder, v readDiffs) {
	for _, blk := range readBlocks(v.rs) {
		b.WriteString(p.diffBlock(blk))
	}
}

// readChangeSections adds, for each read-changed entry of sp whose read
// attributes were compared, a section saying what changed in what the plan
// reads between its source version and that version (issue 12 §4): why
// the re-plan happened.
func readChangeSections(d *doc, sp *engine.SincePlan) {
	if sp == nil {
		return
	}
	for _, e := range sp.Entries {
		if e.ReadChanges == nil || e.Class != engine.ClassReadChanged || e.OwnApply {
			continue
		}
		title := words(fmt.Sprintf("What version %d changed in what the plan reads (since source serial %d)", e.Serial, sp.SourceSerial))
		if len(e.ReadChanges) == 0 {
			d.section(title, para(words(toned(toneDim, fmt.Sprintf(
				"no attribute of %s differs between source serial %d and version %d: their state entries differ otherwise (dependencies, schema version or private data), or a later change was undone",
				countWords(e.Addresses), sp.SourceSerial, e.Serial)))))
			continue
		}
		d.section(title, para(words("by ", who(e.Run, e.Actor, e.PR))), readDiffs{e.ReadChanges})
	}
}

// jReadChanges is an entry's read_changes: the diff resources of
// toDiff's shape.
func toReadChanges(rs []plandiff.Resource) []jDiffResource {
	if rs == nil {
		return nil
	}
	d := toDiff(&plandiff.Diff{Resources: rs})
	for i := range d.Resources {
		d.Resources[i].Text = readBlocks(rs[i : i+1])[0].subject + " " + readBlocks(rs[i : i+1])[0].verb
	}
	return d.Resources
}
