package report

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// Fixtures of the views other than plan, apply and run story.

// historyProd is acme/infra/prod newest first: alice's waited-and-
// re-planned apply (15), erin's (14), carol's partial one (13), bob's (12)
// and the adopted first version (11).
func historyProd() []engine.HistoryEntry {
	s := storyWaitedReplanned()
	alice := s.Run
	var replan *engine.Marker
	var waited []engine.Marker
	for _, m := range s.Markers {
		switch {
		case m.Run == applyA && m.Kind == engine.MarkerReplanned:
			mm := m
			replan = &mm
		case m.Run == applyA && m.Kind == engine.MarkerWaited:
			waited = append(waited, m)
		}
	}
	erin := engine.Run{ID: applyE, Kind: engine.KindApply, State: stateName, Actor: "erin", Status: engine.StatusApplied, End: applied, PR: pr(44),
		CreatedAt: at(590), PlanRun: planE, CommittedSerial: 14,
		AllowedBecause: []engine.Fact{
			{Kind: engine.FactDisjointWrites, Run: applyB, PR: pr(41), OwnWrite: set(vpc), OtherWrite: set(dbMain)},
			{Kind: engine.FactStalenessPassed, SourceSerial: 13, HeadSerial: 13},
		}}
	carol := engine.Run{ID: applyC, Kind: engine.KindApply, State: stateName, Actor: "carol", Status: engine.StatusFailed, PR: pr(43),
		End: &engine.End{Cause: engine.CauseTerraformFailed, Terraform: &engine.TerraformFailure{Command: "apply",
			Stderr: "exit status 1: Error: creating record: timeout while waiting for state"}},
		CreatedAt: at(280), PlanRun: planC, CommittedSerial: 13,
		AllowedBecause: []engine.Fact{
			{Kind: engine.FactReadRead, Run: applyB, PR: pr(41), Addresses: set(vpc)},
			{Kind: engine.FactStalenessPassed, Serials: []int64{12}, SourceSerial: 11, HeadSerial: 12},
		}}
	bob := engine.Run{ID: applyB, Kind: engine.KindApply, State: stateName, Actor: "bob", Status: engine.StatusApplied, End: applied, PR: pr(41),
		CreatedAt: at(100), PlanRun: planB, CommittedSerial: 12,
		AllowedBecause: []engine.Fact{{Kind: engine.FactStalenessPassed, SourceSerial: 11, HeadSerial: 11}}}
	v14 := version(14, engine.Provenance{Run: applyE, PlanRun: planE, SourceSerial: 13,
		Mode: engine.CommitSnapshotMerge, Exact: true, Actor: "erin", PR: pr(44)}, set(vpc), 604.2)
	v13 := version(13, engine.Provenance{Run: applyC, PlanRun: planC, SourceSerial: 11,
		Mode: engine.CommitSnapshotMerge, Partial: true, Deviation: &engine.Deviation{Tainted: set(record), Kept: set(subnet)},
		Actor: "carol", PR: pr(43)}, set(zone, record), 300)
	v12 := version(12, engine.Provenance{Run: applyB, PlanRun: planB, SourceSerial: 11,
		Mode: engine.CommitSnapshotMerge, Exact: true, Actor: "bob", PR: pr(41)}, set(dbMain), 160)
	v11 := version(11, engine.Provenance{Mode: engine.CommitInit, SourceSerial: 11, Exact: true, Origin: "file", Actor: "dave"},
		set(web, worker, vpc, subnet, dbMain, zone, record), -86400)
	v11.Resources = 24
	return []engine.HistoryEntry{
		{Version: *s.Version, Run: &alice, Replan: replan, Waited: waited},
		{Version: *v14, Run: &erin},
		{Version: *v13, Run: &carol},
		{Version: *v12, Run: &bob},
		{Version: *v11},
	}
}

// prodState is the state acme/infra/prod with its head at serial head.
func prodState(head int64) engine.State {
	return engine.State{Name: stateName, Lineage: lineage, HeadSerial: head, CreatedAt: at(-86400)}
}

