package queue

import (
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
)

// TestJudge: the verdicts of Judge for each kind of plan in a merge group,
// in queue order (ADR 0058). The end-to-end tests (cmd/klbot
// TestMergeQueue) run the common ones against GitHub's fake and real
// Terraform; this covers the rest.
func TestJudge(t *testing.T) {
	t.Parallel()
	fp := func(write, read string) engine.Footprint {
		f := engine.Footprint{Write: engine.NewAddressSet(engine.Address(write))}
		if read != "" {
			f.Read = engine.NewAddressSet(engine.Address(read))
		}
		return f
	}
	open := func(write, read string, onMerge bool) Plan {
		return Plan{Project: "infra", State: "acme/infra", PlanRun: "P", St: PlanOpen, OnMerge: onMerge, MergeQueue: true, Footprint: fp(write, read)}
	}
	stale := open("terraform_data.c", "", true)
	stale.SincePlan = engine.SincePlan{Entries: []engine.SincePlanEntry{{Serial: 7, Class: engine.ClassWriteChanged}}}
	off := open("terraform_data.a", "", false)
	off.MergeQueue = false
	tests := map[string]struct {
		plan Plan
		want report.QueueVerdict
	}{
		"writes what #1 writes":                       {open("terraform_data.a", "", true), report.QueueWriteConflict},
		"reads what #1 writes, applied on merge":      {open("terraform_data.b", "terraform_data.a", true), report.QueueReadAfterWrite},
		"reads what #1 writes, apply_trigger comment": {open("terraform_data.b", "terraform_data.a", false), report.QueueReadConflict},
		"reads what #1 writes, on merge but strict":   {func() Plan { p := open("terraform_data.b", "terraform_data.a", true); p.Strict = true; return p }(), report.QueueReadConflict},
		"independent of #1, applied on merge":         {open("terraform_data.b", "", true), report.QueueIndependent},
		"independent of #1, comment, not applied":     {open("terraform_data.b", "", false), report.QueueNotApplied},
		"stale against the head":                      {stale, report.QueueStale},
		"fenced":                                      {func() Plan { p := open("terraform_data.b", "", true); p.FencedBy = []string{"A"}; return p }(), report.QueueFenced},
		"applied already":                             {Plan{Project: "infra", State: "acme/infra", St: PlanApplied, MergeQueue: true}, report.QueueApplied},
		"no plan of the head":                         {Plan{Project: "infra", State: "acme/infra", St: PlanNone, MergeQueue: true}, report.QueueNoPlan},
		"merge_queue false: not judged":               {off, report.QueueNotJudged},
		"another State: #1's writes do not count":     {func() Plan { p := open("terraform_data.a", "", true); p.State = "acme/other"; return p }(), report.QueueIndependent},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			first := PR{Number: 1, Plans: []Plan{open("terraform_data.a", "", true)}}
			got := Judge([]PR{first, {Number: 2, Plans: []Plan{tc.plan}}})
			if v := got[0].Projects[0].Verdict; v != report.QueueIndependent {
				t.Fatalf("#1 (first in the queue): %s, want independent", v)
			}
			if v := got[1].Projects[0].Verdict; v != tc.want {
				t.Fatalf("#2: %s, want %s", v, tc.want)
			}
			if c := got[1].Projects[0].Conflict; (tc.want == report.QueueWriteConflict || tc.want == report.QueueReadConflict) && (c == nil || c.PR != 1) {
				t.Fatalf("#2's conflict %+v, want #1", c)
			}
		})
	}
	// A plan ahead that does not apply on merge (apply_trigger comment)
	// writes nothing at the merge: it does not count for those behind.
	got := Judge([]PR{{Number: 1, Plans: []Plan{open("terraform_data.a", "", false)}}, {Number: 2, Plans: []Plan{open("terraform_data.a", "", true)}}})
	if v := got[1].Projects[0].Verdict; v != report.QueueIndependent {
		t.Errorf("behind a comment-applied plan of the same address: %s, want independent", v)
	}
}
