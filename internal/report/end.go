package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// How a run ended, in words: the one place that turns an engine.End (the
// typed facts the engine and the stores record) into English. Every view,
// renderer and klbot's Markdown reads an end through these functions.

// EndText is the sentence of end, the end of run id ("" for none, or for an
// apply that simply committed): "reservations conflict: run X holds A",
// "terraform apply: …", "its holder h:1 stopped renewing: …". An end
// stored before ends were typed reads as it was stored; a cause this
// binary does not know reads as its name.
func EndText(id string, end *engine.End) string { return endText(id, end, nil) }

// endText is EndText with its next steps as klbot's comment commands on
// cm's pull request (nil: kl's commands).
func endText(id string, end *engine.End, cm *Commands) string {
	if end == nil {
		return ""
	}
	if end.Legacy != "" {
		return end.Legacy
	}
	switch end.Cause {
	case engine.CauseApplied:
		return ""
	case engine.CauseNothingToApply:
		return "the plan has no changes: nothing applied, nothing committed"
	case engine.CauseWaiting:
		return "waiting: " + blockersText(end.Blockers)
	case engine.CauseRefusedConflict:
		s := "reservations conflict: " + blockersText(end.Blockers)
		if end.Waited > 0 {
			s = fmt.Sprintf("waited %s for reservations; %s", time.Duration(end.Waited), s)
		}
		return s
	case engine.CauseRefusedFenced:
		return fencedText(end.Blockers, cm)
	case engine.CauseRefusedStale:
		return (&engine.StaleError{PlanRun: end.Plan, Entries: end.Stale, Strict: end.Strict}).Error()
	case engine.CauseIntentChanged:
		rp := replanFactsOf(end)
		return fmt.Sprintf("re-plan %s against head %d plans something else for %s (plan input changed in %s)%s; review plan %s and apply it",
			end.Run, end.Serial, abbreviate(rp.Addresses, 8), versionsText(rp.Versions), outsideText(rp.Outside), end.Run)
	case engine.CauseBehindHead:
		rp := replanFactsOf(end)
		return fmt.Sprintf("%s: re-plan %s against head %d would also change %s, which this plan reads (changed in %s): applying would revert that change; update the configuration with the head and plan again",
			engine.ErrBehindHead, end.Run, end.Serial, abbreviate(rp.Addresses, 8), versionsText(rp.Versions))
	case engine.CauseOutsideFootprint:
		rp := replanFactsOf(end)
		return fmt.Sprintf("re-plan %s against head %d would also change %s, outside the reviewed footprint (plan input changed in %s): applying it would apply that unreviewed; review plan %s and apply it",
			end.Run, end.Serial, abbreviate(rp.Addresses, 8), versionsText(rp.Versions), end.Run)
	case engine.CauseBeyondReservations:
		rp := replanFactsOf(end)
		return fmt.Sprintf("re-plan %s against head %d needs %s this apply does not hold: %s (plan input changed in %s); review plan %s and apply it",
			end.Run, end.Serial, plural(len(rp.Unreserved), "reservation", "reservations"), reservationsText(rp.Unreserved, 8), versionsText(rp.Versions), end.Run)
	case engine.CauseRefusedClaim:
		return fmt.Sprintf("claiming plan %s: %s", end.Plan, end.Err)
	case engine.CauseInterrupted:
		return interruptedText(end)
	case engine.CauseTerraformFailed:
		return terraformText(end.Terraform)
	case engine.CauseFailed:
		return failedText(end)
	case engine.CauseLeaseExpired:
		return leaseExpiredText(id, end, cm)
	case engine.CauseLeaseLost:
		return leaseLostText(id, end, cm)
	case engine.CauseRecoveredMeanwhile:
		return recoveredMeanwhileText(id, end, cm)
	case engine.CauseUnlocked:
		return unlockedText(end)
	}
	return planEndText(end, cm)
}

