package report

import (
	"fmt"

	"github.com/kilolock/kilolock/internal/engine"
)

// The stories of alice's apply, one per way it can end.

// storyAllowedConcurrent: applied beside bob's running apply — disjoint
// write sets, read/read on the vpc — with the head unchanged since plan.
func storyAllowedConcurrent() *engine.RunStory {
	plan := planRunA(engine.StatusApplied, applyA)
	a := applyRunA(engine.StatusApplied, "")
	a.CommittedSerial = 13
	sp := sincePlan(12)
	a.SincePlan = sp
	a.AllowedBecause = []engine.Fact{
		{Kind: engine.FactDisjointWrites, Run: applyB, PR: pr(41), OwnWrite: set(web, worker, webURL), OtherWrite: set(dbMain)},
		{Kind: engine.FactReadRead, Run: applyB, PR: pr(41), Addresses: set(vpc)},
		{Kind: engine.FactStalenessPassed, SourceSerial: 12, HeadSerial: 12},
	}
	ms := append(planMarkers(),
		engine.Marker{Run: applyA, Seq: 1, At: at(600.05), Kind: engine.MarkerReserved, Count: 6, Addresses: set(web, worker, webURL, vpc, subnet, shared)},
		engine.Marker{Run: applyA, Seq: 2, At: at(600.1), Kind: engine.MarkerPreflight, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 3, At: at(600.1), Kind: engine.MarkerStalenessPassed, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 4, At: at(638), Kind: engine.MarkerApplied, Count: 3, Addresses: set(web, worker, webURL)},
		engine.Marker{Run: applyA, Seq: 5, At: at(639.5), Kind: engine.MarkerCommitted, Serial: 13, FromSerial: 12, Mode: engine.CommitSnapshotMerge, Count: 3},
		engine.Marker{Run: applyA, Seq: 6, At: at(639.6), Kind: engine.MarkerReleased, Count: 6},
	)
	v := version(13, engine.Provenance{Run: applyA, PlanRun: planA, AppliedPlanRun: planA, SourceSerial: 12,
		PlanDigest: plan.Envelope.PlanDigest, Mode: engine.CommitSnapshotMerge, Exact: true, Actor: "alice", PR: pr(42)},
		set(web, worker, webURL), 639.5)
	return &engine.RunStory{Run: a, Plan: &plan, Markers: ms, SincePlan: sp, Version: v}
}

// replanRunA is the re-plan against head 14 made during alice's apply.
func replanRunA(status engine.RunStatus, apply string) engine.Run {
	r := engine.Run{ID: replanA, Kind: engine.KindPlan, State: stateName, Actor: "alice", Holder: holder, Status: status,
		PR: pr(42), CreatedAt: at(604.35), UpdatedAt: at(622.1), FinishedAt: atp(622.1),
		Envelope: envelope("alice", pr(42), 14, footprintA(), 604.35), ReplanOf: planA, ApplyRun: apply}
	r.Envelope.PlanDigest = "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
	return r
}

// storyWaitedReplanned: waited 4.2s for erin's apply over the vpc, whose
// version 14 then changed alice's plan input; the re-plan against head 14
// kept the intent, so the apply proceeded and committed version 15.
func storyWaitedReplanned() *engine.RunStory {
	plan := planRunA(engine.StatusApplied, applyA)
	rp := replanRunA(engine.StatusApplied, applyA)
	a := applyRunA(engine.StatusApplied, "")
	a.AppliedPlanRun, a.CommittedSerial = replanA, 15
	e14 := entry14()
	e14.CommittedAt = at(604.2) // erin committed, then released the vpc
	sp := sincePlan(14, entry13(), e14)
	a.SincePlan = sp
	a.AllowedBecause = []engine.Fact{
		{Kind: engine.FactWaitedFor, Run: applyE, PR: pr(44), Addresses: set(vpc)},
		{Kind: engine.FactStalenessPassed, Serials: []int64{13}, SourceSerial: 12, HeadSerial: 14},
		{Kind: engine.FactReplanUnchanged, Run: replanA, Serials: []int64{14}, SourceSerial: 12, HeadSerial: 14},
	}
	ms := append(planMarkers(),
		engine.Marker{Run: applyA, Seq: 1, At: at(600.01), Kind: engine.MarkerWaited, Other: applyE, OtherPR: pr(44), Addresses: set(vpc)},
		engine.Marker{Run: applyA, Seq: 2, At: at(604.25), Kind: engine.MarkerReserved, Count: 6, Addresses: set(web, worker, webURL, vpc, subnet, shared),
			Waited: engine.Duration(4200 * 1e6)},
		engine.Marker{Run: applyA, Seq: 3, At: at(604.3), Kind: engine.MarkerPreflight, SincePlan: summaryOf(sp)},
		engine.Marker{Run: replanA, Seq: 1, At: at(622.0), Kind: engine.MarkerWidened, Addresses: set(shared),
			Reason: "local.subnets in module.app: locals are not in plan JSON; widened to the module prefix"},
		engine.Marker{Run: replanA, Seq: 2, At: at(622.1), Kind: engine.MarkerPlanned, Serial: 14, Count: 6},
		engine.Marker{Run: applyA, Seq: 4, At: at(622.2), Kind: engine.MarkerReplanned, Other: replanA, Serial: 14, IntentChanged: ptrBool(false),
			Reason: fmt.Sprintf("plan input changed in versions 14; re-plan %s against head 14 has the same intent", replanA)},
		engine.Marker{Run: applyA, Seq: 5, At: at(622.2), Kind: engine.MarkerStalenessPassed, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 6, At: at(638), Kind: engine.MarkerApplied, Count: 3, Addresses: set(web, worker, webURL)},
		engine.Marker{Run: applyA, Seq: 7, At: at(639.5), Kind: engine.MarkerCommitted, Serial: 15, FromSerial: 14, Mode: engine.CommitSnapshotMerge, Count: 3},
		engine.Marker{Run: applyA, Seq: 8, At: at(639.6), Kind: engine.MarkerReleased, Count: 6},
	)
	v := version(15, engine.Provenance{Run: applyA, PlanRun: planA, AppliedPlanRun: replanA, SourceSerial: 14,
		PlanDigest: rp.Envelope.PlanDigest, Mode: engine.CommitSnapshotMerge, Exact: true, Actor: "alice", PR: pr(42)},
		set(web, worker, webURL), 639.5)
	return &engine.RunStory{Run: a, Plan: &plan, AppliedPlan: &rp, Markers: ms, SincePlan: sp, Version: v}
}

