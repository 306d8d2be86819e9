package closure_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilolock/kilolock/internal/closure"
)

// copyDir copies testdata/basic's files into a new temp dir.
func copyBasic(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	for _, f := range []string{"main.tf", "mod/main.tf"} {
		b, err := os.ReadFile(filepath.Join("testdata/basic", f))
		if err != nil {
			t.Fatal(err)
		}
		writeFiles(t, dst, map[string]string{f: string(b)})
	}
	return dst
}

func edit(t *testing.T, dir, file, old, new string) {
	t.Helper()
	p := filepath.Join(dir, file)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s has no %q", file, old)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestFileScope(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		common   map[string]string // written to the base and the head
		change   func(t *testing.T, head string)
		files    []string
		targets  []string
		fallback string
		invalid  string
	}{
		"a variable default reaches its readers through a module": {
			change: func(t *testing.T, h string) { edit(t, h, "main.tf", `default = "eu"`, `default = "us"`) },
			files:  []string{"main.tf"},
			// main.tf declares every root resource; the module's are reached.
			targets: []string{"module.app.terraform_data.side", "module.app.terraform_data.svc", "terraform_data.base",
				"terraform_data.lonely", "terraform_data.uses_app", "terraform_data.web"},
		},
		"a changed module output reaches its reader only": {
			change:  func(t *testing.T, h string) { edit(t, h, "mod/main.tf", `svc["a"].id`, `svc["b"].id`) },
			files:   []string{"mod/main.tf"},
			targets: []string{"module.app.terraform_data.side", "module.app.terraform_data.svc", "terraform_data.uses_app"},
		},
		"a changed resource reaches what reads it": {
			change: func(t *testing.T, h string) {
				edit(t, h, "mod/main.tf", `"${var.name}-${each.key}"`, `"${var.name}+${each.key}"`)
			},
			files:   []string{"mod/main.tf"},
			targets: []string{"module.app.terraform_data.side", "module.app.terraform_data.svc", "terraform_data.uses_app"},
		},
		"a changed resource reaches what its replace_triggered_by names": {
			common:  map[string]string{"mod/trig.tf": "resource \"terraform_data\" \"trig\" {\n  lifecycle {\n    replace_triggered_by = [terraform_data.side]\n  }\n}\n"},
			change:  func(t *testing.T, h string) { edit(t, h, "mod/main.tf", `input = "side"`, `input = "side2"`) },
			files:   []string{"mod/main.tf"},
			targets: []string{"module.app.terraform_data.side", "module.app.terraform_data.svc", "module.app.terraform_data.trig"},
		},
		"a new file declares its resources": {
			change: func(t *testing.T, h string) {
				writeFiles(t, h, map[string]string{"extra.tf": "resource \"terraform_data\" \"extra\" {\n  input = var.unused\n}\n"})
			},
			files:   []string{"extra.tf"},
			targets: []string{"terraform_data.extra"},
		},
		"a variable nobody reads reaches nothing": {
			change: func(t *testing.T, h string) {
				writeFiles(t, h, map[string]string{"mod/vars.tf": "variable \"spare\" {\n  default = 1\n}\n"})
			},
			files:    []string{"mod/vars.tf"},
			fallback: "change no resource",
		},
		"no files":        {files: nil, fallback: "no changed files"},
		"a variable file": {files: []string{"prod.tfvars"}, fallback: "prod.tfvars changed: a variable file"},
		"the lock file":   {files: []string{".terraform.lock.hcl"}, fallback: "dependency lock file"},
		"a readme":        {files: []string{"README.md"}, fallback: "not a Terraform configuration file"},
		"an uncalled dir": {files: []string{"other/x.tf"}, fallback: "no module of the configuration is loaded from other"},
		"a deleted block": {
			change: func(t *testing.T, h string) {
				edit(t, h, "mod/main.tf", "resource \"terraform_data\" \"side\" {\n  input = \"side\"\n}\n", "")
			},
			files:    []string{"mod/main.tf"},
			fallback: "terraform_data.side was deleted",
		},
		"a renamed resource with its moved block": {
			change: func(t *testing.T, h string) {
				edit(t, h, "mod/main.tf", `resource "terraform_data" "side" {`, `resource "terraform_data" "side2" {`)
				writeFiles(t, h, map[string]string{"mod/moves.tf": "moved {\n  from = terraform_data.side\n  to   = terraform_data.side2\n}\n"})
			},
			files:    []string{"mod/main.tf", "mod/moves.tf"},
			fallback: "terraform_data.side is named by a moved block, which the slice does not plan",
		},
		"a deleted moved block": {
			change: func(t *testing.T, h string) {
				edit(t, h, "main.tf", "moved {\n  from = terraform_data.old_base\n  to   = terraform_data.base\n}\n", "")
			},
			files:    []string{"main.tf"},
			fallback: "a moved block was deleted",
		},
		"a deleted file": {
			change:   func(t *testing.T, h string) { writeFiles(t, h, nil) },
			files:    []string{"gone.tf"},
			fallback: "gone.tf was deleted",
		},
		"a path in neither tree": {files: []string{"nope.tf"}, invalid: "nope.tf is neither in the configuration nor in the base"},
		"a path outside":         {files: []string{"../x.tf"}, invalid: `"../x.tf" is not a path inside`},
		"an absolute path":       {files: []string{"/etc/x.tf"}, invalid: `"/etc/x.tf" is absolute: give it relative to the root module directory`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			base, head := copyBasic(t), copyBasic(t)
			if name == "a deleted file" {
				writeFiles(t, base, map[string]string{"gone.tf": "resource \"terraform_data\" \"gone\" {}\n"})
			}
			writeFiles(t, base, tc.common)
			writeFiles(t, head, tc.common)
			if tc.change != nil {
				tc.change(t, head)
			}
			s, err := closure.FileScope(load(t, head), base, tc.files)
			var fb *closure.Fallback
			switch {
			case tc.fallback != "":
				if !errors.As(err, &fb) || !strings.Contains(fb.Reason, tc.fallback) {
					t.Fatalf("err = %v, want a fallback saying %q", err, tc.fallback)
				}
			case tc.invalid != "":
				if !errors.Is(err, closure.ErrInvalid) || !strings.Contains(err.Error(), tc.invalid) {
					t.Fatalf("err = %v, want ErrInvalid saying %q", err, tc.invalid)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(tc.targets, s.Targets); d != "" {
					t.Errorf("Targets (-want +got):\n%s", d)
				}
				if s.How != "changed-files" {
					t.Errorf("How = %q", s.How)
				}
			}
		})
	}
}

