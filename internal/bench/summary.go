package bench

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// ratio is the median over rounds of kl(r) / base(r): each round's two
// sides ran back to back, so a per-round ratio cancels the load both saw.
func (r OverheadResult) ratio(kl, base func(OverheadRound) time.Duration) float64 {
	xs := make([]float64, len(r.Rounds))
	for i, x := range r.Rounds {
		xs[i] = Ratio(kl(x), base(x))
	}
	return MedianFloat(xs)
}

// PlanRatio is the median per-round kl plan / (terraform init + plan -out).
func (r OverheadResult) PlanRatio() float64 { return r.ratio(klPlan, OverheadRound.TFPlanStep) }

// ApplyRatio is the median per-round kl apply / terraform apply PLAN.
func (r OverheadResult) ApplyRatio() float64 { return r.ratio(klApply, tfApply) }

// CPURatio is the median per-round CPU time of kl plan + kl apply (with
// their Terraform processes) / that of init + plan -out + apply.
func (r OverheadResult) CPURatio() float64 {
	return r.ratio(OverheadRound.KLTotalCPU, OverheadRound.TFTotalCPU)
}

// TotalRatio is the median per-round (kl plan + kl apply) / (init + plan
// -out + apply).
func (r OverheadResult) TotalRatio() float64 {
	return r.ratio(OverheadRound.KLTotal, OverheadRound.TFTotal)
}

// Summary is the table `make bench` ends with and the README quotes: one
// row per figure, Kilolock's median beside its baseline's, and the ratio:
// the median of the per-round ratios for figures 1 and 2 (so it need not be
// the quotient of the two medians shown), the median x-valid metric for 3.
func Summary(res *Results) *Table {
	t := &Table{Header: []string{"figure", "Kilolock", "baseline", "ratio"}}
	if c := res.Concurrency; c != nil {
		t.Add(fmt.Sprintf("1. %d disjoint applies at once, %g s sleep each: apply wall", c.Plans, c.Sleep.Seconds()),
			FormatSeconds(Median(c.Reservations))+" (reservations)",
			FormatSeconds(Median(c.WholeState))+" (whole-state lock)",
			FormatRatio(c.Ratio())+" faster (baseline ÷ kl)")
	}
	if o := res.Overhead; o != nil {
		addOverheadRows(t, "2.", o)
	}
	if o := res.ProviderOverhead; o != nil {
		addOverheadRows(t, "2b.", o)
	}
	if c := res.Commit; c != nil {
		labels := map[string]string{
			"BenchmarkMerge10k":  "3. snapshot-merge into 10,000 resources",
			"BenchmarkCommit10k": "3. whole commit, 10,000 resources (parse ×3, merge, marshal)",
		}
		for _, name := range c.Names() {
			label, ok := labels[name]
			if !ok {
				label = "3. " + name
			}
			ratio := "n/a"
			if x := c.Median(name, "x-valid"); !math.IsNaN(x) {
				ratio = fmt.Sprintf("%.2f× (kl ÷ baseline)", x)
			}
			var cells []string
			if v := c.Median(name, "ns/op"); !math.IsNaN(v) {
				cells = append(cells, FormatNanos(v)+"/op")
			}
			if v := c.Median(name, "B/op"); !math.IsNaN(v) {
				cells = append(cells, FormatBytes(v)+"/op")
			}
			if v := c.Median(name, "allocs/op"); !math.IsNaN(v) {
				cells = append(cells, fmt.Sprintf("%.0f allocs/op", v))
			}
			t.Add(label, strings.Join(cells, ", "), "one json.Valid pass over the state", ratio)
		}
	}
	if g := res.Growth; g != nil {
		addGrowthRow(t, g.Resources, "SQLite, used pages", g.GrowthSeries)
		if g.Postgres != nil {
			addGrowthRow(t, g.Resources, "PostgreSQL, pg_total_relation_size", *g.Postgres)
		}
	}
	if n := res.Native; n != nil {
		addNativeRows(t, n)
	}
	return t
}

// addGrowthRow adds figure 4's row of one store (what: its name and unit).
func addGrowthRow(t *Table, resources int, what string, s GrowthSeries) {
	n := float64(len(s.After))
	t.Add(fmt.Sprintf("4. store bytes per version, %d resources (%s)", resources, what),
		FormatBytes(s.PerVersion())+" per plan + apply",
		fmt.Sprintf("%s of it saved plans and archives, until KL_RETENTION", FormatBytes(float64(s.Retained)/n)),
		"n/a")
}

