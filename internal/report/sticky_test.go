package report

import (
	"bytes"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// stickyApplied is project app after alice's apply committed version 13,
// with the versions committed since it: erin's (plan input changed),
// frank's (planned target changed) and bob's, without a pull request.
func stickyApplied() StickyProject {
	own := engine.SincePlanEntry{Serial: 13, Class: engine.ClassIndependent, Run: applyA, PlanRun: planA, Actor: "alice",
		PR: pr(42), OwnApply: true, CommittedAt: at(639.5), Mode: engine.CommitSnapshotMerge}
	e14, e15 := entry14(), entry15Write()
	e16 := engine.SincePlanEntry{Serial: 16, Class: engine.ClassIndependent, Changed: set(dbMain), Run: applyB, PlanRun: planB,
		Actor: "bob", CommittedAt: at(700), Mode: engine.CommitSnapshotMerge}
	return StickyProject{Applying: Applying{Project: "app", PlanCheck: "kl plan · app"}, State: stateName, HeadSHA: botSHA,
		Apply: storyAllowedConcurrent(), SincePlan: sincePlan(16, own, e14, e15, e16)}
}

// stickyFixture is the sticky comment of acme/infra#42 with a project in
// each shape a section takes; the open plan of dns has a diff.
func stickyFixture(t *testing.T) Sticky {
	open := planRunA(engine.StatusPlanned, "")
	onMerge := planRunA(engine.StatusPlanned, "")
	onMerge.ID = "01J2ZP0A11CE00000000NETPLN"
	closed := planRunA(engine.StatusSuperseded, "")
	closed.ID = "01J2ZP0A11CE000000000DBPLN"
	closed.End = &engine.End{Cause: engine.CauseSuperseded, Why: "superseded by a newer plan of acme/infra#42 at 1123456"}
	refused := botRefusal(BotRuleApproved)
	refused.Project = "web"
	return Sticky{Repo: "acme/infra", PR: 42, Projects: []StickyProject{
		stickyApplied(),
		{Applying: Applying{Project: "dns", PlanCheck: "kl plan · dns"}, State: stateName, HeadSHA: botSHA,
			Plan: &open, SincePlan: sincePlan(14, entry13(), entry14()), Diff: fixtureDiff(t, "terraform_data")},
		{Applying: Applying{Project: "net", OnMerge: true, PlanCheck: "kl plan · net"}, State: stateName, HeadSHA: botSHA,
			Plan: &onMerge, SincePlan: sincePlan(12)},
		{Applying: Applying{Project: "db", PlanCheck: "kl plan · db"}, State: stateName, HeadSHA: botSHA, Plan: &closed,
			Note: PlanSuperseded{Project: "db", HeadSHA: botHeadSHA, PlanRun: closed.ID, PlanSHA: botSHA}.Note()},
		{Applying: Applying{Project: "edge", PlanCheck: "kl plan · edge"}, State: "acme/edge", HeadSHA: botSHA,
			Note: MissingState{State: "acme/edge", Project: "edge"}.Note(), Refused: true},
		{Applying: Applying{Project: "web", PlanCheck: "kl plan · web"}, State: stateName, HeadSHA: botSHA,
			Apply: storyRefusedConflict(), Note: refused.Note(), Refused: true},
	}}
}

// TestGoldenSticky pins klbot's sticky comment (testdata/bot/sticky*.md,
// -update rewrites them): without run links, with them, and cut to a
// limit that keeps only the summary.
func TestGoldenSticky(t *testing.T) {
	t.Parallel()
	for name, o := range map[string]Options{
		"sticky":       {Format: Markdown},
		"sticky-links": {Format: Markdown, RunURL: runURL},
		"sticky-cut":   {Format: Text, RunURL: runURL, MaxMarkdown: 2000},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := RenderSticky(&b, stickyFixture(t), o); err != nil {
				t.Fatal(err)
			}
			if o.MaxMarkdown > 0 && b.Len() > o.MaxMarkdown {
				t.Errorf("%d bytes, over the limit of %d", b.Len(), o.MaxMarkdown)
			}
			golden(t, filepath.Join("bot", name+".md"), b.String())
		})
	}
}

// TestStickyNoClassification: an open plan's section without its
// since-plan is an error, never "no version committed since".
func TestStickyNoClassification(t *testing.T) {
	t.Parallel()
	open := planRunA(engine.StatusPlanned, "")
	s := Sticky{Repo: "acme/infra", PR: 42, Projects: []StickyProject{{Applying: Applying{Project: "app"}, State: stateName, Plan: &open}}}
	var b bytes.Buffer
	if err := RenderSticky(&b, s, Options{}); err == nil || !strings.Contains(err.Error(), "no classification") {
		t.Errorf("err = %v, want the since-plan's missing classification", err)
	}
}

// TestGoldenCheckRuns pins the plan check run's titles and headers and the
// titles of klbot's failing check runs (testdata/bot/check-runs.md).
func TestGoldenCheckRuns(t *testing.T) {
	t.Parallel()
	plan := func(f func(*engine.Run)) *engine.PlanOutcome {
		r := planRunA(engine.StatusPlanned, "")
		f(&r)
		return &engine.PlanOutcome{Run: r}
	}
	comment := Applying{Project: "app", PlanCheck: "kl plan · app"}
	required := Applying{Project: "app", Requirements: []string{"approved", "mergeable"}, PlanCheck: "kl plan · app"}
	replaced := plan(func(r *engine.Run) { r.Envelope.Summary = engine.PlanSummary{Add: 1, Change: 2, Replace: 1} })
	replaced.Overlaps = overlapsA()
	single := plan(func(r *engine.Run) {
		r.Envelope.Summary, r.Envelope.Reservations = engine.PlanSummary{Destroy: 1}, r.Envelope.Reservations[:1]
	})
	cases := []struct {
		name string
		out  *engine.PlanOutcome
		how  Applying
	}{
		{"comment", plan(func(*engine.Run) {}), comment},
		{"requirements", plan(func(*engine.Run) {}), required},
		{"merge", plan(func(*engine.Run) {}), Applying{Project: "app", OnMerge: true, PlanCheck: "kl plan · app"}},
		{"replace-overlaps", replaced, comment},
		{"one-reservation", single, comment},
		{"no-changes", plan(func(r *engine.Run) { r.Envelope.Summary = engine.PlanSummary{} }), comment},
		{"no-envelope", plan(func(r *engine.Run) { r.Envelope = nil }), comment},
	}
	var b strings.Builder
	for _, c := range cases {
		fmt.Fprintf(&b, "## %s\n\ntitle: %s\n\n%s", c.name, PlanTitle(c.out), PlanHeader(c.out, c.how))
	}
	b.WriteString("## failing check runs\n\n")
	for _, title := range []string{
		botRefusal(BotRuleWrite).Title(),
		botRefusal(BotRuleHead).Title(),
		MissingState{State: "acme/edge", Project: "edge"}.Title(),
		PlanFailed{Project: "app", State: stateName, CheckRun: "kl plan · app"}.Title(),
	} {
		b.WriteString("- " + title + "\n")
	}
	b.WriteString("\n## check runs in progress, and left by their job\n\n")
	for _, name := range slices.Sorted(maps.Keys(liveNotices())) {
		if n, ok := liveNotices()[name].(interface{ Title() string }); ok {
			b.WriteString("- " + name + ": " + n.Title() + "\n")
		}
	}
	golden(t, filepath.Join("bot", "check-runs.md"), b.String())
}
