package report

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/plandiff"
)

// Sticky is klbot's sticky comment on a pull request (one per pull request,
// edited in place): a summary table with one line per project — its state,
// status, committed version and latest run — then one section per project.
// RenderSticky writes it.
type Sticky struct {
	Repo     string // "owner/name"
	PR       int
	Projects []StickyProject // in the bot's order
}

// StickyProject is one project of the sticky comment: the latest plan or
// apply the bot recorded for it, as the engine has it, and the bot's note.
// A project with Apply shows the apply's view (report.Apply) and, when it
// committed a version, the versions of SincePlan committed after it; one
// with only Plan shows how it ended or, still open, how to apply it and
// its live SincePlan — and, with Diff, the plan's diff (ADR 0044); one
// with neither, "no plan".
type StickyProject struct {
	Applying                  // the project and how its plan is applied (kl.yaml)
	State    string           // the project's state
	HeadSHA  string           // the commit the plan is of
	Plan     *engine.Run      // the latest plan run, when there is no apply run
	Apply    *engine.RunStory // the latest apply run's story
	// SincePlan is the plan's live since-plan: of an open Plan, or of the
	// plan of an Apply that committed a version; nil otherwise.
	SincePlan *engine.SincePlan
	// Diff is the open Plan's diff (engine.Engine.PlanDiff), shown in its
	// section; nil for none (a plan no longer open, or one without a
	// stored diff).
	Diff    *plandiff.Diff
	Note    string // the bot's latest word (a notice's Note, Markdown, one line); "" for none
	Refused bool   // Note is a refusal: the section is marked ⛔
}

// planSHA is the commit Plan was made at (its pull request's head then),
// else HeadSHA: a plan a push dropped stays at its own commit while the
// bot's row moves to the new head.
func (p StickyProject) planSHA() string {
	if p.Plan != nil && p.Plan.PR != nil && p.Plan.PR.HeadSHA != "" {
		return p.Plan.PR.HeadSHA
	}
	return p.HeadSHA
}

// runID is the project's latest run: its apply run, else its plan run.
func (p StickyProject) runID() string {
	switch {
	case p.Apply != nil:
		return p.Apply.Run.ID
	case p.Plan != nil:
		return p.Plan.ID
	}
	return ""
}

// RenderSticky writes the sticky comment s as GitHub Markdown, whatever
// o.Format: the "kilolock:more" marker, the "### Kilolock · owner/name#N"
// heading (at o.HeadingLevel) and its summary table, the summary-end
// marker, then a section one level below per project, which nests the
// project's views (Apply, SincePlan) two levels below the comment's
// heading, their own markers dropped, and an open plan's diff (ADR 0044:
// its summary line, its destructive changes, one collapsible block per
// resource instance). Run ids link with o.RunURL and pull requests with
// their URL.
//
// When o.MaxMarkdown > 0 the comment fits in it (GitHub: a comment holds
// at most CommentLimit characters): the table and every section without
// its diff come first; what is left is shared among the projects' diffs
// (shares: max-min fair, so one project's big diff cannot crowd out
// another's) — first for their summary lines and destructive lists, then
// for their blocks, each project's cut ending with how many blocks were
// left out and the `kl run show RUN` that shows them all. Truncate then
// cuts, keeping the summary, whatever still does not fit. Errors are the
// nested views' and w's.
func RenderSticky(w io.Writer, s Sticky, o Options) error {
	var head strings.Builder
	head.WriteString(mdMore + "the kl apply · PROJECT check runs, or kl run show RUN -->\n")
	fmt.Fprintf(&head, "%sKilolock · %s#%d\n\n| project | state | status | version | run |\n| --- | --- | --- | --- | --- |\n",
		o.heading(0), s.Repo, s.PR)
	rows := make([]stickyRow, len(s.Projects))
	for i, p := range s.Projects {
		// The comment is read on the pull request: next steps are klbot's comments.
		po := o
		po.Commands = &Commands{PR: &engine.PullRequest{Repo: s.Repo, Number: s.PR}, Project: p.Project}
		sec, err := stickySection(p, po)
		if err != nil {
			return err
		}
		heading := fmt.Sprintf("\n%s%s `%s` on %s\n\n", o.heading(1), sec.icon, p.Project, p.State)
		sec.text, sec.diffAt = heading+sec.text, len(heading)+sec.diffAt
		rows[i] = sec
		fmt.Fprintf(&head, "| `%s` | %s | %s | %s | %s |\n", p.Project, p.State, sec.status, sec.version, sec.run)
	}
	head.WriteString("\n" + mdSummaryEnd + "\n")
	used := head.Len()
	for _, r := range rows {
		used += len(r.text)
	}
	avail := math.MaxInt / 2 // no limit
	if o.MaxMarkdown > 0 {
		avail = o.MaxMarkdown - used
	}
	diffs := stickyDiffs(rows, avail)
	var body strings.Builder
	for i, r := range rows {
		body.WriteString(r.text[:r.diffAt] + diffs[i] + r.text[r.diffAt:])
	}
	md := head.String() + body.String()
	if o.MaxMarkdown > 0 {
		md = Truncate(md, o.MaxMarkdown)
	}
	if _, err := io.WriteString(w, md); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	return nil
}

