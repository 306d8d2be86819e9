package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/kilolock/kilolock/internal/testprovider"
)

// runNative measures figure 5 — the native lane against the terraform
// lane on a big state of the test provider built from opts.Src — and
// prints its heading, medians and time breakdown.
func runNative(ctx context.Context, w io.Writer, opts Options) (*NativeResult, error) {
	kl, mirror, cleanup, err := klWithProvider(ctx, opts, "klbench-native-provider-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	no := NativeOptions{KL: kl, Terraform: opts.Terraform, Mirror: mirror, Resources: opts.NativeResources, Runs: opts.Runs, TempDir: opts.TempDir, Progress: w}
	no.defaults()
	fmt.Fprintf(w, "\n== 5. native lane (issue 17): %s %s resources, %s per Read, default -parallelism ==\n",
		formatCount(no.Resources), testprovider.Type+"_object", no.ReadDelay)
	fmt.Fprintf(w, "  (a) one resource changed: kl plan --lane native --target ADDR + kl apply vs kl plan (terraform lane) + kl apply, each on a fresh store\n"+
		"  (b) %d disjoint native-lane PRs (--target) on that state, plans at once then applies at once, vs %d PRs on %d separate %d-resource states\n",
		no.PRs, no.PRs, no.PRs, no.TinyResources)
	n, err := Native(ctx, no)
	if err != nil {
		return nil, err
	}
	if err := writeNative(w, n); err != nil {
		return nil, err
	}
	return n, nil
}

// formatCount prints n with a thousands comma ("10,000").
func formatCount(n int) string {
	if n >= 1000 {
		return fmt.Sprintf("%d,%03d", n/1000, n%1000)
	}
	return fmt.Sprintf("%d", n)
}

// writeNative prints figure 5's medians, its correctness check and where
// each command's time goes.
func writeNative(w io.Writer, n *NativeResult) error {
	sec := func(f func(NativeRound) time.Duration) string { return FormatSeconds(n.Median(f)) }
	fmt.Fprintf(w, "  (a) medians: native lane plan %s + apply %s = %s vs terraform lane plan %s + apply %s = %s: %s faster (goal ≥ 20×);\n"+
		"      CPU time (user + sys, terraform's included): %s vs %s\n",
		sec(func(r NativeRound) time.Duration { return r.NativePlan }), sec(func(r NativeRound) time.Duration { return r.NativeApply }), sec(NativeRound.NativeTotal),
		sec(func(r NativeRound) time.Duration { return r.TFPlan }), sec(func(r NativeRound) time.Duration { return r.TFApply }), sec(NativeRound.TFTotal),
		FormatRatio(n.Speedup()), sec(func(r NativeRound) time.Duration { return r.NativeCPU }), sec(func(r NativeRound) time.Duration { return r.TFCPU }))
	fmt.Fprintf(w, "      check: %s\n", n.Checked)
	fmt.Fprintf(w, "  (b) medians: %d applies at once on one %s-resource state %s vs on %d tiny states %s: %s (goal ≤ 1.3×); plans at once %s vs %s\n",
		n.PRs, formatCount(n.Resources), sec(func(r NativeRound) time.Duration { return r.SharedApplies }), n.PRs,
		sec(func(r NativeRound) time.Duration { return r.TinyApplies }), FormatRatio(n.SharedRatio()),
		sec(func(r NativeRound) time.Duration { return r.SharedPlans }), sec(func(r NativeRound) time.Duration { return r.TinyPlans }))
	fmt.Fprintf(w, "      one process of (b), medians: kl apply %s (runner's Apply %s, rest: start, store, commit, report %s) on the shared state vs %s (%s, %s) on a tiny one;\n"+
		"      kl plan %s (runner's Plan %s, rest: start, store, closure, slice, proof %s) vs %s (%s, %s)\n",
		sec(func(r NativeRound) time.Duration { return r.Shared.Apply }), sec(func(r NativeRound) time.Duration { return r.Shared.ApplyRunner }),
		sec(func(r NativeRound) time.Duration { return r.Shared.ApplyRest }), sec(func(r NativeRound) time.Duration { return r.Tiny.Apply }),
		sec(func(r NativeRound) time.Duration { return r.Tiny.ApplyRunner }), sec(func(r NativeRound) time.Duration { return r.Tiny.ApplyRest }),
		sec(func(r NativeRound) time.Duration { return r.Shared.Plan }), sec(func(r NativeRound) time.Duration { return r.Shared.PlanRunner }),
		sec(func(r NativeRound) time.Duration { return r.Shared.PlanRest }), sec(func(r NativeRound) time.Duration { return r.Tiny.Plan }),
		sec(func(r NativeRound) time.Duration { return r.Tiny.PlanRunner }), sec(func(r NativeRound) time.Duration { return r.Tiny.PlanRest }))
	fmt.Fprintf(w, "  ratios are medians of the per-round ratios; load average at start %s\n", n.LoadAtStart)
	fmt.Fprintf(w, "\n  where (a)'s time goes (medians of each cell; from KL_LOG_LEVEL=debug step timings):\n\n")
	return NativeBreakdown(n).Render(indent(w))
}

// NativeBreakdown splits figure 5a's four kl commands into the steps kl
// logs: Terraform's init (or, with the plugin cache, the provider links),
// its plan or apply, its show -json, the runner's rest (config archive,
// snapshot and plan files, plan JSON, footprint; an apply's show -json,
// which masks Terraform's diagnostics, is inside its apply step) and the
// rest of the process (start, store reads and writes, slice, closure, proof, commit,
// report). Each cell is the median of that cell over the rounds.
func NativeBreakdown(n *NativeResult) *Table {
	t := &Table{Header: []string{"command", "wall", "init or links", "terraform plan or apply", "show -json", "runner, rest", "engine, store, CLI"}}
	row := func(label string, wall func(NativeRound) time.Duration, steps func(NativeRound) map[string]time.Duration, plan bool) {
		step := func(names ...string) func(NativeRound) time.Duration {
			return func(r NativeRound) time.Duration {
				var d time.Duration
				for _, name := range names {
					d += steps(r)[name]
				}
				return d
			}
		}
		// A plan's show -json follows its plan; an apply's (masking
		// Terraform's diagnostics, as the -target warning) runs inside
		// its apply step.
		all, work, parts, show := StepApplyAll, StepApply, []string{StepInit, StepLinked, StepApply}, " (in the apply)"
		if plan {
			all, work, parts, show = StepRunnerAll, StepPlan, []string{StepInit, StepLinked, StepPlan, StepShow}, ""
		}
		rest := func(r NativeRound) time.Duration { return step(all)(r) - step(parts...)(r) }
		outside := func(r NativeRound) time.Duration { return wall(r) - step(all)(r) }
		sec := func(f func(NativeRound) time.Duration) string { return FormatSeconds(n.Median(f)) }
		t.Add(label, sec(wall), sec(step(StepInit, StepLinked)), sec(step(work)), sec(step(StepShow))+show, sec(rest), sec(outside))
	}
	row("native lane: kl plan --lane native --target", func(r NativeRound) time.Duration { return r.NativePlan },
		func(r NativeRound) map[string]time.Duration { return r.NativePlanSteps }, true)
	row("native lane: kl apply", func(r NativeRound) time.Duration { return r.NativeApply },
		func(r NativeRound) map[string]time.Duration { return r.NativeApplySteps }, false)
	row("terraform lane: kl plan", func(r NativeRound) time.Duration { return r.TFPlan },
		func(r NativeRound) map[string]time.Duration { return r.TFPlanSteps }, true)
	row("terraform lane: kl apply", func(r NativeRound) time.Duration { return r.TFApply },
		func(r NativeRound) map[string]time.Duration { return r.TFApplySteps }, false)
	return t
}

// addNativeRows adds figure 5's rows to the summary table t.
func addNativeRows(t *Table, n *NativeResult) {
	t.Add(fmt.Sprintf("5a. one change in %s resources (kltest_object, %s per Read): plan + apply", formatCount(n.Resources), n.ReadDelay),
		FormatSeconds(n.Median(NativeRound.NativeTotal))+" (native lane)",
		FormatSeconds(n.Median(NativeRound.TFTotal))+" (terraform lane)",
		FormatRatio(n.Speedup())+" faster (baseline ÷ kl; goal ≥ 20×)")
	t.Add(fmt.Sprintf("5b. %d disjoint native-lane PRs applied at once: apply wall", n.PRs),
		FormatSeconds(n.Median(func(r NativeRound) time.Duration { return r.SharedApplies }))+fmt.Sprintf(" (one %s-resource state)", formatCount(n.Resources)),
		FormatSeconds(n.Median(func(r NativeRound) time.Duration { return r.TinyApplies }))+fmt.Sprintf(" (%d tiny states)", n.PRs),
		FormatRatio(n.SharedRatio())+" (kl ÷ baseline; goal ≤ 1.3×)")
}
