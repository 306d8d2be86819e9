package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// shortLease is the lease of reservations a test lets expire: long enough
// that a loaded machine still checks "before expiry" before it ends;
// expiryMargin is how long past it the test waits.
const (
	shortLease   = 2 * time.Second
	expiryMargin = 300 * time.Millisecond
)

func testReservations(t *testing.T, newStore func(t *testing.T) engine.Store) {
	t.Run("Conflicts", func(t *testing.T) {
		t.Parallel()
		// held: run A's reservations; want: run B's request; blocked: the
		// requested addresses A blocks (nil: B gets them all).
		tests := map[string]struct {
			held, want []engine.Reservation
			blocked    engine.AddressSet
		}{
			"read/read coexist": {
				held: []engine.Reservation{rd("terraform_data.a")},
				want: []engine.Reservation{rd("terraform_data.a")},
			},
			"write vs read": {
				held:    []engine.Reservation{rd("terraform_data.a")},
				want:    []engine.Reservation{w("terraform_data.a")},
				blocked: engine.NewAddressSet("terraform_data.a"),
			},
			"read vs write": {
				held:    []engine.Reservation{w("terraform_data.a")},
				want:    []engine.Reservation{rd("terraform_data.a")},
				blocked: engine.NewAddressSet("terraform_data.a"),
			},
			"write vs write": {
				held:    []engine.Reservation{w("terraform_data.a")},
				want:    []engine.Reservation{w("terraform_data.a")},
				blocked: engine.NewAddressSet("terraform_data.a"),
			},
			"disjoint writes": {
				held: []engine.Reservation{w("terraform_data.a")},
				want: []engine.Reservation{w("terraform_data.b")},
			},
			"prefix write vs resource below": {
				held:    []engine.Reservation{w("module.app.*")},
				want:    []engine.Reservation{rd("module.app.terraform_data.x")},
				blocked: engine.NewAddressSet("module.app.terraform_data.x"),
			},
			"resource write vs prefix read": {
				held:    []engine.Reservation{w("module.app.terraform_data.x")},
				want:    []engine.Reservation{rd("module.app.*")},
				blocked: engine.NewAddressSet("module.app.*"),
			},
			"prefix vs other module": {
				held: []engine.Reservation{w("module.app.*")},
				want: []engine.Reservation{w("module.db.terraform_data.x")},
			},
			"nested prefixes": {
				held:    []engine.Reservation{w("module.app.*")},
				want:    []engine.Reservation{w("module.app.module.db.*")},
				blocked: engine.NewAddressSet("module.app.module.db.*"),
			},
			"prefix read/read": {
				held: []engine.Reservation{rd("module.app.*")},
				want: []engine.Reservation{rd("module.app.terraform_data.x")},
			},
			"whole state vs anything": {
				held:    []engine.Reservation{rd("*")},
				want:    []engine.Reservation{w("terraform_data.z"), w("output.url"), rd("terraform_data.y")},
				blocked: engine.NewAddressSet("output.url", "terraform_data.z"),
			},
			"anything vs whole state": {
				held:    []engine.Reservation{w("module.deep.terraform_data.q")},
				want:    []engine.Reservation{rd("*")},
				blocked: engine.NewAddressSet("*"),
			},
			"output write vs read": {
				held:    []engine.Reservation{w("output.url")},
				want:    []engine.Reservation{rd("output.url")},
				blocked: engine.NewAddressSet("output.url"),
			},
			"different outputs": {
				held: []engine.Reservation{w("output.url")},
				want: []engine.Reservation{w("output.id")},
			},
			"prefix does not cover outputs": {
				held: []engine.Reservation{w("module.app.*")},
				want: []engine.Reservation{w("output.app")},
			},
			"different instances of one resource": { // ADR 0065
				held: []engine.Reservation{w(engine.MustParseInstanceAddress(`terraform_data.web["a"]`))},
				want: []engine.Reservation{w(engine.MustParseInstanceAddress(`terraform_data.web["b"]`))},
			},
			"same instance": {
				held:    []engine.Reservation{w(engine.MustParseInstanceAddress(`terraform_data.web["a"]`))},
				want:    []engine.Reservation{rd(engine.MustParseInstanceAddress(`terraform_data.web["a"]`))},
				blocked: engine.NewAddressSet(engine.MustParseInstanceAddress(`terraform_data.web["a"]`)),
			},
			"a resource-level reservation covers its instances": {
				held:    []engine.Reservation{w("terraform_data.web")},
				want:    []engine.Reservation{w(engine.MustParseInstanceAddress(`terraform_data.web[0]`))},
				blocked: engine.NewAddressSet(engine.MustParseInstanceAddress(`terraform_data.web[0]`)),
			},
			"a module instance covers its resources' instances": {
				held:    []engine.Reservation{w(engine.MustParseInstanceAddress(`module.m["k"].terraform_data.web`))},
				want:    []engine.Reservation{w(engine.MustParseInstanceAddress(`module.m["k"].terraform_data.web["a"]`)), w(engine.MustParseInstanceAddress(`module.m["j"].terraform_data.web["a"]`))},
				blocked: engine.NewAddressSet(engine.MustParseInstanceAddress(`module.m["k"].terraform_data.web["a"]`)),
			},
			"partial conflict takes nothing": {
				held:    []engine.Reservation{w("terraform_data.a")},
				want:    []engine.Reservation{w("terraform_data.free"), rd("terraform_data.a"), w("terraform_data.free2")},
				blocked: engine.NewAddressSet("terraform_data.a"),
			},
		}
		for name, tc := range tests {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				f := setup(t, newStore)
				f.state("s")
				pr := &engine.PullRequest{Repo: "acme/infra", Number: 17}
				a := f.run("s", engine.KindApply, engine.StatusApplying, func(r *engine.Run) { r.PR, r.Actor = pr, "alice" })
				b := f.apply("s", nil)
				f.mustAcquire("s", a.ID, time.Minute, tc.held...)
				before := held(f.reservations("s"))
				res, err := f.acquire("s", b.ID, time.Minute, tc.want...)
				if tc.blocked == nil {
					if err != nil {
						t.Fatalf("Acquire: %v; want success", err)
					}
					if len(res.Held) != len(tc.want) || len(res.Others) != len(tc.held) {
						t.Fatalf("Acquire = %d held, %d others; want %d and %d", len(res.Held), len(res.Others), len(tc.want), len(tc.held))
					}
					return
				}
				var ce *engine.ConflictError
				if !errors.As(err, &ce) {
					t.Fatalf("Acquire: %v; want a *engine.ConflictError", err)
				}
				wantErr(t, "Acquire", err, engine.ErrConflict)
				if ce.State != "s" || ce.Run != b.ID || len(ce.Blockers) != 1 {
					t.Fatalf("ConflictError = %+v", ce)
				}
				bl := ce.Blockers[0]
				if bl.Run != a.ID || bl.Actor != "alice" || bl.PR == nil || *bl.PR != *pr || len(bl.Held) == 0 {
					t.Fatalf("blocker = %+v; want run %s by alice in %s", bl, a.ID, pr)
				}
				diff(t, "blocked addresses", bl.Addresses, tc.blocked)
				if !strings.Contains(err.Error(), a.ID) || !strings.Contains(err.Error(), "acme/infra#17") {
					t.Fatalf("error %q does not name the blocking run and its PR", err)
				}
				diff(t, "reservations after a refused Acquire (all or none)", held(f.reservations("s")), before)
			})
		}
	})

	t.Run("ConflictNamesEveryBlocker", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		a := f.apply("s", &engine.PullRequest{Repo: "acme/infra", Number: 1})
		b := f.apply("s", nil)
		c := f.apply("s", nil)
		f.mustAcquire("s", a.ID, time.Minute, w("terraform_data.a"), w("terraform_data.a2"))
		f.mustAcquire("s", b.ID, time.Minute, rd("module.app.*"))
		_, err := f.acquire("s", c.ID, time.Minute, w("terraform_data.a"), w("terraform_data.a2"), w("module.app.terraform_data.x"), w("terraform_data.free"))
		var ce *engine.ConflictError
		if !errors.As(err, &ce) {
			t.Fatalf("Acquire: %v; want a conflict", err)
		}
		got := map[string]engine.AddressSet{}
		for _, bl := range ce.Blockers {
			got[bl.Run] = bl.Addresses
		}
		diff(t, "blockers", got, map[string]engine.AddressSet{
			a.ID: engine.NewAddressSet("terraform_data.a", "terraform_data.a2"),
			b.ID: engine.NewAddressSet("module.app.terraform_data.x"),
		})
	})

	t.Run("HeldAndOthers", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		f.state("t")
		a, b := f.apply("s", nil), f.apply("s", nil)
		f.mustAcquire("s", a.ID, time.Minute, rd("terraform_data.shared"), w("terraform_data.a"))
		f.mustAcquire("t", a.ID, time.Minute, w("terraform_data.elsewhere"))
		before := time.Now().Add(-time.Second)
		res := f.mustAcquire("s", b.ID, 10*time.Minute, rd("terraform_data.shared"), w("terraform_data.b"), w("terraform_data.b"))
		diff(t, "Held", held(res.Held), []string{b.ID + " read terraform_data.shared", b.ID + " write terraform_data.b"})
		diff(t, "Others (same state only)", held(res.Others), []string{a.ID + " read terraform_data.shared", a.ID + " write terraform_data.a"})
		for _, r := range res.Held {
			if r.State != "s" || r.Holder != (engine.Holder{Host: "host-" + b.ID, PID: 7}) {
				t.Fatalf("held reservation %+v lacks state or holder", r)
			}
			if r.AcquiredAt.Before(before) || r.ExpiresAt.Sub(r.AcquiredAt) < 10*time.Minute-time.Millisecond {
				t.Fatalf("held reservation %+v: want acquired now, expiring in 10m", r)
			}
		}
		diff(t, "Reservations(all)", len(f.reservations("")), 5)
		diff(t, "Reservations(t)", held(f.reservations("t")), []string{a.ID + " write terraform_data.elsewhere"})
	})

	t.Run("ReacquireAddsAndReplaces", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		a := f.apply("s", nil)
		first := f.mustAcquire("s", a.ID, time.Minute, w("terraform_data.a"), w("*"))
		res := f.mustAcquire("s", a.ID, time.Hour, w("terraform_data.a"), rd("terraform_data.b"))
		diff(t, "Held", held(res.Held), []string{a.ID + " read terraform_data.b", a.ID + " write *", a.ID + " write terraform_data.a"})
		for _, r := range res.Held {
			if r.Address == "terraform_data.a" && !r.ExpiresAt.After(first.Held[0].ExpiresAt) {
				t.Fatalf("re-acquired reservation keeps the old lease %v", r.ExpiresAt)
			}
		}
	})

	t.Run("Renew", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		a := f.apply("s", nil)
		res := f.mustAcquire("s", a.ID, time.Minute, w("terraform_data.a"), rd("terraform_data.b"))
		if err := f.s.Renew(f.ctx, a.ID, time.Hour); err != nil {
			t.Fatalf("Renew: %v", err)
		}
		for _, r := range f.reservations("s") {
			if r.ExpiresAt.Sub(res.Held[0].ExpiresAt) < 58*time.Minute {
				t.Fatalf("after Renew(1h) %s expires at %v; acquired to %v", r.Address, r.ExpiresAt, res.Held[0].ExpiresAt)
			}
		}
		wantErr(t, "Renew of a run holding nothing", f.s.Renew(f.ctx, f.apply("s", nil).ID, time.Minute), engine.ErrLeaseLost)
	})

	t.Run("RenewAfterExpiry", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		a := f.apply("s", nil)
		f.mustAcquire("s", a.ID, shortLease, w("terraform_data.a"))
		time.Sleep(shortLease + expiryMargin)
		wantErr(t, "Renew after the lease ended", f.s.Renew(f.ctx, a.ID, time.Minute), engine.ErrLeaseLost)
		if rs := f.reservations("s"); len(rs) != 0 {
			t.Fatalf("reservations = %v; want none", held(rs))
		}
		wantErr(t, "Renew again", f.s.Renew(f.ctx, a.ID, time.Minute), engine.ErrLeaseLost)
	})

	t.Run("Release", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		a, b := f.apply("s", nil), f.apply("s", nil)
		f.mustAcquire("s", a.ID, time.Minute, w("terraform_data.a"), rd("terraform_data.b"), w("output.x"))
		f.mustAcquire("s", b.ID, time.Minute, rd("terraform_data.b"))
		if err := f.s.Release(f.ctx, a.ID); err != nil {
			t.Fatalf("Release: %v", err)
		}
		diff(t, "reservations after Release", held(f.reservations("s")), []string{b.ID + " read terraform_data.b"})
		ms := f.markers(a.ID)
		if len(ms) != 1 || ms[0].Kind != engine.MarkerReleased || ms[0].Count != 3 {
			t.Fatalf("markers = %+v; want one released with Count 3", ms)
		}
		if err := f.s.Release(f.ctx, a.ID); err != nil {
			t.Fatalf("Release of nothing: %v", err)
		}
		if ms := f.markers(a.ID); len(ms) != 1 {
			t.Fatalf("Release of nothing added a marker: %v", kinds(ms))
		}
		f.mustAcquire("s", f.apply("s", nil).ID, time.Minute, w("terraform_data.a"))
	})

	t.Run("ExpiryFreesAddresses", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		a, b := f.apply("s", nil), f.apply("s", nil)
		f.mustAcquire("s", a.ID, shortLease, w("module.app.*"), rd("terraform_data.x"))
		_, err := f.acquire("s", b.ID, time.Minute, w("module.app.terraform_data.web"))
		wantErr(t, "Acquire while the lease runs", err, engine.ErrConflict)
		// Swept more than a second after the lease ran out: the marker
		// says when it ran out, not when the sweep saw it (issue 14
		// review F6).
		time.Sleep(shortLease + expiryMargin + 1100*time.Millisecond)
		if rs := f.reservations("s"); len(rs) != 0 {
			t.Fatalf("Reservations lists lapsed reservations: %v", held(rs))
		}
		res := f.mustAcquire("s", b.ID, time.Minute, w("module.app.terraform_data.web"), w("terraform_data.x"))
		if len(res.Others) != 0 {
			t.Fatalf("Others = %v; want none (the lease ended)", held(res.Others))
		}
		got := f.getRun(a.ID)
		if got.Status != engine.StatusLeaseExpired || got.FinishedAt == nil {
			t.Fatalf("expired run = status %s, finished %v; want lease-expired and finished", got.Status, got.FinishedAt)
		}
		ms := f.markers(a.ID)
		if len(ms) != 1 || ms[0].Kind != engine.MarkerLeaseExpired {
			t.Fatalf("markers = %v; want one lease-expired", kinds(ms))
		}
		diff(t, "lease-expired addresses", ms[0].Addresses, engine.NewAddressSet("module.app.*", "terraform_data.x"))
		if !ms[0].At.Truncate(time.Second).Equal(got.End.LeaseEnd) {
			t.Fatalf("lease-expired marker at %v; want when the lease ran out, %v (the sweep saw it later)", ms[0].At, got.End.LeaseEnd)
		}
		if ms := f.markers(b.ID); len(ms) != 0 {
			t.Fatalf("the acquiring run got markers %v", kinds(ms))
		}
	})

	t.Run("ExpireLeases", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		f.state("t")
		open := f.apply("s", nil)
		done := f.run("t", engine.KindApply, engine.StatusApplying)
		live := f.apply("s", nil)
		f.mustAcquire("s", open.ID, shortLease, w("terraform_data.a"))
		f.mustAcquire("t", done.ID, shortLease, w("terraform_data.b"))
		f.mustAcquire("s", live.ID, time.Hour, w("terraform_data.c"))
		if _, err := f.s.UpdateRun(f.ctx, done.ID, nil, func(r *engine.Run) error {
			r.Status = engine.StatusFailed
			return nil
		}); err != nil {
			t.Fatalf("UpdateRun: %v", err)
		}
		if got, err := f.s.ExpireLeases(f.ctx); err != nil || len(got) != 0 {
			t.Fatalf("ExpireLeases before any lease ended = %v, %v; want none", got, err)
		}
		time.Sleep(shortLease + expiryMargin)
		got, err := f.s.ExpireLeases(f.ctx)
		if err != nil {
			t.Fatalf("ExpireLeases: %v", err)
		}
		want := []string{open.ID, done.ID}
		if want[0] > want[1] {
			want[0], want[1] = want[1], want[0]
		}
		diff(t, "expired runs", got, want)
		if r := f.getRun(open.ID); r.Status != engine.StatusLeaseExpired {
			t.Fatalf("open run status = %s; want lease-expired", r.Status)
		}
		if r := f.getRun(done.ID); r.Status != engine.StatusFailed {
			t.Fatalf("failed run status = %s; want it kept", r.Status)
		}
		for _, id := range want {
			if ms := f.markers(id); len(ms) != 1 || ms[0].Kind != engine.MarkerLeaseExpired || len(ms[0].Addresses) != 1 {
				t.Fatalf("markers of %s = %+v; want one lease-expired with its address", id, ms)
			}
		}
		diff(t, "live reservations", held(f.reservations("")), []string{live.ID + " write terraform_data.c"})
		if got, err := f.s.ExpireLeases(f.ctx); err != nil || len(got) != 0 {
			t.Fatalf("second ExpireLeases = %v, %v; want none", got, err)
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		a := f.apply("s", nil)
		tests := map[string]struct {
			req  engine.AcquireRequest
			want error
		}{
			"no lease":      {engine.AcquireRequest{State: "s", Run: a.ID, Reservations: []engine.Reservation{w("terraform_data.a")}}, engine.ErrInvalid},
			"bad mode":      {engine.AcquireRequest{State: "s", Run: a.ID, Lease: time.Minute, Reservations: []engine.Reservation{{Address: "terraform_data.a", Mode: "exclusive"}}}, engine.ErrInvalid},
			"empty address": {engine.AcquireRequest{State: "s", Run: a.ID, Lease: time.Minute, Reservations: []engine.Reservation{w("")}}, engine.ErrInvalid},
			"unknown state": {engine.AcquireRequest{State: "nope", Run: a.ID, Lease: time.Minute, Reservations: []engine.Reservation{w("terraform_data.a")}}, engine.ErrNotFound},
			"unknown run":   {engine.AcquireRequest{State: "s", Run: "nope", Lease: time.Minute, Reservations: []engine.Reservation{w("terraform_data.a")}}, engine.ErrNotFound},
		}
		for name, tc := range tests {
			t.Run(name, func(t *testing.T) {
				_, err := f.s.Acquire(f.ctx, tc.req)
				wantErr(t, "Acquire", err, tc.want)
			})
		}
		if rs := f.reservations(""); len(rs) != 0 {
			t.Fatalf("refused requests left reservations: %v", held(rs))
		}
		wantErr(t, "Renew with no lease", f.s.Renew(f.ctx, a.ID, 0), engine.ErrInvalid)
	})
}