// historyConcurrent is a page in the middle of a busy state's history
// (head 40, versions 22–20): version 22 was allowed beside seven runs
// writing elsewhere and two reading what it read, version 21 beside four,
// version 20 waited for two.
func historyConcurrent() []engine.HistoryEntry {
	others := []string{applyB, applyC, applyE, applyF, "01J2ZP0G00D00000000APPLY0G", "01J2ZP0H00D00000000APPLY0H", "01J2ZP0J00D00000000APPLY0J"}
	var f22 []engine.Fact
	for i, o := range others {
		f22 = append(f22, engine.Fact{Kind: engine.FactDisjointWrites, Run: o, OwnWrite: set(web), OtherWrite: set(dbMain)})
		if i == 2 {
			f22 = append(f22, engine.Fact{Kind: engine.FactReadRead, Run: applyB, Addresses: set(vpc)},
				engine.Fact{Kind: engine.FactReadRead, Run: applyE, Addresses: set(vpc)})
		}
	}
	f22 = append(f22, engine.Fact{Kind: engine.FactStalenessPassed, SourceSerial: 21, HeadSerial: 21})
	var f21 []engine.Fact
	for _, o := range others[:4] {
		f21 = append(f21, engine.Fact{Kind: engine.FactDisjointWrites, Run: o, OwnWrite: set(worker), OtherWrite: set(zone)})
	}
	f21 = append(f21, engine.Fact{Kind: engine.FactStalenessPassed, Serials: []int64{20}, SourceSerial: 19, HeadSerial: 20})
	f20 := []engine.Fact{
		{Kind: engine.FactWaitedFor, Run: applyB, Addresses: set(vpc), Waited: engine.Duration(2 * time.Second)},
		{Kind: engine.FactWaitedFor, Run: applyC, Addresses: set(vpc), Waited: engine.Duration(3 * time.Second)},
		{Kind: engine.FactStalenessPassed, SourceSerial: 19, HeadSerial: 19},
	}
	entry := func(serial int64, actor string, n int, facts []engine.Fact) engine.HistoryEntry {
		id := fmt.Sprintf("01J2ZP1%02d0000000000APPLY%02d", serial, n)
		r := engine.Run{ID: id, Kind: engine.KindApply, State: stateName, Actor: actor, Status: engine.StatusApplied, End: applied,
			CreatedAt: at(float64(serial * 60)), PlanRun: planDave, CommittedSerial: serial, AllowedBecause: facts}
		v := version(serial, engine.Provenance{Run: id, PlanRun: planDave, SourceSerial: serial - 1,
			Mode: engine.CommitSnapshotMerge, Exact: true, Actor: actor}, set(web), float64(serial*60+30))
		return engine.HistoryEntry{Version: *v, Run: &r}
	}
	return []engine.HistoryEntry{entry(22, "dave", 1, f22), entry(21, "dave", 2, f21), entry(20, "dave", 3, f20)}
}

// sincePlanOwnApply: alice's plan was applied as version 15 after a re-plan
// (14 changed its input); frank then changed the web server (16).
func sincePlanOwnApply() (*engine.SincePlan, engine.Run) {
	plan := planRunA(engine.StatusApplied, applyA)
	own := engine.SincePlanEntry{Serial: 15, Class: engine.ClassWriteChanged, Addresses: set(web, worker, webURL),
		Changed: set(web, worker, webURL), Run: applyA, PlanRun: planA, Actor: "alice", PR: pr(42), CommittedAt: at(639.5),
		Mode: engine.CommitSnapshotMerge, OwnApply: true}
	later := entry15Write()
	later.Serial, later.CommittedAt = 16, at(900)
	return sincePlan(16, entry13(), entry14(), own, later), plan
}

func sincePlanOpenRefused() (*engine.SincePlan, engine.Run) {
	return sincePlan(15, entry13(), entry14(), entry15Write()), planRunA(engine.StatusPlanned, "")
}

func sincePlanOpenReplan() (*engine.SincePlan, engine.Run) {
	return sincePlan(14, entry13(), entry14()), planRunA(engine.StatusPlanned, "")
}

func sincePlanIndependent() (*engine.SincePlan, engine.Run) {
	return sincePlan(13, entry13()), planRunA(engine.StatusPlanned, "")
}

