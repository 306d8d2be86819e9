package engine_test

// The engine's integration tests: the real SQLite store on a temp file and
// the real Terraform runner on a temp work root, with terraform_data
// resources only (no provider download; docs/terraform.md). Assertions read
// stored facts — runs, markers, allowed-because facts, versions,
// provenance — never logs (ADR D2).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store/sqlite"
	"github.com/kilolock/kilolock/internal/terraform"
)

// testState is the state every integration test works on (each test has its
// own store).
const testState = "acme/infra/prod"

// harness is one engine on its own SQLite file and Terraform work root.
type harness struct {
	t     *testing.T
	ctx   context.Context
	eng   *engine.Engine
	store *sqlite.Store
	bin   string
	dir   string
	state engine.State
	n     atomic.Int64 // configuration directories written
}

// setup builds an engine on a temp SQLite store (opened with opts) and the
// real Terraform runner, with a short lease (3s) and poll (50ms), and
// creates testState empty. It skips the test when no Terraform binary is
// found.
func setup(t *testing.T, opts ...sqlite.Option) *harness {
	t.Helper()
	bin, err := terraform.FindBinary(os.Getenv)
	if err != nil {
		t.Skipf("skipping: the engine's integration tests run the real Terraform: %v", err)
	}
	ctx := t.Context()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "kl.db"), opts...)
	if err != nil {
		t.Fatalf("opening store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	log := slog.New(slog.NewTextHandler(newTestLogWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	runner, err := terraform.NewRunner(terraform.RunnerOptions{
		WorkRoot: filepath.Join(dir, "runs"), Binary: bin, Logger: log,
		Env: append(os.Environ(), "TF_CLI_CONFIG_FILE=/dev/null"),
	})
	if err != nil {
		t.Fatalf("creating runner: %v", err)
	}
	eng := engine.New(st, runner, log)
	eng.Lease = 3 * time.Second
	eng.Poll = 50 * time.Millisecond
	state, err := eng.InitState(ctx, testState, nil, "tester")
	if err != nil {
		t.Fatalf("InitState: %v", err)
	}
	return &harness{t: t, ctx: ctx, eng: eng, store: st, bin: bin, dir: dir, state: state}
}

// testLogWriter sends the engine's warnings to t.Log until the test's
// cleanup starts; later writes (a goroutine outliving a failed test) are
// dropped rather than panicking.
type testLogWriter struct {
	t    *testing.T
	mu   *sync.Mutex
	done *bool
}

func newTestLogWriter(t *testing.T) testLogWriter {
	w := testLogWriter{t: t, mu: &sync.Mutex{}, done: new(bool)}
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		*w.done = true
	})
	return w
}

