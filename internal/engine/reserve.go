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
	started := e.now()
	deadline := started.Add(a.in.Wait)
	firstSeen := map[string]time.Time{}
	waited := false
	for {
		res, err := e.Store.Acquire(ctx, AcquireRequest{State: a.state.Name, Run: a.run.ID, Holder: e.Holder, Reservations: want, Lease: e.lease()})
		if err == nil {
			if a.ka != nil {
				a.ka.reservations(a.run.ID) // renewed from now on
			}
			m := Marker{Kind: MarkerReserved, Count: len(res.Held), Addresses: reservedAddresses(res.Held)}
			if waited {
				now := e.now()
				m.Waited = Duration(now.Sub(started))
				for i := range a.facts {
					if f := &a.facts[i]; f.Kind == FactWaitedFor {
						f.Waited = Duration(now.Sub(firstSeen[f.Run]))
					}
				}
			}
			// It holds its reservations and waits on nobody now: applying
			// (not "waiting", which Status and Why would report through the
			// preflight and re-plan).
			if _, err := e.Store.UpdateRun(ctx, a.run.ID, applyInProgress, func(r *Run) error {
				r.Status = StatusApplying
				r.End = nil
				return nil
			}, m); err != nil {
				err = leaseLost(a.run.ID, err)
				return AcquireResult{}, a.fail(ctx, StatusPlanned, Failed(StepRecordReservations, err), fmt.Errorf("recording reservations of run %s: %w", a.run.ID, err))
			}
			return res, nil
		}
		var ce *ConflictError
		if !errors.As(err, &ce) {
			err = leaseLost(a.run.ID, err)
			return AcquireResult{}, a.fail(ctx, StatusPlanned, Failed(StepAcquire, err), fmt.Errorf("acquiring reservations for run %s: %w", a.run.ID, err))
		}
		// Record each newly seen blocker once: who, which PR, which addresses.
		var fresh []Marker
		for _, b := range ce.Blockers {
			if _, ok := firstSeen[b.Run]; ok {
				continue
			}
			firstSeen[b.Run] = e.now()
			fresh = append(fresh, Marker{Kind: MarkerWaited, Other: b.Run, OtherPR: b.PR, Addresses: b.Addresses})
			a.facts = append(a.facts, Fact{Kind: FactWaitedFor, Run: b.Run, PR: b.PR, Addresses: b.Addresses})
		}
		if a.in.Wait <= 0 || !e.now().Before(deadline) {
			end := &End{Cause: CauseRefusedConflict, Blockers: ce.Blockers}
			if waited {
				end.Waited = Duration(e.now().Sub(started).Round(100 * time.Millisecond))
			}
			return AcquireResult{}, a.fail(ctx, StatusPlanned, end, fmt.Errorf("run %s: %w", a.run.ID, ce), fresh...)
		}
		if len(fresh) > 0 {
			if _, err := e.Store.UpdateRun(ctx, a.run.ID, applyInProgress, func(r *Run) error {
				r.Status = StatusWaiting
				r.End = &End{Cause: CauseWaiting, Blockers: ce.Blockers}
				return nil
			}, fresh...); err != nil {
				err = leaseLost(a.run.ID, err)
				return AcquireResult{}, a.fail(ctx, StatusPlanned, Failed(StepRecordWait, err), fmt.Errorf("recording wait of run %s: %w", a.run.ID, err))
			}
			if a.in.OnWait != nil {
				a.in.OnWait(ce.Blockers)
			}
		}
		waited = true
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
