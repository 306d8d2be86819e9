package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
)

// Reservations are rows; the state row lock is the guard. Acquire locks the
// state row (FOR NO KEY UPDATE) before it reads anything, then reads the
// live reservations of the state and inserts its own in the same
// transaction. Every other Acquire on the state — in any process, on any
// connection — waits on that lock, and READ COMMITTED gives each statement
// after the wait a fresh snapshot, so it sees the rows the previous holder
// inserted. No conflicting pair can therefore be held at once (DESIGN.md
// apply step 2).
//
// Only Acquire adds reservations. Renew can extend a reservation only while
// it is live (expires_at > now in the same UPDATE): it never brings back one
// that an Acquire has already treated as lapsed. The lease sweep deletes a
// lapsed row before any check reads the state's reservations, and a Renew
// that commits first is seen by the sweep's DELETE (which re-checks
// expires_at on the renewed row), so the row stays and conflicts.
//
// Lock order, which keeps these transactions from deadlocking each other:
// the state row, then run rows in id order, then reservation rows.

// Acquire takes all of req.Reservations for req.Run on req.State, or none
// (ADR D2, DESIGN.md apply step 2). In one transaction it locks the state
// row, reads the database clock, runs the lease sweep (see sweep; it also
// locks req.Run), then checks the request against the live reservations of
// other runs with engine.Conflicts: read/read coexist,
// write conflicts with any overlapping address, prefixes and "*" included.
// On conflict it returns a *engine.ConflictError naming each blocking run
// with its actor, PR and the blocked addresses (the lease sweep still
// commits). Otherwise it stores the request — a run re-acquiring an
// (address, mode) it holds replaces that row, with a fresh lease — and
// returns every reservation of the run on the state (Held) and those of
// other runs (Others). A run that is not open — it finished, or the sweep
// just ended it — takes nothing: a *engine.StatusError (the sweep still
// commits). ErrNotFound for an unknown state or run; ErrInvalid for a
// malformed request.
func (s *Store) Acquire(ctx context.Context, req engine.AcquireRequest) (engine.AcquireResult, error) {
	if err := store.CheckAcquire(req); err != nil {
		return engine.AcquireResult{}, fmt.Errorf("acquiring reservations for run %s: %w", req.Run, err)
	}
	var out engine.AcquireResult
	var conflict *engine.ConflictError
	var refused error
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		conflict, refused = nil, nil
		if _, err := s.getState(ctx, tx, req.State, true); err != nil {
			return fmt.Errorf("state %s: %w", req.State, err)
		}
		if err := s.runExists(ctx, tx, req.Run); err != nil {
			return fmt.Errorf("run %s: %w", req.Run, err)
		}
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		// The sweep locks req.Run with the runs it sweeps (one lock order).
		if _, err := s.sweep(ctx, tx, now, req.Run); err != nil {
			return err
		}
		run, err := s.getRun(ctx, tx, req.Run)
		if err != nil {
			return fmt.Errorf("run %s: %w", req.Run, err)
		}
		if err := store.AcquireAllowed(run); err != nil {
			refused = err
			return nil // commit the lease sweep
		}
		held, err := s.reservations(ctx, tx, req.State, now)
		if err != nil {
			return err
		}
		want := store.Wanted(req, now)
		if blockers := engine.Conflicts(req.Run, want, held); len(blockers) > 0 {
			if err := s.describeBlockers(ctx, tx, blockers); err != nil {
				return err
			}
			conflict = &engine.ConflictError{State: req.State, Run: req.Run, Blockers: blockers}
			return nil // commit the lease sweep
		}
		if err := s.insertReservations(ctx, tx, req, want); err != nil {
			return err
		}
		all, err := s.reservations(ctx, tx, req.State, now)
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

// describeBlockers fills each blocker's actor and PR from its run (STYLE.md
// 8: a refusal names the holding run, its PR and the addresses).
func (s *Store) describeBlockers(ctx context.Context, tx pgx.Tx, blockers []engine.Blocker) error {
	for i := range blockers {
		r, err := s.getRun(ctx, tx, blockers[i].Run)
		if err != nil {
			return fmt.Errorf("reading blocking run %s: %w", blockers[i].Run, err)
		}
		blockers[i].Actor, blockers[i].PR = r.Actor, r.PR
	}
	return nil
}

// insertReservations stores want (store.Wanted: one row per address and
// mode, all with req's state, run, holder and lease) in one statement.
func (s *Store) insertReservations(ctx context.Context, tx pgx.Tx, req engine.AcquireRequest, want []engine.Reservation) error {
	if len(want) == 0 {
		return nil
	}
	holder, err := json.Marshal(req.Holder)
	if err != nil {
		return fmt.Errorf("encoding holder: %w", err)
	}
	addrs := make([]string, len(want))
	modes := make([]string, len(want))
	for i, r := range want {
		addrs[i], modes[i] = string(r.Address), string(r.Mode)
	}
	if _, err := tx.Exec(ctx,
		`INSERT INTO reservations (state, address, mode, run, holder, acquired_at, expires_at)
		 SELECT $1::text, a, m, $2::text, $3::text, $4::bigint, $5::bigint FROM unnest($6::text[], $7::text[]) AS w (a, m)
		 ON CONFLICT (run, address, mode) DO UPDATE SET
		     state = excluded.state, holder = excluded.holder,
		     acquired_at = excluded.acquired_at, expires_at = excluded.expires_at`,
		req.State, req.Run, string(holder), nanos(want[0].AcquiredAt), nanos(want[0].ExpiresAt), addrs, modes); err != nil {
		return fmt.Errorf("inserting reservations: %w", s.mapErr(err))
	}
	return nil
}

// reservations returns the reservations live at now, of state (all states
// if ""), ordered by state, address, mode and run.
func (s *Store) reservations(ctx context.Context, q querier, state string, now time.Time) ([]engine.Reservation, error) {
	query := `SELECT state, address, mode, run, holder, acquired_at, expires_at FROM reservations WHERE expires_at > $1`
	args := []any{nanos(now)}
	if state != "" {
		query += ` AND state = $2`
		args = append(args, state)
	}
	query += ` ORDER BY state, address, mode, run`
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("reading reservations: %w", s.mapErr(err))
	}
	out := []engine.Reservation{}
	var r engine.Reservation
	var addr, mode, holder string
	var acquired, expires int64
	if _, err := pgx.ForEachRow(rows, []any{&r.State, &addr, &mode, &r.Run, &holder, &acquired, &expires}, func() error {
		r.Address, r.Mode = engine.Address(addr), engine.ReservationMode(mode)
		r.AcquiredAt, r.ExpiresAt = fromNanos(acquired), fromNanos(expires)
		r.Holder = engine.Holder{}
		if err := json.Unmarshal([]byte(holder), &r.Holder); err != nil {
			return fmt.Errorf("decoding holder of run %s: %w", r.Run, err)
		}
		out = append(out, r)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("reading reservations: %w", s.mapErr(err))
	}
	return out, nil
}

// Reservations lists the live reservations of state (every state if ""),
// ordered by state, address, mode and run, at the database clock's now. It
// only reads: lapsed rows not yet swept are left out, not deleted.
func (s *Store) Reservations(ctx context.Context, state string) ([]engine.Reservation, error) {
	now, err := s.now(ctx, s.pool)
	if err != nil {
		return nil, fmt.Errorf("listing reservations of state %q: %w", state, err)
	}
	out, err := s.reservations(ctx, s.pool, state, now)
	if err != nil {
		return nil, fmt.Errorf("listing reservations of state %q: %w", state, err)
	}
	return out, nil
}

// Renew extends every live reservation of run to now+lease, in a
// transaction that first sweeps lapsed leases. ErrLeaseLost if the run holds
// none any more — they lapsed (the sweep then marks the run lease-expired,
// and commits that) or were never taken. ErrInvalid for a lease <= 0.
func (s *Store) Renew(ctx context.Context, run string, lease time.Duration) error {
	if err := store.CheckLease(lease); err != nil {
		return fmt.Errorf("renewing reservations of run %s: %w", run, err)
	}
	var renewed int64
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		if _, err := s.sweep(ctx, tx, now); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE reservations SET expires_at = $1 WHERE run = $2 AND expires_at > $3`,
			nanos(now.Add(lease)), run, nanos(now))
		if err != nil {
			return s.mapErr(err)
		}
		renewed = tag.RowsAffected()
		return nil
	})
	if err != nil {
		return fmt.Errorf("renewing reservations of run %s: %w", run, err)
	}
	if renewed == 0 {
		return fmt.Errorf("renewing reservations of run %s: it holds none: %w", run, engine.ErrLeaseLost)
	}
	return nil
}

// Release drops every reservation of run, under the run's row lock, and
// appends a "released" marker (Count = reservations dropped) when it held
// any. Releasing nothing — or for an unknown run — is not an error.
func (s *Store) Release(ctx context.Context, run string) error {
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := s.lockRun(ctx, tx, run); err != nil {
			if errors.Is(err, engine.ErrNotFound) {
				return nil
			}
			return err
		}
		n, err := s.dropReservations(ctx, tx, run)
		if err != nil || n == 0 {
			return err
		}
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		return s.appendMarkers(ctx, tx, run, now, []engine.Marker{store.ReleasedMarker(n, now)})
	})
	if err != nil {
		return fmt.Errorf("releasing reservations of run %s: %w", run, err)
	}
	return nil
}

// dropReservations deletes every reservation of run, live or lapsed, and
// returns how many there were.
func (s *Store) dropReservations(ctx context.Context, tx pgx.Tx, run string) (int, error) {
	tag, err := tx.Exec(ctx, `DELETE FROM reservations WHERE run = $1`, run)
	if err != nil {
		return 0, fmt.Errorf("dropping reservations: %w", s.mapErr(err))
	}
	return int(tag.RowsAffected()), nil
}

// ExpireLeases runs the lease sweep (see sweep) in one transaction at the
// database clock's now and returns the runs it expired, sorted. Concurrent
// sweeps in several processes split the work: each lapsed reservation is
// deleted, and each run expired and marked, once.
func (s *Store) ExpireLeases(ctx context.Context) ([]string, error) {
	var runs []string
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		runs, err = s.sweep(ctx, tx, now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("expiring leases: %w", err)
	}
	return runs, nil
}

// inProgressRuns selects the runs that may be in progress
// (engine.Run.InProgress), whose own leases the sweep checks.
const inProgressRuns = `SELECT body FROM runs
	WHERE (kind = 'plan' AND status = 'planning') OR (kind = 'apply' AND status IN ('waiting', 'applying'))`

// sweep is the lease sweep every reservation write transaction (and
// ExpireLeases) starts with, at now:
//
//  1. find, without locks, the candidates: runs with reservations lapsed at
//     now, and runs in progress whose own lease lapsed
//     (store.RunLeaseLapsed, reservations not yet considered);
//  2. lock, in ONE statement and in id order, the candidates, the plans the
//     apply runs among them claimed (plan_run), and the runs in lock (the
//     caller's own run: Acquire checks it after the sweep) — the adapter's
//     lock order, state row → run rows by id, holds;
//  3. delete the candidates' lapsed reservations and, per run that lost
//     some, set it lease-expired when still open (store.ExpireRun) and
//     append a "lease-expired" marker with the addresses;
//  4. re-read each lease candidate under its lock and, if it is still in
//     progress with a lapsed lease and no live reservation, end it
//     (store.ExpireRunLease) with a "lease-expired" marker;
//  5. hand back the plan each apply run ended in 3 or 4 had claimed
//     (store.ReleaseExpiredPlan: planned, or failed when it had reserved),
//     and name the recovery in the run's reason when Terraform had started
//     (store.NoteApplyStarted).
//
// Everything is decided again under the locks (READ COMMITTED: each
// statement sees what committed before it), so of two sweeps racing for
// one run, the second finds it done — a row the first deleted is skipped by
// the DELETE, a run it ended is no longer in progress — and only the first
// reports it. It returns the runs of 3 and 4, sorted.
func (s *Store) sweep(ctx context.Context, tx pgx.Tx, now time.Time, lock ...string) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT DISTINCT run FROM reservations WHERE expires_at <= $1 ORDER BY run`, nanos(now))
	if err != nil {
		return nil, fmt.Errorf("sweeping leases: %w", s.mapErr(err))
	}
	lapsed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("sweeping leases: %w", s.mapErr(err))
	}
	rows, err = tx.Query(ctx, inProgressRuns)
	if err != nil {
		return nil, fmt.Errorf("sweeping leases: %w", s.mapErr(err))
	}
	var idle []string
	var body string
	if _, err := pgx.ForEachRow(rows, []any{&body}, func() error {
		r, err := decodeRun(body)
		if err != nil {
			return err
		}
		if store.RunLeaseLapsed(r, false, now) {
			idle = append(idle, r.ID)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("sweeping leases: %w", s.mapErr(err))
	}
	if len(lapsed)+len(idle)+len(lock) == 0 {
		return nil, nil
	}
	// ORDER BY is applied before the row locks are taken: ids in order.
	candidates := append(append([]string{}, lapsed...), idle...)
	if _, err := tx.Exec(ctx,
		`SELECT id FROM runs
		 WHERE id = ANY($1::text[]) OR id = ANY($2::text[])
		    OR id IN (SELECT plan_run FROM runs WHERE id = ANY($1::text[]) AND plan_run IS NOT NULL)
		 ORDER BY id FOR NO KEY UPDATE`, candidates, lock); err != nil {
		return nil, fmt.Errorf("sweeping leases: locking runs: %w", s.mapErr(err))
	}
	expired := map[string]sweptRun{}
	if len(lapsed) > 0 {
		if expired, err = s.sweepReservations(ctx, tx, now, lapsed); err != nil {
			return nil, fmt.Errorf("sweeping leases: %w", err)
		}
	}
	for _, id := range idle {
		if _, done := expired[id]; done {
			continue
		}
		e, ok, err := s.sweepRun(ctx, tx, now, id)
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
		if e.run == nil || e.run.Kind != engine.KindApply || e.run.PlanRun == "" {
			continue
		}
		if err := s.releaseExpiredPlan(ctx, tx, *e.run, e.ended, now); err != nil {
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

// sweepReservations is step 3 of sweep, for the runs in candidates (locked).
func (s *Store) sweepReservations(ctx context.Context, tx pgx.Tx, now time.Time, candidates []string) (map[string]sweptRun, error) {
	rows, err := tx.Query(ctx,
		`DELETE FROM reservations WHERE expires_at <= $1 AND run = ANY($2::text[]) RETURNING run, address, holder, expires_at`,
		nanos(now), candidates)
	if err != nil {
		return nil, s.mapErr(err)
	}
	type lapsed struct {
		addrs  engine.AddressSet
		holder engine.Holder
		ended  time.Time
	}
	byRun := map[string]*lapsed{}
	var run, addr, holder string
	var expires int64
	if _, err := pgx.ForEachRow(rows, []any{&run, &addr, &holder, &expires}, func() error {
		l := byRun[run]
		if l == nil {
			l = &lapsed{}
			if err := json.Unmarshal([]byte(holder), &l.holder); err != nil {
				return fmt.Errorf("decoding holder of run %s: %w", run, err)
			}
			byRun[run] = l
		}
		l.addrs = append(l.addrs, engine.Address(addr))
		if t := fromNanos(expires); t.After(l.ended) {
			l.ended = t
		}
		return nil
	}); err != nil {
		return nil, s.mapErr(err)
	}
	ids := make([]string, 0, len(byRun))
	for id := range byRun {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := map[string]sweptRun{}
	for _, id := range ids {
		l := byRun[id]
		r, err := s.getRun(ctx, tx, id) // locked by sweep
		if err != nil {
			return nil, fmt.Errorf("reading run %s: %w", id, err)
		}
		e := sweptRun{ended: l.ended}
		if store.ExpireRun(&r, l.holder, l.ended, now) {
			if err := s.updateRun(ctx, tx, r); err != nil {
				return nil, err
			}
			e.run = &r
		}
		if err := s.appendMarkers(ctx, tx, id, now, []engine.Marker{store.LeaseExpiredMarker(l.addrs, now)}); err != nil {
			return nil, fmt.Errorf("run %s: %w", id, err)
		}
		out[id] = e
	}
	return out, nil
}

// sweepRun is step 4 of sweep for run id (locked): it reports whether it
// ended the run.
func (s *Store) sweepRun(ctx context.Context, tx pgx.Tx, now time.Time, id string) (sweptRun, bool, error) {
	r, err := s.getRun(ctx, tx, id)
	if err != nil {
		return sweptRun{}, false, fmt.Errorf("reading run %s: %w", id, err)
	}
	var live bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM reservations WHERE run = $1 AND expires_at > $2)`, id, nanos(now)).Scan(&live); err != nil {
		return sweptRun{}, false, s.mapErr(err)
	}
	if !store.RunLeaseLapsed(r, live, now) {
		return sweptRun{}, false, nil
	}
	ended := r.LeaseUntil
	m := store.ExpireRunLease(&r, now)
	if err := s.updateRun(ctx, tx, r); err != nil {
		return sweptRun{}, false, err
	}
	if err := s.appendMarkers(ctx, tx, id, now, []engine.Marker{m}); err != nil {
		return sweptRun{}, false, fmt.Errorf("run %s: %w", id, err)
	}
	return sweptRun{run: &r, ended: ended}, true, nil
}

// releaseExpiredPlan is step 5 of sweep for apply run a (it and its plan
// are locked by sweep); ended is when a's lease ran out. When Terraform had
// started (an "apply-started" marker), a's Reason also says how to recover
// what it wrote (store.NoteApplyStarted).
func (s *Store) releaseExpiredPlan(ctx context.Context, tx pgx.Tx, a engine.Run, ended, now time.Time) error {
	plan, err := s.getRun(ctx, tx, a.PlanRun)
	if err != nil {
		return err
	}
	var reserved, started bool
	if err := tx.QueryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM markers WHERE run = $1 AND kind = $2), EXISTS (SELECT 1 FROM markers WHERE run = $1 AND kind = $3)`,
		a.ID, string(engine.MarkerReserved), string(engine.MarkerApplyStarted)).Scan(&reserved, &started); err != nil {
		return s.mapErr(err)
	}
	if started && store.NoteApplyStarted(&a) {
		if err := s.updateRun(ctx, tx, a); err != nil {
			return err
		}
	}
	if !store.ReleaseExpiredPlan(&plan, a, reserved, started, ended, now) {
		return nil
	}
	return s.updateRun(ctx, tx, plan)
}

// RenewRun extends the run's own lease (engine.Run.LeaseUntil) to
// now+lease, at the database clock's now, under the run's row lock, while
// the run is in progress (store.RenewRunLease). ErrLeaseLost when it is not
// (finished, or ended by the lease sweep — which holds the same lock, so
// the two never interleave); ErrNotFound for an unknown run; ErrInvalid for
// a lease <= 0. UpdatedAt is left alone and no marker is written.
func (s *Store) RenewRun(ctx context.Context, run string, lease time.Duration) error {
	if err := store.CheckLease(lease); err != nil {
		return fmt.Errorf("renewing the lease of run %s: %w", run, err)
	}
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		r, err := s.lockRun(ctx, tx, run)
		if err != nil {
			return err
		}
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		if err := store.RenewRunLease(&r, lease, now); err != nil {
			return err
		}
		return s.updateRun(ctx, tx, r)
	})
	if err != nil {
		return fmt.Errorf("renewing the lease of run %s: %w", run, err)
	}
	return nil
}