// planEndText is EndText for the causes that end plan runs.
func planEndText(end *engine.End, cm *Commands) string {
	switch end.Cause {
	case engine.CauseApplyEnded:
		return fmt.Sprintf("apply run %s: %s", end.Run, endText(end.Run, end.Then, cm))
	case engine.CauseApplyPartial:
		return fmt.Sprintf("apply run %s failed part-way; its partial result is version %d: re-plan", end.Run, end.Serial)
	case engine.CauseApplyLeaseLost:
		return fmt.Sprintf("apply run %s lost its lease before its commit; version %d holds what the head could take: re-plan", end.Run, end.Serial)
	case engine.CauseApplyRecovered:
		return fmt.Sprintf("apply run %s stopped part-way; `kl run recover` committed what Terraform had written as version %d: re-plan", end.Run, end.Serial)
	case engine.CauseApplyLeaseExpired:
		s := fmt.Sprintf("apply run %s lost its lease before it committed (holder %s stopped renewing; its lease ran out at %s)", end.Run, end.Holder, leaseTime(end.LeaseEnd))
		if len(end.Fenced) > 0 { // the apply run's own end says whether the fence still stands
			s = fmt.Sprintf("apply run %s: lease expired mid-apply (fenced): holder %s stopped renewing while Terraform ran; its lease ran out at %s", end.Run, end.Holder, leaseTime(end.LeaseEnd))
		}
		if end.Recoverable {
			return s + "; " + recoverHint(end.Run, cm) + ", then re-plan"
		}
		return s + ": Terraform may have changed infrastructure; re-plan"
	case engine.CauseSuperseded:
		return supersededText(end)
	case engine.CauseDiscarded:
		return discardWords(end)
	case engine.CauseValidationChanged:
		return fmt.Sprintf("%s: the terraform lane's plan %s of the whole configuration against head %d plans something else for %s than native-lane plan %s; review plan %s and apply it",
			engine.ErrValidationChanged, end.Run, end.Serial, abbreviate(replanFactsOf(end).Addresses, 8), end.Plan, end.Run)
	case engine.CauseValidationPassed:
		return fmt.Sprintf("validation re-plan for apply run %s: native intent unchanged; native-lane plan %s was applied", end.Run, end.Plan)
	case engine.CauseReplanChecked:
		return fmt.Sprintf("re-check for apply run %s: intent unchanged; the reviewed plan %s goes ahead", end.Run, end.Plan)
	case engine.CauseReplanApplied:
		return fmt.Sprintf("applied by apply run %s in place of the reviewed plan %s, whose plan input had changed (intent unchanged): version %d", end.Run, end.Plan, end.Serial)
	case engine.CauseReplanReverts:
		return "not applicable: it would revert changes of newer versions to what plan " + end.Plan + " reads"
	}
	return string(end.Cause)
}

// supersededText says what superseded a plan: "superseded by a newer plan
// of acme/infra#42 at 0123abc", "acme/infra#42 was closed without applying
// it", "the push at 0123abc no longer touches project b", "project b is not
// in kl.yaml at 0123abc any more", or the caller's own words.
func supersededText(end *engine.End) string {
	switch end.Superseded {
	case engine.SupersededByNewerPlan:
		return fmt.Sprintf("superseded by a newer plan of %s at %s", end.PR, shortSHA(end.Commit))
	case engine.SupersededByClosedPR:
		return fmt.Sprintf("%s was closed without applying it", end.PR)
	case engine.SupersededByUntouched:
		return fmt.Sprintf("the push at %s no longer touches project %s", shortSHA(end.Commit), end.Project)
	case engine.SupersededByRemoved:
		return fmt.Sprintf("project %s is not in kl.yaml at %s any more", end.Project, shortSHA(end.Commit))
	}
	return orWords(end.Why, "something newer replaced it")
}

// interruptedText says where a run was cancelled and what became of it:
// while waiting or planning (nothing applied), before Terraform ran, or
// during a Terraform command — then whether a version holds what it
// wrote (End.Serial) — with the step it stopped in, when there was one.
func interruptedText(end *engine.End) string {
	detail := interruptedDetail(end.Then)
	switch end.Phase {
	case engine.PhaseWaiting:
		return "interrupted while waiting for reservations"
	case engine.PhasePlanning:
		return "interrupted while planning" + detail
	case engine.PhaseApplying:
		return "interrupted before Terraform ran: nothing applied, nothing committed" + detail
	}
	command := "apply"
	if end.Terraform != nil && end.Terraform.Command != "" {
		command = end.Terraform.Command
	}
	switch {
	case killedEnd(end):
		return "interrupted during terraform " + command + ", which did not stop in time and was killed: nothing committed, and what it did is not known (its write set is fenced)"
	case end.Serial > 0:
		return "interrupted during terraform " + command + ": committed what Terraform wrote"
	case end.Then != nil:
		return "interrupted during terraform " + command + ": nothing committed" + detail
	}
	return "interrupted during terraform " + command + " before it changed anything: nothing committed"
}

