package engine_test

// A hand-written fake engine.Terraform and a fault-injecting store wrapper
// (docs/style.md 15: plain fields, no mock generator), for fast engine tests of
// the paths the real binary cannot easily reach: a state returned with an
// error, a saved plan that does not match its envelope, a failing artifact
// write or read. The store underneath is the real SQLite store on a temp
// file; only the faults are fake. The real-binary tests
// (*_integration_test.go) stay the reference for what Terraform does.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store/sqlite"
	"github.com/kilolock/kilolock/internal/tfstate"
)

var (
	_ engine.Terraform = (*fakeTerraform)(nil)
	_ engine.Store     = (*faultStore)(nil)
)

// fakeTerraform is an engine.Terraform that returns what its fields say and
// records every call. Set the fields before the engine calls it; read Calls
// after the engine returned.
type fakeTerraform struct {
	// PlanResult and PlanErr are what Plan returns.
	PlanResult *engine.PlanResult
	PlanErr    error
	// CancelOnPlan, if set, is called inside Plan before it returns: the
	// user pressing Ctrl-C while terraform plan runs.
	CancelOnPlan context.CancelFunc

	// ApplyResult and ApplyErr are what Apply returns (both may be set: a
	// failed or interrupted apply that wrote state).
	ApplyResult *engine.ApplyResult
	ApplyErr    error
	// Checkpoints are handed, in order, to ApplyRequest.Checkpoint (when
	// set) before Apply returns, as the runner does while Terraform writes.
	Checkpoints [][]byte
	// CancelOnApply, if set, is called inside Apply before it returns:
	// Ctrl-C while terraform apply runs.
	CancelOnApply context.CancelFunc
	// OnApply, if set, is called inside Apply before it returns (a test
	// holds an apply in the middle of its Terraform with it).
	OnApply func()

	// Info and InspectErr are what InspectPlanFile returns.
	Info       engine.PlanFileInfo
	InspectErr error

	mu    sync.Mutex
	Calls []fakeCall
}

// fakeCall is one recorded call: Op is "plan", "apply" or "inspect".
type fakeCall struct {
	Op       string
	Run      string
	PlanFile []byte
	Config   []byte
	Snapshot []byte
	// CtxErr is the context's error when the call was made.
	CtxErr error
}

func (f *fakeTerraform) record(c fakeCall) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Calls = append(f.Calls, c)
}

// ops returns the Op of every recorded call, in order.
func (f *fakeTerraform) ops() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.Calls))
	for i, c := range f.Calls {
		out[i] = c.Op
	}
	return out
}

// called reports how many calls of op were recorded.
func (f *fakeTerraform) called(op string) int {
	n := 0
	for _, o := range f.ops() {
		if o == op {
			n++
		}
	}
	return n
}

func (f *fakeTerraform) Plan(ctx context.Context, req engine.PlanRequest) (*engine.PlanResult, error) {
	f.record(fakeCall{Op: "plan", Run: req.Run, Config: req.Config, Snapshot: req.Snapshot, CtxErr: ctx.Err()})
	if f.CancelOnPlan != nil {
		f.CancelOnPlan()
	}
	return f.PlanResult, f.PlanErr
}

func (f *fakeTerraform) Apply(ctx context.Context, req engine.ApplyRequest) (*engine.ApplyResult, error) {
	f.record(fakeCall{Op: "apply", Run: req.Run, PlanFile: req.PlanFile, Config: req.Config, Snapshot: req.Snapshot, CtxErr: ctx.Err()})
	if req.Checkpoint != nil {
		for _, c := range f.Checkpoints {
			req.Checkpoint(c)
		}
	}
	if f.CancelOnApply != nil {
		f.CancelOnApply()
	}
	if f.OnApply != nil {
		f.OnApply()
	}
	return f.ApplyResult, f.ApplyErr
}

func (f *fakeTerraform) InspectPlanFile(planFile []byte) (engine.PlanFileInfo, error) {
	f.record(fakeCall{Op: "inspect", PlanFile: planFile})
	return f.Info, f.InspectErr
}

// faultStore is the real store with injected failures: an artifact write
// or read of a named artifact, or a commit, fails with the error given
// (before the real store is called: nothing is written). Everything else
// goes through. Set the fields while no engine call is running.
type faultStore struct {
	engine.Store
	PutArtifactErr map[string]error // by artifact name
	GetArtifactErr map[string]error // by artifact name
	CommitErr      error
}

