package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
)

// The runs table keeps the queryable fields as columns and the whole
// engine.Run as JSON in body; both are written together from one value by
// insertRun/updateRun, and reads decode body. A field added to engine.Run is
// therefore stored without a migration.

// CreateRun stores a new run. CreatedAt defaults to now and UpdatedAt to
// CreatedAt; times are stored in UTC. ErrConflict if the id exists;
// ErrNotFound if its state does not exist; ErrInvalid for a run without id,
// kind, state or status.
func (s *Store) CreateRun(ctx context.Context, r engine.Run) error {
	if err := store.CheckRun(r); err != nil {
		return fmt.Errorf("creating run: %w", err)
	}
	r = store.NewRun(r, s.now())
	if err := s.insertRun(ctx, s.db, r); err != nil {
		return fmt.Errorf("creating run %s: %w", r.ID, err)
	}
	return nil
}

func runArgs(r engine.Run) ([]any, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding run: %w", err)
	}
	var pr any
	if r.PR != nil {
		b, err := json.Marshal(r.PR)
		if err != nil {
			return nil, fmt.Errorf("encoding pull request: %w", err)
		}
		pr = string(b)
	}
	var finished, committed any
	if r.FinishedAt != nil {
		finished = nanos(*r.FinishedAt)
	}
	if r.CommittedSerial != 0 {
		committed = r.CommittedSerial
	}
	return []any{
		string(r.Kind), r.State, r.Actor, string(r.Status),
		nanos(r.CreatedAt), nanos(r.UpdatedAt), finished,
		nullString(r.PlanRun), nullString(r.ApplyRun), nullString(r.ReplanOf), committed,
		pr, string(body), r.ID,
	}, nil
}