// killedEnd reports whether end is an interruption whose Terraform was
// killed (engine.TerraformFailure.Killed).
func killedEnd(end *engine.End) bool {
	return end != nil && end.Terraform != nil && end.Terraform.Killed
}

// interruptedDetail names what an interrupted run was doing, from the
// failure the cancellation caused: " (terraform init)", " (storing
// plan.tfplan)"; "" when it says nothing more.
func interruptedDetail(then *engine.End) string {
	switch {
	case then == nil:
		return ""
	case then.Terraform != nil && then.Terraform.Command != "":
		return " (terraform " + then.Terraform.Command + ")"
	case then.Cause == engine.CauseFailed:
		if w := stepWords(then); w != "" {
			return " (" + w + ")"
		}
	}
	return ""
}

// discardWords: "discarded by ACTOR[: WHY]".
func discardWords(end *engine.End) string {
	s := "discarded by " + end.By
	if end.Why != "" {
		s += ": " + end.Why
	}
	return s
}

// fencedEndText is the end of apply run id whose lease ran out while its
// Terraform ran (ADR 0035): "lease expired mid-apply (fenced): …", what stays
// fenced, and the two ways to lift it.
func fencedEndText(id string, end *engine.End, cm *Commands) string {
	s := "lease expired mid-apply (fenced)"
	switch {
	case killedEnd(end.Then):
		// The holder lived: it gave the lease up once its Terraform was
		// killed (engine fenceKilled, ADR 0043).
		how := "was killed (SIGKILL)"
		if end.Then.Cause == engine.CauseInterrupted {
			how = "did not stop in time after an interrupt and was killed"
		}
		s += fmt.Sprintf(": Terraform %s, so its holder %s gave up the lease", how, end.Holder)
		if !end.TerraformStarted.IsZero() {
			s += " (Terraform started " + leaseTime(end.TerraformStarted) + ")"
		}
	case end.Holder != (engine.Holder{}):
		s += fmt.Sprintf(": its holder %s stopped renewing while Terraform ran", end.Holder)
		if !end.TerraformStarted.IsZero() {
			s += " (started " + leaseTime(end.TerraformStarted) + ")"
		}
		if !end.LeaseEnd.IsZero() {
			s += "; its lease ran out at " + leaseTime(end.LeaseEnd)
		}
	}
	fenced := abbreviate(end.Fenced.Strings(), 8)
	switch end.Lifted {
	case "":
		verb, them := "stay", "them"
		if len(end.Fenced) == 1 {
			verb, them = "stays", "it"
		}
		return fmt.Sprintf("%s; %s %s fenced — no other apply may write or read %s — until %s", s, fenced, verb, them, liftHint(id, ownPR(cm), true, cm))
	case engine.LiftRecovered:
		return fmt.Sprintf("%s; the fence on %s was lifted by its recovery", s, fenced)
	case engine.LiftUnfenced:
		return fmt.Sprintf("%s; the fence on %s was lifted without a commit (its fence-lifted marker says by whom and why): what its Terraform did there is in no version", s, fenced)
	}
	return fmt.Sprintf("%s; the fence on %s was lifted", s, fenced)
}

// liftHint is how the fence of apply run id is lifted (ADR 0035): recover
// what its Terraform wrote, or, once the real objects are checked,
// unfence. pr is the run's pull request (nil: made with kl outside any);
// self says it is the view's own run; cm nil names kl's commands.
func liftHint(id string, pr *engine.PullRequest, self bool, cm *Commands) string {
	c := command{verb: verbRecover, run: id, pr: pr, self: self}
	u := c
	u.verb = verbUnfence
	return commandText(recoverCommand(id), c, cm) + " commits what its Terraform last wrote, or, after checking the real objects, " +
		commandText(unfenceCommand(id), u, cm)
}