// TestUnlisted: a file that differs between the head and the base (changed,
// new, deleted) and is not among the changed files is named; listed
// differences, identical files and what is not configuration (.terraform,
// local states) are not.
func TestUnlisted(t *testing.T) {
	t.Parallel()
	base, head := copyBasic(t), copyBasic(t)
	writeFiles(t, base, map[string]string{"extra.tf": "resource \"terraform_data\" \"extra\" {}\n", "terraform.tfstate": "{}"})
	writeFiles(t, head, map[string]string{".terraform/x": "y", "terraform.tfstate": "{\"serial\": 2}"})
	edit(t, head, "main.tf", `input = local.other`, `input = "other"`)
	edit(t, head, "mod/main.tf", `input = "side"`, `input = "side2"`)
	for _, tc := range []struct {
		changed []string
		want    string
	}{
		{[]string{"mod/main.tf"}, "extra.tf"},
		{[]string{"mod/main.tf", "extra.tf"}, "main.tf"},
		{[]string{"./main.tf", "mod/main.tf", "extra.tf"}, ""},
	} {
		got, err := closure.Unlisted(head, base, tc.changed)
		if err != nil || got != tc.want {
			t.Errorf("Unlisted(%v) = %q, %v; want %q", tc.changed, got, err, tc.want)
		}
	}
	if _, err := closure.Unlisted(head, filepath.Join(base, "nowhere"), nil); err == nil || !strings.Contains(err.Error(), "nowhere") {
		t.Errorf("Unlisted of a base that does not exist: %v, want an error naming it", err)
	}
}
