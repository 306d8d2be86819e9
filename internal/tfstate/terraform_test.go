package tfstate_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/tfstate"
)

// terraformBinary returns KL_TERRAFORM, else terraform or tofu from PATH,
// and skips the test when there is none (docs/style.md 14: real Terraform).
func terraformBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KL_TERRAFORM"); p != "" {
		return p
	}
	for _, name := range []string{"terraform", "tofu"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Terraform: set KL_TERRAFORM or put terraform or tofu on PATH (make tools installs Terraform 1.5.7)")
	return ""
}

// workDir is one isolated Terraform working directory with its own
// TF_DATA_DIR and a local backend whose path is its own state file
// (docs/terraform.md "Running many Terraform processes on one state safely").
type workDir struct {
	t     *testing.T
	bin   string
	dir   string
	state string
}

func newWorkDir(t *testing.T, bin, name string, files map[string]string) *workDir {
	t.Helper()
	w := &workDir{t: t, bin: bin, dir: filepath.Join(t.TempDir(), name)}
	w.state = filepath.Join(w.dir, "snapshot.tfstate")
	files["zz_kl_backend_override.tf"] = "terraform {\n  backend \"local\" {}\n}\n"
	for f, content := range files {
		p := filepath.Join(w.dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// run runs terraform with args and returns its exit code; any code not in
// ok fails the test with the output.
func (w *workDir) run(ok []int, args ...string) (string, int) {
	w.t.Helper()
	cmd := exec.Command(w.bin, args...)
	cmd.Dir = w.dir
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TF_") {
			continue // TF_CLI_ARGS*, TF_VAR_*, TF_WORKSPACE… must not leak in
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env,
		"TF_DATA_DIR="+filepath.Join(w.dir, ".terraform-data"),
		"TF_CLI_CONFIG_FILE="+os.DevNull,
		"TF_IN_AUTOMATION=1",
		"TF_INPUT=0",
		"CHECKPOINT_DISABLE=1",
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		w.t.Fatalf("terraform %s: %v", strings.Join(args, " "), err)
	}
	if !slices.Contains(ok, code) {
		w.t.Fatalf("terraform %s in %s: exit %d\n%s", strings.Join(args, " "), filepath.Base(w.dir), code, out.String())
	}
	return out.String(), code
}

func (w *workDir) init() {
	w.t.Helper()
	w.run([]int{0}, "init", "-input=false", "-no-color", "-backend-config=path="+w.state)
}

func (w *workDir) putState(b []byte) {
	w.t.Helper()
	if err := os.WriteFile(w.state, b, 0o644); err != nil {
		w.t.Fatal(err)
	}
}

func (w *workDir) readState() ([]byte, *tfstate.State) {
	w.t.Helper()
	b, err := os.ReadFile(w.state)
	if err != nil {
		w.t.Fatal(err)
	}
	s, err := tfstate.Parse(b)
	if err != nil {
		w.t.Fatalf("parsing the state Terraform wrote: %v", err)
	}
	return b, s
}

// proofConfig is the root configuration of the proof: editA and editB are
// two pull requests' disjoint edits of one base.
//
//	A: updates terraform_data.d, creates terraform_data.e, relabels
//	   module.one (both its resources change);
//	B: destroys terraform_data.c (two for_each instances), moves
//	   terraform_data.a to a2 with a moved block (b's triggers follow it),
//	   drops module.app["us"], changes output b.
func proofConfig(editA, editB bool) map[string]string {
	a, d, oneLabel, appKeys, outB := "a", "d1", "one", `["eu", "us"]`, "terraform_data.b.output"
	var extra []string
	if editA {
		d, oneLabel = "d2", "one-v2"
		extra = append(extra, "resource \"terraform_data\" \"e\" {\n  input = \"e1\"\n}\n")
	}
	c := "resource \"terraform_data\" \"c\" {\n  for_each = toset([\"x\", \"y\"])\n  input    = \"c-${each.key}\"\n}\n"
	if editB {
		a, appKeys, outB, c = "a2", `["eu"]`, `"${terraform_data.b.output}-v2"`, ""
		extra = append(extra, "moved {\n  from = terraform_data.a\n  to   = terraform_data.a2\n}\n")
	}
	main := `resource "terraform_data" "` + a + `" {
  input = "a1"
}

resource "terraform_data" "b" {
  input            = "b1"
  triggers_replace = [terraform_data.` + a + `.id]
}

` + c + `
resource "terraform_data" "d" {
  input = "` + d + `"
}

data "terraform_remote_state" "net" {
  backend = "local"
  config = {
    path = "net.tfstate"
  }
}

module "app" {
  source   = "./mod"
  for_each = toset(` + appKeys + `)
  label    = each.key
}

module "one" {
  source = "./mod"
  label  = "` + oneLabel + `"
}

output "a" {
  value = terraform_data.` + a + `.output
}

output "b" {
  value = ` + outB + `
}

output "net" {
  value = data.terraform_remote_state.net.outputs.cidr
}
` + strings.Join(extra, "\n")
	return map[string]string{
		"main.tf": main,
		"mod/main.tf": `variable "label" {
  type = string
}

resource "terraform_data" "m" {
  count = 2
  input = "${var.label}-${count.index}"
}

resource "terraform_data" "n" {
  input = var.label
}
`,
		"net.tfstate": `{"version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": "net", "outputs": {"cidr": {"value": "10.0.0.0/16", "type": "string"}}, "resources": [], "check_results": null}`,
	}
}

// planWriteSet derives a plan's write set the way docs/design.md defines it:
// resource_changes whose actions are not no-op, both addresses of a move
// (previous_address), and changed root outputs — at resource level.
func planWriteSet(t *testing.T, planJSON string) []string {
	t.Helper()
	var p struct {
		ResourceChanges []struct {
			Address         string `json:"address"`
			PreviousAddress string `json:"previous_address"`
			Change          struct {
				Actions []string `json:"actions"`
			} `json:"change"`
		} `json:"resource_changes"`
		OutputChanges map[string]struct {
			Actions []string `json:"actions"`
		} `json:"output_changes"`
	}
	if err := json.Unmarshal([]byte(planJSON), &p); err != nil {
		t.Fatalf("reading plan JSON: %v", err)
	}
	var out []engine.Address
	for _, rc := range p.ResourceChanges {
		if rc.PreviousAddress != "" {
			out = append(out, engine.MustParseAddress(rc.PreviousAddress))
		} else if slices.Equal(rc.Change.Actions, []string{"no-op"}) {
			continue
		}
		out = append(out, engine.MustParseAddress(rc.Address))
	}
	for name, oc := range p.OutputChanges {
		if !slices.Equal(oc.Actions, []string{"no-op"}) {
			out = append(out, engine.Address(tfstate.OutputAddress(name)))
		}
	}
	return engine.NewAddressSet(out...).Strings()
}

// TestSnapshotMergeWithRealTerraform proves snapshot-merge with the real
// binary (docs/terraform.md "Snapshot-merge"): two runs apply disjoint edits to
// their own copies of one base state; merging both into the head gives a
// state on which `terraform plan` of the union configuration reports no
// changes — nothing lost, nothing stale.
func TestSnapshotMergeWithRealTerraform(t *testing.T) {
	t.Parallel()
	bin := terraformBinary(t)

	// Base: apply the original configuration.
	base := newWorkDir(t, bin, "base", proofConfig(false, false))
	base.init()
	base.run([]int{0}, "apply", "-auto-approve", "-input=false", "-no-color")
	baseBytes, baseState := base.readState()
	if got, _ := baseState.Marshal(); !bytes.Equal(got, baseBytes) {
		t.Errorf("Marshal(Parse(state Terraform wrote)) is not byte-identical:\n%s", lineDiff(string(baseBytes), string(got)))
	}

	// Run A: plain apply on its own copy of the base.
	runA := newWorkDir(t, bin, "a", proofConfig(true, false))
	runA.putState(baseBytes)
	runA.init()
	runA.run([]int{0}, "apply", "-auto-approve", "-input=false", "-no-color")
	aBytes, aState := runA.readState()
	if got, _ := aState.Marshal(); !bytes.Equal(got, aBytes) {
		t.Errorf("Marshal(Parse(run A's state)) is not byte-identical")
	}

	// Run B: plan -out, derive the write set from show -json, apply the
	// saved plan — the engine's flow.
	runB := newWorkDir(t, bin, "b", proofConfig(false, true))
	runB.putState(baseBytes)
	runB.init()
	runB.run([]int{0, 2}, "plan", "-out=run.tfplan", "-input=false", "-no-color", "-detailed-exitcode")
	planJSON, _ := runB.run([]int{0}, "show", "-json", "run.tfplan")
	writtenB := planWriteSet(t, planJSON)
	runB.run([]int{0}, "apply", "-input=false", "-no-color", "run.tfplan")
	_, bState := runB.readState()

	changedA := tfstate.Changed(baseState, aState)
	wantA := []string{"module.one.terraform_data.m", "module.one.terraform_data.n", "terraform_data.d", "terraform_data.e"}
	if !slices.Equal(changedA, wantA) {
		t.Errorf("Changed(base, A) = %q, want %q", changedA, wantA)
	}
	wantWrittenB := []string{"module.app.terraform_data.m", "module.app.terraform_data.n", "output.b", "terraform_data.a", "terraform_data.a2", "terraform_data.c"}
	if !slices.Equal(writtenB, wantWrittenB) {
		t.Errorf("run B's plan write set = %q, want %q", writtenB, wantWrittenB)
	}

	// Terraform behaviours the engine relies on, observed here.
	unchanged := 0
	bi := map[string]tfstate.Resource{}
	for _, r := range baseState.Resources {
		bi[r.Module+" "+r.Address()] = r
	}
	for _, r := range aState.Resources {
		if br, ok := bi[r.Module+" "+r.Address()]; ok && bytes.Equal(br.Raw, r.Raw) {
			unchanged++
		}
	}
	t.Logf("base serial %d → A's result serial %d, B's %d; %d of A's %d entries byte-identical to base",
		baseState.Serial, aState.Serial, bState.Serial, unchanged, len(aState.Resources))

	h1, repA, err := tfstate.Merge(baseState, baseState, aState, changedA, baseState.Serial+1)
	if err != nil {
		t.Fatal(err)
	}
	h2, repB, err := tfstate.Merge(h1, baseState, bState, writtenB, h1.Serial+1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("run A report: %+v", repA)
	t.Logf("run B report: %+v", repB)
	// The move rewrote b's dependencies (terraform_data.a → a2) although b
	// was a no-op in the plan: an unplanned change, merged because the head
	// had not touched b.
	if !slices.Equal(repB.Unplanned, []string{"terraform_data.b"}) || !slices.Contains(repB.Merged, "terraform_data.b") || len(repB.Kept) != 0 {
		t.Errorf("run B report = %+v, want terraform_data.b unplanned and merged", repB)
	}
	if len(repA.Unplanned)+len(repA.Overwritten)+len(repB.Overwritten) != 0 {
		t.Errorf("reports = %+v, %+v: want nothing unplanned for A, nothing overwritten", repA, repB)
	}
	if h2.Serial != baseState.Serial+2 || h2.Lineage != baseState.Lineage {
		t.Errorf("merged serial/lineage = %d/%s, want %d/%s", h2.Serial, h2.Lineage, baseState.Serial+2, baseState.Lineage)
	}
	merged, err := h2.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	onlyA, err := h1.Marshal()
	if err != nil {
		t.Fatal(err)
	}

	// The proof: the union configuration against the merged state.
	union := newWorkDir(t, bin, "union", proofConfig(true, true))
	union.putState(merged)
	union.init()
	if out, code := union.run([]int{0, 2}, "plan", "-detailed-exitcode", "-input=false", "-no-color", "-lock=false"); code != 0 {
		t.Errorf("terraform plan of both edits against the merged state: exit %d, want 0 (no changes)\n%s", code, out)
	}
	// Control: with only A merged, the same plan must see B's edits.
	union.putState(onlyA)
	if out, code := union.run([]int{0, 2}, "plan", "-detailed-exitcode", "-input=false", "-no-color", "-lock=false"); code != 2 {
		t.Errorf("control plan against the head with only A merged: exit %d, want 2 (changes)\n%s", code, out)
	}
}

// TestSynthesizeMatchesTerraform: the synthetic state and its configuration
// agree — Terraform plans no changes.
func TestSynthesizeMatchesTerraform(t *testing.T) {
	t.Parallel()
	bin := terraformBinary(t)
	files := map[string]string{}
	for f, b := range tfstate.SynthesizeTerraformDataConfig(30, 2) {
		files[f] = string(b)
	}
	w := newWorkDir(t, bin, "synth", files)
	s := tfstate.SynthesizeTerraformData(30, 2, "3d2bc6d8-6c1e-4f0a-9b5e-2f4a1c7d9e01", 5)
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	w.putState(b)
	w.init()
	if out, code := w.run([]int{0, 2}, "plan", "-detailed-exitcode", "-input=false", "-no-color", "-lock=false"); code != 0 {
		t.Errorf("terraform plan of the synthetic config against the synthetic state: exit %d, want 0\n%s", code, out)
	}
}
