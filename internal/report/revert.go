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

// revertWords says one revert of plan envelope env. Not shown deliberate
// (engine.Envelope.Deliberate), it is a warning that ends with what is
// known of the branch: "⚠ would undo version 4's change to
// `terraform_data.a` (PR acme/infra#21, by alice): `input` back to its
// value before version 4. The branch is 3 commits behind `main`: bring it
// up to date." — or, when no one asked GitHub (kl), "Is the branch behind
// the base?". Shown deliberate, it is a fact without ⚠: "undoes version
// 4's change … The branch is up to date with `main`, where PR
// acme/infra#21 is merged, so this is deliberate." (ADR 0046 decisions 4
// and 7.)
func revertWords(env *engine.Envelope, rv engine.Revert) sentence {
	v := fmt.Sprintf("version %d", rv.Serial)
	s := words(toned(toneWarn, "⚠ would undo "), strong(v+"'s"))
	if env.Deliberate(rv) {
		s = words("undoes ", strong(v+"'s"))
	}
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
		s = words(s, "this plan creates it again, with ", undone(rv), " as before "+v)
	default:
		s = words(s, undone(rv), " back to "+its(max(len(rv.Paths), len(rv.Attributes)))+" value before "+v)
	}
	return words(s, ". ", branchWords(env.Branch, rv))
}

// branchWords answers "Is the branch behind the base?" for revert rv with
// what klbot asked GitHub (engine.BranchStatus), or asks it when no one
// did.
func branchWords(b *engine.BranchStatus, rv engine.Revert) sentence {
	if b == nil {
		return words("Is the branch behind the base?")
	}
	base := code(b.Base)
	if b.BehindBy > 0 {
		return words("The branch is "+plural(b.BehindBy, "commit", "commits")+" behind ", base, ": bring it up to date.")
	}
	s := words("The branch is up to date with ", base)
	in, known := b.InBase(rv.Serial)
	switch {
	case !known:
		return words(s, fmt.Sprintf(", but whether it holds version %d's change is not known.", rv.Serial))
	case in.Commit != "" && in.Holds:
		return words(s, ", which holds commit ", code(shortSHA(in.Commit)), fmt.Sprintf(" of version %d, so this is deliberate.", rv.Serial))
	case in.Commit != "":
		return words(s, ", but commit ", code(shortSHA(in.Commit)), fmt.Sprintf(" of version %d is not on it: the branch lacks that change.", rv.Serial))
	case in.Holds:
		return words(s, ", where PR ", prWords(rv.PR), " is merged, so this is deliberate.")
	}
	return words(s, ", but PR ", prWords(rv.PR), " is not merged into it: the branch lacks that change.")
}

