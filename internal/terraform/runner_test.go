package terraform

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// setupRunner returns a Runner on the real binary (skipping the test when
// there is none) and its work root.
func setupRunner(t *testing.T) (*Runner, string) {
	t.Helper()
	return setupRunnerEnv(t, "TF_CLI_CONFIG_FILE=/dev/null")
}

// setupRunnerEnv is setupRunner with extra environment entries.
func setupRunnerEnv(t *testing.T, env ...string) (*Runner, string) {
	t.Helper()
	bin := testBinary(t)
	root := filepath.Join(t.TempDir(), "runs")
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r, err := NewRunner(RunnerOptions{WorkRoot: root, Binary: bin, Env: append(os.Environ(), env...), Logger: log})
	if err != nil {
		t.Fatalf("NewRunner: %v", err)
	}
	return r, root
}

// testBinary returns the Terraform the tests run (KL_TERRAFORM, else PATH),
// skipping the test when there is none.
func testBinary(t testing.TB) string {
	t.Helper()
	bin, err := FindBinary(os.Getenv)
	if err != nil {
		t.Skipf("skipping: tests that run Terraform need a binary: %v", err)
	}
	return bin
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// snapshot returns a state v4 document with no resources (docs/terraform.md: a
// serial-0 empty state is accepted).
func snapshot(lineage string, serial int64) []byte {
	return fmt.Appendf(nil, `{"version":4,"terraform_version":"1.5.7","serial":%d,"lineage":%q,"outputs":{},"resources":[]}`, serial, lineage)
}

type stateDoc struct {
	Serial    int64  `json:"serial"`
	Lineage   string `json:"lineage"`
	Resources []struct {
		Module    string `json:"module"`
		Type      string `json:"type"`
		Name      string `json:"name"`
		Instances []struct {
			Status string `json:"status"`
		} `json:"instances"`
	} `json:"resources"`
}

func parseState(t *testing.T, b []byte) stateDoc {
	t.Helper()
	var s stateDoc
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("parsing state: %v\n%s", err, b)
	}
	return s
}

// addresses lists "module.x.type.name" (with " (tainted)" when so).
func (s stateDoc) addresses() []string {
	var out []string
	for _, r := range s.Resources {
		a := r.Type + "." + r.Name
		if r.Module != "" {
			a = r.Module + "." + a
		}
		for _, in := range r.Instances {
			if in.Status == "tainted" {
				a += " (tainted)"
			}
		}
		out = append(out, a)
	}
	return out
}

// appConfig is a root module with an S3 backend (replaced by Kilolock's
// override) calling a local module outside its directory.
var appConfig = map[string]string{
	"app/main.tf": `terraform {
  backend "s3" {
    bucket = "kilolock-never-used"
    key    = "prod.tfstate"
    region = "us-east-1"
  }
}

variable "env" {
  type    = string
  default = "dev"
}

module "vpc" {
  source = "../modules/vpc"
  name   = var.env
}

resource "terraform_data" "app" {
  input = module.vpc.id
}

output "app" {
  value = terraform_data.app.output
}
`,
	"modules/vpc/main.tf": `variable "name" {
  type = string
}

resource "terraform_data" "net" {
  input = var.name
}

output "id" {
  value = terraform_data.net.id
}
`,
	"app/prod.tfvars":       "env = \"prod\"\n",
	"app/terraform.tfstate": "not json: must not be copied",
	"app/.terraform/junk":   "must not be copied",
}

func setupConfig(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	writeTree(t, dir, files)
	return dir
}

func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 0 {
		t.Errorf("work root %s not empty: %v", dir, ents)
	}
}

type progressLog struct {
	mu  sync.Mutex
	all []engine.Progress
}

func (l *progressLog) add(p engine.Progress) { l.mu.Lock(); l.all = append(l.all, p); l.mu.Unlock() }

