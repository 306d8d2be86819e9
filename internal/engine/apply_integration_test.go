package engine_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// TestApplyCommits: plan → apply → commit writes head+1 with full
// provenance, the head holds the new values, the reservations are released
// and the apply's markers tell the story in order (docs/design.md "How a run
// flows"; ADR D4, D5).
func TestApplyCommits(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"a": {Value: "a0"}, "b": {Value: "b0"}}
	h.base(cfg)
	before := h.headSerial()

	plan := h.plan(cfg.with(map[string]string{"a": "a1", "b": "b1"}))
	if plan.Status != engine.StatusPlanned || plan.Envelope == nil {
		t.Fatalf("plan: status %s, envelope %v", plan.Status, plan.Envelope)
	}
	if want := addrs("a", "b"); !sameSet(plan.Envelope.Footprint.Write, want) {
		t.Fatalf("plan write set = %v, want %v", plan.Envelope.Footprint.Write, want)
	}
	out := h.apply(plan.ID)

	v := out.Version
	if v.Serial != before+1 || h.headSerial() != before+1 {
		t.Fatalf("committed serial %d, head %d; want %d", v.Serial, h.headSerial(), before+1)
	}
	p := v.Provenance
	want := engine.Provenance{
		Run: out.Run.ID, PlanRun: plan.ID, SourceSerial: before,
		CommittedSerial: before + 1, PlanDigest: plan.Envelope.PlanDigest, Mode: engine.CommitSnapshotMerge, Exact: true,
	}
	if p.Run != want.Run || p.PlanRun != want.PlanRun ||
		p.SourceSerial != want.SourceSerial || p.CommittedSerial != want.CommittedSerial ||
		p.PlanDigest != want.PlanDigest || p.Mode != want.Mode || !p.Exact || p.Partial || p.Deviation != nil {
		t.Errorf("provenance = %+v, want %+v", p, want)
	}
	if !strings.HasPrefix(p.PlanDigest, "sha256:") {
		t.Errorf("plan digest %q is not sha256:<hex>", p.PlanDigest)
	}
	if !sameSet(v.Changed, addrs("a", "b")) {
		t.Errorf("version changed = %v, want a, b", v.Changed)
	}

	hs, _ := h.head()
	if got := hs.inputs(); got["a"] != "a1" || got["b"] != "b1" {
		t.Errorf("head inputs = %v, want a1, b1", got)
	}
	if rs := h.reservations(); len(rs) != 0 {
		t.Errorf("reservations after commit: %v", rs)
	}

	run := h.run(out.Run.ID)
	if run.Status != engine.StatusApplied || run.CommittedSerial != v.Serial || run.PlanRun != plan.ID || run.FinishedAt == nil {
		t.Errorf("apply run = status %s, committed %d, plan %s, finished %v", run.Status, run.CommittedSerial, run.PlanRun, run.FinishedAt)
	}
	if pr := h.run(plan.ID); pr.Status != engine.StatusApplied || pr.ApplyRun != run.ID {
		t.Errorf("plan run = status %s, apply run %q; want applied by %s", pr.Status, pr.ApplyRun, run.ID)
	}
	wantKinds := []engine.MarkerKind{engine.MarkerReserved, engine.MarkerPreflight, engine.MarkerStalenessPassed,
		engine.MarkerApplyStarted, engine.MarkerApplied, engine.MarkerCommitted, engine.MarkerReleased}
	ms := h.markers(run.ID)
	if got := kinds(ms); !slices.Equal(got, wantKinds) {
		t.Fatalf("apply markers = %v, want %v", got, wantKinds)
	}
	if m := ms[3]; m.Serial != before {
		t.Errorf("apply-started marker = %+v, want serial %d", m, before)
	}
	if m := ms[5]; m.Serial != v.Serial || m.FromSerial != before || m.Mode != engine.CommitSnapshotMerge {
		t.Errorf("committed marker = %+v", m)
	}
	if m := ms[0]; m.Count != 2 || !sameSet(m.Addresses, addrs("a", "b")) {
		t.Errorf("reserved marker = %+v, want 2 reservations on a, b", m)
	}
	if f, ok := fact(run.AllowedBecause, engine.FactStalenessPassed); !ok || f.SourceSerial != before || f.HeadSerial != before || len(f.Serials) != 0 {
		t.Errorf("allowed-because = %+v, want staleness-passed over no versions at %d", run.AllowedBecause, before)
	}
}

