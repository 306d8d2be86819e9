package engine_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// Read-changed plans (ADR D3, D4; docs/design.md apply step 3). Plan C changes
// the reader r, whose input reads x; run D then changes x without a
// configuration change of its own, so C's configuration still agrees with
// the head on x — except in the "behind the head" case, where D changes x's
// value and C's configuration would revert it. engine.CompareReplan's
// outcomes: no difference (apply the re-plan, made against the head: issue
// 10 §2), a difference on the write set (intent changed: review the
// re-plan), a change to the read set (the configuration is behind the head:
// refuse). A change outside the footprint, and one needing reservations
// beyond those held, are in fake_replan_test.go and internal/cli's
// replan_test.go.

// replans returns the re-plan runs of plan id.
func (h *harness) replans(id string) []engine.Run {
	h.t.Helper()
	rs, err := h.store.ListRuns(h.ctx, engine.RunQuery{State: testState, Kind: engine.KindPlan, Limit: 1000})
	if err != nil {
		h.t.Fatalf("ListRuns: %v", err)
	}
	var out []engine.Run
	for _, r := range rs {
		if r.ReplanOf == id {
			out = append(out, r)
		}
	}
	return out
}

// readChanged sets up the scenario: base {x, r reading x.<attr>}, plan C of
// r = r1, then D (planned with dOpts from dCfg) applied. It returns C and
// D's apply outcome.
func readChanged(h *harness, attr string, dCfg func(config) config, dOpts ...func(*engine.PlanInput)) (config, engine.Run, *engine.ApplyOutcome) {
	h.t.Helper()
	cfg := config{"x": {Value: "x0"}, "r": {Value: "r0", Ref: "x." + attr}}
	h.base(cfg)
	c := h.plan(cfg.with(map[string]string{"r": "r1"}))
	if fp := c.Envelope.Footprint; !sameSet(fp.Write, addrs("r")) || !sameSet(fp.Read, addrs("x")) {
		h.t.Fatalf("C's footprint = write %v, read %v; want write r, read x", fp.Write, fp.Read)
	}
	d := h.plan(dCfg(cfg), append(dOpts, actor("dave"))...)
	if !sameSet(d.Envelope.Footprint.Write, addrs("x")) {
		h.t.Fatalf("D's write set = %v, want x only", d.Envelope.Footprint.Write)
	}
	return cfg, c, h.apply(d.ID)
}

func same(c config) config { return c }