func (l *progressLog) phases() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, p := range l.all {
		if len(out) == 0 || out[len(out)-1] != p.Phase {
			out = append(out, p.Phase)
		}
	}
	return out
}

func (l *progressLog) last() engine.Progress {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all[len(l.all)-1]
}

func TestPlanApply(t *testing.T) {
	t.Parallel()
	r, workRoot := setupRunner(t)
	dir := setupConfig(t, appConfig)
	ctx := context.Background()
	const lineage = "4aa507be-6a16-e4b4-7ed6-770b2fd0f106"

	var planProgress progressLog
	start := time.Now()
	plan, err := r.Plan(ctx, engine.PlanRequest{
		Run: "01PLAN", Dir: filepath.Join(dir, "app"), Snapshot: snapshot(lineage, 3), Progress: planProgress.add,
	})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	planTime := time.Since(start)
	assertEmptyDir(t, workRoot)

	sum := sha256.Sum256(plan.PlanFile)
	if plan.Digest != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Errorf("Digest = %s, not the sha256 of the plan file", plan.Digest)
	}
	if plan.Lineage != lineage || plan.Serial != 3 {
		t.Errorf("Lineage, Serial = %s, %d; want %s, 3", plan.Lineage, plan.Serial, lineage)
	}
	if plan.TerraformVersion == "" {
		t.Error("no TerraformVersion")
	}
	if plan.Summary.Add != 2 {
		t.Errorf("Summary = %+v, want 2 to add", plan.Summary)
	}
	for _, a := range []engine.Address{"terraform_data.app", "module.vpc.terraform_data.net"} {
		if !plan.Footprint.Write.Contains(a) {
			t.Errorf("write set %v lacks %s", plan.Footprint.Write, a)
		}
	}
	if len(plan.Intent.Changes) == 0 {
		t.Error("empty intent")
	}
	// The diff (ADR 0044) is made from the same plan JSON.
	if plan.Diff == nil || plan.Diff.Counts().Add != 2 || len(plan.Diff.Resources) != 2 {
		t.Errorf("Diff = %+v; want the 2 creates", plan.Diff)
	}
	if got := strings.Join(planProgress.phases(), ","); got != "init,plan,show" {
		t.Errorf("plan progress phases = %s, want init,plan,show", got)
	}
	// `kl footprint` given the saved plan rather than its JSON says so.
	if _, err := ParsePlanJSON(plan.PlanFile); !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "this is a saved plan file, not its JSON") {
		t.Errorf("ParsePlanJSON(saved plan file) error = %v", err)
	}
	info, err := r.InspectPlanFile(plan.PlanFile)
	if err != nil || info.Lineage != lineage || info.Serial != 3 || info.TerraformVersion == "" {
		t.Errorf("InspectPlanFile = %+v, %v", info, err)
	}
	// The saved plan keeps the snapshot as Terraform upgraded it
	// (tfstate-prev): a state document with no lineage.
	if prev, err := r.UpgradedSnapshot(plan.PlanFile); err != nil || !bytes.Contains(prev, []byte(`"version": 4`)) ||
		!bytes.Contains(prev, []byte(`"lineage": ""`)) {
		t.Errorf("UpgradedSnapshot = %s, %v; want the plan's tfstate-prev", prev, err)
	}
	// The archive holds the module next to the root, not the excluded files.
	dst := t.TempDir()
	rc, err := restoreConfigArchive(plan.Config, dst)
	if err != nil {
		t.Fatal(err)
	}
	tree := readTree(t, dst)
	if rc.RootSub != "app" || tree["modules/vpc/main.tf"] == "" || tree["app/terraform.tfstate"] != "" || tree["app/.terraform"] != "" {
		t.Errorf("archive: root %q, tree %v", rc.RootSub, keys(tree))
	}

	var applyProgress progressLog
	start = time.Now()
	res, err := r.Apply(ctx, engine.ApplyRequest{
		Run: "01APPLY", PlanFile: plan.PlanFile, Config: plan.Config, Snapshot: snapshot(lineage, 3), Progress: applyProgress.add,
	})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	applyTime := time.Since(start)
	assertEmptyDir(t, workRoot)
	st := parseState(t, res.State)
	if st.Lineage != lineage || st.Serial <= 3 {
		t.Errorf("state lineage, serial = %s, %d; want %s, > 3", st.Lineage, st.Serial, lineage)
	}
	if got := strings.Join(st.addresses(), ","); got != "terraform_data.app,module.vpc.terraform_data.net" {
		t.Errorf("state resources = %s", got)
	}
	if res.Changed != 2 {
		t.Errorf("Changed = %d, want 2", res.Changed)
	}
	if got := strings.Join(applyProgress.phases(), ","); got != "init,apply" {
		t.Errorf("apply progress phases = %s, want init,apply", got)
	}
	if last := applyProgress.last(); last.Done != 2 || last.Total != 2 {
		t.Errorf("last apply progress = %+v, want 2 of 2", last)
	}
	t.Logf("timing: plan %v, apply %v (root + local module, 2 terraform_data)", planTime.Round(time.Millisecond), applyTime.Round(time.Millisecond))
}