// fencedText is the refusal of an apply whose write or read set meets
// fences: each fenced blocker, when its Terraform started, what it fences
// and how to lift it; then the live blockers, if any.
func fencedText(bs []engine.Blocker, cm *Commands) string {
	var parts, live []string
	for _, b := range bs {
		if !b.Fenced {
			live = append(live, blockersText([]engine.Blocker{b}))
			continue
		}
		who := "run " + b.Run
		if b.PR != nil {
			who += " (" + b.PR.String() + ")"
		}
		if b.Backend != nil {
			// A backend lock whose lease ran out (ADR 0056): nobody died.
			writes := 0
			if b.Lock != nil {
				writes = b.Lock.Writes
			}
			parts = append(parts, fmt.Sprintf("%s fences %s: its lease (KL_BACKEND_LOCK_TTL) ran out without an UNLOCK, so what the real objects are is unknown; %s",
				blockerLockText(b), abbreviate(b.Addresses.Strings(), 8), lockLift(b.Run, writes)))
			continue
		}
		started := ""
		if !b.TerraformStarted.IsZero() {
			started = " at " + leaseTime(b.TerraformStarted)
		}
		parts = append(parts, fmt.Sprintf("%s fences %s: its holder died while its Terraform ran (started%s), so what the real objects are is unknown; %s",
			who, abbreviate(b.Addresses.Strings(), 8), orWords(started, " earlier"), liftHint(b.Run, b.PR, false, cm)))
	}
	s := "fenced: " + strings.Join(parts, "; ")
	if len(live) > 0 {
		s += "; also " + strings.Join(live, "; ")
	}
	return s
}

// liftWords is liftHint as a sentence of command spans, for a run of pull
// request pr (nil: made with kl) that is not the view's own.
func liftWords(id string, pr *engine.PullRequest) sentence {
	return words(cmdSpan(recoverCommand(id), command{verb: verbRecover, run: id, pr: pr}),
		" commits what its Terraform last wrote, or, after checking the real objects, ",
		cmdSpan(unfenceCommand(id), command{verb: verbUnfence, run: id, pr: pr}))
}

// recoverHint is what the end of apply run run, which stopped without
// committing after Terraform started, says to do; run is the view's own
// (of cm's pull request; cm nil names kl's command).
func recoverHint(run string, cm *Commands) string {
	c := command{verb: verbRecover, run: run, pr: ownPR(cm), self: true}
	return "Terraform had started applying: " + commandText(recoverCommand(run), c, cm) + " commits what it last wrote"
}

// ownPR is the pull request of a view's own run: the one the view is read
// on (cm), nil for kl's views.
func ownPR(cm *Commands) *engine.PullRequest {
	if cm == nil {
		return nil
	}
	if cm.Of != nil {
		return cm.Of
	}
	return cm.PR
}

// leaseTime renders a lease end: UTC, to the second.
func leaseTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// phaseWords says what a run was doing.
var phaseWords = map[engine.Phase]string{
	engine.PhasePlanning:       "planning",
	engine.PhaseWaiting:        "waiting for reservations",
	engine.PhaseApplying:       "applying",
	engine.PhaseTerraformApply: "terraform apply ran",
}

func leaseExpiredText(id string, end *engine.End, cm *Commands) string {
	if len(end.Fenced) > 0 {
		return fencedEndText(id, end, cm)
	}
	var s string
	switch {
	case end.Holder == (engine.Holder{}) && end.LeaseEnd.IsZero():
	case end.Phase == "":
		s = fmt.Sprintf("its holder %s stopped renewing: the lease on its reservations ran out at %s", end.Holder, leaseTime(end.LeaseEnd))
	default:
		s = fmt.Sprintf("its holder %s stopped renewing while %s: its lease ran out at %s", end.Holder, phaseWords[end.Phase], leaseTime(end.LeaseEnd))
	}
	if end.Recoverable {
		if s != "" {
			s += "; "
		}
		s += recoverHint(id, cm)
	}
	return orWords(s, "its holder stopped renewing: its lease ran out")
}

