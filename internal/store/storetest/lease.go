package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// Run leases (engine.Run.LeaseUntil): a run in progress whose holder died
// without reservations — killed while planning, or while waiting for its
// reservations — is ended by the lease sweep like a run whose reservations
// lapsed, and the plan an expired apply claimed is handed back. Leases the
// suite wants lapsed are set an hour in the past, so no test sleeps for
// them and a store whose clock is the database's agrees.

// lapsed and live are run leases that ended long ago and end far ahead.
func lapsed() time.Time { return now().Add(-time.Hour) }
func live() time.Time   { return now().Add(time.Hour) }

// leased returns a mod setting a run's own lease.
func leased(until time.Time) func(*engine.Run) {
	return func(r *engine.Run) { r.LeaseUntil = until }
}

// claim is a plan run claimed by an apply run (plan applying, ApplyRun; the
// apply's PlanRun), both created on state with the mods given.
type claim struct{ plan, apply engine.Run }

func (f *fixture) claim(state string, applyStatus engine.RunStatus, applyMods ...func(*engine.Run)) claim {
	f.t.Helper()
	applyID := newID()
	plan := f.run(state, engine.KindPlan, engine.StatusApplying, func(r *engine.Run) {
		r.ApplyRun = applyID
		r.LeaseUntil = lapsed() // its planning ended long ago: never the plan's own lease that counts
	})
	mods := append([]func(*engine.Run){func(r *engine.Run) { r.ID, r.PlanRun = applyID, plan.ID }}, applyMods...)
	return claim{plan: plan, apply: f.run(state, engine.KindApply, applyStatus, mods...)}
}

func (f *fixture) addMarkers(run string, ms ...engine.Marker) {
	f.t.Helper()
	if err := f.s.AddMarkers(f.ctx, run, ms...); err != nil {
		f.t.Fatalf("AddMarkers(%s): %v", run, err)
	}
}

// leaseExpiredMarkers returns run's lease-expired markers.
func (f *fixture) leaseExpiredMarkers(run string) []engine.Marker {
	f.t.Helper()
	var out []engine.Marker
	for _, m := range f.markers(run) {
		if m.Kind == engine.MarkerLeaseExpired {
			out = append(out, m)
		}
	}
	return out
}

// wantExpiredByLease checks that run id was ended by its own lease: status
// lease-expired, finished, an end naming its holder, its lease end and
// what it was doing (phase), and exactly one lease-expired marker, without
// addresses, with that end.
func (f *fixture) wantExpiredByLease(id string, phase engine.Phase) {
	f.t.Helper()
	r := f.getRun(id)
	if r.Status != engine.StatusLeaseExpired || r.FinishedAt == nil {
		f.t.Fatalf("run %s = status %s, finished %v; want lease-expired and finished", id, r.Status, r.FinishedAt)
	}
	if e := r.End; !e.Is(engine.CauseLeaseExpired) || e.Holder.String() != "laptop:4242" || e.Phase != phase || e.LeaseEnd.IsZero() {
		f.t.Fatalf("run %s end %+v; want lease-expired naming the holder laptop:4242, its lease end and phase %q", id, e, phase)
	}
	ms := f.leaseExpiredMarkers(id)
	if len(ms) != 1 || len(ms[0].Addresses) != 0 || ms[0].End == nil || ms[0].End.Phase != phase || ms[0].End.Holder != r.End.Holder {
		f.t.Fatalf("lease-expired markers of %s = %+v; want one, without addresses, with the run's end", id, ms)
	}
}

// wantRecoverHint checks that the sweep ended c's apply run, which had
// started Terraform, lease-expired with a recoverable end (phase: what it
// was doing, "" for a lease on its reservations), and failed its plan with
// an end naming the apply and saying the same.
func (f *fixture) wantRecoverHint(c claim, phase engine.Phase) {
	f.t.Helper()
	if r := f.getRun(c.apply.ID); r.Status != engine.StatusLeaseExpired || r.FinishedAt == nil ||
		!r.End.Is(engine.CauseLeaseExpired) || r.End.Phase != phase || !r.End.Recoverable {
		f.t.Fatalf("run %s = status %s, end %+v; want lease-expired, phase %q, recoverable", c.apply.ID, r.Status, r.End, phase)
	}
	p := f.getRun(c.plan.ID)
	if p.Status != engine.StatusFailed || p.ApplyRun != c.apply.ID {
		f.t.Fatalf("plan of an apply that started Terraform = status %s, apply %s; want failed, naming %s", p.Status, p.ApplyRun, c.apply.ID)
	}
	if e := p.End; !e.Is(engine.CauseApplyLeaseExpired) || e.Run != c.apply.ID || !e.Recoverable || e.LeaseEnd.IsZero() {
		f.t.Fatalf("failed plan end %+v; want apply-lease-expired naming %s, recoverable", e, c.apply.ID)
	}
}

