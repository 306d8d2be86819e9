package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kilolock/kilolock/internal/store"
)

// HasManifest reports whether a version is stored as a header and manifest
// (store.Executor).
func (e executor) HasManifest(ctx context.Context, state string, serial int64) (bool, error) {
	var has bool
	err := e.q.QueryRow(ctx, `SELECT header IS NOT NULL FROM versions WHERE state = $1 AND serial = $2`, state, serial).Scan(&has)
	return has, e.s.mapErr(err)
}

// VersionDoc reads how a version holds its document (store.Executor).
func (e executor) VersionDoc(ctx context.Context, state string, serial int64) (store.StoredDoc, error) {
	var d store.StoredDoc
	err := e.q.QueryRow(ctx, `SELECT size, snapshot, header FROM versions WHERE state = $1 AND serial = $2`, state, serial).
		Scan(&d.Size, &d.Snapshot, &d.Header)
	if err != nil {
		return store.StoredDoc{}, e.s.mapErr(err)
	}
	return store.OpenDoc(e.s.keys, state, serial, d)
}

// EntryHash names a resource entry: the keyring's hash (keyed with a key,
// ADR 0066) (store.Executor).
func (e executor) EntryHash(raw []byte) []byte { return e.s.keys.Hash(raw) }

// Manifest reads a version's manifest (store.Executor): one statement,
// addresses as an array.
func (e executor) Manifest(ctx context.Context, state string, serial int64, q store.ManifestQuery) ([]store.ManifestEntry, error) {
	cols := `m.address, m.resource, m.hash, e.size`
	bodies := q.Bodies
	if bodies {
		cols += `, e.body`
	}
	query := `SELECT ` + cols + ` FROM version_entries m JOIN state_entries e ON e.state = m.state AND e.hash = m.hash
		WHERE m.state = $1 AND m.since_serial <= $2 AND (m.until_serial IS NULL OR m.until_serial > $2)`
	args := []any{state, serial}
	switch {
	case q.Entries != nil:
		query += ` AND m.address = ANY($3::text[])`
		args = append(args, q.Entries)
	case q.Resources != nil:
		query += ` AND m.resource = ANY($3::text[])`
		args = append(args, q.Resources)
	}
	rows, err := e.q.Query(ctx, query+` ORDER BY m.address`, args...)
	if err != nil {
		return nil, fmt.Errorf("reading a manifest: %w", e.s.mapErr(err))
	}
	var m store.ManifestEntry
	dest := []any{&m.Address, &m.Resource, &m.Hash, &m.Size}
	if bodies {
		dest = append(dest, &m.Body)
	}
	var out []store.ManifestEntry
	if _, err := pgx.ForEachRow(rows, dest, func() error {
		if bodies {
			var err error
			if m.Body, err = e.s.keys.Open(store.EntryPlace(state, m.Hash), m.Body); err != nil {
				return err
			}
		}
		out = append(out, m)
		m = store.ManifestEntry{}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("reading a manifest: %w", e.s.mapErr(err))
	}
	return out, nil
}

// InsertEntries stores entries in one statement, skipping those the state
// has (store.Executor).
func (e executor) InsertEntries(ctx context.Context, state string, es []store.Entry, now time.Time) error {
	if len(es) == 0 {
		return nil
	}
	hashes := make([][]byte, len(es))
	sizes := make([]int64, len(es))
	bodies := make([][]byte, len(es))
	for i, en := range es {
		body, err := e.s.keys.Seal(store.EntryPlace(state, en.Hash), en.Body)
		if err != nil {
			return err
		}
		hashes[i], sizes[i], bodies[i] = en.Hash, en.Size, body
	}
	_, err := e.q.Exec(ctx, `INSERT INTO state_entries (state, hash, size, created_at, body)
		SELECT $1::text, h, s, $2::bigint, b FROM unnest($3::bytea[], $4::bigint[], $5::bytea[]) AS x (h, s, b)
		ON CONFLICT (state, hash) DO NOTHING`, state, nanos(now), hashes, sizes, bodies)
	if err != nil {
		return fmt.Errorf("storing resource entries: %w", e.s.mapErr(err))
	}
	return nil
}

// OpenEntries opens manifest intervals at serial in one statement
// (store.Executor).
func (e executor) OpenEntries(ctx context.Context, state string, serial int64, rows []store.ManifestEntry) error {
	if len(rows) == 0 {
		return nil
	}
	addrs, resources, hashes := manifestColumns(rows)
	_, err := e.q.Exec(ctx, `INSERT INTO version_entries (state, address, resource, since_serial, hash)
		SELECT $1::text, a, r, $2::bigint, h FROM unnest($3::text[], $4::text[], $5::bytea[]) AS x (a, r, h)`,
		state, serial, addrs, resources, hashes)
	if err != nil {
		return fmt.Errorf("opening entries at version %d: %w", serial, e.s.mapErr(err))
	}
	return nil
}

// CloseEntries closes open manifest intervals at serial (store.Executor).
func (e executor) CloseEntries(ctx context.Context, state string, serial int64, addresses []string) error {
	q := `UPDATE version_entries SET until_serial = $1 WHERE state = $2 AND until_serial IS NULL`
	args := []any{serial, state}
	if addresses != nil {
		q += ` AND address = ANY($3::text[])`
		args = append(args, addresses)
	}
	if _, err := e.q.Exec(ctx, q, args...); err != nil {
		return fmt.Errorf("closing entries at version %d: %w", serial, e.s.mapErr(err))
	}
	return nil
}

// ExtendEntries joins a converted version's rows to the next version's
// intervals in two statements (store.Executor): the intervals of to that
// start at to with the same entry start at from; the other rows get
// intervals [from, to) of their own (open when to is 0).
func (e executor) ExtendEntries(ctx context.Context, state string, from, to int64, rows []store.ManifestEntry) error {
	addrs, resources, hashes := manifestColumns(rows)
	var until *int64
	if to != 0 {
		until = &to
		if _, err := e.q.Exec(ctx, `UPDATE version_entries m SET since_serial = $2
			FROM unnest($4::text[], $5::bytea[]) AS x (a, h)
			WHERE m.state = $1 AND m.address = x.a AND m.since_serial = $3 AND m.hash = x.h`,
			state, from, to, addrs, hashes); err != nil {
			return fmt.Errorf("extending entries to version %d: %w", from, e.s.mapErr(err))
		}
	}
	if _, err := e.q.Exec(ctx, `INSERT INTO version_entries (state, address, resource, since_serial, until_serial, hash)
		SELECT $1::text, x.a, x.r, $2::bigint, $3::bigint, x.h FROM unnest($4::text[], $6::text[], $5::bytea[]) AS x (a, r, h)
		WHERE NOT EXISTS (SELECT 1 FROM version_entries m WHERE m.state = $1 AND m.address = x.a AND m.since_serial = $2)`,
		state, from, until, addrs, hashes, resources); err != nil {
		return fmt.Errorf("giving version %d its entries: %w", from, e.s.mapErr(err))
	}
	return nil
}

// ConvertVersion sets a version's header and empties its snapshot
// (store.Executor).
func (e executor) ConvertVersion(ctx context.Context, state string, serial int64, header []byte) error {
	header, err := e.s.keys.Seal(store.HeaderPlace(state, serial), header)
	if err != nil {
		return err
	}
	_, err = e.q.Exec(ctx, `UPDATE versions SET header = $1, snapshot = ''::bytea WHERE state = $2 AND serial = $3`, header, state, serial)
	return e.s.mapErr(err)
}

// WholeVersions lists versions stored whole, newest first (store.Executor).
func (e executor) WholeVersions(ctx context.Context, state string, below int64, limit int) ([]int64, error) {
	rows, err := e.q.Query(ctx, `SELECT serial FROM versions WHERE state = $1 AND serial < $2 AND header IS NULL
		ORDER BY serial DESC LIMIT $3`, state, below, limit)
	if err != nil {
		return nil, e.s.mapErr(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	return out, e.s.mapErr(err)
}

// NextSerial returns the serial after serial (store.Executor).
func (e executor) NextSerial(ctx context.Context, state string, serial int64) (int64, bool, error) {
	var next *int64
	if err := e.q.QueryRow(ctx, `SELECT MIN(serial) FROM versions WHERE state = $1 AND serial > $2`, state, serial).Scan(&next); err != nil {
		return 0, false, e.s.mapErr(err)
	}
	if next == nil {
		return 0, false, nil
	}
	return *next, true, nil
}

// BackfillProgress reads state's kl_backfill row (store.Executor).
func (e executor) BackfillProgress(ctx context.Context, state string) (int64, bool, bool, error) {
	var below int64
	var finished *int64
	err := e.q.QueryRow(ctx, `SELECT below, finished_at FROM kl_backfill WHERE state = $1`, state).Scan(&below, &finished)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, false, nil
	}
	if err != nil {
		return 0, false, false, e.s.mapErr(err)
	}
	return below, true, finished != nil, nil
}

// SetBackfillProgress writes state's kl_backfill row (store.Executor).
func (e executor) SetBackfillProgress(ctx context.Context, state string, below int64, finished *time.Time) error {
	var at *int64
	if finished != nil {
		n := nanos(*finished)
		at = &n
	}
	_, err := e.q.Exec(ctx, `INSERT INTO kl_backfill (state, below, finished_at) VALUES ($1, $2, $3)
		ON CONFLICT (state) DO UPDATE SET below = excluded.below, finished_at = excluded.finished_at`, state, below, at)
	return e.s.mapErr(err)
}

// StorageStats counts how state's versions are stored (store.Executor).
func (e executor) StorageStats(ctx context.Context, state string) (store.StorageStats, error) {
	var st store.StorageStats
	err := e.q.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM versions WHERE state = $1),
		(SELECT count(*) FROM versions WHERE state = $1 AND header IS NULL),
		(SELECT coalesce(sum(length(snapshot)), 0) FROM versions WHERE state = $1),
		(SELECT coalesce(sum(length(header)), 0) FROM versions WHERE state = $1),
		(SELECT count(*) FROM state_entries WHERE state = $1),
		(SELECT coalesce(sum(length(body)), 0) FROM state_entries WHERE state = $1),
		(SELECT count(*) FROM version_entries WHERE state = $1)`, state).
		Scan(&st.Versions, &st.Whole, &st.SnapshotBytes, &st.HeaderBytes, &st.Entries, &st.EntryBytes, &st.Intervals)
	st.Manifests = st.Versions - st.Whole
	return st, e.s.mapErr(err)
}

// Backfill gives every state's versions stored whole their manifests, at
// most budget versions (0: all): store.Algorithms.Backfill over the
// store's states (ADR 0068).
func (s *Store) Backfill(ctx context.Context, budget int) (store.BackfillResult, error) {
	sts, err := s.ListStates(ctx)
	if err != nil {
		return store.BackfillResult{}, err
	}
	names := make([]string, len(sts))
	for i, st := range sts {
		names[i] = st.Name
	}
	return s.Algorithms.Backfill(ctx, names, budget)
}

// manifestColumns is rows as the arrays one unnest statement binds.
func manifestColumns(rows []store.ManifestEntry) (addrs, resources []string, hashes [][]byte) {
	addrs, resources, hashes = make([]string, len(rows)), make([]string, len(rows)), make([][]byte, len(rows))
	for i, r := range rows {
		addrs[i], resources[i], hashes[i] = r.Address, r.Resource, r.Hash
	}
	return addrs, resources, hashes
}
