package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// fencedApply is an apply run (claiming its plan) that reserved w(module.app.*),
// w(terraform_data.a) and rd(terraform_data.x) for shortLease, started
// Terraform (an "apply-started" marker) and whose lease has run out, after
// one sweep: its write set is fenced.
func (f *fixture) fencedApply(state string) (claim, time.Time) {
	f.t.Helper()
	c := f.claim(state, engine.StatusApplying, leased(live()))
	f.mustAcquire(state, c.apply.ID, shortLease, w("module.app.*"), w("terraform_data.a"), rd("terraform_data.x"))
	f.addMarkers(c.apply.ID, engine.Marker{Kind: engine.MarkerReserved, Count: 3}, engine.Marker{Kind: engine.MarkerApplyStarted, Serial: 1})
	var started time.Time
	for _, m := range f.markers(c.apply.ID) {
		if m.Kind == engine.MarkerApplyStarted {
			started = m.At
		}
	}
	if _, err := f.s.UpdateRun(f.ctx, c.apply.ID, nil, func(r *engine.Run) error { r.LeaseUntil = lapsed(); return nil }); err != nil {
		f.t.Fatal(err)
	}
	time.Sleep(shortLease + expiryMargin)
	if _, err := f.s.ExpireLeases(f.ctx); err != nil {
		f.t.Fatalf("ExpireLeases: %v", err)
	}
	return c, started
}

// fences returns the fences among state's reservations, as "run mode address".
func (f *fixture) fences(state string) []string {
	f.t.Helper()
	var out []string
	for _, r := range f.reservations(state) {
		if r.Fenced() {
			out = append(out, r.Run+" "+string(r.Mode)+" "+string(r.Address))
		}
	}
	return out
}

