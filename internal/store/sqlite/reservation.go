package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
)

// Reservations are rows; the write transaction is the only guard. Acquire
// reads the live reservations of the state and inserts its own in the same
// IMMEDIATE transaction, so no other writer — goroutine or process — can
// insert a conflicting row in between (DESIGN.md apply step 2).

// Acquire takes all of req.Reservations for req.Run on req.State, or none
// (ADR D2, DESIGN.md apply step 2). In one write transaction it first runs
// the lease sweep (see sweep), then checks the request against the live
// reservations of other runs with engine.Conflicts: read/read coexist, write conflicts with any overlapping
// address, prefixes and "*" included. On conflict it returns a
// *engine.ConflictError naming each blocking run with its actor, PR and the
// blocked addresses (the lease sweep still commits). Otherwise it stores the
// request — a run re-acquiring an (address, mode) it holds replaces that row,
// with a fresh lease — and returns every reservation of the run on the state
// (Held) and those of other runs (Others). A run that is not open — it
// finished, or the sweep just ended it — takes nothing: a
// *engine.StatusError (the sweep still commits). ErrNotFound for an unknown
// state or run; ErrInvalid for a malformed request.
func (s *Store) Acquire(ctx context.Context, req engine.AcquireRequest) (engine.AcquireResult, error) {
	if err := store.CheckAcquire(req); err != nil {
		return engine.AcquireResult{}, fmt.Errorf("acquiring reservations for run %s: %w", req.Run, err)
	}
	var out engine.AcquireResult
	var conflict *engine.ConflictError
	var refused error
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		now := s.now()
		if _, err := s.sweep(ctx, tx, now); err != nil {
			return err
		}
		if _, err := s.getState(ctx, tx, req.State); err != nil {
			return fmt.Errorf("state %s: %w", req.State, err)
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
		if err := s.insertReservations(ctx, tx, want); err != nil {
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
func (s *Store) describeBlockers(ctx context.Context, tx *sql.Tx, blockers []engine.Blocker) error {
	for i := range blockers {
		r, err := s.getRun(ctx, tx, blockers[i].Run)
		if err != nil {
			return fmt.Errorf("reading blocking run %s: %w", blockers[i].Run, err)
		}
		blockers[i].Actor, blockers[i].PR = r.Actor, r.PR
	}
	return nil
}

func (s *Store) insertReservations(ctx context.Context, tx *sql.Tx, rs []engine.Reservation) error {
	stmt, err := tx.PrepareContext(ctx,
		`INSERT INTO reservations (state, address, mode, run, holder, acquired_at, expires_at)
		 VALUES (?, ?, ?, ?, ?, ?, ?)
		 ON CONFLICT (run, address, mode) DO UPDATE SET
		     state = excluded.state, holder = excluded.holder,
		     acquired_at = excluded.acquired_at, expires_at = excluded.expires_at`)
	if err != nil {
		return s.mapErr(err)
	}
	defer stmt.Close()
	for _, r := range rs {
		holder, err := json.Marshal(r.Holder)
		if err != nil {
			return fmt.Errorf("encoding holder: %w", err)
		}
		if _, err := stmt.ExecContext(ctx, r.State, string(r.Address), string(r.Mode), r.Run,
			string(holder), nanos(r.AcquiredAt), nanos(r.ExpiresAt)); err != nil {
			return fmt.Errorf("inserting %s reservation of %s: %w", r.Mode, r.Address, s.mapErr(err))
		}
	}
	return nil
}

// reservations returns the reservations live at now, of state (all states
// if ""), ordered by state, address, mode and run.
func (s *Store) reservations(ctx context.Context, q querier, state string, now time.Time) ([]engine.Reservation, error) {
	query := `SELECT state, address, mode, run, holder, acquired_at, expires_at FROM reservations WHERE expires_at > ?`
	args := []any{nanos(now)}
	if state != "" {
		query += ` AND state = ?`
		args = append(args, state)
	}
	query += ` ORDER BY state, address, mode, run`
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("reading reservations: %w", s.mapErr(err))
	}
	defer rows.Close()
	out := []engine.Reservation{}
	for rows.Next() {
		var r engine.Reservation
		var addr, mode, holder string
		var acquired, expires int64
		if err := rows.Scan(&r.State, &addr, &mode, &r.Run, &holder, &acquired, &expires); err != nil {
			return nil, fmt.Errorf("reading reservations: %w", s.mapErr(err))
		}
		r.Address, r.Mode = engine.Address(addr), engine.ReservationMode(mode)
		r.AcquiredAt, r.ExpiresAt = fromNanos(acquired), fromNanos(expires)
		if err := json.Unmarshal([]byte(holder), &r.Holder); err != nil {
			return nil, fmt.Errorf("decoding holder of run %s: %w", r.Run, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading reservations: %w", s.mapErr(err))
	}
	return out, nil
}

// Reservations lists the live reservations of state (every state if ""),
// ordered by state, address, mode and run. It only reads: lapsed rows not yet
// swept are left out, not deleted.
func (s *Store) Reservations(ctx context.Context, state string) ([]engine.Reservation, error) {
	out, err := s.reservations(ctx, s.db, state, s.now())
	if err != nil {
		return nil, fmt.Errorf("listing reservations of state %q: %w", state, err)
	}
	return out, nil
}

// Renew extends every reservation of run to now+lease, in a write
// transaction that first sweeps lapsed leases. ErrLeaseLost if the run holds
// none any more — they lapsed (the sweep then marks the run lease-expired,
// and commits that) or were never taken. ErrInvalid for a lease <= 0.
func (s *Store) Renew(ctx context.Context, run string, lease time.Duration) error {
	if err := store.CheckLease(lease); err != nil {
		return fmt.Errorf("renewing reservations of run %s: %w", run, err)
	}
	var renewed int64
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		now := s.now()
		if _, err := s.sweep(ctx, tx, now); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE reservations SET expires_at = ? WHERE run = ?`, nanos(now.Add(lease)), run)
		if err != nil {
			return s.mapErr(err)
		}
		renewed, err = res.RowsAffected()
		return s.mapErr(err)
	})
	if err != nil {
		return fmt.Errorf("renewing reservations of run %s: %w", run, err)
	}
	if renewed == 0 {
		return fmt.Errorf("renewing reservations of run %s: it holds none: %w", run, engine.ErrLeaseLost)
	}
	return nil
}

// Release drops every reservation of run and appends a "released" marker
// (Count = reservations dropped) when it held any. Releasing nothing is not
// an error.
func (s *Store) Release(ctx context.Context, run string) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		n, err := s.dropReservations(ctx, tx, run)
		if err != nil || n == 0 {
			return err
		}
		now := s.now()
		return s.appendMarkers(ctx, tx, run, now, []engine.Marker{store.ReleasedMarker(n, now)})
	})
	if err != nil {
		return fmt.Errorf("releasing reservations of run %s: %w", run, err)
	}
	return nil
}

// dropReservations deletes every reservation of run, live or lapsed, and
// returns how many there were.
func (s *Store) dropReservations(ctx context.Context, tx *sql.Tx, run string) (int, error) {
	res, err := tx.ExecContext(ctx, `DELETE FROM reservations WHERE run = ?`, run)
	if err != nil {
		return 0, fmt.Errorf("dropping reservations: %w", s.mapErr(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("dropping reservations: %w", s.mapErr(err))
	}
	return int(n), nil
}

// ExpireLeases runs the lease sweep in one write transaction (see sweep)
// and returns the runs it expired, sorted.
func (s *Store) ExpireLeases(ctx context.Context) ([]string, error) {
	var runs []string
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		var err error
		runs, err = s.sweep(ctx, tx, s.now())
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
//  1. delete the reservations lapsed at now and, per run that lost some,
//     set it lease-expired when still open (store.ExpireRun) and append a
//     "lease-expired" marker with the addresses;
//  2. end every run in progress whose own lease lapsed and that holds no
//     live reservation (store.RunLeaseLapsed, store.ExpireRunLease), with a
//     "lease-expired" marker;
//  3. hand back the plan each apply run ended by 1 or 2 had claimed
//     (store.ReleaseExpiredPlan: planned, or failed when it had reserved),
//     and name the recovery in the run's reason when Terraform had started
//     (store.NoteApplyStarted).
//
// The write transaction is the only guard: no other writer interleaves. It
// returns the runs of 1 and 2, sorted.
func (s *Store) sweep(ctx context.Context, tx *sql.Tx, now time.Time) ([]string, error) {
	expired, err := s.sweepReservations(ctx, tx, now)
	if err != nil {
		return nil, fmt.Errorf("sweeping leases: %w", err)
	}
	idle, err := s.sweepRuns(ctx, tx, now)
	if err != nil {
		return nil, fmt.Errorf("sweeping leases: %w", err)
	}
	for id, e := range idle {
		expired[id] = e
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

// sweepReservations is step 1 of sweep.
func (s *Store) sweepReservations(ctx context.Context, tx *sql.Tx, now time.Time) (map[string]sweptRun, error) {
	rows, err := tx.QueryContext(ctx,
		`SELECT run, address, holder, expires_at FROM reservations WHERE expires_at <= ? ORDER BY run, address`, nanos(now))
	if err != nil {
		return nil, s.mapErr(err)
	}
	type lapsed struct {
		addrs  engine.AddressSet
		holder engine.Holder
		ended  time.Time
	}
	byRun := map[string]*lapsed{}
	for rows.Next() {
		var run, addr, holder string
		var expires int64
		if err := rows.Scan(&run, &addr, &holder, &expires); err != nil {
			rows.Close()
			return nil, s.mapErr(err)
		}
		l := byRun[run]
		if l == nil {
			l = &lapsed{}
			if err := json.Unmarshal([]byte(holder), &l.holder); err != nil {
				rows.Close()
				return nil, fmt.Errorf("decoding holder of run %s: %w", run, err)
			}
			byRun[run] = l
		}
		l.addrs = append(l.addrs, engine.Address(addr))
		if t := fromNanos(expires); t.After(l.ended) {
			l.ended = t
		}
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return nil, s.mapErr(err)
	}
	rows.Close()
	out := map[string]sweptRun{}
	if len(byRun) == 0 {
		return out, nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM reservations WHERE expires_at <= ?`, nanos(now)); err != nil {
		return nil, s.mapErr(err)
	}
	ids := make([]string, 0, len(byRun))
	for id := range byRun {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		l := byRun[id]
		r, err := s.getRun(ctx, tx, id)
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

// inProgressRuns selects the runs that may be in progress
// (engine.Run.InProgress), whose own leases the sweep checks.
const inProgressRuns = `SELECT body FROM runs
	WHERE (kind = 'plan' AND status = 'planning') OR (kind = 'apply' AND status IN ('waiting', 'applying'))`

// sweepRuns is step 2 of sweep.
func (s *Store) sweepRuns(ctx context.Context, tx *sql.Tx, now time.Time) (map[string]sweptRun, error) {
	rows, err := tx.QueryContext(ctx, inProgressRuns)
	if err != nil {
		return nil, s.mapErr(err)
	}
	var candidates []engine.Run
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			rows.Close()
			return nil, s.mapErr(err)
		}
		r, err := decodeRun(body)
		if err != nil {
			rows.Close()
			return nil, err
		}
		if store.RunLeaseLapsed(r, false, now) {
			candidates = append(candidates, r)
		}
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return nil, s.mapErr(err)
	}
	rows.Close()
	out := map[string]sweptRun{}
	for _, r := range candidates {
		var live int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM reservations WHERE run = ? AND expires_at > ?`, r.ID, nanos(now)).Scan(&live); err != nil {
			return nil, s.mapErr(err)
		}
		if !store.RunLeaseLapsed(r, live > 0, now) {
			continue
		}
		ended := r.LeaseUntil
		m := store.ExpireRunLease(&r, now)
		if err := s.updateRun(ctx, tx, r); err != nil {
			return nil, err
		}
		if err := s.appendMarkers(ctx, tx, r.ID, now, []engine.Marker{m}); err != nil {
			return nil, fmt.Errorf("run %s: %w", r.ID, err)
		}
		out[r.ID] = sweptRun{run: &r, ended: ended}
	}
	return out, nil
}

// releaseExpiredPlan is step 3 of sweep for apply run a, ended by the
// sweep; ended is when its lease ran out. When Terraform had started (an
// "apply-started" marker), a's Reason also says how to recover what it
// wrote (store.NoteApplyStarted).
func (s *Store) releaseExpiredPlan(ctx context.Context, tx *sql.Tx, a engine.Run, ended, now time.Time) error {
	plan, err := s.getRun(ctx, tx, a.PlanRun)
	if err != nil {
		return err
	}
	count := func(kind engine.MarkerKind) (int, error) {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM markers WHERE run = ? AND kind = ?`, a.ID, string(kind)).Scan(&n); err != nil {
			return 0, s.mapErr(err)
		}
		return n, nil
	}
	reserved, err := count(engine.MarkerReserved)
	if err != nil {
		return err
	}
	started, err := count(engine.MarkerApplyStarted)
	if err != nil {
		return err
	}
	if started > 0 && store.NoteApplyStarted(&a) {
		if err := s.updateRun(ctx, tx, a); err != nil {
			return err
		}
	}
	if !store.ReleaseExpiredPlan(&plan, a, reserved > 0, started > 0, ended, now) {
		return nil
	}
	return s.updateRun(ctx, tx, plan)
}

// RenewRun extends the run's own lease (engine.Run.LeaseUntil) to
// now+lease in one write transaction while the run is in progress
// (store.RenewRunLease). ErrLeaseLost when it is not (finished, or ended by
// the lease sweep); ErrNotFound for an unknown run; ErrInvalid for a lease
// <= 0. UpdatedAt is left alone and no marker is written.
func (s *Store) RenewRun(ctx context.Context, run string, lease time.Duration) error {
	if err := store.CheckLease(lease); err != nil {
		return fmt.Errorf("renewing the lease of run %s: %w", run, err)
	}
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		r, err := s.getRun(ctx, tx, run)
		if err != nil {
			return err
		}
		if err := store.RenewRunLease(&r, lease, s.now()); err != nil {
			return err
		}
		return s.updateRun(ctx, tx, r)
	})
	if err != nil {
		return fmt.Errorf("renewing the lease of run %s: %w", run, err)
	}
	return nil
}
