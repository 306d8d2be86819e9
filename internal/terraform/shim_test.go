package terraform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	version "github.com/hashicorp/go-version"

	"github.com/kilolock/kilolock/internal/engine"
)

// tfVarConfig declares x (used by a resource and an output) and a
// sensitive s.
var tfVarConfig = map[string]string{
	"main.tf": `variable "x" {
  type    = string
  default = "from-default"
}

variable "s" {
  type      = string
  sensitive = true
  default   = "s-default"
}

resource "terraform_data" "a" {
  input = var.x
}

resource "terraform_data" "s" {
  input = var.s
}

output "x" {
  value = var.x
}
`,
}

// appliedX plans dir with env and varFiles, applies the plan, and returns
// the applied value of output x: what Terraform believed var.x was.
func appliedX(t *testing.T, r *Runner, run, dir string, varFiles []string) string {
	t.Helper()
	ctx := context.Background()
	snap := snapshot("lineage-"+run, 1)
	plan, err := r.Plan(ctx, engine.PlanRequest{Run: run, Dir: dir, VarFiles: varFiles, Snapshot: snap})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	res, err := r.Apply(ctx, engine.ApplyRequest{Run: run + "-apply", PlanFile: plan.PlanFile, Config: plan.Config, Snapshot: snap})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	var st struct {
		Outputs map[string]struct {
			Value string `json:"value"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(res.State, &st); err != nil {
		t.Fatalf("parsing applied state: %v", err)
	}
	return st.Outputs["x"].Value
}

// TestTFVarReachesTerraform: a TF_VAR_x in the caller's environment reaches
// the plan (and so the apply), with Terraform's lowest precedence: a var
// file passed with the plan, terraform.tfvars and *.auto.tfvars in the
// configuration each win over it (Terraform's "Variable Definition
// Precedence").
func TestTFVarReachesTerraform(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		files    map[string]string
		varFiles []string
		want     string
	}{
		"environment": {want: "from-env"},
		"var file wins": {
			files: map[string]string{"prod.tfvars": `x = "from-var-file"` + "\n"}, varFiles: []string{"prod.tfvars"},
			want: "from-var-file",
		},
		"terraform.tfvars wins": {files: map[string]string{"terraform.tfvars": `x = "from-terraform-tfvars"` + "\n"}, want: "from-terraform-tfvars"},
		"auto.tfvars wins":      {files: map[string]string{"a.auto.tfvars": `x = "from-auto-tfvars"` + "\n"}, want: "from-auto-tfvars"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r, _ := setupRunnerEnv(t, "TF_CLI_CONFIG_FILE=/dev/null", "TF_VAR_x=from-env")
			dir := setupConfig(t, tfVarConfig)
			writeTree(t, dir, tc.files)
			if got := appliedX(t, r, "tfvar", dir, tc.varFiles); got != tc.want {
				t.Errorf("var.x = %q, want %q", got, tc.want)
			}
		})
	}
}

// recorderScript is a stand-in Terraform binary: it appends its command
// line and its environment to LOG, one NUL-separated record per run, then
// execs the real Terraform with the same arguments.
const recorderScript = `#!/bin/sh
{ printf 'ARGV'; for a in "$@"; do printf '\037%s' "$a"; done; printf '\n'; env; printf '\000'; } >> "LOG"
exec "REAL" "$@"
`

// invocation is one recorded Terraform process.
type invocation struct {
	argv []string
	env  map[string]string
}

func readInvocations(t *testing.T, log string) []invocation {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatalf("reading the recorder's log: %v", err)
	}
	var out []invocation
	for _, rec := range bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}) {
		head, env, _ := strings.Cut(string(rec), "\n")
		inv := invocation{argv: strings.Split(head, "\037")[1:], env: map[string]string{}}
		for _, kv := range strings.Split(env, "\n") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				inv.env[k] = v
			}
		}
		out = append(out, inv)
	}
	return out
}

// TestShimHandsOverTFVars runs a plan and its apply through a recording
// stand-in for Terraform behind the shim: `plan` and `show` have TF_VAR_*
// in their environment, `apply PLANFILE` not (its plan holds the values,
// and no variable is ephemeral); none has the values on its command line (the argv terraform-exec built, which the shim
// passes on unchanged), none has a KL_* or KLBOT_* variable (the store's,
// the shim's own); and no file of the run's kept work dir but the saved
// plan and the state Terraform wrote holds a value.
func TestShimHandsOverTFVars(t *testing.T) {
	t.Parallel()
	const x, s = "x-value-4711", "s-secret-0815"
	real := testBinary(t)
	dir := t.TempDir()
	logFile := filepath.Join(dir, "invocations.log")
	rec := filepath.Join(dir, "terraform")
	script := strings.NewReplacer("LOG", logFile, "REAL", real).Replace(recorderScript)
	if err := os.WriteFile(rec, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, "runs")
	var logs bytes.Buffer
	r, err := NewRunner(RunnerOptions{WorkRoot: root, Binary: rec, KeepWorkDirs: true,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Env: append(os.Environ(), "TF_CLI_CONFIG_FILE=/dev/null", "TF_VAR_x="+x, "TF_VAR_s="+s,
			"KL_STORE=postgres://kl:store-password@db/kl", "KLBOT_WEBHOOK_SECRET=hook-secret")})
	if err != nil {
		t.Fatal(err)
	}
	cfg := setupConfig(t, tfVarConfig)
	if got := appliedX(t, r, "shim", cfg, nil); got != x {
		t.Fatalf("var.x = %q, want %q", got, x)
	}

	invs := readInvocations(t, logFile)
	var cmds []string
	for _, inv := range invs {
		cmds = append(cmds, inv.argv[0])
		if line := strings.Join(inv.argv, " "); strings.Contains(line, x) || strings.Contains(line, s) {
			t.Errorf("a value is on the command line: %q", line)
		}
		switch inv.argv[0] {
		case "plan", "show":
			if inv.env["TF_VAR_x"] != x || inv.env["TF_VAR_s"] != s {
				t.Errorf("terraform %s: TF_VAR_x = %q, TF_VAR_s = %q; want the caller's", inv.argv[0], inv.env["TF_VAR_x"], inv.env["TF_VAR_s"])
			}
		case "apply": // the saved plan holds the values; no variable is ephemeral
			if _, ok := inv.env["TF_VAR_x"]; ok {
				t.Errorf("terraform apply has TF_VAR_x; the saved plan holds var.x")
			}
		}
		for k := range inv.env {
			if ownVariable(k) {
				t.Errorf("terraform %s has Kilolock's %s in its environment", inv.argv[0], k)
			}
		}
	}
	for _, want := range []string{"init", "plan", "show", "apply"} {
		if !strings.Contains(" "+strings.Join(cmds, " ")+" ", " "+want+" ") {
			t.Errorf("terraform commands run %v: no %s", cmds, want)
		}
	}
	if out := logs.String(); strings.Contains(out, x) || strings.Contains(out, s) {
		t.Errorf("the runner's log holds a value:\n%s", out)
	}

	// Kept work dirs: only Terraform's own files hold a value.
	var holders []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(x)) || bytes.Contains(b, []byte(s)) {
			rel, _ := filepath.Rel(root, p)
			holders = append(holders, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range holders {
		if !strings.HasSuffix(h, "/snapshot.tfstate") && !strings.HasSuffix(h, "/plan.tfplan") {
			t.Errorf("%s holds a value; only the saved plan and the state may (Terraform writes them)", h)
		}
	}
	t.Logf("files holding a value: %v", holders)
}

// TestRunnerShim: a Runner uses the shim only when its environment has
// TF_VAR_*.
func TestRunnerShim(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		env      []string
		wantShim bool
	}{
		"no TF_VAR":      {env: []string{"PATH=/bin", "TF_CLI_ARGS=-no-color"}},
		"TF_VAR":         {env: []string{"PATH=/bin", "TF_VAR_region=eu"}, wantShim: true},
		"empty TF_VAR_x": {env: []string{"TF_VAR_x="}, wantShim: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r, err := NewRunner(RunnerOptions{WorkRoot: t.TempDir(), Binary: "/bin/true", Env: tc.env})
			if err != nil {
				t.Fatal(err)
			}
			exe, _ := os.Executable()
			if got := r.shim != ""; got != tc.wantShim || (got && r.shim != exe) {
				t.Errorf("shim = %q, want it %v (this program: %s)", r.shim, tc.wantShim, exe)
			}
		})
	}
}

func TestShimEnv(t *testing.T) {
	t.Parallel()
	got := shimEnv([]string{
		"PATH=/bin",
		ShimExecVar + "=/usr/bin/terraform",
		ShimVarPrefix + "region=eu",
		ShimVarPrefix + "db-password=p=w",
		ShimVarPrefix + "empty=",
		"TF_IN_AUTOMATION=1",
	})
	want := []string{"PATH=/bin", "TF_VAR_region=eu", "TF_VAR_db-password=p=w", "TF_VAR_empty=", "TF_IN_AUTOMATION=1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("shimEnv() = %q, want %q", got, want)
	}
}

// TestRunShimFailure: a shim that cannot start Terraform says so on stderr,
// without values, and exits 127.
func TestRunShimFailure(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	missing := filepath.Join(t.TempDir(), "no-terraform")
	code := runShim(missing, []string{"kl", "plan"}, []string{ShimVarPrefix + "x=secret-1"}, &stderr)
	if code != 127 {
		t.Errorf("exit status %d, want 127", code)
	}
	if got := stderr.String(); !strings.Contains(got, missing) || !strings.Contains(got, "no such file") || strings.Contains(got, "secret-1") {
		t.Errorf("stderr = %q, want it to name %s and the reason, without the value", got, missing)
	}
}

func TestValidVariableName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"region":      "",
		"db-password": "",
		"_private":    "",
		"x1":          "",
		"":            "empty",
		"1x":          "not a Terraform variable name",
		"a.b":         "not a Terraform variable name",
		"a b":         "not a Terraform variable name",
		"count":       "reserved by Terraform",
		"for_each":    "reserved by Terraform",
	} {
		err := ValidVariableName(name)
		if (err == nil) != (want == "") || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("ValidVariableName(%q) = %v, want %q", name, err, want)
		}
	}
}

// TestTFVarEphemeralReachesApply: an apply gets the TF_VAR_* of ephemeral
// variables (not saved in the plan: Terraform needs them again) and no
// other — one it got would make Terraform 1.11 warn "Ignoring variable
// when applying a saved plan" quoting both values when the plan's came from
// a var file.
func TestTFVarEphemeralReachesApply(t *testing.T) {
	t.Parallel()
	skipBefore(t, testBinary(t), "1.10.0", "ephemeral input variables")
	const e, x = "ephemeral-value-1357", "x-env-value-2468"
	seen := filepath.Join(t.TempDir(), "seen")
	dir := setupConfig(t, map[string]string{
		"main.tf": `variable "e" {
  type      = string
  ephemeral = true
}

variable "x" {
  type = string
}

resource "terraform_data" "a" {
  input = var.x

  provisioner "local-exec" {
    command     = "printf %s \"$E\" > ` + seen + `"
    environment = { E = var.e }
  }
}

output "x" {
  value = var.x
}
`,
		"prod.tfvars": `x = "x-from-var-file"` + "\n",
	})
	var logs bytes.Buffer
	r, err := NewRunner(RunnerOptions{WorkRoot: filepath.Join(t.TempDir(), "runs"), Binary: testBinary(t),
		Env:    append(os.Environ(), "TF_CLI_CONFIG_FILE=/dev/null", "TF_VAR_e="+e, "TF_VAR_x="+x),
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	if got := appliedX(t, r, "eph", dir, []string{"prod.tfvars"}); got != "x-from-var-file" {
		t.Errorf("var.x = %q, want the var file's", got)
	}
	if b, err := os.ReadFile(seen); err != nil || string(b) != e {
		t.Errorf("the apply's provisioner saw var.e = %q (%v), want TF_VAR_e's %q", b, err, e)
	}
	if out := logs.String(); strings.Contains(out, "Ignoring variable") || strings.Contains(out, x) || strings.Contains(out, "x-from-var-file") {
		t.Errorf("the runner's log holds a variable's value:\n%s", out)
	}
}

// TestTFVarMaskedInErrors: Terraform quotes a variable's value in a failed
// validation (sensitive or not); a TF_VAR_* value is masked in the error a
// plan returns, with and without the -json UI stream.
func TestTFVarMaskedInErrors(t *testing.T) {
	t.Parallel()
	const x, s = "x-value-too-short", "s-secret-too-short"
	dir := setupConfig(t, map[string]string{"main.tf": `variable "x" {
  type = string
  validation {
    condition     = length(var.x) > 100
    error_message = "x=${var.x} is too short."
  }
}

variable "s" {
  type      = string
  sensitive = true
  validation {
    condition     = length(var.s) > 100
    error_message = "s is too short."
  }
}
`})
	var logs bytes.Buffer
	r, err := NewRunner(RunnerOptions{WorkRoot: filepath.Join(t.TempDir(), "runs"), Binary: testBinary(t),
		Env:    append(os.Environ(), "TF_CLI_CONFIG_FILE=/dev/null", "TF_VAR_x="+x, "TF_VAR_s="+s),
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	for name, progress := range map[string]func(engine.Progress){"plain": nil, "json": func(engine.Progress) {}} {
		_, err := r.Plan(context.Background(), engine.PlanRequest{Run: "masked-" + name, Dir: dir, Snapshot: snapshot("l", 1), Progress: progress})
		var ce *CommandError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: plan error %v, want a *CommandError", name, err)
		}
		failure, _ := json.Marshal(ce.TerraformFailure())
		for _, text := range []string{err.Error(), string(failure)} {
			if strings.Contains(text, x) || strings.Contains(text, s) {
				t.Errorf("%s: a value is in the error: %s", name, text)
			}
		}
		if !strings.Contains(err.Error(), "(value of TF_VAR_x)") {
			t.Errorf("%s: the error does not show where the masked value was: %s", name, err)
		}
	}
	if out := logs.String(); strings.Contains(out, x) || strings.Contains(out, s) {
		t.Errorf("the runner's log holds a value:\n%s", out)
	}
}

func TestMasker(t *testing.T) {
	t.Parallel()
	m := newMasker(map[string]string{"TF_VAR_a": "password1", "TF_VAR_b": "password12345", "TF_VAR_short": "prod1"})
	got := m.string("password12345 password1 prod1 production1")
	want := "(value of TF_VAR_b) (value of TF_VAR_a) prod1 production1"
	if got != want {
		t.Errorf("masked %q, want %q", got, want)
	}
	if got := (masker{}).string("password1"); got != "password1" {
		t.Errorf("the zero masker changed %q", got)
	}

	var buf bytes.Buffer
	log := m.logger(slog.New(slog.NewTextHandler(&buf, nil))).With("with", "password1")
	log.WithGroup("g").Warn("saw password1", "s", "password1", "err", errors.New("password1 failed"),
		"list", []string{"password1"}, slog.Group("inner", "v", "password1"))
	if out := buf.String(); strings.Contains(out, "password1") || strings.Count(out, "(value of TF_VAR_a)") != 6 {
		t.Errorf("log record not masked: %s", out)
	}

	ce := &CommandError{Command: "plan", Stderr: "var.a is \"password1\"", Diagnostics: []Diagnostic{{Summary: "password1", Detail: "password1"}},
		Err: fmt.Errorf("tfexec: password1: %w", context.Canceled)}
	err := m.error(fmt.Errorf("wrapped: %w", ce))
	if strings.Contains(err.Error(), "password1") || !errors.Is(err, context.Canceled) {
		t.Errorf("masked error %q (context.Canceled kept: %v)", err, errors.Is(err, context.Canceled))
	}
}

func TestEphemeralVariables(t *testing.T) {
	t.Parallel()
	dir := setupConfig(t, map[string]string{
		"main.tf": `variable "a" {
  ephemeral = true
}
variable "b" {}
variable "c" {
  ephemeral = false
}
variable "d" {
  ephemeral = true
}
`,
		"vars.tf.json":  `{"variable": {"j": {"ephemeral": true}, "k": {"type": "string"}}}`,
		"b_override.tf": "variable \"b\" {\n  ephemeral = true\n}\nvariable \"d\" {\n  ephemeral = false\n}\n",
		".hidden.tf":    "variable \"h\" {\n  ephemeral = true\n}\n",
		"notes.txt":     "variable \"n\" {\n  ephemeral = true\n}\n",
		"sub/sub.tf":    "variable \"s\" {\n  ephemeral = true\n}\n",
	})
	got, err := ephemeralVariables(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]bool{"a": true, "b": true, "j": true}; !reflect.DeepEqual(got, want) {
		t.Errorf("ephemeralVariables() = %v, want %v", got, want)
	}
	writeTree(t, dir, map[string]string{"broken.tf": "variable \"x\" {"})
	if _, err := ephemeralVariables(dir); err == nil || !strings.Contains(err.Error(), "broken.tf") {
		t.Errorf("ephemeralVariables() of a broken file: %v, want an error naming it", err)
	}
}

// skipBefore skips the test when bin is a Terraform older than min, which
// lacks what.
func skipBefore(t *testing.T, bin, min, what string) {
	t.Helper()
	out, err := exec.Command(bin, "version", "-json").Output()
	if err != nil {
		t.Fatalf("terraform version: %v", err)
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("terraform version -json: %v", err)
	}
	have, err := version.NewVersion(v.Version)
	if err != nil {
		t.Fatalf("terraform version %q: %v", v.Version, err)
	}
	if have.LessThan(version.Must(version.NewVersion(min))) {
		t.Skipf("Terraform %s has no %s (since %s)", v.Version, what, min)
	}
}
