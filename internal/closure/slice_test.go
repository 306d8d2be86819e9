package closure_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilolock/kilolock/internal/closure"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// TestWriteSlice checks the sliced configuration of testdata/basic for one
// target against golden files (testdata/basic.slice): only the closure's
// blocks, copied byte for byte, a locals block with only the locals used.
func TestWriteSlice(t *testing.T) {
	t.Parallel()
	cfg := load(t, "testdata/basic")
	s, err := closure.TargetScope(cfg, []string{"terraform_data.uses_app"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := closure.Compute(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := c.WriteSlice(out); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"main.tf", "mod/main.tf"} {
		got, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		golden := filepath.Join("testdata/basic.slice", f)
		if *update {
			writeFiles(t, "testdata/basic.slice", map[string]string{f: string(got)})
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(string(want), string(got)); d != "" {
			t.Errorf("%s (-want +got):\n%s", f, d)
		}
	}
	if err := c.WriteSlice(out); err == nil {
		t.Error("WriteSlice into a non-empty dir: no error")
	}
}

// TestSliceValidatesAndPlans runs real Terraform on the slice of
// testdata/basic: it validates, plans the closure's creates and nothing
// else, and the proof checks pass; a slice missing a block does not
// validate, and the check says why.
func TestSliceValidatesAndPlans(t *testing.T) {
	bin := terraformBinary(t)
	ctx := context.Background()
	cfg := load(t, "testdata/basic")
	s, err := closure.TargetScope(cfg, []string{`module.app.terraform_data.svc["a"]`})
	if err != nil {
		t.Fatal(err)
	}
	c, err := closure.Compute(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := c.WriteSlice(dir); err != nil {
		t.Fatal(err)
	}
	if ch := closure.Validates(ctx, bin, dir); !ch.Passed || ch.Name != closure.CheckValidates {
		t.Fatalf("%+v", ch)
	}
	plan := planJSON(t, ctx, newTF(t, bin, dir))
	var got []string
	for _, rc := range plan.ResourceChanges {
		got = append(got, rc.Address)
	}
	want := []string{"terraform_data.base", "terraform_data.web[0]", "terraform_data.web[1]",
		`module.app.terraform_data.svc["a"]`, `module.app.terraform_data.svc["b"]`}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("planned (-want +got):\n%s", d)
	}
	for _, ch := range []closure.Check{closure.WithinSlice(plan, c), closure.TargetsPlanned(plan, c)} {
		if !ch.Passed {
			t.Errorf("%s: %s", ch.Name, ch.Found)
		}
	}

	broken := t.TempDir()
	writeFiles(t, broken, map[string]string{"main.tf": "resource \"terraform_data\" \"a\" {\n  input = local.missing\n}\n"})
	ch := closure.Validates(ctx, bin, broken)
	if ch.Passed || !strings.Contains(ch.Found, "Reference to undeclared local value") {
		t.Errorf("a slice without its local: %+v", ch)
	}
}
