package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// Reservations are rows; the state lock (Executor.LockState) is the guard.
// Acquire locks the state before it reads anything, then reads the live
// reservations of the state and inserts its own in the same transaction.
// Every other Acquire on the state — in any process, on any connection —
// waits on that lock and afterwards sees the rows the previous holder
// inserted, so no conflicting pair can be held at once (docs/design.md apply
// step 2).
//
// Only Acquire adds reservations. Renew extends a reservation only while it
// is live (Executor.RenewReservations): it never brings back one that an
// Acquire has already treated as lapsed. The lease sweep deletes a lapsed
// row before any check reads the state's reservations.

// Acquire is engine.Store.Acquire over a.DB: it takes all of
// req.Reservations for req.Run on req.State, or none (ADR D2, docs/design.md
// apply step 2). In one transaction it locks the state, reads the clock,
// runs the lease sweep (sweep; it also locks req.Run), then checks the
// request against the live reservations of other runs with
// engine.Conflicts: read/read coexist, write conflicts with any
// overlapping address, prefixes and "*" included. On conflict it returns a
// *engine.ConflictError naming each blocking run with its actor, PR and
// the blocked addresses (the lease sweep still commits). Otherwise it
// stores the request (Wanted) — a run re-acquiring an (address, mode) it
// holds replaces that row, with a fresh lease — and returns every
// reservation of the run on the state (Held) and those of other runs
// (Others). A run that is not open — it finished, or the sweep just ended
// it — takes nothing: a *engine.StatusError (AcquireAllowed; the sweep
// still commits). ErrNotFound for an unknown state or run; ErrInvalid for a
// malformed request (CheckAcquire).
func (a Algorithms) Acquire(ctx context.Context, req engine.AcquireRequest) (engine.AcquireResult, error) {
	db := a.DB
	if err := CheckAcquire(req); err != nil {
		return engine.AcquireResult{}, fmt.Errorf("acquiring reservations for run %s: %w", req.Run, err)
	}
	var out engine.AcquireResult
	var conflict *engine.ConflictError
	var refused error
	err := db.InTx(ctx, func(tx Executor) error {
		out, conflict, refused = engine.AcquireResult{}, nil, nil
		if _, err := tx.LockState(ctx, req.State); err != nil {
			return fmt.Errorf("state %s: %w", req.State, err)
		}
		now, err := tx.Now(ctx)
		if err != nil {
			return err
		}
		// The sweep locks req.Run with the runs it sweeps (one lock order;
		// an unknown run is skipped there and not found just below).
		if _, err := sweep(ctx, tx, now, req.Run); err != nil {
			return err
		}
		run, err := tx.GetRun(ctx, req.Run)
		if err != nil {
			return fmt.Errorf("run %s: %w", req.Run, err)
		}
		if err := AcquireAllowed(run); err != nil {
			refused = err
			return nil // commit the lease sweep
		}
		held, err := tx.LiveReservations(ctx, req.State, now)
		if err != nil {
			return err
		}
		want := Wanted(req, now)
		if blockers := engine.Conflicts(req.Run, want, held); len(blockers) > 0 {
			if err := describeBlockers(ctx, tx, blockers); err != nil {
				return err
			}
			conflict = &engine.ConflictError{State: req.State, Run: req.Run, Blockers: blockers}
			return nil // commit the lease sweep
		}
		if len(want) > 0 {
			if err := tx.InsertReservations(ctx, want); err != nil {
				return err
			}
		}
		all, err := tx.LiveReservations(ctx, req.State, now)
		if err != nil {
			return err
		}
		out = engine.AcquireResult{Held: []engine.Reservation{}, Others: []engine.Reservation{}}
		for _, r := range all {
			if r.Run == req.Run {
				out.Held = append(out.Held, r)
			} else {
				out.Others = append(out.Others, r)
			}
		}
		return nil
	})
	if err != nil {
		return engine.AcquireResult{}, fmt.Errorf("acquiring reservations for run %s: %w", req.Run, err)
	}
	if refused != nil {
		return engine.AcquireResult{}, fmt.Errorf("acquiring reservations for run %s: %w", req.Run, refused)
	}
	if conflict != nil {
		return engine.AcquireResult{}, conflict
	}
	return out, nil
}

// describeBlockers fills each blocker's actor and PR from its run (docs/style.md
// 8: a refusal names the holding run, its PR and the addresses), and for a
// fenced one when its Terraform started (ADR 0035).
func describeBlockers(ctx context.Context, tx Executor, blockers []engine.Blocker) error {
	for i := range blockers {
		b := &blockers[i]
		r, err := tx.GetRun(ctx, b.Run)
		if err != nil {
			return fmt.Errorf("reading blocking run %s: %w", b.Run, err)
		}
		b.Actor, b.PR = r.Actor, r.PR
		if b.Fenced {
			at, _, err := tx.FirstMarkerAt(ctx, b.Run, engine.MarkerApplyStarted)
			if err != nil {
				return fmt.Errorf("reading markers of blocking run %s: %w", b.Run, err)
			}
			b.TerraformStarted = at.UTC()
		}
	}
	return nil
}