// addOverheadRows adds figure 2's rows (or 2b's, with a provider) to t,
// each label starting with figure.
func addOverheadRows(t *Table, figure string, o *OverheadResult) {
	n := fmt.Sprintf("%d", o.Resources)
	if o.Resources >= 1000 {
		n = fmt.Sprintf("%d,%03d", o.Resources/1000, o.Resources%1000)
	}
	what := "resources"
	if o.Provider != "" {
		what = "resources (" + o.Provider + ")"
	}
	t.Add(fmt.Sprintf("%s plan, %s %s, one changed", figure, n, what),
		FormatSeconds(o.Median(klPlan))+" (kl plan)",
		FormatSeconds(o.Median(OverheadRound.TFPlanStep))+" (terraform init + plan -out)",
		FormatRatio(o.PlanRatio())+" (kl ÷ baseline)")
	t.Add(figure+" apply of that plan",
		FormatSeconds(o.Median(klApply))+" (kl apply)",
		FormatSeconds(o.Median(tfApply))+" (terraform apply PLAN)",
		FormatRatio(o.ApplyRatio())+" (kl ÷ baseline)")
	t.Add(figure+" plan + apply",
		FormatSeconds(o.Median(OverheadRound.KLTotal)),
		FormatSeconds(o.Median(OverheadRound.TFTotal)),
		FormatRatio(o.TotalRatio())+" (kl ÷ baseline)")
	t.Add(figure+" plan + apply, CPU time (user + sys, with terraform's)",
		FormatSeconds(o.Median(OverheadRound.KLTotalCPU)),
		FormatSeconds(o.Median(OverheadRound.TFTotalCPU)),
		FormatRatio(o.CPURatio())+" (kl ÷ baseline)")
}

// Accessors of OverheadRound for medians and the breakdown.
var (
	klPlan     = func(r OverheadRound) time.Duration { return r.KLPlan }
	klApply    = func(r OverheadRound) time.Duration { return r.KLApply }
	klStart    = func(r OverheadRound) time.Duration { return r.KLStart }
	klPlanCPU  = func(r OverheadRound) time.Duration { return r.KLPlanCPU }
	klApplyCPU = func(r OverheadRound) time.Duration { return r.KLApplyCPU }
	tfPlanCPU  = func(r OverheadRound) time.Duration { return r.TFPlanCPU }
	tfJSONCPU  = func(r OverheadRound) time.Duration { return r.TFPlanJSONCPU }
	tfShowCPU  = func(r OverheadRound) time.Duration { return r.TFShowCPU }
	tfApplyCPU = func(r OverheadRound) time.Duration { return r.TFApplyCPU }
	tfInit     = func(r OverheadRound) time.Duration { return r.TFInit }
	tfPlan     = func(r OverheadRound) time.Duration { return r.TFPlan }
	tfPlanJSON = func(r OverheadRound) time.Duration { return r.TFPlanJSON }
	tfShow     = func(r OverheadRound) time.Duration { return r.TFShow }
	tfApply    = func(r OverheadRound) time.Duration { return r.TFApply }
	tfVersion  = func(r OverheadRound) time.Duration { return r.TFVersion }
	parseJSON  = func(r OverheadRound) time.Duration { return r.ParseJSON }
	footprint  = func(r OverheadRound) time.Duration { return r.Footprint }
	intent     = func(r OverheadRound) time.Duration { return r.Intent }
	zero       = func(OverheadRound) time.Duration { return 0 }
)

// planStep and applyStep read one step timing kl logged.
func planStep(name string) func(OverheadRound) time.Duration {
	return func(r OverheadRound) time.Duration { return r.PlanSteps[name] }
}

func applyStep(name string) func(OverheadRound) time.Duration {
	return func(r OverheadRound) time.Duration { return r.ApplySteps[name] }
}

