package engine_test

import (
	"errors"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// TestParkAndResume (ADR 0041): an apply with Park that must wait ends
// the call with a *ParkedError, its run waiting and its plan claimed, its
// lease covering the wait; resumed while still blocked it parks again
// without a second waited marker; resumed once the holder committed, the
// same run reserves — the reserved marker and the waited-for fact count
// from its first waited marker — and commits. A parked apply resumed
// after its deadline is refused as a wait that ran out in one call is,
// End.Waited counted from the wait's start; a resume of a run that no
// longer waits is a *StatusError.
func TestParkAndResume(t *testing.T) {
	t.Parallel()
	h := setup(t)
	slow, a, b, release := h.readerAndWriter()
	doneA := make(chan error, 1)
	holder := h.applyInTerraform(a.ID, func(_ *engine.ApplyOutcome, err error) { doneA <- err })

	in := engine.ApplyInput{PlanRun: b.ID, Actor: "bob", Wait: 30 * time.Second, Park: true}
	_, err := h.eng.Apply(h.ctx, in)
	var pe *engine.ParkedError
	if !errors.As(err, &pe) || pe.Run == "" || len(pe.Blockers) != 1 || pe.Blockers[0].Run != holder {
		t.Fatalf("Apply B (park) = %v; want a *ParkedError naming %s", err, holder)
	}
	if got := pe.Until.Sub(pe.Since); got != in.Wait {
		t.Errorf("parked until %s after its start, want Wait (%s)", got, in.Wait)
	}
	parked := h.run(pe.Run)
	if parked.Status != engine.StatusWaiting || parked.LeaseUntil.Before(pe.Until) {
		t.Errorf("parked run = %s, lease until %s; want waiting, its lease past the wait's end %s", parked.Status, parked.LeaseUntil, pe.Until)
	}
	if p := h.run(b.ID); p.Status != engine.StatusApplying || p.ApplyRun != pe.Run {
		t.Errorf("B's plan = %s by %q, want claimed by the parked run %s", p.Status, p.ApplyRun, pe.Run)
	}
	first := h.marker(pe.Run, engine.MarkerWaited)

	in.Resume = pe.Run
	_, err = h.eng.Apply(h.ctx, in)
	var again *engine.ParkedError
	if !errors.As(err, &again) || again.Run != pe.Run || !again.Since.Equal(first.At) {
		t.Fatalf("resume while blocked = %v; want the same run parked again, its wait from %s", err, first.At)
	}
	if n := countKind(h.markers(pe.Run), engine.MarkerWaited); n != 1 {
		t.Errorf("%d waited markers after a resume, want 1 (the wait is one)", n)
	}

	time.Sleep(time.Second)
	release()
	if err := <-doneA; err != nil {
		t.Fatalf("Apply A: %v", err)
	}
	out, err := h.eng.Apply(h.ctx, in)
	if err != nil || out.Run.ID != pe.Run || out.Version == nil {
		t.Fatalf("resume after A committed = %+v, %v; want run %s to commit", out, err, pe.Run)
	}
	reserved := h.marker(pe.Run, engine.MarkerReserved)
	if since := reserved.At.Sub(first.At); time.Duration(reserved.Waited) < time.Second || time.Duration(reserved.Waited) > since+time.Second {
		t.Errorf("reserved marker waited %s, %s after the first waited marker; want the whole wait (≥ 1s)", time.Duration(reserved.Waited), since)
	}
	if f, ok := fact(h.run(pe.Run).AllowedBecause, engine.FactWaitedFor); !ok || f.Run != holder || time.Duration(f.Waited) < time.Second {
		t.Errorf("waited-for fact = %+v, %v; want %s, waited ≥ 1s", f, ok, holder)
	}
	if runs := h.applyRuns(b.ID); len(runs) != 1 {
		t.Errorf("%d apply runs of B's plan, want 1", len(runs))
	}
	var se *engine.StatusError
	if _, err := h.eng.Apply(h.ctx, in); !errors.As(err, &se) {
		t.Errorf("resume of a finished run = %v, want a *StatusError", err)
	}

	// The deadline: a parked apply resumed after it is refused.
	gate2, release2 := h.gate()
	defer release2()
	cur := config{"x": {Value: "x1"}, "r": slow["r"], "y": {Value: "y0"}} // the head now
	slow2 := cur.with(nil)
	slow2["y"] = res{Value: "y1", Gate: gate2}
	c := h.plan(slow2)
	d := h.plan(cur.with(map[string]string{"y": "y2"}), actor("bob"))
	doneC := make(chan error, 1)
	holderC := h.applyInTerraform(c.ID, func(_ *engine.ApplyOutcome, err error) { doneC <- err })
	in2 := engine.ApplyInput{PlanRun: d.ID, Actor: "bob", Wait: time.Second, Park: true}
	_, err = h.eng.Apply(h.ctx, in2)
	if !errors.As(err, &pe) {
		t.Fatalf("Apply D (park) = %v, want a *ParkedError", err)
	}
	time.Sleep(1500 * time.Millisecond)
	in2.Resume = pe.Run
	_, err = h.eng.Apply(h.ctx, in2)
	var ce *engine.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("resume after the deadline = %v, want a *ConflictError", err)
	}
	refused := h.run(pe.Run)
	if refused.Status != engine.StatusRefused || !refused.End.Is(engine.CauseRefusedConflict) || time.Duration(refused.End.Waited) < 1500*time.Millisecond ||
		len(refused.End.Blockers) != 1 || refused.End.Blockers[0].Run != holderC {
		t.Errorf("refused run = %s, end %+v; want refused on %s after waiting ≥ 1.5s (from its first waited marker)", refused.Status, refused.End, holderC)
	}
	if p := h.run(d.ID); p.Status != engine.StatusPlanned {
		t.Errorf("D's plan = %s, want planned again", p.Status)
	}
	release2()
	if err := <-doneC; err != nil {
		t.Fatalf("Apply C: %v", err)
	}
}

func countKind(ms []engine.Marker, k engine.MarkerKind) int {
	n := 0
	for _, m := range ms {
		if m.Kind == k {
			n++
		}
	}
	return n
}