// Reservations is engine.Store.Reservations over a.DB: the reservations of
// state (every state if "") live at the store clock's now, ordered by
// state, address, mode and run. It only reads: lapsed rows not yet swept
// are left out, not deleted.
func (a Algorithms) Reservations(ctx context.Context, state string) ([]engine.Reservation, error) {
	db := a.DB
	now, err := db.Now(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing reservations of state %q: %w", state, err)
	}
	out, err := db.LiveReservations(ctx, state, now)
	if err != nil {
		return nil, fmt.Errorf("listing reservations of state %q: %w", state, err)
	}
	return out, nil
}

// Renew is engine.Store.Renew over a.DB: it extends every live reservation
// of run to now+lease, in a transaction that first runs the lease sweep.
// ErrLeaseLost if the run holds none any more — they lapsed (the sweep then
// marks the run lease-expired, and commits that) or were never taken.
// ErrInvalid for a lease <= 0 (CheckLease).
func (a Algorithms) Renew(ctx context.Context, run string, lease time.Duration) error {
	db := a.DB
	if err := CheckLease(lease); err != nil {
		return fmt.Errorf("renewing reservations of run %s: %w", run, err)
	}
	var renewed int
	err := db.InTx(ctx, func(tx Executor) error {
		now, err := tx.Now(ctx)
		if err != nil {
			return err
		}
		if _, err := sweep(ctx, tx, now); err != nil {
			return err
		}
		renewed, err = tx.RenewReservations(ctx, run, now, now.Add(lease))
		return err
	})
	if err != nil {
		return fmt.Errorf("renewing reservations of run %s: %w", run, err)
	}
	if renewed == 0 {
		return engine.Errorf(engine.ErrLeaseLost, "renewing reservations of run %s: it holds none", run)
	}
	return nil
}

// Release is engine.Store.Release over a.DB: it drops every reservation of
// run held by a lease (never a fence: Executor.DeleteReservations), under
// the run's lock, and appends a "released" marker (ReleasedMarker: Count =
// reservations dropped) when it held any. Releasing nothing — or for an
// unknown run — is not an error.
func (a Algorithms) Release(ctx context.Context, run string) error {
	db := a.DB
	err := db.InTx(ctx, func(tx Executor) error {
		if _, err := tx.LockRun(ctx, run); err != nil {
			if isNotFound(err) {
				return nil
			}
			return err
		}
		n, err := tx.DeleteReservations(ctx, run)
		if err != nil || n == 0 {
			return err
		}
		now, err := tx.Now(ctx)
		if err != nil {
			return err
		}
		return appendMarkers(ctx, tx, run, now, []engine.Marker{ReleasedMarker(n, now)})
	})
	if err != nil {
		return fmt.Errorf("releasing reservations of run %s: %w", run, err)
	}
	return nil
}

// LiftFence is engine.Store.LiftFence over a.DB: under the run's lock it
// deletes run's fences (Executor.DeleteFenced), marks the run's end lifted
// (End.Lifted: its words no longer say the fence stands) and appends a
// "fence-lifted" marker (FenceLiftedMarker: LiftUnfenced, by, why). It
// returns the addresses lifted. ErrNotFound for an unknown run or one
// holding no fence; ErrInvalid for an empty by or why.
func (a Algorithms) LiftFence(ctx context.Context, run, by, why string) (engine.AddressSet, error) {
	if strings.TrimSpace(by) == "" || strings.TrimSpace(why) == "" {
		return nil, engine.Errorf(engine.ErrInvalid, "lifting the fence of run %s: who lifts it and why must both be given", run)
	}
	var lifted engine.AddressSet
	err := a.DB.InTx(ctx, func(tx Executor) error {
		lifted = nil
		r, err := tx.LockRun(ctx, run)
		if err != nil {
			return err
		}
		fences, err := tx.DeleteFenced(ctx, run)
		if err != nil {
			return err
		}
		if len(fences) == 0 {
			return engine.Errorf(engine.ErrNotFound, "run %s holds no fence", run)
		}
		now, err := tx.Now(ctx)
		if err != nil {
			return err
		}
		if r.End != nil && len(r.End.Fenced) > 0 {
			e := *r.End
			e.Lifted = engine.LiftUnfenced // the end no longer says the fence stands
			r.End = &e
			if err := tx.SaveRun(ctx, r); err != nil {
				return err
			}
		}
		lifted = reservedAddresses(fences)
		return appendMarkers(ctx, tx, run, now, []engine.Marker{FenceLiftedMarker(fences, engine.LiftUnfenced, by, why, now)})
	})
	if err != nil {
		return nil, fmt.Errorf("lifting the fence of run %s: %w", run, err)
	}
	return lifted, nil
}
