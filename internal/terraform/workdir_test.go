package terraform

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/kilolock/kilolock/internal/engine"
)

func testWorkDir(rootSub string) workDir {
	dir := "/work/.kl/runs/01RUN"
	return workDir{
		Dir:      dir,
		Cfg:      dir + "/cfg",
		Root:     filepath.Join(dir+"/cfg", rootSub),
		Data:     dir + "/data",
		Snapshot: dir + "/snapshot.tfstate",
		PlanFile: dir + "/plan.tfplan",
	}
}

func TestOptions(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		rootSub  string
		varFiles []string
		targets  []string
		replace  []string
		opts     engine.PlanOptions
		inEnv    bool // the var files go in TF_CLI_ARGS_plan (-var values)
		init     []tfexec.InitOption
		plan     []tfexec.PlanOption
		apply    []tfexec.ApplyOption
	}{
		"root at the top": {
			rootSub: ".",
			init:    []tfexec.InitOption{tfexec.BackendConfig("path=../snapshot.tfstate"), tfexec.Reconfigure(true)},
			plan:    []tfexec.PlanOption{tfexec.Out("../plan.tfplan")},
			apply:   []tfexec.ApplyOption{tfexec.DirOrPlan("../plan.tfplan")},
		},
		"root below an ancestor, var files and targets": {
			rootSub:  "envs/prod",
			varFiles: []string{".kl-varfiles/000-common.tfvars", ".kl-varfiles/001-prod.tfvars"},
			targets:  []string{"module.app", `terraform_data.x["a"]`},
			replace:  []string{`terraform_data.x["b"]`},
			init:     []tfexec.InitOption{tfexec.BackendConfig("path=../../../snapshot.tfstate"), tfexec.Reconfigure(true)},
			plan: []tfexec.PlanOption{
				tfexec.Out("../../../plan.tfplan"),
				tfexec.VarFile("../../.kl-varfiles/000-common.tfvars"),
				tfexec.VarFile("../../.kl-varfiles/001-prod.tfvars"),
				tfexec.Target("module.app"),
				tfexec.Target(`terraform_data.x["a"]`),
				tfexec.Replace(`terraform_data.x["b"]`),
			},
			apply: []tfexec.ApplyOption{tfexec.DirOrPlan("../../../plan.tfplan")},
		},
		"plan options": {
			rootSub:  ".",
			varFiles: []string{".kl-varfiles/000-common.tfvars"},
			opts:     engine.PlanOptions{Destroy: true, NoRefresh: true, Parallelism: 3, Vars: []string{"x"}},
			inEnv:    true,
			init:     []tfexec.InitOption{tfexec.BackendConfig("path=../snapshot.tfstate"), tfexec.Reconfigure(true)},
			plan: []tfexec.PlanOption{
				tfexec.Out("../plan.tfplan"), tfexec.Destroy(true), tfexec.Refresh(false), tfexec.Parallelism(3),
			},
			apply: []tfexec.ApplyOption{tfexec.DirOrPlan("../plan.tfplan"), tfexec.Parallelism(3)},
		},
		"refresh-only": {
			rootSub: ".",
			opts:    engine.PlanOptions{RefreshOnly: true},
			init:    []tfexec.InitOption{tfexec.BackendConfig("path=../snapshot.tfstate"), tfexec.Reconfigure(true)},
			plan:    []tfexec.PlanOption{tfexec.Out("../plan.tfplan"), tfexec.RefreshOnly(true)},
			apply:   []tfexec.ApplyOption{tfexec.DirOrPlan("../plan.tfplan")},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := testWorkDir(tc.rootSub)
			if got := initOptions(w); !reflect.DeepEqual(got, tc.init) {
				t.Errorf("initOptions = %#v, want %#v", got, tc.init)
			}
			if got := planOptions(w, tc.varFiles, tc.targets, tc.replace, tc.opts, tc.inEnv); !reflect.DeepEqual(got, tc.plan) {
				t.Errorf("planOptions = %#v, want %#v", got, tc.plan)
			}
			if got := applyOptions(w, tc.opts.Parallelism); !reflect.DeepEqual(got, tc.apply) {
				t.Errorf("applyOptions = %#v, want %#v", got, tc.apply)
			}
		})
	}
}

