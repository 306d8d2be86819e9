package bench

import (
	"os/exec"
	"testing"
)

// TestGrowth runs figure 4 small (1,001 resources — the changed one is r01000 —, 2 applies) with the real
// kl and terraform: the store grows with each apply, and the closed plan
// holds a saved plan and a configuration archive until the retention.
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
	res, err := Growth(t.Context(), GrowthOptions{KL: kl, Terraform: tf, Resources: 1001, Applies: 2, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.After) != 2 || res.Init <= 0 || res.After[0] <= res.Init || res.After[1] < res.After[0] {
		t.Fatalf("store bytes: init %d, after %v; want growth with each apply", res.Init, res.After)
	}
	if res.Retained <= 0 {
		t.Fatalf("retained %d bytes; want the closed plans' saved plans and archives", res.Retained)
	}
	t.Logf("1,001 resources: init %d B, after %v, %.0f B per version, %d B retained until KL_RETENTION", res.Init, res.After, res.PerVersion(), res.Retained)
}