// staleReason is the engine's StaleError text for frank's version 15.
var staleReason = (&engine.StaleError{Run: applyA, PlanRun: planA, Entries: []engine.SincePlanEntry{entry15Write()}}).Error()

// storyRefusedStale: frank's version 15 changed module.app's web, which
// alice planned to write: refused as stale.
func storyRefusedStale() *engine.RunStory {
	plan := planRunA(engine.StatusStale, "")
	a := applyRunA(engine.StatusRefused, staleReason)
	a.FinishedAt, a.UpdatedAt = atp(600.2), at(600.2)
	sp := sincePlan(15, entry13(), entry14(), entry15Write())
	a.SincePlan = sp
	ms := append(planMarkers(),
		engine.Marker{Run: applyA, Seq: 1, At: at(600.05), Kind: engine.MarkerReserved, Count: 6, Addresses: set(web, worker, webURL, vpc, subnet, shared)},
		engine.Marker{Run: applyA, Seq: 2, At: at(600.1), Kind: engine.MarkerPreflight, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 3, At: at(600.15), Kind: engine.MarkerStalenessFailed, Serial: 15, Other: applyF, OtherPR: pr(45),
			Addresses: set(web), Reason: engine.ClassWriteChanged.Label()},
		engine.Marker{Run: applyA, Seq: 4, At: at(600.2), Kind: engine.MarkerReleased, Count: 6},
	)
	return &engine.RunStory{Run: a, Plan: &plan, Markers: ms, SincePlan: sp}
}

// intentReason is the engine's reason for a re-plan with another intent.
var intentReason = fmt.Sprintf("re-plan %s against head 14 changed the intent of module.app.terraform_data.web "+
	"(plan input changed in versions 14); review plan %s and apply it", replanA, replanA)

// storyRefusedIntent: erin's version 14 changed the vpc alice reads; the
// re-plan against head 14 would change the web server: stop for review.
func storyRefusedIntent() *engine.RunStory {
	plan := planRunA(engine.StatusSuperseded, "")
	a := applyRunA(engine.StatusRefused, intentReason)
	a.FinishedAt, a.UpdatedAt = atp(618.3), at(618.3)
	sp := sincePlan(14, entry13(), entry14())
	a.SincePlan = sp
	ms := append(planMarkers(),
		engine.Marker{Run: applyA, Seq: 1, At: at(600.05), Kind: engine.MarkerReserved, Count: 6, Addresses: set(web, worker, webURL, vpc, subnet, shared)},
		engine.Marker{Run: applyA, Seq: 2, At: at(600.1), Kind: engine.MarkerPreflight, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 3, At: at(618.2), Kind: engine.MarkerReplanned, Other: replanA, Serial: 14, IntentChanged: ptrBool(true),
			Addresses: set(web), Reason: intentReason},
		engine.Marker{Run: applyA, Seq: 4, At: at(618.3), Kind: engine.MarkerReleased, Count: 6},
	)
	return &engine.RunStory{Run: a, Plan: &plan, Markers: ms, SincePlan: sp}
}

