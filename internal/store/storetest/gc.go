package storetest

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/seal"
)

// The gc contract (ADR 0063): the state artifacts of an apply go with its
// commit; a closed plan's saved plan, configuration archive and -var values
// go after the retention; nothing a fenced run, an open plan or a run in
// progress needs goes; and a gc running beside claims and commits loses
// nothing they need.

// collector is the store's engine.Collector; the suite fails when it has
// none.
func (f *fixture) collector() engine.Collector {
	f.t.Helper()
	c, ok := f.s.(engine.Collector)
	if !ok {
		f.t.Fatalf("%T is no engine.Collector", f.s)
	}
	return c
}

// gc runs a gc with retention, dry or not.
func (f *fixture) gc(retention time.Duration, dry bool) engine.GCResult {
	f.t.Helper()
	res, err := f.collector().GC(f.ctx, engine.GCRequest{Retention: retention, DryRun: dry})
	if err != nil {
		f.t.Fatalf("GC(%s, dry %v): %v", retention, dry, err)
	}
	return res
}

// putArtifacts stores each name of run with a body of its own.
func (f *fixture) putArtifacts(run string, names ...string) {
	f.t.Helper()
	for _, n := range names {
		if err := f.s.PutArtifact(f.ctx, run, n, []byte("body of "+n+" of "+run)); err != nil {
			f.t.Fatalf("PutArtifact(%s, %s): %v", run, n, err)
		}
	}
}

// artifactsOf returns which of the artifacts a run may have are stored
// for run, sorted.
func (f *fixture) artifactsOf(run string) []string {
	f.t.Helper()
	out := []string{}
	for _, n := range allArtifacts {
		_, err := f.s.GetArtifact(f.ctx, run, n)
		switch {
		case err == nil:
			out = append(out, n)
		case !errors.Is(err, engine.ErrNotFound):
			f.t.Fatalf("GetArtifact(%s, %s): %v", run, n, err)
		}
	}
	sort.Strings(out)
	return out
}

var (
	// sorted by name, as artifactsOf returns them
	planArtifacts = []string{engine.ArtifactWholeConfig, engine.ArtifactConfig, engine.ArtifactDiff, engine.ArtifactIntent, engine.ArtifactPlanFile, engine.ArtifactVars}
	applyArtifact = []string{engine.ArtifactApplyCheckpoint, engine.ArtifactApplyLog, engine.ArtifactApplyResult}
	allArtifacts  = append(append([]string{}, planArtifacts...), applyArtifact...)
	// What a report shows stays.
	planShown = []string{engine.ArtifactDiff, engine.ArtifactIntent}
)

// finished returns a mod closing a run at at.
func finished(status engine.RunStatus, at time.Time) func(*engine.Run) {
	return func(r *engine.Run) { r.Status, r.FinishedAt, r.UpdatedAt, r.CreatedAt = status, &at, at, at }
}

// deleted is a GCResult's deletions as "run artifact why", sorted.
func deleted(res engine.GCResult) []string {
	out := []string{}
	for _, d := range res.Deleted {
		out = append(out, fmt.Sprintf("%s %s %s", d.Run, d.Name, d.Why))
	}
	sort.Strings(out)
	return out
}