// TestDisjointPlansApplyInSequence: two plans with disjoint write sets made
// at one head both apply; the second sees the first's version as
// independent (ADR D3, D8) and says so in its allowed-because (ADR D2).
func TestDisjointPlansApplyInSequence(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"a": {Value: "a0"}, "b": {Value: "b0"}}
	h.base(cfg)
	source := h.headSerial()
	p1 := h.plan(cfg.with(map[string]string{"a": "a1"}))
	p2 := h.plan(cfg.with(map[string]string{"b": "b1"}), actor("bob"))
	if !sameSet(p1.Envelope.Footprint.Write, addrs("a")) || !sameSet(p2.Envelope.Footprint.Write, addrs("b")) {
		t.Fatalf("write sets = %v and %v, want a and b", p1.Envelope.Footprint.Write, p2.Envelope.Footprint.Write)
	}
	first := h.apply(p1.ID)
	second := h.apply(p2.ID)
	if first.Version.Serial != source+1 || second.Version.Serial != source+2 {
		t.Fatalf("serials %d, %d; want %d, %d", first.Version.Serial, second.Version.Serial, source+1, source+2)
	}

	run := h.run(second.Run.ID)
	sp := run.SincePlan
	if sp == nil || len(sp.Entries) != 1 {
		t.Fatalf("second apply's since-plan = %+v, want one entry", sp)
	}
	if e := sp.Entries[0]; e.Serial != source+1 || e.Class != engine.ClassIndependent || e.Run != first.Run.ID || e.PlanRun != p1.ID {
		t.Errorf("since-plan entry = %+v, want version %d independent by run %s", e, source+1, first.Run.ID)
	}
	f, ok := fact(run.AllowedBecause, engine.FactStalenessPassed)
	if !ok || !slices.Equal(f.Serials, []int64{source + 1}) || f.SourceSerial != source || f.HeadSerial != source+1 {
		t.Errorf("allowed-because = %+v, want staleness-passed over version %d", run.AllowedBecause, source+1)
	}
	if m := h.marker(run.ID, engine.MarkerStalenessPassed); m.SincePlan == nil || m.SincePlan.Independent != 1 || m.SincePlan.ReadChanged+m.SincePlan.WriteChanged != 0 {
		t.Errorf("staleness-passed marker = %+v, want one independent version", m)
	}
	if !sameSet(second.Version.Changed, addrs("b")) || !second.Version.Provenance.Exact {
		t.Errorf("second version changed %v, exact %v", second.Version.Changed, second.Version.Provenance.Exact)
	}
	hs, _ := h.head()
	if got := hs.inputs(); got["a"] != "a1" || got["b"] != "b1" {
		t.Errorf("head inputs = %v, want a1 and b1: no lost update", got)
	}
}

// TestDisjointPlansApplyConcurrently: two applies with disjoint write sets
// hold their reservations at the same time; both commit, serials are
// contiguous, the later one names the other in a disjoint-write-sets fact,
// and Terraform finds nothing to do for the union of both configurations
// against the head (the snapshot-merge lost nothing).
func TestDisjointPlansApplyConcurrently(t *testing.T) {
	t.Parallel()
	h := setup(t)
	open0, opened := h.gate()
	opened()
	cfg := config{"a": {Value: "a0", Gate: open0}, "b": {Value: "b0"}, "c": {Value: "c0"}}
	h.base(cfg)
	source := h.headSerial()
	// a is replaced (triggers_replace) and waits for the gate while holding
	// its reservations: b's apply acquires and commits beside it.
	gate, release := h.gate()
	slow := cfg.with(map[string]string{"a": "a1"})
	slow["a"] = res{Value: "a1", Gate: gate}
	p1 := h.plan(slow)
	p2 := h.plan(cfg.with(map[string]string{"b": "b1"}), actor("bob"))

	type result struct {
		out *engine.ApplyOutcome
		err error
	}
	done1 := make(chan result, 1)
	go func() {
		out, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: p1.ID, Actor: "alice"})
		done1 <- result{out, err}
	}()
	var holder string
	waitFor(t, 30*time.Second, "the first apply to hold its reservations", func() bool {
		for _, r := range h.reservations() {
			holder = r.Run
			return true
		}
		return false
	})
	out2, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: p2.ID, Actor: "bob"})
	release()
	if err != nil {
		t.Fatalf("second apply: %v", err)
	}
	r1 := <-done1
	if r1.err != nil {
		t.Fatalf("first apply: %v", r1.err)
	}
	if holder != r1.out.Run.ID {
		t.Fatalf("reservations were held by %s, want the first apply %s", holder, r1.out.Run.ID)
	}
	serials := []int64{r1.out.Version.Serial, out2.Version.Serial}
	slices.Sort(serials)
	if !slices.Equal(serials, []int64{source + 1, source + 2}) || h.headSerial() != source+2 {
		t.Fatalf("committed serials %v, head %d; want %d and %d", serials, h.headSerial(), source+1, source+2)
	}
	run2 := h.run(out2.Run.ID)
	f, ok := fact(run2.AllowedBecause, engine.FactDisjointWrites)
	if !ok || f.Run != r1.out.Run.ID || !sameSet(f.OwnWrite, addrs("b")) || !sameSet(f.OtherWrite, addrs("a")) {
		t.Errorf("second apply's allowed-because = %+v, want disjoint-write-sets with run %s (a vs b)", run2.AllowedBecause, r1.out.Run.ID)
	}
	if _, ok := fact(h.run(r1.out.Run.ID).AllowedBecause, engine.FactDisjointWrites); ok {
		t.Errorf("first apply held alone, yet has a disjoint-write-sets fact: %+v", h.run(r1.out.Run.ID).AllowedBecause)
	}
	for _, v := range h.versions() {
		if v.Serial > source && !v.Provenance.Exact {
			t.Errorf("version %d is not exact: %+v", v.Serial, v.Provenance.Deviation)
		}
	}
	hs, doc := h.head()
	if got := hs.inputs(); got["a"] != "a1" || got["b"] != "b1" || got["c"] != "c0" {
		t.Errorf("head inputs = %v", got)
	}
	h.terraformPlanNoChanges(cfg.with(map[string]string{"a": "a1", "b": "b1"}), doc)
}

