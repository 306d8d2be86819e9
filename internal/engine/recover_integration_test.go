package engine_test

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
)

// checkpointOf applies plan with the real Terraform runner outside any
// run — as a `kl apply` would, to the plan's own snapshot — and returns the
// first checkpoint (engine.ApplyRequest.Checkpoint) whose state satisfies
// want: what the store would hold had the holder died right then.
func (h *harness) checkpointOf(plan engine.Run, want func(headState) bool) []byte {
	h.t.Helper()
	get := func(name string) []byte {
		b, err := h.store.GetArtifact(h.ctx, plan.ID, name)
		if err != nil {
			h.t.Fatalf("GetArtifact %s: %v", name, err)
		}
		return b
	}
	base, err := h.store.Snapshot(h.ctx, testState, plan.Envelope.SourceSerial)
	if err != nil {
		h.t.Fatalf("Snapshot: %v", err)
	}
	var mu sync.Mutex
	var found []byte
	var seen []string
	_, err = h.eng.Terraform.Apply(h.ctx, engine.ApplyRequest{
		Run: "checkpoint-" + engine.NewRunID(), PlanFile: get(engine.ArtifactPlanFile), Config: get(engine.ArtifactConfig), Snapshot: base,
		Checkpoint: func(b []byte) {
			mu.Lock()
			defer mu.Unlock()
			hs := parseHead(h.t, b)
			seen = append(seen, strings.Join(slices.Sorted(maps.Keys(hs.inputs())), ","))
			if found == nil && want(hs) {
				found = bytes.Clone(b)
			}
		},
	})
	if err != nil {
		h.t.Fatalf("applying plan %s for its checkpoints: %v", plan.ID, err)
	}
	if found == nil {
		h.t.Fatalf("no checkpoint of plan %s was the one wanted; checkpoints held: %q", plan.ID, seen)
	}
	return found
}

// killedApply stores what `kl apply PLAN` leaves when it is killed with
// kill -9 while Terraform applies: an apply run applying, with "reserved"
// and "apply-started" markers, whose lease ran out a minute ago and that
// holds no reservation (they lapsed too), the plan claimed by it, and the
// last checkpoint of what Terraform wrote (none when checkpoint is nil).
// With a lease given, the run's lease ends then instead: a holder that may
// still be alive.
func (h *harness) killedApply(plan engine.Run, checkpoint []byte, lease ...time.Time) engine.Run {
	h.t.Helper()
	now := time.Now().UTC()
	a := engine.Run{
		ID: engine.NewRunID(), Kind: engine.KindApply, State: plan.State, Actor: "carol", Holder: deadHolder,
		Status: engine.StatusApplying, CreatedAt: now.Add(-2 * time.Minute), PlanRun: plan.ID, LeaseUntil: now.Add(-time.Minute),
	}
	if len(lease) > 0 {
		a.LeaseUntil = lease[0]
	}
	if err := h.store.CreateRun(h.ctx, a); err != nil {
		h.t.Fatalf("CreateRun: %v", err)
	}
	if err := h.store.AddMarkers(h.ctx, a.ID,
		engine.Marker{Kind: engine.MarkerReserved, Count: len(plan.Envelope.Reservations), Addresses: plan.Envelope.Footprint.Write},
		engine.Marker{Kind: engine.MarkerApplyStarted, Serial: plan.Envelope.SourceSerial}); err != nil {
		h.t.Fatalf("AddMarkers: %v", err)
	}
	if _, err := h.store.UpdateRun(h.ctx, plan.ID, []engine.RunStatus{engine.StatusPlanned}, func(r *engine.Run) error {
		r.Status, r.ApplyRun = engine.StatusApplying, a.ID
		return nil
	}); err != nil {
		h.t.Fatalf("claiming plan %s: %v", plan.ID, err)
	}
	if checkpoint != nil {
		if err := h.store.PutArtifact(h.ctx, a.ID, engine.ArtifactApplyCheckpoint, checkpoint); err != nil {
			h.t.Fatalf("PutArtifact: %v", err)
		}
	}
	return a
}

