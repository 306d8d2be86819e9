package postgres_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/seal"
	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/store/storetest"
)

// encryptedDB is a fresh schema for storetest.RunEncryption: Raw reads the
// stored columns through a connection of its own.
func encryptedDB(t *testing.T) storetest.EncryptedDB {
	dsn := pgtest.DSN(t)
	return storetest.EncryptedDB{
		Open: func(t *testing.T, kr *seal.Keyring) (engine.Store, error) {
			t.Helper()
			var opts []postgres.Option
			if kr != nil {
				opts = append(opts, postgres.WithKeyring(kr))
			}
			s, err := postgres.Open(t.Context(), dsn, opts...)
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { s.Close() })
			return s, nil
		},
		Raw: func(t *testing.T) (arts, snaps [][]byte, all []byte) {
			t.Helper()
			conn, err := pgx.Connect(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(t.Context())
			for q, out := range map[string]*[][]byte{`SELECT data FROM artifacts`: &arts, `SELECT snapshot FROM versions`: &snaps} {
				rows, err := conn.Query(t.Context(), q)
				if err != nil {
					t.Fatal(err)
				}
				got, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
				if err != nil {
					t.Fatal(err)
				}
				*out = got
				for _, b := range got {
					all = append(all, b...)
				}
			}
			rows, err := conn.Query(t.Context(), `SELECT body FROM runs`)
			if err != nil {
				t.Fatal(err)
			}
			bodies, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bodies {
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
		s, _ := setup(t, postgres.WithKeyring(kr))
		return s
	})
}

// TestEntriesContractSealed: per-resource storage with every header and
// entry sealed (ADR 0066, ADR 0068).
func TestEntriesContractSealed(t *testing.T) {
	t.Parallel()
	kr := storetest.TestKeyring(t, "KLBOT_ENCRYPTION_KEY", "k1")
	storetest.RunEntries(t, func(t *testing.T) storetest.EntriesStore {
		t.Helper()
		s, _ := setup(t, postgres.WithKeyring(kr))
		return s
	})
}
