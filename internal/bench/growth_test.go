package bench

import (
	"os/exec"
	"testing"

	"github.com/kilolock/kilolock/internal/store/pgtest"
)

// TestGrowth runs figure 4 small (1,001 resources — the changed one is
// r01000 —, 2 applies) on SQLite and on PostgreSQL with the real kl and
// terraform: each store grows with each apply, and the closed plan holds a
// saved plan and a configuration archive until the retention.
func TestGrowth(t *testing.T) {
	if testing.Short() {
		t.Skip("runs kl and Terraform")
	}
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("terraform not on PATH")
	}
	root, err := ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	kl, err := BuildKL(t.Context(), root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dsn := pgtest.DSN(t)
	res, err := Growth(t.Context(), GrowthOptions{KL: kl, Terraform: tf, Resources: 1001, Applies: 2, TempDir: t.TempDir(), Postgres: dsn})
	if err != nil {
		t.Fatal(err)
	}
	if res.Postgres == nil {
		t.Fatal("no PostgreSQL figure")
	}
	for name, s := range map[string]GrowthSeries{"SQLite": res.GrowthSeries, "PostgreSQL": *res.Postgres} {
		if len(s.After) != 2 || s.Init <= 0 || s.After[0] <= s.Init || s.After[1] < s.After[0] {
			t.Fatalf("%s store bytes: init %d, after %v; want growth with each apply", name, s.Init, s.After)
		}
		if s.Retained <= 0 {
			t.Fatalf("%s: retained %d bytes; want the closed plans' saved plans and archives", name, s.Retained)
		}
		t.Logf("%s, 1,001 resources: init %d B, after %v, %.0f B per version, %d B retained until KL_RETENTION", name, s.Init, s.After, s.PerVersion(), s.Retained)
	}
}

func TestMain(m *testing.M) { pgtest.Main(m) }