func testGC(t *testing.T, newStore func(t *testing.T) engine.Store) {
	t.Run("CommitDeletesStateArtifacts", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		a := f.apply("s", nil)
		f.putArtifacts(a.ID, applyArtifact...)
		f.commit("s", a.ID, "terraform_data.a")
		diff(t, "artifacts of the committed run", f.artifactsOf(a.ID), []string{engine.ArtifactApplyLog})
	})
	t.Run("FailedCommitKeepsThem", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		a := f.apply("s", nil)
		f.putArtifacts(a.ID, applyArtifact...)
		_, err := f.s.Commit(f.ctx, engine.CommitRequest{State: "s", Run: a.ID, Merge: func(engine.Version, []byte) (engine.CommitResult, error) {
			return engine.CommitResult{}, errors.New("merge refused")
		}})
		if err == nil {
			t.Fatal("Commit with a failing merge succeeded")
		}
		diff(t, "artifacts after the failed commit", f.artifactsOf(a.ID), applyArtifact)
	})
	t.Run("LateResultKept", func(t *testing.T) {
		// ADR 0071: a recovered run whose holder came back keeps
		// Terraform's final state for its second recovery, whatever the
		// retention; a recovered run without one does not.
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		old := now().Add(-3 * time.Hour)
		late := f.run("s", engine.KindApply, engine.StatusLeaseExpired, finished(engine.StatusLeaseExpired, old), func(r *engine.Run) {
			r.CommittedSerial = 1
			r.End = &engine.End{Cause: engine.CauseRecoveredMeanwhile, Serial: 1, Artifact: engine.ArtifactApplyResult, Recoverable: true}
		})
		done := f.run("s", engine.KindApply, engine.StatusLeaseExpired, finished(engine.StatusLeaseExpired, old), func(r *engine.Run) {
			r.CommittedSerial = 1
			r.End = &engine.End{Cause: engine.CauseRecoveredMeanwhile, Serial: 1, Artifact: engine.ArtifactApplyResult, LateSerial: 2}
		})
		f.putArtifacts(late.ID, engine.ArtifactApplyResult)
		f.putArtifacts(done.ID, engine.ArtifactApplyResult)
		diff(t, "gc deletions", deleted(f.gc(time.Minute, false)), []string{done.ID + " apply-result.tfstate committed"})
		diff(t, "artifacts of the late run", f.artifactsOf(late.ID), []string{engine.ArtifactApplyResult})
	})
	t.Run("Retention", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		old := now().Add(-3 * time.Hour)
		open := f.run("s", engine.KindPlan, engine.StatusPlanned, func(r *engine.Run) { r.CreatedAt, r.UpdatedAt = old, old })
		closedOld := f.run("s", engine.KindPlan, engine.StatusSuperseded, finished(engine.StatusSuperseded, old))
		closedNew := f.run("s", engine.KindPlan, engine.StatusApplied, finished(engine.StatusApplied, now()))
		c := f.claim("s", engine.StatusApplying, leased(live()))
		// A run committed before ADR 0063 kept its state artifacts: an existing store.
		committed := f.run("s", engine.KindApply, engine.StatusApplied, finished(engine.StatusApplied, now()), func(r *engine.Run) { r.CommittedSerial = 1 })
		failed := f.run("s", engine.KindApply, engine.StatusFailed, finished(engine.StatusFailed, old))
		for _, r := range []engine.Run{open, closedOld, closedNew, c.plan} {
			f.putArtifacts(r.ID, planArtifacts...)
		}
		for _, r := range []engine.Run{c.apply, committed, failed} {
			f.putArtifacts(r.ID, applyArtifact...)
		}
		want := []string{
			closedOld.ID + " config-whole.tar.gz retention", closedOld.ID + " config.tar.gz retention", closedOld.ID + " plan.tfplan retention", closedOld.ID + " vars.json retention",
			committed.ID + " apply-checkpoint.tfstate committed", committed.ID + " apply-result.tfstate committed",
			failed.ID + " apply-checkpoint.tfstate retention", failed.ID + " apply-result.tfstate retention",
		}
		sort.Strings(want)

		dry := f.gc(time.Hour, true)
		diff(t, "a dry run's list", deleted(dry), want)
		if !dry.DryRun || dry.Runs != 3 || dry.Bytes <= 0 {
			t.Fatalf("dry run: DryRun %v, %d runs, %d bytes; want true, 3 runs and their sizes", dry.DryRun, dry.Runs, dry.Bytes)
		}
		diff(t, "artifacts of the old closed plan after a dry run", f.artifactsOf(closedOld.ID), planArtifacts)

		res := f.gc(time.Hour, false)
		diff(t, "what the gc deleted", deleted(res), want)
		if res.Bytes != dry.Bytes || res.Runs != 3 {
			t.Fatalf("gc freed %d bytes of %d runs, its dry run said %d of 3", res.Bytes, res.Runs, dry.Bytes)
		}
		var sum int64
		for _, d := range res.Deleted {
			// Its stored size: the content's, or the sealed blob's when
			// the store seals (the adapters' TestContractSealed, key k1).
			if want := int64(len("body of " + d.Name + " of " + d.Run)); d.Bytes != want && d.Bytes != want+int64(seal.Overhead("k1")) {
				t.Fatalf("%s of %s: %d bytes, want %d", d.Name, d.Run, d.Bytes, want)
			}
			sum += d.Bytes
		}
		if sum != res.Bytes {
			t.Fatalf("Bytes %d, the deletions sum to %d", res.Bytes, sum)
		}
		diff(t, "the old closed plan keeps what its story shows", f.artifactsOf(closedOld.ID), planShown)
		for _, r := range []engine.Run{open, closedNew, c.plan} {
			diff(t, "plan "+string(r.Status)+" keeps its artifacts", f.artifactsOf(r.ID), planArtifacts)
		}
		diff(t, "the apply in progress keeps its artifacts", f.artifactsOf(c.apply.ID), applyArtifact)
		diff(t, "the committed run", f.artifactsOf(committed.ID), []string{engine.ArtifactApplyLog})
		diff(t, "the failed run", f.artifactsOf(failed.ID), []string{engine.ArtifactApplyLog})

		var ms []engine.Marker
		for _, m := range f.markers(closedOld.ID) {
			if m.Kind == engine.MarkerArtifactsDeleted {
				ms = append(ms, m)
			}
		}
		if len(ms) != 1 || ms[0].Extra["artifacts"] != "config-whole.tar.gz,config.tar.gz,plan.tfplan,vars.json" || ms[0].Extra["retention"] != "1h0m0s" || ms[0].Reason != engine.GCRetention || ms[0].At.Before(closedNew.CreatedAt.Add(-time.Minute)) {
			t.Fatalf("markers of the old closed plan: %+v; want one artifacts-deleted marker naming the four and the retention", ms)
		}
		for _, r := range []string{committed.ID, closedNew.ID} {
			for _, m := range f.markers(r) {
				if m.Kind == engine.MarkerArtifactsDeleted {
					t.Fatalf("run %s has an artifacts-deleted marker: only retention writes one", r)
				}
			}
		}
		if again := f.gc(time.Hour, false); len(again.Deleted) != 0 || again.Runs != 0 || again.Bytes != 0 {
			t.Fatalf("a second gc deleted %v", deleted(again))
		}
	})
	t.Run("Off", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		old := now().Add(-24 * time.Hour)
		closed := f.run("s", engine.KindPlan, engine.StatusStale, finished(engine.StatusStale, old))
		failed := f.run("s", engine.KindApply, engine.StatusFailed, finished(engine.StatusFailed, old))
		committed := f.run("s", engine.KindApply, engine.StatusApplied, finished(engine.StatusApplied, old), func(r *engine.Run) { r.CommittedSerial = 1 })
		f.putArtifacts(closed.ID, planArtifacts...)
		f.putArtifacts(failed.ID, applyArtifact...)
		f.putArtifacts(committed.ID, applyArtifact...)
		diff(t, "gc with retention off", deleted(f.gc(0, false)), []string{
			committed.ID + " apply-checkpoint.tfstate committed", committed.ID + " apply-result.tfstate committed"})
		diff(t, "the closed plan", f.artifactsOf(closed.ID), planArtifacts)
		diff(t, "the failed run", f.artifactsOf(failed.ID), applyArtifact)
	})
	t.Run("FencedRunKeepsItsAndItsPlans", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		c, _ := f.fencedApply("s")
		f.putArtifacts(c.plan.ID, planArtifacts...)
		f.putArtifacts(c.apply.ID, applyArtifact...)
		if got := f.getRun(c.plan.ID).Status; got.Open() {
			t.Fatalf("the fenced apply's plan is %s, want closed", got)
		}
		time.Sleep(time.Millisecond)
		if res := f.gc(time.Nanosecond, false); len(res.Deleted) != 0 {
			t.Fatalf("gc beside a fence deleted %v", deleted(res))
		}
		diff(t, "the fenced apply", f.artifactsOf(c.apply.ID), applyArtifact)
		diff(t, "its plan", f.artifactsOf(c.plan.ID), planArtifacts)
		if _, err := f.s.LiftFence(f.ctx, c.apply.ID, "carol", "checked the objects"); err != nil {
			t.Fatalf("LiftFence: %v", err)
		}
		// Unfenced, the run is still recoverable (ADR 0035): its state
		// artifacts stay for the retention, counted from the lift.
		if res := f.gc(time.Hour, false); len(res.Deleted) != 0 {
			t.Fatalf("gc right after the unfence deleted %v", deleted(res))
		}
		time.Sleep(time.Millisecond)
		diff(t, "gc a retention after the unfence", deleted(f.gc(time.Nanosecond, false)), []string{
			c.apply.ID + " apply-checkpoint.tfstate retention", c.apply.ID + " apply-result.tfstate retention",
			c.plan.ID + " config-whole.tar.gz retention", c.plan.ID + " config.tar.gz retention", c.plan.ID + " plan.tfplan retention", c.plan.ID + " vars.json retention"})
	})
	t.Run("NegativeRetention", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		_, err := f.collector().GC(f.ctx, engine.GCRequest{Retention: -time.Second})
		wantErr(t, "GC with a negative retention", err, engine.ErrInvalid)
	})
	t.Run("BesideClaimsAndCommits", func(t *testing.T) { t.Parallel(); testGCRace(t, newStore) })
}

