package sqlite_test

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/seal"
	"github.com/kilolock/kilolock/internal/store/sqlite"
	"github.com/kilolock/kilolock/internal/store/storetest"
	"github.com/kilolock/kilolock/internal/tfstate"
)

// encryptedDB is a SQLite file for storetest.RunEncryption: Raw reads the
// columns through a connection of its own, and every byte of the file and
// its WAL.
func encryptedDB(t *testing.T) storetest.EncryptedDB {
	path := filepath.Join(t.TempDir(), "kl.db")
	return storetest.EncryptedDB{
		Open: func(t *testing.T, kr *seal.Keyring) (engine.Store, error) {
			t.Helper()
			var opts []sqlite.Option
			if kr != nil {
				opts = append(opts, sqlite.WithKeyring(kr))
			}
			s, err := sqlite.Open(t.Context(), path, opts...)
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { s.Close() })
			return s, nil
		},
		Raw: func(t *testing.T) (arts, snaps [][]byte, all []byte) {
			t.Helper()
			db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for q, out := range map[string]*[][]byte{`SELECT data FROM artifacts`: &arts, `SELECT snapshot FROM versions`: &snaps} {
				rows, err := db.QueryContext(t.Context(), q)
				if err != nil {
					t.Fatal(err)
				}
				for rows.Next() {
					var b []byte
					if err := rows.Scan(&b); err != nil {
						t.Fatal(err)
					}
					*out = append(*out, b)
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				rows.Close()
			}
			for _, p := range []string{path, path + "-wal"} {
				b, err := os.ReadFile(p)
				if err != nil && !os.IsNotExist(err) {
					t.Fatal(err)
				}
				all = append(all, b...)
			}
			return arts, snaps, all
		},
	}
}

func TestEncryption(t *testing.T) {
	t.Parallel()
	storetest.RunEncryption(t, encryptedDB)
}

// TestContractSealed: the whole contract with every blob sealed.
func TestContractSealed(t *testing.T) {
	t.Parallel()
	kr := storetest.TestKeyring(t, "KL_ENCRYPTION_KEY", "k1")
	storetest.Run(t, func(t *testing.T) engine.Store {
		t.Helper()
		s, _ := setup(t, sqlite.WithKeyring(kr))
		return s
	})
}

// TestEntriesContractSealed: per-resource storage with every header and
// entry sealed (ADR 0066, ADR 0068).
func TestEntriesContractSealed(t *testing.T) {
	t.Parallel()
	kr := storetest.TestKeyring(t, "KL_ENCRYPTION_KEY", "k1")
	storetest.RunEntries(t, func(t *testing.T) storetest.EntriesStore {
		t.Helper()
		s, _ := setup(t, sqlite.WithKeyring(kr))
		return s
	})
}

// TestManifestSealedAtRest: a version stored as a manifest under a key
// leaves no secret of its entries or outputs in the SQLite file, and
// reads back; without the key its entries do not open.
func TestManifestSealedAtRest(t *testing.T) {
	t.Parallel()
	kr := storetest.TestKeyring(t, "KL_ENCRYPTION_KEY", "k1")
	s, path := setup(t, sqlite.WithKeyring(kr))
	const secret = "hunter2-entry-secret"
	st := tfstate.SynthesizeTerraformData(20, 1, "lineage-m", 1)
	raw := bytes.Replace(st.Resources[3].Raw, []byte(`"value":"`), []byte(`"value":"`+secret), 1)
	es, err := tfstate.ParseEntries([][]byte{raw})
	if err != nil {
		t.Fatal(err)
	}
	st.Resources[3] = es[0]
	doc, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateState(t.Context(), engine.NewState{Name: "m", Lineage: "lineage-m", Serial: 1, Snapshot: doc, Actor: "a", Origin: "test"}); err != nil {
		t.Fatal(err)
	}
	if stats, err := s.StorageStats(t.Context(), "m"); err != nil || stats.Manifests != 1 {
		t.Fatalf("%+v, %v: want the version stored as a manifest", stats, err)
	}
	got, err := s.Snapshot(t.Context(), "m", 1)
	if err != nil || !bytes.Equal(got, doc) {
		t.Fatalf("Snapshot: %v", err)
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var blobs [][]byte
	for _, q := range []string{`SELECT body FROM state_entries`, `SELECT header FROM versions WHERE header IS NOT NULL`} {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var b []byte
			if err := rows.Scan(&b); err != nil {
				t.Fatal(err)
			}
			blobs = append(blobs, b)
		}
		rows.Close()
	}
	if len(blobs) != 21 {
		t.Fatalf("%d entry and header blobs; want 20 entries and a header", len(blobs))
	}
	for _, b := range blobs {
		if id, ok := seal.KeyID(b); !ok || id != "k1" {
			t.Fatalf("a blob of the manifest is not sealed with k1: %.20q", b)
		}
	}
	// Without the key the store is refused; with the key the entry opens
	// only where it is (its place names the state and hash).
	if _, err := sqlite.Open(t.Context(), path); err == nil {
		t.Fatal("the encrypted store opened without its key")
	}
	// Rotation: a re-seal under k2 re-seals the header and the entries,
	// and k2 alone then reads the version back.
	r, err := sqlite.Open(t.Context(), path, sqlite.WithKeyring(storetest.TestKeyring(t, "KL_ENCRYPTION_KEY", "k2", "k1")))
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Reseal(t.Context())
	r.Close()
	if err != nil || res.Resealed["headers"] != 1 || res.Resealed["entries"] != 20 {
		t.Fatalf("Reseal: %+v, %v; want the header and 20 entries re-sealed", res, err)
	}
	k2, err := sqlite.Open(t.Context(), path, sqlite.WithKeyring(storetest.TestKeyring(t, "KL_ENCRYPTION_KEY", "k2")))
	if err != nil {
		t.Fatal(err)
	}
	defer k2.Close()
	if got, err := k2.Snapshot(t.Context(), "m", 1); err != nil || !bytes.Equal(got, doc) {
		t.Fatalf("Snapshot under k2 alone after the re-seal: %v", err)
	}
}
