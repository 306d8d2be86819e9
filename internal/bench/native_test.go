package bench

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestNative runs figure 5 tiny (12 resources, 2 PRs on it and on 2
// states of 2 resources, 1 ms per Read, one round) with the real kl, the
// test provider and terraform: each plan is in the lane it asked for and
// writes its one resource, every apply applies, the concurrent applies on
// the shared state lose no change, and a full terraform plan after the
// native apply shows no changes.
func TestNative(t *testing.T) {
	if testing.Short() {
		t.Skip("runs kl, the test provider and Terraform")
	}
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("terraform not on PATH")
	}
	root, err := ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	kl, err := BuildKL(t.Context(), root, dir)
	if err != nil {
		t.Fatal(err)
	}
	mirror, err := BuildProviderMirror(t.Context(), root, dir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Native(t.Context(), NativeOptions{KL: kl, Terraform: tf, Mirror: mirror, Resources: 12, PRs: 2, TinyResources: 2,
		ReadDelay: "1ms", Runs: 1, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rounds) != 1 || res.Changed != "kltest_object.r00001" {
		t.Fatalf("rounds %d, changed %s; want 1 round changing kltest_object.r00001", len(res.Rounds), res.Changed)
	}
	r := res.Rounds[0]
	for name, d := range map[string]time.Duration{"native plan": r.NativePlan, "native apply": r.NativeApply, "terraform-lane plan": r.TFPlan,
		"terraform-lane apply": r.TFApply, "shared applies": r.SharedApplies, "tiny applies": r.TinyApplies} {
		if d <= 0 {
			t.Errorf("%s took %s", name, d)
		}
	}
	if !strings.Contains(res.Checked, "no changes (exit 0 of -detailed-exitcode, 12 resources refreshed") {
		t.Errorf("correctness check: %q", res.Checked)
	}
	if r.Shared.ApplyRunner <= 0 || r.Tiny.PlanRunner <= 0 || r.Shared.Apply < r.Shared.ApplyRunner {
		t.Errorf("per-process times of (b): shared %+v, tiny %+v", r.Shared, r.Tiny)
	}
	if r.NativePlanSteps[StepPlan] <= 0 || r.TFApplySteps[StepApply] <= 0 {
		t.Errorf("step timings missing: native plan %v, terraform-lane apply %v", r.NativePlanSteps, r.TFApplySteps)
	}
}

func TestNativeRefusesTooFewResources(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]NativeOptions{
		"9 resources":           {Resources: 9},
		"more PRs than half":    {Resources: 12, PRs: 7},
		"no binaries or mirror": {},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts.KL, opts.Terraform, opts.Mirror, opts.TempDir = "/kl", "/terraform", t.TempDir(), t.TempDir()
			if name == "no binaries or mirror" {
				opts.KL = ""
			}
			if _, err := Native(t.Context(), opts); err == nil {
				t.Errorf("Native(%+v) accepted", opts)
			}
		})
	}
}

func TestNativeOptionsDefaults(t *testing.T) {
	t.Parallel()
	o := NativeOptions{}
	o.defaults()
	if o.Resources != 10000 || o.PRs != 8 || o.TinyResources != 8 || o.ReadDelay != "20ms" || o.Runs != 3 || o.Progress == nil {
		t.Errorf("defaults: %+v", o)
	}
}

// fixedNative is a NativeResult as Native returns it, with round numbers.
func fixedNative() *NativeResult {
	ms := time.Millisecond
	round := func(k time.Duration) NativeRound {
		return NativeRound{
			NativePlan: 2400*ms + k, NativeApply: 1500 * ms, TFPlan: 80*time.Second + 10*k, TFApply: 9 * time.Second,
			NativeCPU: 3 * time.Second, TFCPU: 140 * time.Second,
			NativePlanSteps:  map[string]time.Duration{StepInit: 300 * ms, StepPlan: 900 * ms, StepShow: 500 * ms, StepRunnerAll: 1900 * ms},
			NativeApplySteps: map[string]time.Duration{StepLinked: 5 * ms, StepApply: 900 * ms, StepShow: 300 * ms, StepApplyAll: 1100 * ms},
			TFPlanSteps:      map[string]time.Duration{StepInit: 400 * ms, StepPlan: 60 * time.Second, StepShow: 12 * time.Second, StepRunnerAll: 75 * time.Second},
			TFApplySteps:     map[string]time.Duration{StepLinked: 5 * ms, StepApply: 7 * time.Second, StepApplyAll: 8 * time.Second},
			SharedPlans:      9 * time.Second, SharedApplies: 6*time.Second + k, TinyPlans: 5 * time.Second, TinyApplies: 4 * time.Second,
			Shared: PRTimes{Plan: 8 * time.Second, PlanRunner: 5 * time.Second, PlanRest: 3 * time.Second, Apply: 5 * time.Second, ApplyRunner: 3 * time.Second, ApplyRest: 2 * time.Second},
			Tiny:   PRTimes{Plan: 4 * time.Second, PlanRunner: 3500 * ms, PlanRest: 500 * ms, Apply: 3 * time.Second, ApplyRunner: 2500 * ms, ApplyRest: 500 * ms},
		}
	}
	return &NativeResult{Resources: 10000, PRs: 8, TinyResources: 8, ReadDelay: "20ms", Changed: "kltest_object.r01000",
		Rounds: []NativeRound{round(0), round(200 * ms), round(-100 * ms)}, LoadAtStart: "2.00 2.00 2.00",
		Checked: "a full terraform plan of the whole configuration against kl state pull after the native apply: no changes (exit 0 of -detailed-exitcode, 10000 resources refreshed, 70.00 s)"}
}

// TestNativeReport: figure 5's lines, breakdown and summary rows.
func TestNativeReport(t *testing.T) {
	t.Parallel()
	n := fixedNative()
	var b bytes.Buffer
	if err := writeNative(&b, n); err != nil {
		t.Fatal(err)
	}
	b.WriteString("\n")
	if err := Summary(&Results{Native: n}).Render(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "native.golden", b.Bytes())
}
