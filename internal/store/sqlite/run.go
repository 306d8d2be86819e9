package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
)

// The runs table keeps the queryable fields as columns and the whole
// engine.Run as JSON in body; both are written together from one value by
// InsertRun/SaveRun, and reads decode body. A field added to engine.Run is
// therefore stored without a migration.

// InsertRun stores a new run as given (store.Executor).
func (e executor) InsertRun(ctx context.Context, r engine.Run) error {
	args, err := store.RunArgs(r)
	if err != nil {
		return err
	}
	_, err = e.q.ExecContext(ctx,
		`INSERT INTO runs (kind, state, actor, status, created_at, updated_at, finished_at,
		                   plan_run, apply_run, replan_of, committed_serial, pr, body, id)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, args...)
	return e.s.mapErr(err)
}

// SaveRun writes every field of run r back (store.Executor).
func (e executor) SaveRun(ctx context.Context, r engine.Run) error {
	args, err := store.RunArgs(r)
	if err != nil {
		return err
	}
	res, err := e.q.ExecContext(ctx,
		`UPDATE runs SET kind = ?, state = ?, actor = ?, status = ?, created_at = ?, updated_at = ?,
		                 finished_at = ?, plan_run = ?, apply_run = ?, replan_of = ?,
		                 committed_serial = ?, pr = ?, body = ?
		 WHERE id = ?`, args...)
	if err != nil {
		return fmt.Errorf("writing run %s: %w", r.ID, e.s.mapErr(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("writing run %s: %w", r.ID, e.s.mapErr(err))
	} else if n == 0 {
		return engine.Errorf(engine.ErrNotFound, "writing run %s", r.ID)
	}
	return nil
}

// GetRun returns a run. ErrNotFound if unknown.
func (s *Store) GetRun(ctx context.Context, id string) (engine.Run, error) {
	r, err := s.database().GetRun(ctx, id)
	if err != nil {
		return engine.Run{}, fmt.Errorf("getting run %s: %w", id, err)
	}
	return r, nil
}

// GetRun reads a run (store.Executor).
func (e executor) GetRun(ctx context.Context, id string) (engine.Run, error) {
	var body string
	if err := e.q.QueryRowContext(ctx, `SELECT body FROM runs WHERE id = ?`, id).Scan(&body); err != nil {
		return engine.Run{}, e.s.mapErr(err)
	}
	return store.DecodeRun(body)
}

// LockRun reads a run (store.Executor): in a transaction the IMMEDIATE
// write lock, taken at BEGIN, is every run's lock already.
func (e executor) LockRun(ctx context.Context, id string) (engine.Run, error) {
	return e.GetRun(ctx, id)
}

// LockRuns does nothing (store.Executor): the IMMEDIATE write lock, taken
// at BEGIN, holds every run already.
func (e executor) LockRuns(ctx context.Context, ids, plansOf []string) error { return nil }

// InProgressRuns returns the runs that may be in progress
// (engine.Run.InProgress), whose own leases the sweep checks
// (store.Executor).
func (e executor) InProgressRuns(ctx context.Context) ([]engine.Run, error) {
	rows, err := e.q.QueryContext(ctx, `SELECT body FROM runs
		WHERE (kind = 'plan' AND status = 'planning') OR (kind = 'apply' AND status IN ('waiting', 'applying'))`)
	if err != nil {
		return nil, e.s.mapErr(err)
	}
	defer rows.Close()
	var out []engine.Run
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, e.s.mapErr(err)
		}
		r, err := store.DecodeRun(body)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, e.s.mapErr(rows.Err())
}

// ListRuns returns runs newest first (ids are ULIDs: id order is creation
// order), filtered by q: state, kind, any of q.Statuses, ids below q.Before;
// at most q.Limit (0: 50). ErrInvalid for a negative limit.
func (s *Store) ListRuns(ctx context.Context, q engine.RunQuery) ([]engine.Run, error) {
	limit, err := store.Limit(q.Limit)
	if err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	var where []string
	var args []any
	if q.State != "" {
		where, args = append(where, "state = ?"), append(args, q.State)
	}
	if q.Kind != "" {
		where, args = append(where, "kind = ?"), append(args, string(q.Kind))
	}
	if len(q.Statuses) > 0 {
		marks := strings.TrimSuffix(strings.Repeat("?, ", len(q.Statuses)), ", ")
		where = append(where, "status IN ("+marks+")")
		for _, st := range q.Statuses {
			args = append(args, string(st))
		}
	}
	if q.Before != "" {
		where, args = append(where, "id < ?"), append(args, q.Before)
	}
	query := `SELECT body FROM runs`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY id DESC LIMIT ?`
	args = append(args, limit)

	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("listing runs: %w", s.mapErr(err))
	}
	defer rows.Close()
	out := []engine.Run{}
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("listing runs: %w", s.mapErr(err))
		}
		r, err := store.DecodeRun(body)
		if err != nil {
			return nil, fmt.Errorf("listing runs: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing runs: %w", s.mapErr(err))
	}
	return out, nil
}