// Breakdown splits kl plan and kl apply into the steps kl logs, beside
// what the same step costs bare Terraform. Each cell is the median of that
// line over the rounds, so the steps need not add up to the total exactly.
// "runner, rest" is the Terraform runner's time outside the Terraform
// commands (config archive, snapshot and plan files, reading the plan JSON,
// footprint, intent, `terraform version`); "engine, store, CLI" is the rest
// of the process (start, store open, store reads and writes, since-plan,
// commit, report).
func Breakdown(o *OverheadResult) *Table {
	planRest := func(r OverheadRound) time.Duration {
		s := r.PlanSteps
		return s[StepRunnerAll] - s[StepInit] - s[StepPlan] - s[StepShow]
	}
	planOutside := func(r OverheadRound) time.Duration { return r.KLPlan - r.PlanSteps[StepRunnerAll] }
	applyRest := func(r OverheadRound) time.Duration {
		s := r.ApplySteps
		return s[StepApplyAll] - s[StepInit] - s[StepLinked] - s[StepApply]
	}
	applyInit := func(r OverheadRound) time.Duration { return r.ApplySteps[StepInit] + r.ApplySteps[StepLinked] }
	applyOutside := func(r OverheadRound) time.Duration { return r.KLApply - r.ApplySteps[StepApplyAll] }
	sec := func(f func(OverheadRound) time.Duration) string { return FormatSeconds(o.Median(f)) }
	extra := func(kl, tf func(OverheadRound) time.Duration) string {
		return fmt.Sprintf("%+.2f s", (o.Median(kl) - o.Median(tf)).Seconds())
	}

	t := &Table{Header: []string{"step", "kl", "bare terraform", "kl extra", "note"}}
	t.Add("kl plan", sec(klPlan), sec(OverheadRound.TFPlanStep)+" (init + plan -out)", extra(klPlan, OverheadRound.TFPlanStep),
		fmt.Sprintf("CPU time: %s vs %s (%s)", sec(klPlanCPU), sec(OverheadRound.TFPlanStepCPU), FormatRatio(o.ratio(klPlanCPU, OverheadRound.TFPlanStepCPU))))
	t.Add("  terraform init", sec(planStep(StepInit)), sec(tfInit), extra(planStep(StepInit), tfInit), "")
	t.Add("  terraform plan", sec(planStep(StepPlan)), sec(tfPlan)+" (plan -out)", extra(planStep(StepPlan), tfPlan),
		fmt.Sprintf("bare plan -json -out: %s; -json costs %+.2f s wall, %+.2f s CPU", sec(tfPlanJSON),
			(o.Median(tfPlanJSON)-o.Median(tfPlan)).Seconds(), (o.Median(tfJSONCPU)-o.Median(tfPlanCPU)).Seconds()))
	showNote := fmt.Sprintf("not needed bare; bare show -json: %s (CPU %s)", sec(tfShow), sec(tfShowCPU))
	if n := medianInt(o.Rounds, func(r OverheadRound) int { return r.PlanJSONBytes }); n > 0 {
		showNote += ", " + FormatBytes(float64(n)) + " of JSON"
	}
	t.Add("  terraform show -json", sec(planStep(StepShow)), "—", extra(planStep(StepShow), zero), showNote)
	t.Add("  runner, rest", sec(planRest), "—", extra(planRest, zero),
		fmt.Sprintf("in-process: parse plan JSON %s, footprint %s, intent %s; terraform version %s",
			sec(parseJSON), sec(footprint), sec(intent), sec(tfVersion)))
	t.Add("  engine, store, CLI", sec(planOutside), "—", extra(planOutside, zero),
		"process start + store open (kl state list): "+sec(klStart))

	t.Add("kl apply", sec(klApply), sec(tfApply)+" (apply PLAN)", extra(klApply, tfApply),
		fmt.Sprintf("CPU time: %s vs %s (%s)", sec(klApplyCPU), sec(tfApplyCPU), FormatRatio(o.ratio(klApplyCPU, tfApplyCPU))))
	t.Add("  init or provider links", sec(applyInit), "—", extra(applyInit, zero),
		"a fresh work dir per run; with the plugin cache no init: the checked provider copies linked")
	t.Add("  terraform apply", sec(applyStep(StepApply)), sec(tfApply), extra(applyStep(StepApply), tfApply), "kl applies with -json (progress, changed count)")
	t.Add("  runner, rest", sec(applyRest), "—", extra(applyRest, zero), "config archive, snapshot and plan files, state read back")
	t.Add("  engine, store, CLI", sec(applyOutside), "—", extra(applyOutside, zero), "load + verify plan, since-plan, parse, changed, snapshot-merge commit, report")
	return t
}

// medianInt is the median over rounds of an int field.
func medianInt(rs []OverheadRound, f func(OverheadRound) int) int {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = float64(f(r))
	}
	m := MedianFloat(xs)
	if math.IsNaN(m) {
		return 0
	}
	return int(m)
}