func recentRuns() []engine.Run {
	s := storyWaitedReplanned()
	failed := engine.Run{ID: "01J2ZP0F4A0C0000000FAILED0", Kind: engine.KindPlan, State: stateName, Actor: "frank", Status: engine.StatusFailed,
		End: &engine.End{Cause: engine.CauseTerraformFailed, Terraform: &engine.TerraformFailure{Command: "plan",
			Diagnostics: []engine.Diagnostic{{Severity: "error", Summary: "Reference to undeclared resource",
				Detail: `A managed resource "terraform_data.nope" has not been declared in the root module.`, File: "main.tf", Line: 3}}}},
		PR: pr(45), CreatedAt: at(1200), FinishedAt: atp(1210)}
	planB := engine.Run{ID: planB, Kind: engine.KindPlan, State: stateName, Actor: "bob", Status: engine.StatusPlanned, PR: pr(41),
		CreatedAt: at(700), Envelope: envelope("bob", pr(41), 15, engine.Footprint{Write: set(dbMain), Read: set(vpc)}, 700)}
	planB.Envelope.Summary = engine.PlanSummary{Change: 1, Replace: 1}
	stale := storyRefusedStale().Run
	stale.ID = "01J2ZP0A11CE00000000APPLY2"
	return []engine.Run{failed, stale, planB, s.Run, s.Replans[0], *s.Plan}
}

func whyAllowed() *engine.Why {
	s := storyAllowedConcurrent()
	a := s.Run
	return &engine.Why{Run: *s.Plan, Apply: &a, Verdict: engine.VerdictAllowed, Facts: a.AllowedBecause,
		Reserved: lastOf(s.Markers, applyA, engine.MarkerReserved), SincePlan: a.SincePlan}
}

// whyFrom builds the answer engine.Why gives for an apply run's story.
func whyFrom(s *engine.RunStory, v engine.Verdict) *engine.Why {
	w := &engine.Why{Run: s.Run, Verdict: v, Facts: s.Run.AllowedBecause, SincePlan: s.Run.SincePlan}
	for _, m := range s.Markers {
		if m.Run != s.Run.ID {
			continue
		}
		switch m.Kind {
		case engine.MarkerWaited:
			w.Waited = append(w.Waited, m)
		case engine.MarkerReserved:
			mm := m
			w.Reserved = &mm
		case engine.MarkerStalenessFailed, engine.MarkerReplanned, engine.MarkerFailed, engine.MarkerLeaseExpired, engine.MarkerDeviation, engine.MarkerRecovered:
			w.Decisive = append(w.Decisive, m)
		case engine.MarkerApplyStarted:
			if s.Run.Status != engine.StatusApplied && s.Run.Status != engine.StatusApplying {
				w.Decisive = append(w.Decisive, m)
			}
		}
	}
	w.Recoverable = s.Recoverable
	return w
}

// withoutFailed drops the "failed" marker the engine records on a refusal.
func withoutFailed(s *engine.RunStory) *engine.RunStory {
	var ms []engine.Marker
	for _, m := range s.Markers {
		if m.Kind != engine.MarkerFailed {
			ms = append(ms, m)
		}
	}
	s.Markers = ms
	return s
}

func whyWaiting() *engine.Why {
	s := withoutFailed(storyRefusedConflict())
	s.Run.Status, s.Run.End, s.Run.FinishedAt = engine.StatusWaiting, &engine.End{Cause: engine.CauseWaiting, Blockers: erinHoldsVPC()}, nil
	return whyFrom(s, engine.VerdictWaiting)
}

func whyInterrupted() *engine.Why {
	s := withoutFailed(storyRefusedConflict())
	end := &engine.End{Cause: engine.CauseInterrupted, Phase: engine.PhaseWaiting}
	s.Run.Status, s.Run.End = engine.StatusInterrupted, end
	s.Markers = append(s.Markers, engine.Marker{Run: applyA, Seq: 2, At: at(612), Kind: engine.MarkerFailed, End: end})
	return whyFrom(s, engine.VerdictInterrupted)
}