func TestPlansConcurrent(t *testing.T) {
	t.Parallel()
	r, workRoot := setupRunner(t)
	dir := filepath.Join(setupConfig(t, appConfig), "app")
	ctx := context.Background()

	// A state with the resources applied, and an empty one of another lineage.
	first, err := r.Plan(ctx, engine.PlanRequest{Run: "base-plan", Dir: dir, Snapshot: snapshot("lineage-applied", 1)})
	if err != nil {
		t.Fatal(err)
	}
	applied, err := r.Apply(ctx, engine.ApplyRequest{Run: "base-apply", PlanFile: first.PlanFile, Config: first.Config, Snapshot: snapshot("lineage-applied", 1)})
	if err != nil {
		t.Fatal(err)
	}
	appliedSerial := parseState(t, applied.State).Serial

	type outcome struct {
		name string
		res  *engine.PlanResult
		err  error
	}
	const perKind = 3
	out := make(chan outcome, 2*perKind)
	var wg sync.WaitGroup
	for i := range perKind {
		for _, kind := range []string{"empty", "applied"} {
			wg.Go(func() {
				snap := snapshot("lineage-empty", 0)
				if kind == "applied" {
					snap = applied.State
				}
				name := fmt.Sprintf("%s-%d", kind, i)
				res, err := r.Plan(ctx, engine.PlanRequest{Run: name, Dir: dir, Snapshot: snap})
				out <- outcome{kind, res, err}
			})
		}
	}
	wg.Wait()
	close(out)
	for o := range out {
		if o.err != nil {
			t.Errorf("%s plan: %v", o.name, o.err)
			continue
		}
		switch o.name {
		case "empty":
			if o.res.Lineage != "lineage-empty" || o.res.Serial != 0 || o.res.Summary.Add != 2 {
				t.Errorf("plan on the empty state: lineage %s serial %d summary %+v", o.res.Lineage, o.res.Serial, o.res.Summary)
			}
		case "applied":
			if o.res.Lineage != "lineage-applied" || o.res.Serial != appliedSerial || !o.res.Summary.Empty() {
				t.Errorf("plan on the applied state: lineage %s serial %d (want %d) summary %+v", o.res.Lineage, o.res.Serial, appliedSerial, o.res.Summary)
			}
		}
	}
	assertEmptyDir(t, workRoot)
}