// TestRecover: an apply killed while Terraform applied (killedApply) had
// updated a, b and c and not yet created the slow d. Since, version N+1
// (another run) changed b, and a live run holds c. The lease sweep ends
// the run lease-expired and fails its plan, both reasons naming `kl run
// recover`; its story says what Terraform wrote that no version holds.
// Recover then commits version N+2 with a taken (the head had not changed
// it), b and c kept at the head, d planned but unchanged — partial, with
// drift and recovered markers; the run stays lease-expired and gains the
// version; the plan stays failed; the work dir the killed process left is
// removed. A second Recover is refused.
func TestRecover(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"a": {Value: "a0"}, "b": {Value: "b0"}, "c": {Value: "c0"}}
	h.base(cfg)
	source := h.headSerial()
	next := cfg.with(map[string]string{"a": "a1", "b": "b1", "c": "c1"})
	next["d"] = res{Value: "d1", Sleep: 4, DependsOn: []string{"a", "b", "c"}}
	plan := h.plan(next)
	checkpoint := h.checkpointOf(plan, func(hs headState) bool {
		in := hs.inputs()
		_, d := in["d"]
		return in["a"] == "a1" && in["b"] == "b1" && in["c"] == "c1" && !d
	})
	killed := h.killedApply(plan, checkpoint)

	// Meanwhile: another run changes b; another holds c.
	h.apply(h.plan(cfg.with(map[string]string{"b": "b2"})).ID)
	holder := engine.Run{ID: engine.NewRunID(), Kind: engine.KindApply, State: testState, Actor: "erin", Holder: h.eng.Holder,
		Status: engine.StatusApplying, CreatedAt: time.Now().UTC(), PlanRun: "01NOPLAN", LeaseUntil: time.Now().Add(time.Hour)}
	if err := h.store.CreateRun(h.ctx, holder); err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.Acquire(h.ctx, engine.AcquireRequest{State: testState, Run: holder.ID, Holder: h.eng.Holder, Lease: time.Hour,
		Reservations: []engine.Reservation{{Address: "terraform_data.c", Mode: engine.ModeWrite}}}); err != nil {
		t.Fatalf("Acquire: %v", err)
	}

	// The story after the sweep: lease-expired, recoverable.
	story, err := h.eng.RunStory(h.ctx, killed.ID)
	if err != nil {
		t.Fatalf("RunStory: %v", err)
	}
	hint := "`kl run recover " + killed.ID + "` commits what it last wrote"
	if r := story.Run; r.Status != engine.StatusLeaseExpired || !r.End.Is(engine.CauseLeaseExpired) || r.End.Holder != deadHolder || !r.End.Recoverable ||
		!strings.Contains(report.EndText(r.ID, r.End), hint) || r.CommittedSerial != 0 {
		t.Fatalf("killed run = %s, end %+v (%q), committed %d; want lease-expired, recoverable, naming the recovery, nothing committed",
			r.Status, r.End, report.EndText(r.ID, r.End), r.CommittedSerial)
	}
	if p := story.Plan; p.Status != engine.StatusFailed || !p.End.Is(engine.CauseApplyLeaseExpired) || p.End.Run != killed.ID || p.End.Holder != deadHolder ||
		!p.End.Recoverable || !strings.Contains(report.EndText(p.ID, p.End), hint) || !strings.Contains(report.EndText(p.ID, p.End), "Terraform had started applying") {
		t.Fatalf("plan = %s, end %+v (%q); want failed by apply run %s's lease, recoverable, naming the recovery", p.Status, p.End, report.EndText(p.ID, p.End), killed.ID)
	}
	rec := story.Recoverable
	if rec == nil || rec.Run != killed.ID || rec.Artifact != engine.ArtifactApplyCheckpoint || rec.BaseSerial != source ||
		!sameSet(rec.Changed, addrs("a", "b", "c")) {
		t.Fatalf("Recoverable = %+v; want the checkpoint changing a, b, c against serial %d", rec, source)
	}
	why, err := h.eng.Why(h.ctx, killed.ID)
	if err != nil {
		t.Fatalf("Why: %v", err)
	}
	if why.Recoverable == nil || !slices.ContainsFunc(why.Decisive, func(m engine.Marker) bool { return m.Kind == engine.MarkerApplyStarted }) {
		t.Fatalf("Why: recoverable %+v, decisive %v; want both the recoverable and the apply-started marker", why.Recoverable, kinds(why.Decisive))
	}

	headBefore := h.headSerial()
	// The killed process left its Terraform work dir behind (runs/<id>).
	workDir := filepath.Join(h.dir, "runs", killed.ID)
	if err := os.MkdirAll(filepath.Join(workDir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(workDir, "snapshot.tfstate"), checkpoint, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := h.eng.Recover(h.ctx, killed.ID)
	if _, serr := os.Stat(workDir); err == nil && serr != nil {
		// Its holder ran on another host, which may share this work root
		// (one volume, two containers) and still be writing in the dir:
		// the stale sweep removes it later. A holder of this host's dir is
		// removed (TestRecoverTakesTheWorkDirsNewerState).
		t.Errorf("work dir of the recovered run after Recover: %v; want it kept (its holder is on another host)", serr)
	}
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	v := out.Version
	if v == nil || v.Serial != headBefore+1 || h.headSerial() != v.Serial {
		t.Fatalf("Recover committed %+v; want version %d, the head", v, headBefore+1)
	}
	p := v.Provenance
	if p.Run != killed.ID || p.PlanRun != plan.ID || p.SourceSerial != source || !p.Partial || p.Exact || p.Deviation == nil {
		t.Fatalf("provenance = %+v; want the killed run's, partial, with drift", p)
	}
	if !sameSet(p.Deviation.Kept, addrs("b", "c")) || !sameSet(p.Deviation.Unchanged, addrs("d")) || len(p.Deviation.Overwritten) != 0 {
		t.Fatalf("drift = %+v; want b (the head changed it) and c (held by another run) kept, d unchanged", p.Deviation)
	}
	if !sameSet(v.Changed, addrs("a")) {
		t.Fatalf("version changed %v; want a only", v.Changed)
	}
	// Each kept address says why: b by the version that changed it, c by
	// the run that holds it.
	if l := p.Deviation.Lost; len(l) != 2 || l[0].Address != "terraform_data.b" || l[0].Serial != headBefore || l[0].Run == "" ||
		l[1].Address != "terraform_data.c" || l[1].Run != holder.ID || !l[1].Held {
		t.Fatalf("drift lost = %+v; want b kept for version %d, c held by run %s", l, headBefore, holder.ID)
	}
	hs, _ := h.head()
	if got := hs.inputs(); got["a"] != "a1" || got["b"] != "b2" || got["c"] != "c0" {
		t.Fatalf("head inputs = %v; want a1 (recovered), b2 (the newer version's), c0 (held by another run)", got)
	}
	if _, ok := hs.Resources["d"]; ok {
		t.Fatalf("head holds d, which Terraform never created")
	}
	if r := out.Run; r.Status != engine.StatusLeaseExpired || r.CommittedSerial != v.Serial || !r.End.Is(engine.CauseLeaseExpired) ||
		r.End.Holder != deadHolder || r.End.Recoverable {
		t.Fatalf("recovered run = %s, committed %d, end %+v; want lease-expired, committed %d, its end kept but no longer recoverable", r.Status, r.CommittedSerial, r.End, v.Serial)
	}
	if pl := h.run(plan.ID); pl.Status != engine.StatusFailed || !pl.End.Is(engine.CauseApplyRecovered) || pl.End.Run != killed.ID || pl.End.Serial != v.Serial {
		t.Fatalf("plan after recovery = %s, end %+v; want failed: apply run %s recovered as version %d", pl.Status, pl.End, killed.ID, v.Serial)
	}
	ms := h.markers(killed.ID)
	recovered := h.marker(killed.ID, engine.MarkerRecovered)
	if recovered.Serial != v.Serial || recovered.Extra["artifact"] != engine.ArtifactApplyCheckpoint || !sameSet(recovered.Addresses, addrs("b", "c")) {
		t.Fatalf("recovered marker = %+v; want version %d from the checkpoint, b and c kept", recovered, v.Serial)
	}
	if h.marker(killed.ID, engine.MarkerDeviation).Deviation == nil || h.marker(killed.ID, engine.MarkerCommitted).Serial != v.Serial {
		t.Fatalf("markers %v; want drift and committed", kinds(ms))
	}
	if slices.ContainsFunc(ms, func(m engine.Marker) bool { return m.Kind == engine.MarkerFailed }) {
		t.Fatalf("recovery added a failed marker: %v", kinds(ms))
	}
	story, err = h.eng.RunStory(h.ctx, killed.ID)
	if err != nil || story.Recoverable != nil || story.Version == nil || story.Version.Serial != v.Serial {
		t.Fatalf("story after recovery: %v, recoverable %+v, version %+v; want the version, nothing left to recover", err, story.Recoverable, story.Version)
	}

	// Exactly once.
	_, err = h.eng.Recover(h.ctx, killed.ID)
	var re *engine.RecoverError
	if !errors.As(err, &re) || !errors.Is(err, engine.ErrConflict) || !strings.Contains(err.Error(), "committed version") {
		t.Fatalf("second Recover = %v; want a *RecoverError (conflict) saying it committed", err)
	}
	if h.headSerial() != v.Serial {
		t.Fatalf("the second Recover moved the head to %d", h.headSerial())
	}

	// What the head says now is what Terraform did: planning the
	// configuration again creates only d (and updates b and c, kept at
	// the head), not a.
	again := h.plan(next)
	if w := again.Envelope.Footprint.Write; w.Contains("terraform_data.a") || !w.Contains("terraform_data.d") {
		t.Fatalf("re-plan writes %v; want d and not a", w)
	}
}

// TestRecoverConcurrently: two recoveries of one killed apply at once
// commit one version: the other is refused, and the head moves by one.
func TestRecoverConcurrently(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"a": {Value: "a0"}}
	h.base(cfg)
	next := cfg.with(map[string]string{"a": "a1"})
	next["slow"] = res{Value: "s", Sleep: 3, DependsOn: []string{"a"}}
	plan := h.plan(next)
	checkpoint := h.checkpointOf(plan, func(hs headState) bool {
		_, slow := hs.Resources["slow"]
		return hs.inputs()["a"] == "a1" && !slow
	})
	killed := h.killedApply(plan, checkpoint)
	before := h.headSerial()

	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = h.eng.Recover(h.ctx, killed.ID)
		})
	}
	close(start)
	wg.Wait()
	ok := 0
	for i, err := range errs {
		var re *engine.RecoverError
		switch {
		case err == nil:
			ok++
		case errors.As(err, &re) && errors.Is(err, engine.ErrConflict):
		default:
			t.Errorf("recovery %d: %v; want success or a conflict refusal", i, err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d recoveries committed (errors %v); want exactly one", ok, errs)
	}
	if got := h.headSerial(); got != before+1 {
		t.Fatalf("head %d; want %d: one version", got, before+1)
	}
	mine := 0
	for _, v := range h.versions() {
		if v.Provenance.Run == killed.ID {
			mine++
		}
	}
	if mine != 1 {
		t.Fatalf("%d versions by the killed run; want 1", mine)
	}
	if got := len(slices.DeleteFunc(h.markers(killed.ID), func(m engine.Marker) bool { return m.Kind != engine.MarkerRecovered })); got != 1 {
		t.Fatalf("%d recovered markers; want 1", got)
	}
}

// TestRecoverRefuses: Recover refuses, with a reason the user can act on,
// every run it must not touch, and changes nothing.
func TestRecoverRefuses(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"a": {Value: "a0"}, "b": {Value: "b0"}}
	applied := h.base(cfg)
	noChanges, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: h.plan(cfg).ID, Actor: "alice"})
	if err != nil {
		t.Fatalf("Apply of a plan without changes: %v", err)
	}
	// Running: its lease is live (its holder may be working).
	running := h.plan(cfg.with(map[string]string{"a": "a1"}))
	live := h.killedApply(running, nil, time.Now().Add(time.Hour))
	// Died before Terraform wrote anything Kilolock saw.
	unseen := h.killedApply(h.plan(cfg.with(map[string]string{"b": "b1"})), nil)
	// Its checkpoint is its starting snapshot: Terraform changed nothing.
	nothingPlan := h.plan(cfg.with(map[string]string{"b": "b2"}))
	base, err := h.store.Snapshot(h.ctx, testState, nothingPlan.Envelope.SourceSerial)
	if err != nil {
		t.Fatal(err)
	}
	nothing := h.killedApply(nothingPlan, base)
	// Refused before Terraform ran.
	blockerPlan := h.plan(cfg.with(map[string]string{"a": "a3"}))
	blocker := engine.Run{ID: engine.NewRunID(), Kind: engine.KindApply, State: testState, Actor: "erin", Holder: h.eng.Holder,
		Status: engine.StatusApplying, CreatedAt: time.Now().UTC(), PlanRun: "01NOPLAN", LeaseUntil: time.Now().Add(time.Hour)}
	if err := h.store.CreateRun(h.ctx, blocker); err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.Acquire(h.ctx, engine.AcquireRequest{State: testState, Run: blocker.ID, Holder: h.eng.Holder, Lease: time.Hour,
		Reservations: []engine.Reservation{{Address: "terraform_data.a", Mode: engine.ModeWrite}}}); err != nil {
		t.Fatal(err)
	}
	_, err = h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: blockerPlan.ID, Actor: "alice"})
	refused := runErrorID(err)
	if refused == "" {
		t.Fatalf("Apply against a held reservation = %v; want a refusal naming its run", err)
	}

	tests := []struct {
		name string
		run  string
		is   error
		says string
	}{
		{"unknown run", "01NOSUCHRUN0000000000000000", engine.ErrNotFound, "does not exist"},
		{"plan run", applied.Run.PlanRun, engine.ErrInvalid, "it is a plan run: recover the apply run that applied it, " + applied.Run.ID},
		{"committed run", applied.Run.ID, engine.ErrConflict, "committed version"},
		{"plan without changes", noChanges.Run.ID, engine.ErrInvalid, "the plan has no changes"},
		{"refused run", refused, engine.ErrInvalid, "refused before Terraform ran"},
		{"still running", live.ID, engine.ErrConflict, "may still be running; wait for the lease"},
		{"no checkpoint", unseen.ID, engine.ErrNotFound, "Terraform wrote nothing Kilolock saw"},
		{"checkpoint changes nothing", nothing.ID, engine.ErrNotFound, "changes nothing"},
	}
	head := h.headSerial()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.eng.Recover(h.ctx, tc.run)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("Recover = %v; want %v saying %q", err, tc.is, tc.says)
			}
			var re *engine.RecoverError
			if tc.is != engine.ErrNotFound || tc.name != "unknown run" {
				if !errors.As(err, &re) || re.Run != tc.run {
					t.Fatalf("Recover = %T %v; want a *RecoverError naming %s", err, err, tc.run)
				}
			}
			if h.headSerial() != head {
				t.Fatalf("a refused recovery moved the head")
			}
		})
	}
	if r := h.run(live.ID); r.Status != engine.StatusApplying || r.CommittedSerial != 0 {
		t.Fatalf("the running run was touched: %s, %d", r.Status, r.CommittedSerial)
	}
}

