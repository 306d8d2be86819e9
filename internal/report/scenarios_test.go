package report

import (
	"github.com/kilolock/kilolock/internal/engine"
)

// The stories of alice's apply, one per way it can end.

// storyAllowedConcurrent: applied beside bob's running apply — disjoint
// write sets, read/read on the vpc — with the head unchanged since plan.
func storyAllowedConcurrent() *engine.RunStory {
	plan := planRunA(engine.StatusApplied, applyA)
	a := applyRunA(engine.StatusApplied, applied)
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
		engine.Marker{Run: applyA, Seq: 4, At: at(600.15), Kind: engine.MarkerApplyStarted, Serial: 12},
		engine.Marker{Run: applyA, Seq: 5, At: at(638), Kind: engine.MarkerApplied, Count: 3, Addresses: set(web, worker, webURL)},
		engine.Marker{Run: applyA, Seq: 6, At: at(639.5), Kind: engine.MarkerCommitted, Serial: 13, FromSerial: 12, Mode: engine.CommitSnapshotMerge, Count: 3},
		engine.Marker{Run: applyA, Seq: 7, At: at(639.6), Kind: engine.MarkerReleased, Count: 6},
	)
	v := version(13, engine.Provenance{Run: applyA, PlanRun: planA, SourceSerial: 12,
		PlanDigest: plan.Envelope.PlanDigest, Mode: engine.CommitSnapshotMerge, Exact: true, Actor: "alice", PR: pr(42)},
		set(web, worker, webURL), 639.5)
	return &engine.RunStory{Run: a, Plan: &plan, Markers: ms, SincePlan: sp, Version: v}
}

// applied is the end the engine stores on an apply that committed.
var applied = &engine.End{Cause: engine.CauseApplied}

// replanRunA is the re-plan against head 14 made during alice's apply to
// re-check her plan; the engine never lets an apply claim it.
func replanRunA(status engine.RunStatus, end *engine.End) engine.Run {
	r := engine.Run{ID: replanA, Kind: engine.KindPlan, State: stateName, Actor: "alice", Holder: holder, Status: status, End: end,
		PR: pr(42), CreatedAt: at(604.35), UpdatedAt: at(622.2), FinishedAt: atp(622.1),
		Envelope: envelope("alice", pr(42), 14, footprintA(), 604.35), ReplanOf: planA}
	r.Envelope.StartedAt = at(604.35)
	r.Envelope.FinishedAt = at(622.1)
	r.Envelope.PlanDigest = "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
	return r
}

// replanMarkers are the markers the engine stores on the re-plan run.
func replanMarkers() []engine.Marker {
	return []engine.Marker{
		{Run: replanA, Seq: 1, At: at(622.0), Kind: engine.MarkerWidened, Addresses: set(shared),
			Reason: "local.subnets in module.app: locals are not in plan JSON; widened to the module prefix"},
		{Run: replanA, Seq: 2, At: at(622.1), Kind: engine.MarkerPlanned, Serial: 14, Count: 6},
	}
}

// storyWaitedReplanned: waited 4.8s for erin's apply over the vpc, whose
// version 14 then changed alice's plan input; the re-plan against head 14
// kept the intent, changed nothing outside the footprint and needed no
// other reservation, so the apply applied the RE-PLAN (to the snapshot of
// head 14 it was made against) and committed version 15.
func storyWaitedReplanned() *engine.RunStory {
	plan := planRunA(engine.StatusApplied, applyA)
	rp := replanRunA(engine.StatusApplied, &engine.End{Cause: engine.CauseReplanApplied, Run: applyA, Plan: planA, Serial: 15})
	rp.ApplyRun = applyA
	rp.UpdatedAt = at(639.5)
	a := applyRunA(engine.StatusApplied, applied)
	a.CommittedSerial = 15
	e14 := entry14()
	e14.CommittedAt = at(604.2) // erin committed, then released the vpc
	sp := sincePlan(14, entry13(), e14)
	a.SincePlan = sp
	waited := engine.Duration(4784236607) // as measured: printed "4.8s"
	a.AllowedBecause = []engine.Fact{
		{Kind: engine.FactWaitedFor, Run: applyE, PR: pr(44), Addresses: set(vpc), Waited: waited},
		{Kind: engine.FactStalenessPassed, Serials: []int64{13}, SourceSerial: 12, HeadSerial: 14},
		{Kind: engine.FactReplanApplied, Run: replanA, Serials: []int64{14}, SourceSerial: 12, HeadSerial: 14},
	}
	ms := append(planMarkers(),
		engine.Marker{Run: applyA, Seq: 1, At: at(600.01), Kind: engine.MarkerWaited, Other: applyE, OtherPR: pr(44), Addresses: set(vpc)},
		engine.Marker{Run: applyA, Seq: 2, At: at(604.25), Kind: engine.MarkerReserved, Count: 6, Addresses: set(web, worker, webURL, vpc, subnet, shared),
			Waited: waited},
		engine.Marker{Run: applyA, Seq: 3, At: at(604.3), Kind: engine.MarkerPreflight, SincePlan: summaryOf(sp)},
	)
	ms = append(ms, replanMarkers()...)
	ms = append(ms,
		engine.Marker{Run: applyA, Seq: 4, At: at(622.2), Kind: engine.MarkerReplanned, Other: replanA, Serial: 14, IntentChanged: ptrBool(false), Serials: []int64{14}},
		engine.Marker{Run: applyA, Seq: 5, At: at(622.2), Kind: engine.MarkerStalenessPassed, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 6, At: at(622.25), Kind: engine.MarkerApplyStarted, Serial: 14, Other: replanA},
		engine.Marker{Run: applyA, Seq: 7, At: at(638), Kind: engine.MarkerApplied, Count: 3, Addresses: set(web, worker, webURL)},
		engine.Marker{Run: applyA, Seq: 8, At: at(639.5), Kind: engine.MarkerCommitted, Serial: 15, FromSerial: 14, Mode: engine.CommitSnapshotMerge, Count: 3},
		engine.Marker{Run: applyA, Seq: 9, At: at(639.6), Kind: engine.MarkerReleased, Count: 6},
	)
	v := version(15, engine.Provenance{Run: applyA, PlanRun: planA, SourceSerial: 12, PlanDigest: plan.Envelope.PlanDigest,
		AppliedPlanRun: replanA, AppliedPlanDigest: rp.Envelope.PlanDigest, AppliedSourceSerial: 14,
		Mode: engine.CommitSnapshotMerge, Exact: true, Actor: "alice", PR: pr(42)},
		set(web, worker, webURL), 639.5)
	return &engine.RunStory{Run: a, Plan: &plan, Replans: []engine.Run{rp}, Markers: ms, SincePlan: sp, Version: v}
}

