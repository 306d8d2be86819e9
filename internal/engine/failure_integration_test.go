package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// TestBadInput: refusals of malformed or misdirected requests are typed
// errors that name what was wrong, and leave nothing claimed or half-done.
func TestBadInput(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"a": {Value: "a0"}}
	applied := h.base(cfg)
	open := h.plan(cfg.with(map[string]string{"a": "a1"}))

	noApplyRuns := func(t *testing.T, planID string) {
		t.Helper()
		if pr := h.run(planID); pr.Status != engine.StatusPlanned || pr.ApplyRun != "" {
			t.Errorf("plan = status %s, apply run %q; want planned, unclaimed", pr.Status, pr.ApplyRun)
		}
		if rs := h.applyRuns(planID); len(rs) != 0 {
			t.Errorf("apply runs left for plan %s: %d", planID, len(rs))
		}
	}
	tests := []struct {
		name string
		do   func(t *testing.T) error
		is   error
		says []string
		then func(t *testing.T, err error)
	}{
		{
			name: "unknown run",
			do: func(t *testing.T) error {
				_, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: "01NOSUCHRUN0000000000000000"})
				return err
			},
			is: engine.ErrNotFound, says: []string{"01NOSUCHRUN0000000000000000"},
		},
		{
			name: "apply of an apply run",
			do: func(t *testing.T) error {
				_, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: applied.Run.ID})
				return err
			},
			is: engine.ErrInvalid, says: []string{applied.Run.ID, applied.Run.PlanRun},
		},
		{
			name: "apply of an applied plan",
			do: func(t *testing.T) error {
				_, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: applied.Run.PlanRun})
				return err
			},
			is: engine.ErrConflict, says: []string{"applied"},
			then: func(t *testing.T, err error) {
				var se *engine.StatusError
				if !errors.As(err, &se) || se.Status != engine.StatusApplied || se.By != applied.Run.ID {
					t.Errorf("error = %#v, want a *StatusError: applied by %s", err, applied.Run.ID)
				}
			},
		},
		{
			name: "plan of another state",
			do: func(t *testing.T) error {
				_, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: open.ID, State: "acme/infra/staging"})
				return err
			},
			is: engine.ErrInvalid, says: []string{open.ID, testState, "acme/infra/staging"},
			then: func(t *testing.T, err error) { noApplyRuns(t, open.ID) },
		},
		{
			name: "init from a file that is not state v4",
			do: func(t *testing.T) error {
				_, err := h.eng.InitState(h.ctx, "acme/infra/v3", []byte(`{"version":3,"serial":1,"lineage":"x","modules":[]}`), "tester")
				return err
			},
			is: engine.ErrInvalid,
		},
		{
			name: "init from a file that is not JSON",
			do: func(t *testing.T) error {
				_, err := h.eng.InitState(h.ctx, "acme/infra/junk", []byte("resource \"x\" {}"), "tester")
				return err
			},
			is: engine.ErrInvalid,
		},
		{
			name: "init of an existing state",
			do: func(t *testing.T) error {
				_, err := h.eng.InitState(h.ctx, testState, nil, "tester")
				return err
			},
			is: engine.ErrConflict, says: []string{testState},
		},
		{
			name: "plan on a missing state",
			do: func(t *testing.T) error {
				_, err := h.eng.Plan(h.ctx, engine.PlanInput{State: "acme/infra/nope", Dir: h.write(cfg)})
				return err
			},
			is: engine.ErrNotFound, says: []string{"acme/infra/nope", "kl state init"},
		},
		{
			name: "invalid target",
			do: func(t *testing.T) error {
				_, err := h.eng.Plan(h.ctx, engine.PlanInput{State: testState, Dir: h.write(cfg), Targets: []string{"terraform_data.a", "not an address"}})
				return err
			},
			is: engine.ErrInvalid, says: []string{"not an address"},
		},
		{
			name: "whole-state target",
			do: func(t *testing.T) error {
				_, err := h.eng.Plan(h.ctx, engine.PlanInput{State: testState, Dir: h.write(cfg), Targets: []string{"*"}})
				return err
			},
			is: engine.ErrInvalid,
		},
		{
			// Last: it corrupts the open plan.
			name: "corrupted saved plan",
			do: func(t *testing.T) error {
				if err := h.store.PutArtifact(h.ctx, open.ID, engine.ArtifactPlanFile, []byte("PK\x03\x04 not the reviewed plan")); err != nil {
					t.Fatal(err)
				}
				_, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: open.ID})
				return err
			},
			is: engine.ErrInvalid, says: []string{"corrupted", open.ID},
			then: func(t *testing.T, err error) { noApplyRuns(t, open.ID) },
		},
	}
	runsBefore, err := h.store.ListRuns(h.ctx, engine.RunQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do(t)
			if !errors.Is(err, tc.is) {
				t.Fatalf("error = %v, want %v", err, tc.is)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if tc.then != nil {
				tc.then(t, err)
			}
		})
	}
	// None of them created a run or a version.
	runsAfter, err := h.store.ListRuns(h.ctx, engine.RunQuery{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(runsAfter) != len(runsBefore) {
		t.Errorf("runs: %d before, %d after the bad requests", len(runsBefore), len(runsAfter))
	}
	if h.headSerial() != applied.Version.Serial {
		t.Errorf("head moved to %d", h.headSerial())
	}
}

// TestInitStateAdoptsFile: a state adopted from a real Terraform state file
// keeps its lineage and serial, so saved plans and tooling still recognise
// it; a document whose lineage another state has is refused (two diverging
// copies of one Terraform state).
func TestInitStateAdoptsFile(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.base(config{"a": {Value: "a0"}, "b": {Value: "b0", Ref: "a.id"}})
	hs, same := h.head()
	_, err := h.eng.InitState(h.ctx, "acme/infra/twin", same, "tester")
	if !errors.Is(err, engine.ErrConflict) || !strings.Contains(err.Error(), "state "+testState+" already has lineage "+hs.Lineage) {
		t.Errorf("InitState of %s's own document under another name: %v, want ErrConflict naming %s", testState, err, testState)
	}
	// The same resources under a lineage of their own.
	lineage := "5d0c1f7e-8a5b-4c8e-9f3a-2b6d7e1c0a94"
	doc := []byte(strings.Replace(string(same), hs.Lineage, lineage, 1))
	st, err := h.eng.InitState(h.ctx, "acme/infra/adopted", doc, "tester")
	if err != nil {
		t.Fatalf("InitState from a file: %v", err)
	}
	if st.Lineage != lineage || st.HeadSerial != hs.Serial {
		t.Errorf("adopted state = lineage %s serial %d, want %s %d", st.Lineage, st.HeadSerial, lineage, hs.Serial)
	}
	got, v, err := h.eng.Pull(h.ctx, "acme/infra/adopted", -1)
	if err != nil {
		t.Fatal(err)
	}
	if v.Provenance.Mode != engine.CommitInit || v.Provenance.Origin != "file" || !sameSet(v.Changed, addrs("a", "b")) {
		t.Errorf("adopted version = %+v", v)
	}
	if ah := parseHead(t, got); ah.Resources["b"] != hs.Resources["b"] || ah.Resources["a"] != hs.Resources["a"] {
		t.Errorf("adopted resources = %v, want %v", ah.Resources, hs.Resources)
	}
}

// TestApplyFailsPartWay: Terraform fails after writing one resource; what
// it wrote is committed (no lost state), marked partial and not exact, the
// run and plan are failed with a reason, the reservations are released and
// Terraform's raw result is kept (docs/design.md apply step 6).
func TestApplyFailsPartWay(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.base(config{"ok": {Value: "ok0"}})
	source := h.headSerial()
	plan := h.plan(config{
		"ok":    {Value: "ok1"},
		"bad":   {Value: "bad", Fail: true, DependsOn: []string{"ok"}},
		"after": {Value: "after", DependsOn: []string{"bad"}},
	})
	if !sameSet(plan.Envelope.Footprint.Write, addrs("ok", "bad", "after")) {
		t.Fatalf("write set = %v", plan.Envelope.Footprint.Write)
	}
	out, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: plan.ID, Actor: "alice"})
	if err == nil {
		t.Fatal("Apply succeeded; the local-exec exits 1")
	}
	if out == nil || out.Version == nil || out.Version.Serial != source+1 || h.headSerial() != source+1 {
		t.Fatalf("Apply = %+v, %v; want the partial result committed as version %d", out, err, source+1)
	}
	p := out.Version.Provenance
	if !p.Partial || p.Exact || p.Deviation == nil || !sameSet(p.Deviation.Unchanged, addrs("after")) || len(p.Deviation.Unplanned) != 0 {
		t.Errorf("provenance = %+v (drift %+v), want partial, not exact, after planned but unchanged", p, p.Deviation)
	}
	hs, _ := h.head()
	if hs.Resources["ok"].Input != "ok1" {
		t.Errorf("ok = %+v, want ok1 committed", hs.Resources["ok"])
	}
	if _, ok := hs.Resources["after"]; ok {
		t.Errorf("after is in the head; Terraform never created it")
	}
	t.Logf("bad in the head: %+v", hs.Resources["bad"])

	run := h.run(runErrorID(err))
	if run.Status != engine.StatusFailed || !run.End.Is(engine.CauseTerraformFailed) || run.CommittedSerial != source+1 {
		t.Errorf("apply run = status %s, end %+v, committed %d; want failed by Terraform, committed %d", run.Status, run.End, run.CommittedSerial, source+1)
	} else if tf := run.End.Terraform; tf == nil || tf.Command != "apply" || !provisionerFailed(tf, "terraform_data.bad") {
		t.Errorf("apply run's Terraform failure = %+v; want terraform apply, with the local-exec error diagnostic of terraform_data.bad", tf)
	}
	if pr := h.run(plan.ID); pr.Status != engine.StatusFailed || !pr.End.Is(engine.CauseApplyPartial) || pr.End.Run != run.ID || pr.End.Serial != source+1 {
		t.Errorf("plan = status %s, end %+v; want failed: apply run %s failed part-way, partial result version %d", pr.Status, pr.End, run.ID, source+1)
	}
	if rs := h.reservations(); len(rs) != 0 {
		t.Errorf("reservations left: %v", rs)
	}
	for _, k := range []engine.MarkerKind{engine.MarkerApplied, engine.MarkerDeviation, engine.MarkerCommitted, engine.MarkerFailed, engine.MarkerReleased} {
		h.marker(run.ID, k)
	}
	if why, err := h.eng.Why(h.ctx, plan.ID); err != nil || why.Verdict != engine.VerdictFailed || why.Apply == nil || why.Apply.ID != run.ID ||
		!why.Apply.End.Is(engine.CauseTerraformFailed) {
		t.Errorf("Why(failed) = %+v, %v; want failed, explaining apply run %s ended by Terraform", why, err, run.ID)
	}
	// The partial result is committed: the state artifacts went with the
	// commit (ADR 0063).
	for _, name := range engine.GCStateArtifacts {
		if _, err := h.store.GetArtifact(h.ctx, run.ID, name); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("%s of the committed run: %v; want deleted with the commit", name, err)
		}
	}
}

