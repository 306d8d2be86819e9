package terraform

import (
	"archive/tar"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// destroyEverything is the reason a plan without configuration is refused.
const destroyEverything = "a plan would destroy every resource of the state; refusing (a destroy-everything plan needs an explicit request, which kl does not offer yet)"

// TestPlanRefusesNoConfiguration: a root module without configuration
// files is refused before anything is written (Terraform itself counts
// override files, so the backend override would make it plan to destroy
// everything), from a directory, from a Config archive (re-plan) and for an
// apply of such an archive.
func TestPlanRefusesNoConfiguration(t *testing.T) {
	t.Parallel()
	r, workRoot := setupRunner(t)
	// A state holding one resource: what a destroy-everything plan would delete.
	src := setupConfig(t, map[string]string{"main.tf": "resource \"terraform_data\" \"keep\" {\n  input = \"x\"\n}\n"})
	ctx := context.Background()
	base, err := r.Plan(ctx, engine.PlanRequest{Run: "base-plan", Dir: src, Snapshot: snapshot("lineage-keep", 1)})
	if err != nil {
		t.Fatal(err)
	}
	applied, err := r.Apply(ctx, engine.ApplyRequest{Run: "base-apply", PlanFile: base.PlanFile, Config: base.Config, Snapshot: snapshot("lineage-keep", 1)})
	if err != nil {
		t.Fatal(err)
	}

	tests := map[string]struct {
		files map[string]string
		also  string // also in the error
	}{
		"empty dir":                       {files: map[string]string{}},
		"only a README":                   {files: map[string]string{"README.md": "# nothing here\n", "terraform.tfvars": "x = 1\n"}},
		"only an override":                {files: map[string]string{"backend_override.tf": "terraform {}\n"}, also: "backend_override.tf"},
		"only override.tf.json":           {files: map[string]string{"override.tf.json": "{}\n"}, also: "override.tf.json"},
		"only ignored files":              {files: map[string]string{".hidden.tf": "terraform {}\n", "main.tf~": "terraform {}\n", "#main.tf#": "x"}},
		"configuration only in a sub dir": {files: map[string]string{"modules/a/main.tf": "terraform {}\n"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := setupConfig(t, tc.files)
			run := "refused-" + strings.NewReplacer(" ", "-", ".", "-").Replace(name)
			_, err := r.Plan(ctx, engine.PlanRequest{Run: run, Dir: dir, Snapshot: applied.State, Progress: func(engine.Progress) {
				t.Error("progress reported: Terraform ran")
			}})
			assertRefused(t, err, dir, tc.also)
			if _, serr := os.Stat(filepath.Join(workRoot, run)); !errors.Is(serr, fs.ErrNotExist) {
				t.Errorf("work dir of the refused run exists (%v): something was written", serr)
			}
			// The same tree as a Config archive: a re-plan is refused, and so is
			// an apply of a (pre-fix) plan of it.
			archive, err := buildConfigArchive(dir, nil, discard)
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.Plan(ctx, engine.PlanRequest{Run: run + "-replan", Config: archive, Snapshot: applied.State})
			assertRefused(t, err, `the root module "." of the configuration archive`, tc.also)
			res, err := r.Apply(ctx, engine.ApplyRequest{Run: run + "-apply", PlanFile: base.PlanFile, Config: archive, Snapshot: applied.State})
			assertRefused(t, err, `the root module "." of the configuration archive`, tc.also)
			if res == nil || string(res.State) != string(applied.State) {
				t.Error("a refused apply does not return the snapshot unchanged")
			}
		})
	}
	t.Run("a root below the archive top", func(t *testing.T) {
		t.Parallel()
		// buildConfigArchive copies only the root's dir when it calls no
		// local module: write the archive a root calling one would give.
		archive, err := writeArchive([]archiveEntry{
			{name: archiveRootEntry, typ: tar.TypeReg, data: []byte("envs/prod")},
			{name: "envs", typ: tar.TypeDir}, {name: "envs/prod", typ: tar.TypeDir},
			{name: "envs/prod/README", typ: tar.TypeReg, data: []byte("x")},
			{name: "modules", typ: tar.TypeDir}, {name: "modules/a", typ: tar.TypeDir},
			{name: "modules/a/main.tf", typ: tar.TypeReg, data: []byte("terraform {}\n")},
		})
		if err != nil {
			t.Fatal(err)
		}
		_, err = r.Plan(ctx, engine.PlanRequest{Run: "refused-sub", Config: archive, Snapshot: applied.State})
		assertRefused(t, err, `the root module "envs/prod" of the configuration archive`, "")
	})
	// A JSON configuration alone is a configuration.
	t.Run("only main.tf.json", func(t *testing.T) {
		t.Parallel()
		dir := setupConfig(t, map[string]string{"main.tf.json": `{"resource":{"terraform_data":{"keep":{"input":"x"}}}}`})
		res, err := r.Plan(ctx, engine.PlanRequest{Run: "json-only", Dir: dir, Snapshot: applied.State})
		if err != nil {
			t.Fatalf("Plan of a main.tf.json: %v", err)
		}
		if !res.Summary.Empty() {
			t.Errorf("plan of the same resource in JSON: %+v, want no changes", res.Summary)
		}
	})
}

func assertRefused(t *testing.T, err error, where, also string) {
	t.Helper()
	if !errors.Is(err, engine.ErrInvalid) {
		t.Fatalf("error = %v, want engine.ErrInvalid", err)
	}
	for _, want := range []string{"no Terraform configuration files in " + where + ": " + destroyEverything, also} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestIsPrimaryConfigFile(t *testing.T) {
	t.Parallel()
	tests := map[string]bool{
		"main.tf": true, "main.tf.json": true, "a.b.tf": true, "overrides.tf": true, "override_x.tf": true,
		"override.tf": false, "override.tf.json": false, "backend_override.tf": false, "x_override.tf.json": false,
		".hidden.tf": false, "main.tf~": false, "#main.tf#": false, "README.md": false, "main.tfvars": false,
		"main.tftest.hcl": false, "main.tf.bak": false, "tf": false,
	}
	for name, want := range tests {
		if got := isPrimaryConfigFile(name, false); got != want {
			t.Errorf("isPrimaryConfigFile(%q) = %v, want %v", name, got, want)
		}
	}
	if isPrimaryConfigFile("dir.tf", true) {
		t.Error("a directory named dir.tf counts")
	}
}

// TestFailureReasonsWithoutNoise runs Terraform with TF_CLI_CONFIG_FILE
// naming a missing file (this machine's default), which makes every command
// print a boxed warning on stderr: failures of apply, plan with and without
// -json, and init must read as Terraform's errors only, without the
// warnings, the box drawing, or the run id (the engine adds that).
func TestFailureReasonsWithoutNoise(t *testing.T) {
	t.Parallel()
	r, workRoot := setupRunnerEnv(t, "TF_CLI_CONFIG_FILE="+filepath.Join(t.TempDir(), "missing.tfrc"))
	ctx := context.Background()
	snap := snapshot("lineage-noise", 1)
	tests := map[string]struct {
		files    map[string]string
		progress bool
		apply    bool
		command  string
		want     []string
	}{
		"apply with a failing provisioner": {
			files:   map[string]string{"main.tf": "resource \"terraform_data\" \"bad\" {\n  provisioner \"local-exec\" {\n    command = \"exit 1\"\n  }\n}\n"},
			apply:   true,
			command: "apply",
			want:    []string{"terraform apply: local-exec provisioner error: Error running command 'exit 1': exit status 1", "(terraform_data.bad, main.tf:2)"},
		},
		"plan with -json": {
			files: map[string]string{"main.tf": "resource \"terraform_data\" \"x\" {\n  input = var.nope\n}\n"}, progress: true,
			command: "plan",
			want:    []string{"terraform plan: Reference to undeclared input variable: An input variable with the name \"nope\" has not been declared", "(main.tf:2)"},
		},
		"plain plan": {
			files:   map[string]string{"main.tf": "resource \"terraform_data\" \"x\" {\n  input = var.nope\n}\n"},
			command: "plan",
			want:    []string{"terraform plan: Error: Reference to undeclared input variable", "on main.tf line 2"},
		},
		"init of an unclosed block": {
			files:   map[string]string{"main.tf": "terraform {\n"},
			command: "init",
			want:    []string{"terraform init: ", "Error: Unclosed configuration block", "on main.tf line 1"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := setupConfig(t, tc.files)
			run := "01NOISE" + strings.ToUpper(strings.ReplaceAll(name, " ", ""))
			var progress func(engine.Progress)
			if tc.progress {
				progress = func(engine.Progress) {}
			}
			plan, err := r.Plan(ctx, engine.PlanRequest{Run: run, Dir: dir, Snapshot: snap, Progress: progress})
			if tc.apply {
				if err != nil {
					t.Fatal(err)
				}
				_, err = r.Apply(ctx, engine.ApplyRequest{Run: run + "A", PlanFile: plan.PlanFile, Config: plan.Config, Snapshot: snap})
			}
			var ce *CommandError
			if !errors.As(err, &ce) || ce.Command != tc.command {
				t.Fatalf("error = %v, want a *CommandError of %s", err, tc.command)
			}
			msg := err.Error()
			t.Logf("error: %s", msg)
			if !strings.HasPrefix(msg, "terraform "+tc.command+": ") {
				t.Errorf("error %q does not start with what failed", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			assertNoNoise(t, msg)
			if strings.Contains(msg, run) {
				t.Errorf("error %q repeats the run id", msg)
			}
			if strings.Contains(msg, "exit status 1\n") || strings.HasSuffix(msg, ": exit status 1") {
				t.Errorf("error %q ends with the exit status though Terraform said what failed", msg)
			}
		})
	}
	t.Run("no run id in the runner's own errors", func(t *testing.T) {
		t.Parallel()
		missing := filepath.Join(t.TempDir(), "nope")
		_, err := r.Plan(ctx, engine.PlanRequest{Run: "01NORUNID", Dir: missing, Snapshot: snap})
		if err == nil || !strings.HasPrefix(err.Error(), "reading configuration dir: ") || !strings.Contains(err.Error(), missing) || strings.Contains(err.Error(), "01NORUNID") {
			t.Errorf("Plan(missing dir) error = %v, want \"reading configuration dir: …%s…\" without the run id", err, missing)
		}
		_, err = r.Apply(ctx, engine.ApplyRequest{Run: "01NORUNID2", Snapshot: snap})
		if !errors.Is(err, engine.ErrInvalid) || strings.Contains(err.Error(), "01NORUNID2") {
			t.Errorf("Apply(no plan) error = %v, want ErrInvalid without the run id", err)
		}
	})
	_ = workRoot
}
