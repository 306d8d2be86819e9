package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
)

// CreateState stores a new state and its first version (serial init.Serial,
// commit mode init) in one transaction. ErrConflict if the name exists (two
// processes creating one state: exactly one wins); ErrInvalid for an empty
// name or lineage, or a snapshot whose serial or lineage disagree
// (store.CheckNewState).
func (s *Store) CreateState(ctx context.Context, init engine.NewState) (engine.State, error) {
	if err := store.CheckNewState(init); err != nil {
		return engine.State{}, fmt.Errorf("creating state: %w", err)
	}
	var st engine.State
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		st = engine.State{Name: init.Name, Lineage: init.Lineage, HeadSerial: init.Serial, CreatedAt: now}
		if _, err := tx.Exec(ctx,
			`INSERT INTO states (name, lineage, head_serial, created_at) VALUES ($1, $2, $3, $4)`,
			st.Name, st.Lineage, st.HeadSerial, nanos(st.CreatedAt)); err != nil {
			return s.mapErr(err)
		}
		return s.insertVersion(ctx, tx, store.InitVersion(init, now), init.Snapshot)
	})
	if err != nil {
		return engine.State{}, fmt.Errorf("creating state %s: %w", init.Name, err)
	}
	return st, nil
}

// GetState returns the named state with its head serial. ErrNotFound if
// unknown.
func (s *Store) GetState(ctx context.Context, name string) (engine.State, error) {
	st, err := s.getState(ctx, s.pool, name, false)
	if err != nil {
		return engine.State{}, fmt.Errorf("getting state %s: %w", name, err)
	}
	return st, nil
}

