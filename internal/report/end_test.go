package report

import (
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// TestSupersededText: what superseded a plan is put into words from its
// typed reason (klbot's), or from the caller's words.
func TestSupersededText(t *testing.T) {
	t.Parallel()
	pr := &engine.PullRequest{Repo: "acme/infra", Number: 42}
	for name, tc := range map[string]struct {
		end  *engine.End
		want string
	}{
		"newer plan": {&engine.End{Cause: engine.CauseSuperseded, Superseded: engine.SupersededByNewerPlan, PR: pr, Commit: "0123456789abcdef"},
			"superseded by a newer plan of acme/infra#42 at 0123456"},
		"closed": {&engine.End{Cause: engine.CauseSuperseded, Superseded: engine.SupersededByClosedPR, PR: pr}, "acme/infra#42 was closed without applying it"},
		"untouched": {&engine.End{Cause: engine.CauseSuperseded, Superseded: engine.SupersededByUntouched, PR: pr, Commit: "52474a8aaaa", Project: "b"},
			"the push at 52474a8 no longer touches project b"},
		"removed": {&engine.End{Cause: engine.CauseSuperseded, Superseded: engine.SupersededByRemoved, PR: pr, Commit: "52474a8aaaa", Project: "b"},
			"project b is not in kl.yaml at 52474a8 any more"},
		"own words":    {&engine.End{Cause: engine.CauseSuperseded, Why: "replaced by hand"}, "replaced by hand"},
		"nothing said": {&engine.End{Cause: engine.CauseSuperseded}, "something newer replaced it"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := EndText("01P", tc.end); got != tc.want {
				t.Errorf("EndText = %q, want %q", got, tc.want)
			}
			m := engine.Marker{Kind: engine.MarkerFailed, End: tc.end}
			if got := markerText(m); got != "superseded: "+tc.want {
				t.Errorf("markerText = %q, want the same after \"superseded: \"", got)
			}
		})
	}
}

