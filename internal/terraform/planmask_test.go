package terraform

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/testprovider/tptest"
)

// planModes are the two ways Plan runs Terraform: plain (the error is its
// stderr) and -json with progress (the error holds the UI stream's
// diagnostics).
var planModes = map[string]func(engine.Progress){"plain": nil, "json": func(engine.Progress) {}}

// maskingRunner is a Runner on the real binary with env, logging at debug
// into the returned buffer.
func maskingRunner(t *testing.T, env ...string) (*Runner, *lockedBuffer) {
	t.Helper()
	var logs lockedBuffer
	r, err := NewRunner(RunnerOptions{WorkRoot: filepath.Join(t.TempDir(), "runs"), Binary: testBinary(t),
		Env: append(os.Environ(), env...), Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	return r, &logs
}

// kept is what a failed plan leaves for the run's end and the reports:
// the error's text and its TerraformFailure.
func kept(t *testing.T, err error) string {
	t.Helper()
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Command != "plan" {
		t.Fatalf("Plan: %v; want a failure of terraform plan", err)
	}
	b, jerr := json.Marshal(ce.TerraformFailure())
	if jerr != nil {
		t.Fatal(jerr)
	}
	return err.Error() + "\n" + string(b)
}

// cloudSecretConfig reads a provider-sensitive secret with a data source
// and copies it into terraform_data, which Terraform's plan does not mark.
const cloudSecretConfig = kltestRequired + `
data "kltest_object" "db" { id = "00000000000c10d1" }
resource "terraform_data" "copy" { input = data.kltest_object.db.secret }
`

// cloudSecretCheck is a check block whose warning quotes the copy.
const cloudSecretCheck = `
check "c" {
  assert {
    condition     = terraform_data.copy.output == "nope"
    error_message = "copy is ${terraform_data.copy.output}"
  }
}
`

// TestPlanMasksStateSecrets: when a plan fails, Terraform quotes in its
// error the unmarked copy of a value the state planned against marks
// sensitive (`cannot convert "…" to number`), and a check block's warning
// quotes it in a plan that succeeds and in one that fails. Neither the
// error the run's end keeps nor the runner's logs hold it, plain or -json
// (review of issue 12, defects 1 and 2). Real Terraform, the test
// provider's provider-sensitive secret.
func TestPlanMasksStateSecrets(t *testing.T) {
	t.Parallel()
	const secret = "CloudApiSecret-31337-zz"
	p := tptest.New(t)
	obj := `{"id":"00000000000c10d1","name":"db","delay":null,"secret":"` + secret + `","settings":null,"rules":[],"created_at":"2026-12-01T00:00:00Z"}`
	if err := os.WriteFile(filepath.Join(p.APIDir, "00000000000c10d1.json"), []byte(obj), 0o600); err != nil {
		t.Fatal(err)
	}
	r, logs := maskingRunner(t, p.Env()...)
	ctx := context.Background()
	snap := snapshot("lineage-planmask", 1)
	plan, err := r.Plan(ctx, engine.PlanRequest{Run: "v1", Dir: setupConfig(t, map[string]string{"main.tf": cloudSecretConfig}), Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Apply(ctx, engine.ApplyRequest{Run: "v1-apply", PlanFile: plan.PlanFile, Config: plan.Config, Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(res.State), secret) {
		t.Fatalf("the state does not hold the secret: the test tests nothing\n%s", res.State)
	}

	failing := setupConfig(t, map[string]string{"main.tf": cloudSecretConfig + cloudSecretCheck +
		`resource "terraform_data" "num" { input = tonumber(terraform_data.copy.output) }` + "\n"})
	for mode, progress := range planModes {
		_, err := r.Plan(ctx, engine.PlanRequest{Run: "fail-" + mode, Dir: failing, Snapshot: res.State, Progress: progress})
		got := kept(t, err)
		if strings.Contains(got, secret) {
			t.Errorf("%s: the failed plan's error holds the secret:\n%s", mode, got)
		}
		if !strings.Contains(got, "(sensitive value)") || !strings.Contains(got, `cannot convert "(sensitive value)"`) {
			t.Errorf("%s: the error %q does not say what failed with the value masked", mode, got)
		}
	}
	warning := setupConfig(t, map[string]string{"main.tf": cloudSecretConfig + cloudSecretCheck})
	if _, err := r.Plan(ctx, engine.PlanRequest{Run: "warn", Dir: warning, Snapshot: res.State, Progress: func(engine.Progress) {}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the runner logged the secret:\n%s", logs.String())
	}
	if n := strings.Count(logs.String(), `detail="copy is (sensitive value)"`); n < 2 {
		t.Errorf("the check's warning is logged masked %d times, want 2 (the failed -json plan's, the plan's):\n%s", n, logs.String())
	}
}

// sensitiveVarConfig declares sensitive variables whose values come from
// var files — an explicit -var-file, terraform.tfvars and *.auto.tfvars —
// and a default; a failed validation quotes the value (`var.pw is "…"`, and
// the var file's line in the plain output).
const sensitiveVarConfig = `
variable "pw" {
  type      = string
  sensitive = true
  validation {
    condition     = length(var.pw) > 100
    error_message = "pw is too short."
  }
}
variable "creds" {
  type      = object({ user = string, pass = string })
  sensitive = true
  validation {
    condition     = length(var.creds.pass) > 100
    error_message = "creds.pass is too short."
  }
}
variable "token" {
  type      = string
  sensitive = true
  validation {
    condition     = length(var.token) > 100
    error_message = "token is too short."
  }
}
variable "dflt" {
  type      = string
  sensitive = true
  default   = "Default-Secret-4444"
  validation {
    condition     = length(var.dflt) > 100
    error_message = "dflt is too short."
  }
}
variable "plain" {
  type    = string
  default = "not-secret-plain"
}
resource "terraform_data" "x" { input = [var.pw, var.creds, var.token, var.dflt, var.plain] }
`

// TestPlanMasksSensitiveVarFileValues: the values var files give variables
// declared sensitive (and such a variable's default) are masked in a failed
// plan's error and in the logs, plain and -json: Terraform writes no plan
// JSON for a failed plan, so the masker reads them from the configuration
// and the var files themselves (review of issue 12, defect 1, the
// --var-file case).
func TestPlanMasksSensitiveVarFileValues(t *testing.T) {
	t.Parallel()
	secrets := []string{"VarFile-Secret-55555", "Secret-777", "AutoVars-Secret-666", "Default-Secret-4444"} // "Secret-777": in every form of creds.pass
	dir := setupConfig(t, map[string]string{
		"main.tf":                sensitiveVarConfig,
		"s.tfvars":               "pw = \"VarFile-Secret-55555\"\n",
		"terraform.tfvars":       `creds = { user = "u", pass = "Obj<Pass>&\"Secret-777" }` + "\n",
		"extra.auto.tfvars.json": `{"token": "AutoVars-Secret-666"}` + "\n",
	})
	r, logs := maskingRunner(t, "TF_CLI_CONFIG_FILE=/dev/null")
	for mode, progress := range planModes {
		_, err := r.Plan(context.Background(), engine.PlanRequest{Run: "vf-" + mode, Dir: dir, VarFiles: []string{filepath.Join(dir, "s.tfvars")},
			Snapshot: snapshot("lineage-vf", 1), Progress: progress})
		got := kept(t, err)
		for _, s := range secrets {
			if strings.Contains(got, s) {
				t.Errorf("%s: the failed plan's error holds %q:\n%s", mode, s, got)
			}
		}
		for _, want := range []string{"pw is too short.", "creds.pass is too short.", "token is too short.", "dflt is too short."} {
			if !strings.Contains(got, want) {
				t.Errorf("%s: the error lacks %q:\n%s", mode, want, got)
			}
		}
	}
	for _, s := range secrets {
		if strings.Contains(logs.String(), s) {
			t.Errorf("the runner logged %q", s)
		}
	}
}