// storyLegacyReplanChecked is storyWaitedReplanned as a Kilolock before
// issue 10 §2 stored it: the re-plan against head 14 was a check only, and
// the REVIEWED plan was applied to its own snapshot (serial 12). Its
// reports must keep saying so.
func storyLegacyReplanChecked() *engine.RunStory {
	plan := planRunA(engine.StatusApplied, applyA)
	rp := replanRunA(engine.StatusSuperseded, &engine.End{Cause: engine.CauseReplanChecked, Run: applyA, Plan: planA})
	a := applyRunA(engine.StatusApplied, applied)
	a.CommittedSerial = 15
	e14 := entry14()
	e14.CommittedAt = at(604.2) // erin committed, then released the vpc
	sp := sincePlan(14, entry13(), e14)
	a.SincePlan = sp
	waited := engine.Duration(4784236607) // as measured: printed "4.8s"
	a.AllowedBecause = []engine.Fact{
		{Kind: engine.FactWaitedFor, Run: applyE, PR: pr(44), Addresses: set(vpc), Waited: waited},
		{Kind: engine.FactStalenessPassed, Serials: []int64{13}, SourceSerial: 12, HeadSerial: 14},
		{Kind: engine.FactReplanUnchanged, Run: replanA, Serials: []int64{14}, SourceSerial: 12, HeadSerial: 14},
	}
	ms := append(planMarkers(),
		engine.Marker{Run: applyA, Seq: 1, At: at(600.01), Kind: engine.MarkerWaited, Other: applyE, OtherPR: pr(44), Addresses: set(vpc)},
		engine.Marker{Run: applyA, Seq: 2, At: at(604.25), Kind: engine.MarkerReserved, Count: 6, Addresses: set(web, worker, webURL, vpc, subnet, shared),
			Waited: waited},
		engine.Marker{Run: applyA, Seq: 3, At: at(604.3), Kind: engine.MarkerPreflight, SincePlan: summaryOf(sp)},
	)
	ms = append(ms, replanMarkers()...)
	ms = append(ms,
		engine.Marker{Run: applyA, Seq: 4, At: at(622.2), Kind: engine.MarkerReplanned, Other: replanA, Serial: 14, IntentChanged: ptrBool(false), Serials: []int64{14}},
		engine.Marker{Run: applyA, Seq: 5, At: at(622.2), Kind: engine.MarkerStalenessPassed, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 6, At: at(622.25), Kind: engine.MarkerApplyStarted, Serial: 12},
		engine.Marker{Run: applyA, Seq: 7, At: at(638), Kind: engine.MarkerApplied, Count: 3, Addresses: set(web, worker, webURL)},
		engine.Marker{Run: applyA, Seq: 8, At: at(639.5), Kind: engine.MarkerCommitted, Serial: 15, FromSerial: 14, Mode: engine.CommitSnapshotMerge, Count: 3},
		engine.Marker{Run: applyA, Seq: 9, At: at(639.6), Kind: engine.MarkerReleased, Count: 6},
	)
	v := version(15, engine.Provenance{Run: applyA, PlanRun: planA, SourceSerial: 12,
		PlanDigest: plan.Envelope.PlanDigest, Mode: engine.CommitSnapshotMerge, Exact: true, Actor: "alice", PR: pr(42)},
		set(web, worker, webURL), 639.5)
	return &engine.RunStory{Run: a, Plan: &plan, Replans: []engine.Run{rp}, Markers: ms, SincePlan: sp, Version: v}
}

// staleEnd is the end the engine stores when frank's version 15 makes the
// plan stale.
func staleEnd() *engine.End {
	return &engine.End{Cause: engine.CauseRefusedStale, Plan: planA, Stale: []engine.SincePlanEntry{entry15Write()}}
}

// storyRefusedStale: frank's version 15 changed module.app's web, which
// alice planned to write: refused as stale.
func storyRefusedStale() *engine.RunStory {
	plan := planRunA(engine.StatusStale, applyA)
	a := applyRunA(engine.StatusRefused, staleEnd())
	a.FinishedAt, a.UpdatedAt = atp(600.2), at(600.2)
	sp := sincePlan(15, entry13(), entry14(), entry15Write())
	a.SincePlan = sp
	ms := append(planMarkers(),
		engine.Marker{Run: applyA, Seq: 1, At: at(600.05), Kind: engine.MarkerReserved, Count: 6, Addresses: set(web, worker, webURL, vpc, subnet, shared)},
		engine.Marker{Run: applyA, Seq: 2, At: at(600.1), Kind: engine.MarkerPreflight, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 3, At: at(600.15), Kind: engine.MarkerStalenessFailed, Serial: 15, Other: applyF, OtherPR: pr(45),
			Class: engine.ClassWriteChanged, Addresses: set(web)},
		engine.Marker{Run: applyA, Seq: 4, At: at(600.15), Kind: engine.MarkerFailed, End: staleEnd()},
		engine.Marker{Run: applyA, Seq: 5, At: at(600.2), Kind: engine.MarkerReleased, Count: 6},
	)
	return &engine.RunStory{Run: a, Plan: &plan, Markers: ms, SincePlan: sp}
}

