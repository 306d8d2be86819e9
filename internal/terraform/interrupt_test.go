package terraform

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/testprovider"
	"github.com/kilolock/kilolock/internal/testprovider/tptest"
)

// kltestRequired is the required_providers block of the test provider.
const kltestRequired = `terraform {
  required_providers {
    kltest = { source = "kilolock.test/kilolock/kltest" }
  }
}
`

// interruptRunner is a Runner with InterruptGrace grace whose Terraform
// uses the test provider, its API calls ignoring Terraform's stop (a cloud
// call without a deadline).
func interruptRunner(t *testing.T, grace time.Duration) (*Runner, *tptest.Provider) {
	t.Helper()
	p := tptest.New(t)
	env := append(os.Environ(), p.Env()...)
	env = append(env, testprovider.EnvIgnoreStop+"=1")
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r, err := NewRunner(RunnerOptions{WorkRoot: filepath.Join(t.TempDir(), "runs"), Binary: testBinary(t), Env: env, Logger: log, InterruptGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	return r, p
}

// cancelAfter returns a Progress that cancels 1 s after phase began, and
// when it did.
func cancelAfter(phase string, cancel context.CancelFunc) (func(engine.Progress), func() time.Time) {
	var once sync.Once
	var mu sync.Mutex
	var at time.Time
	return func(p engine.Progress) {
			if p.Phase == phase {
				once.Do(func() {
					time.AfterFunc(time.Second, func() {
						mu.Lock()
						at = time.Now()
						mu.Unlock()
						cancel()
					})
				})
			}
		}, func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			return at
		}
}

// TestInterruptGracePlan: a plan whose data source read hangs (the
// provider ignores Terraform's stop) returns InterruptGrace after its
// cancellation, not when the read ends. Measured (ADR 0043): Terraform
// itself exits within a second of SIGINT, but the provider it leaves
// behind holds Terraform's stdout, and terraform-exec reads that until
// its WaitDelay (60 s by default) closes it; the provider is killed with
// Terraform's process group.
func TestInterruptGracePlan(t *testing.T) {
	t.Parallel()
	const grace = time.Second
	r, _ := interruptRunner(t, grace)
	dir := setupConfig(t, map[string]string{"main.tf": kltestRequired + `
data "kltest_object" "hung" {
  id    = "0123456789abcdef"
  delay = "20s"
}
`})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	progress, cancelled := cancelAfter(phasePlan, cancel)
	_, err := r.Plan(ctx, engine.PlanRequest{Run: "hung-plan", Dir: dir, Snapshot: snapshot("lineage-hung", 0), Progress: progress})
	if cancelled().IsZero() {
		t.Fatalf("the plan ended before it was cancelled: %v", err)
	}
	after := time.Since(cancelled())
	t.Logf("the hung plan returned %s after its cancellation: %v", after.Round(time.Millisecond), err)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Plan = %v, want context.Canceled", err)
	}
	if after > grace+3*time.Second {
		t.Errorf("the hung plan returned %s after its cancellation, want about InterruptGrace (%s): not the read's 20 s", after.Round(time.Millisecond), grace)
	}
}

// TestInterruptGraceApply: an apply whose create ignores Terraform's stop
// is killed InterruptGrace after its cancellation — Terraform waits for the
// resource operations in flight (measured, ADR 0043) — and its error says
// it was killed (CommandError.Killed, the engine's TerraformFailure). The
// provider dies with Terraform's process group: the object it was
// creating never appears.
func TestInterruptGraceApply(t *testing.T) {
	t.Parallel()
	const grace = time.Second
	r, p := interruptRunner(t, grace)
	dir := setupConfig(t, map[string]string{"main.tf": kltestRequired + `
resource "kltest_object" "slow" {
  name  = "slow"
  delay = "4s"
}
`})
	snap := snapshot("lineage-killed", 0)
	plan, err := r.Plan(context.Background(), engine.PlanRequest{Run: "plan", Dir: dir, Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	progress, cancelled := cancelAfter(phaseApply, cancel)
	start := time.Now()
	res, err := r.Apply(ctx, engine.ApplyRequest{Run: "apply", PlanFile: plan.PlanFile, Config: plan.Config, Snapshot: snap, Progress: progress})
	if cancelled().IsZero() {
		t.Fatalf("the apply ended before it was cancelled: %v", err)
	}
	after := time.Since(cancelled())
	t.Logf("the apply returned %s after its cancellation: %v", after.Round(time.Millisecond), err)
	var ce *CommandError
	if !errors.As(err, &ce) || !ce.Killed || !ce.TerraformFailure().Killed || !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply = %v, want a killed *CommandError that is context.Canceled", err)
	}
	if after > grace+2*time.Second {
		t.Errorf("the apply returned %s after its cancellation, want about InterruptGrace (%s)", after.Round(time.Millisecond), grace)
	}
	if res == nil || res.State == nil {
		t.Errorf("no state after the kill: %+v", res)
	}
	// Had the provider lived on, it would create the object 4 s after
	// the create began.
	time.Sleep(time.Until(start.Add(6 * time.Second)))
	if objs := p.Objects(t); len(objs) != 0 {
		t.Errorf("the fake cloud holds %v after Terraform was killed: its provider lived on", objs)
	}
}
