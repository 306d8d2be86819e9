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

// TestFakeReplan: the re-plan of a read-changed apply (DESIGN.md apply step
// 3), with Terraform's re-plan answers the real binary gives only with
// elaborate configurations, or never (a failure, a failing store). The
// reviewed plan writes terraform_data.a and reads .b; another plan then
// commits b as version 2, so applying the reviewed plan re-plans.
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
		wantApplied       bool // Terraform applied and version 3 was committed
	}{
		{
			name:       "intent unchanged: the reviewed plan applies to its own snapshot",
			arrange:    func(*fakeHarness, *engine.PlanResult, context.CancelFunc) {},
			wantStatus: engine.StatusApplied, wantPlan: engine.StatusApplied, wantReplan: engine.StatusSuperseded,
			wantIntentChanged: new(false), wantApplied: true,
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
			// What the reviewed plan's Terraform writes to its own snapshot
			// (serial 1: b is still b0 there).
			h.tf.ApplyResult = &engine.ApplyResult{State: tfDoc(t, fakeLineage, 2, map[string]string{"a": "a1", "b": "b0"})}
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

			// Terraform applied the reviewed plan to its own snapshot, or
			// not at all.
			snap1, serr := h.db.Snapshot(h.ctx, testState, 1)
			if serr != nil {
				t.Fatal(serr)
			}
			applies := 0
			for _, c := range h.tf.Calls {
				if c.Op == "apply" {
					applies++
					if !bytes.Equal(c.PlanFile, reviewedRes.PlanFile) || !bytes.Equal(c.Snapshot, snap1) {
						t.Errorf("Terraform applied another plan or snapshot than the reviewed plan's own (serial 1)")
					}
				}
			}
			wantHead := map[string]string{"a": "a0", "b": "b1"}
			if tt.wantApplied {
				wantHead["a"] = "a1"
				if applies != 1 || out == nil || out.Version == nil || out.Version.Serial != 3 || out.Version.Provenance.PlanRun != reviewed.ID {
					t.Errorf("Terraform applies %d, outcome %+v; want 1 and version 3 of the reviewed plan", applies, out)
				}
				if f, ok := fact(run.AllowedBecause, engine.FactReplanUnchanged); !ok || f.Run != replan.ID || f.HeadSerial != 2 || !slices.Equal(f.Serials, []int64{2}) {
					t.Errorf("allowed-because %+v, want a replan-intent-unchanged fact for re-plan %s at head 2 over version 2", run.AllowedBecause, replan.ID)
				}
			} else if applies != 0 || h.headSerial() != 2 {
				t.Errorf("Terraform applies %d, head %d; want none, 2", applies, h.headSerial())
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