func (w testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !*w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// res is one terraform_data resource of a test configuration.
type res struct {
	// Value is the input ("VALUE", or "VALUE:<ref>" with Ref).
	Value string
	// Ref makes the input read another resource: "other.id" (stable across
	// in-place updates, new on replacement), "other.input" (known at plan
	// time, stable across replacement) or "other.output".
	Ref string
	// Sleep makes the resource slow: triggers_replace = Value (a new value
	// replaces it) and a local-exec sleep of Sleep seconds on create.
	Sleep int
	// Gate makes the resource wait on create until the file Gate exists
	// (harness.gate; 60s at most, then it fails), with triggers_replace =
	// Value: the test decides how long an apply holds its reservations.
	Gate string
	// Fail: triggers_replace = Value and a local-exec "exit 1" on create.
	Fail      bool
	DependsOn []string
}

// config is a root module: resource name → resource. Every "PR" is the same
// config with other values.
type config map[string]res

// with returns a copy of c with the values of the named resources replaced.
func (c config) with(values map[string]string) config {
	out := make(config, len(c))
	for k, v := range c {
		if nv, ok := values[k]; ok {
			v.Value = nv
		}
		out[k] = v
	}
	return out
}

// hcl renders c as main.tf.
func (c config) hcl() string {
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		r := c[n]
		fmt.Fprintf(&b, "resource \"terraform_data\" %q {\n", n)
		if r.Ref != "" {
			fmt.Fprintf(&b, "  input = \"%s:${terraform_data.%s}\"\n", r.Value, r.Ref)
		} else {
			fmt.Fprintf(&b, "  input = %q\n", r.Value)
		}
		if r.Sleep > 0 || r.Fail || r.Gate != "" {
			fmt.Fprintf(&b, "  triggers_replace = %q\n", r.Value)
		}
		if len(r.DependsOn) > 0 {
			deps := make([]string, len(r.DependsOn))
			for i, d := range r.DependsOn {
				deps[i] = "terraform_data." + d
			}
			fmt.Fprintf(&b, "  depends_on = [%s]\n", strings.Join(deps, ", "))
		}
		switch {
		case r.Fail:
			b.WriteString("  provisioner \"local-exec\" {\n    command = \"exit 1\"\n  }\n")
		case r.Gate != "":
			fmt.Fprintf(&b, "  provisioner \"local-exec\" {\n    command = \"for i in $(seq 600); do [ -e '%s' ] && exit 0; sleep 0.1; done; exit 1\"\n  }\n", r.Gate)
		case r.Sleep > 0:
			// exec: the sleep is the provisioner's own process, so that
			// Terraform's interrupt reaches it.
			fmt.Fprintf(&b, "  provisioner \"local-exec\" {\n    command = \"exec sleep %d\"\n  }\n", r.Sleep)
		}
		b.WriteString("}\n\n")
	}
	return b.String()
}

// gate returns a file path for res.Gate and the func that opens the gate.
func (h *harness) gate() (string, func()) {
	h.t.Helper()
	path := filepath.Join(h.dir, fmt.Sprintf("gate-%02d", h.n.Add(1)))
	return path, func() {
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			h.t.Error(err)
		}
	}
}

// readerAndWriter bootstraps x, r (which reads x's id) and y, then plans
// A, alice's replacement of r — slow: its Terraform holds A's read
// reservation on x until release opens the gate — and B, bob's write of
// x: B's apply conflicts with A's while A applies. slow is A's
// configuration.
func (h *harness) readerAndWriter() (slow config, a, b engine.Run, release func()) {
	h.t.Helper()
	open0, opened := h.gate()
	opened()
	cfg := config{"x": {Value: "x0"}, "r": {Value: "r0", Ref: "x.id", Gate: open0}, "y": {Value: "y0"}}
	h.base(cfg)
	gate, release := h.gate()
	slow = cfg.with(map[string]string{"r": "r1"})
	slow["r"] = res{Value: "r1", Ref: "x.id", Gate: gate}
	a = h.plan(slow)
	b = h.plan(cfg.with(map[string]string{"x": "x1"}), actor("bob"))
	return slow, a, b, release
}

// write writes c into a new directory and returns it.
func (h *harness) write(c config) string {
	h.t.Helper()
	dir := filepath.Join(h.dir, fmt.Sprintf("config-%02d", h.n.Add(1)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(c.hcl()), 0o644); err != nil {
		h.t.Fatal(err)
	}
	return dir
}

// plan plans c on testState (opts adjust the input) and fails the test on error.
func (h *harness) plan(c config, opts ...func(*engine.PlanInput)) engine.Run {
	h.t.Helper()
	in := engine.PlanInput{State: testState, Dir: h.write(c), Actor: "alice"}
	for _, o := range opts {
		o(&in)
	}
	out, err := h.eng.Plan(h.ctx, in)
	if err != nil {
		h.t.Fatalf("Plan: %v", err)
	}
	return out.Run
}

func targets(addrs ...string) func(*engine.PlanInput) {
	return func(in *engine.PlanInput) { in.Targets = addrs }
}

func replace(addrs ...string) func(*engine.PlanInput) {
	return func(in *engine.PlanInput) { in.Replace = addrs }
}

func actor(a string) func(*engine.PlanInput) {
	return func(in *engine.PlanInput) { in.Actor = a }
}

// apply applies plan run id and fails the test on error.
func (h *harness) apply(id string) *engine.ApplyOutcome {
	h.t.Helper()
	out, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: id, State: testState, Actor: "alice"})
	if err != nil {
		h.t.Fatalf("Apply %s: %v", id, err)
	}
	if out.Version == nil {
		h.t.Fatalf("Apply %s committed nothing", id)
	}
	return out
}

