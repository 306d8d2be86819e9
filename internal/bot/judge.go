package bot

import (
	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
)

// planState is where a queued pull request's plan of a project stands.
type planState int

const (
	planNone    planState = iota // no plan of the pull request's head
	planOpen                     // open: may be applied
	planApplied                  // applied already
)

// queuedPlan is what the judgement of a merge group knows of one project
// of a pull request: its plan, read from the engine (Bot.queuedPlans).
type queuedPlan struct {
	project, state, planRun string
	onMerge                 bool // apply_trigger: merge
	mergeQueue              bool // kl.yaml merge_queue, read from the base (ADR 0040)
	st                      planState
	footprint               engine.Footprint
	sincePlan               engine.SincePlan
	fencedBy                []string
}

// queuedPR is a pull request of a merge group, in queue order.
type queuedPR struct {
	number  int
	head    string
	problem string
	plans   []queuedPlan
}

// aheadWrite is the write set of a plan of a pull request ahead in the
// group that applies on merge.
type aheadWrite struct {
	pr    int
	write engine.AddressSet
}

// judge judges a merge group's pull requests in queue order (ADR 0058):
// each open plan against the state's head (its since-plan: a
// write-changed version makes it stale) and against the write sets of the
// plans ahead of it that apply on merge (classified as since-plan
// classifies versions: overlapping its write set is "planned target
// changed", its read set "plan input changed"). A plan fails when a plan
// ahead writes what it writes; when one ahead writes what it reads it
// passes only if it applies on merge (the merge-time applies then run in
// queue order, each under the re-plan rule, ADR 0039). A plan of
// apply_trigger comment must be applied before its pull request merges
// (else the merge closes it unapplied). Plans of projects whose
// merge_queue is false are not judged, but their writes count for those
// behind them.
func judge(prs []queuedPR) []report.QueuePR {
	ahead := map[string][]aheadWrite{} // by state
	out := make([]report.QueuePR, 0, len(prs))
	for _, pr := range prs {
		q := report.QueuePR{Number: pr.number, HeadSHA: pr.head, Problem: pr.problem}
		for _, p := range pr.plans {
			q.Projects = append(q.Projects, judgePlan(p, ahead[p.state]))
		}
		for _, p := range pr.plans {
			if p.st == planOpen && p.onMerge {
				ahead[p.state] = append(ahead[p.state], aheadWrite{pr: pr.number, write: p.footprint.Write})
			}
		}
		out = append(out, q)
	}
	return out
}

// judgePlan is the verdict of plan p given the writes ahead of it on its
// state.
func judgePlan(p queuedPlan, ahead []aheadWrite) report.QueueProject {
	qp := report.QueueProject{Project: p.project, State: p.state, PlanRun: p.planRun, OnMerge: p.onMerge}
	switch p.st {
	case planNone:
		qp.Verdict = report.QueueNoPlan
		return qp
	case planApplied:
		qp.Verdict = report.QueueApplied
		return qp
	}
	qp.SincePlan = p.sincePlan.Summary()
	var writeHit, readHit *report.QueueAhead
	for _, a := range ahead {
		qa := report.QueueAhead{PR: a.pr, Class: engine.ClassIndependent}
		if w := a.write.Overlapping(p.footprint.Write); len(w) > 0 {
			qa.Class, qa.Addresses = engine.ClassWriteChanged, w.Strings()
		} else if r := a.write.Overlapping(p.footprint.Read); len(r) > 0 {
			qa.Class, qa.Addresses = engine.ClassReadChanged, r.Strings()
		}
		qp.Ahead = append(qp.Ahead, qa)
		switch {
		case qa.Class == engine.ClassWriteChanged && writeHit == nil:
			writeHit = &qp.Ahead[len(qp.Ahead)-1]
		case qa.Class == engine.ClassReadChanged && readHit == nil:
			readHit = &qp.Ahead[len(qp.Ahead)-1]
		}
	}
	stale := p.sincePlan.Of(engine.ClassWriteChanged)
	switch {
	case !p.mergeQueue:
		qp.Verdict = report.QueueNotJudged
	case len(stale) > 0:
		qp.Verdict, qp.Stale = report.QueueStale, &stale[0]
	case len(p.fencedBy) > 0:
		qp.Verdict, qp.FencedBy = report.QueueFenced, p.fencedBy
	case writeHit != nil:
		qp.Verdict, qp.Conflict = report.QueueWriteConflict, writeHit
	case !p.onMerge && readHit != nil:
		qp.Verdict, qp.Conflict = report.QueueReadConflict, readHit
	case !p.onMerge:
		qp.Verdict = report.QueueNotApplied
	case readHit != nil:
		qp.Verdict, qp.Conflict = report.QueueReadAfterWrite, readHit
	default:
		qp.Verdict = report.QueueIndependent
	}
	return qp
}