// stickyDiffs renders each row's diff (its Markdown, "\n" first; "" for a
// row without one) within avail bytes in all, less room for Truncate (a
// negative avail — the sections alone are over the limit — still keeps
// each diff's summary line). The summary lines and destructive lists get
// their shares first, the blocks share what is left.
func stickyDiffs(rows []stickyRow, avail int) []string {
	out := make([]string, len(rows))
	heads := make([]int, len(rows))
	blocks := make([]int, len(rows))
	for i, r := range rows {
		if r.diff != nil {
			heads[i], blocks[i] = r.diff.headSize()+1, r.diff.blocksSize()
		}
	}
	unbounded := avail >= sum(heads)+sum(blocks)+truncateRoom
	hs := shares(heads, avail-truncateRoom)
	for i, r := range rows {
		if r.diff == nil {
			continue
		}
		if unbounded {
			out[i] = "\n" + r.diff.fitHead(heads[i]) + r.diff.fitBlocks(blocks[i])
			continue
		}
		out[i] = "\n" + r.diff.fitHead(hs[i]-1)
	}
	if unbounded {
		return out
	}
	left := avail - truncateRoom
	for _, d := range out {
		left -= len(d)
	}
	bs := shares(blocks, left)
	for i, r := range rows {
		if r.diff != nil {
			out[i] += r.diff.fitBlocks(bs[i])
		}
	}
	return out
}

// sum adds ns up.
func sum(ns []int) int {
	t := 0
	for _, n := range ns {
		t += n
	}
	return t
}

// stickyRow is a project's line of the summary table and its section.
type stickyRow struct {
	icon, status, version, run, text string
	// diff is an open plan's diff, to go at byte diffAt of text.
	diff   *mdDiff
	diffAt int
}

// stickySection renders one project: its apply (applySection) or plan
// (planSection), the bot's note, and the command that shows its latest
// run.
func stickySection(p StickyProject, o Options) (stickyRow, error) {
	s := stickyRow{icon: "📝", status: "no plan", version: "—", run: "—"}
	var t strings.Builder
	id := p.runID()
	if id != "" {
		s.run = runLink(id, o)
	}
	var err error
	switch {
	case p.Apply != nil:
		err = p.applySection(o, &s, &t)
	case p.Plan != nil:
		err = p.planSection(o, &s, &t)
	}
	if err != nil {
		return s, err
	}
	if p.Note != "" {
		if p.Refused {
			s.icon = "⛔"
			if p.Apply == nil {
				s.status = "⛔ refused"
			}
		}
		t.WriteString("\n> " + p.Note + "\n")
	}
	if id != "" {
		fmt.Fprintf(&t, "\n`kl run show %s`", id)
		if u := runURLOf(id, o); u != "" {
			fmt.Fprintf(&t, " · [details](%s)", u)
		}
		t.WriteString("\n")
	}
	s.text = t.String()
	return s, nil
}

// nested is the options of a view nested in the comment: Markdown, its
// heading two levels below the comment's, never cut on its own.
func nested(o Options) Options {
	level := o.HeadingLevel
	if level <= 0 {
		level = 3
	}
	o.Format, o.HeadingLevel, o.MaxMarkdown = Markdown, level+2, 0
	return o
}

// applySection is a project's section after an apply: its status and
// committed version for the summary table (versionBrief: planned at,
// head was, commit mode, exact or deviation), report.Apply of its story, and the versions
// committed since (live).
func (p StickyProject) applySection(o Options, s *stickyRow, t *strings.Builder) error {
	story := p.Apply
	s.status, s.icon = applyStatus(story.Run.Status)
	if v := story.Version; v != nil {
		s.version = versionBrief(v, story.Markers)
	}
	var md strings.Builder
	if err := Apply(&md, story, nested(o)); err != nil {
		return err
	}
	t.WriteString(withoutMarkers(md.String()))
	if story.Version != nil {
		t.WriteString(committedSince(p.SincePlan, story.Version.Serial, o))
	}
	return nil
}