func TestReadChangedIntentUnchanged(t *testing.T) {
	t.Parallel()
	h := setup(t)
	// D replaces x: a new id, the same input, which is all r reads.
	_, c, d := readChanged(h, "input", same, replace("terraform_data.x"))
	afterD, _ := h.head()

	// What `kl status` says of the apply run while it re-plans (the first
	// Terraform phase of this apply is the re-plan's init).
	var during []engine.RunStatus
	progress := func(p engine.Progress) {
		if p.Phase != "init" {
			return
		}
		for _, r := range h.applyRuns(c.ID) {
			during = append(during, r.Status)
		}
	}
	out, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: c.ID, Actor: "alice", Progress: progress})
	if err != nil {
		t.Fatalf("Apply C: %v", err)
	}
	run := h.run(out.Run.ID)
	// It holds its reservations and waits on nobody: applying, not waiting.
	if len(during) == 0 || during[0] != engine.StatusApplying {
		t.Errorf("apply run status during the re-plan = %v, want applying", during)
	}
	m := h.marker(run.ID, engine.MarkerReplanned)
	if m.IntentChanged == nil || *m.IntentChanged || m.Other == "" || m.Serial != d.Version.Serial {
		t.Fatalf("replanned marker = %+v, want intent unchanged against head %d", m, d.Version.Serial)
	}
	f, ok := fact(run.AllowedBecause, engine.FactReplanApplied)
	if !ok || f.Run != m.Other || !slices.Equal(f.Serials, []int64{d.Version.Serial}) || f.HeadSerial != d.Version.Serial {
		t.Errorf("allowed-because = %+v, want replan-applied by %s over version %d", run.AllowedBecause, m.Other, d.Version.Serial)
	}
	// The RE-PLAN, made against D's head, is what Terraform applied; the
	// provenance keeps both plans' digests.
	rp := h.run(m.Other)
	p := out.Version.Provenance
	if run.PlanRun != c.ID || p.PlanRun != c.ID || p.PlanDigest != c.Envelope.PlanDigest || p.SourceSerial != c.Envelope.SourceSerial {
		t.Errorf("provenance = reviewed plan %s (%s) at %d; want %s (%s) at %d", p.PlanRun, p.PlanDigest, p.SourceSerial, c.ID, c.Envelope.PlanDigest, c.Envelope.SourceSerial)
	}
	if p.AppliedPlanRun != rp.ID || p.AppliedPlanDigest != rp.Envelope.PlanDigest || p.AppliedSourceSerial != d.Version.Serial || p.AppliedPlanDigest == p.PlanDigest {
		t.Errorf("provenance = applied plan %s (%s) at %d; want the re-plan %s (%s) at head %d", p.AppliedPlanRun, p.AppliedPlanDigest, p.AppliedSourceSerial, rp.ID, rp.Envelope.PlanDigest, d.Version.Serial)
	}
	if !p.Exact || !sameSet(out.Version.Changed, addrs("r")) {
		t.Errorf("provenance = %+v, changed %v; want exact, r", p, out.Version.Changed)
	}
	if st := h.marker(run.ID, engine.MarkerApplyStarted); st.Serial != d.Version.Serial || st.Other != rp.ID {
		t.Errorf("apply-started marker = %+v; want the re-plan %s on the snapshot of serial %d", st, rp.ID, d.Version.Serial)
	}
	if rp.Status != engine.StatusApplied || rp.ReplanOf != c.ID || rp.ApplyRun != run.ID || !rp.End.Is(engine.CauseReplanApplied) ||
		rp.End.Run != run.ID || rp.End.Plan != c.ID || rp.End.Serial != out.Version.Serial {
		t.Errorf("re-plan = status %s, replan of %q, apply %s, end %+v; want applied by %s in place of %s, version %d", rp.Status, rp.ReplanOf, rp.ApplyRun, rp.End, run.ID, c.ID, out.Version.Serial)
	}
	if pr := h.run(c.ID); pr.Status != engine.StatusApplied || pr.ApplyRun != run.ID {
		t.Errorf("reviewed plan = status %s, apply %s; want applied by %s", pr.Status, pr.ApplyRun, run.ID)
	}
	if sp := run.SincePlan; sp == nil || len(sp.Entries) != 1 || sp.Entries[0].Class != engine.ClassReadChanged || !sameSet(sp.Entries[0].Addresses, addrs("x")) {
		t.Errorf("since-plan = %+v, want version %d read-changed on x", run.SincePlan, d.Version.Serial)
	}
	story, err := h.eng.RunStory(h.ctx, run.ID)
	if err != nil || len(story.Replans) != 1 || story.Replans[0].ID != rp.ID {
		t.Errorf("RunStory = %+v, %v; want the re-plan %s listed", story, err, rp.ID)
	} else if !slices.ContainsFunc(story.Markers, func(m engine.Marker) bool { return m.Run == rp.ID && m.Kind == engine.MarkerPlanned }) {
		t.Errorf("story markers lack the re-plan's: %v", kinds(story.Markers))
	}
	hs, _ := h.head()
	if hs.Resources["x"].ID != afterD.Resources["x"].ID || hs.Resources["x"].ID == "" {
		t.Errorf("x's id = %q, want D's replacement %q kept", hs.Resources["x"].ID, afterD.Resources["x"].ID)
	}
	if got := hs.Resources["r"].Input; got != "r1:x0" {
		t.Errorf("r's input = %q, want r1:x0", got)
	}

	// History: newest first, each version with its run; the re-plan line.
	hist, err := h.eng.History(h.ctx, testState, engine.HistoryQuery{})
	if err != nil {
		t.Fatalf("History: %v", err)
	}
	if len(hist) != 4 {
		t.Fatalf("history has %d entries, want 4 (init, base, D, C)", len(hist))
	}
	for i, e := range hist {
		if want := out.Version.Serial - int64(i); e.Version.Serial != want {
			t.Errorf("history[%d] is version %d, want %d (newest first)", i, e.Version.Serial, want)
		}
		if (e.Run == nil) != (e.Version.Provenance.Mode == engine.CommitInit) {
			t.Errorf("history[%d] (version %d, %s): run %v", i, e.Version.Serial, e.Version.Provenance.Mode, e.Run)
		}
	}
	if e := hist[0]; e.Run == nil || e.Run.ID != run.ID || e.Replan == nil || e.Replan.Other != rp.ID {
		t.Errorf("history of C's version = run %v, replan %+v", e.Run, e.Replan)
	}
	if e := hist[1]; e.Run == nil || e.Run.ID != d.Run.ID || e.Replan != nil {
		t.Errorf("history of D's version = run %v, replan %+v", e.Run, e.Replan)
	}
}

