package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// TestFakeReplan: the re-plan of a read-changed apply (docs/design.md apply step
// 3), with Terraform's re-plan answers the real binary gives only with
// elaborate configurations, or never (a failure, a failing store). The
// reviewed plan writes terraform_data.a and reads .b; another plan then
// commits b as version 2, so applying the reviewed plan re-plans. The
// reviewed plan's own snapshot is never applied: either the re-plan is, to
// head 2 (issue 10 §2), or nothing is.
func TestFakeReplan(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// arrange sets the fake and the faults; rp is the re-plan result
		// the fake returns unless arrange changes it (the reviewed intent
		// against the head).
		arrange    func(h *fakeHarness, rp *engine.PlanResult, cancel context.CancelFunc)
		wantIs     []error
		wantStatus engine.RunStatus // the apply run's
		wantPlan   engine.RunStatus // the reviewed plan's
		wantReplan engine.RunStatus // the re-plan run's
		// wantIntentChanged is the replanned marker's IntentChanged; nil:
		// no replanned marker (the re-plan did not finish).
		wantIntentChanged *bool
		wantClass         engine.SincePlanClass
		// wantTerraform: Terraform applied the re-plan; wantApplied: and
		// version 3 was committed.
		wantTerraform bool
		wantApplied   bool
		// wantReplanEnd is the re-plan's end cause, when it has one.
		wantReplanEnd engine.Cause
	}{
		{
			name:       "intent unchanged: the re-plan applies to the head it was made against",
			arrange:    func(*fakeHarness, *engine.PlanResult, context.CancelFunc) {},
			wantStatus: engine.StatusApplied, wantPlan: engine.StatusApplied, wantReplan: engine.StatusApplied,
			wantIntentChanged: new(false), wantTerraform: true, wantApplied: true, wantReplanEnd: engine.CauseReplanApplied,
		},
		{
			name: "a change outside the reviewed footprint: the re-plan stays open for review",
			arrange: func(_ *fakeHarness, rp *engine.PlanResult, _ context.CancelFunc) {
				rp.Intent.Changes["terraform_data.c"] = engine.IntentChange{Actions: []string{"update"}, AfterDigest: "sha256:c1"}
				rp.Footprint.Write = addrs("a", "c")
			},
			wantIs:     []error{engine.ErrOutsideFootprint, engine.ErrIntentChanged},
			wantStatus: engine.StatusRefused, wantPlan: engine.StatusSuperseded, wantReplan: engine.StatusPlanned,
			wantIntentChanged: new(true), wantClass: engine.ClassIndependent,
		},
		{
			name: "a reservation beyond those held: the re-plan stays open for review",
			arrange: func(_ *fakeHarness, rp *engine.PlanResult, _ context.CancelFunc) {
				rp.Footprint.Read = addrs("b", "c")
			},
			wantIs:     []error{engine.ErrBeyondReservations, engine.ErrIntentChanged},
			wantStatus: engine.StatusRefused, wantPlan: engine.StatusSuperseded, wantReplan: engine.StatusPlanned,
			wantIntentChanged: new(true),
		},
		{
			name: "terraform apply of the re-plan fails before it writes: the plan is open again, the re-plan closed",
			arrange: func(h *fakeHarness, _ *engine.PlanResult, _ context.CancelFunc) {
				h.tf.ApplyResult, h.tf.ApplyErr = nil, errFakeTerraform
			},
			wantIs:     []error{errFakeTerraform},
			wantStatus: engine.StatusFailed, wantPlan: engine.StatusPlanned, wantReplan: engine.StatusSuperseded,
			wantIntentChanged: new(false), wantTerraform: true, wantReplanEnd: engine.CauseApplyEnded,
		},
		{
			name: "intent changed on the write set: the re-plan stays open for review",
			arrange: func(_ *fakeHarness, rp *engine.PlanResult, _ context.CancelFunc) {
				rp.Intent.Changes["terraform_data.a"] = engine.IntentChange{Actions: []string{"update"}, AfterDigest: "sha256:other"}
			},
			wantIs:     []error{engine.ErrIntentChanged},
			wantStatus: engine.StatusRefused, wantPlan: engine.StatusSuperseded, wantReplan: engine.StatusPlanned,
			wantIntentChanged: new(true), wantClass: engine.ClassWriteChanged,
		},
		{
			name: "the re-plan would change what the plan reads: configuration behind the head",
			arrange: func(_ *fakeHarness, rp *engine.PlanResult, _ context.CancelFunc) {
				rp.Intent.Changes["terraform_data.b"] = engine.IntentChange{Actions: []string{"update"}, AfterDigest: "sha256:b0"}
			},
			wantIs:     []error{engine.ErrBehindHead, engine.ErrIntentChanged},
			wantStatus: engine.StatusRefused, wantPlan: engine.StatusStale, wantReplan: engine.StatusSuperseded,
			wantIntentChanged: new(true), wantClass: engine.ClassReadChanged,
		},
		{
			name:       "terraform plan fails in the re-plan",
			arrange:    func(h *fakeHarness, _ *engine.PlanResult, _ context.CancelFunc) { h.tf.PlanErr = errFakeTerraform },
			wantIs:     []error{errFakeTerraform},
			wantStatus: engine.StatusFailed, wantPlan: engine.StatusPlanned, wantReplan: engine.StatusFailed,
		},
		{
			name: "storing the re-plan fails",
			arrange: func(h *fakeHarness, _ *engine.PlanResult, _ context.CancelFunc) {
				h.store.PutArtifactErr = map[string]error{engine.ArtifactConfig: errFakeStore}
			},
			wantIs:     []error{errFakeStore},
			wantStatus: engine.StatusFailed, wantPlan: engine.StatusPlanned, wantReplan: engine.StatusFailed,
		},
		{
			name: "cancelled during the re-plan",
			arrange: func(h *fakeHarness, _ *engine.PlanResult, cancel context.CancelFunc) {
				h.tf.PlanErr, h.tf.CancelOnPlan = fmt.Errorf("terraform plan: %w", context.Canceled), cancel
			},
			wantIs:     []error{context.Canceled},
			wantStatus: engine.StatusInterrupted, wantPlan: engine.StatusPlanned, wantReplan: engine.StatusInterrupted,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := fakeSetup(t)
			reviewedRes := h.planResult("a")
			reviewedRes.Footprint.Read = addrs("b")
			reviewed := h.planWith(reviewedRes)
			other := h.plan("b")
			h.tf.ApplyResult = &engine.ApplyResult{State: tfDoc(t, fakeLineage, 2, map[string]string{"a": "a0", "b": "b1"})}
			if _, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: other.ID, Actor: "bob"}); err != nil {
				t.Fatalf("Apply of the other plan: %v", err)
			}
			// What the re-plan's Terraform writes to head 2 (b is b1 there).
			h.tf.ApplyResult = &engine.ApplyResult{State: tfDoc(t, fakeLineage, 3, map[string]string{"a": "a1", "b": "b1"})}
			h.tf.Info = engine.PlanFileInfo{Lineage: fakeLineage, Serial: 1}
			rp := h.planResult("a") // against the head, serial 2
			rp.Footprint.Read = addrs("b")
			h.tf.PlanResult, h.tf.Calls = rp, nil
			ctx, cancel := context.WithCancel(h.ctx)
			defer cancel()
			tt.arrange(h, rp, cancel)

			out, err := h.eng.Apply(ctx, engine.ApplyInput{PlanRun: reviewed.ID, Actor: "alice"})
			if tt.wantIs == nil && err != nil {
				t.Fatalf("Apply: %v", err)
			}
			if tt.wantIs != nil && err == nil {
				t.Fatalf("Apply succeeded, want an error")
			}
			for _, w := range tt.wantIs {
				if !errors.Is(err, w) {
					t.Errorf("Apply error %v is not %v", err, w)
				}
			}
			var run engine.Run
			for _, r := range h.runs(engine.KindApply) {
				if r.PlanRun == reviewed.ID {
					run = r
				}
			}
			if run.Status != tt.wantStatus {
				t.Errorf("apply run status %s, want %s", run.Status, tt.wantStatus)
			}
			if p := h.run(reviewed.ID); p.Status != tt.wantPlan || p.ApplyRun != run.ID {
				t.Errorf("reviewed plan = %s, apply run %q; want %s, %s", p.Status, p.ApplyRun, tt.wantPlan, run.ID)
			}

			// The re-plan: one plan run re-checking the reviewed one, made
			// from the reviewed configuration against the head.
			var replans []engine.Run
			for _, r := range h.runs(engine.KindPlan) {
				if r.ReplanOf == reviewed.ID {
					replans = append(replans, r)
				}
			}
			if len(replans) != 1 || replans[0].Status != tt.wantReplan {
				t.Fatalf("re-plan runs %+v, want one %s", replans, tt.wantReplan)
			}
			replan := replans[0]
			if tt.wantReplanEnd != "" && (!replan.End.Is(tt.wantReplanEnd) || replan.End.Run != run.ID) {
				t.Errorf("re-plan's end = %+v, want %s naming apply run %s", replan.End, tt.wantReplanEnd, run.ID)
			}
			head2, serr := h.db.Snapshot(h.ctx, testState, 2)
			if serr != nil {
				t.Fatal(serr)
			}
			var plans []fakeCall
			for _, c := range h.tf.Calls {
				if c.Op == "plan" {
					plans = append(plans, c)
				}
			}
			if len(plans) != 1 || plans[0].Run != replan.ID || !bytes.Equal(plans[0].Config, reviewedRes.Config) || !bytes.Equal(plans[0].Snapshot, head2) {
				t.Errorf("Terraform plans %d; want one: the re-plan %s of the reviewed configuration against head 2", len(plans), replan.ID)
			}
			if tt.wantIntentChanged == nil {
				if !slices.Contains(kinds(h.markers(replan.ID)), engine.MarkerFailed) || replan.Envelope != nil {
					t.Errorf("re-plan run markers %v (envelope %v), want a failed marker", kinds(h.markers(replan.ID)), replan.Envelope != nil)
				}
				if ms := kindsOf(h.markers(run.ID), engine.MarkerReplanned); len(ms) != 0 {
					t.Errorf("replanned marker on the apply run, want none: %+v", ms)
				}
			} else {
				m := h.marker(run.ID, engine.MarkerReplanned)
				if m.Other != replan.ID || m.Serial != 2 || m.IntentChanged == nil || *m.IntentChanged != *tt.wantIntentChanged || m.Class != tt.wantClass {
					t.Errorf("replanned marker = other %s, serial %d, intent changed %v, class %q; want %s, 2, %v, %q",
						m.Other, m.Serial, m.IntentChanged, m.Class, replan.ID, *tt.wantIntentChanged, tt.wantClass)
				}
			}

			// Terraform applied the re-plan to the head it was made against
			// (serial 2), or nothing: never the reviewed plan to its own
			// snapshot.
			applies := 0
			for _, c := range h.tf.Calls {
				if c.Op == "apply" {
					applies++
					if !bytes.Equal(c.PlanFile, rp.PlanFile) || !bytes.Equal(c.Snapshot, head2) || bytes.Equal(c.PlanFile, reviewedRes.PlanFile) {
						t.Errorf("Terraform applied another plan or snapshot than the re-plan's own (head 2)")
					}
				}
			}
			if want := map[bool]int{true: 1, false: 0}[tt.wantTerraform]; applies != want {
				t.Errorf("Terraform applies %d, want %d", applies, want)
			}
			wantHead := map[string]string{"a": "a0", "b": "b1"}
			if tt.wantApplied {
				wantHead["a"] = "a1"
				if out == nil || out.Version == nil || out.Version.Serial != 3 {
					t.Fatalf("outcome %+v; want version 3", out)
				}
				p := out.Version.Provenance
				if p.PlanRun != reviewed.ID || p.PlanDigest != reviewed.Envelope.PlanDigest || p.SourceSerial != 1 ||
					p.AppliedPlanRun != replan.ID || p.AppliedPlanDigest != rp.Digest || p.AppliedSourceSerial != 2 || !p.Exact {
					t.Errorf("provenance %+v; want reviewed %s at 1, applied re-plan %s (%s) at 2, exact", p, reviewed.ID, replan.ID, rp.Digest)
				}
				if f, ok := fact(run.AllowedBecause, engine.FactReplanApplied); !ok || f.Run != replan.ID || f.HeadSerial != 2 || !slices.Equal(f.Serials, []int64{2}) {
					t.Errorf("allowed-because %+v, want a replan-applied fact for re-plan %s at head 2 over version 2", run.AllowedBecause, replan.ID)
				}
			} else if h.headSerial() != 2 {
				t.Errorf("head %d; want 2", h.headSerial())
			}
			if got := h.head(); !maps.Equal(got, wantHead) {
				t.Errorf("head = %v, want %v", got, wantHead)
			}
			if rs := h.reservations(); len(rs) != 0 {
				t.Errorf("%d reservations left, want none", len(rs))
			}
		})
	}
}

