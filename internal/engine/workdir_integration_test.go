package engine_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// leftDir makes the work dir a killed process leaves for run id below the
// harness's work root, its snapshot file holding snapshot (none if nil).
func (h *harness) leftDir(id string, snapshot []byte) string {
	h.t.Helper()
	dir := filepath.Join(h.dir, "runs", id)
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		h.t.Fatal(err)
	}
	if snapshot != nil {
		if err := os.WriteFile(filepath.Join(dir, "snapshot.tfstate"), snapshot, 0o600); err != nil {
			h.t.Fatal(err)
		}
	}
	return dir
}

func exists(t *testing.T, dir string) bool {
	t.Helper()
	_, err := os.Stat(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// TestRemoveLeftWorkDirs: the work dirs killed processes left (ADR 0042).
// Of an apply killed while Terraform applied, with no checkpoint stored
// yet, the dir holds what Terraform wrote: it is stored as the run's
// checkpoint, then the dir is removed, and Recover commits it. The dir of a
// dead plan is removed. Kept: the dir of a run still in progress (another
// process renews its lease), of a run the store does not know, and of a
// killed apply whose dir holds no readable state (an operator's to look
// at).
func TestRemoveLeftWorkDirs(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"a": {Value: "a0"}, "b": {Value: "b0"}}
	h.base(cfg)
	next := cfg.with(map[string]string{"a": "a1", "b": "b1"})
	next["d"] = res{Value: "d1", Sleep: 4, DependsOn: []string{"a", "b"}}
	plan := h.plan(next)
	written := h.checkpointOf(plan, func(hs headState) bool {
		in := hs.inputs()
		_, d := in["d"]
		return in["a"] == "a1" && in["b"] == "b1" && !d
	})
	killed := h.killedApply(plan, nil)
	killedDir := h.leftDir(killed.ID, written)

	deadPlan := h.deadPlanning()
	deadPlanDir := h.leftDir(deadPlan.ID, nil)
	unknownDir := h.leftDir(engine.NewRunID(), nil)
	garbled := h.killedApply(h.plan(cfg.with(map[string]string{"a": "a2"})), nil)
	garbledDir := h.leftDir(garbled.ID, []byte(`{"version": 4, "lineage": `))
	now := time.Now().UTC()
	live := engine.Run{ID: engine.NewRunID(), Kind: engine.KindPlan, State: testState, Actor: "erin", Holder: engine.Holder{Host: "other", PID: 7},
		Status: engine.StatusPlanning, CreatedAt: now, LeaseUntil: now.Add(time.Hour)}
	if err := h.store.CreateRun(h.ctx, live); err != nil {
		t.Fatal(err)
	}
	liveDir := h.leftDir(live.ID, nil)

	removed, err := h.eng.RemoveLeftWorkDirs(h.ctx)
	if err != nil {
		t.Fatalf("RemoveLeftWorkDirs: %v", err)
	}
	want := []string{killed.ID, deadPlan.ID}
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("RemoveLeftWorkDirs removed %v; want %v (the killed apply's and the dead plan's)", removed, want)
	}
	for dir, keep := range map[string]bool{killedDir: false, deadPlanDir: false, unknownDir: true, garbledDir: true, liveDir: true} {
		if got := exists(t, dir); got != keep {
			t.Errorf("work dir %s exists = %v after RemoveLeftWorkDirs; want %v", filepath.Base(dir), got, keep)
		}
	}
	cp, err := h.store.GetArtifact(h.ctx, killed.ID, engine.ArtifactApplyCheckpoint)
	if err != nil || !bytes.Equal(cp, written) {
		t.Fatalf("checkpoint of the killed apply after its dir was removed: %d bytes, %v; want the %d bytes its dir held", len(cp), err, len(written))
	}
	out, err := h.eng.Recover(h.ctx, killed.ID)
	if err != nil {
		t.Fatalf("Recover after the salvage: %v", err)
	}
	if hs, _ := h.head(); hs.inputs()["a"] != "a1" || hs.inputs()["b"] != "b1" || out.Version == nil {
		t.Errorf("head after Recover = %v (version %v); want a1 and b1 committed from the salvaged state", hs.inputs(), out.Version)
	}
	if again, err := h.eng.RemoveLeftWorkDirs(h.ctx); err != nil || len(again) != 0 {
		t.Errorf("second RemoveLeftWorkDirs = %v, %v; want nothing removed", again, err)
	}
}

