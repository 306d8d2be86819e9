package sqlite_test

import (
	"bytes"
	"database/sql"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/kilolock/kilolock/internal/store"
	"github.com/kilolock/kilolock/internal/store/sqlite"
	"github.com/kilolock/kilolock/internal/tfstate"
	"github.com/kilolock/kilolock/migrations"
)

// TestExistingStoreMigrates: a store written by a binary before
// per-resource storage (schema 16: every version a whole snapshot) opens
// with this binary — migrations 17 to 19 — reads every version as it was,
// and after the backfill holds every version as a manifest, read back byte
// for byte (issue 16 "an existing store migrates"; ADR 0068).
func TestExistingStoreMigrates(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "kl.db")
	fsys, err := fs.Sub(migrations.SQLite, "sqlite")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys, goose.WithDisableGlobalRegistry(true),
		goose.WithGoMigrations(store.GoMigrations(store.SQLite)...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(t.Context(), store.InstancesVersion); err != nil {
		t.Fatal(err)
	}
	// What a level-2 binary wrote: a state and five whole versions.
	const lineage = "lineage-old"
	docs := map[int64][]byte{}
	if _, err := db.Exec(`INSERT INTO states (name, lineage, head_serial, created_at) VALUES ('old', ?, 5, 1)`, lineage); err != nil {
		t.Fatal(err)
	}
	cur := tfstate.SynthesizeTerraformData(50, 3, lineage, 1)
	for serial := int64(1); serial <= 5; serial++ {
		cur.Serial = serial
		if serial > 1 {
			res := append([]tfstate.Resource{}, cur.Resources...)
			raw := bytes.Replace(res[serial].Raw, []byte(`"value":"`), []byte(`"value":"v2-`), 1)
			es, err := tfstate.ParseEntries([][]byte{raw})
			if err != nil {
				t.Fatal(err)
			}
			res[serial] = es[0]
			cur.Resources = res
		}
		doc, err := cur.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		docs[serial] = doc
		z, err := store.CompressSnapshot(doc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO versions (state, serial, lineage, created_at, provenance, resources, size, snapshot)
			VALUES ('old', ?, ?, ?, '{"mode":"snapshot-merge"}', 50, ?, ?)`, serial, lineage, serial, len(doc), z); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("opening the level-2 store: %v", err)
	}
	defer s.Close()
	check := func(when string) {
		t.Helper()
		for serial, want := range docs {
			got, err := s.Snapshot(t.Context(), "old", serial)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: version %d reads %d bytes (%v); want the %d written", when, serial, len(got), err, len(want))
			}
		}
	}
	check("migrated")
	res, err := s.Backfill(t.Context(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Converted != 5 || len(res.Finished) != 1 {
		t.Fatalf("Backfill: %+v; want 5 versions converted", res)
	}
	check("backfilled")
	st, err := s.StorageStats(t.Context(), "old")
	if err != nil {
		t.Fatal(err)
	}
	if st.Whole != 0 || st.Entries != 50+4 || st.Intervals != 50+4 || st.SnapshotBytes != 0 {
		t.Fatalf("after the backfill: %+v; want 54 entries and intervals, no snapshot bytes", st)
	}
}
