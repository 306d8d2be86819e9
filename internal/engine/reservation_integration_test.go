package engine_test

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store/sqlite"
)

// TestReservationConflictThenWait: run A holds a read reservation on x
// while it replaces r (which reads x's id, slowly); B's plan writes x.
// With Wait=0, B is refused at once with a *ConflictError naming A's run
// and x, and its plan goes back to planned. Applied again with a Wait, B
// waits — visible in Status and Why — and proceeds when A commits, with a
// waited-for fact (docs/design.md apply step 2; ADR D2, D6).
func TestReservationConflictThenWait(t *testing.T) {
	t.Parallel()
	h := setup(t)
	_, a, b, release := h.readerAndWriter()
	if fp := a.Envelope.Footprint; !sameSet(fp.Write, addrs("r")) || !sameSet(fp.Read, addrs("x")) {
		t.Fatalf("A's footprint = write %v, read %v", fp.Write, fp.Read)
	}
	if !sameSet(b.Envelope.Footprint.Write, addrs("x")) {
		t.Fatalf("B's write set = %v", b.Envelope.Footprint.Write)
	}

	doneA := make(chan error, 1)
	go func() {
		_, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: a.ID, Actor: "alice"})
		doneA <- err
	}()
	var holder string
	waitFor(t, 30*time.Second, "A to hold its reservations", func() bool {
		for _, r := range h.reservations() {
			holder = r.Run
			return true
		}
		return false
	})

	// Wait=0: refused at once, naming the holder and the address.
	_, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: b.ID, Actor: "bob"})
	var ce *engine.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("Apply B (no wait) = %v, want a *ConflictError", err)
	}
	if len(ce.Blockers) != 1 || ce.Blockers[0].Run != holder || !sameSet(ce.Blockers[0].Addresses, addrs("x")) || ce.Blockers[0].Actor != "alice" {
		t.Errorf("blockers = %+v, want run %s (alice) over terraform_data.x", ce.Blockers, holder)
	}
	refused := h.run(runErrorID(err))
	if refused.Status != engine.StatusRefused || !refused.End.Is(engine.CauseRefusedConflict) || refused.End.Waited != 0 || len(refused.End.Blockers) != 1 ||
		refused.End.Blockers[0].Run != holder || !sameSet(refused.End.Blockers[0].Addresses, addrs("x")) {
		t.Errorf("refused apply run = status %s, end %+v; want refused: run %s holds terraform_data.x, no wait", refused.Status, refused.End, holder)
	}
	if m := h.marker(refused.ID, engine.MarkerFailed); !m.End.Is(engine.CauseRefusedConflict) {
		t.Errorf("failed marker's end = %+v; want the conflict", m.End)
	}
	if w := h.marker(refused.ID, engine.MarkerWaited); w.Other != holder {
		t.Errorf("waited marker of the refused run = %+v", w)
	}
	// Planned again; ApplyRun keeps naming the last attempt for `kl why`.
	if pr := h.run(b.ID); pr.Status != engine.StatusPlanned || pr.ApplyRun != refused.ID {
		t.Errorf("B's plan = status %s, apply run %q; want planned again, naming attempt %s", pr.Status, pr.ApplyRun, refused.ID)
	}
	if why, err := h.eng.Why(h.ctx, b.ID); err != nil || why.Verdict != engine.VerdictPending || why.Apply == nil || why.Apply.ID != refused.ID || len(why.Waited) == 0 {
		t.Errorf("Why(plan open again) = %+v, %v; want pending with the last attempt and its wait", why, err)
	}
	if why, err := h.eng.Why(h.ctx, refused.ID); err != nil || why.Verdict != engine.VerdictRefused {
		t.Errorf("Why(refused) = %+v, %v", why, err)
	}

	// Wait>0: B waits for A, visibly, then proceeds.
	type result struct {
		out *engine.ApplyOutcome
		err error
	}
	doneB := make(chan result, 1)
	go func() {
		out, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: b.ID, Actor: "bob", Wait: 30 * time.Second})
		doneB <- result{out, err}
	}()
	var waiting, holding engine.ActiveRun
	waitFor(t, 30*time.Second, "B to show as waiting in Status", func() bool {
		st, err := h.eng.Status(h.ctx, testState)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		for _, ar := range st.Active {
			if ar.Run.ID == holder {
				holding = ar
			}
		}
		for _, ar := range st.Active {
			if ar.Run.PlanRun == b.ID && ar.Run.Status == engine.StatusWaiting && len(ar.WaitingOn) > 0 {
				waiting = ar
				return true
			}
		}
		return false
	})
	if holding.Run.Status != engine.StatusApplying || len(holding.Holds) != 2 {
		t.Errorf("Status: A = %s holding %v; want applying with write r, read x", holding.Run.Status, holding.Holds)
	}
	if len(waiting.WaitingOn) != 1 || waiting.WaitingOn[0].Run != holder || !sameSet(waiting.WaitingOn[0].Addresses, addrs("x")) {
		t.Errorf("Status: B waits on %+v, want %s over x", waiting.WaitingOn, holder)
	}
	if why, err := h.eng.Why(h.ctx, b.ID); err != nil || why.Verdict != engine.VerdictWaiting || len(why.Waited) != 1 {
		t.Errorf("Why(B) while waiting = %+v, %v", why, err)
	}
	release()
	if err := <-doneA; err != nil {
		t.Fatalf("Apply A: %v", err)
	}
	rb := <-doneB
	if rb.err != nil {
		t.Fatalf("Apply B (wait): %v", rb.err)
	}
	run := h.run(rb.out.Run.ID)
	if w := h.marker(run.ID, engine.MarkerWaited); w.Other != holder || !sameSet(w.Addresses, addrs("x")) {
		t.Errorf("waited marker = %+v, want run %s over x", w, holder)
	}
	if m := h.marker(run.ID, engine.MarkerReserved); m.Waited <= 0 {
		t.Errorf("reserved marker = %+v, want how long it waited", m)
	}
	f, ok := fact(run.AllowedBecause, engine.FactWaitedFor)
	if !ok || f.Run != holder || f.Waited <= 0 || !sameSet(f.Addresses, addrs("x")) {
		t.Errorf("allowed-because = %+v, want waited-for %s over x with a duration", run.AllowedBecause, holder)
	}
	// A's version changed r only: independent of B's footprint.
	if sp := run.SincePlan; sp == nil || len(sp.Entries) != 1 || sp.Entries[0].Class != engine.ClassIndependent || sp.Entries[0].Run != holder {
		t.Errorf("B's since-plan = %+v, want A's version independent", run.SincePlan)
	}
	hs, _ := h.head()
	if hs.Resources["x"].Input != "x1" || !strings.HasPrefix(hs.Resources["r"].Input, "r1:") {
		t.Errorf("head = %v", hs.inputs())
	}
	if rs := h.reservations(); len(rs) != 0 {
		t.Errorf("reservations left: %v", rs)
	}
}

