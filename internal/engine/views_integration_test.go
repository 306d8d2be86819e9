package engine_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
)

// TestViews: the operator views of ADR D6 answer from stored facts —
// overlapping open plans, a run's story, history newest first, why a run
// was allowed, refused or is pending, and what is open now.
func TestViews(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"a": {Value: "a0"}, "b": {Value: "b0"}, "c": {Value: "c0"}}
	base := h.base(cfg)

	// Two overlapping open plans: both write b.
	p1 := h.plan(cfg.with(map[string]string{"a": "a1", "b": "b1"}))
	out2, err := h.eng.Plan(h.ctx, engine.PlanInput{State: testState, Dir: h.write(cfg.with(map[string]string{"b": "b2", "c": "c2"})), Actor: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	p2 := out2.Run
	if len(out2.Overlaps) != 1 || out2.Overlaps[0].Run != p1.ID || !sameSet(out2.Overlaps[0].WriteWrite, addrs("b")) || out2.Overlaps[0].Actor != "alice" {
		t.Errorf("plan outcome overlaps = %+v, want %s write/write on b", out2.Overlaps, p1.ID)
	}
	ov, err := h.eng.Overlaps(h.ctx, p1)
	if err != nil || len(ov) != 1 || ov[0].Run != p2.ID || !sameSet(ov[0].WriteWrite, addrs("b")) {
		t.Errorf("Overlaps(p1) = %+v, %v; want %s on b", ov, err, p2.ID)
	}

	// Pending: a plan not applied yet, with what an apply would face.
	why, err := h.eng.Why(h.ctx, p1.ID)
	if err != nil || why.Verdict != engine.VerdictPending || why.SincePlan == nil || len(why.Overlaps) != 1 {
		t.Errorf("Why(pending plan) = %+v, %v", why, err)
	}
	st, err := h.eng.Status(h.ctx, testState)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Active) != 0 || len(st.OpenPlans) != 2 {
		t.Errorf("Status = %d active, open plans %v; want none active, 2 open", len(st.Active), st.OpenPlans)
	}

	// Allowed: the story of an applied run.
	a1 := h.apply(p1.ID)
	story, err := h.eng.RunStory(h.ctx, a1.Run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if story.Plan == nil || story.Plan.ID != p1.ID || story.Version == nil || story.Version.Serial != a1.Version.Serial || len(story.Replans) != 0 {
		t.Errorf("story = plan %v, version %v, re-plans %v", story.Plan, story.Version, story.Replans)
	}
	var fromPlan, fromApply int
	for i, m := range story.Markers {
		if i > 0 && m.At.Before(story.Markers[i-1].At) {
			t.Errorf("story markers out of time order at %d: %v", i, kinds(story.Markers))
		}
		switch m.Run {
		case p1.ID:
			fromPlan++
		case a1.Run.ID:
			fromApply++
		default:
			t.Errorf("story marker %s of run %q", m.Kind, m.Run)
		}
	}
	if fromPlan == 0 || fromApply == 0 || story.Markers[0].Kind != engine.MarkerPlanned || story.Markers[len(story.Markers)-1].Kind != engine.MarkerReleased {
		t.Errorf("story markers = %v (%d of the plan, %d of the apply)", kinds(story.Markers), fromPlan, fromApply)
	}
	if ps, err := h.eng.RunStory(h.ctx, p1.ID); err != nil || ps.Apply == nil || ps.Apply.ID != a1.Run.ID || len(ps.Markers) != len(story.Markers) {
		t.Errorf("story of the plan = %+v, %v; want the same story from the plan's side", ps, err)
	}
	why, err = h.eng.Why(h.ctx, a1.Run.ID)
	if err != nil || why.Verdict != engine.VerdictAllowed || why.Reserved == nil || len(why.Facts) == 0 {
		t.Errorf("Why(applied) = %+v, %v", why, err)
	}

	// Refused: p2 is stale now; Why from the plan's side names the decisive marker.
	if _, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: p2.ID, Actor: "bob"}); !errors.Is(err, engine.ErrStalePlan) {
		t.Fatalf("Apply p2 = %v, want stale", err)
	}
	why, err = h.eng.Why(h.ctx, p2.ID)
	if err != nil || why.Verdict != engine.VerdictRefused || why.Apply == nil || len(why.Decisive) == 0 || why.Decisive[0].Kind != engine.MarkerStalenessFailed ||
		!why.Apply.End.Is(engine.CauseRefusedStale) || len(why.Apply.End.Stale) != 1 || why.Apply.End.Stale[0].Run != a1.Run.ID {
		t.Errorf("Why(stale plan) = %+v, %v; want refused, its apply's end stale by run %s", why, err, a1.Run.ID)
	}
	sp, err := h.eng.SincePlan(h.ctx, p2.ID)
	if err != nil || len(sp.Entries) != 1 || sp.Entries[0].Class != engine.ClassWriteChanged || sp.Entries[0].Run != a1.Run.ID {
		t.Errorf("SincePlan(p2) = %+v, %v", sp, err)
	}

	// History: newest first, each version with its producing run.
	hist, err := h.eng.History(h.ctx, testState, engine.HistoryQuery{})
	if err != nil {
		t.Fatal(err)
	}
	wantRuns := []string{a1.Run.ID, base.Run.ID, ""}
	if len(hist) != len(wantRuns) {
		t.Fatalf("history has %d entries, want %d", len(hist), len(wantRuns))
	}
	for i, e := range hist {
		got := ""
		if e.Run != nil {
			got = e.Run.ID
		}
		if got != wantRuns[i] || e.Version.Serial != a1.Version.Serial-int64(i) || e.Replan != nil {
			t.Errorf("history[%d] = version %d by run %q, want version %d by %q", i, e.Version.Serial, got, a1.Version.Serial-int64(i), wantRuns[i])
		}
	}
	if page, err := h.eng.History(h.ctx, testState, engine.HistoryQuery{Before: a1.Version.Serial, Limit: 1}); err != nil || len(page) != 1 || page[0].Version.Serial != base.Version.Serial {
		t.Errorf("History page before %d = %+v, %v", a1.Version.Serial, page, err)
	}

	// Status: nothing active, no open plans (p1 applied, p2 stale).
	st, err = h.eng.Status(h.ctx, testState)
	if err != nil || len(st.Active) != 0 || len(st.OpenPlans) != 0 {
		t.Errorf("Status = %+v, %v", st, err)
	}
	if _, err := h.eng.RunStory(h.ctx, "01NOSUCHRUN0000000000000000"); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("RunStory(unknown) = %v, want ErrNotFound", err)
	}
}

