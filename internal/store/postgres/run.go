package postgres

import (
	"context"
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
// InsertRun/SaveRun, and reads decode body. A field added to engine.Run is
// therefore stored without a migration.

// InsertRun stores a new run as given (store.Executor).
func (e executor) InsertRun(ctx context.Context, r engine.Run) error {
	args, err := store.RunArgs(r)
	if err != nil {
		return err
	}
	_, err = e.q.Exec(ctx,
		`INSERT INTO runs (kind, state, actor, status, created_at, updated_at, finished_at,
		                   plan_run, apply_run, replan_of, committed_serial, pr, body, id)
		 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`, args...)
	return e.s.mapErr(err)
}

// SaveRun writes every field of run r back (store.Executor).
func (e executor) SaveRun(ctx context.Context, r engine.Run) error {
	args, err := store.RunArgs(r)
	if err != nil {
		return err
	}
	tag, err := e.q.Exec(ctx,
		`UPDATE runs SET kind = $1, state = $2, actor = $3, status = $4, created_at = $5, updated_at = $6,
		                 finished_at = $7, plan_run = $8, apply_run = $9, replan_of = $10,
		                 committed_serial = $11, pr = $12, body = $13
		 WHERE id = $14`, args...)
	if err != nil {
		return fmt.Errorf("writing run %s: %w", r.ID, e.s.mapErr(err))
	}
	if tag.RowsAffected() == 0 {
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

// GetRun reads a run without locking it (store.Executor).
func (e executor) GetRun(ctx context.Context, id string) (engine.Run, error) {
	var body string
	if err := e.q.QueryRow(ctx, `SELECT body FROM runs WHERE id = $1`, id).Scan(&body); err != nil {
		return engine.Run{}, e.s.mapErr(err)
	}
	return store.DecodeRun(body)
}

// LockRun reads a run under its row lock (FOR NO KEY UPDATE): writers of
// one run — UpdateRun, markers, Release, the lease sweep, Commit — take
// turns, and each sees the run as the previous one left it. The lock does
// not block inserts that only reference the run (its markers' foreign key)
// (store.Executor).
func (e executor) LockRun(ctx context.Context, id string) (engine.Run, error) {
	var body string
	if err := e.q.QueryRow(ctx, `SELECT body FROM runs WHERE id = $1 FOR NO KEY UPDATE`, id).Scan(&body); err != nil {
		return engine.Run{}, e.s.mapErr(err)
	}
	return store.DecodeRun(body)
}

// LockRuns locks, in ONE statement and in id order (ORDER BY is applied
// before the row locks are taken), the runs ids and the plans (plan_run)
// the runs plansOf claimed (store.Executor).
func (e executor) LockRuns(ctx context.Context, ids, plansOf []string) error {
	if _, err := e.q.Exec(ctx,
		`SELECT id FROM runs
		 WHERE id = ANY($1::text[])
		    OR id IN (SELECT plan_run FROM runs WHERE id = ANY($2::text[]) AND plan_run IS NOT NULL)
		 ORDER BY id FOR NO KEY UPDATE`, ids, plansOf); err != nil {
		return e.s.mapErr(err)
	}
	return nil
}

// InProgressRuns returns, without locks, the runs that may be in progress
// (engine.Run.InProgress), whose own leases the sweep checks
// (store.Executor).
func (e executor) InProgressRuns(ctx context.Context) ([]engine.Run, error) {
	rows, err := e.q.Query(ctx, `SELECT body FROM runs
		WHERE (kind = 'plan' AND status = 'planning') OR (kind = 'apply' AND status IN ('waiting', 'applying'))`)
	if err != nil {
		return nil, e.s.mapErr(err)
	}
	out, err := collectRuns(rows)
	if err != nil {
		return nil, e.s.mapErr(err)
	}
	return out, nil
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
	out, err := collectRuns(rows)
	if err != nil {
		return nil, fmt.Errorf("listing runs: %w", s.mapErr(err))
	}
	return out, nil
}

// collectRuns decodes rows of one column, runs.body (store.DecodeRun);
// never nil.
func collectRuns(rows pgx.Rows) ([]engine.Run, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (engine.Run, error) {
		var body string
		if err := row.Scan(&body); err != nil {
			return engine.Run{}, err
		}
		return store.DecodeRun(body)
	})
}

func (s *Store) runExists(ctx context.Context, run string) error {
	var one int
	return s.mapErr(s.pool.QueryRow(ctx, `SELECT 1 FROM runs WHERE id = $1`, run).Scan(&one))
}

// LastMarkerSeq returns the Seq of run's last marker, 0 if none
// (store.Executor).
func (e executor) LastMarkerSeq(ctx context.Context, run string) (int64, error) {
	var last int64
	if err := e.q.QueryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM markers WHERE run = $1`, run).Scan(&last); err != nil {
		return 0, e.s.mapErr(err)
	}
	return last, nil
}

// InsertMarkers stores markers of run as given, in one statement
// (store.Executor).
func (e executor) InsertMarkers(ctx context.Context, run string, markers []engine.Marker) error {
	seqs := make([]int64, len(markers))
	ats := make([]int64, len(markers))
	kinds := make([]string, len(markers))
	bodies := make([]string, len(markers))
	for i, m := range markers {
		body, err := store.EncodeMarker(m)
		if err != nil {
			return err
		}
		seqs[i], ats[i], kinds[i], bodies[i] = m.Seq, nanos(m.At), string(m.Kind), body
	}
	if _, err := e.q.Exec(ctx,
		`INSERT INTO markers (run, seq, at, kind, body)
		 SELECT $1::text, * FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::text[])`,
		run, seqs, ats, kinds, bodies); err != nil {
		return fmt.Errorf("inserting markers %v: %w", kinds, e.s.mapErr(err))
	}
	return nil
}

// FirstMarkerAt returns when run's first marker of kind was written, and
// whether it has one (store.Executor).
func (e executor) FirstMarkerAt(ctx context.Context, run string, kind engine.MarkerKind) (time.Time, bool, error) {
	var at *int64
	if err := e.q.QueryRow(ctx, `SELECT MIN(at) FROM markers WHERE run = $1 AND kind = $2`, run, string(kind)).Scan(&at); err != nil {
		return time.Time{}, false, e.s.mapErr(err)
	}
	if at == nil {
		return time.Time{}, false, nil
	}
	return fromNanos(*at), true, nil
}

// HasMarker reports whether run has a marker of kind (store.Executor).
func (e executor) HasMarker(ctx context.Context, run string, kind engine.MarkerKind) (bool, error) {
	var has bool
	if err := e.q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM markers WHERE run = $1 AND kind = $2)`, run, string(kind)).Scan(&has); err != nil {
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
	if err := s.runExists(ctx, run); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT body FROM markers WHERE run = $1 ORDER BY seq`, run)
	if err != nil {
		return nil, s.mapErr(err)
	}
	out := []engine.Marker{}
	var body string
	if _, err := pgx.ForEachRow(rows, []any{&body}, func() error {
		m, err := store.DecodeMarker(body)
		if err != nil {
			return err
		}
		out = append(out, m)
		return nil
	}); err != nil {
		return nil, s.mapErr(err)
	}
	return out, nil
}

// PutArtifact stores (or replaces) the named blob of run. Artifacts hold
// secrets (the saved plan): they stay in the database, sealed when the
// store has a keyring (WithKeyring, ADR 0066), and are never printed. ErrNotFound if the run is unknown; ErrInvalid for an empty name.
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
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		if s.clock != nil {
			_, err = tx.Exec(ctx,
				`INSERT INTO artifacts (run, name, created_at, data) VALUES ($1, $2, $3, $4)
				 ON CONFLICT (run, name) DO UPDATE SET created_at = excluded.created_at, data = excluded.data`,
				run, name, nanos(s.clock()), data)
		} else {
			_, err = tx.Exec(ctx,
				`INSERT INTO artifacts (run, name, created_at, data) VALUES ($1, $2, `+sqlNow+`, $3)
				 ON CONFLICT (run, name) DO UPDATE SET created_at = excluded.created_at, data = excluded.data`,
				run, name, data)
		}
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
	err := s.pool.QueryRow(ctx, `SELECT data FROM artifacts WHERE run = $1 AND name = $2`, run, name).Scan(&data)
	if err != nil {
		return nil, fmt.Errorf("reading artifact %s of run %s: %w", name, run, s.mapErr(err))
	}
	if data == nil {
		data = []byte{}
	}
	return store.DecodeArtifact(s.keys, run, name, data)
}
