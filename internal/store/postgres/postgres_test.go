package postgres_test

import (
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/store/storetest"
	"github.com/kilolock/kilolock/internal/token"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// setup opens a store on a fresh schema of the test server, closed at
// cleanup, and returns it with its DSN.
func setup(t *testing.T, opts ...postgres.Option) (*postgres.Store, string) {
	t.Helper()
	dsn := pgtest.DSN(t)
	s, err := postgres.Open(t.Context(), dsn, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s, dsn
}

func TestEntriesContract(t *testing.T) {
	t.Parallel()
	storetest.RunEntries(t, func(t *testing.T) storetest.EntriesStore {
		t.Helper()
		s, _ := setup(t)
		return s
	})
}

func TestContract(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) engine.Store {
		t.Helper()
		s, _ := setup(t)
		return s
	})
}

func TestTokenContract(t *testing.T) {
	t.Parallel()
	storetest.RunTokens(t, func(t *testing.T) token.Store {
		t.Helper()
		s, _ := setup(t)
		return s
	})
}
