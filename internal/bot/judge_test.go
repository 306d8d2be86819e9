package bot

import (
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
)

// TestJudge: the verdicts of judge for each kind of plan in a merge group,
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
	open := func(write, read string, onMerge bool) queuedPlan {
		return queuedPlan{project: "infra", state: "acme/infra", planRun: "P", st: planOpen, onMerge: onMerge, mergeQueue: true, footprint: fp(write, read)}
	}
	stale := open("terraform_data.c", "", true)
	stale.sincePlan = engine.SincePlan{Entries: []engine.SincePlanEntry{{Serial: 7, Class: engine.ClassWriteChanged}}}
	off := open("terraform_data.a", "", false)
	off.mergeQueue = false
	tests := map[string]struct {
		plan queuedPlan
		want report.QueueVerdict
	}{
		"writes what #1 writes":                       {open("terraform_data.a", "", true), report.QueueWriteConflict},
		"reads what #1 writes, applied on merge":      {open("terraform_data.b", "terraform_data.a", true), report.QueueReadAfterWrite},
		"reads what #1 writes, apply_trigger comment": {open("terraform_data.b", "terraform_data.a", false), report.QueueReadConflict},
		"independent of #1, applied on merge":         {open("terraform_data.b", "", true), report.QueueIndependent},
		"independent of #1, comment, not applied":     {open("terraform_data.b", "", false), report.QueueNotApplied},
		"stale against the head":                      {stale, report.QueueStale},
		"fenced":                                      {func() queuedPlan { p := open("terraform_data.b", "", true); p.fencedBy = []string{"A"}; return p }(), report.QueueFenced},
		"applied already":                             {queuedPlan{project: "infra", state: "acme/infra", st: planApplied, mergeQueue: true}, report.QueueApplied},
		"no plan of the head":                         {queuedPlan{project: "infra", state: "acme/infra", st: planNone, mergeQueue: true}, report.QueueNoPlan},
		"merge_queue false: not judged":               {off, report.QueueNotJudged},
		"another state: #1's writes do not count":     {func() queuedPlan { p := open("terraform_data.a", "", true); p.state = "acme/other"; return p }(), report.QueueIndependent},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			first := queuedPR{number: 1, plans: []queuedPlan{open("terraform_data.a", "", true)}}
			got := judge([]queuedPR{first, {number: 2, plans: []queuedPlan{tc.plan}}})
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
	got := judge([]queuedPR{{number: 1, plans: []queuedPlan{open("terraform_data.a", "", false)}}, {number: 2, plans: []queuedPlan{open("terraform_data.a", "", true)}}})
	if v := got[1].Projects[0].Verdict; v != report.QueueIndependent {
		t.Errorf("behind a comment-applied plan of the same address: %s, want independent", v)
	}
}
