package report

import (
	"fmt"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// MergeGroup is the `kl` check run of a merge group of GitHub's merge
// queue (ADR 0058): its pull requests in queue order (the first merges
// first), each judged against the state's head and against the write sets
// of the pull requests ahead of it in the group. The group passes when
// every pull request passes.
type MergeGroup struct {
	HeadSHA string
	BaseRef string // the branch the group merges into, e.g. main
	PRs     []QueuePR
	// Problem, when set, is why the group's pull requests could not be
	// found: the group fails.
	Problem string
	// Destroyed is GitHub's reason (merged, dequeued, invalidated) when
	// the group was destroyed before klbot judged it: the check run is
	// completed, judging nothing.
	Destroyed string
	// Workflow: kl judged the group in a workflow (kl github check, ADR
	// 0060), not klbot: the words name kl, and the hints name workflow
	// steps and kl commands instead of klbot's /kl comments.
	Workflow bool
}

// QueuePR is one pull request of a merge group.
type QueuePR struct {
	Number   int
	HeadSHA  string
	Projects []QueueProject
	// Problem is why the pull request cannot be judged (it is closed, its
	// head is not the commit the group holds, …): it fails.
	Problem string
}

// QueueVerdict is why a project of a pull request in a merge group passes
// or fails.
type QueueVerdict string

// Queue verdicts. QueueApplied, QueueIndependent, QueueReadAfterWrite and
// QueueNotJudged pass; the others fail.
const (
	QueueApplied        QueueVerdict = "applied"          // its plan is applied already
	QueueIndependent    QueueVerdict = "independent"      // applies on merge; nothing ahead or since touches its footprint's writes
	QueueReadAfterWrite QueueVerdict = "read-after-write" // applies on merge after the PR ahead whose writes it reads (the re-plan rule)
	QueueNotJudged      QueueVerdict = "not-judged"       // kl.yaml merge_queue: false
	QueueNoPlan         QueueVerdict = "no-plan"          // no open plan of the pull request's head
	QueueNotApplied     QueueVerdict = "not-applied"      // apply_trigger: comment, not applied: the merge would close it unapplied
	QueueStale          QueueVerdict = "stale"            // a version since its plan changed its planned target
	QueueFenced         QueueVerdict = "fenced"           // a crashed apply's fence meets it
	QueueWriteConflict  QueueVerdict = "write-conflict"   // a pull request ahead writes what it writes
	QueueReadConflict   QueueVerdict = "read-conflict"    // a pull request ahead writes what it reads, and it does not apply on merge
)

// Passes reports whether the verdict lets the pull request pass.
func (v QueueVerdict) Passes() bool {
	switch v {
	case QueueApplied, QueueIndependent, QueueReadAfterWrite, QueueNotJudged:
		return true
	}
	return false
}

// QueueProject is one project of a pull request in a merge group.
type QueueProject struct {
	Project, State string
	PlanRun        string
	OnMerge        bool // apply_trigger: merge
	Verdict        QueueVerdict
	// SincePlan counts the versions of the state after the plan's source
	// serial by class (the state's head); Stale is the first that changed
	// the planned target (QueueStale).
	SincePlan engine.SincePlanSummary
	Stale     *engine.SincePlanEntry
	FencedBy  []string
	// Ahead classifies the plan against each pull request ahead in the
	// group whose plan of the same state applies on merge, in queue order;
	// Conflict is the one its verdict names (QueueWriteConflict,
	// QueueReadConflict, QueueReadAfterWrite).
	Ahead    []QueueAhead
	Conflict *QueueAhead
}

// QueueAhead is a plan classified against the write set of a pull request
// ahead of it in the group, with the since-plan classes (ADR D3): the
// addresses of that write set that its write set (write-changed) or its
// read set (read-changed) overlaps.
type QueueAhead struct {
	PR        int
	Class     engine.SincePlanClass
	Addresses []string
}

// OK reports whether the group passes.
func (g MergeGroup) OK() bool {
	if g.Problem != "" {
		return false
	}
	for _, p := range g.PRs {
		if !p.passes() {
			return false
		}
	}
	return true
}

func (p QueuePR) passes() bool {
	if p.Problem != "" {
		return false
	}
	for _, pp := range p.Projects {
		if !pp.Verdict.Passes() {
			return false
		}
	}
	return true
}

// Title is the group's `kl` check-run title.
func (g MergeGroup) Title() string {
	switch {
	case g.Destroyed != "":
		return "Merge group " + g.Destroyed + " before it was judged"
	case g.Problem != "":
		return "Merge group not judged: " + g.Problem
	}
	var bad []string
	for _, p := range g.PRs {
		if !p.passes() {
			bad = append(bad, fmt.Sprintf("#%d", p.Number))
		}
	}
	if len(bad) > 0 {
		return "Merge group fails: " + strings.Join(bad, ", ")
	}
	return fmt.Sprintf("Merge group passes: %s", plural(len(g.PRs), "pull request", "pull requests"))
}

func (g MergeGroup) markdown(o Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s%s\n\n", o.heading(0), g.Title())
	switch {
	case g.Destroyed != "" && g.Workflow:
		fmt.Fprintf(&b, "GitHub destroyed the merge group of commit `%s` (%s); nothing was judged.\n", shortSHA(g.HeadSHA), g.Destroyed)
		return b.String()
	case g.Destroyed != "":
		fmt.Fprintf(&b, "GitHub destroyed the merge group of commit `%s` (%s) before klbot judged it; nothing was judged.\n", shortSHA(g.HeadSHA), g.Destroyed)
		return b.String()
	case g.Problem != "":
		who := "klbot"
		if g.Workflow {
			who = "kl"
		}
		fmt.Fprintf(&b, "%s could not tell which pull requests the merge group of commit `%s` holds: %s. Nothing may merge that %s did not judge.\n", who, shortSHA(g.HeadSHA), g.Problem, who)
		return b.String()
	}
	fmt.Fprintf(&b, "The merge group of commit `%s` into `%s`, in queue order (the first merges first). Each plan is judged against the state's head and against the write sets of the pull requests ahead of it.\n\n", shortSHA(g.HeadSHA), g.BaseRef)
	for i, p := range g.PRs {
		mark := "✅"
		if !p.passes() {
			mark = "⛔"
		}
		fmt.Fprintf(&b, "%s%s %d. #%d at `%s`\n\n", o.heading(1), mark, i+1, p.Number, shortSHA(p.HeadSHA))
		if p.Problem != "" {
			fmt.Fprintf(&b, "%s.\n\n", upperFirst(p.Problem))
			continue
		}
		if len(p.Projects) == 0 && g.Workflow {
			b.WriteString("The store holds no plan of this commit: it touches no project kl planned, so nothing to judge.\n\n")
			continue
		}
		if len(p.Projects) == 0 {
			b.WriteString("Touches no project: nothing to judge.\n\n")
			continue
		}
		for _, pp := range p.Projects {
			b.WriteString(pp.markdown(g.Workflow))
		}
		b.WriteString("\n")
	}
	if g.Workflow {
		b.WriteString("A pull request that fails leaves the queue; plan it again (its pull request's plan job) once what it waits for has merged.\n")
	} else {
		b.WriteString("A pull request that fails leaves the queue; `/kl plan` on it plans again once what it waits for has merged.\n")
	}
	return b.String()
}

// markdown is project pp's item; workflow: judged by kl github check.
func (pp QueueProject) markdown(workflow bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "- `%s` (state `%s`, plan %s): %s\n", pp.Project, pp.State, codeListOr(oneOrNone(pp.PlanRun), "none"), pp.words(workflow))
	if pp.PlanRun != "" && pp.Verdict != QueueApplied && pp.Verdict != QueueNoPlan {
		s := pp.SincePlan
		fmt.Fprintf(&b, "  - since its plan (serial %d → head %d): %d independent, %d plan input changed, %d planned target changed\n",
			s.SourceSerial, s.HeadSerial, s.Independent, s.ReadChanged, s.WriteChanged)
	}
	for _, a := range pp.Ahead {
		what := ""
		if len(a.Addresses) > 0 {
			what = ": " + codeListOr(a.Addresses, "")
		}
		fmt.Fprintf(&b, "  - against #%d ahead: %s%s\n", a.PR, a.Class.Label(), what)
	}
	return b.String()
}