// LastMarkerSeq returns the Seq of run's last marker, 0 if none
// (store.Executor).
func (e executor) LastMarkerSeq(ctx context.Context, run string) (int64, error) {
	var last int64
	if err := e.q.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM markers WHERE run = ?`, run).Scan(&last); err != nil {
		return 0, e.s.mapErr(err)
	}
	return last, nil
}

// InsertMarkers stores markers of run as given (store.Executor).
func (e executor) InsertMarkers(ctx context.Context, run string, markers []engine.Marker) error {
	stmt, err := e.q.PrepareContext(ctx, `INSERT INTO markers (run, seq, at, kind, body) VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return e.s.mapErr(err)
	}
	defer stmt.Close()
	for _, m := range markers {
		body, err := store.EncodeMarker(m)
		if err != nil {
			return err
		}
		if _, err := stmt.ExecContext(ctx, run, m.Seq, nanos(m.At), string(m.Kind), body); err != nil {
			return fmt.Errorf("inserting %s marker: %w", m.Kind, e.s.mapErr(err))
		}
	}
	return nil
}

// FirstMarkerAt returns when run's first marker of kind was written, and
// whether it has one (store.Executor).
func (e executor) FirstMarkerAt(ctx context.Context, run string, kind engine.MarkerKind) (time.Time, bool, error) {
	var at sql.NullInt64
	if err := e.q.QueryRowContext(ctx, `SELECT MIN(at) FROM markers WHERE run = ? AND kind = ?`, run, string(kind)).Scan(&at); err != nil {
		return time.Time{}, false, e.s.mapErr(err)
	}
	if !at.Valid {
		return time.Time{}, false, nil
	}
	return fromNanos(at.Int64), true, nil
}

// HasMarker reports whether run has a marker of kind (store.Executor).
func (e executor) HasMarker(ctx context.Context, run string, kind engine.MarkerKind) (bool, error) {
	var has bool
	if err := e.q.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM markers WHERE run = ? AND kind = ?)`, run, string(kind)).Scan(&has); err != nil {
		return false, e.s.mapErr(err)
	}
	return has, nil
}

// Markers returns a run's markers in Seq order. ErrNotFound if the run is
// unknown.
func (s *Store) Markers(ctx context.Context, run string) ([]engine.Marker, error) {
	out, err := s.markers(ctx, run)
	if err != nil {
		return nil, fmt.Errorf("reading markers of run %s: %w", run, err)
	}
	return out, nil
}

func (s *Store) markers(ctx context.Context, run string) ([]engine.Marker, error) {
	if _, err := s.database().GetRun(ctx, run); err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT body FROM markers WHERE run = ? ORDER BY seq`, run)
	if err != nil {
		return nil, s.mapErr(err)
	}
	defer rows.Close()
	out := []engine.Marker{}
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, s.mapErr(err)
		}
		m, err := store.DecodeMarker(body)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, s.mapErr(rows.Err())
}

// PutArtifact stores (or replaces) the named blob of run. Artifacts hold
// secrets (the saved plan): they stay in the database, sealed when the
// store has a keyring (WithKeyring, ADR 0066), and are never printed.
// ErrNotFound if the run is unknown.
func (s *Store) PutArtifact(ctx context.Context, run, name string, data []byte) error {
	if name == "" {
		return engine.Errorf(engine.ErrInvalid, "storing artifact of run %s: empty name", run)
	}
	if data == nil {
		data = []byte{}
	}
	data, err := store.EncodeArtifact(s.keys, run, name, data)
	if err != nil {
		return fmt.Errorf("storing artifact %s of run %s: %w", name, run, err)
	}
	err = s.withTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO artifacts (run, name, created_at, data) VALUES (?, ?, ?, ?)
			 ON CONFLICT (run, name) DO UPDATE SET created_at = excluded.created_at, data = excluded.data`,
			run, name, nanos(s.now()), data)
		return s.mapErr(err)
	})
	if err != nil {
		return fmt.Errorf("storing artifact %s of run %s: %w", name, run, s.mapErr(err))
	}
	return nil
}

// GetArtifact returns a blob stored by PutArtifact, opened (a clear one,
// stored before a key was configured, as it is). ErrNotFound if absent; a
// sealed blob the keyring cannot open is an error naming it and the
// variable (seal.Keyring.Open).
func (s *Store) GetArtifact(ctx context.Context, run, name string) ([]byte, error) {
	var data []byte
	err := s.db.QueryRowContext(ctx, `SELECT data FROM artifacts WHERE run = ? AND name = ?`, run, name).Scan(&data)
	if err != nil {
		return nil, fmt.Errorf("reading artifact %s of run %s: %w", name, run, s.mapErr(err))
	}
	if data == nil {
		data = []byte{}
	}
	return store.DecodeArtifact(s.keys, run, name, data)
}
