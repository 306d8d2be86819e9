package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// Reservations are rows; the write transaction is the only guard. Acquire
// reads the live reservations of the state and inserts its own in the same
// IMMEDIATE transaction, so no other writer — goroutine or process — can
// insert a conflicting row in between (docs/design.md apply step 2). The
// algorithms are store's (store.Acquire, store.Renew, store.Release,
// store.ExpireLeases); this file holds their statements.

// InsertReservations stores rs, replacing a row of the same run, address
// and mode (store.Executor).
func (e executor) InsertReservations(ctx context.Context, rs []engine.Reservation) error {
	stmt, err := e.q.PrepareContext(ctx,
		`INSERT INTO reservations (state, address, mode, run, holder, acquired_at, expires_at)
		 VALUES (?, ?, ?, ?, ?, ?, ?)
		 ON CONFLICT (run, address, mode) DO UPDATE SET
		     state = excluded.state, holder = excluded.holder,
		     acquired_at = excluded.acquired_at, expires_at = excluded.expires_at`)
	if err != nil {
		return e.s.mapErr(err)
	}
	defer stmt.Close()
	for _, r := range rs {
		holder, err := json.Marshal(r.Holder)
		if err != nil {
			return fmt.Errorf("encoding holder: %w", err)
		}
		if _, err := stmt.ExecContext(ctx, r.State, string(r.Address), string(r.Mode), r.Run,
			string(holder), nanos(r.AcquiredAt), nanos(r.ExpiresAt)); err != nil {
			return fmt.Errorf("inserting %s reservation of %s: %w", r.Mode, r.Address, e.s.mapErr(err))
		}
	}
	return nil
}

const reservationColumns = `state, address, mode, run, holder, acquired_at, expires_at, fenced_at`

// scanReservations reads rows of reservationColumns.
func (e executor) scanReservations(ctx context.Context, query string, args ...any) ([]engine.Reservation, error) {
	rows, err := e.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("reading reservations: %w", e.s.mapErr(err))
	}
	defer rows.Close()
	out := []engine.Reservation{}
	for rows.Next() {
		var r engine.Reservation
		var addr, mode, holder string
		var acquired, expires int64
		var fenced sql.NullInt64
		if err := rows.Scan(&r.State, &addr, &mode, &r.Run, &holder, &acquired, &expires, &fenced); err != nil {
			return nil, fmt.Errorf("reading reservations: %w", e.s.mapErr(err))
		}
		r.Address, r.Mode = engine.Address(addr), engine.ReservationMode(mode)
		r.AcquiredAt, r.ExpiresAt = fromNanos(acquired), fromNanos(expires)
		if fenced.Valid {
			r.FencedAt = fromNanos(fenced.Int64)
		}
		if err := json.Unmarshal([]byte(holder), &r.Holder); err != nil {
			return nil, fmt.Errorf("decoding holder of run %s: %w", r.Run, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading reservations: %w", e.s.mapErr(err))
	}
	return out, nil
}

// live is the condition of a reservation live at the ? that follows it: its
// lease runs past it, or it is a fence.
const live = `(expires_at > ? OR fenced_at IS NOT NULL)`

// lapsed is the condition of a lease-held reservation lapsed at the ? that
// follows it (a fence never lapses).
const lapsed = `fenced_at IS NULL AND expires_at <= ?`

// LiveReservations returns the reservations live at now, fences included,
// of state (all states if ""), ordered by state, address, mode and run
// (store.Executor).
func (e executor) LiveReservations(ctx context.Context, state string, now time.Time) ([]engine.Reservation, error) {
	query := `SELECT ` + reservationColumns + ` FROM reservations WHERE ` + live
	args := []any{nanos(now)}
	if state != "" {
		query += ` AND state = ?`
		args = append(args, state)
	}
	return e.scanReservations(ctx, query+` ORDER BY state, address, mode, run`, args...)
}

// HoldsLive reports whether run holds a reservation live at now, or a
// fence, on state or on any state if "" (store.Executor).
func (e executor) HoldsLive(ctx context.Context, run, state string, now time.Time) (bool, error) {
	query := `SELECT EXISTS (SELECT 1 FROM reservations WHERE run = ? AND ` + live
	args := []any{run, nanos(now)}
	if state != "" {
		query += ` AND state = ?`
		args = append(args, state)
	}
	var live bool
	if err := e.q.QueryRowContext(ctx, query+`)`, args...).Scan(&live); err != nil {
		return false, e.s.mapErr(err)
	}
	return live, nil
}

// RenewReservations sets expires_at to until on run's reservations held by
// a lease live at now (fences are not renewed) (store.Executor).
func (e executor) RenewReservations(ctx context.Context, run string, now, until time.Time) (int, error) {
	res, err := e.q.ExecContext(ctx, `UPDATE reservations SET expires_at = ? WHERE run = ? AND fenced_at IS NULL AND expires_at > ?`,
		nanos(until), run, nanos(now))
	if err != nil {
		return 0, e.s.mapErr(err)
	}
	n, err := res.RowsAffected()
	return int(n), e.s.mapErr(err)
}

// DeleteReservations deletes every reservation of run held by a lease, live
// or lapsed — not its fences — and returns how many there were
// (store.Executor).
func (e executor) DeleteReservations(ctx context.Context, run string) (int, error) {
	res, err := e.q.ExecContext(ctx, `DELETE FROM reservations WHERE run = ? AND fenced_at IS NULL`, run)
	if err != nil {
		return 0, fmt.Errorf("dropping reservations: %w", e.s.mapErr(err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("dropping reservations: %w", e.s.mapErr(err))
	}
	return int(n), nil
}

// LapsedRuns returns the runs holding reservations lapsed at now, sorted
// (store.Executor).
func (e executor) LapsedRuns(ctx context.Context, now time.Time) ([]string, error) {
	rows, err := e.q.QueryContext(ctx, `SELECT DISTINCT run FROM reservations WHERE `+lapsed+` ORDER BY run`, nanos(now))
	if err != nil {
		return nil, e.s.mapErr(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var run string
		if err := rows.Scan(&run); err != nil {
			return nil, e.s.mapErr(err)
		}
		out = append(out, run)
	}
	return out, e.s.mapErr(rows.Err())
}

// DeleteLapsed deletes and returns the reservations of runs lapsed at now
// (store.Executor). The runs go in as one JSON array (json_each).
func (e executor) DeleteLapsed(ctx context.Context, now time.Time, runs []string) ([]engine.Reservation, error) {
	ids, err := json.Marshal(runs)
	if err != nil {
		return nil, fmt.Errorf("encoding runs: %w", err)
	}
	return e.scanReservations(ctx,
		`DELETE FROM reservations WHERE `+lapsed+` AND run IN (SELECT value FROM json_each(?))
		 RETURNING `+reservationColumns, nanos(now), string(ids))
}

// FenceLapsed turns run's write reservations lapsed at now into fences
// (fenced_at = now) and returns them (store.Executor).
func (e executor) FenceLapsed(ctx context.Context, run string, now time.Time) ([]engine.Reservation, error) {
	return e.scanReservations(ctx,
		`UPDATE reservations SET fenced_at = ? WHERE run = ? AND mode = 'write' AND `+lapsed+`
		 RETURNING `+reservationColumns, nanos(now), run, nanos(now))
}

// DeleteFenced deletes run's fences and returns them (store.Executor).
func (e executor) DeleteFenced(ctx context.Context, run string) ([]engine.Reservation, error) {
	return e.scanReservations(ctx,
		`DELETE FROM reservations WHERE run = ? AND fenced_at IS NOT NULL RETURNING `+reservationColumns, run)
}
