package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// TestGCJob (ADR 0063): klbot runs the store's gc as a periodic job
// (KLBOT_GC_INTERVAL=1s) with KLBOT_RETENTION=1s. Pull request 1 is
// planned and closed on GitHub (its delivery dropped; the reconcile round
// closes its plan): within seconds the gc deletes the closed plan's saved
// plan and configuration archive, and its story gains the marker saying
// so; its diff stays. Pull request 2's open plan keeps everything.
func TestGCJob(t *testing.T) {
	h := setup(t, "KLBOT_RECONCILE_INTERVAL=1s", "KLBOT_GC_INTERVAL=1s", "KLBOT_RETENTION=1s")
	app := "infra/app.tf"
	p1 := pr{1, sha(1), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}), []string{app}}
	p2 := pr{2, sha(2), change(t, [3]string{"infra/db.tf", `"db_main-v1"`, `"db_main-v2"`}), []string{"infra/db.tf"}}
	h.open(t, p1)
	h.open(t, p2)
	h.settle()
	plan1, plan2 := h.planRun(1), h.planRun(2)
	h.closeOnFake(p1, false, "")
	h.waitStatus(t, plan1, engine.StatusSuperseded, 30*time.Second)
	st := h.openStore(t)
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := st.GetArtifact(ctx, plan1, engine.ArtifactPlanFile)
		if errors.Is(err, engine.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the closed plan %s still has its saved plan 30 s after it closed, with KLBOT_RETENTION=1s", plan1)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := st.GetArtifact(ctx, plan1, engine.ArtifactConfig); !errors.Is(err, engine.ErrNotFound) {
		t.Errorf("the closed plan's configuration archive: %v; want deleted with its saved plan", err)
	}
	if _, err := st.GetArtifact(ctx, plan1, engine.ArtifactIntent); err != nil {
		t.Errorf("the closed plan's intent: %v; want kept (its story shows it)", err)
	}
	ms, err := st.Markers(ctx, plan1)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range ms {
		found = found || (m.Kind == engine.MarkerArtifactsDeleted && m.Extra["retention"] == "1s")
	}
	if !found {
		t.Errorf("the closed plan's markers %v have no artifacts-deleted marker with retention 1s", ms)
	}
	for _, name := range []string{engine.ArtifactPlanFile, engine.ArtifactConfig, engine.ArtifactIntent} {
		if _, err := st.GetArtifact(ctx, plan2, name); err != nil {
			t.Errorf("PR 2's open plan lost %s: %v", name, err)
		}
	}
}
