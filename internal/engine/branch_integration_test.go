package engine_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// TestRecordBranch (ADR 0046 decision 7): a plan that sets back version
// 2's change (PR #21's) stores what klbot learnt of its branch: refused
// with ErrInvalid, naming the problem, for an empty base or head, a
// negative count or a version the plan does not undo (the envelope then
// unchanged); stored otherwise, where it makes the revert deliberate
// (the branch up to date, the base holding version 2) or leaves it in
// doubt (behind); refused once the plan is no longer open.
func TestRecordBranch(t *testing.T) {
	h := setup(t)
	c := config{"a": {Value: "a0"}, "b": {Value: "b0"}}
	h.base(c)
	pr21 := func(in *engine.PlanInput) {
		in.PR = &engine.PullRequest{Repo: "acme/infra", Number: 21}
		in.Actor = "bob"
	}
	h.apply(h.plan(c.with(map[string]string{"a": "a1"}), pr21).ID)
	plan := h.plan(c.with(map[string]string{"b": "b1"}))
	if rs := plan.Envelope.Reverts; len(rs) != 1 || rs[0].Serial != 2 || rs[0].Address != "terraform_data.a" {
		t.Fatalf("reverts %+v, want version 2's change to terraform_data.a", rs)
	}
	rv := plan.Envelope.Reverts[0]
	ok := engine.BranchStatus{Base: "main", BaseSHA: "b0", HeadSHA: "h1", AheadBy: 1, Versions: []engine.VersionInBase{{Serial: 2, Holds: true}}}
	for name, tc := range map[string]struct {
		b    engine.BranchStatus
		want string
	}{
		"no base":         {engine.BranchStatus{HeadSHA: "h1"}, "the base branch is required"},
		"no head":         {engine.BranchStatus{Base: "main"}, "the head commit is required"},
		"negative":        {engine.BranchStatus{Base: "main", HeadSHA: "h1", BehindBy: -1}, "counts cannot be negative"},
		"another version": {engine.BranchStatus{Base: "main", HeadSHA: "h1", Versions: []engine.VersionInBase{{Serial: 1, Holds: true}}}, "version 1 is not one the plan would undo"},
	} {
		_, err := h.eng.RecordBranch(h.ctx, plan.ID, tc.b)
		if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrInvalid saying %q", name, err, tc.want)
		}
	}
	if got := h.run(plan.ID); got.Envelope.Branch != nil {
		t.Fatalf("a refused branch was stored: %+v", got.Envelope.Branch)
	}

	behind := ok
	behind.BehindBy = 2
	got, err := h.eng.RecordBranch(h.ctx, plan.ID, behind)
	if err != nil {
		t.Fatal(err)
	}
	if got.Envelope.Deliberate(rv) || len(got.Envelope.RevertsInDoubt()) != 1 {
		t.Errorf("2 commits behind: deliberate %v, in doubt %d; want in doubt", got.Envelope.Deliberate(rv), len(got.Envelope.RevertsInDoubt()))
	}
	if _, err := h.eng.RecordBranch(h.ctx, plan.ID, ok); err != nil {
		t.Fatal(err)
	}
	stored := h.run(plan.ID)
	if b := stored.Envelope.Branch; b == nil || b.Base != "main" || b.BehindBy != 0 || len(b.Versions) != 1 || !stored.Envelope.Deliberate(rv) || len(stored.Envelope.RevertsInDoubt()) != 0 {
		t.Errorf("stored branch %+v: want up to date with main, holding version 2, the revert deliberate", b)
	}

	if err := h.eng.Supersede(h.ctx, plan.ID, engine.SupersededByNewerPlan, nil, ""); err != nil {
		t.Fatal(err)
	}
	var se *engine.StatusError
	if _, err := h.eng.RecordBranch(h.ctx, plan.ID, ok); !errors.As(err, &se) {
		t.Errorf("recording the branch of a superseded plan: err = %v, want a *StatusError", err)
	}
}