func TestTerraformEnv(t *testing.T) {
	t.Parallel()
	base := []string{
		"PATH=/usr/bin:/bin",
		"HOME=/home/u",
		"TF_CLI_CONFIG_FILE=/dev/null",
		"TF_PLUGIN_CACHE_DIR=/cache",
		"HTTPS_PROXY=http://proxy:3128",
		"AWS_PROFILE=prod",
		"EMPTY=",
		"WITH_EQUALS=a=b",
		"TF_DATA_DIR=/somewhere/else",
		"TF_IN_AUTOMATION=1",
		"TF_INPUT=0",
		"TF_VAR_region=eu",
		"TF_VAR_region=us", // a later entry wins
		"TF_VAR_db-password=p=w",
		"TF_CLI_ARGS=-no-color",
		"TF_CLI_ARGS_plan=-refresh=false",
		"TF_WORKSPACE=staging",
		"TF_LOG=TRACE",
		"noequals",
		// Kilolock's own configuration and secrets: never Terraform's.
		"KL_STORE=postgres://kl:secret@db/kl",
		"KL_ACTOR=alice",
		"KLBOT_PRIVATE_KEY=-----BEGIN RSA PRIVATE KEY-----",
		"KLBOT_WEBHOOK_SECRET=s3cret",
		"KLBOT_DATABASE_URL=postgres://bot:secret@db/bot",
		"KLX=kept",
	}
	env, vars, dropped := terraformEnv(base, "/run/data")
	want := map[string]string{
		"PATH":                "/usr/bin:/bin",
		"HOME":                "/home/u",
		"TF_CLI_CONFIG_FILE":  "/dev/null",
		"TF_PLUGIN_CACHE_DIR": "/cache",
		"HTTPS_PROXY":         "http://proxy:3128",
		"AWS_PROFILE":         "prod",
		"EMPTY":               "",
		"WITH_EQUALS":         "a=b",
		"KLX":                 "kept",
		"TF_DATA_DIR":         "/run/data",
		"CHECKPOINT_DISABLE":  "1",
	}
	if !reflect.DeepEqual(env, want) {
		t.Errorf("terraformEnv() =\n%v\nwant\n%v", env, want)
	}
	wantVars := map[string]string{"TF_VAR_region": "us", "TF_VAR_db-password": "p=w"}
	if !reflect.DeepEqual(vars, wantVars) {
		t.Errorf("vars = %v, want %v", vars, wantVars)
	}
	wantDropped := []string{"TF_CLI_ARGS", "TF_CLI_ARGS_plan", "TF_INPUT", "TF_IN_AUTOMATION", "TF_LOG", "TF_WORKSPACE"}
	if !reflect.DeepEqual(dropped, wantDropped) {
		t.Errorf("dropped = %v, want %v", dropped, wantDropped)
	}
	// terraform-exec accepts the result, with the shim's variables too.
	tf, err := tfexec.NewTerraform(t.TempDir(), "/bin/true")
	if err != nil {
		t.Fatal(err)
	}
	if err := tf.SetEnv(env); err != nil {
		t.Errorf("SetEnv refused the filtered environment: %v", err)
	}
	shimEnvFor(env, vars, map[string]string{"TF_CLI_ARGS_plan": "'-var=x=1'"}, "/usr/bin/terraform")
	if err := tf.SetEnv(env); err != nil {
		t.Errorf("SetEnv refused the shim's environment: %v", err)
	}
	// The caller's CHECKPOINT_DISABLE wins.
	env, _, _ = terraformEnv([]string{"CHECKPOINT_DISABLE="}, "/d")
	if v, ok := env["CHECKPOINT_DISABLE"]; !ok || v != "" {
		t.Errorf("CHECKPOINT_DISABLE = %q, %v; want the caller's empty value", v, ok)
	}
}

