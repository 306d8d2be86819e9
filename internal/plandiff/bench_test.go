package plandiff_test

import (
	"os"
	"testing"

	"github.com/kilolock/kilolock/internal/plandiff"
	"github.com/kilolock/kilolock/internal/terraform"
)

// BenchmarkBuild measures Build on the plan JSON of KL_BENCH_PLAN_JSON (a
// `terraform show -json` of a saved plan; skipped when unset), beside the
// parse that Kilolock does anyway (terraform.ParsePlanJSON), so the cost of
// the diff reads as a ratio of it.
func BenchmarkBuild(b *testing.B) {
	path := os.Getenv("KL_BENCH_PLAN_JSON")
	if path == "" {
		b.Skip("set KL_BENCH_PLAN_JSON to a plan JSON file")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("parse", func(b *testing.B) {
		for b.Loop() {
			if _, err := terraform.ParsePlanJSON(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	plan, err := terraform.ParsePlanJSON(raw)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("build", func(b *testing.B) {
		for b.Loop() {
			if _, err := plandiff.Build(plan, plandiff.Options{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	d, _ := plandiff.Build(plan, plandiff.Options{})
	stored, _ := plandiff.Marshal(d)
	b.Logf("%d resources, plan JSON %d bytes, stored diff %d bytes", len(d.Resources), len(raw), len(stored))
}
