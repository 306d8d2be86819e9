package store_test

import (
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// migration is one embedded migration as the declaration check sees it:
// its version, its Up SQL (a SQL file's; "" for a Go migration), and the
// compatibility record after it ran.
type migration struct {
	version int64
	upSQL   string
	after   store.Compat
}

// checkDeclarations returns what is wrong with the declarations decls of
// the migrations ms (ADR 0048 rule 4): every migration declared, once, and
// every declaration a migration; Baseline only before store.CompatVersion;
// a why for each; an Expand leaves the level as it was and its SQL does
// only what expands (expandProblem); a Raise sets exactly the level it
// declares, higher than before, with a read level between 1 and it; and
// level is the highest declared level or one above (a release preparing
// the next raise).
func checkDeclarations(decls []store.Migration, ms []migration, level int) []string {
	var out []string
	byVersion := map[int64]store.Migration{}
	for _, d := range decls {
		if _, dup := byVersion[d.Version]; dup {
			out = append(out, fmt.Sprintf("migration %d is declared twice", d.Version))
		}
		byVersion[d.Version] = d
	}
	seen := map[int64]bool{}
	prev, top := store.Compat{}, 0
	for _, m := range ms {
		seen[m.version] = true
		d, ok := byVersion[m.version]
		if !ok {
			out = append(out, fmt.Sprintf("migration %d declares nothing: add it to store's declared migrations (compat.go) as expand or raise, with why", m.version))
			prev = m.after
			continue
		}
		out = append(out, checkOne(d, m, prev)...)
		top = max(top, d.Level.Level)
		prev = m.after
	}
	for _, d := range decls {
		if !seen[d.Version] {
			out = append(out, fmt.Sprintf("migration %d is declared but no store has it", d.Version))
		}
	}
	if level != top && level != top+1 {
		out = append(out, fmt.Sprintf("CompatLevel is %d but the migrations declare level %d as the highest: a binary follows the level its migrations raise the store to, or (preparing the next raise) one above", level, top))
	}
	return out
}

// checkOne checks declaration d of migration m, which ran on a store at
// prev.
func checkOne(d store.Migration, m migration, prev store.Compat) []string {
	var out []string
	if d.Why == "" {
		out = append(out, fmt.Sprintf("migration %d (%s) does not say why", d.Version, d.Kind))
	}
	switch d.Kind {
	case store.Baseline:
		if d.Version >= store.CompatVersion {
			out = append(out, fmt.Sprintf("migration %d is declared baseline, but baseline ends before migration %d: declare it expand or raise", d.Version, store.CompatVersion))
		}
		fallthrough
	case store.Expand:
		if m.after.Level != prev.Level || m.after.ReadLevel != prev.ReadLevel {
			out = append(out, fmt.Sprintf("migration %d is declared %s but changes the level from %d/%d to %d/%d: declare it raise", d.Version, d.Kind, prev.Level, prev.ReadLevel, m.after.Level, m.after.ReadLevel))
		}
		if d.Kind == store.Expand && m.upSQL != "" {
			if p := expandProblem(m.upSQL); p != "" {
				out = append(out, fmt.Sprintf("migration %d is declared expand but %s: that is a contract, declare it raise (and split it, ADR 0048 \"Expand, then contract\")", d.Version, p))
			}
		}
	case store.Raise:
		l := d.Level
		switch {
		case l.Level <= prev.Level:
			out = append(out, fmt.Sprintf("migration %d is declared raise to level %d, not above the level %d before it", d.Version, l.Level, prev.Level))
		case l.ReadLevel < 1 || l.ReadLevel > l.Level:
			out = append(out, fmt.Sprintf("migration %d raises to level %d with read level %d: want 1 to %d", d.Version, l.Level, l.ReadLevel, l.Level))
		case m.after.Level != l.Level || m.after.ReadLevel != l.ReadLevel:
			out = append(out, fmt.Sprintf("migration %d is declared raise to level %d/%d but leaves the store at %d/%d: a raise sets the level itself (store.LevelMigration)", d.Version, l.Level, l.ReadLevel, m.after.Level, m.after.ReadLevel))
		}
	default:
		out = append(out, fmt.Sprintf("migration %d has kind %q: want baseline, expand or raise", d.Version, d.Kind))
	}
	return out
}

var (
	sqlComment = regexp.MustCompile(`(?m)--.*$`)
	// contracts are the statements an expand must not hold, with what
	// they do: each can break a binary of the same level that does not
	// know it (it reads or writes what is gone, or writes what is now
	// refused).
	contracts = []struct {
		re   *regexp.Regexp
		what string
	}{
		{regexp.MustCompile(`(?i)\bDROP\b`), "it drops something"},
		{regexp.MustCompile(`(?i)\bRENAME\b`), "it renames something"},
		{regexp.MustCompile(`(?i)\bALTER\s+COLUMN\b`), "it alters a column (type, nullability, default)"},
		{regexp.MustCompile(`(?i)\bADD\s+CONSTRAINT\b`), "it adds a constraint to what older binaries write"},
		{regexp.MustCompile(`(?i)\bUNIQUE\b`), "it adds a uniqueness older binaries do not keep"},
		{regexp.MustCompile(`(?i)^\s*(UPDATE|DELETE)\b`), "it rewrites or deletes rows"},
	}
	addColumn = regexp.MustCompile(`(?is)^\s*ALTER\s+TABLE\s+\S+\s+ADD\s+(COLUMN\s+)?(.*)$`)
)

// expandProblem says what in the Up SQL of a migration declared expand is
// not an expand, or "". Conservative: it refuses what may be a contract
// (a new UNIQUE index on a new table too); what it lets through — a new
// table, an index, a nullable or defaulted column — can still change a
// rule (a fence column did), which the declaration's author judges.
func expandProblem(up string) string {
	for _, stmt := range strings.Split(sqlComment.ReplaceAllString(up, ""), ";") {
		if strings.TrimSpace(stmt) == "" {
			continue
		}
		for _, c := range contracts {
			if c.re.MatchString(stmt) {
				return c.what + " (" + strings.Join(strings.Fields(stmt), " ") + ")"
			}
		}
		if m := addColumn.FindStringSubmatch(stmt); m != nil {
			col := strings.ToUpper(m[2])
			if strings.Contains(col, "NOT NULL") && !strings.Contains(col, "DEFAULT") {
				return "it adds a NOT NULL column without a default, which older binaries' inserts leave out (" + strings.Join(strings.Fields(stmt), " ") + ")"
			}
		}
	}
	return ""
}

// upSection is the "-- +goose Up" section of a SQL migration.
func upSection(text string) string {
	up, _, _ := strings.Cut(text, "-- +goose Down")
	return up
}

// applyOneByOne applies the migrations of p one at a time on db and
// returns each with its Up SQL (from sqlFS) and the record after it.
func applyOneByOne(t *testing.T, db *sql.DB, p *goose.Provider, sqlFS fs.FS) []migration {
	t.Helper()
	ctx := t.Context()
	var out []migration
	for _, src := range p.ListSources() {
		res, err := p.UpByOne(ctx)
		if err != nil {
			t.Fatalf("applying migration %d: %v", src.Version, err)
		}
		m := migration{version: res.Source.Version}
		if res.Source.Type == goose.TypeSQL {
			b, err := fs.ReadFile(sqlFS, path.Base(res.Source.Path))
			if err != nil {
				t.Fatal(err)
			}
			m.upSQL = upSection(string(b))
		}
		m.after = readLevel(t, db, m.version)
		out = append(out, m)
	}
	if _, err := p.UpByOne(ctx); !errors.Is(err, goose.ErrNoNextVersion) {
		t.Fatalf("after the last migration: %v, want goose.ErrNoNextVersion", err)
	}
	return out
}

// readLevel reads kl_compat on db after migration v: level 0 before it
// exists or holds its row.
func readLevel(t *testing.T, db *sql.DB, v int64) store.Compat {
	t.Helper()
	if v < store.CompatVersion {
		return store.Compat{}
	}
	c, err := store.ScanCompat(db.QueryRowContext(t.Context(), store.CompatQuery), v, sql.ErrNoRows)
	if err != nil {
		t.Fatalf("reading the level after migration %d: %v", v, err)
	}
	return c
}

// TestMigrationsDeclared applies every embedded migration of both stores
// one by one and checks each does what its declaration says (ADR 0048
// rule 4): above all, that no migration that is not an expand leaves the
// level where it was.
func TestMigrationsDeclared(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fsys, err := fs.Sub(migrations.SQLite, "sqlite")
		if err != nil {
			t.Fatal(err)
		}
		db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "m.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys, goose.WithDisableGlobalRegistry(true),
			goose.WithGoMigrations(store.GoMigrations(store.SQLite)...))
		if err != nil {
			t.Fatal(err)
		}
		for _, problem := range checkDeclarations(store.Migrations(), applyOneByOne(t, db, p, fsys), store.CompatLevel) {
			t.Error(problem)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fsys, err := fs.Sub(migrations.Postgres, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := pgx.ParseConfig(pgtest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		db := stdlib.OpenDB(*cfg)
		defer db.Close()
		p, err := postgres.MigrationProvider(db, fsys)
		if err != nil {
			t.Fatal(err)
		}
		for _, problem := range checkDeclarations(store.Migrations(), applyOneByOne(t, db, p, fsys), store.CompatLevel) {
			t.Error(problem)
		}
	})
}

// TestCheckDeclarationsCatches feeds checkDeclarations wrong declarations
// and migrations: each is named.
func TestCheckDeclarationsCatches(t *testing.T) {
	t.Parallel()
	l1 := store.Compat{Level: 1, ReadLevel: 1}
	l2 := store.Compat{Level: 2, ReadLevel: 1}
	raise2 := store.Level{Level: 2, ReadLevel: 1, Why: "fences v2"}
	base := []store.Migration{{Version: 11, Kind: store.Raise, Level: store.Level{Level: 1, ReadLevel: 1}, Why: "level 1"}}
	ms := []migration{{version: 11, after: l1}}
	tests := map[string]struct {
		decl  store.Migration
		m     migration
		level int
		want  string
	}{
		"undeclared":              {m: migration{version: 12, after: l1}, level: 1, want: "migration 12 declares nothing"},
		"declared, no migration":  {decl: store.Migration{Version: 12, Kind: store.Expand, Why: "x"}, level: 1, want: "migration 12 is declared but no store has it"},
		"expand that raises":      {decl: store.Migration{Version: 12, Kind: store.Expand, Why: "x"}, m: migration{version: 12, after: l2}, level: 1, want: "declared expand but changes the level from 1/1 to 2/1"},
		"expand that drops":       {decl: store.Migration{Version: 12, Kind: store.Expand, Why: "x"}, m: migration{version: 12, upSQL: "ALTER TABLE runs DROP COLUMN body;", after: l1}, level: 1, want: "declared expand but it drops something"},
		"expand that renames":     {decl: store.Migration{Version: 12, Kind: store.Expand, Why: "x"}, m: migration{version: 12, upSQL: "ALTER TABLE runs RENAME COLUMN body TO doc;", after: l1}, level: 1, want: "it renames something"},
		"expand that rewrites":    {decl: store.Migration{Version: 12, Kind: store.Expand, Why: "x"}, m: migration{version: 12, upSQL: "-- fix\nUPDATE runs SET body = '{}';", after: l1}, level: 1, want: "it rewrites or deletes rows"},
		"expand, unique index":    {decl: store.Migration{Version: 12, Kind: store.Expand, Why: "x"}, m: migration{version: 12, upSQL: "CREATE UNIQUE INDEX x ON runs (state);", after: l1}, level: 1, want: "uniqueness"},
		"expand, NOT NULL column": {decl: store.Migration{Version: 12, Kind: store.Expand, Why: "x"}, m: migration{version: 12, upSQL: "ALTER TABLE runs ADD COLUMN x TEXT NOT NULL;", after: l1}, level: 1, want: "NOT NULL column without a default"},
		"raise that does not":     {decl: store.Migration{Version: 12, Kind: store.Raise, Level: raise2, Why: "x"}, m: migration{version: 12, after: l1}, level: 2, want: "declared raise to level 2/1 but leaves the store at 1/1"},
		"raise not above":         {decl: store.Migration{Version: 12, Kind: store.Raise, Level: store.Level{Level: 1, ReadLevel: 1}, Why: "x"}, m: migration{version: 12, after: l1}, level: 1, want: "not above the level 1 before it"},
		"read level above level":  {decl: store.Migration{Version: 12, Kind: store.Raise, Level: store.Level{Level: 2, ReadLevel: 3}, Why: "x"}, m: migration{version: 12, after: l2}, level: 2, want: "read level 3: want 1 to 2"},
		"late baseline":           {decl: store.Migration{Version: 12, Kind: store.Baseline, Why: "x"}, m: migration{version: 12, after: l1}, level: 1, want: "baseline ends before migration 10"},
		"no why":                  {decl: store.Migration{Version: 12, Kind: store.Expand}, m: migration{version: 12, after: l1}, level: 1, want: "does not say why"},
		"unknown kind":            {decl: store.Migration{Version: 12, Kind: "tweak", Why: "x"}, m: migration{version: 12, after: l1}, level: 1, want: `kind "tweak"`},
		"CompatLevel behind":      {decl: store.Migration{Version: 12, Kind: store.Raise, Level: raise2, Why: "x"}, m: migration{version: 12, after: l2}, level: 1, want: "CompatLevel is 1 but the migrations declare level 2"},
		"CompatLevel two ahead":   {level: 3, want: "CompatLevel is 3 but the migrations declare level 1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			decls, all := slices.Clone(base), slices.Clone(ms)
			if tc.decl.Version != 0 {
				decls = append(decls, tc.decl)
			}
			if tc.m.version != 0 {
				all = append(all, tc.m)
			}
			got := checkDeclarations(decls, all, tc.level)
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, tc.want) }) {
				t.Fatalf("checkDeclarations found %q; want a problem saying %q", got, tc.want)
			}
		})
	}
	for _, level := range []int{1, 2} {
		if got := checkDeclarations(base, ms, level); len(got) != 0 {
			t.Fatalf("checkDeclarations of a right set, CompatLevel %d: %q; want nothing", level, got)
		}
	}
	if got := expandProblem("CREATE TABLE t (id BIGINT NOT NULL PRIMARY KEY);\nALTER TABLE runs ADD COLUMN note TEXT;\nALTER TABLE runs ADD COLUMN n BIGINT NOT NULL DEFAULT 0;\nCREATE INDEX i ON runs (state);"); got != "" {
		t.Fatalf("expandProblem of a true expand: %q; want none", got)
	}
}