// recoveredMeanwhileText is the end of a run whose holder came back after
// `kl run recover` committed its checkpoint (ADR 0071): its result was not
// committed, where what Terraform wrote last is kept, and the command that
// commits it — or that a recovery committed it since.
func recoveredMeanwhileText(id string, end *engine.End, cm *Commands) string {
	s := fmt.Sprintf("result not committed: its holder %s came back after `kl run recover` had committed version %d from Terraform's checkpoint (its lease had run out)", end.Holder, end.Serial)
	what := "Terraform finished; its final state"
	if !end.TerraformDone {
		what = "what Terraform wrote last"
		if t := endText(id, end.Then, cm); t != "" {
			what = "Terraform then stopped (" + t + "); what it wrote last"
		}
	}
	switch {
	case end.Artifact == "":
		return s + "; " + what + " could not be stored: check the real objects, then re-plan"
	case end.LateSerial != 0:
		return fmt.Sprintf("%s; %s was committed by a second `kl run recover` as version %d", s, what, end.LateSerial)
	case !end.Recoverable:
		return s + "; " + what + " is kept as artifact " + end.Artifact
	}
	c := command{verb: verbRecover, run: id, pr: ownPR(cm), self: true}
	return fmt.Sprintf("%s; %s is kept as artifact %s: %s commits what it adds to version %d", s, what, end.Artifact, commandText(recoverCommand(id), c, cm), end.Serial)
}

func leaseLostText(id string, end *engine.End, cm *Commands) string {
	s := "lease lost before commit: merged only addresses unchanged at the head since the plan and not held by another run"
	if end.TerraformDone {
		s = "lease lost before commit: Terraform finished, but the reservations had expired; merged only addresses unchanged at the head since the plan and not held by another run"
	}
	if t := endText(id, end.Then, cm); t != "" {
		s += "; " + t
	}
	if len(end.Lost) > 0 {
		s += "; " + lostText(end.Lost)
	}
	if end.NoChange {
		s += fmt.Sprintf("; version %d changes nothing: it records that this apply ran and where its changes went", end.Serial)
	}
	if len(end.InputsChanged) > 0 {
		s += "; " + inputsChangedText(end.InputsChanged)
	}
	return s
}

// inputsChangedText puts engine.End.InputsChanged into words (ADR 0072):
// "meanwhile version 7 (run X) changed terraform_data.x, a plan input:
// Terraform applied values computed from the older head — re-plan to
// check them".
func inputsChangedText(entries []engine.SincePlanEntry) string {
	return "meanwhile " + engine.InputsChangedText(entries) + ": Terraform applied values computed from the older head — re-plan to check them"
}

// lostText puts lost writes into words: "the head kept terraform_data.a
// (version 7, run X, changed it while this run's lease had lapsed): what
// this apply did to it is in no version — check the real object, then
// import or remove it".
func lostText(lost []engine.LostWrite) string {
	var parts []string
	for _, l := range lost {
		switch {
		case l.Serial > 0 && l.Run != "":
			parts = append(parts, fmt.Sprintf("%s (version %d, run %s, changed it while this run's lease had lapsed)", l.Address, l.Serial, l.Run))
		case l.Serial > 0:
			parts = append(parts, fmt.Sprintf("%s (version %d changed it while this run's lease had lapsed)", l.Address, l.Serial))
		case l.Run != "":
			parts = append(parts, fmt.Sprintf("%s (run %s holds it)", l.Address, l.Run))
		default:
			parts = append(parts, string(l.Address))
		}
	}
	what := "it"
	if len(lost) > 1 {
		what = "them"
	}
	return fmt.Sprintf("the head kept %s: what this apply did to %s is in no version — check the real object, then import or remove it",
		strings.Join(parts, ", "), what)
}