// strictEnd is the end the engine stores under --strict-since-plan when
// erin's version 14 changed what the plan reads.
func strictEnd() *engine.End {
	return &engine.End{Cause: engine.CauseRefusedStale, Plan: planA, Stale: []engine.SincePlanEntry{entry14()}, Strict: true}
}

// storyRefusedStrict: with --strict-since-plan, erin's version 14, which
// changed the vpc alice reads, refuses instead of re-planning.
func storyRefusedStrict() *engine.RunStory {
	plan := planRunA(engine.StatusStale, applyA)
	a := applyRunA(engine.StatusRefused, strictEnd())
	a.FinishedAt, a.UpdatedAt = atp(600.2), at(600.2)
	sp := sincePlan(14, entry13(), entry14())
	a.SincePlan = sp
	ms := append(planMarkers(),
		engine.Marker{Run: applyA, Seq: 1, At: at(600.05), Kind: engine.MarkerReserved, Count: 6, Addresses: set(web, worker, webURL, vpc, subnet, shared)},
		engine.Marker{Run: applyA, Seq: 2, At: at(600.1), Kind: engine.MarkerPreflight, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 3, At: at(600.15), Kind: engine.MarkerStalenessFailed, Serial: 14, Other: applyE, OtherPR: pr(44),
			Class: engine.ClassReadChanged, Addresses: set(vpc)},
		engine.Marker{Run: applyA, Seq: 4, At: at(600.15), Kind: engine.MarkerFailed, End: strictEnd()},
		engine.Marker{Run: applyA, Seq: 5, At: at(600.2), Kind: engine.MarkerReleased, Count: 6},
	)
	return &engine.RunStory{Run: a, Plan: &plan, Markers: ms, SincePlan: sp}
}

// intentEnd is the end the engine stores for a re-plan with another intent
// on the write set.
func intentEnd() *engine.End {
	return &engine.End{Cause: engine.CauseIntentChanged, Run: replanA, Plan: planA, Serial: 14,
		Replan: &engine.ReplanFacts{Addresses: []string{string(web)}, Versions: []int64{14}}}
}

// refusedByReplan is alice's apply stopped by its re-plan against head 14
// (erin's version 14 changed the vpc she reads): plan and re-plan in the
// statuses the engine leaves them, the marker the engine stores.
func refusedByReplan(planStatus engine.RunStatus, rp engine.Run, end func() *engine.End, differs engine.AddressSet) *engine.RunStory {
	plan := planRunA(planStatus, applyA)
	a := applyRunA(engine.StatusRefused, end())
	a.FinishedAt, a.UpdatedAt = atp(622.3), at(622.3)
	sp := sincePlan(14, entry13(), entry14())
	a.SincePlan = sp
	ms := append(planMarkers(),
		engine.Marker{Run: applyA, Seq: 1, At: at(600.05), Kind: engine.MarkerReserved, Count: 6, Addresses: set(web, worker, webURL, vpc, subnet, shared)},
		engine.Marker{Run: applyA, Seq: 2, At: at(600.1), Kind: engine.MarkerPreflight, SincePlan: summaryOf(sp)},
	)
	ms = append(ms, replanMarkers()...)
	ms = append(ms,
		engine.Marker{Run: applyA, Seq: 3, At: at(622.2), Kind: engine.MarkerReplanned, Other: replanA, Serial: 14, IntentChanged: ptrBool(true),
			Addresses: differs, End: end()},
		engine.Marker{Run: applyA, Seq: 4, At: at(622.2), Kind: engine.MarkerFailed, End: end()},
		engine.Marker{Run: applyA, Seq: 5, At: at(622.3), Kind: engine.MarkerReleased, Count: 6},
	)
	return &engine.RunStory{Run: a, Plan: &plan, Replans: []engine.Run{rp}, Markers: ms, SincePlan: sp}
}

// outsideEnd is the end the engine stores for a re-plan that would also
// change something outside the reviewed footprint.
func outsideEnd() *engine.End {
	return &engine.End{Cause: engine.CauseOutsideFootprint, Run: replanA, Plan: planA, Serial: 14,
		Replan: &engine.ReplanFacts{Addresses: []string{string(cache)}, Versions: []int64{14}, Outside: []string{string(cache)}}}
}

// storyRefusedOutside: the re-plan against head 14 plans the same for what
// alice writes, but would also replace the cache, which her plan does not
// touch: applying it would apply that unreviewed — stop; the re-plan is
// open for review.
func storyRefusedOutside() *engine.RunStory {
	rp := replanRunA(engine.StatusPlanned, nil)
	rp.UpdatedAt = at(622.1)
	rp.Envelope.Footprint.Write = rp.Envelope.Footprint.Write.Union(set(cache))
	rp.Envelope.Reservations = rp.Envelope.Footprint.Reservations()
	s := refusedByReplan(engine.StatusSuperseded, rp, outsideEnd, set(cache))
	for i := range s.Markers {
		if s.Markers[i].Kind == engine.MarkerReplanned {
			s.Markers[i].Class = engine.ClassIndependent
			s.Markers[i].Extra = map[string]string{"outside": string(cache)}
		}
	}
	return s
}