// planSection is a project's section with a plan and no apply: a plan that
// is no longer open says how it ended; an open one says how to apply it
// and what was committed since (live since-plan).
func (p StickyProject) planSection(o Options, s *stickyRow, t *strings.Builder) error {
	run := p.Plan
	s.status = string(run.Status)
	if run.Status != engine.StatusPlanned {
		s.icon = "⏹️"
		fmt.Fprintf(t, "Plan %s at `%s` is **%s**", runLink(run.ID, o), shortSHA(p.planSHA()), run.Status)
		if e := endText(run.ID, run.End, o.Commands); e != "" {
			t.WriteString(": " + e)
		}
		t.WriteString(".\n")
		return nil
	}
	env := run.Envelope
	fmt.Fprintf(t, "Plan %s at `%s` against serial %d: %s. ", runLink(run.ID, o), shortSHA(p.HeadSHA),
		env.SourceSerial, PlanTitle(&engine.PlanOutcome{Run: *run}))
	switch {
	case p.refusesReverts(&engine.PlanOutcome{Run: *run}):
		s.icon = "⛔"
		t.WriteString("⛔ It cannot be applied: " + revertRefused(p.Project) + "\n")
	case p.OnMerge:
		t.WriteString("It applies when the pull request is merged.\n")
	default:
		fmt.Fprintf(t, "Apply it with `/kl apply -p %s` or the **Apply** button of `%s`.\n", p.Project, p.PlanCheck)
	}
	stickyReverts(t, env, o) // ADR 0046
	if d := p.Diff; d != nil && (len(d.Resources) > 0 || len(d.Outputs) > 0) {
		s.diff, s.diffAt = newMDDiff(d, run.ID), t.Len()
	}
	if p.SincePlan != nil && len(p.SincePlan.Entries) == 0 {
		fmt.Fprintf(t, "\nNo version committed since this plan (serial %d is still the head).\n", env.SourceSerial)
		return nil
	}
	var md strings.Builder
	if err := SincePlan(&md, p.SincePlan, *run, nested(o)); err != nil {
		return err
	}
	t.WriteString("\n" + withoutMarkers(md.String()))
	return nil
}

// committedSince lists the versions of sp committed after serial by
// others (not the plan's own apply), by class (ADR D3, D8: shown by class,
// never one warning); "" when there are none or sp is nil.
func committedSince(sp *engine.SincePlan, serial int64, o Options) string {
	if sp == nil {
		return ""
	}
	var lines []string
	for _, e := range sp.Entries {
		if e.Serial <= serial || e.OwnApply {
			continue
		}
		who := "run " + runLink(e.Run, o)
		if e.PR != nil {
			who += " (" + prLink(e.PR) + ")"
		}
		l := fmt.Sprintf("- `%s` version %d by %s: %s", classSymbol(e.Class), e.Serial, who, e.Class.Label())
		if len(e.Addresses) > 0 {
			l += " — " + codeListOr(e.Addresses.Strings(), "")
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		return ""
	}
	return fmt.Sprintf("\n%sCommitted since this apply (live, serial %d → head %d)\n\n%s\n",
		nested(o).heading(1), serial, sp.HeadSerial, strings.Join(lines, "\n"))
}

// classSymbol is a since-plan class's mark: "=" independent, "~" plan
// input changed, "!" planned target changed.
func classSymbol(c engine.SincePlanClass) string {
	switch c {
	case engine.ClassIndependent:
		return "="
	case engine.ClassReadChanged:
		return "~"
	}
	return "!"
}

// applyStatus is an apply run's status in the summary table, and the
// icon of its section.
func applyStatus(s engine.RunStatus) (status, icon string) {
	switch s {
	case engine.StatusApplied:
		return "✅ applied", "✅"
	case engine.StatusRefused:
		return "⛔ refused", "⛔"
	case engine.StatusWaiting, engine.StatusApplying:
		return "⏳ " + string(s), "⏳"
	}
	return "❌ " + string(s), "❌"
}

// matchWord says whether a commit matched its plan: "exact" or
// "deviation".
func matchWord(p engine.Provenance) string {
	if p.Exact {
		return "exact"
	}
	return "deviation"
}

// runURLOf is o.RunURL(id), or "" without one.
func runURLOf(id string, o Options) string {
	if o.RunURL == nil {
		return ""
	}
	return o.RunURL(id)
}

// runLink is a run id as code, linked when o.RunURL gives it a URL.
func runLink(id string, o Options) string {
	if u := runURLOf(id, o); u != "" {
		return "[`" + id + "`](" + u + ")"
	}
	return "`" + id + "`"
}

// prLink is "owner/name#N", linked to the pull request when its URL is
// known.
func prLink(p *engine.PullRequest) string {
	if p.URL != "" {
		return "[" + p.String() + "](" + p.URL + ")"
	}
	return p.String()
}

// withoutMarkers drops a view's layout markers (Truncate's): a view nested
// under a project's heading leaves them to the comment, which has its own.
func withoutMarkers(md string) string {
	var out strings.Builder
	for _, l := range strings.SplitAfter(md, "\n") {
		if !strings.HasPrefix(l, "<!-- kilolock:") {
			out.WriteString(l)
		}
	}
	return out.String()
}
