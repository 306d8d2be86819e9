package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// applyInProgress are the statuses of an apply run in progress: the "from"
// of its own updates while it reserves.
var applyInProgress = []RunStatus{StatusWaiting, StatusApplying}

// reserve acquires the reservation set all-or-none, waiting up to in.Wait.
func (a *applier) reserve(ctx context.Context) (AcquireResult, error) {
	e := a.e
	want := a.plan.Envelope.Reservations
	if e.LockMode == LockWholeState {
		want = []Reservation{{Address: AllAddresses, Mode: ModeWrite}}
	}
	if a.wait == nil {
		a.wait = &waiting{started: e.now(), firstSeen: map[string]time.Time{}}
	}
	w := a.wait
	deadline := w.started.Add(a.in.Wait)
	for {
		res, err := e.Store.Acquire(ctx, AcquireRequest{State: a.state.Name, Run: a.run.ID, Holder: e.Holder, Reservations: want, Lease: e.lease()})
		if err == nil {
			return res, a.reserved(ctx, res, *w)
		}
		var ce *ConflictError
		if !errors.As(err, &ce) {
			err = leaseLost(a.run.ID, err)
			return AcquireResult{}, a.fail(ctx, StatusPlanned, Failed(StepAcquire, err), fmt.Errorf("acquiring reservations for run %s: %w", a.run.ID, err))
		}
		e.nameBlockers(ctx, ce.Blockers)
		fresh := a.blockedBy(ce, w)
		if fenced(ce.Blockers) {
			// No wait frees a fence: only a recovery or an unfence of the
			// dead run does (ADR 0035).
			return AcquireResult{}, a.fail(ctx, StatusPlanned, &End{Cause: CauseRefusedFenced, Blockers: ce.Blockers},
				fmt.Errorf("run %s: %w", a.run.ID, &FencedError{ce}), fresh...)
		}
		if a.in.Wait <= 0 || !e.now().Before(deadline) {
			end := &End{Cause: CauseRefusedConflict, Blockers: ce.Blockers}
			if w.waited {
				end.Waited = Duration(e.now().Sub(w.started).Round(100 * time.Millisecond))
			}
			return AcquireResult{}, a.fail(ctx, StatusPlanned, end, fmt.Errorf("run %s: %w", a.run.ID, ce), fresh...)
		}
		if a.in.Park {
			return AcquireResult{}, a.park(ctx, ce, fresh, deadline)
		}
		if err := a.recordWait(ctx, ce, fresh); err != nil {
			return AcquireResult{}, err
		}
		w.waited = true
		t := time.NewTimer(e.poll())
		select {
		case <-ctx.Done():
			t.Stop()
			return AcquireResult{}, a.fail(ctx, StatusPlanned, &End{Cause: CauseInterrupted, Phase: PhaseWaiting},
				fmt.Errorf("run %s waiting for reservations: %w", a.run.ID, ctx.Err()))
		case <-t.C:
		}
	}
}

// waiting is what reserve knows of its wait: when it began, whether it
// waited at all, and when it first saw each blocking run.
type waiting struct {
	started   time.Time
	waited    bool
	firstSeen map[string]time.Time
}

// reserved records the reservations just acquired (res): the "reserved"
// marker (with how long it waited) and how long it waited for each run,
// and the run applying — it holds its reservations and waits on nobody
// now (not "waiting", which Status and Why would report through the
// preflight and re-plan).
func (a *applier) reserved(ctx context.Context, res AcquireResult, w waiting) error {
	e := a.e
	if a.ka != nil {
		a.ka.reservations(a.run.ID) // renewed from now on
	}
	m := Marker{Kind: MarkerReserved, Count: len(res.Held), Addresses: reservedAddresses(res.Held)}
	if w.waited {
		now := e.now()
		m.Waited = Duration(now.Sub(w.started))
		for i := range a.facts {
			if f := &a.facts[i]; f.Kind == FactWaitedFor {
				f.Waited = Duration(now.Sub(w.firstSeen[f.Run]))
				if o, err := e.Store.GetRun(ctx, f.Run); err == nil && !o.InProgress() {
					f.OtherEnd = o.End // released after its end, or its lease ran out
				}
			}
		}
	}
	if _, err := e.Store.UpdateRun(ctx, a.run.ID, applyInProgress, func(r *Run) error {
		r.Status = StatusApplying
		r.End = nil
		return nil
	}, m); err != nil {
		err = leaseLost(a.run.ID, err)
		return a.fail(ctx, StatusPlanned, Failed(StepRecordReservations, err), fmt.Errorf("recording reservations of run %s: %w", a.run.ID, err))
	}
	if a.in.OnReserved != nil {
		a.in.OnReserved(a.run.ID)
	}
	return nil
}

// blockedBy returns a "waited" marker for each blocker of ce not seen
// before, and records a waited-for fact for it: who, which PR, which
// addresses — each once.
func (a *applier) blockedBy(ce *ConflictError, w *waiting) []Marker {
	var fresh []Marker
	for _, b := range ce.Blockers {
		if _, ok := w.firstSeen[b.Run]; ok {
			continue
		}
		w.firstSeen[b.Run] = a.e.now()
		fresh = append(fresh, Marker{Kind: MarkerWaited, Other: b.Run, OtherPR: b.PR, Addresses: b.Addresses})
		a.facts = append(a.facts, Fact{Kind: FactWaitedFor, Run: b.Run, PR: b.PR, Addresses: b.Addresses})
	}
	return fresh
}

// recordWait stores that the run waits on ce's blockers when some are new
// (fresh markers), and tells the caller (ApplyInput.OnWait).
func (a *applier) recordWait(ctx context.Context, ce *ConflictError, fresh []Marker) error {
	if len(fresh) == 0 {
		return nil
	}
	if _, err := a.e.Store.UpdateRun(ctx, a.run.ID, applyInProgress, func(r *Run) error {
		r.Status = StatusWaiting
		r.End = &End{Cause: CauseWaiting, Blockers: ce.Blockers}
		return nil
	}, fresh...); err != nil {
		err = leaseLost(a.run.ID, err)
		return a.fail(ctx, StatusPlanned, Failed(StepRecordWait, err), fmt.Errorf("recording wait of run %s: %w", a.run.ID, err))
	}
	if a.in.OnWait != nil {
		a.in.OnWait(ce.Blockers)
	}
	return nil
}

// fenced reports whether any of blockers is fenced (Blocker.Fenced).
func fenced(blockers []Blocker) bool {
	for _, b := range blockers {
		if b.Fenced {
			return true
		}
	}
	return false
}
