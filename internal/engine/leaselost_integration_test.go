package engine_test

import (
	"errors"
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
	for _, bad := range []string{"exact", "head unchanged"} {
		if strings.Contains(text.String(), bad) {
			t.Errorf("A's story says %q although version %d changed a plan input:\n%s", bad, source+1, text.String())
		}
	}
	if !strings.Contains(text.String(), "plan input changed") {
		t.Errorf("A's story does not say a plan input changed:\n%s", text.String())
	}
}