// TestSamePlanAppliedTwiceAtOnce: a plan is applied at most once; the
// loser of the claim gets a *StatusError and, if it had created its apply
// run, that run is refused with a stored reason.
func TestSamePlanAppliedTwiceAtOnce(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"a": {Value: "a0"}}
	h.base(cfg)
	head := h.headSerial()
	p := h.plan(cfg.with(map[string]string{"a": "a1"}))

	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		outs  [2]*engine.ApplyOutcome
		errs  [2]error
	)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			outs[i], errs[i] = h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: p.ID, Actor: "alice"})
		}()
	}
	close(start)
	wg.Wait()

	winner, loser := 0, 1
	if errs[0] != nil {
		winner, loser = 1, 0
	}
	if errs[winner] != nil || outs[winner] == nil || outs[winner].Version == nil {
		t.Fatalf("no apply committed: %v; %v", errs[0], errs[1])
	}
	var se *engine.StatusError
	if !errors.As(errs[loser], &se) || !errors.Is(errs[loser], engine.ErrConflict) || se.Run != p.ID {
		t.Fatalf("second apply = %v, want a *StatusError on plan %s", errs[loser], p.ID)
	}
	if h.headSerial() != head+1 {
		t.Errorf("head = %d, want exactly one commit (%d)", h.headSerial(), head+1)
	}
	applies := h.applyRuns(p.ID)
	for _, r := range applies {
		if r.ID == outs[winner].Run.ID {
			if r.Status != engine.StatusApplied {
				t.Errorf("winner %s is %s", r.ID, r.Status)
			}
			continue
		}
		if r.Status != engine.StatusRefused || !r.End.Is(engine.CauseRefusedClaim) || r.End.Plan != p.ID || r.End.Err == "" ||
			r.End.Kind != engine.KindConflict || r.CommittedSerial != 0 {
			t.Errorf("losing apply run %s = status %s, end %+v, committed %d; want refused: claiming plan %s, a conflict", r.ID, r.Status, r.End, r.CommittedSerial, p.ID)
		}
		if m := h.marker(r.ID, engine.MarkerFailed); !m.End.Is(engine.CauseRefusedClaim) {
			t.Errorf("losing apply run %s: failed marker's end = %+v; want the refused claim", r.ID, m.End)
		}
	}
	if id := runErrorID(errs[loser]); id != "" {
		t.Logf("the loser lost the claim (apply run %s refused)", id)
	} else {
		t.Logf("the loser saw the plan already claimed before creating an apply run")
		if len(applies) != 1 {
			t.Errorf("apply runs of the plan = %d, want 1", len(applies))
		}
	}
	if pr := h.run(p.ID); pr.Status != engine.StatusApplied || pr.ApplyRun != outs[winner].Run.ID {
		t.Errorf("plan = status %s, apply run %s; want applied by %s", pr.Status, pr.ApplyRun, outs[winner].Run.ID)
	}
}

