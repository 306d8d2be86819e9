package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/store"
)

// chunk is how many values one statement binds in a list (SQLite's
// default SQLITE_MAX_VARIABLE_NUMBER is 32766; a few hundred keeps
// statements short).
const chunk = 500

// HasManifest reports whether a version is stored as a header and manifest
// (store.Executor).
func (e executor) HasManifest(ctx context.Context, state string, serial int64) (bool, error) {
	var has bool
	err := e.q.QueryRowContext(ctx, `SELECT header IS NOT NULL FROM versions WHERE state = ? AND serial = ?`, state, serial).Scan(&has)
	return has, e.s.mapErr(err)
}

// VersionDoc reads how a version holds its document (store.Executor).
func (e executor) VersionDoc(ctx context.Context, state string, serial int64) (store.StoredDoc, error) {
	var d store.StoredDoc
	err := e.q.QueryRowContext(ctx, `SELECT size, snapshot, header FROM versions WHERE state = ? AND serial = ?`, state, serial).
		Scan(&d.Size, &d.Snapshot, &d.Header)
	if err != nil {
		return store.StoredDoc{}, e.s.mapErr(err)
	}
	return store.OpenDoc(e.s.keys, state, serial, d)
}

// EntryHash names a resource entry: the keyring's hash (keyed with a key,
// ADR 0066) (store.Executor).
func (e executor) EntryHash(raw []byte) []byte { return e.s.keys.Hash(raw) }