func (s *Store) insertRun(ctx context.Context, q querier, r engine.Run) error {
	args, err := runArgs(r)
	if err != nil {
		return err
	}
	_, err = q.ExecContext(ctx,
		`INSERT INTO runs (kind, state, actor, status, created_at, updated_at, finished_at,
		                   plan_run, apply_run, replan_of, committed_serial, pr, body, id)
		 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, args...)
	return s.mapErr(err)
}

func (s *Store) updateRun(ctx context.Context, q querier, r engine.Run) error {
	args, err := runArgs(r)
	if err != nil {
		return err
	}
	res, err := q.ExecContext(ctx,
		`UPDATE runs SET kind = ?, state = ?, actor = ?, status = ?, created_at = ?, updated_at = ?,
		                 finished_at = ?, plan_run = ?, apply_run = ?, replan_of = ?,
		                 committed_serial = ?, pr = ?, body = ?
		 WHERE id = ?`, args...)
	if err != nil {
		return fmt.Errorf("writing run %s: %w", r.ID, s.mapErr(err))
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("writing run %s: %w", r.ID, s.mapErr(err))
	} else if n == 0 {
		return fmt.Errorf("writing run %s: %w", r.ID, engine.ErrNotFound)
	}
	return nil
}

// GetRun returns a run. ErrNotFound if unknown.
func (s *Store) GetRun(ctx context.Context, id string) (engine.Run, error) {
	r, err := s.getRun(ctx, s.db, id)
	if err != nil {
		return engine.Run{}, fmt.Errorf("getting run %s: %w", id, err)
	}
	return r, nil
}

func (s *Store) getRun(ctx context.Context, q querier, id string) (engine.Run, error) {
	var body string
	if err := q.QueryRowContext(ctx, `SELECT body FROM runs WHERE id = ?`, id).Scan(&body); err != nil {
		return engine.Run{}, s.mapErr(err)
	}
	return decodeRun(body)
}

func decodeRun(body string) (engine.Run, error) {
	var r engine.Run
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return engine.Run{}, fmt.Errorf("decoding run: %w", err)
	}
	return r, nil
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
		r, err := decodeRun(body)
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

// UpdateRun changes run id in one write transaction: read it (the
// IMMEDIATE transaction holds the write lock, so no other writer can
// interleave), check its status is one of from (any if empty; otherwise a
// *engine.StatusError naming the run's ApplyRun as By), call fn, set
// UpdatedAt, write it back, append markers. This is how exactly one of two
// concurrent applies claims a plan. An error from fn aborts the update and is
// returned wrapped. ErrNotFound if the run is unknown; ErrInvalid if fn
// changes the id or empties a required field.
func (s *Store) UpdateRun(ctx context.Context, id string, from []engine.RunStatus, fn func(*engine.Run) error, markers ...engine.Marker) (engine.Run, error) {
	var out engine.Run
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		r, err := s.getRun(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := store.StatusAllowed(r, from); err != nil {
			return err
		}
		if fn != nil {
			if err := fn(&r); err != nil {
				return err
			}
		}
		if r.ID != id {
			return fmt.Errorf("the update changed the run id to %q: %w", r.ID, engine.ErrInvalid)
		}
		if err := store.CheckRun(r); err != nil {
			return err
		}
		now := s.now()
		r.UpdatedAt = now
		if err := s.updateRun(ctx, tx, r); err != nil {
			return err
		}
		if err := s.appendMarkers(ctx, tx, id, now, markers); err != nil {
			return err
		}
		out = r
		return nil
	})
	if err != nil {
		return engine.Run{}, fmt.Errorf("updating run %s: %w", id, err)
	}
	return out, nil
}

// AddMarkers appends markers to run in one transaction, numbering them
// after the run's last marker (Seq 1, 2, 3…) and stamping At with now when it
// is zero. ErrNotFound if the run is unknown.
func (s *Store) AddMarkers(ctx context.Context, run string, markers ...engine.Marker) error {
	err := s.withTx(ctx, func(tx *sql.Tx) error {
		if err := s.runExists(ctx, tx, run); err != nil {
			return err
		}
		return s.appendMarkers(ctx, tx, run, s.now(), markers)
	})
	if err != nil {
		return fmt.Errorf("adding markers to run %s: %w", run, err)
	}
	return nil
}

func (s *Store) runExists(ctx context.Context, q querier, run string) error {
	var one int
	return s.mapErr(q.QueryRowContext(ctx, `SELECT 1 FROM runs WHERE id = ?`, run).Scan(&one))
}

// appendMarkers inserts markers after the run's last Seq. It must run inside
// a write transaction so the Seq it reads cannot be taken by another writer.
func (s *Store) appendMarkers(ctx context.Context, tx *sql.Tx, run string, now time.Time, markers []engine.Marker) error {
	if len(markers) == 0 {
		return nil
	}
	var last int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM markers WHERE run = ?`, run).Scan(&last); err != nil {
		return fmt.Errorf("numbering markers: %w", s.mapErr(err))
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO markers (run, seq, at, kind, body) VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return s.mapErr(err)
	}
	defer stmt.Close()
	for _, m := range markers {
		last++
		m.Seq = last
		if m.At.IsZero() {
			m.At = now
		}
		m.At = m.At.UTC()
		if m.Kind == "" {
			return fmt.Errorf("marker %d has no kind: %w", m.Seq, engine.ErrInvalid)
		}
		body, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("encoding %s marker: %w", m.Kind, err)
		}
		if _, err := stmt.ExecContext(ctx, run, m.Seq, nanos(m.At), string(m.Kind), string(body)); err != nil {
			return fmt.Errorf("inserting %s marker: %w", m.Kind, s.mapErr(err))
		}
	}
	return nil
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
	if err := s.runExists(ctx, s.db, run); err != nil {
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
		var m engine.Marker
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			return nil, fmt.Errorf("decoding marker: %w", err)
		}
		out = append(out, m)
	}
	return out, s.mapErr(rows.Err())
}

// PutArtifact stores (or replaces) the named blob of run. Artifacts hold
// secrets (the saved plan): they stay in the database and are never
// printed. ErrNotFound if the run is unknown.
func (s *Store) PutArtifact(ctx context.Context, run, name string, data []byte) error {
	if name == "" {
		return fmt.Errorf("storing artifact of run %s: empty name: %w", run, engine.ErrInvalid)
	}
	if data == nil {
		data = []byte{}
	}
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO artifacts (run, name, created_at, data) VALUES (?, ?, ?, ?)
		 ON CONFLICT (run, name) DO UPDATE SET created_at = excluded.created_at, data = excluded.data`,
		run, name, nanos(s.now()), data)
	if err != nil {
		return fmt.Errorf("storing artifact %s of run %s: %w", name, run, s.mapErr(err))
	}
	return nil
}

// GetArtifact returns a blob stored by PutArtifact. ErrNotFound if absent.
func (s *Store) GetArtifact(ctx context.Context, run, name string) ([]byte, error) {
	var data []byte
	err := s.db.QueryRowContext(ctx, `SELECT data FROM artifacts WHERE run = ? AND name = ?`, run, name).Scan(&data)
	if err != nil {
		return nil, fmt.Errorf("reading artifact %s of run %s: %w", name, run, s.mapErr(err))
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}