// words is the verdict of project pp, in a sentence; workflow: judged by
// kl github check, whose hints are a workflow's (workflowWords).
func (pp QueueProject) words(workflow bool) string {
	if w := pp.workflowWords(); workflow && w != "" {
		return w
	}
	switch pp.Verdict {
	case QueueApplied:
		return "✅ applied already"
	case QueueIndependent:
		return "✅ applies on merge; nothing ahead writes what it plans"
	case QueueReadAfterWrite:
		return fmt.Sprintf("✅ applies on merge after #%d (queue order); it reads what #%d writes, so that apply re-plans it against the new head and goes on only with its intent unchanged (else it is refused, to be planned again)", pp.Conflict.PR, pp.Conflict.PR)
	case QueueNotJudged:
		return "✅ not judged (`kl.yaml` `merge_queue: false`)"
	case QueueNoPlan:
		return "⛔ no open plan of this head; comment `/kl plan`"
	case QueueNotApplied:
		return "⛔ not applied (`apply_trigger: comment`): merging would close the plan unapplied; comment `/kl apply` before it merges"
	case QueueStale:
		by := ""
		if pp.Stale.PR != nil {
			by = " by " + pp.Stale.PR.String()
		}
		return fmt.Sprintf("⛔ stale: version %d%s changed its planned target; comment `/kl plan`", pp.Stale.Serial, by)
	case QueueFenced:
		return "⛔ fenced by the crashed apply " + codeListOr(pp.FencedBy, "") + "; see `/kl why`"
	case QueueWriteConflict:
		return fmt.Sprintf("⛔ PR #%d ahead in the queue writes %s; re-plan after it merges", pp.Conflict.PR, codeListOr(pp.Conflict.Addresses, ""))
	case QueueReadConflict:
		return fmt.Sprintf("⛔ PR #%d ahead in the queue writes %s, which this plan reads; re-plan after it merges", pp.Conflict.PR, codeListOr(pp.Conflict.Addresses, ""))
	}
	return string(pp.Verdict)
}

// workflowWords is the verdict of project pp judged in a workflow (kl
// github check), for the verdicts whose klbot words name /kl comments or
// apply_trigger; "" for the others, whose words are the same.
func (pp QueueProject) workflowWords() string {
	switch pp.Verdict {
	case QueueNoPlan:
		return "⛔ no open plan of this head in the store; plan it (its pull request's plan job)"
	case QueueNotApplied:
		return "⛔ not applied, and this check was told plans do not apply on merge (`applies-on-merge: false`): merging would leave it unapplied; apply it before it merges"
	case QueueStale:
		by := ""
		if pp.Stale.PR != nil {
			by = " by " + pp.Stale.PR.String()
		}
		return fmt.Sprintf("⛔ stale: version %d%s changed its planned target; plan it again", pp.Stale.Serial, by)
	case QueueFenced:
		return "⛔ fenced by the crashed apply " + codeListOr(pp.FencedBy, "") + "; see `kl why " + pp.PlanRun + "`"
	}
	return ""
}

// Passes reports whether pull request p passes: no problem, and every
// project's verdict passes.
func (p QueuePR) Passes() bool { return p.passes() }