// TestFakeReplanSettled: a re-plan an apply claimed to apply in place of
// its reviewed plan is closed as that plan is, also when the apply's
// holder died and the lease sweep (the store's) handed back only the
// reviewed plan: the next view of the engine settles it (it is never left
// "applying" for a dead apply). The state the sweep leaves is written by
// hand onto an apply that went through.
func TestFakeReplanSettled(t *testing.T) {
	t.Parallel()
	lapsed := &engine.End{Cause: engine.CauseApplyLeaseExpired, Holder: engine.Holder{Host: "h", PID: 1}, Recoverable: true}
	tests := map[string]struct {
		plan       engine.RunStatus // the reviewed plan, as the sweep left it
		planEnd    *engine.End
		wantStatus engine.RunStatus // the re-plan's, settled
		wantCause  engine.Cause
	}{
		"reviewed plan failed by the sweep": {plan: engine.StatusFailed, planEnd: lapsed,
			wantStatus: engine.StatusFailed, wantCause: engine.CauseApplyLeaseExpired},
		"reviewed plan handed back open": {plan: engine.StatusPlanned,
			wantStatus: engine.StatusSuperseded, wantCause: engine.CauseApplyEnded},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := fakeSetup(t)
			reviewedRes := h.planResult("a")
			reviewedRes.Footprint.Read = addrs("b")
			reviewed := h.planWith(reviewedRes)
			other := h.plan("b")
			h.tf.ApplyResult = &engine.ApplyResult{State: tfDoc(t, fakeLineage, 2, map[string]string{"a": "a0", "b": "b1"})}
			if _, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: other.ID, Actor: "bob"}); err != nil {
				t.Fatalf("Apply of the other plan: %v", err)
			}
			h.tf.Info = engine.PlanFileInfo{Lineage: fakeLineage, Serial: 1}
			rp := h.planResult("a")
			rp.Footprint.Read = addrs("b")
			h.tf.PlanResult = rp
			h.tf.ApplyResult = &engine.ApplyResult{State: tfDoc(t, fakeLineage, 3, map[string]string{"a": "a1", "b": "b1"})}
			out, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: reviewed.ID, Actor: "alice"})
			if err != nil {
				t.Fatalf("Apply: %v", err)
			}
			replan := h.marker(out.Run.ID, engine.MarkerReplanned).Other
			// As a holder killed mid-apply leaves it once the sweep ran:
			// the apply lease-expired, its reviewed plan handed back, the
			// re-plan still claimed.
			set := func(id string, from engine.RunStatus, s engine.RunStatus, end *engine.End) {
				t.Helper()
				if _, err := h.db.UpdateRun(h.ctx, id, []engine.RunStatus{from}, func(r *engine.Run) error {
					r.Status, r.End = s, end
					if id == out.Run.ID {
						r.CommittedSerial = 0
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			set(out.Run.ID, engine.StatusApplied, engine.StatusLeaseExpired, &engine.End{Cause: engine.CauseLeaseExpired})
			set(reviewed.ID, engine.StatusApplied, tt.plan, tt.planEnd)
			set(replan, engine.StatusApplied, engine.StatusApplying, nil)

			if _, err := h.eng.RunStory(h.ctx, reviewed.ID); err != nil {
				t.Fatalf("RunStory: %v", err)
			}
			got := h.run(replan)
			if got.Status != tt.wantStatus || !got.End.Is(tt.wantCause) {
				t.Errorf("re-plan after the sweep = %s, end %+v; want %s (%s)", got.Status, got.End, tt.wantStatus, tt.wantCause)
			}
			if tt.wantCause == engine.CauseApplyEnded && (got.End.Run != out.Run.ID || !got.End.Then.Is(engine.CauseLeaseExpired)) {
				t.Errorf("re-plan's end = %+v; want it to name apply run %s and its lease-expired end", got.End, out.Run.ID)
			}
		})
	}
}