// stepWords says what Kilolock was doing at each step (engine.Step).
func stepWords(end *engine.End) string {
	switch end.Step {
	case engine.StepRecordNoChanges:
		return "recording the end of an apply without changes"
	case engine.StepRecordAllowed:
		return "recording allowed-because"
	case engine.StepReadSincePlan:
		return "reading since-plan versions"
	case engine.StepRecordPreflight:
		return "recording preflight"
	case engine.StepReadSnapshot:
		return fmt.Sprintf("reading snapshot %d", end.Serial)
	case engine.StepParseSnapshot:
		return fmt.Sprintf("parsing snapshot %d", end.Serial)
	case engine.StepRecordApplyStart:
		return "recording the start of terraform apply"
	case engine.StepReadResult:
		return "reading what Terraform wrote"
	case engine.StepParseResult:
		if end.Artifact == "" {
			return "terraform wrote an unreadable state (storing it failed too)"
		}
		return fmt.Sprintf("terraform wrote an unreadable state (kept as artifact %s)", end.Artifact)
	case engine.StepReadChanged:
		return "reading changed addresses"
	case engine.StepReadTainted:
		return "reading tainted addresses"
	case engine.StepCommit:
		if end.Artifact == "" {
			return "committing (storing Terraform's result failed too: what it changed may be in no version; check the real objects)"
		}
		return fmt.Sprintf("committing (Terraform's result is kept as artifact %s)", end.Artifact)
	case engine.StepRecordReservations:
		return "recording reservations"
	case engine.StepAcquire:
		return "acquiring reservations"
	case engine.StepRecordWait:
		return "recording wait"
	case engine.StepReadHead:
		return "reading head for re-plan"
	case engine.StepCreateReplan:
		return "creating re-plan run"
	case engine.StepReplan:
		return fmt.Sprintf("re-plan %s failed", end.Run)
	case engine.StepStoreReplan:
		return "storing re-plan"
	case engine.StepClaimReplan:
		return fmt.Sprintf("claiming re-plan %s", end.Run)
	case engine.StepStoreArtifact:
		return "storing " + end.Artifact
	case engine.StepReadArtifact:
		return "reading " + end.Artifact
	case engine.StepRecordEnd:
		return "recording the end of the run"
	}
	return "" // plan, read-state, and steps of a newer binary: the error says it
}

func failedText(end *engine.End) string {
	if end.Step == engine.StepCheckLineage {
		return fmt.Sprintf("plan made against lineage %s, state has %s", end.Lineage, end.StateLineage)
	}
	err := end.Err
	if err == "" && end.Terraform != nil {
		err = terraformText(end.Terraform)
	}
	w := stepWords(end)
	switch {
	case w != "" && err != "":
		return w + ": " + err
	case w != "":
		return w + " failed"
	}
	return orWords(err, "Kilolock failed (step "+orWords(string(end.Step), "unknown")+")")
}

// terraformText renders a failed Terraform command as Terraform's adapter
// does: "terraform COMMAND: DIAGNOSTIC; …" (or its stderr), then ":
// CAUSE" when the cause adds to them.
func terraformText(f *engine.TerraformFailure) string {
	if f == nil {
		return "terraform failed"
	}
	return "terraform " + f.Command + terraformDetail(f, ": ")
}

// terraformDetail is what Terraform said, each part after sep: its
// diagnostics, else its stderr; and the cause when it adds to them.
func terraformDetail(f *engine.TerraformFailure, sep string) string {
	var b strings.Builder
	for i, d := range f.Diagnostics {
		if i == 0 {
			b.WriteString(sep)
		} else {
			b.WriteString("; ")
		}
		b.WriteString(d.String())
	}
	if len(f.Diagnostics) == 0 && f.Stderr != "" {
		b.WriteString(sep + f.Stderr)
	}
	if f.Cause != "" {
		b.WriteString(sep + f.Cause)
	}
	return b.String()
}

// endGist is the most useful part of an end for a table, at most n runes:
// what Terraform said (its diagnostics, else its stderr or the cause), or
// the error a step failed with — not the context around them.
func endGist(id string, end *engine.End, n int) string {
	if end == nil {
		return ""
	}
	s := EndText(id, end)
	switch {
	case end.Legacy != "":
	case end.Cause == engine.CauseTerraformFailed && end.Terraform != nil:
		s = strings.TrimPrefix(terraformDetail(end.Terraform, "; "), "; ")
	case end.Cause == engine.CauseFailed && end.Terraform != nil:
		s = strings.TrimPrefix(terraformDetail(end.Terraform, "; "), "; ")
	case end.Cause == engine.CauseFailed && end.Step != engine.StepCheckLineage && end.Err != "":
		s = end.Err // an error of a kind carries no label in its text (engine.Errorf)
	}
	if strings.TrimSpace(s) == "" {
		s = EndText(id, end)
	}
	return clip(strings.TrimSpace(s), n)
}

