package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/plandiff"
	"github.com/kilolock/kilolock/internal/terraform"
)

// diffFixture is a real plan JSON and, where one was kept with it, the
// state it was made against.
type diffFixture struct {
	name, plan, prior string
}

// diffFixtures are every real plan the repository holds: the scenarios
// recorded under internal/plandiff/testdata/plans, the terraform-json
// fixtures (shared/fixtures/terraform-json: Terraform 0.12 to 1.15, real
// providers) and the plans made for the footprint
// (internal/terraform/testdata/plans).
func diffFixtures(t *testing.T) []diffFixture {
	t.Helper()
	var out []diffFixture
	for _, glob := range []string{
		"../plandiff/testdata/plans/*/plan.json",
		"../terraform/testdata/terraform-json/*/plan*.json",
		"../terraform/testdata/plans/*/plan.json",
	} {
		paths, err := filepath.Glob(glob)
		if err != nil || len(paths) == 0 {
			t.Fatalf("no plan fixtures at %s (%v)", glob, err)
		}
		for _, p := range paths {
			dir := filepath.Dir(p)
			f := diffFixture{name: filepath.Base(dir), plan: p}
			if base := strings.TrimSuffix(filepath.Base(p), ".json"); base != "plan" {
				f.name += "_" + base
			}
			for _, st := range []string{"prior.tfstate", "terraform.tfstate"} {
				if _, err := os.Stat(filepath.Join(dir, st)); err == nil && filepath.Base(p) == "plan.json" {
					f.prior = filepath.Join(dir, st)
				}
			}
			out = append(out, f)
		}
	}
	return out
}

// buildFixture parses and diffs one fixture; a plan ParsePlanJSON refuses
// gives its error.
func buildFixture(t *testing.T, f diffFixture) (*plandiff.Diff, error) {
	t.Helper()
	b, err := os.ReadFile(f.plan)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := terraform.ParsePlanJSON(b)
	if err != nil {
		return nil, err
	}
	var prior []byte
	if f.prior != "" {
		if prior, err = os.ReadFile(f.prior); err != nil {
			t.Fatal(err)
		}
	}
	d, err := plandiff.Build(plan, plandiff.Options{PriorState: prior})
	if err != nil {
		t.Fatalf("building the diff of %s: %v", f.plan, err)
	}
	return d, nil
}

// diffTextOf renders d as kl's text shows it, in a doc of its own.
func diffTextOf(d *plandiff.Diff, color bool) string {
	doc := &doc{title: words("diff")}
	diffSection(doc, words("Diff"), d)
	return renderText(doc, Options{Color: color})
}

// TestDiffGolden renders the diff of every real plan as text, Markdown
// (within a check run's limit) and JSON (the "diff" object of the plan
// and run documents), against golden files under testdata/diff. A plan
// that is no plan (terraform-json's invalid/) renders its clear error.
func TestDiffGolden(t *testing.T) {
	for _, f := range diffFixtures(t) {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			d, err := buildFixture(t, f)
			if err != nil {
				golden(t, filepath.Join("diff", f.name+".txt"), fmt.Sprintf("error: %v\n", err))
				return
			}
			golden(t, filepath.Join("diff", f.name+".txt"), diffTextOf(d, false))
			golden(t, filepath.Join("diff", f.name+".md"), DiffMarkdown(d, CheckRunSummaryLimit, "01J2ZP0A11CE0000000000PLAN"))
			b, err := json.MarshalIndent(toDiff(d), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, filepath.Join("diff", f.name+".json"), string(b)+"\n")
			if f.name == "terraform_data" {
				golden(t, filepath.Join("diff", f.name+".color.txt"), diffTextOf(d, true))
			}
		})
	}
}