const failReason = "terraform apply: exit status 1: Error: local-exec provisioner error in module.app.terraform_data.worker"

// storyPartialDrift: Terraform failed part-way: it replaced the cache (not
// planned) and never got to the worker and the output; what it wrote is
// committed as version 13, partial, with the drift.
func storyPartialDrift() *engine.RunStory {
	plan := planRunA(engine.StatusFailed, applyA)
	plan.Reason = fmt.Sprintf("apply run %s failed part-way; its partial result is version 13: re-plan", applyA)
	a := applyRunA(engine.StatusFailed, failReason)
	a.CommittedSerial = 13
	sp := sincePlan(12)
	a.SincePlan = sp
	a.AllowedBecause = []engine.Fact{{Kind: engine.FactStalenessPassed, SourceSerial: 12, HeadSerial: 12}}
	drift := &engine.Drift{Unplanned: set(cache), Unchanged: set(worker, webURL)}
	ms := append(planMarkers(),
		engine.Marker{Run: applyA, Seq: 1, At: at(600.05), Kind: engine.MarkerReserved, Count: 6, Addresses: set(web, worker, webURL, vpc, subnet, shared)},
		engine.Marker{Run: applyA, Seq: 2, At: at(600.1), Kind: engine.MarkerPreflight, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 3, At: at(600.1), Kind: engine.MarkerStalenessPassed, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 4, At: at(631), Kind: engine.MarkerApplied, Count: 2, Addresses: set(web, cache), Reason: failReason},
		engine.Marker{Run: applyA, Seq: 5, At: at(631.4), Kind: engine.MarkerDrift, Drift: drift,
			Reason: "changed but not planned: module.app.terraform_data.cache; planned but not changed: module.app.terraform_data.worker, output.web_url"},
		engine.Marker{Run: applyA, Seq: 6, At: at(631.4), Kind: engine.MarkerCommitted, Serial: 13, FromSerial: 12, Mode: engine.CommitSnapshotMerge, Count: 2},
		engine.Marker{Run: applyA, Seq: 7, At: at(631.4), Kind: engine.MarkerFailed, Reason: failReason},
		engine.Marker{Run: applyA, Seq: 8, At: at(631.5), Kind: engine.MarkerReleased, Count: 6},
	)
	v := version(13, engine.Provenance{Run: applyA, PlanRun: planA, AppliedPlanRun: planA, SourceSerial: 12,
		PlanDigest: plan.Envelope.PlanDigest, Mode: engine.CommitSnapshotMerge, Drift: drift, Partial: true, Actor: "alice", PR: pr(42)},
		set(web, cache), 631.4)
	return &engine.RunStory{Run: a, Plan: &plan, Markers: ms, SincePlan: sp, Version: v}
}

const conflictReason = "reservations conflict: run " + applyE + " (acme/infra#44) holds module.net.terraform_data.vpc"

// storyRefusedConflict: erin's apply held the vpc and alice asked not to
// wait (--wait 0).
func storyRefusedConflict() *engine.RunStory {
	plan := planRunA(engine.StatusPlanned, "")
	a := applyRunA(engine.StatusRefused, conflictReason)
	a.FinishedAt, a.UpdatedAt = atp(600.02), at(600.02)
	ms := append(planMarkers(),
		engine.Marker{Run: applyA, Seq: 1, At: at(600.01), Kind: engine.MarkerWaited, Other: applyE, OtherPR: pr(44), Addresses: set(vpc)},
	)
	return &engine.RunStory{Run: a, Plan: &plan, Markers: ms}
}

// overlapsA are the open plans sharing part of alice's footprint.
func overlapsA() []engine.Overlap {
	return []engine.Overlap{
		{Run: planB, Actor: "bob", PR: pr(41), ReadWrite: set(vpc)},
		{Run: planC, Actor: "carol", PR: pr(43), WriteWrite: set(web), ReadWrite: set(subnet)},
		{Run: planDave, Actor: "dave", WriteRead: set(worker)},
	}
}

// storyPlanOpen: alice's plan, not applied yet, with the versions since
// classified live against the head and the open plans it overlaps.
func storyPlanOpen() *engine.RunStory {
	plan := planRunA(engine.StatusPlanned, "")
	return &engine.RunStory{Run: plan, Plan: &plan, Markers: planMarkers(), SincePlan: sincePlan(14, entry13(), entry14()),
		SincePlanLive: true, Overlaps: overlapsA()}
}

// storyPlanApplied is storyAllowedConcurrent told from the plan's side.
func storyPlanApplied() *engine.RunStory {
	s := storyAllowedConcurrent()
	a := s.Run
	return &engine.RunStory{Run: *s.Plan, Plan: s.Plan, Apply: &a, Markers: s.Markers, SincePlan: s.SincePlan, Version: s.Version}
}
