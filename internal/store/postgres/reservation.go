package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kilolock/kilolock/internal/engine"
)

// Reservations are rows; the state row lock is the guard. Acquire locks the
// state row (FOR NO KEY UPDATE) before it reads anything, then reads the
// live reservations of the state and inserts its own in the same
// transaction. Every other Acquire on the state — in any process, on any
// connection — waits on that lock, and READ COMMITTED gives each statement
// after the wait a fresh snapshot, so it sees the rows the previous holder
// inserted. No conflicting pair can therefore be held at once (docs/design.md
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
// the state row, then run rows in id order, then reservation rows. The
// algorithms are store's (store.Acquire, store.Renew, store.Release,
// store.ExpireLeases); this file holds their statements.

// InsertReservations stores rs (store.Wanted: one row per address and mode,
// all with one state, run, holder and lease) in one statement, replacing a
// row of the same run, address and mode (store.Executor).
func (e executor) InsertReservations(ctx context.Context, rs []engine.Reservation) error {
	if len(rs) == 0 {
		return nil
	}
	first := rs[0]
	holder, err := json.Marshal(first.Holder)
	if err != nil {
		return fmt.Errorf("encoding holder: %w", err)
	}
	addrs := make([]string, len(rs))
	modes := make([]string, len(rs))
	for i, r := range rs {
		addrs[i], modes[i] = string(r.Address), string(r.Mode)
	}
	if _, err := e.q.Exec(ctx,
		`INSERT INTO reservations (state, address, mode, run, holder, acquired_at, expires_at)
		 SELECT $1::text, a, m, $2::text, $3::text, $4::bigint, $5::bigint FROM unnest($6::text[], $7::text[]) AS w (a, m)
		 ON CONFLICT (run, address, mode) DO UPDATE SET
		     state = excluded.state, holder = excluded.holder,
		     acquired_at = excluded.acquired_at, expires_at = excluded.expires_at`,
		first.State, first.Run, string(holder), nanos(first.AcquiredAt), nanos(first.ExpiresAt), addrs, modes); err != nil {
		return fmt.Errorf("inserting reservations: %w", e.s.mapErr(err))
	}
	return nil
}

const reservationColumns = `state, address, mode, run, holder, acquired_at, expires_at, fenced_at`

// scanReservations reads rows of reservationColumns.
func (e executor) scanReservations(ctx context.Context, query string, args ...any) ([]engine.Reservation, error) {
	rows, err := e.q.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("reading reservations: %w", e.s.mapErr(err))
	}
	out := []engine.Reservation{}
	var r engine.Reservation
	var addr, mode, holder string
	var acquired, expires int64
	var fenced *int64
	if _, err := pgx.ForEachRow(rows, []any{&r.State, &addr, &mode, &r.Run, &holder, &acquired, &expires, &fenced}, func() error {
		r.Address, r.Mode = engine.Address(addr), engine.ReservationMode(mode)
		r.AcquiredAt, r.ExpiresAt = fromNanos(acquired), fromNanos(expires)
		r.FencedAt = time.Time{}
		if fenced != nil {
			r.FencedAt = fromNanos(*fenced)
		}
		r.Holder = engine.Holder{}
		if err := json.Unmarshal([]byte(holder), &r.Holder); err != nil {
			return fmt.Errorf("decoding holder of run %s: %w", r.Run, err)
		}
		out = append(out, r)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("reading reservations: %w", e.s.mapErr(err))
	}
	return out, nil
}

// LiveReservations returns the reservations live at now, fences included,
// of state (all states if ""), ordered by state, address, mode and run
// (store.Executor).
func (e executor) LiveReservations(ctx context.Context, state string, now time.Time) ([]engine.Reservation, error) {
	query := `SELECT ` + reservationColumns + ` FROM reservations WHERE (expires_at > $1 OR fenced_at IS NOT NULL)`
	args := []any{nanos(now)}
	if state != "" {
		query += ` AND state = $2`
		args = append(args, state)
	}
	return e.scanReservations(ctx, query+` ORDER BY state, address, mode, run`, args...)
}