// Manifest reads a version's manifest (store.Executor).
func (e executor) Manifest(ctx context.Context, state string, serial int64, q store.ManifestQuery) ([]store.ManifestEntry, error) {
	cols := `m.address, m.resource, m.hash, e.size`
	if q.Bodies {
		cols += `, e.body`
	}
	query := `SELECT ` + cols + ` FROM version_entries m JOIN state_entries e ON e.state = m.state AND e.hash = m.hash
		WHERE m.state = ? AND m.since_serial <= ? AND (m.until_serial IS NULL OR m.until_serial > ?)`
	args := []any{state, serial, serial}
	col, list := "m.address", q.Entries
	if list == nil {
		col, list = "m.resource", q.Resources
	}
	if list == nil {
		return e.manifest(ctx, state, query+` ORDER BY m.address`, args, q.Bodies)
	}
	var out []store.ManifestEntry
	for part := range slices.Chunk(list, chunk) {
		set, more := in(part)
		rows, err := e.manifest(ctx, state, query+` AND `+col+` IN `+set, append(slices.Clone(args), more...), q.Bodies)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	slices.SortFunc(out, func(a, b store.ManifestEntry) int { return strings.Compare(a.Address, b.Address) })
	return out, nil
}

func (e executor) manifest(ctx context.Context, state, query string, args []any, bodies bool) ([]store.ManifestEntry, error) {
	rows, err := e.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("reading a manifest: %w", e.s.mapErr(err))
	}
	defer rows.Close()
	var out []store.ManifestEntry
	for rows.Next() {
		var m store.ManifestEntry
		dest := []any{&m.Address, &m.Resource, &m.Hash, &m.Size}
		if bodies {
			dest = append(dest, &m.Body)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("reading a manifest: %w", e.s.mapErr(err))
		}
		if bodies {
			var err error
			if m.Body, err = e.s.keys.Open(store.EntryPlace(state, m.Hash), m.Body); err != nil {
				return nil, err
			}
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading a manifest: %w", e.s.mapErr(err))
	}
	return out, nil
}

// InsertEntries stores entries, skipping those the state has
// (store.Executor).
func (e executor) InsertEntries(ctx context.Context, state string, es []store.Entry, now time.Time) error {
	if len(es) == 0 {
		return nil
	}
	stmt, err := e.q.PrepareContext(ctx, `INSERT INTO state_entries (state, hash, size, created_at, body) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (state, hash) DO NOTHING`)
	if err != nil {
		return e.s.mapErr(err)
	}
	defer stmt.Close()
	for _, en := range es {
		body, err := e.s.keys.Seal(store.EntryPlace(state, en.Hash), en.Body)
		if err != nil {
			return err
		}
		if _, err := stmt.ExecContext(ctx, state, en.Hash, en.Size, nanos(now), body); err != nil {
			return fmt.Errorf("storing a resource entry: %w", e.s.mapErr(err))
		}
	}
	return nil
}

// OpenEntries opens manifest intervals at serial (store.Executor).
func (e executor) OpenEntries(ctx context.Context, state string, serial int64, rows []store.ManifestEntry) error {
	if len(rows) == 0 {
		return nil
	}
	stmt, err := e.q.PrepareContext(ctx, `INSERT INTO version_entries (state, address, resource, since_serial, hash) VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return e.s.mapErr(err)
	}
	defer stmt.Close()
	for _, r := range rows {
		if _, err := stmt.ExecContext(ctx, state, r.Address, r.Resource, serial, r.Hash); err != nil {
			return fmt.Errorf("opening entry %s at version %d: %w", r.Address, serial, e.s.mapErr(err))
		}
	}
	return nil
}

// CloseEntries closes open manifest intervals at serial (store.Executor).
func (e executor) CloseEntries(ctx context.Context, state string, serial int64, addresses []string) error {
	const q = `UPDATE version_entries SET until_serial = ? WHERE state = ? AND until_serial IS NULL`
	if addresses == nil {
		_, err := e.q.ExecContext(ctx, q, serial, state)
		return e.s.mapErr(err)
	}
	for part := range slices.Chunk(addresses, chunk) {
		set, more := in(part)
		if _, err := e.q.ExecContext(ctx, q+` AND address IN `+set, append([]any{serial, state}, more...)...); err != nil {
			return fmt.Errorf("closing entries at version %d: %w", serial, e.s.mapErr(err))
		}
	}
	return nil
}

// ExtendEntries joins a converted version's rows to the next version's
// intervals (store.Executor).
func (e executor) ExtendEntries(ctx context.Context, state string, from, to int64, rows []store.ManifestEntry) error {
	var until any
	if to != 0 {
		until = to
	}
	ext, err := e.q.PrepareContext(ctx, `UPDATE version_entries SET since_serial = ?
		WHERE state = ? AND address = ? AND since_serial = ? AND hash = ?`)
	if err != nil {
		return e.s.mapErr(err)
	}
	defer ext.Close()
	ins, err := e.q.PrepareContext(ctx, `INSERT INTO version_entries (state, address, resource, since_serial, until_serial, hash) VALUES (?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return e.s.mapErr(err)
	}
	defer ins.Close()
	for _, r := range rows {
		if to != 0 {
			res, err := ext.ExecContext(ctx, from, state, r.Address, to, r.Hash)
			if err != nil {
				return fmt.Errorf("extending entry %s to version %d: %w", r.Address, from, e.s.mapErr(err))
			}
			if n, err := res.RowsAffected(); err != nil || n == 1 {
				if err != nil {
					return e.s.mapErr(err)
				}
				continue
			}
		}
		if _, err := ins.ExecContext(ctx, state, r.Address, r.Resource, from, until, r.Hash); err != nil {
			return fmt.Errorf("giving version %d entry %s: %w", from, r.Address, e.s.mapErr(err))
		}
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
	_, err = e.q.ExecContext(ctx, `UPDATE versions SET header = ?, snapshot = x'' WHERE state = ? AND serial = ?`, header, state, serial)
	return e.s.mapErr(err)
}

// WholeVersions lists versions stored whole, newest first (store.Executor).
func (e executor) WholeVersions(ctx context.Context, state string, below int64, limit int) ([]int64, error) {
	rows, err := e.q.QueryContext(ctx, `SELECT serial FROM versions WHERE state = ? AND serial < ? AND header IS NULL
		ORDER BY serial DESC LIMIT ?`, state, below, limit)
	if err != nil {
		return nil, e.s.mapErr(err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var s int64
		if err := rows.Scan(&s); err != nil {
			return nil, e.s.mapErr(err)
		}
		out = append(out, s)
	}
	return out, e.s.mapErr(rows.Err())
}

// NextSerial returns the serial after serial (store.Executor).
func (e executor) NextSerial(ctx context.Context, state string, serial int64) (int64, bool, error) {
	var next sql.NullInt64
	err := e.q.QueryRowContext(ctx, `SELECT MIN(serial) FROM versions WHERE state = ? AND serial > ?`, state, serial).Scan(&next)
	if err != nil {
		return 0, false, e.s.mapErr(err)
	}
	return next.Int64, next.Valid, nil
}

// BackfillProgress reads state's kl_backfill row (store.Executor).
func (e executor) BackfillProgress(ctx context.Context, state string) (int64, bool, bool, error) {
	var below int64
	var finished sql.NullInt64
	err := e.q.QueryRowContext(ctx, `SELECT below, finished_at FROM kl_backfill WHERE state = ?`, state).Scan(&below, &finished)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, false, nil
	}
	if err != nil {
		return 0, false, false, e.s.mapErr(err)
	}
	return below, true, finished.Valid, nil
}

// SetBackfillProgress writes state's kl_backfill row (store.Executor).
func (e executor) SetBackfillProgress(ctx context.Context, state string, below int64, finished *time.Time) error {
	var at any
	if finished != nil {
		at = nanos(*finished)
	}
	_, err := e.q.ExecContext(ctx, `INSERT INTO kl_backfill (state, below, finished_at) VALUES (?, ?, ?)
		ON CONFLICT (state) DO UPDATE SET below = excluded.below, finished_at = excluded.finished_at`, state, below, at)
	return e.s.mapErr(err)
}

// StorageStats counts how state's versions are stored (store.Executor).
func (e executor) StorageStats(ctx context.Context, state string) (store.StorageStats, error) {
	var st store.StorageStats
	err := e.q.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM versions WHERE state = ?1),
		(SELECT count(*) FROM versions WHERE state = ?1 AND header IS NULL),
		(SELECT coalesce(sum(length(snapshot)), 0) FROM versions WHERE state = ?1),
		(SELECT coalesce(sum(length(header)), 0) FROM versions WHERE state = ?1),
		(SELECT count(*) FROM state_entries WHERE state = ?1),
		(SELECT coalesce(sum(length(body)), 0) FROM state_entries WHERE state = ?1),
		(SELECT count(*) FROM version_entries WHERE state = ?1)`, state).
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
