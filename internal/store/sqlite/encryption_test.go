package sqlite_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/seal"
	"github.com/kilolock/kilolock/internal/store/sqlite"
	"github.com/kilolock/kilolock/internal/store/storetest"
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