// TestApplyNoChanges: applying a plan without changes (Terraform said "No
// changes": empty write set, no reservations) reserves nothing, runs no
// Terraform and commits nothing: the run and the plan end applied, with a
// reason saying so and an "applied" marker of count 0; the head stays.
func TestApplyNoChanges(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"a": {Value: "a0"}}
	h.base(cfg)
	head := h.headSerial()
	plan := h.plan(cfg)
	if env := plan.Envelope; !env.Summary.Empty() || len(env.Reservations) != 0 || len(env.Footprint.Write) != 0 {
		t.Fatalf("plan of an unchanged configuration: summary %+v, %d reservations, write %v; want no changes", env.Summary, len(env.Reservations), env.Footprint.Write)
	}
	out, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: plan.ID, State: testState, Actor: "alice"})
	if err != nil {
		t.Fatalf("Apply of a plan without changes: %v", err)
	}
	if out.Version != nil || out.Run.Status != engine.StatusApplied || out.Run.CommittedSerial != 0 ||
		!out.Run.End.Is(engine.CauseNothingToApply) || out.Run.FinishedAt == nil ||
		report.EndText(out.Run.ID, out.Run.End) != "the plan has no changes: nothing applied, nothing committed" {
		t.Fatalf("outcome = %+v (%q), version %v; want applied, nothing committed, with the end saying so", out.Run, report.EndText(out.Run.ID, out.Run.End), out.Version)
	}
	if got := kinds(h.markers(out.Run.ID)); !slices.Equal(got, []engine.MarkerKind{engine.MarkerApplied}) {
		t.Fatalf("markers %v; want only applied", got)
	}
	if m := h.marker(out.Run.ID, engine.MarkerApplied); m.Count != 0 || len(m.Addresses) != 0 || !m.End.Is(engine.CauseNothingToApply) {
		t.Fatalf("applied marker %+v; want count 0, Terraform not run", m)
	}
	if p := h.run(plan.ID); p.Status != engine.StatusApplied || p.ApplyRun != out.Run.ID {
		t.Fatalf("plan = %s by %s; want applied by %s", p.Status, p.ApplyRun, out.Run.ID)
	}
	if h.headSerial() != head || len(h.reservations()) != 0 {
		t.Fatalf("head %d (want %d), reservations %v", h.headSerial(), head, h.reservations())
	}
	_, err = h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: plan.ID, Actor: "alice"})
	var se *engine.StatusError
	if !errors.As(err, &se) || se.Status != engine.StatusApplied {
		t.Fatalf("second Apply = %v; want refused: applied", err)
	}
}

