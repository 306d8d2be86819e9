package migrations_test

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/migrations"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// setupPostgres returns the PostgreSQL migration set and a goose provider
// over a fresh schema of the test server, with the *sql.DB behind it.
func setupPostgres(t *testing.T) (fs.FS, *goose.Provider, *sql.DB) {
	t.Helper()
	fsys, err := fs.Sub(migrations.Postgres, "postgres")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pgx.ParseConfig(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	db := stdlib.OpenDB(*cfg)
	t.Cleanup(func() { db.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatalf("NewProvider: %v", err)
	}
	return fsys, p, db
}

// TestPostgresFiles checks the PostgreSQL set is numbered and named like
// the SQLite set, file for file, with both goose sections.
func TestPostgresFiles(t *testing.T) {
	t.Parallel()
	pg, err := fs.Glob(migrations.Postgres, "postgres/*.sql")
	if err != nil || len(pg) == 0 {
		t.Fatalf("no PostgreSQL migrations embedded: %v", err)
	}
	lite, err := fs.Glob(migrations.SQLite, "sqlite/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	base := func(names []string) []string {
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = filepath.Base(n)
		}
		return out
	}
	if d := cmp.Diff(base(lite), base(pg)); d != "" {
		t.Fatalf("the sqlite/ and postgres/ sets differ (-sqlite +postgres):\n%s", d)
	}
	name := regexp.MustCompile(`^\d{5}_[a-z0-9_]+\.sql$`)
	for _, n := range pg {
		b, err := fs.ReadFile(migrations.Postgres, n)
		if err != nil {
			t.Fatal(err)
		}
		if !name.MatchString(filepath.Base(n)) {
			t.Errorf("file name %s: want NNNNN_snake_case.sql", n)
		}
		for _, want := range []string{"-- +goose Up", "-- +goose Down"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s lacks %q", n, want)
			}
		}
		if strings.Contains(string(b), "NO TRANSACTION") {
			t.Errorf("%s runs outside a transaction: a failure half-way would leave part of it", n)
		}
	}
}