// whyPlanOpenAgain is what engine.Why answers for alice's plan after the
// refusal of storyRefusedConflict: pending, the last attempt in Apply, and
// no markers (Why reads none for a pending plan).
func whyPlanOpenAgain() *engine.Why {
	s := storyPlanOpenAgain()
	last := *s.Apply
	return &engine.Why{Run: s.Run, Apply: &last, Verdict: engine.VerdictPending, SincePlan: s.SincePlan, Overlaps: s.Overlaps}
}

func whyPending() *engine.Why {
	s := storyPlanOpen()
	return &engine.Why{Run: s.Run, Verdict: engine.VerdictPending, SincePlan: s.SincePlan, Overlaps: s.Overlaps}
}

// whyPlanDiscarded: a plan closed by `kl run discard --reason obsolete`
// before any apply: closed, never "pending".
func whyPlanDiscarded() *engine.Why {
	s := storyPlanOpen()
	r := s.Run
	r.Status, r.End = engine.StatusSuperseded, &engine.End{Cause: engine.CauseDiscarded, By: "carol", Why: "obsolete"}
	done := at(900)
	r.FinishedAt = &done
	return &engine.Why{Run: r, Plan: &r, Verdict: engine.VerdictClosed, SincePlan: s.SincePlan}
}

func statusWaiter() *engine.Status {
	bobWrites := []engine.Address{vpc, subnet}
	for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
		bobWrites = append(bobWrites, engine.Address("module.net.terraform_data.route_"+n))
	}
	var holds []engine.Reservation
	for _, a := range set(bobWrites...) {
		holds = append(holds, engine.Reservation{State: stateName, Address: a, Mode: engine.ModeWrite, Run: applyB, Holder: holder,
			AcquiredAt: at(100), ExpiresAt: at(220)})
	}
	holds = append(holds, engine.Reservation{State: stateName, Address: dbMain, Mode: engine.ModeRead, Run: applyB, Holder: holder,
		AcquiredAt: at(100), ExpiresAt: at(220)})
	bob := engine.Run{ID: applyB, Kind: engine.KindApply, State: stateName, Actor: "bob", Holder: holder, Status: engine.StatusApplying,
		PR: pr(41), CreatedAt: at(100), PlanRun: planB}
	alice := applyRunA(engine.StatusWaiting, &engine.End{Cause: engine.CauseWaiting,
		Blockers: []engine.Blocker{{Run: applyB, PR: pr(41), Addresses: set(vpc, subnet)}}})
	alice.FinishedAt = nil
	dave := engine.Run{ID: planDave, Kind: engine.KindPlan, State: stateName, Actor: "dave", Holder: holder, Status: engine.StatusPlanning,
		CreatedAt: at(610)}
	open := planRunA(engine.StatusPlanned, "")
	open.ID, open.Actor, open.PR = planC, "carol", pr(43)
	return &engine.Status{
		Active: []engine.ActiveRun{
			{Run: bob, Holds: holds, Since: at(100)},
			{Run: alice, Since: at(600), WaitingOn: []engine.Blocker{{Run: applyB, PR: pr(41), Addresses: set(vpc, subnet), Held: holds[:2]}}},
			{Run: dave, Since: at(610)},
		},
		OpenPlans: []engine.Run{open},
		Expired:   []string{applyE},
	}
}

func footprintWidened() engine.Footprint {
	fp := footprintA()
	fp.Read = fp.Read.Union(set("module.dns.*"))
	fp.Widened = append(fp.Widened, engine.Widening{Address: "module.dns.*", From: "module.dns.zone_ids",
		Reason: "module output built with for_each over a local; widened to the module prefix"})
	return fp
}

// footprintUnverified is `kl footprint` of a plan read without its
// configuration: a dynamic block's trace widened module.edge, the root's
// configuration was not read.
func footprintUnverified() engine.Footprint {
	return engine.Footprint{
		Write: set("module.edge.nested_group.this", "terraform_data.app"),
		Read:  set("module.edge.*", "terraform_data.edge_cidrs"),
		Widened: []engine.Widening{{Address: "module.edge.*", From: "nested blocks ingress of nested_group.this in module.edge",
			Reason: "the planned values hold nested blocks the configuration in plan JSON does not list: the trace of a dynamic block, whose references plan JSON leaves out"}},
		Unverified: "configuration not read (root): plan JSON leaves out what dynamic blocks, lifecycle conditions, replace_triggered_by and provisioner connection blocks reference",
	}
}