// beyondEnd is the end the engine stores for a re-plan that needs a
// reservation the apply does not hold.
func beyondEnd() *engine.End {
	return &engine.End{Cause: engine.CauseBeyondReservations, Run: replanA, Plan: planA, Serial: 14,
		Replan: &engine.ReplanFacts{Addresses: []string{string(cache)}, Versions: []int64{14},
			Unreserved: []engine.Reservation{{Address: cache, Mode: engine.ModeRead}}}}
}

// storyRefusedBeyond: the re-plan against head 14 plans the same, but now
// also reads the cache (erin's version 14 made the web server depend on
// it), which alice's apply holds no reservation on: stop for review.
func storyRefusedBeyond() *engine.RunStory {
	rp := replanRunA(engine.StatusPlanned, nil)
	rp.UpdatedAt = at(622.1)
	rp.Envelope.Footprint.Read = rp.Envelope.Footprint.Read.Union(set(cache))
	rp.Envelope.Reservations = rp.Envelope.Footprint.Reservations()
	return refusedByReplan(engine.StatusSuperseded, rp, beyondEnd, set(cache))
}

// storyRefusedIntent: the re-plan against head 14 would change the web
// server alice writes: stop; the re-plan is open for review.
func storyRefusedIntent() *engine.RunStory {
	rp := replanRunA(engine.StatusPlanned, nil)
	rp.UpdatedAt = at(622.1)
	return refusedByReplan(engine.StatusSuperseded, rp, intentEnd, set(web))
}

// behindEnd is the end the engine stores for a re-plan that would change
// what the plan reads.
func behindEnd() *engine.End {
	return &engine.End{Cause: engine.CauseBehindHead, Run: replanA, Plan: planA, Serial: 14,
		Replan: &engine.ReplanFacts{Addresses: []string{string(vpc)}, Versions: []int64{14}}}
}

// storyRefusedBehindHead: alice's branch predates erin's vpc change
// (version 14); re-planned against head 14, her configuration would change
// the vpc back. It plans the same for the web server, but no comparison can
// vouch for a plan whose configuration is behind the head: stop.
func storyRefusedBehindHead() *engine.RunStory {
	rp := replanRunA(engine.StatusSuperseded, &engine.End{Cause: engine.CauseReplanReverts, Plan: planA})
	rp.Envelope.Footprint.Write = rp.Envelope.Footprint.Write.Union(set(vpc))
	rp.Envelope.Reservations = rp.Envelope.Footprint.Reservations()
	rp.Envelope.Summary = engine.PlanSummary{Add: 1, Change: 2, Outputs: 1}
	return refusedByReplan(engine.StatusStale, rp, behindEnd, set(vpc))
}

// failEnd is the end of an apply whose Terraform failed part-way: the
// command and what its stderr said.
func failEnd() *engine.End {
	return &engine.End{Cause: engine.CauseTerraformFailed, Terraform: &engine.TerraformFailure{Command: "apply",
		Stderr: "exit status 1: Error: local-exec provisioner error in module.app.terraform_data.worker"}}
}

// storyPartialDrift: Terraform failed part-way: it replaced the cache (not
// planned) and never got to the worker and the output; what it wrote is
// committed as version 13, partial, with the drift.
func storyPartialDrift() *engine.RunStory {
	plan := planRunA(engine.StatusFailed, applyA)
	plan.End = &engine.End{Cause: engine.CauseApplyPartial, Run: applyA, Serial: 13}
	a := applyRunA(engine.StatusFailed, failEnd())
	a.CommittedSerial = 13
	sp := sincePlan(12)
	a.SincePlan = sp
	a.AllowedBecause = []engine.Fact{{Kind: engine.FactStalenessPassed, SourceSerial: 12, HeadSerial: 12}}
	drift := &engine.Deviation{Unplanned: set(cache), Unchanged: set(worker, webURL)}
	ms := append(planMarkers(),
		engine.Marker{Run: applyA, Seq: 1, At: at(600.05), Kind: engine.MarkerReserved, Count: 6, Addresses: set(web, worker, webURL, vpc, subnet, shared)},
		engine.Marker{Run: applyA, Seq: 2, At: at(600.1), Kind: engine.MarkerPreflight, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 3, At: at(600.1), Kind: engine.MarkerStalenessPassed, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 4, At: at(600.15), Kind: engine.MarkerApplyStarted, Serial: 12},
		engine.Marker{Run: applyA, Seq: 5, At: at(631), Kind: engine.MarkerApplied, Count: 2, Addresses: set(web, cache), End: failEnd()},
		engine.Marker{Run: applyA, Seq: 6, At: at(631.4), Kind: engine.MarkerDeviation, Deviation: drift},
		engine.Marker{Run: applyA, Seq: 7, At: at(631.4), Kind: engine.MarkerCommitted, Serial: 13, FromSerial: 12, Mode: engine.CommitSnapshotMerge, Count: 2},
		engine.Marker{Run: applyA, Seq: 8, At: at(631.4), Kind: engine.MarkerFailed, End: failEnd()},
		engine.Marker{Run: applyA, Seq: 9, At: at(631.5), Kind: engine.MarkerReleased, Count: 6},
	)
	v := version(13, engine.Provenance{Run: applyA, PlanRun: planA, SourceSerial: 12,
		PlanDigest: plan.Envelope.PlanDigest, Mode: engine.CommitSnapshotMerge, Deviation: drift, Partial: true, Actor: "alice", PR: pr(42)},
		set(web, cache), 631.4)
	return &engine.RunStory{Run: a, Plan: &plan, Markers: ms, SincePlan: sp, Version: v}
}

// erinHoldsVPC is the blocker of alice's apply: erin's apply holds the vpc.
func erinHoldsVPC() []engine.Blocker {
	return []engine.Blocker{{Run: applyE, PR: pr(44), Addresses: set(vpc)}}
}