// TestPostgresUpDownUp applies every migration, rolls all back, and applies
// them again: each Down undoes its Up exactly.
func TestPostgresUpDownUp(t *testing.T) {
	t.Parallel()
	_, p, _ := setupPostgres(t)
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

// column, index and foreignKey describe a schema in terms both databases
// share; types are mapped to the SQLite affinity they mirror.
type column struct {
	Name, Type string
	NotNull    bool
}

type schema struct {
	Columns     map[string][]column   // table → columns in order
	PrimaryKeys map[string][]string   // table → key columns
	Indexes     map[string][]string   // "table.index" → columns
	ForeignKeys map[string][][]string // table → [columns..., "→", table, columns...]
}

// TestSchemaParity applies both migration sets and compares what they
// create: tables, columns (order, type, NOT NULL), primary keys, indexes and
// foreign keys must be the same, so both store adapters see one data model
// (migrations package doc).
func TestSchemaParity(t *testing.T) {
	t.Parallel()
	liteFS, err := fs.Sub(migrations.SQLite, "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	liteDB, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "parity.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer liteDB.Close()
	lite, err := goose.NewProvider(goose.DialectSQLite3, liteDB, liteFS, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lite.Up(t.Context()); err != nil {
		t.Fatalf("SQLite Up: %v", err)
	}
	_, pg, pgDB := setupPostgres(t)
	if _, err := pg.Up(t.Context()); err != nil {
		t.Fatalf("PostgreSQL Up: %v", err)
	}
	want := sqliteSchema(t, liteDB)
	got := postgresSchema(t, pgDB)
	if len(want.Columns) == 0 {
		t.Fatal("the SQLite schema has no tables")
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("schemas differ (-sqlite +postgres):\n%s", d)
	}
}

func sqliteSchema(t *testing.T, db *sql.DB) schema {
	t.Helper()
	s := schema{Columns: map[string][]column{}, PrimaryKeys: map[string][]string{}, Indexes: map[string][]string{}, ForeignKeys: map[string][][]string{}}
	tables := strings1(t, db, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT IN ('goose_db_version', 'sqlite_sequence') ORDER BY name`)
	affinity := map[string]string{"TEXT": "text", "INTEGER": "integer", "BLOB": "blob"}
	for _, tbl := range tables {
		rows, err := db.Query(fmt.Sprintf(`SELECT name, type, "notnull", pk FROM pragma_table_info('%s') ORDER BY cid`, tbl))
		if err != nil {
			t.Fatal(err)
		}
		pk := map[int]string{}
		for rows.Next() {
			var c column
			var n, k int
			if err := rows.Scan(&c.Name, &c.Type, &n, &k); err != nil {
				t.Fatal(err)
			}
			c.Type, c.NotNull = affinity[c.Type], n == 1 || k > 0
			s.Columns[tbl] = append(s.Columns[tbl], c)
			if k > 0 {
				pk[k] = c.Name
			}
		}
		rows.Close()
		for i := 1; i <= len(pk); i++ {
			s.PrimaryKeys[tbl] = append(s.PrimaryKeys[tbl], pk[i])
		}
		for _, idx := range strings1(t, db, fmt.Sprintf(`SELECT name FROM pragma_index_list('%s') WHERE origin = 'c' ORDER BY name`, tbl)) {
			s.Indexes[tbl+"."+idx] = strings1(t, db, fmt.Sprintf(`SELECT name FROM pragma_index_info('%s') ORDER BY seqno`, idx))
		}
		rows, err = db.Query(fmt.Sprintf(`SELECT id, "table", "from", "to" FROM pragma_foreign_key_list('%s') ORDER BY id, seq`, tbl))
		if err != nil {
			t.Fatal(err)
		}
		byID := map[int][]string{}
		var ids []int
		for rows.Next() {
			var id int
			var ref, from string
			var to sql.NullString
			if err := rows.Scan(&id, &ref, &from, &to); err != nil {
				t.Fatal(err)
			}
			if _, ok := byID[id]; !ok {
				ids = append(ids, id)
				byID[id] = []string{"→", ref}
			}
			byID[id] = append([]string{from}, byID[id]...)
			byID[id] = append(byID[id], to.String)
		}
		rows.Close()
		for _, id := range ids {
			s.ForeignKeys[tbl] = append(s.ForeignKeys[tbl], fixFK(byID[id]))
		}
		sortFKs(s.ForeignKeys[tbl])
	}
	return s
}

// fixFK puts a key gathered as [from_n … from_1, →, table, to_1 … to_n]
// into [from_1 … from_n, →, table, to_1 … to_n].
func fixFK(k []string) []string {
	i := 0
	for k[i] != "→" {
		i++
	}
	from := append([]string{}, k[:i]...)
	for l, r := 0, len(from)-1; l < r; l, r = l+1, r-1 {
		from[l], from[r] = from[r], from[l]
	}
	return append(from, k[i:]...)
}

func sortFKs(fks [][]string) {
	sort.Slice(fks, func(i, j int) bool { return strings.Join(fks[i], " ") < strings.Join(fks[j], " ") })
}

func postgresSchema(t *testing.T, db *sql.DB) schema {
	t.Helper()
	s := schema{Columns: map[string][]column{}, PrimaryKeys: map[string][]string{}, Indexes: map[string][]string{}, ForeignKeys: map[string][][]string{}}
	affinity := map[string]string{"text": "text", "bigint": "integer", "bytea": "blob"}
	rows, err := db.Query(`SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name <> 'goose_db_version' ORDER BY table_name, ordinal_position`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tbl, nullable string
		var c column
		if err := rows.Scan(&tbl, &c.Name, &c.Type, &nullable); err != nil {
			t.Fatal(err)
		}
		c.Type, c.NotNull = affinity[c.Type], nullable == "NO"
		s.Columns[tbl] = append(s.Columns[tbl], c)
	}
	rows.Close()
	// Indexes with their columns in key order; the primary key's separately.
	rows, err = db.Query(`SELECT t.relname, i.relname, x.indisprimary, a.attname
		FROM pg_index x
		JOIN pg_class i ON i.oid = x.indexrelid
		JOIN pg_class t ON t.oid = x.indrelid
		JOIN pg_namespace n ON n.oid = t.relnamespace
		CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, ord)
		JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum
		WHERE n.nspname = current_schema() AND t.relname <> 'goose_db_version'
		ORDER BY t.relname, i.relname, k.ord`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tbl, idx, col string
		var primary bool
		if err := rows.Scan(&tbl, &idx, &primary, &col); err != nil {
			t.Fatal(err)
		}
		if primary {
			s.PrimaryKeys[tbl] = append(s.PrimaryKeys[tbl], col)
		} else {
			s.Indexes[tbl+"."+idx] = append(s.Indexes[tbl+"."+idx], col)
		}
	}
	rows.Close()
	rows, err = db.Query(`SELECT t.relname, c.conname, r.relname, fa.attname, ra.attname
		FROM pg_constraint c
		JOIN pg_class t ON t.oid = c.conrelid
		JOIN pg_class r ON r.oid = c.confrelid
		JOIN pg_namespace n ON n.oid = t.relnamespace
		CROSS JOIN LATERAL unnest(c.conkey, c.confkey) WITH ORDINALITY AS k(fk, rk, ord)
		JOIN pg_attribute fa ON fa.attrelid = t.oid AND fa.attnum = k.fk
		JOIN pg_attribute ra ON ra.attrelid = r.oid AND ra.attnum = k.rk
		WHERE c.contype = 'f' AND n.nspname = current_schema()
		ORDER BY t.relname, c.conname, k.ord`)
	if err != nil {
		t.Fatal(err)
	}
	type fk struct {
		tbl, ref string
		from, to []string
	}
	byName := map[string]*fk{}
	var names []string
	for rows.Next() {
		var tbl, name, ref, from, to string
		if err := rows.Scan(&tbl, &name, &ref, &from, &to); err != nil {
			t.Fatal(err)
		}
		k := byName[tbl+"."+name]
		if k == nil {
			k = &fk{tbl: tbl, ref: ref}
			byName[tbl+"."+name] = k
			names = append(names, tbl+"."+name)
		}
		k.from, k.to = append(k.from, from), append(k.to, to)
	}
	rows.Close()
	for _, n := range names {
		k := byName[n]
		s.ForeignKeys[k.tbl] = append(s.ForeignKeys[k.tbl], append(append(append([]string{}, k.from...), "→", k.ref), k.to...))
	}
	for tbl := range s.ForeignKeys {
		sortFKs(s.ForeignKeys[tbl])
	}
	return s
}

// strings1 returns the first column of a query's rows.
func strings1(t *testing.T, db *sql.DB, query string) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}