func statesList() []engine.State {
	return []engine.State{
		{Name: stateName, Lineage: lineage, HeadSerial: 15, CreatedAt: at(-86400)},
		{Name: "acme/infra/staging", Lineage: "8a1f9c2e-6b3d-4e5f-a7c8-0d9e1f2a3b4c", HeadSerial: 0, CreatedAt: at(-3600)},
	}
}

// planTargetedReplace is a bootstrap-sized plan of 19 resources (286
// instances) scoped with -target and a forced replacement (-replace),
// importing 3 instances and forgetting 1, overlapping one open plan that
// writes the same web server.
func planTargetedReplace() *engine.PlanOutcome {
	r := planRunA(engine.StatusPlanned, "")
	env := r.Envelope
	var write []engine.Address
	for i := 0; i < 18; i++ {
		write = append(write, engine.Address(fmt.Sprintf("module.app.terraform_data.node_%02d", i)))
	}
	write = append(write, web, webURL)
	env.Footprint = engine.Footprint{Write: set(write...), Read: set(vpc)}
	env.Reservations = env.Footprint.Reservations()
	env.Scope.Targets = []string{"module.app"}
	env.Scope.Replace = []string{`module.app.terraform_data.web`}
	env.Summary = engine.PlanSummary{Add: 280, Change: 3, Replace: 1, Import: 3, Forget: 2, Outputs: 1, Targets: true}
	return &engine.PlanOutcome{Run: r, Overlaps: []engine.Overlap{{Run: planC, Actor: "carol", PR: pr(43), WriteWrite: set(web)}}}
}

// planNativeInstances is a native-lane plan (ADR 0069) scoped to changed
// files whose write set holds three instances of one for_each resource,
// two module instances of another and one output: the write set groups the
// instances by resource (issue 16 §3), the lane line tells the slice and
// the closure proof its checks.
func planNativeInstances() *engine.PlanOutcome {
	r := planRunA(engine.StatusPlanned, "")
	env := r.Envelope
	users := []engine.Address{`terraform_data.user["ann"]`, `terraform_data.user["bob"]`, `terraform_data.user["cy"]`}
	mods := []engine.Address{`module.app["eu"].terraform_data.web`, `module.app["us"].terraform_data.web`}
	env.Footprint = engine.Footprint{Write: set(append(append(users, mods...), webURL)...), Read: set(vpc)}
	env.Reservations = env.Footprint.Reservations()
	env.Scope.ChangedFiles = []string{"users.tf"}
	env.Lane = engine.LaneNative
	env.Slice = &engine.Slice{Roots: set("terraform_data.user"), Closure: set("module.app.terraform_data.web", "terraform_data.user", vpc),
		Proved: true, Scoped: "changed-files", Outputs: []string{"web_url"}, Blocks: 9, Entries: 3, StateResources: 10000,
		Checks: []engine.SliceCheck{{Name: "slice-validates", Passed: true}, {Name: "plan-within-slice", Passed: true},
			{Name: "no-create-outside-slice", Passed: true}, {Name: "targets-planned", Passed: true}}}
	env.Summary = engine.PlanSummary{Add: 1, Change: 4, Outputs: 1}
	return &engine.PlanOutcome{Run: r}
}

// whyPlanOf is the answer engine.Why gives when asked about the plan of an
// apply's story: the plan run (with its envelope), and the apply.
func whyPlanOf(s *engine.RunStory, v engine.Verdict) *engine.Why {
	w := whyFrom(s, v)
	a := s.Run
	w.Run, w.Apply = *s.Plan, &a
	return w
}

// whyPlanLeaseExpired is what engine.Why answers for dave's plan whose
// holder was killed while Terraform planned: failed, lease-expired,
// planning never finished, with the sweep's lease-expired marker.
func whyPlanLeaseExpired() *engine.Why {
	end := &engine.End{Cause: engine.CauseLeaseExpired, Holder: holder, Phase: engine.PhasePlanning, LeaseEnd: at(660)}
	r := engine.Run{ID: planDave, Kind: engine.KindPlan, State: stateName, Actor: "dave", Holder: holder, Status: engine.StatusLeaseExpired,
		End: end, CreatedAt: at(610)}
	m := *end
	return &engine.Why{Run: r, Plan: &r, Verdict: engine.VerdictFailed,
		Decisive: []engine.Marker{{Run: planDave, Seq: 1, At: at(700), Kind: engine.MarkerLeaseExpired, End: &m}}}
}