// base plans and applies c: the starting point of most tests.
func (h *harness) base(c config) *engine.ApplyOutcome {
	h.t.Helper()
	return h.apply(h.plan(c).ID)
}

func (h *harness) run(id string) engine.Run {
	h.t.Helper()
	r, err := h.store.GetRun(h.ctx, id)
	if err != nil {
		h.t.Fatalf("GetRun %s: %v", id, err)
	}
	return r
}

func (h *harness) markers(id string) []engine.Marker {
	h.t.Helper()
	ms, err := h.store.Markers(h.ctx, id)
	if err != nil {
		h.t.Fatalf("Markers %s: %v", id, err)
	}
	return ms
}

func kinds(ms []engine.Marker) []engine.MarkerKind {
	out := make([]engine.MarkerKind, len(ms))
	for i, m := range ms {
		out[i] = m.Kind
	}
	return out
}

// marker returns the first marker of kind k, or fails.
func (h *harness) marker(id string, k engine.MarkerKind) engine.Marker {
	h.t.Helper()
	for _, m := range h.markers(id) {
		if m.Kind == k {
			return m
		}
	}
	h.t.Fatalf("run %s has no %s marker; it has %v", id, k, kinds(h.markers(id)))
	return engine.Marker{}
}

func fact(fs []engine.Fact, k engine.FactKind) (engine.Fact, bool) {
	for _, f := range fs {
		if f.Kind == k {
			return f, true
		}
	}
	return engine.Fact{}, false
}

// versions returns every version of testState, oldest first.
func (h *harness) versions() []engine.Version {
	h.t.Helper()
	vs, err := h.store.VersionsAfter(h.ctx, testState, -1)
	if err != nil {
		h.t.Fatalf("VersionsAfter: %v", err)
	}
	return vs
}

func (h *harness) headSerial() int64 {
	h.t.Helper()
	st, err := h.store.GetState(h.ctx, testState)
	if err != nil {
		h.t.Fatalf("GetState: %v", err)
	}
	return st.HeadSerial
}

// head pulls the head and parses its terraform_data instances.
func (h *harness) head() (headState, []byte) {
	h.t.Helper()
	doc, v, err := h.eng.Pull(h.ctx, testState, -1)
	if err != nil {
		h.t.Fatalf("Pull: %v", err)
	}
	hs := parseHead(h.t, doc)
	if hs.Serial != v.Serial {
		h.t.Fatalf("head document has serial %d, version %d", hs.Serial, v.Serial)
	}
	return hs, doc
}

func (h *harness) reservations() []engine.Reservation {
	h.t.Helper()
	rs, err := h.store.Reservations(h.ctx, testState)
	if err != nil {
		h.t.Fatalf("Reservations: %v", err)
	}
	return rs
}

// applyRuns returns the apply runs of plan id, newest first.
func (h *harness) applyRuns(planID string) []engine.Run {
	h.t.Helper()
	rs, err := h.store.ListRuns(h.ctx, engine.RunQuery{State: testState, Kind: engine.KindApply, Limit: 1000})
	if err != nil {
		h.t.Fatalf("ListRuns: %v", err)
	}
	var out []engine.Run
	for _, r := range rs {
		if r.PlanRun == planID {
			out = append(out, r)
		}
	}
	return out
}

