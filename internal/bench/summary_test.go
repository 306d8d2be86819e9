package bench

import (
	"bytes"
	"testing"
	"time"
)

// fixedResults is a Results as Run returns it, with round numbers.
func fixedResults() *Results {
	s := time.Second
	ms := time.Millisecond
	round := func(k time.Duration) OverheadRound {
		return OverheadRound{
			KLPlan: 10180*ms + k, KLApply: 2550 * ms, KLStart: 13 * ms,
			PlanSteps: map[string]time.Duration{
				StepInit: 420 * ms, StepPlan: 7400 * ms, StepShow: 1890 * ms, StepRunnerAll: 10140*ms + k,
			},
			ApplySteps: map[string]time.Duration{StepInit: 380 * ms, StepApply: 2010 * ms, StepApplyAll: 2390 * ms},
			TFInit:     360 * ms, TFPlan: 5180*ms + k, TFApply: 1950 * ms,
			TFPlanJSON: 6900 * ms, TFShow: 1800 * ms, TFVersion: 60 * ms,
			KLPlanCPU: 12*s + k, KLApplyCPU: 3 * s, TFInitCPU: 500 * ms, TFPlanCPU: 7500 * ms, TFPlanJSONCPU: 9 * s, TFShowCPU: 2 * s, TFApplyCPU: 2500 * ms,
			ParseJSON: 120 * ms, Footprint: 50 * ms, Intent: 10 * ms, PlanJSONBytes: 2_510_000,
		}
	}
	return &Results{
		Machine: Machine{CPUs: 2, Model: "AMD EPYC", OS: "linux/amd64", Load: "0.48 3.22 5.66"},
		Runs:    3,
		Concurrency: &ConcurrencyResult{
			Plans: 8, Sleep: 2 * s, Poll: 50 * ms,
			Reservations: []time.Duration{3100 * ms, 3300 * ms, 3000 * ms},
			WholeState:   []time.Duration{18400 * ms, 18450 * ms, 19000 * ms},
			PlanPhase:    []time.Duration{1700 * ms},
		},
		Overhead: &OverheadResult{Resources: 2000, Rounds: []OverheadRound{round(0), round(200 * ms), round(-100 * ms)}},
		Commit: &CommitResult{Count: 2, Lines: []BenchLine{
			{Name: "BenchmarkMerge10k", N: 19, Metrics: map[string]float64{"ns/op": 63e6, "x-valid": 0.69, "B/op": 2353512, "allocs/op": 3291}},
			{Name: "BenchmarkMerge10k", N: 19, Metrics: map[string]float64{"ns/op": 67e6, "x-valid": 0.92, "B/op": 2356921, "allocs/op": 3285}},
			{Name: "BenchmarkCommit10k", N: 2, Metrics: map[string]float64{"ns/op": 781e6, "x-valid": 11.35, "B/op": 58696580, "allocs/op": 91350}},
			{Name: "BenchmarkOther", N: 2, Metrics: map[string]float64{"ns/op": 1000}},
		}},
	}
}

func TestSummary(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := Summary(fixedResults()).Render(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary.golden", b.Bytes())
}

func TestBreakdown(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := Breakdown(fixedResults().Overhead).Render(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "breakdown.golden", b.Bytes())
}

func TestFigureReports(t *testing.T) {
	t.Parallel()
	res := fixedResults()
	res.Concurrency.LoadAtStart = "1.00 1.00 1.00"
	res.Overhead.LoadAtStart = "2.00 2.00 2.00"
	var b bytes.Buffer
	writeConcurrency(&b, res.Concurrency)
	if err := writeOverhead(&b, res.Overhead); err != nil {
		t.Fatal(err)
	}
	golden(t, "figures.golden", b.Bytes())
}

func TestSummaryPartial(t *testing.T) {
	t.Parallel()
	res := fixedResults()
	res.Concurrency, res.Overhead = nil, nil
	if got := len(Summary(res).Rows); got != 3 {
		t.Errorf("commit-only summary has %d rows, want 3", got)
	}
}

// TestSummaryProvider: figure 2b's rows follow figure 2's, labelled 2b.
// and naming the provider.
func TestSummaryProvider(t *testing.T) {
	t.Parallel()
	res := fixedResults()
	p := *res.Overhead
	p.Provider = "kltest_object, 20ms per API call"
	res.ProviderOverhead = &p
	var b bytes.Buffer
	if err := Summary(res).Render(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary-provider.golden", b.Bytes())
}