// testFences is the fence contract (ADR 0035): an apply whose lease ran
// out after its Terraform started keeps its write set as fences until a
// commit or LiftFence lifts them.
func testFences(t *testing.T, newStore func(t *testing.T) engine.Store) {
	t.Run("SweepFencesStartedApply", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		c, started := f.fencedApply("s")
		a := c.apply.ID
		diff(t, "fences after the sweep", f.fences("s"), []string{a + " write module.app.*", a + " write terraform_data.a"})
		for _, r := range f.reservations("s") {
			if r.Fenced() && (r.FencedAt.Before(r.ExpiresAt) || r.Holder.PID != 7) {
				t.Fatalf("fence %+v: want FencedAt at or after its lease end, and its holder", r)
			}
		}
		got := f.getRun(a)
		if got.Status != engine.StatusLeaseExpired || got.End == nil || !got.End.Recoverable {
			t.Fatalf("fenced run: status %s, end %+v; want lease-expired, recoverable", got.Status, got.End)
		}
		diff(t, "End.Fenced", got.End.Fenced, engine.NewAddressSet("module.app.*", "terraform_data.a"))
		if d := got.End.TerraformStarted.Sub(started); d < -time.Millisecond || d > time.Millisecond {
			t.Fatalf("End.TerraformStarted = %v; want the apply-started marker's %v", got.End.TerraformStarted, started)
		}
		ms := f.leaseExpiredMarkers(a)
		if len(ms) != 1 || ms[0].End == nil {
			t.Fatalf("lease-expired markers = %+v; want one with an end", ms)
		}
		diff(t, "lease-expired marker addresses", ms[0].Addresses, engine.NewAddressSet("module.app.*", "terraform_data.a", "terraform_data.x"))
		diff(t, "lease-expired marker fences", ms[0].End.Fenced, engine.NewAddressSet("module.app.*", "terraform_data.a"))
		plan := f.getRun(c.plan.ID)
		if plan.Status != engine.StatusFailed || plan.End == nil || len(plan.End.Fenced) != 2 {
			t.Fatalf("plan of the fenced run: status %s, end %+v; want failed naming the fences", plan.Status, plan.End)
		}
		// A second sweep finds nothing to do.
		if runs, err := f.s.ExpireLeases(f.ctx); err != nil || len(runs) != 0 {
			t.Fatalf("second ExpireLeases = %v, %v; want nothing", runs, err)
		}
		if ms := f.leaseExpiredMarkers(a); len(ms) != 1 {
			t.Fatalf("a second sweep marked the fenced run again: %d lease-expired markers", len(ms))
		}
	})

	t.Run("FenceBlocksWritesAndReads", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		c, started := f.fencedApply("s")
		for name, want := range map[string]engine.Reservation{
			"write under the fenced prefix": w("module.app.terraform_data.web"),
			"read of a fenced address":      rd("terraform_data.a"),
			"write of everything":           w("*"),
		} {
			b := f.apply("s", nil)
			_, err := f.acquire("s", b.ID, time.Minute, want)
			var ce *engine.ConflictError
			if !errors.As(err, &ce) || len(ce.Blockers) != 1 {
				t.Fatalf("%s: Acquire = %v; want a conflict with the fenced run", name, err)
			}
			bl := ce.Blockers[0]
			if bl.Run != c.apply.ID || !bl.Fenced || bl.TerraformStarted.Sub(started).Abs() > time.Millisecond {
				t.Fatalf("%s: blocker %+v; want run %s, fenced, Terraform started %v", name, bl, c.apply.ID, started)
			}
		}
		// The dropped read reservation blocks nothing any more.
		f.mustAcquire("s", f.apply("s", nil).ID, time.Minute, w("terraform_data.x"))
		// Neither renewing nor releasing lifts a fence.
		wantErr(t, "Renew of a fenced run", f.s.Renew(f.ctx, c.apply.ID, time.Minute), engine.ErrLeaseLost)
		if err := f.s.Release(f.ctx, c.apply.ID); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if got := f.fences("s"); len(got) != 2 {
			t.Fatalf("fences after Renew and Release = %v; want both still there", got)
		}
		if slices.Contains(kinds(f.markers(c.apply.ID)), engine.MarkerReleased) {
			t.Fatalf("Release of a fenced run wrote a released marker: %v", kinds(f.markers(c.apply.ID)))
		}
	})

	t.Run("LiftFence", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		c, _ := f.fencedApply("s")
		a := c.apply.ID
		_, err := f.s.LiftFence(f.ctx, a, "erin", " ")
		wantErr(t, "LiftFence without a reason", err, engine.ErrInvalid)
		_, err = f.s.LiftFence(f.ctx, a, "", "checked")
		wantErr(t, "LiftFence without who", err, engine.ErrInvalid)
		lifted, err := f.s.LiftFence(f.ctx, a, "erin", "checked the service by hand")
		if err != nil {
			t.Fatalf("LiftFence: %v", err)
		}
		diff(t, "lifted", lifted, engine.NewAddressSet("module.app.*", "terraform_data.a"))
		if got := f.fences("s"); len(got) != 0 {
			t.Fatalf("fences after LiftFence = %v", got)
		}
		ms := f.markers(a)
		last := ms[len(ms)-1]
		if last.Kind != engine.MarkerFenceLifted || last.Lift != engine.LiftUnfenced || last.By != "erin" || last.Reason != "checked the service by hand" {
			t.Fatalf("last marker %+v; want fence-lifted, unfenced by erin with the reason", last)
		}
		diff(t, "fence-lifted addresses", last.Addresses, engine.NewAddressSet("module.app.*", "terraform_data.a"))
		if got := f.getRun(a); got.Status != engine.StatusLeaseExpired || !got.End.Recoverable || got.End.Lifted != engine.LiftUnfenced || len(got.End.Fenced) != 2 {
			t.Fatalf("unfenced run: status %s, end %+v; want it as it was, its fence marked lifted by an unfence", got.Status, got.End)
		}
		_, err = f.s.LiftFence(f.ctx, a, "erin", "again")
		wantErr(t, "LiftFence of a run without fences", err, engine.ErrNotFound)
		_, err = f.s.LiftFence(f.ctx, "nope", "erin", "x")
		wantErr(t, "LiftFence of an unknown run", err, engine.ErrNotFound)
		f.mustAcquire("s", f.apply("s", nil).ID, time.Minute, w("module.app.terraform_data.web"))
		// With the fence gone the run holds nothing: a late commit of its
		// holder is refused (the engine's lease-lost path).
		_, err = f.s.Commit(f.ctx, engine.CommitRequest{State: "s", Run: a, RequireReservations: true, Merge: Merge(a, "terraform_data.a")})
		wantErr(t, "Commit requiring reservations after the fence was lifted", err, engine.ErrLeaseLost)
	})

	// A commit of the fenced run — its holder back after a pause, or a
	// recovery — is what the fences waited for: it lifts them.
	for _, lift := range []engine.Lift{engine.LiftCommitted, engine.LiftRecovered} {
		t.Run("CommitLifts/"+string(lift), func(t *testing.T) {
			t.Parallel()
			f := setup(t, newStore)
			f.state("s")
			c, _ := f.fencedApply("s")
			a := c.apply.ID
			merge := Merge(a, "terraform_data.a")
			_, err := f.s.Commit(f.ctx, engine.CommitRequest{State: "s", Run: a, RequireReservations: lift == engine.LiftCommitted,
				Merge: func(h engine.Version, doc []byte) (engine.CommitResult, error) {
					res, err := merge(h, doc)
					if lift == engine.LiftRecovered {
						res.Lift = lift
					}
					return res, err
				}})
			if err != nil {
				t.Fatalf("Commit of the fenced run: %v", err)
			}
			if got := f.fences("s"); len(got) != 0 {
				t.Fatalf("fences after the commit = %v", got)
			}
			var liftedBy []engine.Lift
			for _, m := range f.markers(a) {
				switch m.Kind {
				case engine.MarkerFenceLifted:
					liftedBy = append(liftedBy, m.Lift)
				case engine.MarkerReleased:
					t.Fatalf("the commit of a fenced run says released: %+v", m)
				}
			}
			diff(t, "fence-lifted markers", liftedBy, []engine.Lift{lift})
		})
	}
}
