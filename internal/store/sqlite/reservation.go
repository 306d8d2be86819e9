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
// (ADR D2, DESIGN.md apply step 2). In one write transaction it first drops
// every lapsed reservation (marking their runs lease-expired), then checks
// the request against the live reservations of other runs with
// engine.Conflicts: read/read coexist, write conflicts with any overlapping
// address, prefixes and "*" included. On conflict it returns a
// *engine.ConflictError naming each blocking run with its actor, PR and the
// blocked addresses (the lease sweep still commits). Otherwise it stores the
// request — a run re-acquiring an (address, mode) it holds replaces that row,
// with a fresh lease — and returns every reservation of the run on the state
// (Held) and those of other runs (Others). ErrNotFound for an unknown state
// or run; ErrInvalid for a malformed request.
func (s *Store) Acquire(ctx context.Context, req engine.AcquireRequest) (engine.AcquireResult, error) {
	if err := store.CheckAcquire(req); err != nil {
		return engine.AcquireResult{}, fmt.Errorf("acquiring reservations for run %s: %w", req.Run, err)
	}
	var out engine.AcquireResult
	var conflict *engine.ConflictError
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		now := s.now()
		if _, err := s.sweep(ctx, tx, now); err != nil {
			return err
		}
		if _, err := s.getState(ctx, tx, req.State); err != nil {
			return fmt.Errorf("state %s: %w", req.State, err)
		}
		if err := s.runExists(ctx, tx, req.Run); err != nil {
			return fmt.Errorf("run %s: %w", req.Run, err)
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
	if lease <= 0 {
		return fmt.Errorf("renewing reservations of run %s: lease %s is not positive: %w", run, lease, engine.ErrInvalid)
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

// ExpireLeases drops every reservation whose lease ended at or before now,
// marks each run that lost some lease-expired (status, when still open, and
// a "lease-expired" marker listing the addresses), and returns those runs
// sorted.
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

// sweep is the lease sweep every reservation write transaction starts with:
// delete the reservations lapsed at now and, per run that lost some, set it
// lease-expired when still open and append a "lease-expired" marker with the
// addresses. It returns those runs, sorted.
func (s *Store) sweep(ctx context.Context, tx *sql.Tx, now time.Time) ([]string, error) {
	rows, err := tx.QueryContext(ctx,
		`SELECT run, address, holder FROM reservations WHERE expires_at <= ? ORDER BY run, address`, nanos(now))
	if err != nil {
		return nil, fmt.Errorf("sweeping leases: %w", s.mapErr(err))
	}
	type lapsed struct {
		addrs  engine.AddressSet
		holder engine.Holder
	}
	byRun := map[string]*lapsed{}
	for rows.Next() {
		var run, addr, holder string
		if err := rows.Scan(&run, &addr, &holder); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sweeping leases: %w", s.mapErr(err))
		}
		l := byRun[run]
		if l == nil {
			l = &lapsed{}
			if err := json.Unmarshal([]byte(holder), &l.holder); err != nil {
				rows.Close()
				return nil, fmt.Errorf("sweeping leases: decoding holder of run %s: %w", run, err)
			}
			byRun[run] = l
		}
		l.addrs = append(l.addrs, engine.Address(addr))
	}
	if err := rows.Err(); err != nil {
		rows.Close()
		return nil, fmt.Errorf("sweeping leases: %w", s.mapErr(err))
	}
	rows.Close()
	if len(byRun) == 0 {
		return nil, nil
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM reservations WHERE expires_at <= ?`, nanos(now)); err != nil {
		return nil, fmt.Errorf("sweeping leases: %w", s.mapErr(err))
	}
	runs := make([]string, 0, len(byRun))
	for run := range byRun {
		runs = append(runs, run)
	}
	sort.Strings(runs)
	for _, id := range runs {
		l := byRun[id]
		r, err := s.getRun(ctx, tx, id)
		if err != nil {
			return nil, fmt.Errorf("sweeping leases: reading run %s: %w", id, err)
		}
		if store.ExpireRun(&r, l.holder, now) {
			if err := s.updateRun(ctx, tx, r); err != nil {
				return nil, fmt.Errorf("sweeping leases: %w", err)
			}
		}
		if err := s.appendMarkers(ctx, tx, id, now, []engine.Marker{store.LeaseExpiredMarker(l.addrs, now)}); err != nil {
			return nil, fmt.Errorf("sweeping leases: run %s: %w", id, err)
		}
	}
	return runs, nil
}
