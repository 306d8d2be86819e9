package cli_test

import (
	"testing"

	"github.com/kilolock/kilolock/internal/store/pgtest"
)

// TestMain stops the throwaway PostgreSQL server that the postgres tests
// start on first use (pgtest.DSN); the other tests never start one.
func TestMain(m *testing.M) { pgtest.Main(m) }