// instance is one terraform_data instance of a state.
type instance struct {
	ID      string
	Input   string
	Tainted bool
}

type headState struct {
	Serial    int64
	Lineage   string
	Resources map[string]instance // by resource name (root module, one instance)
	Outputs   map[string]string   // root outputs' values, printed
}

func parseHead(t *testing.T, doc []byte) headState {
	t.Helper()
	var raw struct {
		Serial  int64  `json:"serial"`
		Lineage string `json:"lineage"`
		Outputs map[string]struct {
			Value any `json:"value"`
		} `json:"outputs"`
		Resources []struct {
			Module    string `json:"module"`
			Type      string `json:"type"`
			Name      string `json:"name"`
			Instances []struct {
				Status     string `json:"status"`
				Attributes struct {
					ID    string `json:"id"`
					Input *struct {
						Value any `json:"value"`
					} `json:"input"`
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(doc, &raw); err != nil {
		t.Fatalf("parsing state: %v", err)
	}
	hs := headState{Serial: raw.Serial, Lineage: raw.Lineage, Resources: map[string]instance{}, Outputs: map[string]string{}}
	for name, o := range raw.Outputs {
		hs.Outputs[name] = fmt.Sprint(o.Value)
	}
	for _, r := range raw.Resources {
		if len(r.Instances) == 0 {
			continue // Terraform 1.5 keeps an empty entry for a resource a failed apply never created
		}
		if r.Module != "" || r.Type != "terraform_data" || len(r.Instances) != 1 {
			t.Fatalf("unexpected resource %s %s.%s with %d instances", r.Module, r.Type, r.Name, len(r.Instances))
		}
		in := r.Instances[0]
		i := instance{ID: in.Attributes.ID, Tainted: in.Status == "tainted"}
		if in.Attributes.Input != nil && in.Attributes.Input.Value != nil {
			i.Input = fmt.Sprint(in.Attributes.Input.Value)
		}
		hs.Resources[r.Name] = i
	}
	return hs
}

// inputs returns name → input value.
func (hs headState) inputs() map[string]string {
	out := map[string]string{}
	for n, i := range hs.Resources {
		out[n] = i.Input
	}
	return out
}

// addrs builds an AddressSet of root terraform_data resources.
func addrs(names ...string) engine.AddressSet {
	as := make([]engine.Address, len(names))
	for i, n := range names {
		as[i] = engine.Address("terraform_data." + n)
	}
	return engine.NewAddressSet(as...)
}

func sameSet(a, b engine.AddressSet) bool {
	return slices.Equal(a.Strings(), b.Strings())
}

// terraformPlanNoChanges runs `terraform plan -detailed-exitcode` of c
// against doc in a scratch directory and fails unless Terraform reports no
// changes (exit 0).
func (h *harness) terraformPlanNoChanges(c config, doc []byte) {
	h.t.Helper()
	dir := h.write(c)
	if err := os.WriteFile(filepath.Join(dir, "terraform.tfstate"), doc, 0o600); err != nil {
		h.t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(h.ctx, h.bin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE=/dev/null", "TF_IN_AUTOMATION=1",
			"TF_DATA_DIR="+filepath.Join(dir, ".tfdata"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("init", "-input=false", "-no-color"); err != nil {
		h.t.Fatalf("terraform init: %v\n%s", err, out)
	}
	out, err := run("plan", "-detailed-exitcode", "-input=false", "-no-color", "-lock=false")
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 2 {
		h.t.Fatalf("terraform plan of the union configuration against the head reports changes:\n%s", out)
	}
	if err != nil {
		h.t.Fatalf("terraform plan: %v\n%s", err, out)
	}
}

// waitFor polls cond every 20ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runErrorID returns the run id a *engine.RunError names, or "".
func runErrorID(err error) string {
	var re *engine.RunError
	if errors.As(err, &re) {
		return re.Run
	}
	return ""
}
