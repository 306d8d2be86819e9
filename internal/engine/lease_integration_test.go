package engine_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
)

// deadHolder is the holder of the runs a test leaves as a killed process
// would: open, and never renewed again.
var deadHolder = engine.Holder{Host: "dead-host", PID: 999}

// stuckApply stores what `kl apply PLAN` leaves when it is killed with
// kill -9 after claiming plan: an apply run in status waiting (or applying,
// with a "reserved" marker, when reserved) whose own lease ran out a minute
// ago and that holds no reservation, and the plan claimed by it.
func (h *harness) stuckApply(plan engine.Run, reserved bool) engine.Run {
	h.t.Helper()
	now := time.Now().UTC()
	a := engine.Run{
		ID: engine.NewRunID(), Kind: engine.KindApply, State: plan.State, Actor: "carol", Holder: deadHolder,
		Status: engine.StatusWaiting, End: &engine.End{Cause: engine.CauseWaiting, Blockers: []engine.Blocker{{Run: "01FINISHEDLONGAGO", Addresses: addrs("a")}}},
		CreatedAt: now.Add(-2 * time.Minute), PlanRun: plan.ID, LeaseUntil: now.Add(-time.Minute),
	}
	var ms []engine.Marker
	if reserved {
		a.Status, a.End = engine.StatusApplying, nil
		ms = append(ms, engine.Marker{Kind: engine.MarkerReserved, Count: 1, Addresses: plan.Envelope.Footprint.Write})
	}
	if err := h.store.CreateRun(h.ctx, a); err != nil {
		h.t.Fatalf("CreateRun: %v", err)
	}
	if len(ms) > 0 {
		if err := h.store.AddMarkers(h.ctx, a.ID, ms...); err != nil {
			h.t.Fatalf("AddMarkers: %v", err)
		}
	}
	if _, err := h.store.UpdateRun(h.ctx, plan.ID, []engine.RunStatus{engine.StatusPlanned}, func(r *engine.Run) error {
		r.Status, r.ApplyRun = engine.StatusApplying, a.ID
		return nil
	}); err != nil {
		h.t.Fatalf("claiming plan %s: %v", plan.ID, err)
	}
	return a
}