func TestReplanFromConfig(t *testing.T) {
	t.Parallel()
	r, _ := setupRunner(t)
	dir := filepath.Join(setupConfig(t, appConfig), "app")
	ctx := context.Background()
	snap := snapshot("lineage-replan", 5)

	prod, err := r.Plan(ctx, engine.PlanRequest{Run: "prod", Dir: dir, VarFiles: []string{"prod.tfvars"}, Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.Plan(ctx, engine.PlanRequest{Run: "prod-again", Config: prod.Config, Snapshot: snap})
	if err != nil {
		t.Fatalf("re-plan from Config: %v", err)
	}
	if d := prod.Intent.Diff(again.Intent); len(d) != 0 {
		t.Errorf("re-plan from Config changed the intent of %v", d)
	}
	if !bytes.Equal(again.Config, prod.Config) {
		t.Error("re-plan returned another Config")
	}
	named, err := r.Plan(ctx, engine.PlanRequest{Run: "prod-named", Config: prod.Config, VarFiles: []string{"prod.tfvars"}, Snapshot: snap})
	if err != nil {
		t.Fatalf("re-plan from Config naming its var file: %v", err)
	}
	if d := prod.Intent.Diff(named.Intent); len(d) != 0 {
		t.Errorf("re-plan naming its var file changed the intent of %v", d)
	}
	// Without the var file the plan differs: the var file was used.
	dev, err := r.Plan(ctx, engine.PlanRequest{Run: "dev", Dir: dir, Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	if d := prod.Intent.Diff(dev.Intent); len(d) == 0 {
		t.Error("plans with and without prod.tfvars have the same intent")
	}
	_, err = r.Plan(ctx, engine.PlanRequest{Run: "other", Config: prod.Config, VarFiles: []string{"other.tfvars"}, Snapshot: snap})
	if !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("re-plan naming another var file: error = %v, want ErrInvalid", err)
	}
}

func TestApplyFailsMidway(t *testing.T) {
	t.Parallel()
	r, workRoot := setupRunner(t)
	dir := setupConfig(t, map[string]string{"main.tf": `
resource "terraform_data" "ok" {
  input = "fine"
}

resource "terraform_data" "bad" {
  depends_on = [terraform_data.ok]
  provisioner "local-exec" {
    command = "exit 1"
  }
}
`})
	ctx := context.Background()
	snap := snapshot("lineage-fail", 2)
	plan, err := r.Plan(ctx, engine.PlanRequest{Run: "plan", Dir: dir, Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Apply(ctx, engine.ApplyRequest{Run: "apply", PlanFile: plan.PlanFile, Config: plan.Config, Snapshot: snap})
	if err == nil {
		t.Fatal("Apply succeeded, want the local-exec failure")
	}
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Command != "apply" {
		t.Fatalf("error %v is not a *CommandError of apply", err)
	}
	for _, want := range []string{"local-exec provisioner error", "exit 1", "terraform_data.bad"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if res == nil || res.State == nil {
		t.Fatal("no partial state returned with the error")
	}
	st := parseState(t, res.State)
	if got := strings.Join(st.addresses(), ","); got != "terraform_data.bad (tainted),terraform_data.ok" {
		t.Errorf("partial state resources = %s", got)
	}
	if st.Lineage != "lineage-fail" || st.Serial <= 2 {
		t.Errorf("partial state lineage, serial = %s, %d", st.Lineage, st.Serial)
	}
	if res.Changed != 1 {
		t.Errorf("Changed = %d, want 1", res.Changed)
	}
	assertEmptyDir(t, workRoot)
}

func TestApplyCancel(t *testing.T) {
	t.Parallel()
	r, workRoot := setupRunner(t)
	dir := setupConfig(t, map[string]string{"main.tf": `
resource "terraform_data" "fast" {
  input = "x"
}

resource "terraform_data" "slow" {
  depends_on = [terraform_data.fast]
  provisioner "local-exec" {
    command = "sleep 5"
  }
}
`})
	snap := snapshot("lineage-cancel", 0)
	plan, err := r.Plan(context.Background(), engine.PlanRequest{Run: "plan", Dir: dir, Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cancelled time.Time
	var once sync.Once
	// Cancel ~1s after the slow resource started.
	progress := func(p engine.Progress) {
		if p.Phase == phaseApply && p.Current == "terraform_data.slow" {
			once.Do(func() {
				time.AfterFunc(time.Second, func() { cancelled = time.Now(); cancel() })
			})
		}
	}
	start := time.Now()
	res, err := r.Apply(ctx, engine.ApplyRequest{Run: "apply", PlanFile: plan.PlanFile, Config: plan.Config, Snapshot: snap, Progress: progress})
	took := time.Since(start)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply error = %v, want context.Canceled", err)
	}
	if cancelled.IsZero() {
		t.Fatal("the slow resource never started")
	}
	if after := time.Since(cancelled); after > 2*time.Second {
		t.Errorf("Apply returned %v after cancellation (took %v in all), want promptly", after, took)
	}
	st := parseState(t, res.State)
	if got := strings.Join(st.addresses(), ","); !strings.HasPrefix(got, "terraform_data.fast") {
		t.Errorf("state after cancel lacks what finished: %s", got)
	}
	if res.Changed != 1 {
		t.Errorf("Changed = %d, want 1", res.Changed)
	}
	t.Logf("cancelled apply returned %v after cancel; error: %v", time.Since(cancelled).Round(time.Millisecond), err)
	assertEmptyDir(t, workRoot)
}

func TestInspectPlanFileInvalid(t *testing.T) {
	t.Parallel()
	random := make([]byte, 4096)
	_, _ = rand.Read(random)
	zipOf := func(files map[string]string) []byte {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for name, content := range files {
			w, err := zw.Create(name)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = w.Write([]byte(content))
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	tests := map[string]struct {
		plan []byte
		want string
	}{
		"random bytes":      {plan: random, want: "not a zip archive"},
		"empty":             {plan: nil, want: "not a zip archive"},
		"zip without state": {plan: zipOf(map[string]string{"tfplan": "x"}), want: "no tfstate entry"},
		"tfstate not json":  {plan: zipOf(map[string]string{"tfstate": "{nope"}), want: "not a state JSON document"},
		"tfstate not state": {plan: zipOf(map[string]string{"tfstate": `{"hello":"world"}`}), want: "no version or serial"},
	}
	r := &Runner{}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := r.InspectPlanFile(tc.plan)
			if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("InspectPlanFile() error = %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
	info, err := r.InspectPlanFile(zipOf(map[string]string{"tfstate": string(snapshot("l", 7))}))
	if err != nil || info.Lineage != "l" || info.Serial != 7 || info.TerraformVersion != "1.5.7" {
		t.Errorf("InspectPlanFile(minimal plan) = %+v, %v", info, err)
	}
	// UpgradedSnapshot: none in a plan file without tfstate-prev (older
	// Terraform), an error for what is no zip.
	if b, err := r.UpgradedSnapshot(zipOf(map[string]string{"tfstate": "{}"})); b != nil || err != nil {
		t.Errorf("UpgradedSnapshot(no tfstate-prev) = %q, %v; want nil, nil", b, err)
	}
	if _, err := r.UpgradedSnapshot(random); !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "not a zip archive") {
		t.Errorf("UpgradedSnapshot(random bytes) error = %v, want ErrInvalid: not a zip archive", err)
	}
	if b, err := r.UpgradedSnapshot(zipOf(map[string]string{"tfstate": "{}", "tfstate-prev": "prev"})); string(b) != "prev" || err != nil {
		t.Errorf("UpgradedSnapshot = %q, %v; want the entry", b, err)
	}
}

func TestPlanFails(t *testing.T) {
	t.Parallel()
	r, workRoot := setupRunner(t)
	dir := setupConfig(t, map[string]string{"main.tf": "resource \"terraform_data\" \"x\" {\n  input = var.nope\n}\n"})
	for name, progress := range map[string]func(engine.Progress){"plain": nil, "json": func(engine.Progress) {}} {
		t.Run(name, func(t *testing.T) {
			_, err := r.Plan(context.Background(), engine.PlanRequest{Run: "fail-" + name, Dir: dir, Snapshot: snapshot("l", 1), Progress: progress})
			var ce *CommandError
			if !errors.As(err, &ce) || ce.Command != "plan" {
				t.Fatalf("Plan error = %v, want a *CommandError of plan", err)
			}
			for _, want := range []string{"Reference to undeclared input variable", `"nope"`} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
	assertEmptyDir(t, workRoot)
}

// TestKeepWorkDirs: a kept work dir is private — every directory 0700,
// every file 0600 (0700 for an executable of the configuration), whoever
// wrote it: the Runner (snapshot, plan file, config copy, var files,
// override) or Terraform (lock file, TF_DATA_DIR, a state it created, its
// backup).
func TestKeepWorkDirs(t *testing.T) {
	t.Parallel()
	r, workRoot := setupRunner(t)
	r.keep = true
	files := map[string]string{"app/hook.sh": "#!/bin/sh\n"}
	for k, v := range appConfig {
		files[k] = v
	}
	dir := setupConfig(t, files)
	if err := os.Chmod(filepath.Join(dir, "app/hook.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	plan, err := r.Plan(ctx, engine.PlanRequest{Run: "kept", Dir: filepath.Join(dir, "app"), VarFiles: []string{"prod.tfvars"}, Snapshot: snapshot("l", 1)})
	if err != nil {
		t.Fatal(err)
	}
	// An apply on no snapshot: Terraform creates the state file itself.
	fresh, err := r.Plan(ctx, engine.PlanRequest{Run: "kept-fresh", Dir: filepath.Join(dir, "app")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Apply(ctx, engine.ApplyRequest{Run: "kept-apply", PlanFile: fresh.PlanFile, Config: fresh.Config}); err != nil {
		t.Fatal(err)
	}
	exact := map[string]os.FileMode{
		"kept/snapshot.tfstate":                  0o600,
		"kept/plan.tfplan":                       0o600,
		"kept/cfg/app/" + overrideFileName:       0o600,
		"kept/cfg/app/main.tf":                   0o600,
		"kept/cfg/app/hook.sh":                   0o700,
		"kept/cfg/modules/vpc/main.tf":           0o600,
		"kept/cfg/.kl-varfiles/000-prod.tfvars":  0o600,
		"kept/data/modules/modules.json":         0o600,
		"kept-apply/snapshot.tfstate":            0o600,
		"kept-apply/plan.tfplan":                 0o600,
		"kept-apply/cfg/app/.terraform.lock.hcl": 0o600,
	}
	for name, want := range exact {
		fi, err := os.Stat(filepath.Join(workRoot, name))
		if err != nil {
			t.Errorf("kept work dir lacks %s: %v", name, err)
			continue
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", name, fi.Mode().Perm(), want)
		}
	}
	n := 0
	err = filepath.WalkDir(workRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n++
		switch perm := fi.Mode().Perm(); {
		case d.IsDir() && p != workRoot && perm != 0o700:
			t.Errorf("directory %s: mode %v, want 0700", p, perm)
		case !d.IsDir() && perm != 0o600 && perm != 0o700:
			t.Errorf("file %s: mode %v, want 0600 (0700 if executable)", p, perm)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("checked the modes of %d entries", n)
	if len(plan.PlanFile) == 0 {
		t.Error("no plan file")
	}
	// The same run id again while its dir is there: a conflict, not a shared dir.
	_, err = r.Plan(ctx, engine.PlanRequest{Run: "kept", Dir: filepath.Join(dir, "app"), Snapshot: snapshot("l", 1)})
	if !errors.Is(err, engine.ErrConflict) {
		t.Errorf("second plan in a kept work dir: error = %v, want ErrConflict", err)
	}
}

func TestNewRunner(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	script := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	exe := script("terraform", 0o755)
	notExe := script("not-executable", 0o644)
	aFile := script("a-file", 0o644)
	tests := map[string]struct {
		opts    RunnerOptions
		wantErr error
		want    string
	}{
		"no WorkRoot":           {opts: RunnerOptions{Binary: exe}, wantErr: engine.ErrInvalid, want: "WorkRoot is empty"},
		"WorkRoot is a file":    {opts: RunnerOptions{WorkRoot: aFile, Binary: exe}, wantErr: engine.ErrInvalid, want: "work root " + aFile + " is not a directory"},
		"no Binary":             {opts: RunnerOptions{WorkRoot: dir}, wantErr: ErrNoBinary, want: "Binary is empty"},
		"missing Binary":        {opts: RunnerOptions{WorkRoot: dir, Binary: filepath.Join(dir, "nope")}, wantErr: ErrNoBinary, want: filepath.Join(dir, "nope") + ": no such file"},
		"Binary not executable": {opts: RunnerOptions{WorkRoot: dir, Binary: notExe}, wantErr: ErrNoBinary, want: "not executable"},
		"Binary is a directory": {opts: RunnerOptions{WorkRoot: dir, Binary: dir}, wantErr: ErrNoBinary, want: "is a directory"},
		"negative InterruptGrace": {
			opts: RunnerOptions{WorkRoot: dir, Binary: exe, InterruptGrace: -time.Second}, wantErr: engine.ErrInvalid, want: "InterruptGrace is -1s",
		},
		"Binary name not on PATH": {
			opts: RunnerOptions{WorkRoot: dir, Binary: "kilolock-no-such-terraform"}, wantErr: ErrNoBinary, want: "not found on PATH",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := NewRunner(tc.opts)
			if !errors.Is(err, tc.wantErr) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewRunner() error = %v, want %v saying %q", err, tc.wantErr, tc.want)
			}
		})
	}
	// A relative Binary is made absolute: Terraform runs in the work dirs.
	t.Run("relative Binary", func(t *testing.T) {
		wd, err := os.Getwd()
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(wd, exe)
		if err != nil || !strings.Contains(rel, string(filepath.Separator)) {
			t.Skipf("no relative path to %s from %s", exe, wd)
		}
		r, err := NewRunner(RunnerOptions{WorkRoot: filepath.Join(dir, "runs"), Binary: rel})
		if err != nil {
			t.Fatal(err)
		}
		if r.binary != exe {
			t.Errorf("binary = %s, want %s", r.binary, exe)
		}
		fi, err := os.Stat(filepath.Join(dir, "runs"))
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("work root not created 0700: %v, %v", fi, err)
		}
	})
}

// TestApplyPrefersErroredState: Terraform writes errored.tfstate into its
// working directory when it cannot persist the state it applied (disk
// full, a backend that refuses the write); Apply must return that state,
// the only record of what was created. Making a real write fail needs a
// full disk, so a provisioner (which runs in the same directory) writes
// the file here, as Terraform would: before it Apply's work dir value
// lost the root module path and never looked there.
func TestApplyPrefersErroredState(t *testing.T) {
	t.Parallel()
	r, workRoot := setupRunner(t)
	errored := `{"version": 4, "terraform_version": "1.5.7", "serial": 9, "lineage": "lineage-errored", "outputs": {}, "resources": []}`
	dir := setupConfig(t, map[string]string{"main.tf": `
resource "terraform_data" "a" {
  provisioner "local-exec" {
    command = <<-EOT
      printf '%s' '` + errored + `' > errored.tfstate
    EOT
  }
}
`})
	ctx := context.Background()
	snap := snapshot("lineage-errored", 2)
	plan, err := r.Plan(ctx, engine.PlanRequest{Run: "plan", Dir: dir, Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Apply(ctx, engine.ApplyRequest{Run: "apply", PlanFile: plan.PlanFile, Config: plan.Config, Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	if string(res.State) != errored {
		t.Errorf("Apply's state:\n%s\nwant errored.tfstate's:\n%s", res.State, errored)
	}
	assertEmptyDir(t, workRoot)
}
