package store

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// ExpireLeases is engine.Store.ExpireLeases over a.DB: it runs the lease
// sweep (sweep) in one transaction at the store clock's now and returns the
// runs it expired, sorted. Concurrent sweeps in several processes split the
// work: each lapsed reservation is deleted, and each run expired and
// marked, once.
func (a Algorithms) ExpireLeases(ctx context.Context) ([]string, error) {
	db := a.DB
	var runs []string
	err := db.InTx(ctx, func(tx Executor) error {
		now, err := tx.Now(ctx)
		if err != nil {
			return err
		}
		runs, err = sweep(ctx, tx, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("expiring leases: %w", err)
	}
	return runs, nil
}

// sweep is the lease sweep every reservation write transaction (and
// ExpireLeases) starts with, at now:
//
//  1. find, without locks, the candidates: runs with reservations lapsed at
//     now (Executor.LapsedRuns), and runs in progress whose own lease lapsed
//     (RunLeaseLapsed, reservations not yet considered);
//  2. lock, in ONE statement and in id order, the candidates, the plans the
//     apply runs among them claimed, and the runs in lock (the caller's own
//     run: Acquire checks it after the sweep) — Executor.LockRuns; the lock
//     order, state → runs by id → reservations, holds;
//  3. delete the candidates' lapsed reservations and, per run that lost
//     some, set it lease-expired when still open (ExpireRun) and append a
//     "lease-expired" marker with the addresses (LeaseExpiredMarker);
//  4. re-read each lease candidate under its lock and, if it is still in
//     progress with a lapsed lease and no live reservation, end it
//     (ExpireRunLease) with a "lease-expired" marker;
//  5. hand back the plan each apply run ended in 3 or 4 had claimed
//     (ReleaseExpiredPlan: planned, or failed when it had reserved), and
//     name the recovery in the run's reason when Terraform had started
//     (NoteApplyStarted).
//
// Everything is decided again under the locks, so of two sweeps racing for
// one run, the second finds it done — a row the first deleted is not
// returned by DeleteLapsed, a run it ended is no longer in progress — and
// only the first reports it. It returns the runs of 3 and 4, sorted.
func sweep(ctx context.Context, tx Executor, now time.Time, lock ...string) ([]string, error) {
	lapsed, err := tx.LapsedRuns(ctx, now)
	if err != nil {
		return nil, fmt.Errorf("sweeping leases: %w", err)
	}
	inProgress, err := tx.InProgressRuns(ctx)
	if err != nil {
		return nil, fmt.Errorf("sweeping leases: %w", err)
	}
	var idle []string
	for _, r := range inProgress {
		if RunLeaseLapsed(r, false, now) {
			idle = append(idle, r.ID)
		}
	}
	sort.Strings(idle)
	if len(lapsed)+len(idle)+len(lock) == 0 {
		return nil, nil
	}
	candidates := append(append([]string{}, lapsed...), idle...)
	if err := tx.LockRuns(ctx, append(slices.Clone(candidates), lock...), candidates); err != nil {
		return nil, fmt.Errorf("sweeping leases: locking runs: %w", err)
	}
	expired := map[string]sweptRun{}
	if len(lapsed) > 0 {
		if expired, err = sweepReservations(ctx, tx, now, lapsed); err != nil {
			return nil, fmt.Errorf("sweeping leases: %w", err)
		}
	}
	for _, id := range idle {
		if _, done := expired[id]; done {
			continue
		}
		e, ok, err := sweepRun(ctx, tx, now, id)
		if err != nil {
			return nil, fmt.Errorf("sweeping leases: %w", err)
		}
		if ok {
			expired[id] = e
		}
	}
	if len(expired) == 0 {
		return nil, nil
	}
	runs := make([]string, 0, len(expired))
	for id := range expired {
		runs = append(runs, id)
	}
	sort.Strings(runs)
	for _, id := range runs {
		e := expired[id]
		if e.run == nil || e.run.Kind != engine.KindApply {
			continue
		}
		if e.run.PlanRun == "" {
			// A backend lock (ADR 0056) that wrote, or whose Terraform
			// applies: recoverable as an apply whose Terraform started.
			if err := noteStarted(ctx, tx, *e.run); err != nil {
				return nil, fmt.Errorf("sweeping leases: run %s: %w", id, err)
			}
			continue
		}
		if err := releaseExpiredPlan(ctx, tx, *e.run, e.ended, now); err != nil {
			return nil, fmt.Errorf("sweeping leases: plan of run %s: %w", id, err)
		}
	}
	return runs, nil
}

// sweptRun is one run a sweep expired: the run as it left it when the
// sweep ended it (nil when it was already closed), and when its lease ran
// out.
type sweptRun struct {
	run   *engine.Run
	ended time.Time
}

// sweepReservations is step 3 of sweep, for the runs in candidates
// (locked): the write reservations of an apply whose Terraform started and
// that has not committed become fences (fenceLapsed, ADR 0035); the rest of
// the lapsed reservations are deleted; each run that lost some is expired
// (ExpireRun) and marked (LeaseExpiredMarker).
func sweepReservations(ctx context.Context, tx Executor, now time.Time, candidates []string) (map[string]sweptRun, error) {
	fenced, started, err := fenceLapsed(ctx, tx, now, candidates)
	if err != nil {
		return nil, err
	}
	deleted, err := tx.DeleteLapsed(ctx, now, candidates)
	if err != nil {
		return nil, err
	}
	rows := deleted
	for _, fs := range fenced {
		rows = append(rows, fs...)
	}
	// In (run, address) order, so a run's holder is that of its first row
	// whatever order the adapter returned them in.
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Run != rows[j].Run {
			return rows[i].Run < rows[j].Run
		}
		return rows[i].Address < rows[j].Address
	})
	type lapsed struct {
		addrs  engine.AddressSet
		holder engine.Holder
		ended  time.Time
	}
	byRun := map[string]*lapsed{}
	var ids []string
	for _, d := range rows {
		l := byRun[d.Run]
		if l == nil {
			l = &lapsed{holder: d.Holder}
			byRun[d.Run] = l
			ids = append(ids, d.Run)
		}
		l.addrs = append(l.addrs, d.Address)
		if d.ExpiresAt.After(l.ended) {
			l.ended = d.ExpiresAt
		}
	}
	out := map[string]sweptRun{}
	for _, id := range ids {
		l := byRun[id]
		r, err := tx.GetRun(ctx, id) // locked by sweep
		if err != nil {
			return nil, fmt.Errorf("reading run %s: %w", id, err)
		}
		f := Fence{Addresses: reservedAddresses(fenced[id]), TerraformStarted: started[id]}
		e := sweptRun{ended: l.ended}
		if ExpireRun(&r, l.holder, l.ended, now, f) {
			if err := tx.SaveRun(ctx, r); err != nil {
				return nil, err
			}
			e.run = &r
		}
		// The marker is at the lease's end, when it expired, not at now,
		// when the sweep saw it (a backend lock's lease may run out an
		// hour before anyone looks).
		if err := appendMarkers(ctx, tx, id, now, []engine.Marker{LeaseExpiredMarker(l.addrs, f, l.ended)}); err != nil {
			return nil, fmt.Errorf("run %s: %w", id, err)
		}
		out[id] = e
	}
	return out, nil
}