// TestDeadHolderRunsExpire: runs whose holder was killed without
// reservations — an apply waiting for them, a plan planning — are stored
// with a lease that ran out. The lease sweep Status starts with ends them
// (no longer active, lease-expired with the holder in the reason, a
// lease-expired marker), hands the waiting apply's plan back (planned:
// Terraform never ran) and fails the plan of an apply that had reserved;
// Why explains both; the plan handed back applies. Apply and Supersede of
// a plan stuck that way sweep first themselves.
func TestDeadHolderRunsExpire(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"a": {Value: "a0"}, "b": {Value: "b0"}, "c": {Value: "c0"}}
	h.base(cfg)
	waitPlan := h.plan(cfg.with(map[string]string{"a": "a1"}))
	reservedPlan := h.plan(cfg.with(map[string]string{"b": "b1"}))
	if waitPlan.LeaseUntil.IsZero() {
		t.Errorf("plan run %s stored without a lease", waitPlan.ID)
	}
	waiting := h.stuckApply(waitPlan, false)
	reserved := h.stuckApply(reservedPlan, true)
	now := time.Now().UTC()
	planning := engine.Run{
		ID: engine.NewRunID(), Kind: engine.KindPlan, State: testState, Actor: "carol", Holder: deadHolder,
		Status: engine.StatusPlanning, CreatedAt: now.Add(-2 * time.Minute), LeaseUntil: now.Add(-time.Minute),
	}
	if err := h.store.CreateRun(h.ctx, planning); err != nil {
		t.Fatal(err)
	}

	st, err := h.eng.Status(h.ctx, testState)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	if len(st.Active) != 0 {
		t.Errorf("Status lists %d active runs after the sweep; want none: %+v", len(st.Active), st.Active)
	}
	if !sameStrings(st.Expired, waiting.ID, reserved.ID, planning.ID) {
		t.Errorf("Status.Expired = %v; want %s, %s and %s", st.Expired, waiting.ID, reserved.ID, planning.ID)
	}
	for id, phase := range map[string]engine.Phase{waiting.ID: engine.PhaseWaiting, reserved.ID: engine.PhaseApplying, planning.ID: engine.PhasePlanning} {
		r := h.run(id)
		if r.Status != engine.StatusLeaseExpired || r.FinishedAt == nil || !r.End.Is(engine.CauseLeaseExpired) || r.End.Holder != deadHolder ||
			r.End.Phase != phase || r.End.LeaseEnd.IsZero() || r.End.Recoverable || len(r.End.Blockers) != 0 {
			t.Errorf("run %s = status %s, end %+v; want lease-expired while %s, naming %s and its lease end", id, r.Status, r.End, phase, deadHolder)
		}
		if m := h.marker(id, engine.MarkerLeaseExpired); !m.End.Is(engine.CauseLeaseExpired) || m.End.Holder != deadHolder {
			t.Errorf("run %s: lease-expired marker's end = %+v; want naming %s", id, m.End, deadHolder)
		}
	}
	if p := h.run(waitPlan.ID); p.Status != engine.StatusPlanned || p.ApplyRun != waiting.ID {
		t.Errorf("plan of the waiting apply = %s (apply %s); want planned again", p.Status, p.ApplyRun)
	}
	if p := h.run(reservedPlan.ID); p.Status != engine.StatusFailed || !p.End.Is(engine.CauseApplyLeaseExpired) || p.End.Run != reserved.ID ||
		p.End.Holder != deadHolder || p.End.Recoverable || !strings.Contains(report.EndText(p.ID, p.End), "re-plan") {
		t.Errorf("plan of the apply that had reserved = %s, end %+v (%q); want failed, naming it and its holder, saying re-plan", p.Status, p.End, report.EndText(p.ID, p.End))
	}

	// Why says lease-expired, never "waiting on" a run long gone.
	why, err := h.eng.Why(h.ctx, waitPlan.ID)
	if err != nil || why.Verdict != engine.VerdictPending || why.Apply == nil || why.Apply.ID != waiting.ID ||
		why.Apply.Status != engine.StatusLeaseExpired || !why.Apply.End.Is(engine.CauseLeaseExpired) || len(why.Apply.End.Blockers) != 0 ||
		strings.Contains(report.EndText(why.Apply.ID, why.Apply.End), "01FINISHEDLONGAGO") {
		t.Errorf("Why(plan) = %+v, %v; want pending, its last attempt lease-expired", why, err)
	}
	why, err = h.eng.Why(h.ctx, waiting.ID)
	if err != nil || why.Verdict != engine.VerdictFailed || !why.Run.End.Is(engine.CauseLeaseExpired) || why.Run.End.Holder != deadHolder ||
		len(why.Decisive) == 0 || why.Decisive[len(why.Decisive)-1].Kind != engine.MarkerLeaseExpired {
		t.Errorf("Why(expired apply) = %+v, %v; want failed with the lease-expired marker and the holder", why, err)
	}
	if why, err := h.eng.Why(h.ctx, planning.ID); err != nil || why.Verdict != engine.VerdictFailed || why.Run.Status != engine.StatusLeaseExpired ||
		!why.Run.End.Is(engine.CauseLeaseExpired) || why.Run.End.Phase != engine.PhasePlanning {
		t.Errorf("Why(expired plan) = %+v, %v; want failed, lease-expired while planning", why, err)
	}
	if _, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: reservedPlan.ID}); !errors.Is(err, engine.ErrConflict) {
		t.Errorf("Apply of the failed plan = %v; want refused", err)
	}
	out := h.apply(waitPlan.ID)
	if out.Run.Status != engine.StatusApplied {
		t.Errorf("apply of the plan handed back = %s", out.Run.Status)
	}

	// Stuck again, and nobody ran Status: Apply and Supersede sweep first.
	applyPlan := h.plan(cfg.with(map[string]string{"c": "c1"}))
	discardPlan := h.plan(cfg.with(map[string]string{"c": "c2"}), actor("dave"))
	h.stuckApply(applyPlan, false)
	h.stuckApply(discardPlan, false)
	if out := h.apply(applyPlan.ID); out.Run.Status != engine.StatusApplied {
		t.Errorf("apply of a plan stuck applying = %s", out.Run.Status)
	}
	if err := h.eng.Supersede(h.ctx, discardPlan.ID, engine.SupersededByClosedPR, &engine.PullRequest{Repo: "acme/infra", Number: 1}, ""); err != nil {
		t.Errorf("Supersede of a plan stuck applying: %v", err)
	}
}

// stalledStore is the real store as a stalled holder uses it: its run-lease
// renewals do nothing (the process is frozen, as under SIGSTOP or on a
// suspended laptop); everything else goes through.
type stalledStore struct{ engine.Store }

func (stalledStore) RenewRun(context.Context, string, time.Duration) error { return nil }