// frozenStore is the real store as a frozen holder uses it: neither its
// run's lease nor its reservations are renewed (SIGSTOP, a suspended
// machine), everything else goes through.
type frozenStore struct{ engine.Store }

func (frozenStore) RenewRun(context.Context, string, time.Duration) error { return nil }
func (frozenStore) Renew(context.Context, string, time.Duration) error    { return nil }

// TestRemoveLeftWorkDirsKeepsOwnRuns: an apply whose holder stalled past
// its lease while its Terraform runs is ended lease-expired and fenced by
// the sweep (ADR 0035), but its process still applies in its work dir:
// that process's RemoveLeftWorkDirs keeps the dir, and the apply, coming
// back, commits through its fence.
func TestRemoveLeftWorkDirsKeepsOwnRuns(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"x": {Value: "x0"}}
	h.base(cfg)
	gate, release := h.gate()
	slow := config{"x": {Value: "x1", Gate: gate}}
	plan := h.plan(slow)
	log := slog.New(slog.NewTextHandler(newTestLogWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	frozen := engine.New(frozenStore{h.store}, h.eng.Terraform, log)
	frozen.Lease, frozen.Poll, frozen.Holder = h.eng.Lease, h.eng.Poll, engine.Holder{Host: "frozen", PID: 4}
	done := make(chan error, 1)
	go func() {
		_, err := frozen.Apply(h.ctx, engine.ApplyInput{PlanRun: plan.ID, Actor: "alice"})
		done <- err
	}()
	var id string
	waitFor(t, 60*time.Second, "the frozen apply to be fenced by the sweep", func() bool {
		if _, err := h.eng.Status(h.ctx, testState); err != nil {
			t.Fatal(err)
		}
		id = h.run(plan.ID).ApplyRun
		return id != "" && h.run(id).Status == engine.StatusLeaseExpired
	})
	dir := filepath.Join(h.dir, "runs", id)
	if !exists(t, dir) {
		t.Fatalf("the frozen apply's work dir %s is not there while its Terraform runs", dir)
	}
	removed, err := frozen.RemoveLeftWorkDirs(h.ctx)
	if err != nil || len(removed) != 0 || !exists(t, dir) {
		t.Fatalf("RemoveLeftWorkDirs of the frozen apply's own process = %v, %v (dir there: %v); want its dir kept", removed, err, exists(t, dir))
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("the frozen apply, coming back: %v", err)
	}
	if r := h.run(id); r.CommittedSerial == 0 {
		t.Errorf("the frozen apply committed nothing: %s %+v", r.Status, r.End)
	}
	if exists(t, dir) {
		t.Errorf("work dir %s after the apply returned: want removed by its own cleanup", dir)
	}
}

// TestRecoverTakesTheWorkDirsNewerState: a holder stopped (SIGSTOP) while
// its Terraform ran on, then killed: Terraform finished and wrote its
// final state in the work dir, the store holds only an older checkpoint.
// Recover commits the newer state the dir holds (salvage), not the older
// checkpoint — which would have committed less than Terraform created and
// removed the dir, the only copy of the rest (a fresh-eyes tester's case).
func TestRecoverTakesTheWorkDirsNewerState(t *testing.T) {
	t.Parallel()
	h := setup(t)
	cfg := config{"a": {Value: "a0"}, "b": {Value: "b0"}}
	h.base(cfg)
	next := cfg.with(map[string]string{"a": "a1", "b": "b1"})
	next["d"] = res{Value: "d1", Sleep: 2, DependsOn: []string{"a", "b"}}
	plan := h.plan(next)
	older := h.checkpointOf(plan, func(hs headState) bool { _, d := hs.inputs()["d"]; return hs.inputs()["a"] == "a1" && !d })
	final := h.checkpointOf(plan, func(hs headState) bool { return hs.inputs()["d"] == "d1" })
	killed := h.killedApply(plan, older)
	// Its holder ran on this host, and is dead.
	if _, err := h.store.UpdateRun(h.ctx, killed.ID, nil, func(r *engine.Run) error {
		r.Holder = engine.Holder{Host: h.eng.Holder.Host, PID: 4194000}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	dir := h.leftDir(killed.ID, final)
	if _, err := h.eng.Recover(h.ctx, killed.ID); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	if hs, _ := h.head(); hs.inputs()["d"] != "d1" || hs.inputs()["a"] != "a1" {
		t.Errorf("head after Recover = %v; want a1, b1 and d1, the final state the work dir held", hs.inputs())
	}
	if exists(t, dir) {
		t.Errorf("the work dir %s is still there after its state was committed", dir)
	}
}
