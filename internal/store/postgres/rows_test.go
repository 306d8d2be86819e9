package postgres_test

import (
	"database/sql"
	"io/fs"
	"reflect"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx", for goose

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/store/storetest"
	"github.com/kilolock/kilolock/migrations"
)

// TestLegacyRowsMigrate: migration 4 rewrites a PostgreSQL store written
// before typed ends and the deviation rename, as it does SQLite's
// (internal/store/sqlite TestLegacyRowsMigrate): a discard becomes a
// typed end, any other reason Legacy, a "drift" marker and provenance a
// deviation.
func TestLegacyRowsMigrate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dsn := pgtest.DSN(t)
	s, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateState(ctx, storetest.NewState("s")); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 1, 2, 3, 4, 0, time.UTC)
	for _, id := range []string{"01DISCARDED", "01FAILED"} {
		if err := s.CreateRun(ctx, engine.Run{ID: id, Kind: engine.KindPlan, State: "s", Actor: "erin", Status: engine.StatusSuperseded, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	// The migrations after 5 undone by their own Down (goose): with 4 and
	// 5 forgotten below, the schema is version 3's.
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := fs.Sub(migrations.Postgres, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	p, err := postgres.MigrationProvider(db, fsys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, store.RunKindsOpenVersion); err != nil {
		t.Fatal(err)
	}
	db.Close()

	conn := raw(t, dsn)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`UPDATE runs SET body = $1 WHERE id = '01DISCARDED'`, []any{`{"id":"01DISCARDED","kind":"plan","state":"s","actor":"erin","status":"superseded","reason":"discarded by erin","created_at":"2026-11-01T02:03:04Z","updated_at":"2026-11-01T02:03:04Z","discarded_by":"erin"}`}},
		{`UPDATE runs SET body = $1 WHERE id = '01FAILED'`, []any{`{"id":"01FAILED","kind":"plan","state":"s","actor":"erin","status":"failed","reason":"terraform plan: boom","created_at":"2026-11-01T02:03:04Z","updated_at":"2026-11-01T02:03:04Z"}`}},
		{`INSERT INTO markers (run, seq, at, kind, body) VALUES ('01FAILED', 1, 0, 'drift', $1)`, []any{`{"seq":1,"at":"2026-11-01T02:03:04Z","kind":"drift","drift":{"unplanned":["terraform_data.x"]}}`}},
		{`UPDATE versions SET provenance = $1 WHERE state = 's'`, []any{`{"source_serial":0,"committed_serial":0,"commit_mode":"init","exact":false,"drift":{"unplanned":["terraform_data.x"]},"partial":false}`}},
		{`DELETE FROM goose_db_version WHERE version_id IN (4, 5)`, nil},
	} {
		if _, err := conn.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatalf("%s: %v", q.sql, err)
		}
	}

	s, err = postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("reopening (migration 4): %v", err)
	}
	defer s.Close()
	for id, want := range map[string]*engine.End{
		"01DISCARDED": {Cause: engine.CauseDiscarded, By: "erin"},
		"01FAILED":    {Legacy: "terraform plan: boom"},
	} {
		r, err := s.GetRun(ctx, id)
		if err != nil || r.End == nil || !reflect.DeepEqual(*r.End, *want) || r.Actor != "erin" {
			t.Errorf("run %s after migration = %+v, %v; want end %+v", id, r, err, want)
		}
	}
	ms, err := s.Markers(ctx, "01FAILED")
	if err != nil || len(ms) != 1 || ms[0].Kind != engine.MarkerDeviation || ms[0].Deviation == nil {
		t.Errorf("drift marker after migration = %+v, %v; want a deviation", ms, err)
	}
	v, err := s.GetVersion(ctx, "s", 0)
	if err != nil || v.Provenance.Deviation == nil {
		t.Errorf("provenance after migration = %+v, %v; want its deviation", v.Provenance, err)
	}
	var left int
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM markers WHERE kind = 'drift') + (SELECT count(*) FROM versions WHERE provenance LIKE '%"drift"%') +
		(SELECT count(*) FROM runs WHERE body NOT LIKE '{"v":2,%')`).Scan(&left); err != nil || left != 0 {
		t.Errorf("rows not rewritten: %d, %v", left, err)
	}
}

// TestRunKindsOpen: after migration 5 the schema takes a run kind it does
// not know; CheckRun says which kinds are valid.
func TestRunKindsOpen(t *testing.T) {
	t.Parallel()
	s, dsn := setup(t)
	if _, err := s.CreateState(t.Context(), storetest.NewState("s")); err != nil {
		t.Fatal(err)
	}
	if _, err := raw(t, dsn).Exec(t.Context(), `INSERT INTO runs (id, kind, state, actor, status, created_at, updated_at, body)
		VALUES ('01LOCK', 'backend-lock', 's', 'erin', 'held', 0, 0, '{"v":2}')`); err != nil {
		t.Fatalf("a run of a new kind: %v", err)
	}
}