// TestWaitingApplyKeepsItsLease: an apply waiting for reservations longer
// than twice its lease is renewed (Status sweeping all along never ends
// it) and proceeds when the holder commits. A holder that stalls while
// waiting is ended by the sweep of its own next Acquire: its Apply fails
// with ErrLeaseLost, its run stays lease-expired (not overwritten), and its
// plan, handed back, applies later.
func TestWaitingApplyKeepsItsLease(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"x": {Value: "x0"}, "y": {Value: "y0"}, "z": {Value: "z0"}}
	h.base(cfg)
	gate, release := h.gate()
	slow := cfg.with(map[string]string{"x": "x1"})
	slow["x"] = res{Value: "x1", Gate: gate}
	// A locks the whole state (another engine on the same store), so that
	// B and C wait on it though they write other resources.
	log := slog.New(slog.NewTextHandler(newTestLogWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	engA := engine.New(h.store, h.eng.Terraform, log)
	engA.Lease, engA.Poll, engA.LockMode = h.eng.Lease, h.eng.Poll, engine.LockWholeState
	a := h.plan(slow)
	b := h.plan(cfg.with(map[string]string{"y": "y1"}), actor("bob"))
	c := h.plan(cfg.with(map[string]string{"z": "z1"}), actor("carol"))
	doneA := make(chan error, 1)
	go func() {
		_, err := engA.Apply(h.ctx, engine.ApplyInput{PlanRun: a.ID, Actor: "alice"})
		doneA <- err
	}()
	waitFor(t, 30*time.Second, "A to hold the whole state", func() bool { return len(h.reservations()) > 0 })

	type result struct {
		out *engine.ApplyOutcome
		err error
	}
	doneB := make(chan result, 1)
	started := time.Now()
	go func() {
		out, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: b.ID, Actor: "bob", Wait: time.Minute})
		doneB <- result{out, err}
	}()
	engC := engine.New(stalledStore{h.store}, h.eng.Terraform, log)
	engC.Lease, engC.Poll, engC.Holder = h.eng.Lease, h.eng.Poll, engine.Holder{Host: "frozen", PID: 4}
	doneC := make(chan result, 1)
	go func() {
		out, err := engC.Apply(h.ctx, engine.ApplyInput{PlanRun: c.ID, Actor: "carol", Wait: time.Minute})
		doneC <- result{out, err}
	}()

	// C stalls and is ended within about a lease; B, renewed, waits on.
	var rc result
	deadline := time.Now().Add(2*h.eng.Lease + 30*time.Second)
	for rc.err == nil && rc.out == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled apply C never ended")
		}
		if _, err := h.eng.Status(h.ctx, testState); err != nil {
			t.Fatalf("Status: %v", err)
		}
		select {
		case rc = <-doneC:
		case <-time.After(200 * time.Millisecond):
		}
	}
	if !errors.Is(rc.err, engine.ErrLeaseLost) {
		t.Errorf("Apply C (stalled) = %v; want ErrLeaseLost", rc.err)
	}
	stalled := h.run(runErrorID(rc.err))
	if frozen := (engine.Holder{Host: "frozen", PID: 4}); stalled.Status != engine.StatusLeaseExpired || !stalled.End.Is(engine.CauseLeaseExpired) ||
		stalled.End.Holder != frozen || stalled.End.Phase != engine.PhaseWaiting || stalled.CommittedSerial != 0 {
		t.Errorf("C's run = %s, end %+v, committed %d; want lease-expired while waiting naming %s, nothing committed", stalled.Status, stalled.End, stalled.CommittedSerial, frozen)
	}
	if n := len(kindsOf(h.markers(stalled.ID), engine.MarkerLeaseExpired)); n != 1 {
		t.Errorf("C has %d lease-expired markers, want 1", n)
	}
	if p := h.run(c.ID); p.Status != engine.StatusPlanned || p.ApplyRun != stalled.ID {
		t.Errorf("C's plan = %s (apply %s); want planned again", p.Status, p.ApplyRun)
	}

	// B waits past twice its lease, Status sweeping every 200ms: it stays
	// waiting, its lease renewed.
	for time.Since(started) < 2*h.eng.Lease+time.Second {
		st, err := h.eng.Status(h.ctx, testState)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		var bRun engine.Run
		for _, ar := range st.Active {
			if ar.Run.PlanRun == b.ID {
				bRun = ar.Run
			}
		}
		if bRun.Status != engine.StatusWaiting || bRun.LeaseUntil.IsZero() {
			t.Fatalf("B after %s of waiting = status %q, lease until %v; want waiting (expired: %v)",
				time.Since(started).Round(time.Millisecond), bRun.Status, bRun.LeaseUntil, st.Expired)
		}
		time.Sleep(200 * time.Millisecond)
	}
	release()
	if err := <-doneA; err != nil {
		t.Fatalf("Apply A: %v", err)
	}
	if rb := <-doneB; rb.err != nil || rb.out.Run.Status != engine.StatusApplied {
		t.Fatalf("Apply B = %v; want applied after waiting", rb.err)
	}
	if out := h.apply(c.ID); out.Run.Status != engine.StatusApplied {
		t.Errorf("apply of C's plan handed back = %s", out.Run.Status)
	}
	hs, _ := h.head()
	if got := hs.inputs(); got["x"] != "x1" || got["y"] != "y1" || got["z"] != "z1" {
		t.Errorf("head = %v", got)
	}
}