// TestHistorySaysWhatChanged: every version an apply committed says what
// it changed, in every format (issue 11 defect 15: `/kl history` did not).
func TestHistorySaysWhatChanged(t *testing.T) {
	t.Parallel()
	for _, f := range []Format{Text, Markdown, JSON} {
		var b strings.Builder
		if err := History(&b, prodState(15), historyProd(), Options{Format: f}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(b.String(), "changed"); got < len(historyProd())-1 {
			t.Errorf("%v: %d mentions of what a version changed, want one per applied version (%d):\n%s", f, got, len(historyProd())-1, b.String())
		}
		if !strings.Contains(b.String(), "`module.app.terraform_data.web`") && f == Markdown {
			t.Errorf("Markdown history names no changed address:\n%s", b.String())
		}
	}
}

// TestPlanNextOnGitHub (issue 11 defect 9): on a pull request (Options.
// Commands) the plan's next step is klbot's comment command; kl's own
// output keeps the CLI command.
func TestPlanNextOnGitHub(t *testing.T) {
	t.Parallel()
	out := &engine.PlanOutcome{Run: planRunA(engine.StatusPlanned, ""), Overlaps: overlapsA()}
	for name, tc := range map[string]struct {
		o          Options
		want, lack string
	}{
		"github": {Options{Format: Markdown, Commands: &Commands{Project: "app"}}, "**next:** `/kl apply -p app`", "`kl apply " + out.Run.ID},
		"kl":     {Options{Format: Text}, "kl apply " + out.Run.ID, "/kl apply"},
	} {
		var b strings.Builder
		if err := Plan(&b, out, tc.o); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), tc.want) || strings.Contains(b.String(), tc.lack) {
			t.Errorf("%s: the plan's next step is not %q (or says %q):\n%s", name, tc.want, tc.lack, b.String())
		}
	}
}

// TestNextStepsOnGitHub (issue 11 defect 9): every next step a view read
// on a pull request names — re-plan, apply again, recover, unfence, the
// bound of a wait — is klbot's comment there; a run of another pull
// request is recovered from that one, a run made with kl keeps kl's
// command; kl's own output keeps its CLI commands.
func TestNextStepsOnGitHub(t *testing.T) {
	t.Parallel()
	gh := func(project string) Options {
		return Options{Format: Markdown, Commands: &Commands{PR: pr(42), Project: project}}
	}
	fenced := func(b engine.Blocker) *engine.RunStory {
		s := storyRefusedConflict()
		s.Run.End = &engine.End{Cause: engine.CauseRefusedFenced, Blockers: []engine.Blocker{b}}
		return s
	}
	other := engine.Blocker{Run: "01J2ZP0E41N000000000APPLY0", PR: pr(44), Addresses: set("module.net.terraform_data.vpc"), Fenced: true}
	byKL := engine.Blocker{Run: "01J2ZP0E41N000000000APPLY0", Addresses: set("module.net.terraform_data.vpc"), Fenced: true}
	for name, tc := range map[string]struct {
		story      *engine.RunStory
		o          Options
		want, lack []string
	}{
		"stale on github": {storyRefusedStale(), gh("app"), []string{"re-plan on the PR's current head: `/kl plan -p app`"}, []string{"kl plan --state"}},
		"stale in kl":     {storyRefusedStale(), Options{Format: Text}, []string{"kl plan --state"}, []string{"/kl plan"}},
		"conflict on github": {storyRefusedConflict(), gh("app"),
			[]string{"`/kl apply -p app` (it waits for reservations up to klbot's `KLBOT_APPLY_WAIT`)"}, []string{"kl apply --wait"}},
		"lease expired on github": {storyLeaseExpiredRecoverable(), gh("app"), []string{"`/kl recover -p app`"}, []string{"kl run recover"}},
		"lease expired in kl":     {storyLeaseExpiredRecoverable(), Options{Format: Text}, []string{"kl run recover"}, []string{"/kl recover"}},
		"fenced by another PR": {fenced(other), gh("app"),
			[]string{"`/kl recover` on acme/infra#44", "`/kl unfence -- REASON` on acme/infra#44"}, []string{"kl run recover", "kl run unfence", "-p app"}},
		"fenced by a kl run": {fenced(byKL), gh("app"),
			[]string{"`kl run recover 01J2ZP0E41N000000000APPLY0`", "`kl run unfence 01J2ZP0E41N000000000APPLY0 --reason TEXT`"}, []string{"/kl recover"}},
	} {
		var b strings.Builder
		if err := Apply(&b, tc.story, tc.o); err != nil {
			t.Fatal(err)
		}
		got := strings.ReplaceAll(b.String(), `\_`, "_")
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: lacks %q:\n%s", name, w, got)
			}
		}
		for _, l := range tc.lack {
			if strings.Contains(got, l) {
				t.Errorf("%s: says %q:\n%s", name, l, got)
			}
		}
	}
}

