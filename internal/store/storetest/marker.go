package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

func testMarkers(t *testing.T, newStore func(t *testing.T) engine.Store) {
	t.Run("SeqOrder", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		r := f.run("s", engine.KindApply, engine.StatusApplying)
		before := time.Now().Add(-time.Second)
		if err := f.s.AddMarkers(f.ctx, r.ID,
			engine.Marker{Kind: engine.MarkerReserved}, engine.Marker{Kind: engine.MarkerPreflight}); err != nil {
			t.Fatalf("AddMarkers: %v", err)
		}
		if err := f.s.AddMarkers(f.ctx, r.ID); err != nil {
			t.Fatalf("AddMarkers with none: %v", err)
		}
		if err := f.s.AddMarkers(f.ctx, r.ID,
			engine.Marker{Kind: engine.MarkerStalenessPassed, Seq: 99}, engine.Marker{Kind: engine.MarkerApplied}); err != nil {
			t.Fatalf("AddMarkers: %v", err)
		}
		ms := f.markers(r.ID)
		diff(t, "kinds", kinds(ms), []engine.MarkerKind{
			engine.MarkerReserved, engine.MarkerPreflight, engine.MarkerStalenessPassed, engine.MarkerApplied,
		})
		for i, m := range ms {
			if m.Seq != int64(i+1) {
				t.Fatalf("marker %d has Seq %d; want %d (the store numbers markers)", i, m.Seq, i+1)
			}
			if m.At.Before(before) || m.At.Location() != time.UTC {
				t.Fatalf("marker %d At = %v; want now, UTC", i, m.At)
			}
		}
		other := f.run("s", engine.KindApply, engine.StatusApplying)
		if err := f.s.AddMarkers(f.ctx, other.ID, engine.Marker{Kind: engine.MarkerFailed}); err != nil {
			t.Fatalf("AddMarkers: %v", err)
		}
		if ms := f.markers(other.ID); len(ms) != 1 || ms[0].Seq != 1 {
			t.Fatalf("another run's markers = %+v; want Seq from 1", ms)
		}
		if ms := f.markers(f.run("s", engine.KindPlan, engine.StatusPlanned).ID); len(ms) != 0 {
			t.Fatalf("markers of a new run = %v; want none", kinds(ms))
		}
	})

	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		r := f.run("s", engine.KindApply, engine.StatusApplying)
		intent := true
		m := engine.Marker{
			At:            now().Add(-time.Minute),
			Kind:          engine.MarkerWaited,
			Other:         "01OTHER",
			OtherPR:       &engine.PullRequest{Repo: "acme/infra", Number: 3, HeadSHA: "cafe", URL: "https://example.invalid/3"},
			Addresses:     engine.NewAddressSet("module.app.*", "output.url"),
			Serial:        7,
			FromSerial:    3,
			Mode:          engine.CommitDelta,
			Count:         4,
			SincePlan:     &engine.SincePlanSummary{SourceSerial: 3, HeadSerial: 7, Independent: 2, ReadChanged: 1, WriteChanged: 1},
			IntentChanged: &intent,
			Deviation: &engine.Deviation{
				Unplanned: engine.NewAddressSet("terraform_data.u"),
				Unchanged: engine.NewAddressSet("terraform_data.n"),
				Kept:      engine.NewAddressSet("terraform_data.k"),
			},
			Waited: engine.Duration(1500 * time.Millisecond),
			Reason: "because",
			Extra:  map[string]string{"k": "v"},
		}
		if err := f.s.AddMarkers(f.ctx, r.ID, m); err != nil {
			t.Fatalf("AddMarkers: %v", err)
		}
		m.Seq = 1
		diff(t, "marker", f.markers(r.ID), []engine.Marker{m})
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		r := f.run("s", engine.KindApply, engine.StatusApplying)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for range 5 {
					if err := f.s.AddMarkers(f.ctx, r.ID, engine.Marker{Kind: engine.MarkerWaited}); err != nil {
						t.Errorf("AddMarkers: %v", err)
						return
					}
				}
			})
		}
		wg.Wait()
		ms := f.markers(r.ID)
		if len(ms) != 40 {
			t.Fatalf("%d markers; want 40", len(ms))
		}
		for i, m := range ms {
			if m.Seq != int64(i+1) {
				t.Fatalf("marker %d has Seq %d: gap or duplicate", i, m.Seq)
			}
		}
	})

	t.Run("UnknownRun", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		wantErr(t, "AddMarkers", f.s.AddMarkers(f.ctx, "nope", engine.Marker{Kind: engine.MarkerFailed}), engine.ErrNotFound)
		_, err := f.s.Markers(f.ctx, "nope")
		wantErr(t, "Markers", err, engine.ErrNotFound)
	})
}

func testArtifacts(t *testing.T, newStore func(t *testing.T) engine.Store) {
	t.Run("RoundTrip", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		r := f.run("s", engine.KindPlan, engine.StatusPlanned)
		plan := make([]byte, 300_000)
		for i := range plan {
			plan[i] = byte(i * 7)
		}
		tests := map[string][]byte{
			"plan.tfplan":  plan,
			"intent.json":  []byte(`{"a":1}`),
			"empty":        {},
			"name/w slash": []byte("x"),
		}
		for name, data := range tests {
			if err := f.s.PutArtifact(f.ctx, r.ID, name, data); err != nil {
				t.Fatalf("PutArtifact(%s): %v", name, err)
			}
		}
		for name, data := range tests {
			got, err := f.s.GetArtifact(f.ctx, r.ID, name)
			if err != nil {
				t.Fatalf("GetArtifact(%s): %v", name, err)
			}
			if string(got) != string(data) {
				t.Fatalf("GetArtifact(%s) returned %d bytes that differ from the %d stored", name, len(got), len(data))
			}
		}
		if err := f.s.PutArtifact(f.ctx, r.ID, "intent.json", []byte(`{"a":2}`)); err != nil {
			t.Fatalf("PutArtifact replacing: %v", err)
		}
		got, err := f.s.GetArtifact(f.ctx, r.ID, "intent.json")
		if err != nil || string(got) != `{"a":2}` {
			t.Fatalf("GetArtifact after replace = %q, %v", got, err)
		}
	})

	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		r := f.run("s", engine.KindPlan, engine.StatusPlanned)
		_, err := f.s.GetArtifact(f.ctx, r.ID, "plan.tfplan")
		wantErr(t, "GetArtifact of a missing name", err, engine.ErrNotFound)
		_, err = f.s.GetArtifact(f.ctx, "nope", "plan.tfplan")
		wantErr(t, "GetArtifact of an unknown run", err, engine.ErrNotFound)
		wantErr(t, "PutArtifact for an unknown run", f.s.PutArtifact(f.ctx, "nope", "x", []byte("x")), engine.ErrNotFound)
	})
}