// TestInterruptedText: where a run was cancelled, and whether anything was
// committed, told from its typed end.
func TestInterruptedText(t *testing.T) {
	t.Parallel()
	initStop := &engine.End{Cause: engine.CauseTerraformFailed, Terraform: &engine.TerraformFailure{Command: "init"}}
	storing := &engine.End{Cause: engine.CauseFailed, Step: engine.StepStoreArtifact, Artifact: engine.ArtifactPlanFile, Err: "context canceled"}
	for name, tc := range map[string]struct {
		end  *engine.End
		want string
	}{
		"waiting":              {&engine.End{Cause: engine.CauseInterrupted, Phase: engine.PhaseWaiting}, "interrupted while waiting for reservations"},
		"planning, in init":    {&engine.End{Cause: engine.CauseInterrupted, Phase: engine.PhasePlanning, Then: initStop}, "interrupted while planning (terraform init)"},
		"planning, storing":    {&engine.End{Cause: engine.CauseInterrupted, Phase: engine.PhasePlanning, Then: storing}, "interrupted while planning (storing plan.tfplan)"},
		"before Terraform ran": {&engine.End{Cause: engine.CauseInterrupted, Phase: engine.PhaseApplying}, "interrupted before Terraform ran: nothing applied, nothing committed"},
		"terraform, committed": {&engine.End{Cause: engine.CauseInterrupted, Phase: engine.PhaseTerraformApply, Serial: 4}, "interrupted during terraform apply: committed what Terraform wrote"},
		"terraform, nothing": {&engine.End{Cause: engine.CauseInterrupted, Phase: engine.PhaseTerraformApply},
			"interrupted during terraform apply before it changed anything: nothing committed"},
		"in init of the apply": {&engine.End{Cause: engine.CauseInterrupted, Phase: engine.PhaseTerraformApply, Terraform: &engine.TerraformFailure{Command: "init"}},
			"interrupted during terraform init before it changed anything: nothing committed"},
		// ADR 0043: a Terraform that did not stop within its grace was
		// killed; what it did is not known, so nothing says "before it
		// changed anything".
		"terraform killed": {&engine.End{Cause: engine.CauseInterrupted, Phase: engine.PhaseTerraformApply, Terraform: &engine.TerraformFailure{Command: "apply", Killed: true}},
			"interrupted during terraform apply, which did not stop in time and was killed: nothing committed, and what it did is not known (its write set is fenced)"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := EndText("01A", tc.end); got != tc.want {
				t.Errorf("EndText = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestEndNextStale: after an apply that did not go through, "apply the plan
// again" is offered only while that apply would not be refused as stale.
func TestEndNextStale(t *testing.T) {
	t.Parallel()
	plan := engine.Run{ID: "01P", Kind: engine.KindPlan, State: "s", Status: engine.StatusPlanned,
		Envelope: &engine.Envelope{Scope: engine.Scope{Dir: "infra"}}}
	a := engine.Run{ID: "01A", Kind: engine.KindApply, State: "s", Status: engine.StatusInterrupted, PlanRun: "01P",
		End: &engine.End{Cause: engine.CauseInterrupted, Phase: engine.PhaseWaiting}}
	for name, tc := range map[string]struct {
		class engine.SincePlanClass
		want  string
	}{
		"independent since":   {engine.ClassIndependent, "apply the plan again: kl apply 01P"},
		"write changed since": {engine.ClassWriteChanged, "re-plan: kl plan --state s -C infra"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := &engine.RunStory{Run: a, Plan: &plan, SincePlanLive: true,
				SincePlan: &engine.SincePlan{PlanRun: "01P", Entries: []engine.SincePlanEntry{{Serial: 2, Class: tc.class}}}}
			if got := endNext(s, &a).plain(); got != tc.want {
				t.Errorf("endNext = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCommittedSerialWords (issue 11 defect 10): a committed version is
// told as "planned at serial S, committed version V (head was H)" — never
// "serial S → V", which reads as two versions committed — in the check run
// title and the sticky comment's table alike.
func TestCommittedSerialWords(t *testing.T) {
	t.Parallel()
	s := storyAllowedConcurrent()
	s.Version.Provenance.SourceSerial = 12
	want := "version 13 (planned at serial 12, head was 12; snapshot-merge, exact)"
	if got := ApplyTitle(s); got != "Applied: "+want {
		t.Errorf("ApplyTitle = %q, want %q", got, "Applied: "+want)
	}
	var md strings.Builder
	st := Sticky{Repo: "acme/infra", PR: 42, Projects: []StickyProject{{Applying: Applying{Project: "web"}, State: "acme/infra/prod", Apply: s}}}
	if err := RenderSticky(&md, st, Options{Format: Markdown}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| "+want+" |") || strings.Contains(md.String(), "→ 13") {
		t.Errorf("the sticky's table does not say %q:\n%s", want, md.String())
	}
}

// TestRecoveredApplyTitle (issue 11 defect 14): once `kl run recover`
// committed what a crashed apply's Terraform wrote, the apply check run's
// title says so first — the version — and then how the apply had ended;
// before, it kept saying only that the lease expired.
func TestRecoveredApplyTitle(t *testing.T) {
	t.Parallel()
	want := "Recovered: version 13 (planned at serial 12, head was 12; snapshot-merge, deviation); its holder ci-runner-7:4242 stopped renewing"
	if got := ApplyTitle(storyRecovered()); got != want {
		t.Errorf("ApplyTitle of a recovered apply = %q, want %q", got, want)
	}
	if got := ApplyTitle(storyLeaseExpiredRecoverable()); !strings.HasPrefix(got, "Lease-expired: its holder ci-runner-7:4242 stopped renewing") {
		t.Errorf("ApplyTitle of a crashed apply not recovered yet = %q, want the lease expiry", got)
	}
}