func kindsOf(ms []engine.Marker, k engine.MarkerKind) []engine.Marker {
	var out []engine.Marker
	for _, m := range ms {
		if m.Kind == k {
			out = append(out, m)
		}
	}
	return out
}

// sameStrings reports whether got holds exactly want, in any order.
func sameStrings(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	seen := map[string]int{}
	for _, s := range got {
		seen[s]++
	}
	for _, s := range want {
		if seen[s] == 0 {
			return false
		}
		seen[s]--
	}
	return true
}

// deadPlanning stores what `kl plan` leaves when it is killed with kill -9
// while Terraform plans: a plan run planning whose own lease ran out a
// minute ago.
func (h *harness) deadPlanning() engine.Run {
	h.t.Helper()
	now := time.Now().UTC()
	r := engine.Run{
		ID: engine.NewRunID(), Kind: engine.KindPlan, State: testState, Actor: "carol", Holder: deadHolder,
		Status: engine.StatusPlanning, CreatedAt: now.Add(-2 * time.Minute), LeaseUntil: now.Add(-time.Minute),
	}
	if err := h.store.CreateRun(h.ctx, r); err != nil {
		h.t.Fatalf("CreateRun: %v", err)
	}
	return r
}

// TestDeadPlanEveryViewAgrees: a plan whose holder was killed while
// planning reads as lease-expired in every view, each sweeping first as
// Status, RunStory and Why do — Runs (`kl runs`), History and SincePlan
// (`kl history --since-plan`, refused with words that say planning never
// finished, never an empty "(status planning: )") — and Why says failed,
// lease-expired, not pending: it can never be applied.
func TestDeadPlanEveryViewAgrees(t *testing.T) {
	t.Parallel()
	h := setup(t)

	viaRuns := h.deadPlanning()
	rs, err := h.eng.Runs(h.ctx, engine.RunQuery{Limit: 10})
	if err != nil {
		t.Fatalf("Runs: %v", err)
	}
	for _, r := range rs {
		if r.ID == viaRuns.ID && r.Status != engine.StatusLeaseExpired {
			t.Errorf("Runs lists the dead plan as %s; want lease-expired", r.Status)
		}
	}

	viaHistory := h.deadPlanning()
	if _, err := h.eng.History(h.ctx, testState, engine.HistoryQuery{Limit: 10}); err != nil {
		t.Fatalf("History: %v", err)
	}
	if r := h.run(viaHistory.ID); r.Status != engine.StatusLeaseExpired {
		t.Errorf("after History the dead plan is %s; want lease-expired", r.Status)
	}

	viaSincePlan := h.deadPlanning()
	_, err = h.eng.SincePlan(h.ctx, viaSincePlan.ID)
	if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "never finished planning") ||
		!strings.Contains(err.Error(), string(engine.StatusLeaseExpired)) || !strings.Contains(err.Error(), deadHolder.String()) ||
		strings.Contains(err.Error(), "planning: )") {
		t.Errorf("SincePlan of the dead plan = %v; want invalid: never finished planning, lease-expired, naming its holder", err)
	}

	viaWhy := h.deadPlanning()
	why, err := h.eng.Why(h.ctx, viaWhy.ID)
	if err != nil || why.Verdict != engine.VerdictFailed || why.Run.Status != engine.StatusLeaseExpired || why.Run.Envelope != nil ||
		!why.Run.End.Is(engine.CauseLeaseExpired) || why.Run.End.Phase != engine.PhasePlanning || why.Run.End.Holder != deadHolder ||
		!strings.Contains(report.EndText(why.Run.ID, why.Run.End), deadHolder.String()) {
		t.Fatalf("Why(dead plan) = %+v, %v; want failed: lease-expired while planning (never finished), naming the holder", why, err)
	}
	if len(why.Decisive) == 0 || why.Decisive[len(why.Decisive)-1].Kind != engine.MarkerLeaseExpired {
		t.Errorf("Why(dead plan).Decisive = %v; want its lease-expired marker", kinds(why.Decisive))
	}
}
