package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

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
	var now time.Time
	if r.CreatedAt.IsZero() {
		var err error
		if now, err = s.now(ctx, s.pool); err != nil {
			return fmt.Errorf("creating run %s: %w", r.ID, err)
		}
	}
	r = store.NewRun(r, now)
	if err := s.insertRun(ctx, s.pool, r); err != nil {
		return fmt.Errorf("creating run %s: %w", r.ID, err)
	}
	return nil
}

func runArgs(r engine.Run) ([]any, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encoding run: %w", err)
	}
	var pr *string
	if r.PR != nil {
		b, err := json.Marshal(r.PR)
		if err != nil {
			return nil, fmt.Errorf("encoding pull request: %w", err)
		}
		s := string(b)
		pr = &s
	}
	var finished, committed *int64
	if r.FinishedAt != nil {
		n := nanos(*r.FinishedAt)
		finished = &n
	}
	if r.CommittedSerial != 0 {
		committed = &r.CommittedSerial
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
	_, err = q.Exec(ctx,
		`INSERT INTO runs (kind, state, actor, status, created_at, updated_at, finished_at,
		                   plan_run, apply_run, replan_of, committed_serial, pr, body, id)
		 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`, args...)
	return s.mapErr(err)
}

func (s *Store) updateRun(ctx context.Context, q querier, r engine.Run) error {
	args, err := runArgs(r)
	if err != nil {
		return err
	}
	tag, err := q.Exec(ctx,
		`UPDATE runs SET kind = $1, state = $2, actor = $3, status = $4, created_at = $5, updated_at = $6,
		                 finished_at = $7, plan_run = $8, apply_run = $9, replan_of = $10,
		                 committed_serial = $11, pr = $12, body = $13
		 WHERE id = $14`, args...)
	if err != nil {
		return fmt.Errorf("writing run %s: %w", r.ID, s.mapErr(err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("writing run %s: %w", r.ID, engine.ErrNotFound)
	}
	return nil
}

// GetRun returns a run. ErrNotFound if unknown.
func (s *Store) GetRun(ctx context.Context, id string) (engine.Run, error) {
	r, err := s.getRun(ctx, s.pool, id)
	if err != nil {
		return engine.Run{}, fmt.Errorf("getting run %s: %w", id, err)
	}
	return r, nil
}

func (s *Store) getRun(ctx context.Context, q querier, id string) (engine.Run, error) {
	var body string
	if err := q.QueryRow(ctx, `SELECT body FROM runs WHERE id = $1`, id).Scan(&body); err != nil {
		return engine.Run{}, s.mapErr(err)
	}
	return decodeRun(body)
}

// lockRun reads a run under its row lock (FOR NO KEY UPDATE): writers of
// one run — UpdateRun, markers, Release, the lease sweep, Commit — take
// turns, and each sees the run as the previous one left it. The lock does
// not block inserts that only reference the run (its markers' foreign key).
func (s *Store) lockRun(ctx context.Context, tx pgx.Tx, id string) (engine.Run, error) {
	var body string
	if err := tx.QueryRow(ctx, `SELECT body FROM runs WHERE id = $1 FOR NO KEY UPDATE`, id).Scan(&body); err != nil {
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
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if q.State != "" {
		where = append(where, "state = "+arg(q.State))
	}
	if q.Kind != "" {
		where = append(where, "kind = "+arg(string(q.Kind)))
	}
	if len(q.Statuses) > 0 {
		sts := make([]string, len(q.Statuses))
		for i, st := range q.Statuses {
			sts[i] = string(st)
		}
		where = append(where, "status = ANY("+arg(sts)+"::text[])")
	}
	if q.Before != "" {
		where = append(where, "id < "+arg(q.Before))
	}
	query := `SELECT body FROM runs`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	query += ` ORDER BY id DESC LIMIT ` + arg(limit)

	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("listing runs: %w", s.mapErr(err))
	}
	out := []engine.Run{}
	var body string
	if _, err := pgx.ForEachRow(rows, []any{&body}, func() error {
		r, err := decodeRun(body)
		if err != nil {
			return err
		}
		out = append(out, r)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("listing runs: %w", s.mapErr(err))
	}
	return out, nil
}

// UpdateRun changes run id in one transaction: read it under its row lock
// (a concurrent UpdateRun of the same run waits, then reads what this one
// wrote), check its status is one of from (any if empty; otherwise a
// *engine.StatusError naming the run's ApplyRun as By), call fn, set
// UpdatedAt, write it back, append markers. This is how exactly one of two
// concurrent applies — in any processes — claims a plan. An error from fn
// aborts the update and is returned wrapped. ErrNotFound if the run is
// unknown; ErrInvalid if fn changes the id or empties a required field.
func (s *Store) UpdateRun(ctx context.Context, id string, from []engine.RunStatus, fn func(*engine.Run) error, markers ...engine.Marker) (engine.Run, error) {
	var out engine.Run
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		r, err := s.lockRun(ctx, tx, id)
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
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
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

// AddMarkers appends markers to run in one transaction under the run's row
// lock, numbering them after the run's last marker (Seq 1, 2, 3…) and
// stamping At with now when it is zero. ErrNotFound if the run is unknown.
func (s *Store) AddMarkers(ctx context.Context, run string, markers ...engine.Marker) error {
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := s.lockRun(ctx, tx, run); err != nil {
			return err
		}
		if len(markers) == 0 {
			return nil
		}
		now, err := s.now(ctx, tx)
		if err != nil {
			return err
		}
		return s.appendMarkers(ctx, tx, run, now, markers)
	})
	if err != nil {
		return fmt.Errorf("adding markers to run %s: %w", run, err)
	}
	return nil
}

func (s *Store) runExists(ctx context.Context, q querier, run string) error {
	var one int
	return s.mapErr(q.QueryRow(ctx, `SELECT 1 FROM runs WHERE id = $1`, run).Scan(&one))
}

// appendMarkers inserts markers after the run's last Seq, in one statement.
// The caller holds the run's row lock (lockRun), so no other transaction can
// take the Seq it reads.
func (s *Store) appendMarkers(ctx context.Context, tx pgx.Tx, run string, now time.Time, markers []engine.Marker) error {
	if len(markers) == 0 {
		return nil
	}
	var last int64
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM markers WHERE run = $1`, run).Scan(&last); err != nil {
		return fmt.Errorf("numbering markers: %w", s.mapErr(err))
	}
	seqs := make([]int64, len(markers))
	ats := make([]int64, len(markers))
	kinds := make([]string, len(markers))
	bodies := make([]string, len(markers))
	for i, m := range markers {
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
		seqs[i], ats[i], kinds[i], bodies[i] = m.Seq, nanos(m.At), string(m.Kind), string(body)
	}
	if _, err := tx.Exec(ctx,
		`INSERT INTO markers (run, seq, at, kind, body)
		 SELECT $1::text, * FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[])`,
		run, seqs, ats, kinds, bodies); err != nil {
		return fmt.Errorf("inserting markers %v: %w", kinds, s.mapErr(err))
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
	if err := s.runExists(ctx, s.pool, run); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT body FROM markers WHERE run = $1 ORDER BY seq`, run)
	if err != nil {
		return nil, s.mapErr(err)
	}
	out := []engine.Marker{}
	var body string
	if _, err := pgx.ForEachRow(rows, []any{&body}, func() error {
		var m engine.Marker
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			return fmt.Errorf("decoding marker: %w", err)
		}
		out = append(out, m)
		return nil
	}); err != nil {
		return nil, s.mapErr(err)
	}
	return out, nil
}