func TestReadChangedIntentChanged(t *testing.T) {
	t.Parallel()
	h := setup(t)
	// r reads x's id; D replaces x alone (-target: r is not re-planned), so
	// C's re-plan gives r another input: the reviewed intent changed.
	_, c, d := readChanged(h, "id", same, replace("terraform_data.x"), targets("terraform_data.x"))
	head := h.headSerial()

	_, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: c.ID, Actor: "alice"})
	if !errors.Is(err, engine.ErrIntentChanged) {
		t.Fatalf("Apply C = %v, want ErrIntentChanged", err)
	}
	run := h.run(runErrorID(err))
	if run.Status != engine.StatusRefused || !run.End.Is(engine.CauseIntentChanged) || run.CommittedSerial != 0 {
		t.Errorf("apply run = status %s, end %+v, committed %d; want refused: intent changed", run.Status, run.End, run.CommittedSerial)
	}
	m := h.marker(run.ID, engine.MarkerReplanned)
	if m.IntentChanged == nil || !*m.IntentChanged || !sameSet(m.Addresses, addrs("r")) || m.Serial != d.Version.Serial {
		t.Errorf("replanned marker = %+v, want intent changed on r", m)
	}
	if end := run.End; end != nil && (end.Run != m.Other || end.Plan != c.ID || end.Serial != d.Version.Serial || end.Replan == nil ||
		!slices.Equal(end.Replan.Addresses, []string{"terraform_data.r"}) || !slices.Equal(end.Replan.Versions, []int64{d.Version.Serial})) {
		t.Errorf("apply run's end = %+v (re-plan %+v); want re-plan %s of %s against head %d planning something else for terraform_data.r, over version %d",
			end, end.Replan, m.Other, c.ID, d.Version.Serial, d.Version.Serial)
	}
	if f := h.marker(run.ID, engine.MarkerFailed); !f.End.Is(engine.CauseIntentChanged) {
		t.Errorf("failed marker's end = %+v; want intent changed", f.End)
	}
	rp := h.run(m.Other)
	if rp.Status != engine.StatusPlanned || rp.ReplanOf != c.ID || rp.Envelope == nil || rp.Envelope.SourceSerial != head {
		t.Fatalf("re-plan = status %s, replan of %q; want planned for review at %d", rp.Status, rp.ReplanOf, head)
	}
	if pr := h.run(c.ID); pr.Status != engine.StatusSuperseded || !pr.End.Is(engine.CauseApplyEnded) || pr.End.Run != run.ID || !pr.End.Then.Is(engine.CauseIntentChanged) {
		t.Errorf("reviewed plan = status %s, end %+v; want superseded, ended by apply run %s: intent changed", pr.Status, pr.End, run.ID)
	}
	if h.headSerial() != head {
		t.Fatalf("head moved to %d", h.headSerial())
	}
	if rs := h.reservations(); len(rs) != 0 {
		t.Errorf("reservations left: %v", rs)
	}
	// The re-plan, once reviewed, applies.
	out := h.apply(rp.ID)
	hs, _ := h.head()
	if want := "r1:" + hs.Resources["x"].ID; hs.Resources["r"].Input != want || out.Version.Serial != head+1 {
		t.Errorf("after applying the re-plan: r = %q, want %q", hs.Resources["r"].Input, want)
	}
}

