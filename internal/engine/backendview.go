package engine

import (
	"context"
	"time"
)

// LockFacts are what the views say of a backend lock's run beyond its
// LockInfo (Run.Lock, Blocker.Lock), read from its markers; never stored.
type LockFacts struct {
	// Mode is the lock's reservation mode: ModeRead for Terraform's
	// OperationTypePlan, ModeWrite otherwise (ADR 0056 decision 2).
	Mode ReservationMode
	// Writes is how many POSTs it stored as checkpoints ("backend-write"
	// markers); Refused the POSTs refused under it ("backend-refused"
	// markers, in order), which Terraform showed only as "HTTP error: 409".
	Writes  int
	Refused []Marker
	// Unlocked is its "unlocked" marker (who unlocked it, forced or not):
	// nil while it holds, or when its lease ran out without an UNLOCK.
	Unlocked *Marker
	// LeaseExpired is its "lease-expired" marker: its lease
	// (KL_BACKEND_LOCK_TTL, never renewed) ran out before an UNLOCK.
	LeaseExpired *Marker
}

// Read reports whether the lock is a read lock (`terraform plan`).
func (f *LockFacts) Read() bool { return f != nil && f.Mode == ModeRead }

// lockFacts reads a backend lock's facts from its markers ms.
func lockFacts(ms []Marker) *LockFacts {
	m := BackendLockOf(ms)
	if m == nil {
		return nil
	}
	f := &LockFacts{Mode: ReservationMode(m.Extra["mode"])}
	for i := range ms {
		switch ms[i].Kind {
		case MarkerBackendWrite:
			f.Writes++
		case MarkerBackendRefused:
			f.Refused = append(f.Refused, ms[i])
		case MarkerUnlocked:
			if f.Unlocked == nil {
				f.Unlocked = &ms[i]
			}
		case MarkerLeaseExpired:
			if f.LeaseExpired == nil {
				f.LeaseExpired = &ms[i]
			}
		}
	}
	return f
}

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
		bs[i].Backend, bs[i].BackendSince, bs[i].Lock = &info, lockSince(l), lockFacts(l.ms)
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
	if r.Backend != nil && r.Lock == nil {
		if ms, err := e.Store.Markers(ctx, r.ID); err == nil {
			r.Lock = lockFacts(ms)
		}
	}
	for i := range r.AllowedBecause {
		f := &r.AllowedBecause[i]
		if f.Kind != FactWaitedFor || f.Run == "" || f.Backend != nil {
			continue
		}
		if l, err := e.lockOf(ctx, f.Run); err == nil && l != nil {
			info := l.info
			f.Backend, f.Actor = &info, l.run.Actor
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

// annotateMarkers annotates the ends markers ms (of state) carry, as
// annotate does a run's, and names the backend lock a "waited" marker
// waited on (OtherBackend, OtherActor).
func (e *Engine) annotateMarkers(ctx context.Context, state string, ms []Marker) {
	locks := map[string]*heldLock{}
	for i := range ms {
		if ms[i].Kind == MarkerWaited && ms[i].Other != "" && ms[i].OtherBackend == nil {
			l, ok := locks[ms[i].Other]
			if !ok {
				var err error
				if l, err = e.lockOf(ctx, ms[i].Other); err != nil {
					e.log().Warn("reading a run waited on", "run", ms[i].Other, "err", err)
				}
				locks[ms[i].Other] = l
			}
			if l != nil {
				info := l.info
				ms[i].OtherBackend, ms[i].OtherActor = &info, l.run.Actor
			}
		}
		if ms[i].End != nil {
			e.nameBlockers(ctx, ms[i].End.Blockers)
			e.nameStale(ctx, state, ms[i].End.Stale)
		}
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
