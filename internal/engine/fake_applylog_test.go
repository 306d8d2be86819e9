package engine_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// TestFakeApplyLog: what Terraform said it did (ApplyResult.Log) is kept as
// the apply run's artifact however the apply ends — committed, failed
// without writing anything (the plan open again), killed — and every story
// that tells that apply carries it: the apply's, and its plan's (ADR 0047).
func TestFakeApplyLog(t *testing.T) {
	t.Parallel()
	const base = 1
	log := &engine.ApplyLog{
		Resources: []engine.ResourceApply{
			{Address: "terraform_data.a", Action: "update", Outcome: engine.ResourceApplied, Elapsed: 1500, IDKey: "id", IDValue: "a-id"},
			{Address: "terraform_data.b", Action: "update", Outcome: engine.ResourceErrored, Elapsed: 2500},
		},
		Diagnostics: []engine.Diagnostic{{Severity: "error", Summary: "local-exec provisioner error", Detail: "exit status 3",
			Address: "terraform_data.b", File: "main.tf", Line: 7, Column: 28, EndLine: 7, EndColumn: 29, Context: `resource "terraform_data" "b"`}},
	}
	tests := map[string]func(h *fakeHarness) (planStatus engine.RunStatus){
		"committed": func(h *fakeHarness) engine.RunStatus {
			h.tf.ApplyResult = &engine.ApplyResult{State: tfDoc(h.t, fakeLineage, base+1, map[string]string{"a": "a1", "b": "b1"}), Changed: 2, Log: log}
			return engine.StatusApplied
		},
		"failed, nothing written": func(h *fakeHarness) engine.RunStatus {
			snap, err := h.db.Snapshot(h.ctx, testState, base)
			if err != nil {
				h.t.Fatal(err)
			}
			h.tf.ApplyResult, h.tf.ApplyErr = &engine.ApplyResult{State: snap, Log: log}, errFakeTerraform
			return engine.StatusPlanned
		},
		"killed": func(h *fakeHarness) engine.RunStatus {
			written := tfDoc(h.t, fakeLineage, base+1, map[string]string{"a": "a1", "b": "b0"})
			h.tf.ApplyResult, h.tf.ApplyErr = &engine.ApplyResult{State: written, Changed: 1, Log: log}, killedApply{cause: errors.New("exit")}
			return engine.StatusFailed
		},
	}
	for name, arrange := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := fakeSetup(t)
			plan := h.plan("a", "b")
			wantPlan := arrange(h)
			out, err := h.eng.Apply(context.Background(), engine.ApplyInput{PlanRun: plan.ID, State: testState, Actor: "alice"})
			id := runErrorID(err)
			if out != nil {
				id = out.Run.ID
			}
			if id == "" {
				t.Fatalf("Apply: %v; no apply run", err)
			}
			if p := h.run(plan.ID); p.Status != wantPlan {
				t.Errorf("plan %s, want %s", p.Status, wantPlan)
			}
			got, err := h.eng.ApplyLog(h.ctx, id)
			if err != nil || !reflect.DeepEqual(got, log) {
				t.Errorf("ApplyLog = %+v, %v; want %+v", got, err, log)
			}
			for _, sid := range []string{id, plan.ID} {
				s, err := h.eng.RunStory(h.ctx, sid)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(s.ApplyLog, log) {
					t.Errorf("RunStory(%s).ApplyLog = %+v, want the apply's log", sid, s.ApplyLog)
				}
			}
			if _, err := h.eng.ApplyLog(h.ctx, plan.ID); !errors.Is(err, engine.ErrNotFound) {
				t.Errorf("ApplyLog of the plan: %v, want ErrNotFound", err)
			}
		})
	}
}