// wantUntouched checks that the sweep left run r as it was created.
func (f *fixture) wantUntouched(r engine.Run) {
	f.t.Helper()
	got := f.getRun(r.ID)
	if got.Status != r.Status || !reflect.DeepEqual(got.End, r.End) || got.FinishedAt != nil || got.ApplyRun != r.ApplyRun {
		f.t.Fatalf("run %s = status %s, end %+v, finished %v, apply %q; want it untouched (%s)",
			r.ID, got.Status, got.End, got.FinishedAt, got.ApplyRun, r.Status)
	}
	if ms := f.leaseExpiredMarkers(r.ID); len(ms) != 0 {
		f.t.Fatalf("run %s got lease-expired markers %+v", r.ID, ms)
	}
}

func testRunLeases(t *testing.T, newStore func(t *testing.T) engine.Store) {
	t.Run("RenewRun", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		tests := map[string]struct {
			kind   engine.RunKind
			status engine.RunStatus
			want   error // nil: renewed
		}{
			"plan planning":  {engine.KindPlan, engine.StatusPlanning, nil},
			"apply waiting":  {engine.KindApply, engine.StatusWaiting, nil},
			"apply applying": {engine.KindApply, engine.StatusApplying, nil},
			"plan planned":   {engine.KindPlan, engine.StatusPlanned, engine.ErrLeaseLost},
			"plan claimed":   {engine.KindPlan, engine.StatusApplying, engine.ErrLeaseLost},
			"apply applied":  {engine.KindApply, engine.StatusApplied, engine.ErrLeaseLost},
			"apply expired":  {engine.KindApply, engine.StatusLeaseExpired, engine.ErrLeaseLost},
		}
		for name, tc := range tests {
			t.Run(name, func(t *testing.T) {
				r := f.run("s", tc.kind, tc.status, leased(lapsed()))
				before := time.Now()
				err := f.s.RenewRun(f.ctx, r.ID, time.Hour)
				got := f.getRun(r.ID)
				if tc.want != nil {
					wantErr(t, "RenewRun", err, tc.want)
					if !got.LeaseUntil.Equal(r.LeaseUntil) {
						t.Fatalf("a refused RenewRun moved the lease to %v", got.LeaseUntil)
					}
					return
				}
				if err != nil {
					t.Fatalf("RenewRun: %v", err)
				}
				if got.LeaseUntil.Before(before.Add(time.Hour - time.Second)) {
					t.Fatalf("after RenewRun(1h) the lease ends at %v; want about %v", got.LeaseUntil, before.Add(time.Hour))
				}
				if !got.UpdatedAt.Equal(r.UpdatedAt) || got.Status != r.Status {
					t.Fatalf("RenewRun changed the run: updated %v → %v, status %s → %s", r.UpdatedAt, got.UpdatedAt, r.Status, got.Status)
				}
				if ms := f.markers(r.ID); len(ms) != 0 {
					t.Fatalf("RenewRun wrote markers %v", kinds(ms))
				}
			})
		}
		wantErr(t, "RenewRun unknown", f.s.RenewRun(f.ctx, "nope", time.Minute), engine.ErrNotFound)
		wantErr(t, "RenewRun without lease", f.s.RenewRun(f.ctx, f.apply("s", nil).ID, 0), engine.ErrInvalid)
	})

	// Each sweep — ExpireLeases, or the one an Acquire on the state runs —
	// ends the runs in progress whose own lease lapsed and that hold no
	// live reservation, hands their claimed plans back, and leaves every
	// other run alone.
	for _, sweep := range []string{"ExpireLeases", "Acquire"} {
		t.Run("ExpireRunLeasesBy"+sweep, func(t *testing.T) {
			t.Parallel()
			f := setup(t, newStore)
			f.state("s")
			// A lapsed run lease while its reservations live: untouched.
			// (Reserved first: an Acquire sweeps.)
			holding := f.run("s", engine.KindApply, engine.StatusApplying, leased(live()))
			f.mustAcquire("s", holding.ID, time.Hour, w("terraform_data.held"))
			if _, err := f.s.UpdateRun(f.ctx, holding.ID, nil, func(r *engine.Run) error { r.LeaseUntil = lapsed(); return nil }); err != nil {
				t.Fatal(err)
			}
			planning := f.run("s", engine.KindPlan, engine.StatusPlanning, leased(lapsed()))
			waiting := f.claim("s", engine.StatusWaiting, leased(lapsed()), func(r *engine.Run) {
				r.End = &engine.End{Cause: engine.CauseWaiting, Blockers: []engine.Blocker{{Run: "01GONE", Addresses: engine.AddressSet{"terraform_data.a"}}}}
			})
			// Claimed its plan, never tried to reserve (status waiting, no markers).
			claimed := f.claim("s", engine.StatusWaiting, leased(lapsed()))
			// Held reservations (the "reserved" marker), which the commit
			// released; then it stalled and its own lease ran out.
			reserved := f.claim("s", engine.StatusApplying, leased(lapsed()))
			f.addMarkers(reserved.apply.ID, engine.Marker{Kind: engine.MarkerReserved, Count: 1})
			// Reserved and started Terraform (an "apply-started" marker),
			// then stalled: Terraform may have written state.
			started := f.claim("s", engine.StatusApplying, leased(lapsed()))
			f.addMarkers(started.apply.ID, engine.Marker{Kind: engine.MarkerReserved, Count: 1}, engine.Marker{Kind: engine.MarkerApplyStarted, Serial: 1})
			// Expired while its plan was handed to another apply since.
			reclaimed := f.claim("s", engine.StatusWaiting, leased(lapsed()))
			if _, err := f.s.UpdateRun(f.ctx, reclaimed.plan.ID, nil, func(r *engine.Run) error { r.ApplyRun = "01OTHERAPPLY"; return nil }); err != nil {
				t.Fatal(err)
			}
			reclaimed.plan.ApplyRun = "01OTHERAPPLY"

			// Untouched: a live lease, no lease at all (an older kl), a
			// finished run, a plan claimed by a live apply.
			livePlanning := f.run("s", engine.KindPlan, engine.StatusPlanning, leased(live()))
			liveWaiting := f.claim("s", engine.StatusWaiting, leased(live()))
			older := f.claim("s", engine.StatusWaiting)
			olderPlanning := f.run("s", engine.KindPlan, engine.StatusPlanning)
			finished := f.run("s", engine.KindApply, engine.StatusFailed, leased(lapsed()))
			liveApplying := f.claim("s", engine.StatusApplying, leased(live()))

			var got []string
			wantHeld := []string{holding.ID + " write terraform_data.held"}
			switch sweep {
			case "ExpireLeases":
				var err error
				if got, err = f.s.ExpireLeases(f.ctx); err != nil {
					t.Fatalf("ExpireLeases: %v", err)
				}
			case "Acquire":
				other := f.apply("s", nil)
				wantHeld = append(wantHeld, other.ID+" write terraform_data.other")
				res := f.mustAcquire("s", other.ID, time.Minute, w("terraform_data.other"))
				if len(res.Others) != 1 || res.Others[0].Run != holding.ID {
					t.Fatalf("Acquire Others = %v; want the live holder's reservation only", held(res.Others))
				}
				if got, err := f.s.ExpireLeases(f.ctx); err != nil || len(got) != 0 {
					t.Fatalf("ExpireLeases after the Acquire's sweep = %v, %v; want nothing left", got, err)
				}
				got = nil
			}
			if sweep == "ExpireLeases" {
				want := []string{planning.ID, waiting.apply.ID, claimed.apply.ID, reserved.apply.ID, started.apply.ID, reclaimed.apply.ID}
				sort.Strings(want)
				diff(t, "expired runs", got, want)
			}

			f.wantExpiredByLease(planning.ID, engine.PhasePlanning)
			f.wantExpiredByLease(waiting.apply.ID, engine.PhaseWaiting)
			if r := f.getRun(waiting.apply.ID); len(r.End.Blockers) != 0 {
				t.Fatalf("the expired run still says it waits: %+v", r.End)
			}
			f.wantExpiredByLease(claimed.apply.ID, engine.PhaseWaiting)
			f.wantExpiredByLease(reserved.apply.ID, engine.PhaseApplying)
			f.wantExpiredByLease(reclaimed.apply.ID, engine.PhaseWaiting)

			// Never reserved: the plan may be applied again; ApplyRun names
			// the attempt.
			for _, c := range []claim{waiting, claimed} {
				p := f.getRun(c.plan.ID)
				if p.Status != engine.StatusPlanned || p.ApplyRun != c.apply.ID || p.End != nil {
					t.Fatalf("plan of an apply that never reserved = status %s, apply %s, end %+v; want planned, naming %s",
						p.Status, p.ApplyRun, p.End, c.apply.ID)
				}
			}
			// Reserved: Terraform may have run.
			p := f.getRun(reserved.plan.ID)
			if p.Status != engine.StatusFailed || p.ApplyRun != reserved.apply.ID {
				t.Fatalf("plan of an apply that had reserved = status %s, apply %s; want failed", p.Status, p.ApplyRun)
			}
			if e := p.End; !e.Is(engine.CauseApplyLeaseExpired) || e.Run != reserved.apply.ID || e.Holder.String() != "laptop:4242" || e.Recoverable {
				t.Fatalf("failed plan end %+v; want apply-lease-expired naming %s and laptop:4242, not recoverable", e, reserved.apply.ID)
			}
			if r := f.getRun(reserved.apply.ID); r.End.Recoverable {
				t.Fatalf("the end of a run that never started Terraform names a recovery: %+v", r.End)
			}
			// Started Terraform: the run and its plan say how to commit what
			// it wrote.
			f.wantRecoverHint(started, engine.PhaseApplying)
			f.wantUntouched(reclaimed.plan)

			f.wantUntouched(livePlanning)
			f.wantUntouched(liveWaiting.apply)
			f.wantUntouched(liveWaiting.plan)
			f.wantUntouched(holding)
			f.wantUntouched(older.apply)
			f.wantUntouched(older.plan)
			f.wantUntouched(olderPlanning)
			f.wantUntouched(finished)
			f.wantUntouched(liveApplying.apply)
			f.wantUntouched(liveApplying.plan)
			sort.Strings(wantHeld)
			diff(t, "reservations", held(f.reservations("s")), wantHeld)
		})
	}

	t.Run("ExpiredRunAcquiresNothing", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		c := f.claim("s", engine.StatusWaiting, leased(lapsed()))
		// The stalled holder comes back and tries again: its own Acquire's
		// sweep ends it, and it takes nothing; the sweep still commits.
		_, err := f.acquire("s", c.apply.ID, time.Minute, w("terraform_data.a"))
		var se *engine.StatusError
		if !errors.As(err, &se) || se.Run != c.apply.ID || se.Status != engine.StatusLeaseExpired {
			t.Fatalf("Acquire by a run whose lease lapsed = %v; want a *StatusError saying lease-expired", err)
		}
		wantErr(t, "Acquire by an expired run", err, engine.ErrConflict)
		if rs := f.reservations("s"); len(rs) != 0 {
			t.Fatalf("an expired run holds %v", held(rs))
		}
		f.wantExpiredByLease(c.apply.ID, engine.PhaseWaiting)
		if p := f.getRun(c.plan.ID); p.Status != engine.StatusPlanned {
			t.Fatalf("plan = %s; want planned", p.Status)
		}
		// Its later updates fail on their status preconditions.
		_, err = f.s.UpdateRun(f.ctx, c.apply.ID, []engine.RunStatus{engine.StatusWaiting, engine.StatusApplying}, func(r *engine.Run) error {
			r.Status = engine.StatusApplying
			return nil
		})
		wantErr(t, "UpdateRun of an expired run", err, engine.ErrConflict)
		wantErr(t, "RenewRun of an expired run", f.s.RenewRun(f.ctx, c.apply.ID, time.Minute), engine.ErrLeaseLost)
		_, err = f.acquire("s", f.run("s", engine.KindApply, engine.StatusApplied).ID, time.Minute, w("terraform_data.a"))
		wantErr(t, "Acquire by a finished run", err, engine.ErrConflict)
	})

	// The reservation sweep (their lease lapsed) hands an apply's plan back
	// by the same rule: held reservations with a "reserved" marker →
	// failed; reservations taken but the marker never written (killed in
	// between: Terraform never ran) → planned.
	t.Run("ExpiredReservationsHandPlanBack", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		reserved := f.claim("s", engine.StatusApplying, leased(live()))
		unmarked := f.claim("s", engine.StatusWaiting, leased(live()))
		f.mustAcquire("s", reserved.apply.ID, shortLease, w("terraform_data.a"))
		f.addMarkers(reserved.apply.ID, engine.Marker{Kind: engine.MarkerReserved, Count: 1})
		f.mustAcquire("s", unmarked.apply.ID, shortLease, w("terraform_data.b"))
		started := f.claim("s", engine.StatusApplying, leased(live()))
		f.mustAcquire("s", started.apply.ID, shortLease, w("terraform_data.c"))
		f.addMarkers(started.apply.ID, engine.Marker{Kind: engine.MarkerReserved, Count: 1}, engine.Marker{Kind: engine.MarkerApplyStarted, Serial: 1})
		time.Sleep(shortLease + expiryMargin)
		got, err := f.s.ExpireLeases(f.ctx)
		if err != nil {
			t.Fatalf("ExpireLeases: %v", err)
		}
		f.wantRecoverHint(started, "")
		want := []string{reserved.apply.ID, unmarked.apply.ID, started.apply.ID}
		sort.Strings(want)
		diff(t, "expired runs", got, want)
		for _, id := range want {
			r := f.getRun(id)
			if r.Status != engine.StatusLeaseExpired || r.End == nil || r.End.Holder.String() != "host-"+id+":7" {
				t.Fatalf("run %s = %s, end %+v; want lease-expired naming its holder", id, r.Status, r.End)
			}
			if ms := f.leaseExpiredMarkers(id); len(ms) != 1 || len(ms[0].Addresses) != 1 {
				t.Fatalf("lease-expired markers of %s = %+v; want one with its address", id, ms)
			}
		}
		if p := f.getRun(reserved.plan.ID); p.Status != engine.StatusFailed || p.End == nil || p.End.Run != reserved.apply.ID {
			t.Fatalf("plan of the reserved apply = %s, %+v; want failed naming the apply", p.Status, p.End)
		}
		if p := f.getRun(unmarked.plan.ID); p.Status != engine.StatusPlanned {
			t.Fatalf("plan of the apply without a reserved marker = %s; want planned", p.Status)
		}
	})

	// Sweeps racing — in ExpireLeases and Acquire, on several connections —
	// expire each run once: one sweep reports it, one marker is written,
	// and its plan is handed back once.
	t.Run("RacingSweepsExpireOnce", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		const runs, sweepers = 6, 8
		claims := make([]claim, runs)
		for i := range claims {
			claims[i] = f.claim("s", engine.StatusWaiting, leased(lapsed()))
		}
		others := make([]engine.Run, sweepers)
		for i := range others {
			others[i] = f.apply("s", nil)
		}
		var mu sync.Mutex
		reported := map[string]int{}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range sweepers {
			wg.Go(func() {
				<-start
				var got []string
				var err error
				if i%2 == 0 {
					got, err = f.s.ExpireLeases(f.ctx)
				} else {
					_, err = f.acquire("s", others[i].ID, time.Minute, w(engine.Address(fmt.Sprintf("terraform_data.o%d", i))))
				}
				if err != nil {
					t.Errorf("sweeper %d: %v", i, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for _, id := range got {
					reported[id]++
				}
			})
		}
		close(start)
		wg.Wait()
		for id, n := range reported {
			if n != 1 {
				t.Errorf("run %s reported by %d sweeps; want at most one", id, n)
			}
		}
		for _, c := range claims {
			f.wantExpiredByLease(c.apply.ID, engine.PhaseWaiting)
			if p := f.getRun(c.plan.ID); p.Status != engine.StatusPlanned {
				t.Errorf("plan %s = %s; want planned", p.ID, p.Status)
			}
		}
	})
}
