package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

func testCommit(t *testing.T, newStore func(t *testing.T) engine.Store) {
	t.Run("SerialChangesProvenance", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		pr := &engine.PullRequest{Repo: "acme/infra", Number: 42, HeadSHA: "abc123", URL: "https://github.com/acme/infra/pull/42"}
		r := f.apply("s", pr)
		var sawHead engine.Version
		prov := engine.Provenance{
			Run:             r.ID,
			PlanRun:         "01PLAN",
			SourceSerial:    0,
			CommittedSerial: 1,
			PlanDigest:      "sha256:0123",
			Mode:            engine.CommitSnapshotMerge,
			Exact:           false,
			Deviation: &engine.Deviation{
				Unplanned: engine.NewAddressSet("terraform_data.extra"),
				Unchanged: engine.NewAddressSet("terraform_data.idle"),
				Kept:      engine.NewAddressSet("terraform_data.kept"),
			},
			Partial: true,
			Actor:   "alice",
			PR:      pr,
		}
		v, err := f.s.Commit(f.ctx, engine.CommitRequest{State: "s", Run: r.ID, Merge: func(head engine.Version, snap []byte) (engine.CommitResult, error) {
			sawHead = head
			res, err := Merge("x", "terraform_data.web", "output.url")(head, snap)
			res.Provenance = prov
			return res, err
		}})
		if err != nil {
			t.Fatalf("Commit: %v", err)
		}
		if sawHead.Serial != 0 || sawHead.State != "s" || sawHead.Provenance.Mode != engine.CommitInit {
			t.Fatalf("Merge saw head %+v, want version 0", sawHead)
		}
		if v.Serial != 1 || v.State != "s" || v.Lineage != lineageOf("s") || v.Resources != 2 {
			t.Fatalf("Commit returned %+v", v)
		}
		diff(t, "provenance returned", v.Provenance, prov)
		got, err := f.s.GetVersion(f.ctx, "s", 1)
		if err != nil {
			t.Fatalf("GetVersion: %v", err)
		}
		diff(t, "provenance stored", got.Provenance, prov)
		diff(t, "Changed", got.Changed, engine.NewAddressSet("output.url", "terraform_data.web"))
		if got.Size != v.Size || got.Resources != 2 || got.CreatedAt.Sub(v.CreatedAt).Abs() > time.Microsecond {
			t.Fatalf("GetVersion = %+v, Commit returned %+v", got, v)
		}
		st, err := f.s.GetState(f.ctx, "s")
		if err != nil || st.HeadSerial != 1 {
			t.Fatalf("GetState after commit = %+v, %v; want head 1", st, err)
		}
		snap, err := f.s.Snapshot(f.ctx, "s", 1)
		if err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		d, err := parseDoc(snap)
		if err != nil || d.Serial != 1 || len(d.Resources) != 2 {
			t.Fatalf("committed snapshot = %+v, %v", d, err)
		}
		if int64(len(snap)) != v.Size {
			t.Fatalf("Size = %d, snapshot has %d bytes", v.Size, len(snap))
		}
	})

	t.Run("FillsProvenance", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		r := f.apply("s", nil)
		f.commit("s", r.ID, "terraform_data.a")
		v := f.commit("s", r.ID, "terraform_data.b")
		if v.Serial != 2 || v.Provenance.CommittedSerial != 2 || v.Provenance.Run != r.ID || v.Provenance.SourceSerial != 1 {
			t.Fatalf("provenance = %+v; want committed 2, run %s, source 1", v.Provenance, r.ID)
		}
	})

	t.Run("UpdatesRunAndAppendsMarkers", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		r := f.apply("s", nil)
		if err := f.s.AddMarkers(f.ctx, r.ID, engine.Marker{Kind: engine.MarkerPreflight}); err != nil {
			t.Fatalf("AddMarkers: %v", err)
		}
		f.mustAcquire("s", r.ID, time.Minute, w("terraform_data.a"), rd("terraform_data.b"))
		finished := now()
		v, err := f.s.Commit(f.ctx, engine.CommitRequest{State: "s", Run: r.ID, RequireReservations: true,
			Merge: func(head engine.Version, snap []byte) (engine.CommitResult, error) {
				res, err := Merge("x", "terraform_data.a")(head, snap)
				serial := head.Serial + 1
				res.UpdateRun = func(run *engine.Run) error {
					run.Status = engine.StatusApplied
					run.CommittedSerial = serial
					run.FinishedAt = &finished
					return nil
				}
				res.Markers = []engine.Marker{
					{Kind: engine.MarkerApplied, Count: 1},
					{Kind: engine.MarkerCommitted, Serial: serial, FromSerial: head.Serial, Mode: engine.CommitSnapshotMerge},
				}
				return res, err
			}})
		if err != nil {
			t.Fatalf("Commit: %v", err)
		}
		got := f.getRun(r.ID)
		if got.Status != engine.StatusApplied || got.CommittedSerial != v.Serial || got.FinishedAt == nil || !got.FinishedAt.Equal(finished) {
			t.Fatalf("run after commit = %+v", got)
		}
		if !got.UpdatedAt.After(r.UpdatedAt) && !got.UpdatedAt.Equal(r.UpdatedAt) {
			t.Fatalf("UpdatedAt went back: %v < %v", got.UpdatedAt, r.UpdatedAt)
		}
		ms := f.markers(r.ID)
		diff(t, "marker kinds", kinds(ms), []engine.MarkerKind{
			engine.MarkerPreflight, engine.MarkerApplied, engine.MarkerCommitted, engine.MarkerReleased,
		})
		for i, m := range ms {
			if m.Seq != int64(i+1) || m.At.IsZero() {
				t.Fatalf("marker %d = %+v; want Seq %d and a time", i, m, i+1)
			}
		}
		if ms[2].Serial != 1 || ms[2].FromSerial != 0 || ms[2].Mode != engine.CommitSnapshotMerge {
			t.Fatalf("committed marker = %+v", ms[2])
		}
		if ms[3].Count != 2 {
			t.Fatalf("released marker Count = %d, want 2 reservations", ms[3].Count)
		}
		if rs := f.reservations("s"); len(rs) != 0 {
			t.Fatalf("reservations after commit = %v; want none", held(rs))
		}
	})

	t.Run("NoReleasedMarkerWithoutReservations", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		r := f.apply("s", nil)
		f.commit("s", r.ID, "terraform_data.a")
		if ms := f.markers(r.ID); len(ms) != 0 {
			t.Fatalf("markers = %v; want none (nothing was released)", kinds(ms))
		}
	})

	t.Run("NothingWrittenOnFailure", func(t *testing.T) {
		t.Parallel()
		tests := map[string]struct {
			merge   func(engine.Version, []byte) (engine.CommitResult, error)
			require bool
			want    error
		}{
			"merge error": {
				merge: func(engine.Version, []byte) (engine.CommitResult, error) {
					return engine.CommitResult{}, errors.New("merge exploded")
				},
			},
			"snapshot serial not head+1": {
				merge: func(head engine.Version, snap []byte) (engine.CommitResult, error) {
					res, err := Merge("x", "terraform_data.a")(head, snap)
					res.Snapshot = testDoc{Serial: head.Serial + 2, Lineage: head.Lineage}.bytes(t)
					return res, err
				},
				want: engine.ErrInvalid,
			},
			"snapshot lineage differs": {
				merge: func(head engine.Version, snap []byte) (engine.CommitResult, error) {
					res, err := Merge("x", "terraform_data.a")(head, snap)
					res.Snapshot = testDoc{Serial: head.Serial + 1, Lineage: "other"}.bytes(t)
					return res, err
				},
				want: engine.ErrInvalid,
			},
			"provenance serial not head+1": {
				merge: func(head engine.Version, snap []byte) (engine.CommitResult, error) {
					res, err := Merge("x", "terraform_data.a")(head, snap)
					res.Provenance.CommittedSerial = head.Serial + 5
					return res, err
				},
				want: engine.ErrInvalid,
			},
			"lease lost": {
				merge:   Merge("x", "terraform_data.a"),
				require: true,
				want:    engine.ErrLeaseLost,
			},
		}
		for name, tc := range tests {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				f := setup(t, newStore)
				f.state("s")
				r := f.apply("s", nil)
				f.commit("s", r.ID, "terraform_data.first")
				other := f.apply("s", nil)
				if !tc.require {
					f.mustAcquire("s", other.ID, time.Minute, w("terraform_data.held"))
				}
				_, err := f.s.Commit(f.ctx, engine.CommitRequest{State: "s", Run: other.ID, RequireReservations: tc.require,
					Merge: func(head engine.Version, snap []byte) (engine.CommitResult, error) {
						res, err := tc.merge(head, snap)
						res.UpdateRun = func(run *engine.Run) error { run.Status = engine.StatusApplied; return nil }
						res.Markers = []engine.Marker{{Kind: engine.MarkerCommitted}}
						return res, err
					}})
				if err == nil {
					t.Fatal("Commit succeeded; want an error")
				}
				if tc.want != nil {
					wantErr(t, "Commit", err, tc.want)
				}
				st, err := f.s.GetState(f.ctx, "s")
				if err != nil || st.HeadSerial != 1 {
					t.Fatalf("head after a failed commit = %+v, %v; want 1", st, err)
				}
				_, err = f.s.GetVersion(f.ctx, "s", 2)
				wantErr(t, "GetVersion(2) after a failed commit", err, engine.ErrNotFound)
				if vs, err := f.s.VersionsAfter(f.ctx, "s", 1); err != nil || len(vs) != 0 {
					t.Fatalf("VersionsAfter(1) = %v, %v; want none", vs, err)
				}
				if got := f.getRun(other.ID); got.Status != engine.StatusApplying {
					t.Fatalf("run status after a failed commit = %s; want applying", got.Status)
				}
				if ms := f.markers(other.ID); len(ms) != 0 {
					t.Fatalf("markers after a failed commit = %v; want none", kinds(ms))
				}
				if !tc.require {
					diff(t, "reservations after a failed commit", held(f.reservations("s")),
						[]string{other.ID + " write terraform_data.held"})
				}
			})
		}
	})

	t.Run("LeaseLostAfterExpiry", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		r := f.apply("s", nil)
		f.mustAcquire("s", r.ID, shortLease, w("terraform_data.a"))
		time.Sleep(shortLease + expiryMargin)
		_, err := f.s.Commit(f.ctx, engine.CommitRequest{State: "s", Run: r.ID, RequireReservations: true, Merge: Merge("x", "terraform_data.a")})
		wantErr(t, "Commit after the lease ended", err, engine.ErrLeaseLost)
		if st, _ := f.s.GetState(f.ctx, "s"); st.HeadSerial != 0 {
			t.Fatalf("head = %d after a refused commit; want 0", st.HeadSerial)
		}
	})

	t.Run("LeaseOnOtherStateDoesNotCount", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		f.state("t")
		r := f.apply("s", nil)
		f.mustAcquire("t", r.ID, time.Minute, w("terraform_data.a"))
		_, err := f.s.Commit(f.ctx, engine.CommitRequest{State: "s", Run: r.ID, RequireReservations: true, Merge: Merge("x", "terraform_data.a")})
		wantErr(t, "Commit holding reservations on another state only", err, engine.ErrLeaseLost)
	})

	t.Run("Unknown", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		r := f.apply("s", nil)
		_, err := f.s.Commit(f.ctx, engine.CommitRequest{State: "nope", Run: r.ID, Merge: Merge("x")})
		wantErr(t, "Commit to an unknown state", err, engine.ErrNotFound)
		_, err = f.s.Commit(f.ctx, engine.CommitRequest{State: "s", Run: "nope", Merge: Merge("x")})
		wantErr(t, "Commit by an unknown run", err, engine.ErrNotFound)
		_, err = f.s.Commit(f.ctx, engine.CommitRequest{State: "s", Run: r.ID})
		wantErr(t, "Commit without Merge", err, engine.ErrInvalid)
	})

	t.Run("ConcurrentCommitters", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		const n = 20
		runs := make([]engine.Run, n)
		for i := range runs {
			runs[i] = f.apply("s", nil)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range runs {
			wg.Go(func() {
				<-start
				addr := engine.Address(fmt.Sprintf("terraform_data.c%02d", i))
				_, errs[i] = f.s.Commit(f.ctx, engine.CommitRequest{State: "s", Run: runs[i].ID,
					Merge: func(head engine.Version, snap []byte) (engine.CommitResult, error) {
						res, err := Merge(runs[i].ID, addr)(head, snap)
						serial := head.Serial + 1
						res.UpdateRun = func(r *engine.Run) error { r.Status, r.CommittedSerial = engine.StatusApplied, serial; return nil }
						return res, err
					}})
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("committer %d: %v", i, err)
			}
		}
		CheckContiguous(t, f.ctx, f.s, "s", n, func(serial int64, v engine.Version) {
			r := f.getRun(v.Provenance.Run)
			if r.CommittedSerial != serial {
				t.Errorf("run %s says committed %d, version %d says it was made by it", r.ID, r.CommittedSerial, serial)
			}
		})
	})
}

