package sqlite

import (
	"context"
	"fmt"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
)

// InsertState stores a new state row (store.Executor).
func (e executor) InsertState(ctx context.Context, st engine.State) error {
	_, err := e.q.ExecContext(ctx,
		`INSERT INTO states (name, lineage, head_serial, created_at) VALUES (?, ?, ?, ?)`,
		st.Name, st.Lineage, st.HeadSerial, nanos(st.CreatedAt))
	return e.s.mapErr(err)
}

// LockState reads the named state (store.Executor). In a transaction the
// IMMEDIATE write lock, taken at BEGIN, is the state's lock already.
func (e executor) LockState(ctx context.Context, name string) (engine.State, error) {
	return e.ReadState(ctx, name)
}

// state reads the named state. ErrNotFound if unknown.
func (e executor) ReadState(ctx context.Context, name string) (engine.State, error) {
	var st engine.State
	var created int64
	err := e.q.QueryRowContext(ctx,
		`SELECT name, lineage, head_serial, created_at FROM states WHERE name = ?`, name).
		Scan(&st.Name, &st.Lineage, &st.HeadSerial, &created)
	if err != nil {
		return engine.State{}, e.s.mapErr(err)
	}
	st.CreatedAt = fromNanos(created)
	return st, nil
}

// MoveHead sets the state's head serial to to if it is still from
// (store.Executor).
func (e executor) MoveHead(ctx context.Context, state string, from, to int64) (bool, error) {
	res, err := e.q.ExecContext(ctx, `UPDATE states SET head_serial = ? WHERE name = ? AND head_serial = ?`, to, state, from)
	if err != nil {
		return false, e.s.mapErr(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, e.s.mapErr(err)
	}
	return n == 1, nil
}

// SetLineage sets the lineage of state (store.Executor.SetLineage).
func (e executor) SetLineage(ctx context.Context, state, lineage string) error {
	res, err := e.q.ExecContext(ctx, `UPDATE states SET lineage = ? WHERE name = ?`, lineage, state)
	if err != nil {
		return e.s.mapErr(err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return e.s.mapErr(err)
	}
	if n != 1 {
		return engine.Errorf(engine.ErrNotFound, "state %s does not exist", state)
	}
	return nil
}

// ListStates returns every state ordered by name.
func (s *Store) ListStates(ctx context.Context) ([]engine.State, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, lineage, head_serial, created_at FROM states ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("listing states: %w", s.mapErr(err))
	}
	defer rows.Close()
	out := []engine.State{}
	for rows.Next() {
		var st engine.State
		var created int64
		if err := rows.Scan(&st.Name, &st.Lineage, &st.HeadSerial, &created); err != nil {
			return nil, fmt.Errorf("listing states: %w", s.mapErr(err))
		}
		st.CreatedAt = fromNanos(created)
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing states: %w", s.mapErr(err))
	}
	return out, nil
}

// InsertVersion writes version v with its changed addresses and its
// document as stored (store.Executor).
func (e executor) InsertVersion(ctx context.Context, v engine.Version, doc store.StoredDoc) error {
	args, err := store.VersionArgs(v, doc, e.s.keys)
	if err != nil {
		return err
	}
	if _, err := e.q.ExecContext(ctx,
		`INSERT INTO versions (state, serial, lineage, created_at, provenance, resources, size, snapshot, header)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, args...); err != nil {
		return fmt.Errorf("inserting version %d: %w", v.Serial, e.s.mapErr(err))
	}
	if len(v.Changed) == 0 {
		return nil
	}
	stmt, err := e.q.PrepareContext(ctx, `INSERT INTO version_changes (state, serial, address) VALUES (?, ?, ?)`)
	if err != nil {
		return e.s.mapErr(err)
	}
	defer stmt.Close()
	for _, a := range v.Changed {
		if _, err := stmt.ExecContext(ctx, v.State, v.Serial, string(a)); err != nil {
			return fmt.Errorf("inserting changed address %s of version %d: %w", a, v.Serial, e.s.mapErr(err))
		}
	}
	return nil
}

// GetVersion reads one version with its changed addresses (store.Executor).
func (e executor) GetVersion(ctx context.Context, state string, serial int64) (engine.Version, error) {
	v, err := store.ScanVersion(e.q.QueryRowContext(ctx,
		`SELECT `+store.VersionColumns+` FROM versions WHERE state = ? AND serial = ?`, state, serial))
	if err != nil {
		return engine.Version{}, e.s.mapErr(err)
	}
	changed, err := e.Changes(ctx, state, serial, serial)
	if err != nil {
		return engine.Version{}, err
	}
	v.Changed = changed[serial]
	return v, nil
}

// changes returns the changed addresses of the versions of state with
// serials in [from, to], by serial, each set sorted.
func (e executor) Changes(ctx context.Context, state string, from, to int64) (map[int64]engine.AddressSet, error) {
	rows, err := e.q.QueryContext(ctx,
		`SELECT serial, address FROM version_changes WHERE state = ? AND serial BETWEEN ? AND ? ORDER BY serial, address`,
		state, from, to)
	if err != nil {
		return nil, fmt.Errorf("reading changed addresses: %w", e.s.mapErr(err))
	}
	defer rows.Close()
	out := map[int64]engine.AddressSet{}
	for rows.Next() {
		var serial int64
		var a string
		if err := rows.Scan(&serial, &a); err != nil {
			return nil, fmt.Errorf("reading changed addresses: %w", e.s.mapErr(err))
		}
		out[serial] = append(out[serial], engine.Address(a))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading changed addresses: %w", e.s.mapErr(err))
	}
	return out, nil
}

// VersionsBefore returns versions of state below before (0: from the
// head), newest first, at most limit (store.Executor).
func (e executor) VersionsBefore(ctx context.Context, state string, before int64, limit int) ([]engine.Version, error) {
	query := `SELECT ` + store.VersionColumns + ` FROM versions WHERE state = ?`
	args := []any{state}
	if before > 0 {
		query += ` AND serial < ?`
		args = append(args, before)
	}
	return e.versions(ctx, query+` ORDER BY serial DESC LIMIT ?`, append(args, limit)...)
}

// VersionsFrom returns the versions of state above after, oldest first
// (store.Executor).
func (e executor) VersionsFrom(ctx context.Context, state string, after int64) ([]engine.Version, error) {
	return e.versions(ctx, `SELECT `+store.VersionColumns+` FROM versions WHERE state = ? AND serial > ? ORDER BY serial`, state, after)
}

// versions runs a query of store.VersionColumns.
func (e executor) versions(ctx context.Context, query string, args ...any) ([]engine.Version, error) {
	rows, err := e.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, e.s.mapErr(err)
	}
	defer rows.Close()
	var out []engine.Version
	for rows.Next() {
		v, err := store.ScanVersion(rows)
		if err != nil {
			return nil, e.s.mapErr(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, e.s.mapErr(err)
	}
	return out, nil
}
