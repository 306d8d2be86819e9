package engine_test

import (
	"context"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// TestFakeProviderNotes: what the Terraform implementation says of how a
// run's providers were installed (PlanResult.Notes, ApplyResult.Notes: a
// configuration without a lock file, a cached package moved aside; ADR
// 0061) is a "providers" marker each on the run — the plan's, and the
// apply's also when the apply failed without writing anything.
func TestFakeProviderNotes(t *testing.T) {
	t.Parallel()
	const planNote, applyNote = "no lock file: not cached", "moved aside to .tampered/x and reinstalled"
	providerReasons := func(ms []engine.Marker) []string {
		var out []string
		for _, m := range ms {
			if m.Kind == engine.MarkerProviders {
				out = append(out, m.Reason)
			}
		}
		return out
	}
	for name, failed := range map[string]bool{"committed": false, "failed, nothing written": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := fakeSetup(t)
			res := h.planResult("a")
			res.Notes = []string{planNote}
			plan := h.planWith(res)
			if got := providerReasons(h.markers(plan.ID)); len(got) != 1 || got[0] != planNote {
				t.Errorf("plan's providers markers %q, want [%q]", got, planNote)
			}
			if failed {
				snap, err := h.db.Snapshot(h.ctx, testState, 1)
				if err != nil {
					t.Fatal(err)
				}
				h.tf.ApplyResult, h.tf.ApplyErr = &engine.ApplyResult{State: snap, Notes: []string{applyNote}}, errFakeTerraform
			} else {
				h.tf.ApplyResult = &engine.ApplyResult{State: tfDoc(t, fakeLineage, 2, map[string]string{"a": "a1"}), Changed: 1, Notes: []string{applyNote}}
			}
			out, err := h.eng.Apply(context.Background(), engine.ApplyInput{PlanRun: plan.ID, State: testState, Actor: "alice"})
			id := runErrorID(err)
			if out != nil {
				id = out.Run.ID
			}
			if id == "" {
				t.Fatalf("Apply: %v; no apply run", err)
			}
			if got := providerReasons(h.markers(id)); len(got) != 1 || got[0] != applyNote {
				t.Errorf("apply's providers markers %q, want [%q]", got, applyNote)
			}
			s, err := h.eng.RunStory(h.ctx, plan.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := providerReasons(s.Markers); len(got) != 2 {
				t.Errorf("the plan's story has providers markers %q, want the plan's and the apply's", got)
			}
		})
	}
}