func TestNewWorkDir(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "runs")
	w, err := newWorkDir(root, "01JABC")
	if err != nil {
		t.Fatalf("newWorkDir: %v", err)
	}
	for _, d := range []string{root, w.Dir, w.Cfg, w.Data} {
		fi, err := os.Stat(d)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o700 {
			t.Errorf("%s mode %v, want 0700", d, fi.Mode().Perm())
		}
	}
	if err := w.writeSnapshot([]byte("{}")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(w.Snapshot); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("snapshot: %v, %v; want mode 0600", fi, err)
	}
	if _, err := newWorkDir(root, "01JABC"); !errors.Is(err, engine.ErrConflict) {
		t.Errorf("second work dir for one run: error = %v, want ErrConflict", err)
	}
	for _, bad := range []string{"", ".", "..", "a/b", `a\b`, "../x"} {
		if _, err := newWorkDir(root, bad); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("newWorkDir(%q) error = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestSameVarFiles(t *testing.T) {
	t.Parallel()
	archived := []string{".kl-varfiles/000-common.tfvars", ".kl-varfiles/001-prod.tfvars"}
	if err := sameVarFiles([]string{"../common.tfvars", "/abs/prod.tfvars"}, archived); err != nil {
		t.Errorf("same files by base name: %v", err)
	}
	for _, req := range [][]string{{"common.tfvars"}, {"prod.tfvars", "common.tfvars"}, {"common.tfvars", "dev.tfvars"}} {
		if err := sameVarFiles(req, archived); !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "differ") {
			t.Errorf("sameVarFiles(%v) = %v, want ErrInvalid", req, err)
		}
	}
}

// TestRemoveWorkDir: RemoveWorkDir removes a run's work dir left behind (a
// holder killed mid-apply), and nothing else under the work root; a missing
// dir is no error, a run id that is not a plain name is refused, and with
// KeepWorkDirs the dir stays.
func TestRemoveWorkDir(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "runs")
	left, err := newWorkDir(root, "01JLEFT")
	if err != nil {
		t.Fatal(err)
	}
	other, err := newWorkDir(root, "01JOTHER")
	if err != nil {
		t.Fatal(err)
	}
	if err := left.writeSnapshot([]byte("{}")); err != nil {
		t.Fatal(err)
	}
	r := &Runner{workRoot: root}
	if err := r.RemoveWorkDir("01JLEFT"); err != nil {
		t.Fatalf("RemoveWorkDir: %v", err)
	}
	if _, err := os.Stat(left.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("work dir %s after RemoveWorkDir: %v; want removed", left.Dir, err)
	}
	if _, err := os.Stat(other.Dir); err != nil {
		t.Errorf("another run's work dir: %v; want kept", err)
	}
	if err := r.RemoveWorkDir("01JLEFT"); err != nil {
		t.Errorf("RemoveWorkDir of a missing dir = %v; want nil", err)
	}
	for _, bad := range []string{"", ".", "..", "a/b", `a\b`, "../x"} {
		if err := r.RemoveWorkDir(bad); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("RemoveWorkDir(%q) = %v; want ErrInvalid", bad, err)
		}
	}
	kept := &Runner{workRoot: root, keep: true, log: discard}
	if err := kept.RemoveWorkDir("01JOTHER"); err != nil {
		t.Errorf("RemoveWorkDir with KeepWorkDirs: %v", err)
	}
	if _, err := os.Stat(other.Dir); err != nil {
		t.Errorf("with KeepWorkDirs the work dir is gone: %v", err)
	}
}

// TestNewRunnerProtectsProcess: after NewRunner the process is not
// dumpable, so the Terraform it starts cannot read its environment through
// /proc/PPID/environ (on Linux; the check itself needs a non-root user).
func TestNewRunnerProtectsProcess(t *testing.T) {
	if _, err := NewRunner(RunnerOptions{WorkRoot: t.TempDir(), Binary: "/bin/true"}); err != nil {
		t.Fatal(err)
	}
	d, err := dumpable()
	if err != nil {
		t.Fatalf("PR_GET_DUMPABLE: %v", err)
	}
	if d && runtime.GOOS == "linux" {
		t.Error("the process is still dumpable after NewRunner")
	}
}