// getState reads a state; lock takes the state row lock (FOR NO KEY
// UPDATE) that serializes commits and acquisitions on the state, waiting
// for the current holder and returning the row as it committed.
func (s *Store) getState(ctx context.Context, q querier, name string, lock bool) (engine.State, error) {
	query := `SELECT name, lineage, head_serial, created_at FROM states WHERE name = $1`
	if lock {
		query += ` FOR NO KEY UPDATE`
	}
	var st engine.State
	var created int64
	if err := q.QueryRow(ctx, query, name).Scan(&st.Name, &st.Lineage, &st.HeadSerial, &created); err != nil {
		return engine.State{}, s.mapErr(err)
	}
	st.CreatedAt = fromNanos(created)
	return st, nil
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

// insertVersion writes version v with its changed addresses (one statement
// for all of them) and compressed snapshot.
func (s *Store) insertVersion(ctx context.Context, tx pgx.Tx, v engine.Version, snapshot []byte) error {
	prov, err := json.Marshal(v.Provenance)
	if err != nil {
		return fmt.Errorf("encoding provenance: %w", err)
	}
	z, err := store.CompressSnapshot(snapshot)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx,
		`INSERT INTO versions (state, serial, lineage, created_at, provenance, resources, size, snapshot)
		 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		v.State, v.Serial, v.Lineage, nanos(v.CreatedAt), string(prov), v.Resources, v.Size, z); err != nil {
		return fmt.Errorf("inserting version %d: %w", v.Serial, s.mapErr(err))
	}
	if len(v.Changed) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx,
		`INSERT INTO version_changes (state, serial, address) SELECT $1::text, $2::bigint, unnest($3::text[])`,
		v.State, v.Serial, v.Changed.Strings()); err != nil {
		return fmt.Errorf("inserting the changed addresses of version %d: %w", v.Serial, s.mapErr(err))
	}
	return nil
}

const versionColumns = `state, serial, lineage, created_at, provenance, resources, size`

func scanVersion(row pgx.Row) (engine.Version, error) {
	var v engine.Version
	var created int64
	var prov string
	if err := row.Scan(&v.State, &v.Serial, &v.Lineage, &created, &prov, &v.Resources, &v.Size); err != nil {
		return engine.Version{}, err
	}
	v.CreatedAt = fromNanos(created)
	if err := json.Unmarshal([]byte(prov), &v.Provenance); err != nil {
		return engine.Version{}, fmt.Errorf("decoding provenance of version %d: %w", v.Serial, err)
	}
	return v, nil
}

// GetVersion returns one version with its changed addresses, without its
// snapshot. ErrNotFound if the state or serial is unknown.
func (s *Store) GetVersion(ctx context.Context, state string, serial int64) (engine.Version, error) {
	v, err := s.getVersion(ctx, s.pool, state, serial)
	if err != nil {
		return engine.Version{}, fmt.Errorf("getting version %d of state %s: %w", serial, state, err)
	}
	return v, nil
}

func (s *Store) getVersion(ctx context.Context, q querier, state string, serial int64) (engine.Version, error) {
	v, err := scanVersion(q.QueryRow(ctx,
		`SELECT `+versionColumns+` FROM versions WHERE state = $1 AND serial = $2`, state, serial))
	if err != nil {
		return engine.Version{}, s.mapErr(err)
	}
	changed, err := s.changes(ctx, q, state, serial, serial)
	if err != nil {
		return engine.Version{}, err
	}
	v.Changed = changed[serial]
	return v, nil
}

// changes returns the changed addresses of the versions of state with
// serials in [from, to], by serial, each set sorted (byte order, as
// engine.AddressSet sorts).
func (s *Store) changes(ctx context.Context, q querier, state string, from, to int64) (map[int64]engine.AddressSet, error) {
	rows, err := q.Query(ctx,
		`SELECT serial, address FROM version_changes
		 WHERE state = $1 AND serial BETWEEN $2 AND $3 ORDER BY serial, address`,
		state, from, to)
	if err != nil {
		return nil, fmt.Errorf("reading changed addresses: %w", s.mapErr(err))
	}
	out := map[int64]engine.AddressSet{}
	var serial int64
	var a string
	if _, err := pgx.ForEachRow(rows, []any{&serial, &a}, func() error {
		out[serial] = append(out[serial], engine.Address(a))
		return nil
	}); err != nil {
		return nil, fmt.Errorf("reading changed addresses: %w", s.mapErr(err))
	}
	return out, nil
}

// Snapshot returns the Terraform state v4 document of a version,
// decompressed. ErrNotFound if the state or serial is unknown.
func (s *Store) Snapshot(ctx context.Context, state string, serial int64) ([]byte, error) {
	doc, err := s.snapshot(ctx, s.pool, state, serial)
	if err != nil {
		return nil, fmt.Errorf("reading snapshot of version %d of state %s: %w", serial, state, err)
	}
	return doc, nil
}

func (s *Store) snapshot(ctx context.Context, q querier, state string, serial int64) ([]byte, error) {
	var z []byte
	var size int64
	err := q.QueryRow(ctx, `SELECT size, snapshot FROM versions WHERE state = $1 AND serial = $2`, state, serial).
		Scan(&size, &z)
	if err != nil {
		return nil, s.mapErr(err)
	}
	return store.DecompressSnapshot(z, size)
}

// History returns versions of state newest first, with their changed
// addresses: serials below q.Before (0: from the head), at most q.Limit
// (0: 50). ErrNotFound if the state is unknown; ErrInvalid for a negative
// limit.
func (s *Store) History(ctx context.Context, state string, q engine.HistoryQuery) ([]engine.Version, error) {
	out, err := s.history(ctx, state, q)
	if err != nil {
		return nil, fmt.Errorf("reading history of state %s: %w", state, err)
	}
	return out, nil
}

func (s *Store) history(ctx context.Context, state string, q engine.HistoryQuery) ([]engine.Version, error) {
	limit, err := store.Limit(q.Limit)
	if err != nil {
		return nil, err
	}
	if _, err := s.getState(ctx, s.pool, state, false); err != nil {
		return nil, err
	}
	if q.Before > 0 {
		return s.versions(ctx, state,
			`SELECT `+versionColumns+` FROM versions WHERE state = $1 AND serial < $2 ORDER BY serial DESC LIMIT $3`,
			state, q.Before, limit)
	}
	return s.versions(ctx, state,
		`SELECT `+versionColumns+` FROM versions WHERE state = $1 ORDER BY serial DESC LIMIT $2`, state, limit)
}

// VersionsAfter returns every version of state with serial > after, oldest
// first, with changed addresses: the since-plan input (ADR D3). ErrNotFound
// if the state is unknown.
func (s *Store) VersionsAfter(ctx context.Context, state string, after int64) ([]engine.Version, error) {
	if _, err := s.getState(ctx, s.pool, state, false); err != nil {
		return nil, fmt.Errorf("reading versions of state %s after %d: %w", state, after, err)
	}
	out, err := s.versions(ctx, state,
		`SELECT `+versionColumns+` FROM versions WHERE state = $1 AND serial > $2 ORDER BY serial`, state, after)
	if err != nil {
		return nil, fmt.Errorf("reading versions of state %s after %d: %w", state, after, err)
	}
	return out, nil
}

// versions runs a version query and fills each row's changed addresses.
// Versions are immutable and written with their changes in one transaction,
// so the two reads need no shared snapshot.
func (s *Store) versions(ctx context.Context, state, query string, args ...any) ([]engine.Version, error) {
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, s.mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (engine.Version, error) { return scanVersion(r) })
	if err != nil {
		return nil, s.mapErr(err)
	}
	if len(out) == 0 {
		return []engine.Version{}, nil
	}
	lo, hi := out[0].Serial, out[len(out)-1].Serial
	if lo > hi {
		lo, hi = hi, lo
	}
	changed, err := s.changes(ctx, s.pool, state, lo, hi)
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Changed = changed[out[i].Serial]
	}
	return out, nil
}

// Commit writes version head+1 of req.State in ONE transaction (DESIGN.md
// apply step 6; ADR D5). It first locks the state row (FOR NO KEY UPDATE):
// another commit or acquisition on the state — in this process or any
// other — waits until this one ends, and then sees the head it wrote, so
// serials stay contiguous and no merge is lost. In order: lock the state
// and then the run, read the clock, check the run's live reservations on
// the state when req.RequireReservations (ErrLeaseLost when it holds none),
// load the head and its snapshot, call req.Merge, check the result
// (snapshot serial and lineage, provenance serial: store.CheckSnapshot,
// store.CommitProvenance), insert the version, its changed addresses and
// provenance, move the head, apply the run update, drop the run's
// reservations, and append Merge's markers and a "released" marker when it
// held any. Merge runs under the state lock: it must be quick and do no
// I/O. On any error nothing is written. ErrNotFound for an unknown state or
// run; ErrInvalid without a Merge.
func (s *Store) Commit(ctx context.Context, req engine.CommitRequest) (engine.Version, error) {
	if req.Merge == nil {
		return engine.Version{}, fmt.Errorf("committing run %s to state %s: no merge function: %w", req.Run, req.State, engine.ErrInvalid)
	}
	var out engine.Version
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		v, err := s.commit(ctx, tx, req)
		out = v
		return err
	})
	if err != nil {
		return engine.Version{}, fmt.Errorf("committing run %s to state %s: %w", req.Run, req.State, err)
	}
	return out, nil
}

func (s *Store) commit(ctx context.Context, tx pgx.Tx, req engine.CommitRequest) (engine.Version, error) {
	st, err := s.getState(ctx, tx, req.State, true)
	if err != nil {
		return engine.Version{}, fmt.Errorf("locking state head: %w", err)
	}
	run, err := s.lockRun(ctx, tx, req.Run)
	if err != nil {
		return engine.Version{}, fmt.Errorf("reading run: %w", err)
	}
	now, err := s.now(ctx, tx)
	if err != nil {
		return engine.Version{}, err
	}
	if req.RequireReservations {
		var live int
		if err := tx.QueryRow(ctx,
			`SELECT count(*) FROM reservations WHERE run = $1 AND state = $2 AND expires_at > $3`,
			req.Run, req.State, nanos(now)).Scan(&live); err != nil {
			return engine.Version{}, s.mapErr(err)
		}
		if live == 0 {
			return engine.Version{}, fmt.Errorf("run holds no live reservation on the state: %w", engine.ErrLeaseLost)
		}
	}
	head, err := s.getVersion(ctx, tx, st.Name, st.HeadSerial)
	if err != nil {
		return engine.Version{}, fmt.Errorf("reading head version %d: %w", st.HeadSerial, err)
	}
	doc, err := s.snapshot(ctx, tx, st.Name, st.HeadSerial)
	if err != nil {
		return engine.Version{}, fmt.Errorf("reading head snapshot %d: %w", st.HeadSerial, err)
	}
	res, err := req.Merge(head, doc)
	if err != nil {
		return engine.Version{}, fmt.Errorf("merging into version %d: %w", head.Serial, err)
	}
	serial := head.Serial + 1
	if err := store.CheckSnapshot(res.Snapshot, st.Lineage, serial); err != nil {
		return engine.Version{}, err
	}
	prov, err := store.CommitProvenance(res.Provenance, req.Run, serial)
	if err != nil {
		return engine.Version{}, err
	}
	v := engine.Version{
		State:      st.Name,
		Serial:     serial,
		Lineage:    st.Lineage,
		CreatedAt:  now,
		Changed:    engine.NewAddressSet(res.Changed...),
		Provenance: prov,
		Resources:  res.Resources,
		Size:       int64(len(res.Snapshot)),
	}
	if err := s.insertVersion(ctx, tx, v, res.Snapshot); err != nil {
		return engine.Version{}, err
	}
	moved, err := tx.Exec(ctx, `UPDATE states SET head_serial = $1 WHERE name = $2 AND head_serial = $3`,
		serial, st.Name, head.Serial)
	if err != nil {
		return engine.Version{}, fmt.Errorf("moving head to %d: %w", serial, s.mapErr(err))
	}
	if moved.RowsAffected() != 1 {
		// Cannot happen under the row lock; refuse rather than fork history.
		return engine.Version{}, fmt.Errorf("moving head to %d: head moved during the commit: %w", serial, engine.ErrConflict)
	}
	if res.UpdateRun != nil {
		if err := res.UpdateRun(&run); err != nil {
			return engine.Version{}, fmt.Errorf("updating run %s: %w", req.Run, err)
		}
	}
	if run.ID != req.Run {
		return engine.Version{}, fmt.Errorf("run update changed the run id to %q: %w", run.ID, engine.ErrInvalid)
	}
	if err := store.CheckRun(run); err != nil {
		return engine.Version{}, err
	}
	run.UpdatedAt = now
	if err := s.updateRun(ctx, tx, run); err != nil {
		return engine.Version{}, err
	}
	markers := append([]engine.Marker{}, res.Markers...)
	dropped, err := s.dropReservations(ctx, tx, req.Run)
	if err != nil {
		return engine.Version{}, err
	}
	if dropped > 0 {
		markers = append(markers, store.ReleasedMarker(dropped, now))
	}
	if err := s.appendMarkers(ctx, tx, req.Run, now, markers); err != nil {
		return engine.Version{}, err
	}
	return v, nil
}