func TestReadChangedConfigBehindHead(t *testing.T) {
	t.Parallel()
	h := setup(t)
	// D updates x in place (x1; its id, all r reads, is stable); C's
	// configuration still says x0: its re-plan would revert D's change.
	_, c, _ := readChanged(h, "id", func(cfg config) config { return cfg.with(map[string]string{"x": "x1"}) })
	head := h.headSerial()

	_, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: c.ID, Actor: "alice"})
	if !errors.Is(err, engine.ErrIntentChanged) || !errors.Is(err, engine.ErrBehindHead) {
		t.Fatalf("Apply C = %v, want a refusal (ErrBehindHead, an ErrIntentChanged)", err)
	}
	// One term on stderr and in the reports (docs/design.md words).
	if msg := err.Error(); !strings.Contains(msg, "configuration behind the head: re-plan ") || strings.Contains(msg, "intent changed") {
		t.Errorf("Apply C error = %q; want it to say configuration behind the head, not intent changed", msg)
	}
	run := h.run(runErrorID(err))
	if run.Status != engine.StatusRefused || !run.End.Is(engine.CauseBehindHead) || run.End.Replan == nil || !slices.Equal(run.End.Replan.Addresses, []string{"terraform_data.x"}) {
		t.Errorf("apply run = status %s, end %+v; want refused: behind the head, its re-plan would revert terraform_data.x", run.Status, run.End)
	}
	m := h.marker(run.ID, engine.MarkerReplanned)
	if m.IntentChanged == nil || !*m.IntentChanged || !sameSet(m.Addresses, addrs("x")) {
		t.Errorf("replanned marker = %+v, want a change to x", m)
	}
	if end := run.End; end != nil && (end.Run != m.Other || end.Plan != c.ID || end.Serial != head) {
		t.Errorf("apply run's end = %+v; want re-plan %s of plan %s against head %d", end, m.Other, c.ID, head)
	}
	if rp := h.run(m.Other); rp.Status != engine.StatusSuperseded || rp.ReplanOf != c.ID || !rp.End.Is(engine.CauseReplanReverts) || rp.End.Plan != c.ID {
		t.Errorf("re-plan = status %s, replan of %q, end %+v; want superseded: it would revert what %s reads", rp.Status, rp.ReplanOf, rp.End, c.ID)
	}
	if pr := h.run(c.ID); pr.Status != engine.StatusStale || !pr.End.Is(engine.CauseApplyEnded) || pr.End.Run != run.ID || !pr.End.Then.Is(engine.CauseBehindHead) {
		t.Errorf("plan = status %s, end %+v; want stale, ended by apply run %s: behind the head", pr.Status, pr.End, run.ID)
	}
	if h.headSerial() != head {
		t.Errorf("head moved to %d", h.headSerial())
	}
	hs, _ := h.head()
	if got := hs.Resources["x"].Input; got != "x1" {
		t.Errorf("x = %q, want D's x1", got)
	}
}

func TestReadChangedStrict(t *testing.T) {
	t.Parallel()
	h := setup(t)
	_, c, d := readChanged(h, "input", same, replace("terraform_data.x"))

	_, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: c.ID, Actor: "alice", Strict: true})
	var se *engine.StaleError
	if !errors.As(err, &se) || !se.Strict {
		t.Fatalf("Apply --strict = %v, want a strict *StaleError", err)
	}
	if len(se.Entries) != 1 || se.Entries[0].Class != engine.ClassReadChanged || se.Entries[0].Serial != d.Version.Serial || se.Entries[0].Run != d.Run.ID {
		t.Errorf("stale entries = %+v", se.Entries)
	}
	run := h.run(runErrorID(err))
	if sf := h.marker(run.ID, engine.MarkerStalenessFailed); sf.Class != engine.ClassReadChanged || !sameSet(sf.Addresses, addrs("x")) {
		t.Errorf("staleness-failed marker = %+v", sf)
	}
	if run.Status != engine.StatusRefused || !run.End.Is(engine.CauseRefusedStale) || !run.End.Strict || run.End.Plan != c.ID ||
		len(run.End.Stale) != 1 || run.End.Stale[0].Serial != d.Version.Serial || run.End.Stale[0].Class != engine.ClassReadChanged {
		t.Errorf("apply run = status %s, end %+v; want refused: strict, stale by version %d (read-changed)", run.Status, run.End, d.Version.Serial)
	}
	if rps := h.replans(c.ID); len(rps) != 0 {
		t.Errorf("strict apply re-planned: %v", rps)
	}
	if pr := h.run(c.ID); pr.Status != engine.StatusStale {
		t.Errorf("plan status = %s, want stale", pr.Status)
	}
}