// TestApplyStartedMarker: an apply says that Terraform ran, just before it
// did, with the serial of the snapshot it applied to.
func TestApplyStartedMarker(t *testing.T) {
	t.Parallel()
	h := setup(t)
	out := h.base(config{"a": {Value: "a0"}})
	ms := kinds(h.markers(out.Run.ID))
	i, j := slices.Index(ms, engine.MarkerApplyStarted), slices.Index(ms, engine.MarkerApplied)
	if i < 0 || j < i || slices.Index(ms, engine.MarkerStalenessPassed) > i {
		t.Fatalf("markers %v; want apply-started after the preflight and before applied", ms)
	}
	plan := h.run(out.Run.PlanRun)
	if m := h.marker(out.Run.ID, engine.MarkerApplyStarted); m.Serial != plan.Envelope.SourceSerial {
		t.Fatalf("apply-started serial %d; want the plan's source serial %d", m.Serial, plan.Envelope.SourceSerial)
	}
	// Committed: the checkpoint and the result went with the commit (ADR 0063).
	for _, name := range engine.GCStateArtifacts {
		if _, err := h.store.GetArtifact(h.ctx, out.Run.ID, name); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("%s of the committed run: %v; want deleted with the commit", name, err)
		}
	}
}

// TestRecoverAfterRetention (ADR 0063): an apply killed mid-apply, never
// fenced (it held no reservation when its lease ran out) and never
// recovered, loses its checkpoint to the gc once the retention has passed;
// Recover then says retention deleted it, and when, instead of "Terraform
// wrote nothing Kilolock saw".
func TestRecoverAfterRetention(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"a": {Value: "a0"}}
	h.base(cfg)
	plan := h.plan(cfg.with(map[string]string{"a": "a1"}))
	killed := h.killedApply(plan, []byte(`{"version":4}`))
	if _, err := h.store.ExpireLeases(h.ctx); err != nil {
		t.Fatal(err)
	}
	if r := h.run(killed.ID); r.Status != engine.StatusLeaseExpired || r.CommittedSerial != 0 {
		t.Fatalf("the killed apply is %s, committed %d; want lease-expired, not committed", r.Status, r.CommittedSerial)
	}
	time.Sleep(2 * time.Millisecond)
	res, err := h.eng.GC(h.ctx, engine.GCRequest{Retention: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	gone := false
	for _, d := range res.Deleted {
		gone = gone || (d.Run == killed.ID && d.Name == engine.ArtifactApplyCheckpoint && d.Why == engine.GCRetention)
	}
	if !gone {
		t.Fatalf("gc deleted %+v; want the killed apply's checkpoint, by retention", res.Deleted)
	}
	_, err = h.eng.Recover(h.ctx, killed.ID)
	var re *engine.RecoverError
	if !errors.As(err, &re) || !errors.Is(err, engine.ErrNotFound) ||
		!strings.Contains(err.Error(), "apply-checkpoint.tfstate of run "+killed.ID+" was deleted by retention (1ms) on 20") {
		t.Fatalf("Recover after the gc = %v; want a *RecoverError saying retention deleted the checkpoint, and when", err)
	}
}
