package engine_test

// Fast engine tests over fakeTerraform and faultStore (fake_terraform_test.go):
// the paths the real binary cannot easily reach. They assert stored facts —
// statuses, markers and their fields, versions and provenance,
// reservations, artifacts — and typed errors, never the words of a reason.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
	"github.com/kilolock/kilolock/internal/tfstate"
)

// errFakeTerraform is the failure the fake Terraform reports, as the runner
// would after a failed resource ("terraform apply: …").
var errFakeTerraform = errors.New("terraform apply: fake: resource b failed")

// errFakeStore is the failure the fault store injects.
var errFakeStore = errors.New("fake store: disk I/O error")

// TestFakeApply: what an apply run ends as, what it commits and what becomes
// of its plan, for each way Terraform (or the store around it) can end. The
// plan writes terraform_data.a and .b of a state at serial 1 (a0, b0).
func TestFakeApply(t *testing.T) {
	t.Parallel()
	const base = 1 // the plan's source serial
	type outcome struct {
		h   *fakeHarness
		out *engine.ApplyOutcome
		err error
		run engine.Run // the apply run, as stored
	}
	tests := []struct {
		name string
		// arrange sets the fake and the faults once the plan is stored;
		// cancel cancels the context Apply runs with.
		arrange func(h *fakeHarness, cancel context.CancelFunc)
		wantIs  []error
		// wantStatus is the apply run's; wantPlan the plan's afterwards.
		wantStatus, wantPlan engine.RunStatus
		// wantSerial is the version committed (0: none, the head stays at
		// base); wantPartial its Provenance.Partial.
		wantSerial  int64
		wantPartial bool
		wantHead    map[string]string
		wantMarkers []engine.MarkerKind
		then        func(t *testing.T, o outcome)
	}{
		{
			name: "Terraform finishes",
			arrange: func(h *fakeHarness, _ context.CancelFunc) {
				h.tf.ApplyResult = &engine.ApplyResult{State: tfDoc(h.t, fakeLineage, base+1, map[string]string{"a": "a1", "b": "b1"}), Changed: 2}
			},
			wantStatus: engine.StatusApplied, wantPlan: engine.StatusApplied,
			wantSerial: base + 1, wantHead: map[string]string{"a": "a1", "b": "b1"},
			wantMarkers: []engine.MarkerKind{engine.MarkerReserved, engine.MarkerPreflight, engine.MarkerStalenessPassed,
				engine.MarkerApplyStarted, engine.MarkerApplied, engine.MarkerCommitted, engine.MarkerReleased},
			then: func(t *testing.T, o outcome) {
				if p := o.out.Version.Provenance; !p.Exact || p.Deviation != nil {
					t.Errorf("provenance = exact %v, drift %+v; want exact", p.Exact, p.Deviation)
				}
			},
		},
		{
			name: "Terraform fails part-way and returns what it wrote",
			arrange: func(h *fakeHarness, _ context.CancelFunc) {
				written := tfDoc(h.t, fakeLineage, base+1, map[string]string{"a": "a1", "b": "b0"})
				h.tf.ApplyResult, h.tf.ApplyErr = &engine.ApplyResult{State: written, Changed: 1}, errFakeTerraform
				h.tf.Checkpoints = [][]byte{written}
			},
			wantIs:     []error{errFakeTerraform},
			wantStatus: engine.StatusFailed, wantPlan: engine.StatusFailed,
			wantSerial: base + 1, wantPartial: true, wantHead: map[string]string{"a": "a1", "b": "b0"},
			wantMarkers: []engine.MarkerKind{engine.MarkerReserved, engine.MarkerPreflight, engine.MarkerStalenessPassed,
				engine.MarkerApplyStarted, engine.MarkerApplied, engine.MarkerDeviation, engine.MarkerCommitted, engine.MarkerFailed, engine.MarkerReleased},
			then: func(t *testing.T, o outcome) {
				h, v := o.h, o.out.Version
				if !sameSet(v.Changed, addrs("a")) {
					t.Errorf("version changed %v, want terraform_data.a", v.Changed)
				}
				if m := h.marker(o.run.ID, engine.MarkerApplied); m.Count != 1 || !sameSet(m.Addresses, addrs("a")) {
					t.Errorf("applied marker = count %d, %v; want 1, terraform_data.a", m.Count, m.Addresses)
				}
				d := h.marker(o.run.ID, engine.MarkerDeviation).Deviation
				if d == nil || !sameSet(d.Unchanged, addrs("b")) || len(d.Unplanned) != 0 {
					t.Errorf("drift = %+v, want terraform_data.b planned but unchanged", d)
				}
				if p := v.Provenance; p.Exact || p.Deviation == nil || !sameSet(p.Deviation.Unchanged, addrs("b")) {
					t.Errorf("provenance = exact %v, drift %+v; want the drift", p.Exact, p.Deviation)
				}
				// What Terraform wrote is in the version: its state
				// artifacts went with the commit (ADR 0063).
				for _, name := range engine.GCStateArtifacts {
					if got := h.artifact(o.run.ID, name); got != nil {
						t.Errorf("%s of the committed run is still stored (%d bytes): the commit deletes it", name, len(got))
					}
				}
				// Committed: nothing is left to recover.
				var re *engine.RecoverError
				if _, err := h.eng.Recover(h.ctx, o.run.ID); !errors.As(err, &re) || !errors.Is(err, engine.ErrConflict) {
					t.Errorf("Recover of the committed run: %v, want a *RecoverError, ErrConflict", err)
				}
			},
		},
		{
			name: "Terraform fails and returns no state",
			arrange: func(h *fakeHarness, _ context.CancelFunc) {
				h.tf.ApplyErr = errFakeTerraform
			},
			wantIs:     []error{errFakeTerraform},
			wantStatus: engine.StatusFailed, wantPlan: engine.StatusPlanned,
			wantMarkers: []engine.MarkerKind{engine.MarkerReserved, engine.MarkerPreflight, engine.MarkerStalenessPassed,
				engine.MarkerApplyStarted, engine.MarkerFailed, engine.MarkerReleased},
			then: func(t *testing.T, o outcome) {
				if got := o.h.artifact(o.run.ID, engine.ArtifactApplyResult); got != nil {
					t.Errorf("apply-result artifact stored (%d bytes) though Terraform returned none", len(got))
				}
			},
		},
		{
			// The runner hands back req.Snapshot when Terraform wrote nothing.
			name: "Terraform fails and returns the snapshot unchanged",
			arrange: func(h *fakeHarness, _ context.CancelFunc) {
				snap, err := h.db.Snapshot(h.ctx, testState, base)
				if err != nil {
					h.t.Fatal(err)
				}
				h.tf.ApplyResult, h.tf.ApplyErr = &engine.ApplyResult{State: snap}, errFakeTerraform
			},
			wantIs:     []error{errFakeTerraform},
			wantStatus: engine.StatusFailed, wantPlan: engine.StatusPlanned,
			wantMarkers: []engine.MarkerKind{engine.MarkerReserved, engine.MarkerPreflight, engine.MarkerStalenessPassed,
				engine.MarkerApplyStarted, engine.MarkerFailed, engine.MarkerReleased},
			then: func(t *testing.T, o outcome) {
				// Nothing to recover: what it wrote changes nothing.
				if _, err := o.h.eng.Recover(o.h.ctx, o.run.ID); !errors.Is(err, engine.ErrNotFound) {
					t.Errorf("Recover: %v, want ErrNotFound (nothing changed)", err)
				}
			},
		},
		{
			name: "Terraform writes an unreadable state",
			arrange: func(h *fakeHarness, _ context.CancelFunc) {
				h.tf.ApplyResult = &engine.ApplyResult{State: []byte(`{"version": 4, "serial": `), Changed: 2}
			},
			wantIs:     []error{tfstate.ErrInvalid},
			wantStatus: engine.StatusFailed, wantPlan: engine.StatusFailed,
			wantMarkers: []engine.MarkerKind{engine.MarkerReserved, engine.MarkerPreflight, engine.MarkerStalenessPassed,
				engine.MarkerApplyStarted, engine.MarkerFailed, engine.MarkerReleased},
			then: func(t *testing.T, o outcome) {
				h := o.h
				want := h.tf.ApplyResult.State
				if got := h.artifact(o.run.ID, engine.ArtifactApplyResult); !bytes.Equal(got, want) {
					t.Errorf("apply-result artifact = %q, want what Terraform wrote %q", got, want)
				}
				// The plan is not applicable again (Terraform ran).
				var se *engine.StatusError
				if _, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: o.run.PlanRun, Actor: "bob"}); !errors.As(err, &se) || se.Status != engine.StatusFailed {
					t.Errorf("second Apply of the plan: %v, want a *StatusError (failed)", err)
				}
				// Nor can Recover commit garbage.
				if _, err := h.eng.Recover(h.ctx, o.run.ID); !errors.Is(err, engine.ErrInvalid) {
					t.Errorf("Recover: %v, want ErrInvalid", err)
				}
				if s := h.headSerial(); s != base {
					t.Errorf("head serial %d after Recover, want %d", s, base)
				}
			},
		},
		{
			name: "cancelled while Terraform runs, after it wrote",
			arrange: func(h *fakeHarness, cancel context.CancelFunc) {
				h.tf.ApplyResult = &engine.ApplyResult{State: tfDoc(h.t, fakeLineage, base+1, map[string]string{"a": "a1", "b": "b0"}), Changed: 1}
				h.tf.ApplyErr = fmt.Errorf("terraform apply: %w", context.Canceled)
				h.tf.CancelOnApply = cancel
			},
			wantIs:     []error{context.Canceled},
			wantStatus: engine.StatusInterrupted, wantPlan: engine.StatusFailed,
			wantSerial: base + 1, wantPartial: true, wantHead: map[string]string{"a": "a1", "b": "b0"},
			wantMarkers: []engine.MarkerKind{engine.MarkerReserved, engine.MarkerPreflight, engine.MarkerStalenessPassed,
				engine.MarkerApplyStarted, engine.MarkerApplied, engine.MarkerDeviation, engine.MarkerCommitted, engine.MarkerFailed, engine.MarkerReleased},
			then: func(t *testing.T, o outcome) {
				if c := o.h.tf.Calls[len(o.h.tf.Calls)-1]; c.Op != "apply" || c.CtxErr != nil {
					t.Errorf("last Terraform call %s with ctx error %v; want apply, not yet cancelled", c.Op, c.CtxErr)
				}
				r := o.h.run(o.run.ID)
				if got, want := report.EndText(r.ID, r.End), "interrupted during terraform apply: committed what Terraform wrote"; got != want {
					t.Errorf("end %+v reads %q, want %q", r.End, got, want)
				}
			},
		},
		{
			name: "cancelled while Terraform runs, before it wrote",
			arrange: func(h *fakeHarness, cancel context.CancelFunc) {
				h.tf.ApplyErr = fmt.Errorf("terraform apply: %w", context.Canceled)
				h.tf.CancelOnApply = cancel
			},
			wantIs:     []error{context.Canceled},
			wantStatus: engine.StatusInterrupted, wantPlan: engine.StatusPlanned,
			wantMarkers: []engine.MarkerKind{engine.MarkerReserved, engine.MarkerPreflight, engine.MarkerStalenessPassed,
				engine.MarkerApplyStarted, engine.MarkerFailed, engine.MarkerReleased},
			then: func(t *testing.T, o outcome) {
				// Nothing was committed: the words must not say it was.
				r := o.h.run(o.run.ID)
				if got, want := report.EndText(r.ID, r.End), "interrupted during terraform apply before it changed anything: nothing committed"; got != want {
					t.Errorf("end %+v reads %q, want %q", r.End, got, want)
				}
			},
		},
		{
			name: "the commit fails: Terraform's result is kept and recovered",
			arrange: func(h *fakeHarness, _ context.CancelFunc) {
				h.tf.ApplyResult = &engine.ApplyResult{State: tfDoc(h.t, fakeLineage, base+1, map[string]string{"a": "a1", "b": "b1"}), Changed: 2}
				h.store.CommitErr = errFakeStore
			},
			wantIs:     []error{errFakeStore},
			wantStatus: engine.StatusFailed, wantPlan: engine.StatusFailed,
			wantMarkers: []engine.MarkerKind{engine.MarkerReserved, engine.MarkerPreflight, engine.MarkerStalenessPassed,
				engine.MarkerApplyStarted, engine.MarkerApplied, engine.MarkerFailed, engine.MarkerReleased},
			then: func(t *testing.T, o outcome) {
				h := o.h
				if got := h.artifact(o.run.ID, engine.ArtifactApplyResult); !bytes.Equal(got, h.tf.ApplyResult.State) {
					t.Fatalf("apply-result artifact is not what Terraform wrote")
				}
				h.store.CommitErr = nil
				rec, err := h.eng.Recover(h.ctx, o.run.ID)
				if err != nil {
					t.Fatalf("Recover: %v", err)
				}
				v := rec.Version
				if v == nil || v.Serial != base+1 || !v.Provenance.Partial || v.Provenance.Run != o.run.ID || !sameSet(v.Changed, addrs("a", "b")) {
					t.Fatalf("recovered version = %+v, want serial %d, partial, run %s, changing a and b", v, base+1, o.run.ID)
				}
				if r := h.run(o.run.ID); r.Status != engine.StatusFailed || r.CommittedSerial != base+1 {
					t.Errorf("run after Recover = %s, committed %d; want failed, %d", r.Status, r.CommittedSerial, base+1)
				}
				if m := h.marker(o.run.ID, engine.MarkerRecovered); m.Serial != base+1 || m.Extra["artifact"] != engine.ArtifactApplyResult {
					t.Errorf("recovered marker = serial %d, extra %v; want %d from %s", m.Serial, m.Extra, base+1, engine.ArtifactApplyResult)
				}
				if got := h.head(); !maps.Equal(got, map[string]string{"a": "a1", "b": "b1"}) {
					t.Errorf("head after Recover = %v", got)
				}
				if p := h.run(o.run.PlanRun); p.Status != engine.StatusFailed {
					t.Errorf("plan after Recover = %s, want failed", p.Status)
				}
			},
		},
		{
			// The store fails every write of what Terraform wrote and the
			// commit: the run's end must not claim an artifact holds it,
			// and Recover says it has nothing rather than inventing it.
			name: "storing the result and the commit fail: the end does not claim an artifact",
			arrange: func(h *fakeHarness, _ context.CancelFunc) {
				written := tfDoc(h.t, fakeLineage, base+1, map[string]string{"a": "a1", "b": "b1"})
				h.tf.ApplyResult, h.tf.Checkpoints = &engine.ApplyResult{State: written, Changed: 2}, [][]byte{written}
				h.store.PutArtifactErr = map[string]error{engine.ArtifactApplyResult: errFakeStore, engine.ArtifactApplyCheckpoint: errFakeStore}
				h.store.CommitErr = errFakeStore
			},
			wantIs:     []error{errFakeStore},
			wantStatus: engine.StatusFailed, wantPlan: engine.StatusFailed,
			wantMarkers: []engine.MarkerKind{engine.MarkerReserved, engine.MarkerPreflight, engine.MarkerStalenessPassed,
				engine.MarkerApplyStarted, engine.MarkerApplied, engine.MarkerFailed, engine.MarkerReleased},
			then: func(t *testing.T, o outcome) {
				h := o.h
				if e := h.run(o.run.ID).End; !e.Is(engine.CauseFailed) || e.Step != engine.StepCommit || e.Artifact != "" {
					t.Errorf("end = %+v; want the commit step failed, naming no artifact (none was stored)", e)
				}
				h.store.PutArtifactErr, h.store.CommitErr = nil, nil
				if _, err := h.eng.Recover(h.ctx, o.run.ID); !errors.Is(err, engine.ErrNotFound) {
					t.Errorf("Recover with nothing stored = %v; want ErrNotFound", err)
				}
			},
		},
		{
			name: "storing a checkpoint fails: the apply goes on",
			arrange: func(h *fakeHarness, _ context.CancelFunc) {
				written := tfDoc(h.t, fakeLineage, base+1, map[string]string{"a": "a1", "b": "b1"})
				h.tf.ApplyResult, h.tf.Checkpoints = &engine.ApplyResult{State: written, Changed: 2}, [][]byte{written}
				h.store.PutArtifactErr = map[string]error{engine.ArtifactApplyCheckpoint: errFakeStore}
			},
			wantStatus: engine.StatusApplied, wantPlan: engine.StatusApplied,
			wantSerial: base + 1, wantHead: map[string]string{"a": "a1", "b": "b1"},
			wantMarkers: []engine.MarkerKind{engine.MarkerReserved, engine.MarkerPreflight, engine.MarkerStalenessPassed,
				engine.MarkerApplyStarted, engine.MarkerApplied, engine.MarkerCommitted, engine.MarkerReleased},
		},
		{
			name: "storing the apply result fails: the version still holds it",
			arrange: func(h *fakeHarness, _ context.CancelFunc) {
				h.tf.ApplyResult = &engine.ApplyResult{State: tfDoc(h.t, fakeLineage, base+1, map[string]string{"a": "a1", "b": "b1"}), Changed: 2}
				h.store.PutArtifactErr = map[string]error{engine.ArtifactApplyResult: errFakeStore}
			},
			wantStatus: engine.StatusApplied, wantPlan: engine.StatusApplied,
			wantSerial: base + 1, wantHead: map[string]string{"a": "a1", "b": "b1"},
			wantMarkers: []engine.MarkerKind{engine.MarkerReserved, engine.MarkerPreflight, engine.MarkerStalenessPassed,
				engine.MarkerApplyStarted, engine.MarkerApplied, engine.MarkerCommitted, engine.MarkerReleased},
		},
		{
			name: "Terraform changes what was not planned and leaves it tainted",
			arrange: func(h *fakeHarness, _ context.CancelFunc) {
				h.tf.ApplyResult = &engine.ApplyResult{State: tfDoc(h.t, fakeLineage, base+1,
					map[string]string{"a": "a1", "b": "b1", "c": "tainted:c1"}), Changed: 3}
			},
			wantStatus: engine.StatusApplied, wantPlan: engine.StatusApplied,
			wantSerial: base + 1, wantHead: map[string]string{"a": "a1", "b": "b1", "c": "c1"},
			wantMarkers: []engine.MarkerKind{engine.MarkerReserved, engine.MarkerPreflight, engine.MarkerStalenessPassed,
				engine.MarkerApplyStarted, engine.MarkerApplied, engine.MarkerDeviation, engine.MarkerCommitted, engine.MarkerReleased},
			then: func(t *testing.T, o outcome) {
				d := o.h.marker(o.run.ID, engine.MarkerDeviation).Deviation
				if d == nil || !sameSet(d.Unplanned, addrs("c")) || !sameSet(d.Tainted, addrs("c")) || len(d.Unchanged) != 0 || len(d.Kept) != 0 {
					t.Errorf("drift = %+v, want terraform_data.c unplanned and tainted", d)
				}
				if p := o.out.Version.Provenance; p.Exact || p.Deviation == nil {
					t.Errorf("provenance exact %v, drift %+v; want the drift", p.Exact, p.Deviation)
				}
			},
		},
		{
			name: "Terraform returns neither a state nor an error",
			arrange: func(h *fakeHarness, _ context.CancelFunc) {
				h.tf.ApplyResult = &engine.ApplyResult{}
			},
			wantIs:     []error{},
			wantStatus: engine.StatusFailed, wantPlan: engine.StatusFailed,
			wantMarkers: []engine.MarkerKind{engine.MarkerReserved, engine.MarkerPreflight, engine.MarkerStalenessPassed,
				engine.MarkerApplyStarted, engine.MarkerFailed, engine.MarkerReleased},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := fakeSetup(t)
			plan := h.plan("a", "b")
			ctx, cancel := context.WithCancel(h.ctx)
			defer cancel()
			tt.arrange(h, cancel)
			out, err := h.eng.Apply(ctx, engine.ApplyInput{PlanRun: plan.ID, State: testState, Actor: "alice"})

			// The error: typed, naming the apply run.
			applies := h.runs(engine.KindApply)
			if len(applies) != 1 {
				t.Fatalf("%d apply runs, want 1", len(applies))
			}
			run := applies[0]
			if tt.wantIs == nil && err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if tt.wantIs != nil {
				if err == nil {
					t.Fatalf("Apply succeeded, want an error")
				}
				if id := runErrorID(err); id != run.ID {
					t.Errorf("error names run %q, want the apply run %s (%v)", id, run.ID, err)
				}
			}
			for _, w := range tt.wantIs {
				if !errors.Is(err, w) {
					t.Errorf("Apply error %v is not %v", err, w)
				}
			}
			// Terraform was run once, on the plan's own saved plan and snapshot.
			snap, serr := h.db.Snapshot(h.ctx, testState, base)
			if serr != nil {
				t.Fatal(serr)
			}
			var applyCalls []fakeCall
			for _, c := range h.tf.Calls {
				if c.Op == "apply" {
					applyCalls = append(applyCalls, c)
				}
			}
			if len(applyCalls) != 1 || applyCalls[0].Run != run.ID || !bytes.Equal(applyCalls[0].Snapshot, snap) ||
				!bytes.Equal(applyCalls[0].PlanFile, h.tf.PlanResult.PlanFile) {
				t.Errorf("Terraform apply calls = %d (want 1 for run %s on the saved plan and snapshot %d)", len(applyCalls), run.ID, base)
			}

			// The apply run and its plan.
			if run.Status != tt.wantStatus || run.FinishedAt == nil {
				t.Errorf("apply run status %s (finished %v), want %s", run.Status, run.FinishedAt, tt.wantStatus)
			}
			if got := kinds(h.markers(run.ID)); !slices.Equal(got, tt.wantMarkers) {
				t.Errorf("apply run markers\n got %v\nwant %v", got, tt.wantMarkers)
			}
			if m := h.marker(run.ID, engine.MarkerApplyStarted); m.Serial != base {
				t.Errorf("apply-started serial %d, want %d", m.Serial, base)
			}
			if p := h.run(plan.ID); p.Status != tt.wantPlan || p.ApplyRun != run.ID {
				t.Errorf("plan = %s, apply run %q; want %s, %s", p.Status, p.ApplyRun, tt.wantPlan, run.ID)
			}
			if rs := h.reservations(); len(rs) != 0 {
				t.Errorf("%d reservations left, want none released: %+v", len(rs), rs)
			}

			// The version: head+1, or none.
			if tt.wantSerial == 0 {
				if out != nil && out.Version != nil {
					t.Errorf("version %d committed, want none", out.Version.Serial)
				}
				if s := h.headSerial(); s != base {
					t.Errorf("head serial %d, want %d (nothing committed)", s, base)
				}
				if run.CommittedSerial != 0 {
					t.Errorf("run committed serial %d, want 0", run.CommittedSerial)
				}
			} else {
				if out == nil || out.Version == nil {
					t.Fatalf("no version committed, want %d", tt.wantSerial)
				}
				v := out.Version
				p := v.Provenance
				if v.Serial != tt.wantSerial || h.headSerial() != tt.wantSerial || run.CommittedSerial != tt.wantSerial || out.Run.ID != run.ID {
					t.Errorf("version %d, head %d, run committed %d; want %d", v.Serial, h.headSerial(), run.CommittedSerial, tt.wantSerial)
				}
				if p.Partial != tt.wantPartial || p.Run != run.ID || p.PlanRun != plan.ID || p.SourceSerial != base ||
					p.CommittedSerial != tt.wantSerial || p.PlanDigest != plan.Envelope.PlanDigest || p.Mode != engine.CommitSnapshotMerge {
					t.Errorf("provenance = %+v, want partial %v, run %s, plan %s, %d → %d, the plan's digest, snapshot-merge",
						p, tt.wantPartial, run.ID, plan.ID, base, tt.wantSerial)
				}
				if m := h.marker(run.ID, engine.MarkerCommitted); m.Serial != tt.wantSerial || m.FromSerial != base || m.Mode != engine.CommitSnapshotMerge {
					t.Errorf("committed marker = serial %d from %d mode %s; want %d from %d snapshot-merge", m.Serial, m.FromSerial, m.Mode, tt.wantSerial, base)
				}
			}
			want := tt.wantHead
			if want == nil {
				want = map[string]string{"a": "a0", "b": "b0"}
			}
			if got := h.head(); !maps.Equal(got, want) {
				t.Errorf("head = %v, want %v", got, want)
			}
			if tt.then != nil {
				tt.then(t, outcome{h: h, out: out, err: err, run: run})
			}
		})
	}
}

