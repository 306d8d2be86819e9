package engine_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/plandiff"
)

// TestFakePlanDiff: a plan's diff (ADR 0044) is stored with its other
// artifacts and read back by Engine.PlanDiff; a plan without one, an apply
// run and an unknown run are ErrNotFound; a diff that cannot be stored
// fails the plan like any artifact.
func TestFakePlanDiff(t *testing.T) {
	t.Parallel()
	h := fakeSetup(t)
	key := "input"
	diff := &plandiff.Diff{Format: plandiff.Format, Outputs: []plandiff.Node{}, Resources: []plandiff.Resource{{
		Address: "terraform_data.a", Mode: "managed", Type: "terraform_data", Name: "a", Action: plandiff.Update,
		Changes: []plandiff.Node{{Key: &key, Action: plandiff.Update, Before: &plandiff.Value{JSON: []byte(`"a0"`)}, After: &plandiff.Value{JSON: []byte(`"a1"`)}}},
	}}}
	res := h.planResult("a")
	res.Diff = diff
	h.tf.PlanResult = res
	out, err := h.eng.Plan(h.ctx, engine.PlanInput{State: testState, Dir: t.TempDir(), Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if out.Diff != diff {
		t.Errorf("PlanOutcome.Diff = %+v; want the plan's", out.Diff)
	}
	got, err := h.eng.PlanDiff(h.ctx, out.Run.ID)
	if err != nil || !reflect.DeepEqual(got, diff) {
		t.Errorf("PlanDiff = %+v, %v; want %+v", got, err, diff)
	}

	// An earlier kl's plan has none.
	old := h.plan("a")
	if _, err := h.eng.PlanDiff(h.ctx, old.ID); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("PlanDiff of a plan without a diff: %v; want ErrNotFound", err)
	}
	if _, err := h.eng.PlanDiff(h.ctx, "01NOSUCHRUN0000000000000000"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("PlanDiff of an unknown run: %v; want ErrNotFound", err)
	}

	res = h.planResult("a")
	res.Diff = diff
	h.tf.PlanResult = res
	h.store.PutArtifactErr = map[string]error{engine.ArtifactDiff: errFakeStore}
	if _, err := h.eng.Plan(h.ctx, engine.PlanInput{State: testState, Dir: t.TempDir(), Actor: "alice"}); !errors.Is(err, errFakeStore) {
		t.Errorf("Plan with the diff's store failing: %v; want %v", err, errFakeStore)
	}
}