// CheckContiguous asserts that state (made from NewState, committed to with
// Merge) holds versions 1..n after 0 with no gap or duplicate, each with
// exactly one changed address, all different, and that the head snapshot
// holds every one of them (no lost update). each, if set, is called per
// version. Adapter tests use it after committing from several processes.
func CheckContiguous(t *testing.T, ctx context.Context, s engine.Store, state string, n int, each func(int64, engine.Version)) {
	t.Helper()
	f := &fixture{t: t, ctx: ctx, s: s}
	st, err := f.s.GetState(f.ctx, state)
	if err != nil || st.HeadSerial != int64(n) {
		t.Fatalf("head = %+v, %v; want %d", st, err, n)
	}
	vs, err := f.s.VersionsAfter(f.ctx, state, 0)
	if err != nil {
		t.Fatalf("VersionsAfter: %v", err)
	}
	if len(vs) != n {
		t.Fatalf("%d versions after 0; want %d", len(vs), n)
	}
	seen := map[engine.Address]int64{}
	for i, v := range vs {
		if v.Serial != int64(i+1) {
			t.Fatalf("version %d has serial %d: gap or duplicate", i+1, v.Serial)
		}
		if len(v.Changed) != 1 {
			t.Fatalf("version %d changed %v; want one address", v.Serial, v.Changed)
		}
		if prev, dup := seen[v.Changed[0]]; dup {
			t.Fatalf("versions %d and %d both changed %s", prev, v.Serial, v.Changed[0])
		}
		seen[v.Changed[0]] = v.Serial
		if each != nil {
			each(v.Serial, v)
		}
	}
	snap, err := f.s.Snapshot(f.ctx, state, int64(n))
	if err != nil {
		t.Fatalf("Snapshot(head): %v", err)
	}
	d, err := parseDoc(snap)
	if err != nil {
		t.Fatalf("head snapshot: %v", err)
	}
	if d.Serial != int64(n) || len(d.Resources) != n {
		t.Fatalf("head snapshot has serial %d and %d resources; want %d and %d (a lost update?)", d.Serial, len(d.Resources), n, n)
	}
	for _, r := range d.Resources {
		if _, ok := seen[engine.Address(r.Address)]; !ok {
			t.Fatalf("head snapshot holds %s, which no version changed", r.Address)
		}
	}
}
