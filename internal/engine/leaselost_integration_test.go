package engine_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
	"github.com/kilolock/kilolock/internal/store/sqlite"
)

// TestLapsedApplyReadInputChanged (ADR 0072): A replaces r, which reads
// x, and its Terraform is held in r's gate. A's lease lapses (the store's
// clock jumps a minute ahead): the sweep fences A's write of r and drops
// its read of x (ADR 0035). B then writes x and commits — a plan input of
// A changed after A's preflight. When A's paused holder comes back and
// commits, the fenced write is still merged (nothing Terraform did is
// lost), but nothing may say the since-plan was clean: the version is not
// exact, its deviation and the run's end name B's version as a changed
// plan input, the run fails with ErrLeaseLost, its since-plan is the one at
// commit, and the story says neither "exact" nor "head unchanged".
func TestLapsedApplyReadInputChanged(t *testing.T) {
	t.Parallel()
	var skew atomic.Int64
	h := setup(t, sqlite.WithClock(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }))
	_, a, b, release := h.readerAndWriter()
	source := h.headSerial()
	if !a.Envelope.Footprint.Read.Contains("terraform_data.x") {
		t.Fatalf("A's read set = %v; want it to read x", a.Envelope.Footprint.Read)
	}
	type result struct {
		out *engine.ApplyOutcome
		err error
	}
	doneA := make(chan result, 1)
	holder := h.applyInTerraform(a.ID, func(out *engine.ApplyOutcome, err error) { doneA <- result{out, err} })
	skew.Store(int64(time.Minute))
	if _, err := h.eng.Status(h.ctx, testState); err != nil {
		t.Fatalf("Status: %v", err)
	}
	if r := h.run(holder); r.Status != engine.StatusLeaseExpired || len(r.End.Fenced) != 1 {
		t.Fatalf("A after the sweep: %s, end %+v; want lease-expired, r fenced", r.Status, r.End)
	}
	// A's read of x is gone: B's write of x goes through.
	outB := h.apply(b.ID)
	if outB.Version.Serial != source+1 || !sameSet(outB.Version.Changed, addrs("x")) {
		t.Fatalf("B committed %+v; want version %d changing x", outB.Version, source+1)
	}
	release()
	ra := <-doneA
	if !errors.Is(ra.err, engine.ErrLeaseLost) || !strings.Contains(ra.err.Error(), "terraform_data.x") {
		t.Errorf("Apply A = %v; want ErrLeaseLost naming x, the plan input version %d changed", ra.err, source+1)
	}
	if ra.out == nil || ra.out.Version == nil {
		t.Fatalf("A committed nothing: %v", ra.err)
	}
	v := ra.out.Version
	p := v.Provenance
	if v.Serial != source+2 || !sameSet(v.Changed, addrs("r")) || p.Exact || p.Deviation == nil {
		t.Fatalf("A's version %d: changed %v, exact %v, deviation %+v; want r merged, not exact", v.Serial, v.Changed, p.Exact, p.Deviation)
	}
	checkInputsChanged := func(what string, got []engine.SincePlanEntry) {
		t.Helper()
		if len(got) != 1 || got[0].Serial != source+1 || got[0].Class != engine.ClassReadChanged ||
			!sameSet(got[0].Addresses, addrs("x")) || got[0].Run != outB.Run.ID {
			t.Errorf("%s = %+v; want version %d by run %s, plan input x changed", what, got, source+1, outB.Run.ID)
		}
	}
	checkInputsChanged("deviation's inputs changed", p.Deviation.InputsChanged)
	run := h.run(holder)
	if run.Status != engine.StatusFailed || !run.End.Is(engine.CauseLeaseLost) || run.End.Serial != v.Serial || run.CommittedSerial != v.Serial {
		t.Errorf("A's run = %s, end %+v, committed %d; want failed, lease lost, version %d", run.Status, run.End, run.CommittedSerial, v.Serial)
	}
	checkInputsChanged("end's inputs changed", run.End.InputsChanged)
	if sp := run.SincePlan; sp == nil || !sp.AtCommit || sp.HeadSerial != source+1 || len(sp.Of(engine.ClassReadChanged)) != 1 {
		t.Errorf("A's since-plan = %+v; want the one at commit, version %d read-changed", sp, source+1)
	}
	if pl := h.run(a.ID); pl.Status != engine.StatusFailed {
		t.Errorf("A's plan = %s, end %+v; want failed (re-plan)", pl.Status, pl.End)
	}
	hs, _ := h.head()
	if got := hs.inputs(); !strings.HasPrefix(got["r"], "r1") || got["x"] != "x1" {
		t.Errorf("head = %v; want A's r1 and B's x1", got)
	}
	story, err := h.eng.RunStory(h.ctx, holder)
	if err != nil {
		t.Fatalf("RunStory: %v", err)
	}
	var text strings.Builder
	if err := report.RunStory(&text, story, report.Options{}); err != nil {
		t.Fatal(err)
	}
	// kl apply's own report, and kl run show's. The timeline tells each
	// event as it was then (the preflight did find the head unchanged, and
	// says so as the preflight's finding); every other part tells the
	// outcome.
	text.WriteString("\n")
	if err := report.Apply(&text, story, report.Options{}); err != nil {
		t.Fatal(err)
	}
	outcome := text.String()
	for {
		before, after, found := strings.Cut(outcome, "\nTimeline\n")
		if !found {
			break
		}
		_, rest, _ := strings.Cut(after, "\n\n") // the timeline ends at a blank line
		outcome = before + "\n" + rest
	}
	for _, bad := range []string{"exact", "head unchanged", "staleness check passed"} {
		if strings.Contains(outcome, bad) {
			t.Errorf("A's story says %q although version %d changed a plan input:\n%s", bad, source+1, text.String())
		}
	}
	for _, want := range []string{"Since plan (at commit)", "plan input changed in version 2", "meanwhile version 2"} {
		if !strings.Contains(outcome, want) {
			t.Errorf("A's story lacks %q:\n%s", want, text.String())
		}
	}
}