// fenceLapsed turns the lapsed write reservations of each apply run among
// candidates (locked) whose Terraform started (an "apply-started" marker)
// and that has not committed into fences (Executor.FenceLapsed, ADR 0035):
// its Terraform may have changed them, and nobody has recorded how. It
// returns the fences by run and when each such run's Terraform started.
func fenceLapsed(ctx context.Context, tx Executor, now time.Time, candidates []string) (map[string][]engine.Reservation, map[string]time.Time, error) {
	fenced := map[string][]engine.Reservation{}
	started := map[string]time.Time{}
	for _, id := range candidates {
		r, err := tx.GetRun(ctx, id)
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading run %s: %w", id, err)
		}
		if r.Kind != engine.KindApply || r.CommittedSerial != 0 {
			continue
		}
		at, ok, err := tx.FirstMarkerAt(ctx, id, engine.MarkerApplyStarted)
		if err != nil {
			return nil, nil, fmt.Errorf("reading markers of run %s: %w", id, err)
		}
		if !ok {
			continue // Terraform never ran: nothing is in doubt
		}
		rs, err := tx.FenceLapsed(ctx, id, now)
		if err != nil {
			return nil, nil, fmt.Errorf("fencing the write set of run %s: %w", id, err)
		}
		if len(rs) > 0 {
			fenced[id], started[id] = rs, at
		}
	}
	return fenced, started, nil
}