// TestDiscardedPlanRefusal: a plan discarded with a reason (`kl run discard
// --reason obsolete`, Engine.Discard) keeps who and why on the run and in
// its marker, and applying it is refused as discarded — by whom,
// when, why — not as "superseded".
func TestDiscardedPlanRefusal(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"a": {Value: "a0"}}
	h.base(cfg)
	p := h.plan(cfg.with(map[string]string{"a": "a1"}))
	if err := h.eng.Discard(h.ctx, p.ID, "tester", "obsolete"); err != nil {
		t.Fatalf("Discard: %v", err)
	}
	if m := h.marker(p.ID, engine.MarkerFailed); !m.End.Is(engine.CauseDiscarded) || m.End.By != "tester" || m.End.Why != "obsolete" ||
		report.EndText(p.ID, m.End) != "discarded by tester: obsolete" {
		t.Errorf("failed marker's end = %+v (%q); want discarded by tester: obsolete", m.End, report.EndText(p.ID, m.End))
	}
	r := h.run(p.ID)
	if !r.Discarded() || !r.End.Is(engine.CauseDiscarded) || r.End.By != "tester" || r.End.Why != "obsolete" || r.FinishedAt == nil {
		t.Errorf("plan = %s, end %+v, finished %v; want discarded by tester (obsolete), with its time", r.Status, r.End, r.FinishedAt)
	}
	_, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: p.ID, Actor: "alice"})
	var se *engine.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("Apply of the discarded plan = %v; want a *StatusError", err)
	}
	msg := err.Error()
	for _, want := range []string{"was discarded by tester at " + r.FinishedAt.UTC().Format(time.RFC3339), "(obsolete)", "cannot be applied"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Apply error = %q; want it to say %q", msg, want)
		}
	}
	if strings.Contains(msg, "superseded") {
		t.Errorf("Apply error = %q; a discard is not 'superseded'", msg)
	}
	// kl why: closed (it can never be applied), not pending, and no
	// overlaps: it is no longer an open plan.
	y, err := h.eng.Why(h.ctx, p.ID)
	if err != nil {
		t.Fatalf("Why: %v", err)
	}
	if y.Verdict != engine.VerdictClosed || !y.Run.Discarded() || report.EndText(y.Run.ID, y.Run.End) != "discarded by tester: obsolete" || len(y.Overlaps) != 0 {
		t.Errorf("Why = %s, end %+v (%q), %d overlaps; want closed, who and why, no overlaps", y.Verdict, y.Run.End, report.EndText(y.Run.ID, y.Run.End), len(y.Overlaps))
	}
}

// TestOverlapsLeaveOutStalePlans: an open plan a later version already
// made stale (its planned target changed) can never commit, so a new plan
// does not list it as an overlap (as kl status leaves it out); one still
// applicable is listed. Found by a fresh-eyes test: `kl plan` said three
// stale plans "share part of this footprint" and would re-plan it.
func TestOverlapsLeaveOutStalePlans(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"x": {Value: "x0"}, "y": {Value: "y0"}}
	h.base(cfg)
	a := h.plan(cfg.with(map[string]string{"x": "x1"}))
	stale := h.plan(cfg.with(map[string]string{"x": "x2"}), actor("bob"))
	open := h.plan(cfg.with(map[string]string{"y": "y1"}), actor("carol"))
	h.apply(a.ID) // changes x: stale's planned target
	c := h.plan(cfg.with(map[string]string{"x": "x3", "y": "y3"}), actor("dave"))
	ovs, err := h.eng.Overlaps(h.ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range ovs {
		got = append(got, o.Run)
	}
	if len(got) != 1 || got[0] != open.ID {
		t.Fatalf("overlaps of the new plan = %v; want only the applicable plan %s, not the stale %s", got, open.ID, stale.ID)
	}
}