func (s *faultStore) PutArtifact(ctx context.Context, run, name string, data []byte) error {
	if err := s.PutArtifactErr[name]; err != nil {
		return err
	}
	return s.Store.PutArtifact(ctx, run, name, data)
}

func (s *faultStore) GetArtifact(ctx context.Context, run, name string) ([]byte, error) {
	if err := s.GetArtifactErr[name]; err != nil {
		return nil, err
	}
	return s.Store.GetArtifact(ctx, run, name)
}

func (s *faultStore) Commit(ctx context.Context, req engine.CommitRequest) (engine.Version, error) {
	if s.CommitErr != nil {
		return engine.Version{}, s.CommitErr
	}
	return s.Store.Commit(ctx, req)
}

// fakeLineage is the lineage of the state every fake test starts with.
const fakeLineage = "6a1f0b7e-fake-4e2b-9c1d-000000000001"

// fakeHarness is one engine over a fakeTerraform and a faultStore on its
// own SQLite file, with testState adopted at serial 1 holding
// terraform_data.a = "a0" and terraform_data.b = "b0".
type fakeHarness struct {
	t     *testing.T
	ctx   context.Context
	eng   *engine.Engine
	tf    *fakeTerraform
	store *faultStore
	db    *sqlite.Store
	state engine.State
}