// endShort is the short form of an end for a table row of the run: what
// stopped it, in a few words ("reservations conflict", "terraform apply",
// "plan is stale", "interrupted while waiting for reservations"), at most
// 60 runes.
func endShort(id string, end *engine.End) string {
	if end == nil {
		return ""
	}
	var s string
	switch end.Cause {
	case engine.CauseRefusedConflict:
		s = conflictWords(end)
	case engine.CauseRefusedFenced:
		s = "fenced by a crashed apply"
		for _, b := range end.Blockers {
			if b.Fenced {
				s = "fenced by crashed apply " + b.Run
				break
			}
		}
	case engine.CauseRefusedStale:
		s = "plan is stale"
	case engine.CauseBehindHead:
		s = engine.ErrBehindHead.Error()
	case engine.CauseIntentChanged:
		s = fmt.Sprintf("re-plan %s against head %d plans something else for %s", end.Run, end.Serial, abbreviate(replanFactsOf(end).Addresses, 8))
	case engine.CauseOutsideFootprint:
		s = "re-plan changes outside the reviewed footprint"
	case engine.CauseValidationChanged:
		s = engine.ErrValidationChanged.Error()
	case engine.CauseBeyondReservations:
		s = "re-plan needs reservations beyond those held"
	case engine.CauseInterrupted:
		s = map[engine.Phase]string{
			engine.PhaseWaiting:  "interrupted while waiting for reservations",
			engine.PhasePlanning: "interrupted while planning",
			engine.PhaseApplying: "interrupted before Terraform ran",
		}[end.Phase]
		if s == "" {
			s = "interrupted during terraform apply"
		}
	case engine.CauseTerraformFailed:
		s = "terraform failed"
		if end.Terraform != nil {
			s = "terraform " + end.Terraform.Command + " failed"
		}
	case engine.CauseFailed:
		if s = stepWords(end); s == "" {
			s = endGist(id, end, 60)
		}
	case engine.CauseLeaseExpired:
		s = "its holder " + end.Holder.String() + " stopped renewing"
		switch {
		case len(end.Fenced) > 0:
			s = "lease expired mid-apply (fenced)"
		case end.Holder == (engine.Holder{}):
			s = "lease expired"
		}
	case engine.CauseLeaseLost:
		s = "lease lost before commit"
	case engine.CauseRecoveredMeanwhile:
		s = "recovered meanwhile: result not committed"
	case engine.CauseRefusedClaim:
		s = "claiming plan " + end.Plan
	default:
		s = endGist(id, end, 60)
	}
	return clip(s, 60)
}

// reservationsText lists reservations as "write terraform_data.x, read
// module.net.*", at most n, then "and K more".
func reservationsText(rs []engine.Reservation, n int) string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		parts = append(parts, string(r.Mode)+" "+string(r.Address))
	}
	return abbreviate(parts, n)
}

// replanFactsOf is end's re-plan facts (empty when it has none).
func replanFactsOf(end *engine.End) engine.ReplanFacts {
	if end.Replan == nil {
		return engine.ReplanFacts{}
	}
	return *end.Replan
}

// markerFactsText is the words of a marker without an end, from its
// facts: a failed staleness check's class, a deviation, a recovery, a
// re-plan that found the intent unchanged ("" for the others).
func markerFactsText(m engine.Marker) string {
	switch m.Kind {
	case engine.MarkerStalenessFailed:
		return m.Class.Label()
	case engine.MarkerDeviation:
		if m.Deviation != nil {
			return deviationText(m.Deviation)
		}
	case engine.MarkerRecovered:
		s := fmt.Sprintf("committed version %d from the last state Terraform wrote (artifact %s)", m.Serial, m.Extra["artifact"])
		if len(m.Addresses) > 0 {
			s += "; kept at the head, which changed them since the plan or another run holds them: " + strings.Join(m.Addresses.Strings(), ", ")
		}
		return s + uncheckedHolderWords(m).plain()
	case engine.MarkerReplanned:
		if m.IntentChanged != nil && !*m.IntentChanged {
			var outside []string
			if o := m.Extra["outside"]; o != "" {
				outside = strings.Split(o, ",") // the list the engine stored (outsideExtra)
			}
			return fmt.Sprintf("plan input changed in %s; re-plan %s against head %d plans the same for the reviewed write set and changes nothing this plan reads: applying the reviewed plan%s",
				versionsText(m.Serials), m.Other, m.Serial, outsideText(outside))
		}
	}
	return ""
}

