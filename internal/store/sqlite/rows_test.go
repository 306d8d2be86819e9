package sqlite_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
	"github.com/kilolock/kilolock/internal/store/sqlite"
	"github.com/kilolock/kilolock/internal/store/storetest"
	"github.com/kilolock/kilolock/migrations"
)

// storeWithState opens a store in a new file with one state "s" (the
// caller closes it, to reach the file itself), and returns its path.
func storeWithState(t *testing.T) (*sqlite.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kl.db")
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateState(t.Context(), storetest.NewState("s")); err != nil {
		t.Fatal(err)
	}
	return s, path
}

// TestLegacyRowsMigrate: a store written by kl before typed ends (runs.body
// and markers.body the JSON of engine.Run/Marker with the end in English)
// is rewritten by migration 4 as row version 2 — a reason it can tell
// becomes a typed end (a discard, a plan without changes), any other is
// kept as Legacy and reads as stored — and nothing else of the run is lost.
func TestLegacyRowsMigrate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, path := storeWithState(t)
	now := time.Date(2026, 11, 1, 2, 3, 4, 0, time.UTC)
	for _, r := range []engine.Run{
		{ID: "01DISCARDED", Kind: engine.KindPlan, State: "s", Actor: "erin", Status: engine.StatusSuperseded, CreatedAt: now, UpdatedAt: now},
		{ID: "01NOTHING", Kind: engine.KindApply, State: "s", Actor: "erin", Status: engine.StatusApplied, CreatedAt: now, UpdatedAt: now, PlanRun: "01DISCARDED"},
		{ID: "01FAILED", Kind: engine.KindApply, State: "s", Actor: "erin", Status: engine.StatusFailed, CreatedAt: now, UpdatedAt: now, PlanRun: "01DISCARDED"},
	} {
		if err := s.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.AddMarkers(ctx, "01DISCARDED", engine.Marker{Kind: engine.MarkerFailed, At: now}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	// What kl before typed ends stored, and its schema version 3.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	legacy := map[string]string{
		"01DISCARDED": `{"id":"01DISCARDED","kind":"plan","state":"s","actor":"erin","holder":{"host":"h","pid":1},"status":"superseded","reason":"discarded by erin: obsolete","created_at":"2026-11-01T02:03:04Z","updated_at":"2026-11-01T02:03:04Z","discarded_by":"erin","discard_why":"obsolete"}`,
		"01NOTHING":   `{"id":"01NOTHING","kind":"apply","state":"s","actor":"erin","holder":{"host":"h","pid":1},"status":"applied","reason":"the plan has no changes: nothing applied, nothing committed","created_at":"2026-11-01T02:03:04Z","updated_at":"2026-11-01T02:03:04Z","plan_run":"01DISCARDED"}`,
		"01FAILED":    `{"id":"01FAILED","kind":"apply","state":"s","actor":"erin","holder":{"host":"h","pid":1},"status":"failed","reason":"terraform apply: Error: boom","created_at":"2026-11-01T02:03:04Z","updated_at":"2026-11-01T02:03:04Z","plan_run":"01DISCARDED","committed_serial":0}`,
	}
	for id, body := range legacy {
		if _, err := db.ExecContext(ctx, `UPDATE runs SET body = ? WHERE id = ?`, body, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.ExecContext(ctx, `UPDATE markers SET body = ? WHERE run = '01DISCARDED'`,
		`{"seq":1,"at":"2026-11-01T02:03:04Z","kind":"failed","reason":"superseded: discarded by erin: obsolete"}`); err != nil {
		t.Fatal(err)
	}
	// A deviation was "drift" before: the marker's kind and field, and the
	// provenance's member.
	if _, err := db.ExecContext(ctx, `INSERT INTO markers (run, seq, at, kind, body) VALUES ('01FAILED', 1, 0, 'drift', ?)`,
		`{"seq":1,"at":"2026-11-01T02:03:04Z","kind":"drift","drift":{"unplanned":["terraform_data.x"]},"reason":"changed but not planned: terraform_data.x"}`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE versions SET provenance = ? WHERE state = 's'`,
		`{"run":"01FAILED","source_serial":0,"committed_serial":0,"commit_mode":"init","exact":false,"drift":{"unplanned":["terraform_data.x"]},"partial":false}`); err != nil {
		t.Fatal(err)
	}
	// The migrations after 5 undone by their own Down (goose): with 4 and
	// 5 forgotten below, the schema is version 3's.
	fsys, err := fs.Sub(migrations.SQLite, "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys, goose.WithDisableGlobalRegistry(true),
		goose.WithGoMigrations(store.GoMigrations(store.SQLite)...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, store.RunKindsOpenVersion); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `DELETE FROM goose_db_version WHERE version_id IN (4, 5)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	s, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("reopening (migration 4): %v", err)
	}
	defer s.Close()
	want := map[string]*engine.End{
		"01DISCARDED": {Cause: engine.CauseDiscarded, By: "erin", Why: "obsolete"},
		"01NOTHING":   {Cause: engine.CauseNothingToApply},
		"01FAILED":    {Legacy: "terraform apply: Error: boom"},
	}
	for id, end := range want {
		r, err := s.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.End == nil || !reflect.DeepEqual(*r.End, *end) || r.Actor != "erin" || r.Holder.Host != "h" {
			t.Errorf("run %s after migration: end %+v, actor %q, holder %v; want end %+v, nothing else lost", id, r.End, r.Actor, r.Holder, end)
		}
	}
	ms, err := s.Markers(ctx, "01DISCARDED")
	if err != nil || len(ms) != 1 || ms[0].End == nil || !reflect.DeepEqual(*ms[0].End, *want["01DISCARDED"]) || ms[0].Reason != "" {
		t.Errorf("discard marker after migration = %+v, %v; want the typed discard", ms, err)
	}

	dev, err := s.Markers(ctx, "01FAILED")
	if err != nil || len(dev) != 1 || dev[0].Kind != engine.MarkerDeviation || dev[0].Deviation == nil ||
		!reflect.DeepEqual(dev[0].Deviation.Unplanned, engine.AddressSet{"terraform_data.x"}) {
		t.Errorf("drift marker after migration = %+v, %v; want a deviation marker keeping its addresses", dev, err)
	}
	v, err := s.GetVersion(ctx, "s", 0)
	if err != nil || v.Provenance.Deviation == nil || !reflect.DeepEqual(v.Provenance.Deviation.Unplanned, engine.AddressSet{"terraform_data.x"}) {
		t.Errorf("provenance after migration = %+v, %v; want its deviation", v.Provenance, err)
	}

	// The rows themselves are version 2 now.
	db, err = sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var kinds int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM markers WHERE kind = 'drift'`).Scan(&kinds); err != nil || kinds != 0 {
		t.Errorf("markers of kind drift left: %d, %v; want the kind column renamed too", kinds, err)
	}
	var drift int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM versions WHERE provenance LIKE '%"drift"%'`).Scan(&drift); err != nil || drift != 0 {
		t.Errorf("provenance rows still saying drift: %d, %v", drift, err)
	}
	rows, err := db.QueryContext(ctx, `SELECT body FROM runs UNION ALL SELECT body FROM markers`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			t.Fatal(err)
		}
		var v struct {
			V int `json:"v"`
		}
		if err := json.Unmarshal([]byte(body), &v); err != nil || v.V != 2 {
			t.Errorf("row not rewritten as version 2: %s", body)
		}
	}
}

