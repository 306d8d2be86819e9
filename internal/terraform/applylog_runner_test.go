package terraform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// sensitiveFailure is a configuration whose apply fails in two local-exec
// provisioners whose commands — which Terraform quotes in clear in its
// error diagnostics — hold a sensitive variable's value and a value known
// only at apply time that the state marks sensitive (sensitive(uuid())),
// each through terraform_data's unmarked copy in output; a check block's
// assertion fails (a warning).
const sensitiveFailure = `
variable "secret" {
  type      = string
  sensitive = true
  default   = "apply-secret-7f3a9c"
}

resource "terraform_data" "copy" {
  input = var.secret
}

resource "terraform_data" "gen" {
  input = sensitive(uuid())
}

resource "terraform_data" "ok" {
  input = "fine"
}

resource "terraform_data" "bad" {
  input = terraform_data.copy.output
  provisioner "local-exec" {
    command = "echo using ${self.output}; exit 3"
  }
}

resource "terraform_data" "bad2" {
  input = terraform_data.gen.output
  provisioner "local-exec" {
    command = "echo token ${self.output}; exit 4"
  }
}

check "ok_is_zzz" {
  assert {
    condition     = terraform_data.ok.output == "zzz"
    error_message = "ok is not zzz"
  }
}
`

// TestApplyLogMasksSensitive: a failed apply's log lists each instance
// with its outcome and every diagnostic — the errors with their addresses,
// the warning — and neither the log, nor the error the run's end keeps, nor
// the runner's logs hold a value Terraform or the state marks sensitive,
// though Terraform quotes both in clear (ADR 0047).
func TestApplyLogMasksSensitive(t *testing.T) {
	t.Parallel()
	bin := testBinary(t)
	var logs lockedBuffer
	r, err := NewRunner(RunnerOptions{WorkRoot: filepath.Join(t.TempDir(), "runs"), Binary: bin,
		Env: append(os.Environ(), "TF_CLI_CONFIG_FILE=/dev/null"), Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	dir := setupConfig(t, map[string]string{"main.tf": sensitiveFailure})
	ctx := context.Background()
	snap := snapshot("lineage-mask", 1)
	plan, err := r.Plan(ctx, engine.PlanRequest{Run: "plan", Dir: dir, Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Apply(ctx, engine.ApplyRequest{Run: "apply", PlanFile: plan.PlanFile, Config: plan.Config, Snapshot: snap})
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Command != "apply" {
		t.Fatalf("Apply: %v; want the provisioners' failure", err)
	}
	var st struct {
		Resources []struct {
			Name      string `json:"name"`
			Instances []struct {
				Attributes struct {
					Input struct {
						Value string `json:"value"`
					} `json:"input"` // terraform_data's dynamic input: {"value": …, "type": …}
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(res.State, &st); err != nil {
		t.Fatal(err)
	}
	secrets := []string{"apply-secret-7f3a9c"}
	for _, r := range st.Resources {
		if r.Name == "gen" {
			secrets = append(secrets, r.Instances[0].Attributes.Input.Value)
		}
	}
	if len(secrets) != 2 || len(secrets[1]) != 36 {
		t.Fatalf("the generated value is not in the state: %q", secrets)
	}

	l := res.Log
	if l == nil {
		t.Fatal("no apply log")
	}
	outcomes := map[string]engine.ResourceOutcome{}
	for _, r := range l.Resources {
		outcomes[r.Address] = r.Outcome
	}
	want := map[string]engine.ResourceOutcome{"terraform_data.copy": engine.ResourceApplied, "terraform_data.gen": engine.ResourceApplied,
		"terraform_data.ok": engine.ResourceApplied, "terraform_data.bad": engine.ResourceErrored, "terraform_data.bad2": engine.ResourceErrored}
	if len(outcomes) != len(want) {
		t.Errorf("outcomes %v, want %v", outcomes, want)
	}
	for a, o := range want {
		if outcomes[a] != o {
			t.Errorf("%s: %q, want %q", a, outcomes[a], o)
		}
	}
	if l.Totals != nil {
		t.Errorf("totals %+v: Terraform writes none for a failed apply", l.Totals)
	}
	var errs, warns, masked int
	for _, d := range l.Diagnostics {
		switch {
		case d.Severity == "error" && d.Summary == "local-exec provisioner error" && strings.HasPrefix(d.Address, "terraform_data.bad"):
			errs++
		case d.Severity == "warning" && d.Summary == "Check block assertion failed" && d.Detail == "ok is not zzz" && d.Context == `check "ok_is_zzz"`:
			warns++
		}
		masked += strings.Count(d.Detail, "(sensitive value)")
	}
	if errs != 2 || warns != 1 || masked < 4 {
		t.Errorf("diagnostics %+v: want both provisioner errors with their addresses, the check's warning, the values masked", l.Diagnostics)
	}
	kept, _ := json.Marshal(struct {
		Log  *engine.ApplyLog
		Fail *engine.TerraformFailure
		Err  string
	}{l, ce.TerraformFailure(), err.Error()})
	for _, s := range secrets {
		if strings.Contains(string(kept), s) {
			t.Errorf("the apply log or the error holds the sensitive value %q:\n%s", s, kept)
		}
		if strings.Contains(logs.String(), s) {
			t.Errorf("the runner logged the sensitive value %q", s)
		}
	}
	if !strings.Contains(logs.String(), `msg="terraform warning"`) || !strings.Contains(logs.String(), "ok is not zzz") {
		t.Errorf("the check's warning is not logged:\n%s", logs.String())
	}
}

// TestApplyLogApplied: an apply of three instances lists each applied,
// with the id Terraform printed, and Terraform's totals line; no
// diagnostics, so no Terraform process is run to mask them.
func TestApplyLogApplied(t *testing.T) {
	t.Parallel()
	r, _ := setupRunner(t)
	dir := setupConfig(t, map[string]string{"main.tf": `
resource "terraform_data" "a" { input = "a" }
resource "terraform_data" "b" { input = "b" }
resource "terraform_data" "c" {
  input = "c"
  provisioner "local-exec" { command = "sleep 0.3" }
}
`})
	ctx := context.Background()
	snap := snapshot("lineage-log", 1)
	plan, err := r.Plan(ctx, engine.PlanRequest{Run: "plan", Dir: dir, Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Apply(ctx, engine.ApplyRequest{Run: "apply", PlanFile: plan.PlanFile, Config: plan.Config, Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	l := res.Log
	if l == nil || len(l.Resources) != 3 || l.Count(engine.ResourceApplied) != 3 || len(l.Diagnostics) != 0 {
		t.Fatalf("apply log %+v; want 3 applied, no diagnostics", l)
	}
	for i, a := range []string{"terraform_data.a", "terraform_data.b", "terraform_data.c"} {
		r := l.Resources[i]
		if r.Address != a || r.Action != "create" || r.IDKey != "id" || len(r.IDValue) != 36 {
			t.Errorf("resource %d: %+v, want %s created with its id", i, r, a)
		}
	}
	if c := l.Resources[2]; c.Elapsed < engine.Duration(300e6) {
		t.Errorf("%s took %v; its provisioner sleeps 0.3 s", c.Address, c.Elapsed)
	}
	if l.Totals == nil || l.Totals.Message != "Apply complete! Resources: 3 added, 0 changed, 0 destroyed." || l.Totals.Add != 3 {
		t.Errorf("totals %+v", l.Totals)
	}
}