// conflictEnd is the end the engine stores when erin's apply holds the vpc.
func conflictEnd() *engine.End {
	return &engine.End{Cause: engine.CauseRefusedConflict, Blockers: erinHoldsVPC()}
}

// storyRefusedConflict: erin's apply held the vpc and alice asked not to
// wait (--wait 0).
func storyRefusedConflict() *engine.RunStory {
	// The engine hands the plan back (planned) and keeps naming its last
	// attempt in ApplyRun.
	plan := planRunA(engine.StatusPlanned, applyA)
	a := applyRunA(engine.StatusRefused, conflictEnd())
	a.FinishedAt, a.UpdatedAt = atp(600.02), at(600.02)
	ms := append(planMarkers(),
		engine.Marker{Run: applyA, Seq: 1, At: at(600.01), Kind: engine.MarkerWaited, Other: applyE, OtherPR: pr(44), Addresses: set(vpc)},
		engine.Marker{Run: applyA, Seq: 2, At: at(600.01), Kind: engine.MarkerFailed, End: conflictEnd()},
	)
	return &engine.RunStory{Run: a, Plan: &plan, Markers: ms}
}

// interruptEnd is the end the engine stores for an apply cancelled (Ctrl-C)
// while Terraform ran, once what Terraform wrote is committed as version 13.
func interruptEnd() *engine.End {
	return &engine.End{Cause: engine.CauseInterrupted, Phase: engine.PhaseTerraformApply, Serial: 13}
}

// stoppedEnd is how Terraform stopped, on the "applied" marker written
// before the commit.
func stoppedEnd() *engine.End {
	return &engine.End{Cause: engine.CauseInterrupted, Phase: engine.PhaseTerraformApply}
}

// storyInterrupted: alice pressed Ctrl-C while Terraform applied. It had
// replaced the web server and created the worker, whose provisioner did
// not finish (tainted), and never got to the output: what it wrote is
// committed as version 13, partial; the plan is consumed (failed).
func storyInterrupted() *engine.RunStory {
	plan := planRunA(engine.StatusFailed, applyA)
	plan.End = &engine.End{Cause: engine.CauseApplyPartial, Run: applyA, Serial: 13}
	a := applyRunA(engine.StatusInterrupted, interruptEnd())
	a.CommittedSerial = 13
	sp := sincePlan(12)
	a.SincePlan = sp
	a.AllowedBecause = []engine.Fact{
		{Kind: engine.FactDisjointWrites, Run: applyB, PR: pr(41), OwnWrite: set(web, worker, webURL), OtherWrite: set(dbMain)},
		{Kind: engine.FactStalenessPassed, SourceSerial: 12, HeadSerial: 12},
	}
	drift := &engine.Deviation{Unchanged: set(webURL), Tainted: set(worker)}
	ms := append(planMarkers(),
		engine.Marker{Run: applyA, Seq: 1, At: at(600.05), Kind: engine.MarkerReserved, Count: 6, Addresses: set(web, worker, webURL, vpc, subnet, shared)},
		engine.Marker{Run: applyA, Seq: 2, At: at(600.1), Kind: engine.MarkerPreflight, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 3, At: at(600.1), Kind: engine.MarkerStalenessPassed, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 4, At: at(600.15), Kind: engine.MarkerApplyStarted, Serial: 12},
		engine.Marker{Run: applyA, Seq: 5, At: at(624), Kind: engine.MarkerApplied, Count: 2, Addresses: set(web, worker), End: stoppedEnd()},
		engine.Marker{Run: applyA, Seq: 6, At: at(624.3), Kind: engine.MarkerDeviation, Deviation: drift},
		engine.Marker{Run: applyA, Seq: 7, At: at(624.3), Kind: engine.MarkerCommitted, Serial: 13, FromSerial: 12, Mode: engine.CommitSnapshotMerge, Count: 2},
		engine.Marker{Run: applyA, Seq: 8, At: at(624.3), Kind: engine.MarkerFailed, End: interruptEnd()},
		engine.Marker{Run: applyA, Seq: 9, At: at(624.4), Kind: engine.MarkerReleased, Count: 6},
	)
	v := version(13, engine.Provenance{Run: applyA, PlanRun: planA, SourceSerial: 12,
		PlanDigest: plan.Envelope.PlanDigest, Mode: engine.CommitSnapshotMerge, Deviation: drift, Partial: true, Actor: "alice", PR: pr(42)},
		set(web, worker), 624.3)
	return &engine.RunStory{Run: a, Plan: &plan, Markers: ms, SincePlan: sp, Version: v}
}