// PutArtifact stores (or replaces) the named blob of run. Artifacts hold
// secrets (the saved plan): they stay in the database and are never
// printed. ErrNotFound if the run is unknown; ErrInvalid for an empty name.
func (s *Store) PutArtifact(ctx context.Context, run, name string, data []byte) error {
	if name == "" {
		return fmt.Errorf("storing artifact of run %s: empty name: %w", run, engine.ErrInvalid)
	}
	if data == nil {
		data = []byte{}
	}
	var err error
	if s.clock != nil {
		_, err = s.pool.Exec(ctx,
			`INSERT INTO artifacts (run, name, created_at, data) VALUES ($1, $2, $3, $4)
			 ON CONFLICT (run, name) DO UPDATE SET created_at = excluded.created_at, data = excluded.data`,
			run, name, nanos(s.clock()), data)
	} else {
		_, err = s.pool.Exec(ctx,
			`INSERT INTO artifacts (run, name, created_at, data) VALUES ($1, $2, `+sqlNow+`, $3)
			 ON CONFLICT (run, name) DO UPDATE SET created_at = excluded.created_at, data = excluded.data`,
			run, name, data)
	}
	if err != nil {
		return fmt.Errorf("storing artifact %s of run %s: %w", name, run, s.mapErr(err))
	}
	return nil
}

// GetArtifact returns a blob stored by PutArtifact. ErrNotFound if absent.
func (s *Store) GetArtifact(ctx context.Context, run, name string) ([]byte, error) {
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT data FROM artifacts WHERE run = $1 AND name = $2`, run, name).Scan(&data)
	if err != nil {
		return nil, fmt.Errorf("reading artifact %s of run %s: %w", name, run, s.mapErr(err))
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}