// TestWriteChangedRefuses: a plan whose write set a later version changed is
// refused as stale, naming the version, its run and the address; nothing is
// committed (docs/design.md apply step 3; ADR D3).
func TestWriteChangedRefuses(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"a": {Value: "a0"}, "b": {Value: "b0"}}
	h.base(cfg)
	p1 := h.plan(cfg.with(map[string]string{"a": "a1"}))
	p2 := h.plan(cfg.with(map[string]string{"a": "a2", "b": "b2"}), actor("bob"))
	first := h.apply(p1.ID)
	head := h.headSerial()

	out, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: p2.ID, Actor: "bob"})
	var se *engine.StaleError
	if !errors.As(err, &se) || !errors.Is(err, engine.ErrStalePlan) {
		t.Fatalf("Apply = %v, %v; want a *StaleError", out, err)
	}
	if se.PlanRun != p2.ID || se.Strict || len(se.Entries) != 1 {
		t.Fatalf("StaleError = %+v", se)
	}
	e := se.Entries[0]
	if e.Serial != first.Version.Serial || e.Run != first.Run.ID || e.Class != engine.ClassWriteChanged || !sameSet(e.Addresses, addrs("a")) {
		t.Errorf("stale entry = %+v, want version %d by %s changing terraform_data.a", e, first.Version.Serial, first.Run.ID)
	}
	for _, s := range []string{fmt.Sprintf("version %d", first.Version.Serial), first.Run.ID, "terraform_data.a"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %q", err, s)
		}
	}
	if pr := h.run(p2.ID); pr.Status != engine.StatusStale {
		t.Errorf("plan status = %s, want stale", pr.Status)
	}
	id := runErrorID(err)
	run := h.run(id)
	if run.Status != engine.StatusRefused || !run.End.Is(engine.CauseRefusedStale) || run.CommittedSerial != 0 {
		t.Errorf("apply run = status %s, end %+v, committed %d; want refused stale", run.Status, run.End, run.CommittedSerial)
	} else if end := run.End; end.Plan != p2.ID || end.Strict || len(end.Stale) != 1 || end.Stale[0].Serial != first.Version.Serial ||
		end.Stale[0].Run != first.Run.ID || !sameSet(end.Stale[0].Addresses, addrs("a")) {
		t.Errorf("apply run's end = %+v; want plan %s stale by version %d (run %s) changing terraform_data.a", end, p2.ID, first.Version.Serial, first.Run.ID)
	}
	sf := h.marker(id, engine.MarkerStalenessFailed)
	if sf.Class != engine.ClassWriteChanged || sf.Serial != first.Version.Serial || sf.Other != first.Run.ID || !sameSet(sf.Addresses, addrs("a")) {
		t.Errorf("staleness-failed marker = %+v", sf)
	}
	if m := h.marker(id, engine.MarkerFailed); !m.End.Is(engine.CauseRefusedStale) || len(m.End.Stale) != 1 || m.End.Stale[0].Serial != first.Version.Serial {
		t.Errorf("failed marker = %+v, end %+v; want the stale refusal by version %d", m, m.End, first.Version.Serial)
	}
	if h.headSerial() != head {
		t.Errorf("head moved from %d to %d: a stale plan committed", head, h.headSerial())
	}
	if rs := h.reservations(); len(rs) != 0 {
		t.Errorf("reservations left: %v", rs)
	}
	hs, _ := h.head()
	if got := hs.inputs(); got["a"] != "a1" || got["b"] != "b0" {
		t.Errorf("head inputs = %v, want a1, b0", got)
	}
}