// TestRecoverLapsedReadInputChanged (ADR 0072): an apply of A — an update
// of r, which reads x — is killed while its Terraform runs, after its
// preflight found the head unchanged. Its lease lapses and its read of x is
// dropped; B writes x and commits. `kl run recover` of A still commits
// what A's Terraform wrote (r: the head had not changed it), but the
// version's deviation names B's version as a changed plan input, the run's
// since-plan is the one at commit, the preflight's "head unchanged" fact is
// gone, and the story says neither "exact" nor "head unchanged".
func TestRecoverLapsedReadInputChanged(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"x": {Value: "x0"}, "r": {Value: "r0", Ref: "x.id"}}
	h.base(cfg)
	source := h.headSerial()
	plan := h.plan(cfg.with(map[string]string{"r": "r1"}))
	if !plan.Envelope.Footprint.Read.Contains("terraform_data.x") || !sameSet(plan.Envelope.Footprint.Write, addrs("r")) {
		t.Fatalf("A's footprint = %+v; want it to write r and read x", plan.Envelope.Footprint)
	}
	checkpoint := h.checkpointOf(plan, func(hs headState) bool { return strings.HasPrefix(hs.inputs()["r"], "r1") })
	killed := h.killedApply(plan, checkpoint)
	// What A's preflight stored before Terraform started: the head
	// unchanged since the plan.
	if _, err := h.store.UpdateRun(h.ctx, killed.ID, nil, func(r *engine.Run) error {
		r.SincePlan = &engine.SincePlan{PlanRun: plan.ID, SourceSerial: source, HeadSerial: source, Entries: []engine.SincePlanEntry{}}
		r.AllowedBecause = []engine.Fact{{Kind: engine.FactStalenessPassed, SourceSerial: source, HeadSerial: source}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	outB := h.apply(h.plan(cfg.with(map[string]string{"x": "x1"}), actor("bob")).ID)
	if outB.Version.Serial != source+1 || !sameSet(outB.Version.Changed, addrs("x")) {
		t.Fatalf("B committed %+v; want version %d changing x", outB.Version, source+1)
	}

	out, err := h.eng.Recover(h.ctx, killed.ID)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	v := out.Version
	p := v.Provenance
	if v.Serial != source+2 || !sameSet(v.Changed, addrs("r")) || p.Exact || p.Deviation == nil {
		t.Fatalf("recovered version %d: changed %v, exact %v, deviation %+v; want r, not exact", v.Serial, v.Changed, p.Exact, p.Deviation)
	}
	if ic := p.Deviation.InputsChanged; len(ic) != 1 || ic[0].Serial != source+1 || ic[0].Class != engine.ClassReadChanged ||
		!sameSet(ic[0].Addresses, addrs("x")) || ic[0].Run != outB.Run.ID {
		t.Errorf("deviation's inputs changed = %+v; want version %d by run %s, plan input x", ic, source+1, outB.Run.ID)
	}
	r := out.Run
	if r.Status != engine.StatusLeaseExpired || r.CommittedSerial != v.Serial {
		t.Errorf("recovered run = %s, committed %d; want lease-expired (its end kept), committed %d", r.Status, r.CommittedSerial, v.Serial)
	}
	if sp := r.SincePlan; sp == nil || !sp.AtCommit || len(sp.Of(engine.ClassReadChanged)) != 1 {
		t.Errorf("recovered run's since-plan = %+v; want the one at commit, version %d read-changed", sp, source+1)
	}
	if _, ok := fact(r.AllowedBecause, engine.FactStalenessPassed); ok {
		t.Errorf("recovered run keeps the preflight's staleness-passed fact: %+v", r.AllowedBecause)
	}
	story, err := h.eng.RunStory(h.ctx, killed.ID)
	if err != nil {
		t.Fatalf("RunStory: %v", err)
	}
	var text strings.Builder
	if err := report.RunStory(&text, story, report.Options{}); err != nil {
		t.Fatal(err)
	}
	outcome, _, _ := strings.Cut(text.String(), "\nTimeline\n")
	for _, bad := range []string{"exact", "head unchanged"} {
		if strings.Contains(outcome, bad) {
			t.Errorf("recovered story says %q although version %d changed a plan input:\n%s", bad, source+1, text.String())
		}
	}
	if !strings.Contains(outcome, fmt.Sprintf("plan input changed in version %d", source+1)) || !strings.Contains(outcome, "Since plan (at commit)") ||
		!strings.Contains(outcome, fmt.Sprintf("meanwhile version %d", source+1)) {
		t.Errorf("recovered story does not name the changed plan input:\n%s", text.String())
	}
}

// TestLapsedBeforeTerraformRefused (ADR 0072): A (an update of r, which
// reads x) holds its reservations, and its holder stalls before its
// preflight: its lease lapses (the store's clock jumps a minute ahead) and
// the sweep drops them — nothing is fenced, Terraform has not run. B writes
// x and commits. When A's holder comes back, its preflight finds the plan
// input changed as any apply would, and A is refused (its re-plan against
// the head would revert B's x: behind the head) or fails by its lost lease
// — either way Terraform never runs and A commits nothing; its plan fails
// (it had reserved), saying re-plan.
func TestLapsedBeforeTerraformRefused(t *testing.T) {
	t.Parallel()
	var skew atomic.Int64
	h := setup(t, sqlite.WithClock(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }))
	cfg := config{"x": {Value: "x0"}, "r": {Value: "r0", Ref: "x.id"}}
	h.base(cfg)
	source := h.headSerial()
	a := h.plan(cfg.with(map[string]string{"r": "r1"}))
	b := h.plan(cfg.with(map[string]string{"x": "x1"}), actor("bob"))
	var outB *engine.ApplyOutcome
	var holder string
	_, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: a.ID, State: testState, Actor: "alice", OnReserved: func(run string) {
		holder = run
		skew.Store(int64(time.Minute)) // A's holder stalls past its lease here
		if _, err := h.eng.Status(h.ctx, testState); err != nil {
			t.Errorf("Status: %v", err)
		}
		var err error
		if outB, err = h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: b.ID, State: testState, Actor: "bob"}); err != nil {
			t.Errorf("Apply B while A's lease had lapsed: %v", err)
		}
	}})
	if !errors.Is(err, engine.ErrBehindHead) && !errors.Is(err, engine.ErrLeaseLost) {
		t.Errorf("Apply A after its lease lapsed = %v; want refused behind the head, or ErrLeaseLost", err)
	}
	if outB == nil || outB.Version == nil || outB.Version.Serial != source+1 {
		t.Fatalf("B = %+v; want version %d", outB, source+1)
	}
	if h.headSerial() != source+1 {
		t.Errorf("head = %d; want B's %d only: A's Terraform must not run", h.headSerial(), source+1)
	}
	r := h.run(holder)
	if r.Status != engine.StatusLeaseExpired || r.CommittedSerial != 0 {
		t.Errorf("A's run = %s, committed %d; want lease-expired, nothing committed", r.Status, r.CommittedSerial)
	}
	for _, m := range h.markers(holder) {
		if m.Kind == engine.MarkerApplyStarted || m.Kind == engine.MarkerApplied {
			t.Errorf("A's run has a %s marker: its Terraform ran after its lease lapsed", m.Kind)
		}
	}
	if p := h.run(a.ID); p.Status != engine.StatusFailed || !p.End.Is(engine.CauseApplyLeaseExpired) || !strings.Contains(report.EndText(p.ID, p.End), "re-plan") {
		t.Errorf("A's plan = %s, end %q; want failed by its apply's lapsed lease, saying re-plan", p.Status, report.EndText(p.ID, p.End))
	}
}
