package terraform

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/footprint and testdata/stderr")

// planFixtures lists every plan JSON of testdata/terraform-json (real
// `terraform show -json` output, Terraform 0.12 to 1.15) and testdata/plans
// (real plans of what plan JSON leaves out, made here: its README).
func planFixtures(t *testing.T) []string {
	t.Helper()
	var paths []string
	for _, dir := range []string{"terraform-json", "plans"} {
		found, err := filepath.Glob(filepath.Join("testdata", dir, "*", "plan*.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(found) == 0 {
			t.Fatalf("no plan fixtures under testdata/%s", dir)
		}
		paths = append(paths, found...)
	}
	return paths
}

// fixtureName names a fixture's golden file: the folder for plan.json,
// folder_base otherwise ("basic_plan-0.15").
func fixtureName(path string) string {
	dir := filepath.Base(filepath.Dir(path))
	base := strings.TrimSuffix(filepath.Base(path), ".json")
	if base == "plan" {
		return dir
	}
	return dir + "_" + base
}

// hasTF reports whether dir holds .tf files (a config dir for the plan).
func hasTF(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*.tf"))
	return len(m) > 0
}

func TestFootprintGolden(t *testing.T) {
	for _, path := range planFixtures(t) {
		name := fixtureName(path)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got := renderFootprintGolden(filepath.ToSlash(path), b)
			golden := filepath.Join("testdata", "footprint", name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("reading golden (run with -update to create it): %v", err)
			}
			if got != string(want) {
				t.Errorf("footprint of %s differs from %s:\n--- got\n%s\n--- want\n%s", path, golden, got, want)
			}
		})
	}
}

// renderFootprintGolden renders the summary and footprint of one plan,
// without a config dir and, when .tf files sit beside a plan.json, with it
// (basic/plan-0.15.json was made from another configuration than basic/*.tf).
func renderFootprintGolden(path string, b []byte) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "# %s\n", path)
	plan, err := ParsePlanJSON(b)
	if err != nil {
		fmt.Fprintf(&sb, "error: %v\n", err)
		return sb.String()
	}
	fmt.Fprintf(&sb, "terraform %q, format_version %q\n", plan.TerraformVersion, plan.FormatVersion)
	s := Summarize(plan)
	fmt.Fprintf(&sb, "summary: add %d, change %d, destroy %d, replace %d, move %d, read %d, outputs %d, targeted %t\n",
		s.Add, s.Change, s.Destroy, s.Replace, s.Move, s.Read, s.Outputs, s.Targets)

	without := renderFootprint(ExtractFootprint(plan, ExtractOptions{}))
	sb.WriteString("\n## without config dir\n")
	sb.WriteString(without)
	dir := filepath.Dir(path)
	if hasTF(dir) && filepath.Base(path) == "plan.json" {
		with := renderFootprint(ExtractFootprint(plan, ExtractOptions{ConfigDir: dir}))
		fmt.Fprintf(&sb, "\n## with config dir %s\n", filepath.Base(dir))
		switch {
		case with == without:
			sb.WriteString("same as without config dir\n")
		case with == dropUnverified(without):
			sb.WriteString("same as without config dir, and verified\n")
		default:
			sb.WriteString(with)
		}
	}
	return sb.String()
}

// dropUnverified removes the unverified line of a renderFootprint output.
func dropUnverified(s string) string {
	lines := strings.SplitAfter(s, "\n")
	out := lines[:0]
	for _, l := range lines {
		if !strings.HasPrefix(l, "unverified: ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

func renderFootprint(fp engine.Footprint, err error) string {
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "write (%d):\n", len(fp.Write))
	for _, a := range fp.Write {
		fmt.Fprintf(&sb, "  %s\n", a)
	}
	fmt.Fprintf(&sb, "read (%d):\n", len(fp.Read))
	for _, a := range fp.Read {
		fmt.Fprintf(&sb, "  %s\n", a)
	}
	fmt.Fprintf(&sb, "widened (%d):\n", len(fp.Widened))
	for _, w := range fp.Widened {
		fmt.Fprintf(&sb, "  %s <- %s: %s\n", w.Address, w.From, w.Reason)
	}
	if fp.Unverified != "" {
		fmt.Fprintf(&sb, "unverified: %s\n", fp.Unverified)
	}
	return sb.String()
}