// TestLeaseLostBeforeCommit: A's reservations expire while Terraform runs
// (the store's clock jumps a minute ahead: the sweep ends A, fences its
// write set and fails its plan); B is refused over the fence until an
// operator unfences A; then B takes y and commits. A's
// commit then merges only what the head had not changed since its plan —
// x and z, not y — and A fails with ErrLeaseLost: B's update is not lost,
// A's work is not dropped, and the caller is told (docs/design.md apply step 6).
func TestLeaseLostBeforeCommit(t *testing.T) {
	t.Parallel()
	var skew atomic.Int64
	h := setup(t, sqlite.WithClock(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }))
	cfg := config{"x": {Value: "x0"}, "y": {Value: "y0"}}
	h.base(cfg)
	source := h.headSerial()
	gate, release := h.gate()
	a := h.plan(config{"x": {Value: "x1"}, "y": {Value: "y1"}, "z": {Value: "z1", Gate: gate}})
	b := h.plan(cfg.with(map[string]string{"y": "y2"}), actor("bob"))

	type result struct {
		out *engine.ApplyOutcome
		err error
	}
	doneA := make(chan result, 1)
	holder := h.applyInTerraform(a.ID, func(out *engine.ApplyOutcome, err error) { doneA <- result{out, err} })
	skew.Store(int64(time.Minute))
	// The sweep in Status expires A — unless A's own keep-alive renewal,
	// which runs the sweep too, got there first.
	st, err := h.eng.Status(h.ctx, testState)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if !slices.Contains(st.Expired, holder) && h.run(holder).Status != engine.StatusLeaseExpired {
		t.Fatalf("Status = %+v, run %s %s; want it expired", st, holder, h.run(holder).Status)
	}
	// A's Terraform started: its write set is fenced, and B is refused at
	// once, naming A (ADR 0035) — no wait would free it.
	_, err = h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: b.ID, State: testState, Actor: "bob", Wait: time.Minute})
	var fe *engine.FencedError
	if !errors.As(err, &fe) || len(fe.Blockers) != 1 || fe.Blockers[0].Run != holder || !fe.Blockers[0].Fenced || fe.Blockers[0].TerraformStarted.IsZero() {
		t.Fatalf("Apply B over A's fence = %v; want a *FencedError naming run %s, fenced, with its Terraform start", err, holder)
	}
	if pb := h.run(b.ID); pb.Status != engine.StatusPlanned {
		t.Fatalf("B's plan after the fenced refusal = %s; want planned (it may be applied once the fence is lifted)", pb.Status)
	}
	// An operator who checked the real objects lifts the fence: B goes ahead.
	if _, err := h.eng.Unfence(h.ctx, engine.UnfenceInput{Run: holder, By: "carol", Why: "checked y by hand"}); err != nil {
		t.Fatalf("Unfence %s: %v", holder, err)
	}
	outB := h.apply(b.ID)
	release()
	if outB.Version.Serial != source+1 || !sameSet(outB.Version.Changed, addrs("y")) {
		t.Fatalf("B committed %+v", outB.Version)
	}

	ra := <-doneA
	if !errors.Is(ra.err, engine.ErrLeaseLost) {
		t.Errorf("Apply A = %v, want ErrLeaseLost: its run failed", ra.err)
	}
	if ra.out == nil || ra.out.Version == nil {
		t.Fatalf("A committed nothing: %v", ra.err)
	}
	v := ra.out.Version
	p := v.Provenance
	// Terraform finished: not partial. y is kept at the head, and the drift
	// says why — B's version and run — so that what A did to y is not lost
	// silently.
	if v.Serial != source+2 || !sameSet(v.Changed, addrs("x", "z")) || p.Partial || p.Exact || p.Deviation == nil || !sameSet(p.Deviation.Kept, addrs("y")) {
		t.Errorf("A's version %d: changed %v, provenance %+v, drift %+v; want x and z merged, y kept, not partial", v.Serial, v.Changed, p, p.Deviation)
	}
	if p.Deviation == nil || len(p.Deviation.Lost) != 1 || p.Deviation.Lost[0].Address != "terraform_data.y" || p.Deviation.Lost[0].Serial != source+1 ||
		p.Deviation.Lost[0].Run != outB.Run.ID || p.Deviation.Lost[0].Actor != outB.Run.Actor {
		t.Errorf("A's drift lost = %+v; want y, kept as version %d by run %s", p.Deviation, source+1, outB.Run.ID)
	}
	run := h.run(holder)
	end := run.End
	if run.ID != ra.out.Run.ID || run.Status != engine.StatusFailed || !end.Is(engine.CauseLeaseLost) || !end.TerraformDone || end.Then != nil ||
		end.Serial != v.Serial || end.NoChange || len(end.Lost) != 1 || end.Lost[0].Address != "terraform_data.y" ||
		end.Lost[0].Serial != source+1 || end.Lost[0].Run != outB.Run.ID || end.Lost[0].Held ||
		!strings.Contains(ra.err.Error(), "import or remove it") {
		t.Errorf("A's apply run = %s status %s, end %+v, error %v; want lease lost after Terraform finished, version %d, y lost to B's version %d (run %s)",
			run.ID, run.Status, end, ra.err, v.Serial, source+1, outB.Run.ID)
	}
	for _, k := range []engine.MarkerKind{engine.MarkerLeaseExpired, engine.MarkerCommitted} {
		h.marker(run.ID, k)
	}
	if m := h.marker(run.ID, engine.MarkerFailed); !m.End.Is(engine.CauseLeaseLost) || len(m.End.Lost) != 1 {
		t.Errorf("A's failed marker's end = %+v; want the lease-lost commit with y lost", m.End)
	}
	if pr := h.run(a.ID); pr.Status != engine.StatusFailed || !pr.End.Is(engine.CauseApplyLeaseLost) || pr.End.Run != run.ID || pr.End.Serial != v.Serial {
		t.Errorf("A's plan = %s, end %+v; want failed: apply run %s lost its lease, version %d (not part-way)", pr.Status, pr.End, run.ID, v.Serial)
	}
	hs, _ := h.head()
	if got := hs.inputs(); got["x"] != "x1" || got["y"] != "y2" || got["z"] != "z1" {
		t.Errorf("head = %v; want A's x1 and z1, B's y2", got)
	}
	if rs := h.reservations(); len(rs) != 0 {
		t.Errorf("reservations left: %v", rs)
	}
}