// TestRunKindsOpen: after migration 5 the schema takes a run kind it does
// not know (a later issue's backend lock); which kinds are valid is the
// engine's to say (store.CheckRun), not a CHECK constraint's.
func TestRunKindsOpen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, path := storeWithState(t)
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `INSERT INTO runs (id, kind, state, actor, status, created_at, updated_at, body)
		VALUES ('01LOCK', 'backend-lock', 's', 'erin', 'held', 0, 0, '{"v":2}')`); err != nil {
		t.Fatalf("a run of a new kind: %v", err)
	}
	var ok string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Fatalf("integrity_check = %q, %v", ok, err)
	}
}

// TestCheckIntegrity: a store whose pages were overwritten opens (its
// schema is intact) but fails CheckIntegrity with ErrInvalid, naming the
// damage and what to do; an intact store passes.
func TestCheckIntegrity(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, path := storeWithState(t)
	if err := s.CheckIntegrity(ctx); err != nil {
		t.Fatalf("CheckIntegrity of a new store: %v", err)
	}
	s.Close()
	damage(t, path)
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open of the damaged store: %v (want it to open: its schema is intact)", err)
	}
	defer s.Close()
	err = s.CheckIntegrity(ctx)
	if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "damaged") || !strings.Contains(err.Error(), "backup") {
		t.Fatalf("CheckIntegrity of a damaged store = %v; want ErrInvalid naming the damage and the backup", err)
	}
}

// damage fills a store with rows of its own and overwrites a page in the
// middle of the file, as a failing disk does.
func damage(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE filler (n INTEGER PRIMARY KEY, pad TEXT);
		WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM c WHERE n < 3000)
		INSERT INTO filler SELECT n, printf('%0200d', n) FROM c`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA journal_mode = DELETE`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	at := (fi.Size() / page / 2) * page
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5}, page), at); err != nil {
		t.Fatal(err)
	}
}