// TestRowVersionIsTheLevels: the runs.body and markers.body encoding
// (store.RowVersion, pinned by TestRowGolden) is part of the level — an
// older binary of the level rewrites rows whole (UpdateRun) and would drop
// what a newer encoding added — so a new row version comes with a raise
// (ADR 0048 rule 1).
func TestRowVersionIsTheLevels(t *testing.T) {
	t.Parallel()
	rowVersionOf := map[int]int{1: 2, 2: 2, 3: 2} // level → the row version its binaries write (levels 2 and 3, ADR 0065 and 0068, kept the encoding)
	if want, ok := rowVersionOf[store.CompatLevel]; !ok || store.RowVersion != want {
		t.Fatalf("RowVersion %d at compatibility level %d (want %d): a new row encoding raises the level; add the level and its row version here", store.RowVersion, store.CompatLevel, want)
	}
}

// TestCompatError checks the refusals' words on their own: both versions
// and levels, who raised the level and when, and what to do.
func TestCompatError(t *testing.T) {
	t.Parallel()
	b := store.Binary{Version: "0.4.1", Level: 1}
	c := store.Compat{Level: 2, ReadLevel: 1, RaisedBy: "0.6.0", Why: "fences v2"}
	access, err := b.Check(c)
	if access != store.ReadOnly || !errors.Is(err, engine.ErrReadOnly) {
		t.Fatalf("Check at a higher level, same read level: %q, %v; want read-only and ErrReadOnly", access, err)
	}
	for _, want := range []string{"(version 0.4.1, compatibility level 1) must not write", "level is 2, raised by version 0.6.0 (fences v2)", "upgrade to version 0.6.0 or later", "reading still works"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	c.ReadLevel = 2
	access, err = b.Check(c)
	if access != "" || errors.Is(err, engine.ErrReadOnly) || !strings.Contains(err.Error(), "cannot read this store: its compatibility level is 2 and readers need level 2") {
		t.Fatalf("Check at a higher read level: %q, %v; want refused", access, err)
	}
	if access, err := b.Check(store.Compat{Level: 1, ReadLevel: 1, Schema: 99}); access != store.ReadWrite || err != nil {
		t.Fatalf("Check at the same level, newer schema: %q, %v; want read-write", access, err)
	}
	prepared := store.Binary{Version: "0.5.0", Level: 2}
	if access, err := prepared.Check(store.Compat{Level: 1, ReadLevel: 1}); access != store.ReadWrite || err != nil {
		t.Fatalf("Check of a binary prepared for the next level on a store at the level below: %q, %v; want read-write", access, err)
	}
	if msg := (&store.CompatError{Binary: store.Binary{Level: 1}, Store: store.Compat{Level: 2, ReadLevel: 1}, Write: true}).Error(); !strings.Contains(msg, "version unknown") {
		t.Errorf("a refusal without versions: %q; want it to say \"version unknown\"", msg)
	}
}
