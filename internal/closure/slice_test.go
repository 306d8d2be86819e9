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

// TestSliceCopiesInputs: the slice holds every file the configuration may
// read besides its sliced .tf files — the var files Terraform loads by
// itself, templates in subdirectories, the lock file — and none of
// Terraform's own directories or state files.
func TestSliceCopiesInputs(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"main.tf":              "variable \"v\" {}\n\nresource \"terraform_data\" \"a\" {\n  input = templatefile(\"${path.module}/tpl/a.tpl\", { v = var.v })\n}\n\nresource \"terraform_data\" \"b\" {}\n",
		"terraform.tfvars":     "v = \"1\"\n",
		"x.auto.tfvars":        "w = \"2\"\n",
		"tpl/a.tpl":            "${v}",
		".terraform.lock.hcl":  "# lock\n",
		".terraform/junk":      "x",
		"terraform.tfstate":    "{}",
		"terraform.tfstate.d/": "",
	})
	c, err := closure.Compute(load(t, root), mustScope(t, load(t, root), "terraform_data.a"))
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := c.WriteSlice(out); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"terraform.tfvars", "x.auto.tfvars", "tpl/a.tpl", ".terraform.lock.hcl"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("slice lacks %s: %v", f, err)
		}
	}
	for _, f := range []string{".terraform", "terraform.tfstate"} {
		if _, err := os.Stat(filepath.Join(out, f)); err == nil {
			t.Errorf("slice holds %s", f)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(out, "main.tf")); strings.Contains(string(b), `"b"`) {
		t.Errorf("main.tf not sliced:\n%s", b)
	}
}

// TestSliceDeclaresDependentOutputs: a root output reading only the
// closure joins it (else the apply would leave it stale at the head); one
// that also reads a resource outside joins it only for a changed-files
// scope, with what it reads.
func TestSliceDeclaresDependentOutputs(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	bTF := "resource \"terraform_data\" \"b\" {\n  input = \"b\"\n}\n"
	main := "resource \"terraform_data\" \"a\" {\n  input = \"a\"\n}\n\n" +
		"locals {\n  a = terraform_data.a.output\n}\n\noutput \"only_a\" {\n  value = local.a\n}\n\noutput \"a_and_b\" {\n  value = \"${local.a}${terraform_data.b.output}\"\n}\n"
	writeFiles(t, root, map[string]string{"main.tf": main, "b.tf": bTF})
	base := t.TempDir()
	writeFiles(t, base, map[string]string{"main.tf": strings.Replace(main, `input = "a"`, `input = "a0"`, 1), "b.tf": bTF})
	cfg := load(t, root)
	c, err := closure.Compute(cfg, mustScope(t, cfg, "terraform_data.a"))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"only_a"}, c.Outputs()); d != "" || len(c.Addresses) != 1 {
		t.Errorf("targets: outputs (-want +got):\n%s addresses %v", d, c.Addresses)
	}
	fs, err := closure.FileScope(cfg, base, []string{"main.tf"})
	if err != nil {
		t.Fatal(err)
	}
	if c, err = closure.Compute(cfg, fs); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"a_and_b", "only_a"}, c.Outputs()); d != "" {
		t.Errorf("changed files: outputs (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"terraform_data.a", "terraform_data.b"}, c.Addresses); d != "" {
		t.Errorf("changed files: addresses (-want +got):\n%s", d)
	}
}

func mustScope(t *testing.T, cfg *closure.Config, targets ...string) *closure.Scope {
	t.Helper()
	s, err := closure.TargetScope(cfg, targets)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