// TestApplyInterrupted: cancelling an apply while Terraform runs a slow
// resource returns promptly with context.Canceled; what Terraform wrote is
// committed once, the reservations are released, and the plan cannot be
// applied a second time.
func TestApplyInterrupted(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.base(config{"fast": {Value: "f0"}})
	source := h.headSerial()
	plan := h.plan(config{"fast": {Value: "f1"}, "slow": {Value: "s1", Sleep: 120, DependsOn: []string{"fast"}}})

	// Cancel once Terraform reports fast done (slow's sleep has begun).
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	fastDone := make(chan struct{})
	var once sync.Once
	progress := func(p engine.Progress) {
		if p.Phase == "apply" && p.Done >= 1 {
			once.Do(func() { close(fastDone) })
		}
	}
	go func() {
		select {
		case <-fastDone:
			time.Sleep(500 * time.Millisecond)
		case <-time.After(30 * time.Second):
		}
		cancel()
	}()
	begin := time.Now()
	out, err := h.eng.Apply(ctx, engine.ApplyInput{PlanRun: plan.ID, Actor: "alice", Progress: progress})
	took := time.Since(begin)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply = %v, want context.Canceled", err)
	}
	// The sleep runs 120s; an apply that waited for it was not interrupted.
	if took > 60*time.Second {
		t.Errorf("Apply returned after %s", took)
	}
	run := h.run(runErrorID(err))
	if run.Status != engine.StatusInterrupted || !run.End.Is(engine.CauseInterrupted) || run.End.Phase != engine.PhaseTerraformApply {
		t.Errorf("apply run = status %s, end %+v; want interrupted during terraform apply", run.Status, run.End)
	}
	if why, err := h.eng.Why(h.ctx, run.ID); err != nil || why.Verdict != engine.VerdictInterrupted {
		t.Errorf("Why(interrupted) = %+v, %v", why, err)
	}
	// Terraform wrote fast (and slow, tainted or not): committed once.
	vs := h.versions()
	if committed := vs[len(vs)-1].Serial - source; committed != 1 {
		t.Fatalf("%d versions committed by one interrupted apply, want 1", committed)
	}
	v := vs[len(vs)-1]
	if out == nil || out.Version == nil || out.Version.Serial != v.Serial || v.Provenance.Run != run.ID || !v.Provenance.Partial || run.CommittedSerial != v.Serial {
		t.Errorf("committed version %d = %+v; outcome %+v", v.Serial, v.Provenance, out)
	}
	hs, _ := h.head()
	if hs.Resources["fast"].Input != "f1" {
		t.Errorf("fast = %+v: what Terraform wrote before the interrupt is lost", hs.Resources["fast"])
	}
	t.Logf("interrupted after %s; slow in the head: %+v", took, hs.Resources["slow"])
	if rs := h.reservations(); len(rs) != 0 {
		t.Errorf("reservations left: %v", rs)
	}
	_, err = h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: plan.ID, Actor: "alice"})
	var se *engine.StatusError
	if !errors.As(err, &se) {
		t.Errorf("second Apply = %v, want a *StatusError", err)
	}
	if h.headSerial() != v.Serial {
		t.Errorf("head = %d after the second apply, want %d", h.headSerial(), v.Serial)
	}
}

// provisionerFailed reports whether f has an error diagnostic of the
// failing local-exec provisioner (res.Fail) of address.
func provisionerFailed(f *engine.TerraformFailure, address string) bool {
	for _, d := range f.Diagnostics {
		if d.Severity == "error" && d.Summary == "local-exec provisioner error" && d.Address == address {
			return true
		}
	}
	return false
}