// HoldsLive reports whether run holds a reservation live at now, or a
// fence, on state or on any state if "" (store.Executor).
func (e executor) HoldsLive(ctx context.Context, run, state string, now time.Time) (bool, error) {
	query := `SELECT EXISTS (SELECT 1 FROM reservations WHERE run = $1 AND (expires_at > $2 OR fenced_at IS NOT NULL)`
	args := []any{run, nanos(now)}
	if state != "" {
		query += ` AND state = $3`
		args = append(args, state)
	}
	var live bool
	if err := e.q.QueryRow(ctx, query+`)`, args...).Scan(&live); err != nil {
		return false, e.s.mapErr(err)
	}
	return live, nil
}

// RenewReservations sets expires_at to until on run's reservations held by
// a lease live at now (fences are not renewed), in one UPDATE that
// re-checks expires_at on each row it waits for (store.Executor).
func (e executor) RenewReservations(ctx context.Context, run string, now, until time.Time) (int, error) {
	tag, err := e.q.Exec(ctx, `UPDATE reservations SET expires_at = $1 WHERE run = $2 AND fenced_at IS NULL AND expires_at > $3`,
		nanos(until), run, nanos(now))
	if err != nil {
		return 0, e.s.mapErr(err)
	}
	return int(tag.RowsAffected()), nil
}

// DeleteReservations deletes every reservation of run held by a lease, live
// or lapsed — not its fences — and returns how many there were
// (store.Executor).
func (e executor) DeleteReservations(ctx context.Context, run string) (int, error) {
	tag, err := e.q.Exec(ctx, `DELETE FROM reservations WHERE run = $1 AND fenced_at IS NULL`, run)
	if err != nil {
		return 0, fmt.Errorf("dropping reservations: %w", e.s.mapErr(err))
	}
	return int(tag.RowsAffected()), nil
}

// LapsedRuns returns, without locks, the runs holding reservations lapsed
// at now, sorted (store.Executor).
func (e executor) LapsedRuns(ctx context.Context, now time.Time) ([]string, error) {
	rows, err := e.q.Query(ctx, `SELECT DISTINCT run FROM reservations WHERE fenced_at IS NULL AND expires_at <= $1 ORDER BY run`, nanos(now))
	if err != nil {
		return nil, e.s.mapErr(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, e.s.mapErr(err)
	}
	return out, nil
}

// DeleteLapsed deletes and returns the reservations of runs lapsed at now
// (store.Executor). The DELETE re-checks expires_at on a row another
// transaction renewed meanwhile, and skips a row one deleted.
func (e executor) DeleteLapsed(ctx context.Context, now time.Time, runs []string) ([]engine.Reservation, error) {
	return e.scanReservations(ctx,
		`DELETE FROM reservations WHERE fenced_at IS NULL AND expires_at <= $1 AND run = ANY($2::text[]) RETURNING `+reservationColumns,
		nanos(now), runs)
}

// FenceLapsed turns run's write reservations lapsed at now into fences
// (fenced_at = now) and returns them (store.Executor).
func (e executor) FenceLapsed(ctx context.Context, run string, now time.Time) ([]engine.Reservation, error) {
	return e.scanReservations(ctx,
		`UPDATE reservations SET fenced_at = $1 WHERE run = $2 AND mode = 'write' AND fenced_at IS NULL AND expires_at <= $1
		 RETURNING `+reservationColumns, nanos(now), run)
}

// DeleteFenced deletes run's fences and returns them (store.Executor).
func (e executor) DeleteFenced(ctx context.Context, run string) ([]engine.Reservation, error) {
	return e.scanReservations(ctx,
		`DELETE FROM reservations WHERE run = $1 AND fenced_at IS NOT NULL RETURNING `+reservationColumns, run)
}