// fakeSetup builds a fakeHarness. No Terraform binary is needed.
func fakeSetup(t *testing.T) *fakeHarness {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "kl.db"))
	if err != nil {
		t.Fatalf("opening store: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	fs := &faultStore{Store: db}
	tf := &fakeTerraform{}
	log := slog.New(slog.NewTextHandler(newTestLogWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	eng := engine.New(fs, tf, log)
	st, err := eng.InitState(ctx, testState, tfDoc(t, fakeLineage, 1, map[string]string{"a": "a0", "b": "b0"}), "tester")
	if err != nil {
		t.Fatalf("InitState: %v", err)
	}
	return &fakeHarness{t: t, ctx: ctx, eng: eng, tf: tf, store: fs, db: db, state: st}
}

// tfDoc is a Terraform state v4 document of root terraform_data resources
// (name → input value, also the output), as Terraform writes it; a name
// whose value starts with "tainted:" is a tainted instance.
func tfDoc(t *testing.T, lineage string, serial int64, inputs map[string]string) []byte {
	t.Helper()
	names := make([]string, 0, len(inputs))
	for n := range inputs {
		names = append(names, n)
	}
	sort.Strings(names)
	var rs []string
	for _, n := range names {
		v, status := inputs[n], ""
		if s, ok := strings.CutPrefix(v, "tainted:"); ok {
			v, status = s, `"status":"tainted",`
		}
		rs = append(rs, fmt.Sprintf(`{"mode":"managed","type":"terraform_data","name":%q,"provider":%q,"instances":[{%s"schema_version":0,`+
			`"attributes":{"id":"id-%s","input":{"value":%q,"type":"string"},"output":{"value":%q,"type":"string"},"triggers_replace":null},"sensitive_attributes":[]}]}`,
			n, tfstate.TerraformDataProvider, status, n+"-"+v, v, v))
	}
	doc := fmt.Sprintf(`{"version":4,"terraform_version":"1.11.4","serial":%d,"lineage":%q,"outputs":{},"resources":[%s]}`,
		serial, lineage, strings.Join(rs, ","))
	st, err := tfstate.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("test state document does not parse: %v", err)
	}
	b, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// planResult is what a terraform plan updating the named resources of
// testState at its head would return.
func (h *fakeHarness) planResult(write ...string) *engine.PlanResult {
	h.t.Helper()
	head := h.headSerial()
	planFile := []byte(fmt.Sprintf("fake saved plan of %v against serial %d of %s", write, head, fakeLineage))
	sum := sha256.Sum256(planFile)
	in := engine.Intent{Changes: map[string]engine.IntentChange{}}
	for _, w := range write {
		in.Changes["terraform_data."+w] = engine.IntentChange{Actions: []string{"update"}, AfterDigest: "sha256:" + w}
	}
	return &engine.PlanResult{
		PlanFile: planFile, Digest: "sha256:" + hex.EncodeToString(sum[:]), Config: []byte("fake config archive"),
		Footprint: engine.Footprint{Write: addrs(write...)}, Intent: in, Summary: engine.PlanSummary{Change: len(write)},
		Lineage: fakeLineage, Serial: head, TerraformVersion: "1.11.4",
	}
}

// plan stores a plan run updating the named resources and sets the fake's
// InspectPlanFile answer to what its saved plan says (lineage, serial).
func (h *fakeHarness) plan(write ...string) engine.Run {
	h.t.Helper()
	return h.planWith(h.planResult(write...))
}

// planWith stores the plan run Terraform's plan res gives, as plan does.
func (h *fakeHarness) planWith(res *engine.PlanResult) engine.Run {
	h.t.Helper()
	h.tf.PlanResult, h.tf.PlanErr = res, nil
	out, err := h.eng.Plan(h.ctx, engine.PlanInput{State: testState, Dir: h.t.TempDir(), Actor: "alice"})
	if err != nil {
		h.t.Fatalf("Plan: %v", err)
	}
	h.tf.Info = engine.PlanFileInfo{Lineage: res.Lineage, Serial: res.Serial, TerraformVersion: res.TerraformVersion}
	return out.Run
}

func (h *fakeHarness) run(id string) engine.Run {
	h.t.Helper()
	r, err := h.db.GetRun(h.ctx, id)
	if err != nil {
		h.t.Fatalf("GetRun %s: %v", id, err)
	}
	return r
}

func (h *fakeHarness) markers(id string) []engine.Marker {
	h.t.Helper()
	ms, err := h.db.Markers(h.ctx, id)
	if err != nil {
		h.t.Fatalf("Markers %s: %v", id, err)
	}
	return ms
}

// marker returns the only marker of kind k on run id, or fails.
func (h *fakeHarness) marker(id string, k engine.MarkerKind) engine.Marker {
	h.t.Helper()
	ms := kindsOf(h.markers(id), k)
	if len(ms) != 1 {
		h.t.Fatalf("run %s has %d %s markers, want 1; it has %v", id, len(ms), k, kinds(h.markers(id)))
	}
	return ms[0]
}

// runs returns the runs of testState of kind k, newest first.
func (h *fakeHarness) runs(k engine.RunKind) []engine.Run {
	h.t.Helper()
	rs, err := h.db.ListRuns(h.ctx, engine.RunQuery{State: testState, Kind: k, Limit: 1000})
	if err != nil {
		h.t.Fatalf("ListRuns: %v", err)
	}
	return rs
}

// openPlans returns the plan runs that may still be applied or are being.
func (h *fakeHarness) openPlans() []engine.Run {
	h.t.Helper()
	rs, err := h.db.ListRuns(h.ctx, engine.RunQuery{State: testState, Kind: engine.KindPlan,
		Statuses: []engine.RunStatus{engine.StatusPlanning, engine.StatusPlanned, engine.StatusApplying}, Limit: 1000})
	if err != nil {
		h.t.Fatalf("ListRuns: %v", err)
	}
	return rs
}

func (h *fakeHarness) headSerial() int64 {
	h.t.Helper()
	st, err := h.db.GetState(h.ctx, testState)
	if err != nil {
		h.t.Fatalf("GetState: %v", err)
	}
	return st.HeadSerial
}

// head returns the head's terraform_data inputs by name.
func (h *fakeHarness) head() map[string]string {
	h.t.Helper()
	doc, err := h.db.Snapshot(h.ctx, testState, h.headSerial())
	if err != nil {
		h.t.Fatalf("Snapshot: %v", err)
	}
	return parseHead(h.t, doc).inputs()
}

func (h *fakeHarness) reservations() []engine.Reservation {
	h.t.Helper()
	rs, err := h.db.Reservations(h.ctx, testState)
	if err != nil {
		h.t.Fatalf("Reservations: %v", err)
	}
	return rs
}

// artifact returns the named artifact of run, or nil when it has none.
func (h *fakeHarness) artifact(run, name string) []byte {
	h.t.Helper()
	b, err := h.db.GetArtifact(h.ctx, run, name)
	if errors.Is(err, engine.ErrNotFound) {
		return nil
	}
	if err != nil {
		h.t.Fatalf("GetArtifact %s %s: %v", run, name, err)
	}
	return b
}
