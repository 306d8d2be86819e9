package engine

import (
	"context"
	"time"
)

// What the views add to runs that are, or name, backend locks (ADR 0056):
// Run.Backend, Blocker.Backend and SincePlanEntry.Backend are not stored
// with the runs that name them (a new field there would be dropped by an
// older binary rewriting the row, ADR 0048 rule 2): they are read from
// the backend lock's "backend-lock" marker and the versions' provenance
// when a run is read or a refusal made.

// nameBlockers sets Backend and BackendSince of each blocker in bs that
// is a backend lock, and its Actor when unset. A failure to read a run
// leaves its blocker as it was (logged): a refusal still names the run.
func (e *Engine) nameBlockers(ctx context.Context, bs []Blocker) {
	for i := range bs {
		if bs[i].Backend != nil {
			continue
		}
		l, err := e.lockOf(ctx, bs[i].Run)
		if err != nil {
			e.log().Warn("reading a blocking run", "run", bs[i].Run, "err", err)
			continue
		}
		if l == nil {
			if bs[i].Actor == "" {
				if r, err := e.Store.GetRun(ctx, bs[i].Run); err == nil {
					bs[i].Actor = r.Actor
				}
			}
			continue
		}
		info := l.info
		bs[i].Backend, bs[i].BackendSince = &info, lockSince(l)
		if bs[i].Actor == "" {
			bs[i].Actor = l.run.Actor
		}
	}
}

// lockSince is when lock l was taken: Terraform's Created, else its run's.
func lockSince(l *heldLock) time.Time {
	if !l.info.Created.IsZero() {
		return l.info.Created.UTC()
	}
	return l.run.CreatedAt
}

// annotate adds to run r, read by a view, what the store does not keep
// with it: its own LockInfo (a backend lock), its blockers' and its
// since-plan entries' backend facts.
func (e *Engine) annotate(ctx context.Context, r *Run) {
	if r.Kind == KindApply && r.PlanRun == "" && r.Backend == nil {
		if l, err := e.lockOf(ctx, r.ID); err == nil && l != nil {
			r.Backend = l.run.Backend
		}
	}
	if r.End != nil {
		e.nameBlockers(ctx, r.End.Blockers)
		e.nameStale(ctx, r.State, r.End.Stale)
	}
	if r.SincePlan != nil {
		e.nameStale(ctx, r.State, r.SincePlan.Entries)
	}
}

// nameStale sets Backend of each push entry of es (state's versions)
// from its version's provenance.
func (e *Engine) nameStale(ctx context.Context, state string, es []SincePlanEntry) {
	for i := range es {
		if es[i].Mode != CommitPush || es[i].Backend != "" {
			continue
		}
		v, err := e.Store.GetVersion(ctx, state, es[i].Serial)
		if err == nil && v.Provenance.Backend != nil {
			es[i].Backend = v.Provenance.Backend.Operation
		}
	}
}