// testGCRace runs gcs with a retention of 1 ns — everything closed is due
// — beside, for each of several plans, an apply claiming it and a discard
// superseding it at once, and for each of several applies, its commit.
// Whichever wins, nothing needed is lost: a plan claimed has its saved
// plan, configuration and -var values; a plan superseded loses them to
// the gc; a committed apply has no state artifacts left, an apply not yet
// committed has them.
func testGCRace(t *testing.T, newStore func(t *testing.T) engine.Store) {
	f := setup(t, newStore)
	f.state("s")
	const n = 8
	var plans, applies []engine.Run
	for range n {
		p := f.run("s", engine.KindPlan, engine.StatusPlanned)
		f.putArtifacts(p.ID, planArtifacts...)
		plans = append(plans, p)
		a := f.apply("s", nil)
		f.putArtifacts(a.ID, applyArtifact...)
		applies = append(applies, a)
	}
	claimed := make([]bool, n)
	stop := make(chan struct{})
	var wg, gcs sync.WaitGroup
	errs := make(chan error, 4*n+8)
	for range 2 {
		gcs.Add(1)
		go func() {
			defer gcs.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := f.collector().GC(f.ctx, engine.GCRequest{Retention: time.Nanosecond}); err != nil {
					errs <- fmt.Errorf("GC: %w", err)
					return
				}
			}
		}()
	}
	for i := range n {
		wg.Add(3)
		go func() { // an apply claims the plan, then reads what it applies
			defer wg.Done()
			_, err := f.s.UpdateRun(f.ctx, plans[i].ID, []engine.RunStatus{engine.StatusPlanned}, func(r *engine.Run) error {
				r.Status, r.ApplyRun = engine.StatusApplying, "claim-"+plans[i].ID
				return nil
			})
			var se *engine.StatusError
			if errors.As(err, &se) {
				return // the discard won
			}
			if err != nil {
				errs <- fmt.Errorf("claiming %s: %w", plans[i].ID, err)
				return
			}
			claimed[i] = true
			time.Sleep(time.Millisecond) // let a gc run between the claim and the reads
			for _, name := range engine.GCPlanArtifacts {
				if _, err := f.s.GetArtifact(f.ctx, plans[i].ID, name); err != nil {
					errs <- fmt.Errorf("the claimed plan %s lost %s: %w", plans[i].ID, name, err)
				}
			}
		}()
		go func() { // a discard supersedes it
			defer wg.Done()
			_, err := f.s.UpdateRun(f.ctx, plans[i].ID, []engine.RunStatus{engine.StatusPlanned}, func(r *engine.Run) error {
				t := time.Now().UTC()
				r.Status, r.FinishedAt = engine.StatusSuperseded, &t
				return nil
			})
			var se *engine.StatusError
			if err != nil && !errors.As(err, &se) {
				errs <- fmt.Errorf("superseding %s: %w", plans[i].ID, err)
			}
		}()
		go func() { // an apply commits
			defer wg.Done()
			if _, err := f.s.Commit(f.ctx, engine.CommitRequest{State: "s", Run: applies[i].ID, Merge: Merge(applies[i].ID, engine.Address(fmt.Sprintf("terraform_data.r%d", i)))}); err != nil {
				errs <- fmt.Errorf("committing %s: %w", applies[i].ID, err)
			}
		}()
	}
	wg.Wait()
	time.Sleep(time.Millisecond)
	close(stop)
	gcs.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	f.gc(time.Nanosecond, false)
	for i, p := range plans {
		if claimed[i] {
			diff(t, "the claimed plan "+p.ID, f.artifactsOf(p.ID), planArtifacts)
		} else {
			diff(t, "the superseded plan "+p.ID, f.artifactsOf(p.ID), planShown)
		}
		diff(t, "the committed apply "+applies[i].ID, f.artifactsOf(applies[i].ID), []string{engine.ArtifactApplyLog})
	}
}
