package queue

import (
	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
)

// PlanState is where a queued pull request's plan of a project stands.
type PlanState int

// Plan states.
const (
	PlanNone    PlanState = iota // no open plan of the pull request's head
	PlanOpen                     // open: may be applied
	PlanApplied                  // applied already
)

// Plan is what the judgement of a merge group knows of one project of a
// pull request: klbot reads it from its project rows and the engine, kl
// from the store (kl github check).
type Plan struct {
	Project, State, PlanRun string
	OnMerge                 bool // the plan is applied when its pull request merges (klbot: apply_trigger: merge)
	MergeQueue              bool // judged at all (klbot: kl.yaml merge_queue, read from the base, ADR 0040)
	// Strict: its merge-time apply refuses a changed plan input instead of
	// re-planning (kl apply --strict-since-plan): reading what a plan
	// ahead writes fails it even when it applies on merge.
	Strict    bool
	St        PlanState
	Footprint engine.Footprint // PlanOpen: the plan's
	SincePlan engine.SincePlan // PlanOpen: the versions since the plan, against the state's head
	FencedBy  []string         // PlanOpen: the crashed applies whose fences meet it (StaleOrFenced)
}

// PR is a pull request of a merge group, in queue order; Problem, when
// set, is why it cannot be judged (closed, into another branch): it
// fails.
type PR struct {
	Number  int
	Head    string
	Problem string
	Plans   []Plan
}

// aheadWrite is the write set of a plan of a pull request ahead in the
// group that applies on merge.
type aheadWrite struct {
	pr    int
	write engine.AddressSet
}

// Judge judges a merge group's pull requests in queue order (ADR 0058):
// each open plan against the state's head (its since-plan: a
// write-changed version makes it stale) and against the write sets of the
// plans ahead of it that apply on merge (classified as since-plan
// classifies versions: overlapping its write set is "planned target
// changed", its read set "plan input changed"). A plan fails when a plan
// ahead writes what it writes; when one ahead writes what it reads it
// passes only if it applies on merge (the merge-time applies then run in
// queue order, each under the re-plan rule, ADR 0039) and is not Strict. A plan that does
// not apply on merge must be applied before its pull request merges.
// Plans with MergeQueue false are not judged, but their writes count for
// those behind them. The result holds one QueuePR per pull request, in
// the order of prs.
func Judge(prs []PR) []report.QueuePR {
	ahead := map[string][]aheadWrite{} // by state
	out := make([]report.QueuePR, 0, len(prs))
	for _, pr := range prs {
		q := report.QueuePR{Number: pr.Number, HeadSHA: pr.Head, Problem: pr.Problem}
		for _, p := range pr.Plans {
			q.Projects = append(q.Projects, judgePlan(p, ahead[p.State]))
		}
		for _, p := range pr.Plans {
			if p.St == PlanOpen && p.OnMerge {
				ahead[p.State] = append(ahead[p.State], aheadWrite{pr: pr.Number, write: p.Footprint.Write})
			}
		}
		out = append(out, q)
	}
	return out
}

// judgePlan is the verdict of plan p given the writes ahead of it on its
// state.
func judgePlan(p Plan, ahead []aheadWrite) report.QueueProject {
	qp := report.QueueProject{Project: p.Project, State: p.State, PlanRun: p.PlanRun, OnMerge: p.OnMerge}
	switch p.St {
	case PlanNone:
		qp.Verdict = report.QueueNoPlan
		return qp
	case PlanApplied:
		qp.Verdict = report.QueueApplied
		return qp
	}
	qp.SincePlan = p.SincePlan.Summary()
	var writeHit, readHit *report.QueueAhead
	for _, a := range ahead {
		qa := report.QueueAhead{PR: a.pr, Class: engine.ClassIndependent}
		if w := a.write.Overlapping(p.Footprint.Write); len(w) > 0 {
			qa.Class, qa.Addresses = engine.ClassWriteChanged, w.Strings()
		} else if r := a.write.Overlapping(p.Footprint.Read); len(r) > 0 {
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
	stale := p.SincePlan.Of(engine.ClassWriteChanged)
	switch {
	case !p.MergeQueue:
		qp.Verdict = report.QueueNotJudged
	case len(stale) > 0:
		qp.Verdict, qp.Stale = report.QueueStale, &stale[0]
	case len(p.FencedBy) > 0:
		qp.Verdict, qp.FencedBy = report.QueueFenced, p.FencedBy
	case writeHit != nil:
		qp.Verdict, qp.Conflict = report.QueueWriteConflict, writeHit
	case (!p.OnMerge || p.Strict) && readHit != nil:
		qp.Verdict, qp.Conflict = report.QueueReadConflict, readHit
	case !p.OnMerge:
		qp.Verdict = report.QueueNotApplied
	case readHit != nil:
		qp.Verdict, qp.Conflict = report.QueueReadAfterWrite, readHit
	default:
		qp.Verdict = report.QueueIndependent
	}
	return qp
}