// TestFakeApplyRefused: a saved plan that does not match its envelope, or
// whose artifacts cannot be read, is refused before anything is claimed,
// reserved or run: no apply run, the plan still planned and unclaimed,
// Terraform not called, the head unchanged.
func TestFakeApplyRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		arrange func(h *fakeHarness, plan engine.Run)
		wantIs  error
		// inspected: InspectPlanFile was called (the digest matched).
		inspected bool
	}{
		{
			name:      "plan file made against another lineage",
			arrange:   func(h *fakeHarness, _ engine.Run) { h.tf.Info.Lineage = "0b5e55ed-0the-4e2b-9c1d-000000000002" },
			wantIs:    engine.ErrInvalid,
			inspected: true,
		},
		{
			name:      "plan file made against another serial",
			arrange:   func(h *fakeHarness, _ engine.Run) { h.tf.Info.Serial = 0 },
			wantIs:    engine.ErrInvalid,
			inspected: true,
		},
		{
			name: "not a plan file",
			arrange: func(h *fakeHarness, _ engine.Run) {
				h.tf.InspectErr = fmt.Errorf("reading saved plan: not a zip file: %w", engine.ErrInvalid)
			},
			wantIs:    engine.ErrInvalid,
			inspected: true,
		},
		{
			name: "saved plan corrupted: digest differs from the envelope",
			arrange: func(h *fakeHarness, plan engine.Run) {
				if err := h.db.PutArtifact(h.ctx, plan.ID, engine.ArtifactPlanFile, []byte("flipped bits")); err != nil {
					h.t.Fatal(err)
				}
			},
			wantIs: engine.ErrInvalid,
		},
		{
			name: "intent not JSON",
			arrange: func(h *fakeHarness, plan engine.Run) {
				if err := h.db.PutArtifact(h.ctx, plan.ID, engine.ArtifactIntent, []byte("{not json")); err != nil {
					h.t.Fatal(err)
				}
			},
			wantIs:    engine.ErrInvalid,
			inspected: true,
		},
		{
			name: "reading the saved plan fails",
			arrange: func(h *fakeHarness, _ engine.Run) {
				h.store.GetArtifactErr = map[string]error{engine.ArtifactPlanFile: errFakeStore}
			},
			wantIs: errFakeStore,
		},
		{
			name: "the saved plan is missing",
			arrange: func(h *fakeHarness, _ engine.Run) {
				h.store.GetArtifactErr = map[string]error{engine.ArtifactPlanFile: fmt.Errorf("artifact: %w", engine.ErrNotFound)}
			},
			wantIs: engine.ErrNotFound,
		},
		{
			name: "reading the configuration fails",
			arrange: func(h *fakeHarness, _ engine.Run) {
				h.store.GetArtifactErr = map[string]error{engine.ArtifactConfig: errFakeStore}
			},
			wantIs:    errFakeStore,
			inspected: true,
		},
		{
			name: "reading the intent fails",
			arrange: func(h *fakeHarness, _ engine.Run) {
				h.store.GetArtifactErr = map[string]error{engine.ArtifactIntent: errFakeStore}
			},
			wantIs:    errFakeStore,
			inspected: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := fakeSetup(t)
			plan := h.plan("a")
			tt.arrange(h, plan)
			out, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: plan.ID, State: testState, Actor: "alice"})
			if !errors.Is(err, tt.wantIs) {
				t.Fatalf("Apply: %v, want %v", err, tt.wantIs)
			}
			if out != nil {
				t.Errorf("outcome %+v, want none", out)
			}
			if n := h.tf.called("inspect"); (n == 1) != tt.inspected || n > 1 {
				t.Errorf("InspectPlanFile called %d times, want inspected %v", n, tt.inspected)
			}
			if n := h.tf.called("apply"); n != 0 {
				t.Errorf("Terraform apply called %d times, want 0", n)
			}
			if rs := h.runs(engine.KindApply); len(rs) != 0 {
				t.Errorf("%d apply runs created, want none", len(rs))
			}
			if p := h.run(plan.ID); p.Status != engine.StatusPlanned || p.ApplyRun != "" {
				t.Errorf("plan = %s, apply run %q; want planned, unclaimed", p.Status, p.ApplyRun)
			}
			if rs := h.reservations(); len(rs) != 0 {
				t.Errorf("%d reservations, want none", len(rs))
			}
			if s := h.headSerial(); s != 1 {
				t.Errorf("head serial %d, want 1", s)
			}
		})
	}
}