// TestFencedHolderCommits: A's reservations expire while its Terraform
// runs (the store's clock jumps a minute ahead), so the sweep ends A and
// fences its write set (ADR 0035). A's holder was only paused: when its
// Terraform returns, nobody could have taken the fenced addresses, so its
// commit goes through as planned — exact, the plan applied — and lifts the
// fence ("fence-lifted", committed), with no "released" and no lease-lost
// path.
func TestFencedHolderCommits(t *testing.T) {
	t.Parallel()
	var skew atomic.Int64
	h := setup(t, sqlite.WithClock(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }))
	h.base(config{"x": {Value: "x0"}, "y": {Value: "y0"}})
	source := h.headSerial()
	gate, release := h.gate()
	a := h.plan(config{"x": {Value: "x1"}, "y": {Value: "y1"}, "z": {Value: "z1", Gate: gate}})
	done := make(chan error, 1)
	var out *engine.ApplyOutcome
	holder := h.applyInTerraform(a.ID, func(o *engine.ApplyOutcome, err error) { out = o; done <- err })
	skew.Store(int64(time.Minute))
	st, err := h.eng.Status(h.ctx, testState)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if len(st.Fenced) != 1 || st.Fenced[0].Run.ID != holder || len(st.Fenced[0].Fences) != 3 {
		t.Fatalf("Status.Fenced = %+v; want run %s fencing its 3 writes", st.Fenced, holder)
	}
	if r := h.run(holder); r.Status != engine.StatusLeaseExpired || len(r.End.Fenced) != 3 || !r.End.Recoverable {
		t.Fatalf("A after the sweep: %s, end %+v; want lease-expired, fenced, recoverable", r.Status, r.End)
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("Apply A after its fence stood: %v", err)
	}
	v := out.Version
	if v == nil || v.Serial != source+1 || !sameSet(v.Changed, addrs("x", "y", "z")) || !v.Provenance.Exact {
		t.Fatalf("A committed %+v; want version %d changing x, y, z exactly", v, source+1)
	}
	r := h.run(holder)
	if r.Status != engine.StatusApplied || !r.End.Is(engine.CauseApplied) || r.CommittedSerial != v.Serial {
		t.Errorf("A's run = %s, end %+v; want applied as version %d", r.Status, r.End, v.Serial)
	}
	if m := h.marker(holder, engine.MarkerFenceLifted); m.Lift != engine.LiftCommitted || len(m.Addresses) != 3 {
		t.Errorf("fence-lifted marker %+v; want lifted by its own commit, 3 addresses", m)
	}
	for _, m := range h.markers(holder) {
		if m.Kind == engine.MarkerReleased {
			t.Errorf("A's commit says released, but its reservations had become fences: %+v", m)
		}
	}
	if p := h.run(a.ID); p.Status != engine.StatusApplied {
		t.Errorf("A's plan = %s, end %+v; want applied", p.Status, p.End)
	}
	if rs := h.reservations(); len(rs) != 0 {
		t.Errorf("reservations left: %v", rs)
	}
}

// applyInTerraform applies plan (whose configuration holds a gate) in the
// background, calling finish with the outcome, and returns the apply run
// once its Terraform started — its "apply-started" marker, written just
// before Terraform runs: from then on a lapse of its lease fences its
// write set (ADR 0035), and the gate holds it in Terraform.
func (h *harness) applyInTerraform(plan string, finish func(*engine.ApplyOutcome, error)) string {
	h.t.Helper()
	go func() { finish(h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: plan, Actor: "alice"})) }()
	var holder string
	waitFor(h.t, 30*time.Second, "the apply to hold its reservations", func() bool {
		for _, r := range h.reservations() {
			holder = r.Run
			return true
		}
		return false
	})
	waitFor(h.t, 30*time.Second, "the apply to run Terraform (its apply-started marker)", func() bool {
		for _, m := range h.markers(holder) {
			if m.Kind == engine.MarkerApplyStarted {
				return true
			}
		}
		return false
	})
	return holder
}