// undone names what revert rv sets back (engine.Revert.Paths): "`input`"
// when all the version changed in it, "`input.a`, `tags[\"env\"]`" when
// only those, "part of `creds`" for some of a sensitive value (ADR 0046
// decision 3). Names and keys only, never values. A revert stored before
// paths were kept names its attributes.
func undone(rv engine.Revert) sentence {
	if len(rv.Paths) == 0 {
		return codes(rv.Attributes)
	}
	var out []sentence
	for _, p := range rv.Paths {
		if p.Part {
			out = append(out, words("part of ", code(p.Path)))
		} else {
			out = append(out, words(code(p.Path)))
		}
	}
	return join(out, ", ")
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

// revertBlocks are the lines of env's reverts, at most revertsShown, then
// how many more (with ⚠ when one of them is in doubt): those in doubt
// first (the warnings), then the deliberate ones.
func revertBlocks(env *engine.Envelope) []block {
	rs := append(env.RevertsInDoubt(), deliberate(env)...)
	var out []block
	for i, rv := range rs {
		if i == revertsShown {
			more := words(toned(toneDim, fmt.Sprintf("… and %d more instances this plan sets back", len(rs)-i)))
			if !env.Deliberate(rv) {
				more = words(toned(toneWarn, fmt.Sprintf("⚠ … and %d more instances this plan would set back", len(rs)-i)))
			}
			out = append(out, para(more))
			break
		}
		out = append(out, para(revertWords(env, rv)))
	}
	return out
}

// deliberate are env's reverts shown deliberate.
func deliberate(env *engine.Envelope) []engine.Revert {
	var out []engine.Revert
	for _, rv := range env.Reverts {
		if env.Deliberate(rv) {
			out = append(out, rv)
		}
	}
	return out
}

// stickyReverts writes a plan's reverts into its sticky comment section,
// one paragraph each (revertBlocks).
func stickyReverts(t *strings.Builder, env *engine.Envelope, o Options) {
	for _, b := range revertBlocks(env) {
		if pa, ok := b.(para); ok {
			t.WriteString("\n" + mdPainter{o: o}.sentence(sentence(pa)) + "\n")
		}
	}
}

// RevertTitle is a check-run title's part for a plan that would undo
// earlier changes: "⚠ would undo version 4's change" or "⚠ would undo 3
// earlier changes" for those in doubt; when all are shown deliberate,
// without ⚠: "undoes version 4's change", "undoes 3 earlier changes";
// "" for none.
func RevertTitle(env *engine.Envelope) string {
	if env == nil || len(env.Reverts) == 0 {
		return ""
	}
	rs, verb := env.RevertsInDoubt(), "⚠ would undo"
	if len(rs) == 0 {
		rs, verb = env.Reverts, "undoes"
	}
	if len(rs) == 1 {
		return fmt.Sprintf("%s version %d's %s", verb, rs[0].Serial, rs[0].Kind)
	}
	return fmt.Sprintf("%s %d earlier changes", verb, len(rs))
}

// revertRefused says, in Markdown, why a plan of project with
// `on_revert: fail` (Applying.RevertFail) cannot be applied, and what to
// do: "it would undo earlier changes not shown to be deliberate (below)
// and project `infra` has …".
func revertRefused(project string) string {
	return fmt.Sprintf("it would undo earlier changes not shown to be deliberate (below) and project `%s` has `on_revert: fail` (kl.yaml): "+
		"such a plan is applied when its branch is up to date with its base and the base holds what it undoes. "+
		"Bring the branch up to date and push; the new plan is checked again.", project)
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
// to `terraform_data.a` (PR acme/infra#21, by alice); bring …". rs are the
// reverts in doubt (engine.Envelope.RevertsInDoubt).
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
	return fmt.Sprintf("project `%s` has `on_revert: fail` (kl.yaml) and plan `%s` would undo %s, not shown to be deliberate; bring the branch up to date with its base and push, and apply the new plan",
		project, plan, strings.Join(parts, ", "))
}

type jRevert struct {
	Address    string   `json:"address"`
	Serial     int64    `json:"serial"`
	Kind       string   `json:"kind"`
	Attributes []string `json:"attributes"`
	// Paths: engine.Revert.Paths (ADR 0046 decision 3).
	Paths       []jUndonePath `json:"paths"`
	Run         string        `json:"run,omitempty"`
	PlanRun     string        `json:"plan_run,omitempty"`
	Actor       string        `json:"actor,omitempty"`
	PR          *jPR          `json:"pr,omitempty"`
	CommitMode  string        `json:"commit_mode,omitempty"`
	CommittedAt jtime         `json:"committed_at"`
	// Deliberate: engine.Envelope.Deliberate (ADR 0046 decision 7).
	Deliberate bool   `json:"deliberate"`
	Text       string `json:"text"`
}

// jUndonePath is one of a revert's paths (plandiff.UndonePath).
type jUndonePath struct {
	Path string `json:"path"`
	Part bool   `json:"part"`
}

func toUndonePaths(ps []plandiff.UndonePath) []jUndonePath {
	out := make([]jUndonePath, len(ps))
	for i, p := range ps {
		out[i] = jUndonePath{Path: p.Path, Part: p.Part}
	}
	return out
}

func toReverts(env *engine.Envelope) []jRevert {
	if len(env.Reverts) == 0 {
		return nil
	}
	out := make([]jRevert, len(env.Reverts))
	for i, rv := range env.Reverts {
		out[i] = jRevert{Address: rv.Address, Serial: rv.Serial, Kind: string(rv.Kind), Attributes: orEmpty(rv.Attributes),
			Paths: toUndonePaths(rv.Paths),
			Run:   rv.Run, PlanRun: rv.PlanRun, Actor: rv.Actor, PR: toPR(rv.PR), CommitMode: string(rv.Mode),
			CommittedAt: jtime(rv.CommittedAt), Deliberate: env.Deliberate(rv), Text: revertWords(env, rv).plain()}
	}
	return out
}

// jBranch is an envelope's branch (engine.BranchStatus).
type jBranch struct {
	Base     string           `json:"base"`
	BaseSHA  string           `json:"base_sha,omitempty"`
	HeadSHA  string           `json:"head_sha"`
	AheadBy  int              `json:"ahead_by"`
	BehindBy int              `json:"behind_by"`
	Versions []jVersionInBase `json:"versions"`
}

type jVersionInBase struct {
	Serial int64  `json:"serial"`
	Holds  bool   `json:"holds"`
	Commit string `json:"commit,omitempty"`
}

func toBranch(b *engine.BranchStatus) *jBranch {
	if b == nil {
		return nil
	}
	j := &jBranch{Base: b.Base, BaseSHA: b.BaseSHA, HeadSHA: b.HeadSHA, AheadBy: b.AheadBy, BehindBy: b.BehindBy, Versions: []jVersionInBase{}}
	for _, v := range b.Versions {
		j.Versions = append(j.Versions, jVersionInBase{Serial: v.Serial, Holds: v.Holds, Commit: v.Commit})
	}
	return j
}

// readDiffs is what a later version changed in the resources a plan
// reads (engine.SincePlanEntry.ReadChanges):
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
// attributes were compared, a section saying what that version changed in
// what the plan reads — its own change, from the version before it, so the
// "by" line names who made it (issue 12 §4, ADR 0046 decision 2): why the
// re-plan happened.
func readChangeSections(d *doc, sp *engine.SincePlan) {
	if sp == nil {
		return
	}
	for _, e := range sp.Entries {
		if e.ReadChanges == nil || e.Class != engine.ClassReadChanged || e.OwnApply {
			continue
		}
		title := words(fmt.Sprintf("What version %d changed in what the plan reads", e.Serial))
		if len(e.ReadChanges) == 0 {
			d.section(title, para(words(toned(toneDim, fmt.Sprintf(
				"no attribute of %s differs between version %d and version %d: their state entries differ otherwise (dependencies, schema version or private data)",
				countWords(e.Addresses), e.Serial-1, e.Serial)))))
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