// storyPlanOpenAgain is `kl run show` of alice's plan after the refusal of
// storyRefusedConflict: open again (planned), its last attempt named, the
// versions since classified live, carol's version 13 independent.
func storyPlanOpenAgain() *engine.RunStory {
	s := storyRefusedConflict()
	last := s.Run
	plan := *s.Plan
	return &engine.RunStory{Run: plan, Plan: &plan, Apply: &last, Markers: s.Markers, SincePlan: sincePlan(13, entry13()),
		SincePlanLive: true, Overlaps: overlapsA()}
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

// storyOverwritten: applied while frank's version 13 changed the web
// server alice held a write reservation on — what reservations exist to
// prevent; the commit says so loudly.
func storyOverwritten() *engine.RunStory {
	s := storyAllowedConcurrent()
	drift := &engine.Deviation{Overwritten: set(web)}
	p := s.Version.Provenance
	p.Exact, p.Deviation = false, drift
	s.Run.CommittedSerial = 14
	s.Version = version(14, p, set(web, worker, webURL), 639.5)
	var ms []engine.Marker
	for _, m := range s.Markers {
		if m.Kind == engine.MarkerCommitted {
			ms = append(ms, engine.Marker{Run: applyA, Seq: 6, At: at(639.5), Kind: engine.MarkerDeviation, Deviation: drift})
			m.Seq, m.Serial, m.FromSerial = 7, 14, 13
		}
		if m.Kind == engine.MarkerReleased {
			m.Seq = 8
		}
		ms = append(ms, m)
	}
	s.Markers = ms
	return s
}

// storyReplanOpen is `kl run show` of the re-plan left open for review by
// storyRefusedIntent: its own story, with the versions since its source
// serial (none) and nothing applied yet.
func storyReplanOpen() *engine.RunStory {
	rp := replanRunA(engine.StatusPlanned, nil)
	rp.UpdatedAt = at(622.1)
	return &engine.RunStory{Run: rp, Plan: &rp, Markers: replanMarkers(), SincePlan: &engine.SincePlan{PlanRun: replanA, SourceSerial: 14, HeadSerial: 14,
		Entries: []engine.SincePlanEntry{}}, SincePlanLive: true}
}

// leaseEnd is the end the lease sweep stores on alice's apply when her kl
// was killed while Terraform applied (store.ExpireRun, then
// store.NoteApplyStarted): the lease on its reservations ran out at
// 12:12:00, and Terraform had started.
func leaseEnd() *engine.End {
	return &engine.End{Cause: engine.CauseLeaseExpired, Holder: holder, LeaseEnd: at(720), Recoverable: true}
}

// killedMarkers are the markers of alice's apply killed (kill -9 of kl)
// while Terraform applied: it reserved, passed the preflight, started
// Terraform on serial 12, and its lease ran out two minutes later.
func killedMarkers(sp *engine.SincePlan) []engine.Marker {
	return append(planMarkers(),
		engine.Marker{Run: applyA, Seq: 1, At: at(600.05), Kind: engine.MarkerReserved, Count: 6, Addresses: set(web, worker, webURL, vpc, subnet, shared)},
		engine.Marker{Run: applyA, Seq: 2, At: at(600.1), Kind: engine.MarkerPreflight, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 3, At: at(600.1), Kind: engine.MarkerStalenessPassed, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 4, At: at(600.15), Kind: engine.MarkerApplyStarted, Serial: 12},
		engine.Marker{Run: applyA, Seq: 5, At: at(720.2), Kind: engine.MarkerLeaseExpired, Addresses: set(web, worker, webURL, vpc, subnet, shared)},
	)
}

// storyLeaseExpiredRecoverable: alice's kl was killed (kill -9) while
// Terraform applied. Terraform had replaced the web server, and its last
// checkpoint holds it; the lease sweep ended the run lease-expired and
// failed the plan. Nothing is committed yet: `kl run recover` would.
func storyLeaseExpiredRecoverable() *engine.RunStory {
	plan := planRunA(engine.StatusFailed, applyA)
	plan.End = &engine.End{Cause: engine.CauseApplyLeaseExpired, Run: applyA, Holder: holder, LeaseEnd: at(720), Recoverable: true}
	a := applyRunA(engine.StatusLeaseExpired, leaseEnd())
	a.FinishedAt, a.UpdatedAt = atp(720.2), at(720.2)
	sp := sincePlan(12)
	a.SincePlan = sp
	a.AllowedBecause = []engine.Fact{{Kind: engine.FactStalenessPassed, SourceSerial: 12, HeadSerial: 12}}
	return &engine.RunStory{Run: a, Plan: &plan, Markers: killedMarkers(sp), SincePlan: sp,
		Recoverable: &engine.Recoverable{Run: applyA, Artifact: engine.ArtifactApplyCheckpoint, BaseSerial: 12, Changed: set(web)}}
}

// storyLeaseExpiredUnseen is storyLeaseExpiredRecoverable where kl died
// before Terraform finished any resource (or before a checkpoint reached
// the store): Terraform ran, Kilolock saw nothing it wrote.
func storyLeaseExpiredUnseen() *engine.RunStory {
	s := storyLeaseExpiredRecoverable()
	s.Recoverable = nil
	return s
}

// storyRecovered is storyLeaseExpiredRecoverable after `kl run recover`:
// version 13 holds the web server from the checkpoint, partial; the run
// stays lease-expired and names the version; the plan stays failed.
func storyRecovered() *engine.RunStory {
	s := storyLeaseExpiredRecoverable()
	s.Recoverable = nil
	s.Plan.End = &engine.End{Cause: engine.CauseApplyRecovered, Run: applyA, Serial: 13}
	s.Run.CommittedSerial = 13
	drift := &engine.Deviation{Unchanged: set(worker, webURL)}
	s.Markers = append(s.Markers,
		engine.Marker{Run: applyA, Seq: 6, At: at(900.3), Kind: engine.MarkerDeviation, Deviation: drift},
		engine.Marker{Run: applyA, Seq: 7, At: at(900.3), Kind: engine.MarkerCommitted, Serial: 13, FromSerial: 12, Mode: engine.CommitSnapshotMerge, Count: 1},
		engine.Marker{Run: applyA, Seq: 8, At: at(900.3), Kind: engine.MarkerRecovered, Serial: 13, Count: 1,
			Extra: map[string]string{"artifact": engine.ArtifactApplyCheckpoint, "holder": "laptop-alice:977"}},
	)
	s.Version = version(13, engine.Provenance{Run: applyA, PlanRun: planA, SourceSerial: 12,
		PlanDigest: s.Plan.Envelope.PlanDigest, Mode: engine.CommitSnapshotMerge, Deviation: drift, Partial: true, Actor: "alice", PR: pr(42)},
		set(web), 900.3)
	return s
}

// storyLateResult (ADR 0071): alice's apply on another host stalled past
// its lease; `kl run recover` committed its checkpoint as version 13 (the
// recovered marker says the holder could not be checked); then her kl came
// back with Terraform's final state, which adds the worker: not committed,
// kept as apply-result.tfstate, recoverable.
func storyLateResult() *engine.RunStory {
	s := storyRecovered()
	s.Markers[len(s.Markers)-1].Extra[engine.ExtraUncheckedHolder] = holder.String()
	late := &engine.End{Cause: engine.CauseRecoveredMeanwhile, Serial: 13, Artifact: engine.ArtifactApplyResult, TerraformDone: true,
		Recoverable: true, Holder: holder}
	s.Run.End = late
	s.Markers = append(s.Markers, engine.Marker{Run: applyA, Seq: 9, At: at(960), Kind: engine.MarkerFailed, End: late})
	s.Recoverable = &engine.Recoverable{Run: applyA, Artifact: engine.ArtifactApplyResult, BaseSerial: 12, Changed: set(worker), LateAfter: 13}
	return s
}

// storyHolderAlive (ADR 0071): the sweep fenced alice's apply, but its
// holder, on this host, is alive: the recover line says to wait for it or
// stop it first.
func storyHolderAlive() *engine.RunStory {
	s := storyLeaseExpiredRecoverable()
	h := holder
	s.Recoverable.HolderAlive = &h
	return s
}

// storyNoChanges: alice applied a plan without changes (terraform plan
// said "No changes"): nothing reserved, Terraform not run, nothing
// committed; the run and the plan are applied.
func storyNoChanges() *engine.RunStory {
	plan := planRunA(engine.StatusApplied, applyA)
	plan.Envelope.Footprint = engine.Footprint{}
	plan.Envelope.Reservations = nil
	plan.Envelope.Summary = engine.PlanSummary{}
	a := applyRunA(engine.StatusApplied, &engine.End{Cause: engine.CauseNothingToApply})
	a.FinishedAt, a.UpdatedAt = atp(600.02), at(600.02)
	ms := []engine.Marker{
		{Run: planA, Seq: 1, At: at(18.5), Kind: engine.MarkerPlanned, Serial: 12},
		{Run: applyA, Seq: 1, At: at(600.02), Kind: engine.MarkerApplied, End: &engine.End{Cause: engine.CauseNothingToApply}},
	}
	return &engine.RunStory{Run: a, Plan: &plan, Markers: ms}
}

// storyLeaseLostInputsChanged (ADR 0072): alice's apply stalled while
// Terraform ran past its lease; the sweep fenced her writes and dropped her
// reads, and erin's apply changed the VPC — a plan input — as version 13.
// Alice's holder came back while the fence stood: version 14 holds all
// Terraform did, but it is not exact, the run failed as lease-lost naming
// erin's version, and its since-plan is the one at commit.
func storyLeaseLostInputsChanged() *engine.RunStory {
	e13 := entry14()
	e13.Serial, e13.CommittedAt = 13, at(700)
	changed := []engine.SincePlanEntry{e13}
	changed[0].Changed = nil
	end := &engine.End{Cause: engine.CauseLeaseLost, Serial: 14, TerraformDone: true, InputsChanged: changed}
	plan := planRunA(engine.StatusFailed, applyA)
	plan.End = &engine.End{Cause: engine.CauseApplyLeaseLost, Run: applyA, Serial: 14}
	a := applyRunA(engine.StatusFailed, end)
	a.CommittedSerial = 14
	sp := sincePlan(13, e13)
	sp.AtCommit = true
	a.SincePlan = sp
	pre := sincePlan(12)
	writes := set(web, worker, webURL)
	fenced := &engine.End{Cause: engine.CauseLeaseExpired, Holder: holder, LeaseEnd: at(720), Fenced: writes, TerraformStarted: at(600.15)}
	drift := &engine.Deviation{InputsChanged: changed}
	ms := append(planMarkers(),
		engine.Marker{Run: applyA, Seq: 1, At: at(600.05), Kind: engine.MarkerReserved, Count: 6, Addresses: set(web, worker, webURL, vpc, subnet, shared)},
		engine.Marker{Run: applyA, Seq: 2, At: at(600.1), Kind: engine.MarkerPreflight, SincePlan: summaryOf(pre)},
		engine.Marker{Run: applyA, Seq: 3, At: at(600.1), Kind: engine.MarkerStalenessPassed, SincePlan: summaryOf(pre)},
		engine.Marker{Run: applyA, Seq: 4, At: at(600.15), Kind: engine.MarkerApplyStarted, Serial: 12},
		engine.Marker{Run: applyA, Seq: 5, At: at(720), Kind: engine.MarkerLeaseExpired, Addresses: set(web, worker, webURL, vpc, subnet, shared), End: fenced},
		engine.Marker{Run: applyA, Seq: 6, At: at(960), Kind: engine.MarkerApplied, Count: 3, Addresses: writes},
		engine.Marker{Run: applyA, Seq: 7, At: at(960.4), Kind: engine.MarkerDeviation, Deviation: drift},
		engine.Marker{Run: applyA, Seq: 8, At: at(960.4), Kind: engine.MarkerCommitted, Serial: 14, FromSerial: 13, Mode: engine.CommitSnapshotMerge, Count: 3},
		engine.Marker{Run: applyA, Seq: 9, At: at(960.4), Kind: engine.MarkerFailed, End: end},
		engine.Marker{Run: applyA, Seq: 10, At: at(960.4), Kind: engine.MarkerFenceLifted, Lift: engine.LiftCommitted, Addresses: writes},
	)
	v := version(14, engine.Provenance{Run: applyA, PlanRun: planA, SourceSerial: 12,
		PlanDigest: plan.Envelope.PlanDigest, Mode: engine.CommitSnapshotMerge, Deviation: drift, Actor: "alice", PR: pr(42)},
		writes, 960.4)
	return &engine.RunStory{Run: a, Plan: &plan, Markers: ms, SincePlan: sp, Version: v}
}

// storyLeaseLost: alice's apply stalled while Terraform ran (SIGSTOP) past
// its lease; erin's apply took the web server meanwhile and committed
// version 13. Terraform then finished — not part-way — but its change to
// the web server is in no version: the engine committed version 14, which
// changes nothing (the head kept the web server), as the provenance of the
// apply that ran, its drift naming erin's version and run.
func storyLeaseLost() *engine.RunStory {
	lost := []engine.LostWrite{{Address: web, Serial: 13, Run: applyE, Actor: "erin", PR: pr(44)}}
	end := &engine.End{Cause: engine.CauseLeaseLost, Serial: 14, TerraformDone: true, Lost: lost, NoChange: true}
	plan := planRunA(engine.StatusFailed, applyA)
	plan.End = &engine.End{Cause: engine.CauseApplyLeaseLost, Run: applyA, Serial: 14}
	a := applyRunA(engine.StatusFailed, end)
	a.CommittedSerial = 14
	sp := sincePlan(12)
	a.SincePlan = sp
	a.AllowedBecause = []engine.Fact{{Kind: engine.FactStalenessPassed, SourceSerial: 12, HeadSerial: 12}}
	drift := &engine.Deviation{Unchanged: set(worker, webURL), Kept: set(web), Lost: lost}
	ms := append(planMarkers(),
		engine.Marker{Run: applyA, Seq: 1, At: at(600.05), Kind: engine.MarkerReserved, Count: 6, Addresses: set(web, worker, webURL, vpc, subnet, shared)},
		engine.Marker{Run: applyA, Seq: 2, At: at(600.1), Kind: engine.MarkerPreflight, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 3, At: at(600.1), Kind: engine.MarkerStalenessPassed, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 4, At: at(600.15), Kind: engine.MarkerApplyStarted, Serial: 12},
		engine.Marker{Run: applyA, Seq: 5, At: at(900), Kind: engine.MarkerLeaseExpired, Addresses: set(web, worker, webURL, vpc, subnet, shared)},
		engine.Marker{Run: applyA, Seq: 6, At: at(960), Kind: engine.MarkerApplied, Count: 1, Addresses: set(web)},
		engine.Marker{Run: applyA, Seq: 7, At: at(960.4), Kind: engine.MarkerDeviation, Deviation: drift},
		engine.Marker{Run: applyA, Seq: 8, At: at(960.4), Kind: engine.MarkerCommitted, Serial: 14, FromSerial: 13, Mode: engine.CommitSnapshotMerge},
		engine.Marker{Run: applyA, Seq: 9, At: at(960.4), Kind: engine.MarkerFailed, End: end},
	)
	v := version(14, engine.Provenance{Run: applyA, PlanRun: planA, SourceSerial: 12,
		PlanDigest: plan.Envelope.PlanDigest, Mode: engine.CommitSnapshotMerge, Deviation: drift, Actor: "alice", PR: pr(42)},
		nil, 960.4)
	return &engine.RunStory{Run: a, Plan: &plan, Markers: ms, SincePlan: sp, Version: v}
}

// storyRefusedValidation: alice's native-lane plan, validated at apply
// (ADR 0069 §9): the terraform lane's plan of the whole configuration
// against head 13 (carol's independent version) plans another update of
// the web server than the native plan; the apply is refused before
// Terraform runs, the native plan superseded by the validation plan, open
// for review. Both intents are the marker's.
func storyRefusedValidation() *engine.RunStory {
	plan := planRunA(engine.StatusSuperseded, applyA)
	plan.Envelope.Lane = engine.LaneNative
	end := &engine.End{Cause: engine.CauseValidationChanged, Run: replanA, Plan: planA, Serial: 13,
		Replan: &engine.ReplanFacts{Addresses: []string{string(web)}}}
	a := applyRunA(engine.StatusRefused, end)
	a.FinishedAt, a.UpdatedAt = atp(622.3), at(622.3)
	sp := sincePlan(13, entry13())
	a.SincePlan = sp
	vp := replanRunA(engine.StatusPlanned, nil)
	ms := append(planMarkers(),
		engine.Marker{Run: applyA, Seq: 1, At: at(600.05), Kind: engine.MarkerReserved, Count: 6, Addresses: set(web, worker, webURL, vpc, subnet, shared)},
		engine.Marker{Run: applyA, Seq: 2, At: at(600.1), Kind: engine.MarkerPreflight, SincePlan: summaryOf(sp)},
		engine.Marker{Run: applyA, Seq: 3, At: at(622.2), Kind: engine.MarkerValidated, Other: replanA, Serial: 13, IntentChanged: ptrBool(true),
			Class: engine.ClassWriteChanged, Addresses: set(web), End: end, Extra: map[string]string{
				"native":    string(web) + ": update sha256:1111111111111111111111111111111111111111111111111111111111111111",
				"terraform": string(web) + ": update sha256:2222222222222222222222222222222222222222222222222222222222222222"}},
		engine.Marker{Run: applyA, Seq: 4, At: at(622.2), Kind: engine.MarkerFailed, End: end},
		engine.Marker{Run: applyA, Seq: 5, At: at(622.3), Kind: engine.MarkerReleased, Count: 6},
	)
	return &engine.RunStory{Run: a, Plan: &plan, Replans: []engine.Run{vp}, Markers: ms, SincePlan: sp}
}