// reservedAddresses are the addresses of rs, as a set.
func reservedAddresses(rs []engine.Reservation) engine.AddressSet {
	addrs := make([]engine.Address, len(rs))
	for i, r := range rs {
		addrs[i] = r.Address
	}
	return engine.NewAddressSet(addrs...)
}

// sweepRun is step 4 of sweep for run id (locked): it reports whether it
// ended the run.
func sweepRun(ctx context.Context, tx Executor, now time.Time, id string) (sweptRun, bool, error) {
	r, err := tx.GetRun(ctx, id)
	if err != nil {
		return sweptRun{}, false, fmt.Errorf("reading run %s: %w", id, err)
	}
	live, err := tx.HoldsLive(ctx, id, "", now)
	if err != nil {
		return sweptRun{}, false, err
	}
	if !RunLeaseLapsed(r, live, now) {
		return sweptRun{}, false, nil
	}
	ended := r.LeaseUntil
	m := ExpireRunLease(&r, now)
	if err := tx.SaveRun(ctx, r); err != nil {
		return sweptRun{}, false, err
	}
	if err := appendMarkers(ctx, tx, id, now, []engine.Marker{m}); err != nil {
		return sweptRun{}, false, fmt.Errorf("run %s: %w", id, err)
	}
	return sweptRun{run: &r, ended: ended}, true, nil
}

// noteStarted is step 5 of sweep for apply run a without a plan (locked
// by sweep): when it has an "apply-started" marker — a backend lock that
// wrote, or whose Terraform applies (ADR 0056); a day-2 operation never
// has one — its end says `kl run recover` commits what it last wrote
// (NoteApplyStarted).
func noteStarted(ctx context.Context, tx Executor, a engine.Run) error {
	started, err := tx.HasMarker(ctx, a.ID, engine.MarkerApplyStarted)
	if err != nil || !started || !NoteApplyStarted(&a) {
		return err
	}
	return tx.SaveRun(ctx, a)
}

// releaseExpiredPlan is step 5 of sweep for apply run a (it and its plan
// are locked by sweep); ended is when a's lease ran out. When Terraform had
// started (an "apply-started" marker), a's Reason also says how to recover
// what it wrote (NoteApplyStarted).
func releaseExpiredPlan(ctx context.Context, tx Executor, a engine.Run, ended, now time.Time) error {
	plan, err := tx.GetRun(ctx, a.PlanRun)
	if err != nil {
		return err
	}
	reserved, err := tx.HasMarker(ctx, a.ID, engine.MarkerReserved)
	if err != nil {
		return err
	}
	started, err := tx.HasMarker(ctx, a.ID, engine.MarkerApplyStarted)
	if err != nil {
		return err
	}
	if started && NoteApplyStarted(&a) {
		if err := tx.SaveRun(ctx, a); err != nil {
			return err
		}
	}
	if !ReleaseExpiredPlan(&plan, a, reserved, started, ended, now) {
		return nil
	}
	return tx.SaveRun(ctx, plan)
}
