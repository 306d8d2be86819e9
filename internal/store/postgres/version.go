package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
)

// InsertState stores a new state row (store.Executor).
func (e executor) InsertState(ctx context.Context, st engine.State) error {
	_, err := e.q.Exec(ctx,
		`INSERT INTO states (name, lineage, head_serial, created_at) VALUES ($1, $2, $3, $4)`,
		st.Name, st.Lineage, st.HeadSerial, nanos(st.CreatedAt))
	return e.s.mapErr(err)
}

// LockState reads the named state under the state row lock (FOR NO KEY
// UPDATE) that serializes commits and acquisitions on the state, waiting
// for the current holder and returning the row as it committed
// (store.Executor).
func (e executor) LockState(ctx context.Context, name string) (engine.State, error) {
	return e.state(ctx, name, true)
}

// state reads a state; lock takes the state row lock (LockState).
func (e executor) state(ctx context.Context, name string, lock bool) (engine.State, error) {
	query := `SELECT name, lineage, head_serial, created_at FROM states WHERE name = $1`
	if lock {
		query += ` FOR NO KEY UPDATE`
	}
	var st engine.State
	var created int64
	if err := e.q.QueryRow(ctx, query, name).Scan(&st.Name, &st.Lineage, &st.HeadSerial, &created); err != nil {
		return engine.State{}, e.s.mapErr(err)
	}
	st.CreatedAt = fromNanos(created)
	return st, nil
}

// MoveHead sets the state's head serial to to if it is still from
// (store.Executor).
func (e executor) MoveHead(ctx context.Context, state string, from, to int64) (bool, error) {
	tag, err := e.q.Exec(ctx, `UPDATE states SET head_serial = $1 WHERE name = $2 AND head_serial = $3`, to, state, from)
	if err != nil {
		return false, e.s.mapErr(err)
	}
	return tag.RowsAffected() == 1, nil
}

// SetLineage sets the lineage of state (store.Executor.SetLineage).
func (e executor) SetLineage(ctx context.Context, state, lineage string) error {
	tag, err := e.q.Exec(ctx, `UPDATE states SET lineage = $1 WHERE name = $2`, lineage, state)
	if err != nil {
		return e.s.mapErr(err)
	}
	if tag.RowsAffected() != 1 {
		return engine.Errorf(engine.ErrNotFound, "state %s does not exist", state)
	}
	return nil
}

// ListStates returns every state ordered by name (byte order: the column is
// COLLATE "C", as SQLite's BINARY).
func (s *Store) ListStates(ctx context.Context) ([]engine.State, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, lineage, head_serial, created_at FROM states ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("listing states: %w", s.mapErr(err))
	}
	out := []engine.State{}
	var st engine.State
	var created int64
	_, err = pgx.ForEachRow(rows, []any{&st.Name, &st.Lineage, &st.HeadSerial, &created}, func() error {
		st.CreatedAt = fromNanos(created)
		out = append(out, st)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing states: %w", s.mapErr(err))
	}
	return out, nil
}

// InsertVersion writes version v with its changed addresses (one statement
// for all of them) and its document as stored (store.Executor).
func (e executor) InsertVersion(ctx context.Context, v engine.Version, doc store.StoredDoc) error {
	args, err := store.VersionArgs(v, doc, e.s.keys)
	if err != nil {
		return err
	}
	if _, err := e.q.Exec(ctx,
		`INSERT INTO versions (state, serial, lineage, created_at, provenance, resources, size, snapshot, header)
		 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, args...); err != nil {
		return fmt.Errorf("inserting version %d: %w", v.Serial, e.s.mapErr(err))
	}
	if len(v.Changed) == 0 {
		return nil
	}
	if _, err := e.q.Exec(ctx,
		`INSERT INTO version_changes (state, serial, address) SELECT $1::text, $2::bigint, unnest($3::text[])`,
		v.State, v.Serial, v.Changed.Strings()); err != nil {
		return fmt.Errorf("inserting the changed addresses of version %d: %w", v.Serial, e.s.mapErr(err))
	}
	return nil
}

// GetVersion reads one version with its changed addresses (store.Executor).
func (e executor) GetVersion(ctx context.Context, state string, serial int64) (engine.Version, error) {
	v, err := store.ScanVersion(e.q.QueryRow(ctx,
		`SELECT `+store.VersionColumns+` FROM versions WHERE state = $1 AND serial = $2`, state, serial))
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
// serials in [from, to], by serial, each set sorted (byte order, as
// engine.AddressSet sorts).
func (e executor) Changes(ctx context.Context, state string, from, to int64) (map[int64]engine.AddressSet, error) {
	rows, err := e.q.Query(ctx,
		`SELECT serial, address FROM version_changes
		 WHERE state = $1 AND serial BETWEEN $2 AND $3 ORDER BY serial, address`,
		state, from, to)
	if err != nil {
		return nil, fmt.Errorf("reading changed addresses: %w", e.s.mapErr(err))
	}
	out := map[int64]engine.AddressSet{}
	var serial int64
	var a string
	if _, err := pgx.ForEachRow(rows, []any{&serial, &a}, func() error {
		out[serial] = append(out[serial], engine.Address(a))
		return nil
	}); err != nil {
		return nil, fmt.Errorf("reading changed addresses: %w", e.s.mapErr(err))
	}
	return out, nil
}

// ReadState returns the named state without a lock (store.Executor).
func (e executor) ReadState(ctx context.Context, name string) (engine.State, error) {
	return e.state(ctx, name, false)
}

// VersionsBefore returns versions of state below before (0: from the
// head), newest first, at most limit (store.Executor).
func (e executor) VersionsBefore(ctx context.Context, state string, before int64, limit int) ([]engine.Version, error) {
	if before > 0 {
		return e.versions(ctx,
			`SELECT `+store.VersionColumns+` FROM versions WHERE state = $1 AND serial < $2 ORDER BY serial DESC LIMIT $3`,
			state, before, limit)
	}
	return e.versions(ctx,
		`SELECT `+store.VersionColumns+` FROM versions WHERE state = $1 ORDER BY serial DESC LIMIT $2`, state, limit)
}

// VersionsFrom returns the versions of state above after, oldest first
// (store.Executor).
func (e executor) VersionsFrom(ctx context.Context, state string, after int64) ([]engine.Version, error) {
	return e.versions(ctx, `SELECT `+store.VersionColumns+` FROM versions WHERE state = $1 AND serial > $2 ORDER BY serial`, state, after)
}

// versions runs a query of store.VersionColumns.
func (e executor) versions(ctx context.Context, query string, args ...any) ([]engine.Version, error) {
	rows, err := e.q.Query(ctx, query, args...)
	if err != nil {
		return nil, e.s.mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (engine.Version, error) { return store.ScanVersion(r) })
	if err != nil {
		return nil, e.s.mapErr(err)
	}
	return out, nil
}