// TestFakePlan: a plan run that cannot be stored ends failed (or
// interrupted) with a "failed" marker and no envelope; no open plan is left.
func TestFakePlan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		arrange    func(h *fakeHarness, cancel context.CancelFunc)
		wantIs     error
		wantStatus engine.RunStatus
	}{
		{
			name:       "terraform plan fails",
			arrange:    func(h *fakeHarness, _ context.CancelFunc) { h.tf.PlanErr = errFakeTerraform },
			wantIs:     errFakeTerraform,
			wantStatus: engine.StatusFailed,
		},
		{
			name: "cancelled while terraform plan runs",
			arrange: func(h *fakeHarness, cancel context.CancelFunc) {
				h.tf.PlanErr, h.tf.CancelOnPlan = fmt.Errorf("terraform plan: %w", context.Canceled), cancel
			},
			wantIs:     context.Canceled,
			wantStatus: engine.StatusInterrupted,
		},
		{
			name: "plan made against another lineage",
			arrange: func(h *fakeHarness, _ context.CancelFunc) {
				h.tf.PlanResult.Lineage = "0b5e55ed-0the-4e2b-9c1d-000000000002"
			},
			wantIs:     engine.ErrInvalid,
			wantStatus: engine.StatusFailed,
		},
		{
			name: "storing the saved plan fails",
			arrange: func(h *fakeHarness, _ context.CancelFunc) {
				h.store.PutArtifactErr = map[string]error{engine.ArtifactPlanFile: errFakeStore}
			},
			wantIs:     errFakeStore,
			wantStatus: engine.StatusFailed,
		},
		{
			name: "storing the configuration fails",
			arrange: func(h *fakeHarness, _ context.CancelFunc) {
				h.store.PutArtifactErr = map[string]error{engine.ArtifactConfig: errFakeStore}
			},
			wantIs:     errFakeStore,
			wantStatus: engine.StatusFailed,
		},
		{
			name: "storing the intent fails",
			arrange: func(h *fakeHarness, _ context.CancelFunc) {
				h.store.PutArtifactErr = map[string]error{engine.ArtifactIntent: errFakeStore}
			},
			wantIs:     errFakeStore,
			wantStatus: engine.StatusFailed,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := fakeSetup(t)
			h.tf.PlanResult = h.planResult("a")
			ctx, cancel := context.WithCancel(h.ctx)
			defer cancel()
			tt.arrange(h, cancel)
			out, err := h.eng.Plan(ctx, engine.PlanInput{State: testState, Dir: t.TempDir(), Actor: "alice"})
			if !errors.Is(err, tt.wantIs) {
				t.Fatalf("Plan: %v, want %v", err, tt.wantIs)
			}
			if out != nil {
				t.Errorf("outcome %+v, want none", out)
			}
			if n := h.tf.called("plan"); n != 1 {
				t.Errorf("Terraform plan called %d times, want 1", n)
			}
			snap, serr := h.db.Snapshot(h.ctx, testState, 1)
			if serr != nil {
				t.Fatal(serr)
			}
			if c := h.tf.Calls[0]; !bytes.Equal(c.Snapshot, snap) {
				t.Errorf("Terraform planned against another snapshot than the head")
			}
			plans := h.runs(engine.KindPlan)
			if len(plans) != 1 {
				t.Fatalf("%d plan runs, want 1", len(plans))
			}
			r := plans[0]
			if interrupted := r.Status == engine.StatusInterrupted; interrupted != (r.End.Is(engine.CauseInterrupted) && r.End.Phase == engine.PhasePlanning) {
				t.Errorf("plan run %s with end %+v; an interrupted plan's end says it was interrupted while planning, and only its", r.Status, r.End)
			}
			if r.Status != tt.wantStatus || r.FinishedAt == nil || r.Envelope != nil {
				t.Errorf("plan run = %s (finished %v, envelope %v), want %s, finished, no envelope", r.Status, r.FinishedAt, r.Envelope != nil, tt.wantStatus)
			}
			if got, want := kinds(h.markers(r.ID)), []engine.MarkerKind{engine.MarkerFailed}; !slices.Equal(got, want) {
				t.Errorf("plan run markers %v, want %v", got, want)
			}
			if open := h.openPlans(); len(open) != 0 {
				t.Errorf("%d open plans left, want none", len(open))
			}
			var se *engine.StatusError
			if _, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: r.ID, Actor: "alice"}); !errors.As(err, &se) && !errors.Is(err, engine.ErrInvalid) {
				t.Errorf("Apply of the failed plan: %v, want a refusal", err)
			}
			if n := h.tf.called("apply"); n != 0 {
				t.Errorf("Terraform apply called %d times, want 0", n)
			}
		})
	}
}
