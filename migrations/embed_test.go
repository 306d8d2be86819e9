package migrations_test

import (
	"database/sql"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite"

	"github.com/kilolock/kilolock/migrations"
)

// setup returns the SQLite migration set and a goose provider over a fresh
// database file.
func setup(t *testing.T) (fs.FS, *goose.Provider) {
	t.Helper()
	fsys, err := fs.Sub(migrations.SQLite, "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "m.db")+"?_foreign_keys=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatalf("NewProvider: %v", err)
	}
	return fsys, p
}

func TestSQLiteFiles(t *testing.T) {
	t.Parallel()
	fsys, _ := setup(t)
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil || len(names) == 0 {
		t.Fatalf("no migrations embedded: %v", err)
	}
	name := regexp.MustCompile(`^\d{5}_[a-z0-9_]+\.sql$`)
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			t.Parallel()
			if !name.MatchString(n) {
				t.Fatalf("file name %s: want NNNNN_snake_case.sql", n)
			}
			b, err := fs.ReadFile(fsys, n)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"-- +goose Up", "-- +goose Down"} {
				if !strings.Contains(string(b), want) {
					t.Fatalf("%s lacks %q", n, want)
				}
			}
		})
	}
}

// TestSQLiteUpDownUp applies every migration, rolls all back, and applies
// them again: each Down undoes its Up exactly.
func TestSQLiteUpDownUp(t *testing.T) {
	t.Parallel()
	_, p := setup(t)
	ctx := t.Context()
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("Up: %v", err)
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("DownTo(0): %v", err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("Up again: %v", err)
	}
	cur, target, err := p.GetVersions(ctx)
	if err != nil || cur != target {
		t.Fatalf("versions after Up: current %d, target %d, %v", cur, target, err)
	}
}