// deviationText lists what a commit did otherwise than planned.
func deviationText(d *engine.Deviation) string {
	var parts []string
	if len(d.Unplanned) > 0 {
		parts = append(parts, "changed but not planned: "+strings.Join(d.Unplanned.Strings(), ", "))
	}
	if len(d.Unchanged) > 0 {
		parts = append(parts, "planned but not changed: "+strings.Join(d.Unchanged.Strings(), ", "))
	}
	if len(d.Kept) > 0 {
		parts = append(parts, "not merged, the head changed them since the plan: "+strings.Join(d.Kept.Strings(), ", "))
	}
	if len(d.Tainted) > 0 {
		parts = append(parts, "tainted (created but not finished; the next plan replaces them): "+strings.Join(d.Tainted.Strings(), ", "))
	}
	if len(d.Overwritten) > 0 {
		parts = append(parts, "written over a change the head made since the plan (reservations lapsed?): "+strings.Join(d.Overwritten.Strings(), ", "))
	}
	return strings.Join(parts, "; ")
}

// blockersText: "run X (PR) holds A, B; run Y holds C".
func blockersText(bs []engine.Blocker) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		who := "run " + b.Run
		if b.PR != nil {
			who += " (" + b.PR.String() + ")"
		}
		if b.Backend != nil {
			who = blockerLockText(b) // the whole state, under Terraform's lock (ADR 0056)
		}
		parts[i] = fmt.Sprintf("%s holds %s", who, strings.Join(b.Addresses.Strings(), ", "))
	}
	return strings.Join(parts, "; ")
}

// versionsText: "version 5", "versions 5, 6".
func versionsText(serials []int64) string {
	parts := make([]string, len(serials))
	for i, v := range serials {
		parts[i] = fmt.Sprint(v)
	}
	if len(parts) == 1 {
		return "version " + parts[0]
	}
	return "versions " + strings.Join(parts, ", ")
}

// outsideText: what a re-plan changes outside the reviewed footprint.
func outsideText(outside []string) string {
	if len(outside) == 0 {
		return ""
	}
	return fmt.Sprintf("; it also changes %d instance(s) outside this plan's footprint (%s), where the configuration differs from the head: not applied", len(outside), abbreviate(outside, 5))
}

// abbreviate joins up to n items and says how many more there are.
func abbreviate(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
}

// ApplyTitle is the title of an ended apply's `kl apply · P` check run:
// "Applied: version 5 (planned at serial 3, head was 4; snapshot-merge,
// exact)" (versionBrief); for a crashed apply recovered since (a
// "recovered" marker), "Recovered: version 6 (…); lease expired mid-apply
// (fenced)"; or its status and end, "Refused: …", at most 120 runes of the
// end.
func ApplyTitle(s *engine.RunStory) string {
	switch {
	case s.Run.Status == engine.StatusApplied && s.Version != nil:
		return "Applied: " + versionBrief(s.Version, s.Markers)
	case s.Version != nil && lastOf(s.Markers, s.Run.ID, engine.MarkerRecovered) != nil:
		// A crashed apply `kl run recover` committed (ADR 0042): the
		// version first, then how it had ended.
		return "Recovered: " + versionBrief(s.Version, s.Markers) + "; " + endShort(s.Run.ID, s.Run.End)
	case s.Run.Status == engine.StatusRefused:
		return "Refused: " + clip(EndText(s.Run.ID, s.Run.End), 120)
	}
	status := string(s.Run.Status)
	return strings.ToUpper(status[:1]) + status[1:] + ": " + clip(EndText(s.Run.ID, s.Run.End), 120)
}

// markerText is the words of a marker's end or, for one stored before ends
// were typed, its reason as stored; a superseding marker says so
// ("superseded: WHY"), as it did.
func markerText(m engine.Marker) string {
	if m.End == nil {
		if m.Reason != "" {
			return m.Reason
		}
		return markerFactsText(m)
	}
	switch {
	case m.Kind == engine.MarkerFailed && m.End.Cause == engine.CauseSuperseded:
		return "superseded: " + supersededText(m.End)
	case m.Kind == engine.MarkerApplied && m.End.Cause == engine.CauseNothingToApply:
		return "the plan has no changes: Terraform was not run"
	case m.Kind == engine.MarkerApplied && m.End.Cause == engine.CauseInterrupted:
		// Written before the commit: how Terraform stopped; the
		// committed marker says what was kept.
		return "interrupted during terraform apply"
	case m.Kind == engine.MarkerLeaseExpired && m.Lock != nil:
		return lockLapsedMarkerText(m)
	}
	return EndText(m.Run, m.End)
}
