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
// row, reads the database clock, drops every lapsed reservation (marking
// their runs lease-expired), then checks the request against the live
// reservations of other runs with engine.Conflicts: read/read coexist,
// write conflicts with any overlapping address, prefixes and "*" included.
// On conflict it returns a *engine.ConflictError naming each blocking run
// with its actor, PR and the blocked addresses (the lease sweep still
// commits). Otherwise it stores the request — a run re-acquiring an
// (address, mode) it holds replaces that row, with a fresh lease — and
// returns every reservation of the run on the state (Held) and those of
// other runs (Others). ErrNotFound for an unknown state or run; ErrInvalid
// for a malformed request.
func (s *Store) Acquire(ctx context.Context, req engine.AcquireRequest) (engine.AcquireResult, error) {
	if err := store.CheckAcquire(req); err != nil {
		return engine.AcquireResult{}, fmt.Errorf("acquiring reservations for run %s: %w", req.Run, err)
	}
	var out engine.AcquireResult
	var conflict *engine.ConflictError
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		conflict = nil
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
		if _, err := s.sweep(ctx, tx, now); err != nil {
			return err
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
	if lease <= 0 {
		return fmt.Errorf("renewing reservations of run %s: lease %s is not positive: %w", run, lease, engine.ErrInvalid)
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

// ExpireLeases drops every reservation whose lease ended at or before the
// database clock's now, marks each run that lost some lease-expired
// (status, when still open, and a "lease-expired" marker listing the
// addresses), and returns those runs sorted. Concurrent sweeps in several
// processes split the work: each lapsed row is deleted, and reported, once.
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

// sweep is the lease sweep every reservation write transaction starts with:
// find the runs with reservations lapsed at now, lock those runs (id order),
// delete their lapsed reservations, and per run that lost some set it
// lease-expired when still open and append a "lease-expired" marker with
// the addresses. It returns those runs, sorted. A row another transaction
// swept first is skipped by the DELETE (it re-checks each row it waited
// for), so that transaction alone reports it.
func (s *Store) sweep(ctx context.Context, tx pgx.Tx, now time.Time) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT DISTINCT run FROM reservations WHERE expires_at <= $1 ORDER BY run`, nanos(now))
	if err != nil {
		return nil, fmt.Errorf("sweeping leases: %w", s.mapErr(err))
	}
	candidates, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("sweeping leases: %w", s.mapErr(err))
	}
	if len(candidates) == 0 {
		return nil, nil
	}
	// ORDER BY is applied before the row locks are taken: ids in order.
	if _, err := tx.Exec(ctx, `SELECT id FROM runs WHERE id = ANY($1::text[]) ORDER BY id FOR NO KEY UPDATE`, candidates); err != nil {
		return nil, fmt.Errorf("sweeping leases: locking runs: %w", s.mapErr(err))
	}
	rows, err = tx.Query(ctx,
		`DELETE FROM reservations WHERE expires_at <= $1 AND run = ANY($2::text[]) RETURNING run, address, holder`,
		nanos(now), candidates)
	if err != nil {
		return nil, fmt.Errorf("sweeping leases: %w", s.mapErr(err))
	}
	type lapsed struct {
		addrs  engine.AddressSet
		holder engine.Holder
	}
	byRun := map[string]*lapsed{}
	var run, addr, holder string
	if _, err := pgx.ForEachRow(rows, []any{&run, &addr, &holder}, func() error {
		l := byRun[run]
		if l == nil {
			l = &lapsed{}
			if err := json.Unmarshal([]byte(holder), &l.holder); err != nil {
				return fmt.Errorf("decoding holder of run %s: %w", run, err)
			}
			byRun[run] = l
		}
		l.addrs = append(l.addrs, engine.Address(addr))
		return nil
	}); err != nil {
		return nil, fmt.Errorf("sweeping leases: %w", s.mapErr(err))
	}
	runs := make([]string, 0, len(byRun))
	for id := range byRun {
		runs = append(runs, id)
	}
	sort.Strings(runs)
	for _, id := range runs {
		l := byRun[id]
		r, err := s.getRun(ctx, tx, id) // locked above
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
	if len(runs) == 0 {
		return nil, nil
	}
	return runs, nil
}