// TestStatusOpenPlanOverFence (issue 10 leftover): an open plan whose
// reservations meet a crashed apply's fence is not listed as simply
// applicable: kl status says its apply is refused until the fence is
// lifted, and a plan clear of it says nothing of the kind.
func TestStatusOpenPlanOverFence(t *testing.T) {
	t.Parallel()
	st := statusWaiter()
	open := st.OpenPlans[0]
	clear := planRunA(engine.StatusPlanned, "")
	clear.ID, clear.Envelope = "01J2ZP0C1EAR0000000000PLAN", nil
	st.OpenPlans = append(st.OpenPlans, clear)
	dead := engine.Run{ID: applyE, Kind: engine.KindApply, State: stateName, Actor: "erin", Status: engine.StatusLeaseExpired, PR: pr(44)}
	st.Fenced = []engine.FencedRun{{Run: dead, Fences: []engine.Reservation{
		{State: stateName, Address: open.Envelope.Reservations[0].Address, Mode: engine.ModeWrite, Run: applyE, FencedAt: at(300)}}}}
	var b strings.Builder
	if err := Status(&b, st, Options{Format: Text}); err != nil {
		t.Fatal(err)
	}
	var planLine, clearLine string
	for _, l := range strings.Split(b.String(), "\n") {
		switch {
		case strings.Contains(l, open.ID):
			planLine = l
		case strings.Contains(l, clear.ID):
			clearLine = l
		}
	}
	if want := "fenced by " + applyE + ": an apply is refused until it is lifted"; !strings.Contains(planLine, want) {
		t.Errorf("open plan over the fence: %q lacks %q:\n%s", planLine, want, b.String())
	}
	if strings.Contains(clearLine, "fenced") {
		t.Errorf("a plan clear of the fence reads fenced: %q", clearLine)
	}
}

// TestFencedNothingToRecoverNext (issue 10 leftover): a fenced apply whose
// Terraform wrote nothing Kilolock saw cannot be recovered, and until its
// fence is lifted a re-plan's apply is refused too: its next step is the
// unfence (after checking the real objects), then the re-plan — never a
// bare "re-plan".
func TestFencedNothingToRecoverNext(t *testing.T) {
	t.Parallel()
	s := storyLeaseExpiredUnseen()
	end := *s.Run.End
	end.Fenced, end.Recoverable, end.TerraformStarted = set(web), false, at(600.15)
	s.Run.End = &end
	for name, tc := range map[string]struct {
		o    Options
		want string
	}{
		"kl":     {Options{Format: Text}, "then lift the fence: kl run unfence " + applyA + " --reason TEXT; then re-plan"},
		"github": {Options{Format: Markdown, Commands: &Commands{PR: pr(42), Project: "app"}}, "then lift the fence: `/kl unfence -p app -- REASON`; then re-plan"},
	} {
		var b strings.Builder
		if err := Apply(&b, s, tc.o); err != nil {
			t.Fatal(err)
		}
		if got := strings.ReplaceAll(b.String(), `\_`, "_"); !strings.Contains(got, tc.want) {
			t.Errorf("%s: the next step lacks %q:\n%s", name, tc.want, got)
		}
	}
}
