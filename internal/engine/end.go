package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Cause is why a run ended as it did — or, for an apply still waiting, why it
// waits (Run.End). The set is closed: every end the engine or the store writes
// is one of these, with the facts a sentence about it needs in End's fields;
// internal/report alone turns an End into words. A cause this binary does not
// know (written by a newer one) is shown by its name.
type Cause string

// Causes of apply runs.
const (
	// CauseApplied: committed version Run.CommittedSerial.
	CauseApplied Cause = "applied"
	// CauseNothingToApply: the plan has no changes; Terraform was not run
	// and nothing was committed.
	CauseNothingToApply Cause = "nothing-to-apply"
	// CauseWaiting: open, waiting for Blockers to release what it needs.
	CauseWaiting Cause = "waiting"
	// CauseRefusedConflict: Blockers held overlapping reservations (after
	// waiting Waited, when it waited).
	CauseRefusedConflict Cause = "refused-conflict"
	// CauseRefusedFenced: Blockers include fenced runs (Blocker.Fenced):
	// applies whose holders died while their Terraform ran hold fences on
	// what this plan writes or reads. Refused at once — waiting cannot help:
	// only `kl run recover` or `kl run unfence` of the blocker lifts a fence
	// (ADR 0035).
	CauseRefusedFenced Cause = "refused-fenced"
	// CauseRefusedStale: since-plan versions Stale changed the write set
	// (or, Strict, the read set) of plan Plan (ADR D3).
	CauseRefusedStale Cause = "refused-stale"
	// CauseIntentChanged: re-plan Run against head Serial plans something
	// else for Replan.Addresses (docs/design.md apply step 3).
	CauseIntentChanged Cause = "intent-changed"
	// CauseBehindHead: re-plan Run against head Serial would also change
	// Replan.Addresses, which the plan reads: the configuration is behind
	// the head there.
	CauseBehindHead Cause = "behind-head"
	// CauseOutsideFootprint: re-plan Run against head Serial would also
	// change Replan.Addresses, outside the reviewed footprint: applying the
	// re-plan would apply those changes too, which nobody reviewed; it is
	// left open for review (docs/design.md apply step 3).
	CauseOutsideFootprint Cause = "outside-footprint"
	// CauseBeyondReservations: re-plan Run against head Serial needs
	// Replan.Unreserved, reservations the apply does not hold (its reviewed
	// plan's): applying it could write or read what another run holds; it
	// is left open for review.
	CauseBeyondReservations Cause = "beyond-reservations"
	// CauseRefusedClaim: plan Plan could not be claimed for this apply
	// (another apply claimed it first); Err says what the store said.
	CauseRefusedClaim Cause = "refused-claim"
	// CauseInterrupted: cancelled (Ctrl-C, SIGTERM) while Phase; Serial is
	// the version that holds what Terraform wrote (0: nothing committed).
	CauseInterrupted Cause = "interrupted"
	// CauseTerraformFailed: a Terraform command failed (Terraform).
	CauseTerraformFailed Cause = "terraform-failed"
	// CauseFailed: a step of Kilolock's own failed (Step, Err).
	CauseFailed Cause = "failed"
	// CauseLeaseExpired: the holder Holder stopped renewing; its lease ran
	// out at LeaseEnd — on its reservations (Phase "") or on the run itself
	// while Phase. Recoverable: Terraform had started applying (at
	// TerraformStarted), and `kl run recover` commits what it last wrote.
	// Fenced: the write reservations that stayed as fences (ADR 0035) —
	// "lease expired mid-apply (fenced)".
	CauseLeaseExpired Cause = "lease-expired"
	// CauseLeaseLost: the reservations expired before the commit; version
	// Serial holds only what the head had not changed since the plan and no
	// other run held (Lost names the rest). TerraformDone: Terraform itself
	// finished; NoChange: the version changes nothing. Then is how
	// Terraform ended when it did not finish.
	CauseLeaseLost Cause = "lease-lost"
	// CauseRecoveredMeanwhile: the holder came back after `kl run recover`
	// had committed version Serial from Terraform's checkpoint (its lease
	// had run out, ADR 0071): what Terraform wrote last — its final state
	// when TerraformDone, else Then says how it ended — was not committed
	// and is kept as artifact Artifact; Recoverable: `kl run recover`
	// commits what it adds to the recovered version — as LateSerial, once
	// it has.
	CauseRecoveredMeanwhile Cause = "recovered-meanwhile"
)

// Causes of plan runs.
const (
	// CauseApplyEnded: apply run Run ended the plan (stale, superseded or
	// failed) as Apply says.
	CauseApplyEnded Cause = "apply-ended"
	// CauseApplyPartial: apply run Run failed part-way; its partial result
	// is version Serial.
	CauseApplyPartial Cause = "apply-partial"
	// CauseApplyLeaseLost: apply run Run lost its lease before its commit;
	// version Serial holds what the head could take.
	CauseApplyLeaseLost Cause = "apply-lease-lost"
	// CauseApplyRecovered: apply run Run stopped part-way and `kl run
	// recover` committed what Terraform had written as version Serial.
	CauseApplyRecovered Cause = "apply-recovered"
	// CauseApplyLeaseExpired: apply run Run's holder Holder stopped
	// renewing (lease end LeaseEnd) after it reserved; Recoverable: its
	// Terraform had started; Fenced: what it left fenced.
	CauseApplyLeaseExpired Cause = "apply-lease-expired"
	// CauseSuperseded: something replaced the plan: Superseded says what
	// (a newer plan of pull request PR at commit Commit, or PR closed
	// without applying it); Why is the caller's own words, when it gave
	// some instead.
	CauseSuperseded Cause = "superseded"
	// CauseDiscarded: By closed it with `kl run discard`, saying Why.
	CauseDiscarded Cause = "discarded"
	// CauseReplanChecked: a re-plan made for apply run Run found the
	// intent of reviewed plan Plan unchanged, and Plan was applied to its
	// own snapshot. Only stored by Kilolock before issue 10 §2: an
	// unchanged re-plan is now what is applied (CauseReplanApplied).
	CauseReplanChecked Cause = "replan-checked"
	// CauseReplanApplied: apply run Run applied this re-plan in place of
	// the reviewed plan Plan, whose inputs had changed (its intent was
	// unchanged against the head); version Serial holds the result.
	CauseReplanApplied Cause = "replan-applied"
	// CauseReplanReverts: a re-plan that would revert newer versions'
	// changes to what plan Plan reads: not applicable.
	CauseReplanReverts Cause = "replan-reverts"
)

// SupersedeReason is what superseded an open plan (End.Superseded).
type SupersedeReason string

// Supersede reasons (klbot's).
const (
	// SupersededByNewerPlan: a newer plan of the plan's pull request, at
	// commit End.Commit, replaced it.
	SupersededByNewerPlan SupersedeReason = "newer-plan"
	// SupersededByClosedPR: its pull request was closed without applying it.
	SupersededByClosedPR SupersedeReason = "pr-closed"
	// SupersededByUntouched: a push to its pull request, at commit
	// End.Commit, no longer touches its project (End.Project, a kl.yaml
	// project name): nothing replaced the plan; it is closed.
	SupersededByUntouched SupersedeReason = "untouched"
	// SupersededByRemoved: its project (End.Project) is not in kl.yaml at
	// the pull request's new head End.Commit any more.
	SupersededByRemoved SupersedeReason = "project-removed"
)

// Phase is what a run was doing when it was interrupted or its lease ran out.
type Phase string

// Phases.
const (
	PhasePlanning       Phase = "planning"
	PhaseWaiting        Phase = "waiting"         // for reservations
	PhaseApplying       Phase = "applying"        // an apply in progress, before or after Terraform
	PhaseTerraformApply Phase = "terraform-apply" // Terraform was applying
)

// Step is a step of Kilolock's own whose failure ended a run (CauseFailed).
// Serial, Artifact or Run carry the step's object where it has one.
type Step string

// Steps.
const (
	StepRecordNoChanges     Step = "record-no-changes"
	StepRecordAllowed       Step = "record-allowed-because"
	StepReadSincePlan       Step = "read-since-plan"
	StepRecordPreflight     Step = "record-preflight"
	StepReadSnapshot        Step = "read-snapshot"  // Serial
	StepParseSnapshot       Step = "parse-snapshot" // Serial
	StepRecordApplyStart    Step = "record-apply-start"
	StepReadResult          Step = "read-result"  // Terraform returned nothing to read
	StepParseResult         Step = "parse-result" // Artifact keeps what Terraform wrote ("": storing it failed)
	StepReadChanged         Step = "read-changed"
	StepReadTainted         Step = "read-tainted"
	StepCommit              Step = "commit" // Artifact keeps what Terraform wrote ("": storing it failed)
	StepRecordReservations  Step = "record-reservations"
	StepAcquire             Step = "acquire"
	StepRecordWait          Step = "record-wait"
	StepReadState           Step = "read-state"
	StepReadHead            Step = "read-head"
	StepCreateReplan        Step = "create-replan"
	StepReplan              Step = "replan" // Run: the re-plan; Terraform when Terraform failed
	StepStoreReplan         Step = "store-replan"
	StepClaimReplan         Step = "claim-replan"   // Run: the re-plan
	StepStoreArtifact       Step = "store-artifact" // Artifact
	StepCheckLineage        Step = "check-lineage"  // Lineage (the plan's), StateLineage
	StepPlan                Step = "plan"           // planning failed outside Terraform's own commands
	StepRecordEnd           Step = "record-end"
	StepReadArtifact        Step = "read-artifact" // Artifact
	StepReadApplyCheckpoint Step = "read-checkpoint"
	StepRecordOperation     Step = "record-operation" // a day-2 operation's first marker (ADR 0055)
)

// End is how a run ended (Run.End), as facts: Cause, and the values its
// sentence needs. Which fields are set depends on Cause (see each Cause).
// Stored with the run; internal/report writes its words (terminal,
// Markdown, JSON). Legacy holds the English reason of a run stored before
// ends were typed, where the migration could not tell its cause.
type End struct {
	Cause Cause `json:"cause"`
	// Run is the other run the end names: the apply run that ended a plan,
	// the re-plan of an intent-changed or behind-head refusal, the re-plan
	// of a failed re-plan step.
	Run string `json:"run,omitempty"`
	// Plan is the plan the end is about: the stale or claimed plan, the
	// reviewed plan of a re-plan.
	Plan   string `json:"plan,omitempty"`
	Serial int64  `json:"serial,omitempty"`
	Phase  Phase  `json:"phase,omitempty"`
	Step   Step   `json:"step,omitempty"`
	// Err is the text of the error that ended the run (CauseFailed,
	// CauseRefusedClaim), as Go wrapped it; Kind classifies it by the
	// engine's sentinel it wraps, if any (errors.Is at the time).
	Err       string            `json:"error,omitempty"`
	Kind      ErrKind           `json:"error_kind,omitempty"`
	Terraform *TerraformFailure `json:"terraform,omitempty"`
	// Artifact names the run artifact a step read or wrote.
	Artifact     string `json:"artifact,omitempty"`
	Lineage      string `json:"lineage,omitempty"`
	StateLineage string `json:"state_lineage,omitempty"`
	// Lease ends.
	Holder      Holder    `json:"holder,omitzero"`
	LeaseEnd    time.Time `json:"lease_end,omitzero"`
	Recoverable bool      `json:"recoverable,omitempty"`
	// Fences (ADR 0035): the addresses a lapsed apply left fenced, and when
	// its Terraform started.
	// Lifted: how the fence was lifted since ("" while it stands).
	Fenced           AddressSet `json:"fenced,omitempty"`
	TerraformStarted time.Time  `json:"terraform_started,omitzero"`
	Lifted           Lift       `json:"lifted,omitempty"`
	// Reservation conflicts.
	Blockers []Blocker `json:"blockers,omitempty"`
	Waited   Duration  `json:"waited,omitempty"`
	// Stale refusals.
	Stale  []SincePlanEntry `json:"stale,omitempty"`
	Strict bool             `json:"strict,omitempty"`
	// Re-plan refusals.
	Replan *ReplanFacts `json:"replan,omitempty"`
	// Lease-lost commits.
	Lost          []LostWrite `json:"lost,omitempty"`
	TerraformDone bool        `json:"terraform_done,omitempty"`
	NoChange      bool        `json:"no_change,omitempty"`
	// InputsChanged: the versions committed after the snapshot Terraform
	// applied to that changed the applied plan's footprint while the
	// run's lease had lapsed (ADR 0072; Deviation.InputsChanged).
	InputsChanged []SincePlanEntry `json:"inputs_changed,omitempty"`
	// LateSerial: the version a second recovery committed of a
	// CauseRecoveredMeanwhile run's late result (ADR 0071).
	LateSerial int64 `json:"late_serial,omitempty"`
	// Then is a second end that happened too: how Terraform ended in a
	// lease-lost commit; what ended the apply of a plan (CauseApplyEnded).
	Then *End `json:"then,omitempty"`
	// Discards and supersedes: who, and why in their words; what
	// superseded a plan, and the pull request and commit it names.
	By         string          `json:"by,omitempty"`
	Why        string          `json:"why,omitempty"`
	Superseded SupersedeReason `json:"superseded,omitempty"`
	PR         *PullRequest    `json:"pr,omitempty"`
	Commit     string          `json:"commit,omitempty"`
	Project    string          `json:"project,omitempty"` // SupersededByUntouched, SupersededByRemoved
	// Legacy is the reason text of a run stored before ends were typed.
	Legacy string `json:"legacy,omitempty"`
}

// ReplanFacts are what a re-plan refusal compared (CompareReplan): the
// differing instance addresses, the read-changed versions it went over,
// its changes outside the reviewed footprint, and the reservations it
// needs that the apply does not hold (CauseBeyondReservations).
type ReplanFacts struct {
	Addresses  []string      `json:"addresses"`
	Versions   []int64       `json:"versions"`
	Outside    []string      `json:"outside,omitempty"`
	Unreserved []Reservation `json:"unreserved,omitempty"`
}

// TerraformFailure is a failed Terraform command as a run's end keeps it
// (terraform-exec keeps exit errors typed; the adapter's error says it in
// these terms through TerraformFailer). Diagnostics are the error
// diagnostics of Terraform's -json UI stream; when there are none, Stderr is
// its cleaned stderr. Cause is the text of the cause when it adds to them
// (not Terraform's exit status alone).
type TerraformFailure struct {
	Command     string       `json:"command"` // init, plan, show, apply
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
	Stderr      string       `json:"stderr,omitempty"`
	Cause       string       `json:"cause,omitempty"`
	// Killed: Terraform did not exit by itself but was killed (SIGKILL),
	// after an interrupt it did not stop within its grace (klbot's
	// shutdown, ADR 0043) or by the system; what it last wrote may not
	// hold what it did.
	Killed bool `json:"killed,omitempty"`
}

// Diagnostic is one Terraform diagnostic (its -json "diagnostic" message):
// severity ("error", "warning"), Terraform's summary and detail, the
// resource instance it is about (Address, when Terraform names one) and
// where in the configuration: File and the range's start Line and Column,
// its end EndLine and EndColumn (1-based, as Terraform counts), and
// Context, the block it is in as Terraform names it (`resource
// "terraform_data" "a"`, `check "health"`; its snippet's context). The
// snippet's code and the values of its expressions are not kept: they can
// hold values. Withheld says the adapter dropped Detail because it could
// not tell which values to mask in it (ADR 0047).
type Diagnostic struct {
	Severity  string `json:"severity"`
	Summary   string `json:"summary"`
	Detail    string `json:"detail,omitempty"`
	Address   string `json:"address,omitempty"`
	File      string `json:"file,omitempty"`
	Line      int    `json:"line,omitempty"`
	Column    int    `json:"column,omitempty"`
	EndLine   int    `json:"end_line,omitempty"`
	EndColumn int    `json:"end_column,omitempty"`
	Context   string `json:"context,omitempty"`
	Withheld  bool   `json:"withheld,omitempty"`
}

// String renders Terraform's diagnostic as Terraform's own words with
// where it is: "summary: detail (address, file:line)".
func (d Diagnostic) String() string {
	s := strings.TrimSpace(d.Summary)
	if det := strings.TrimSpace(d.Detail); det != "" {
		s += ": " + det
	}
	var where []string
	if d.Address != "" {
		where = append(where, d.Address)
	}
	if d.File != "" {
		where = append(where, fmt.Sprintf("%s:%d", d.File, d.Line))
	}
	if len(where) > 0 {
		s += " (" + strings.Join(where, ", ") + ")"
	}
	return s
}

// TerraformFailer is implemented by the Terraform adapter's errors for a
// failed command; the engine finds it with errors.As.
type TerraformFailer interface {
	error
	TerraformFailure() *TerraformFailure
}

// ErrKind names the engine sentinel an error wraps (End.Kind).
type ErrKind string

// Error kinds.
const (
	KindInvalid   ErrKind = "invalid"
	KindNotFound  ErrKind = "not-found"
	KindConflict  ErrKind = "conflict"
	KindLeaseLost ErrKind = "lease-lost"
)

// Sentinel returns the sentinel error of k (nil for "").
func (k ErrKind) Sentinel() error {
	return map[ErrKind]error{KindInvalid: ErrInvalid, KindNotFound: ErrNotFound, KindConflict: ErrConflict, KindLeaseLost: ErrLeaseLost}[k]
}

// kindOf classifies err by the engine sentinel it wraps.
func kindOf(err error) ErrKind {
	for _, k := range []ErrKind{KindLeaseLost, KindInvalid, KindNotFound, KindConflict} {
		if errors.Is(err, k.Sentinel()) {
			return k
		}
	}
	return ""
}

// Failed is the end of a run whose step failed with err: a Terraform
// failure when err is one (TerraformFailer), else CauseFailed with err's
// text and kind.
func Failed(step Step, err error) *End {
	var tf TerraformFailer
	if errors.As(err, &tf) && (step == StepPlan || step == "") {
		return &End{Cause: CauseTerraformFailed, Terraform: tf.TerraformFailure()}
	}
	e := &End{Cause: CauseFailed, Step: step, Err: err.Error(), Kind: kindOf(err)}
	if errors.As(err, &tf) {
		e.Terraform = tf.TerraformFailure()
	}
	return e
}

// interruptedEnd is the end of a run cancelled (Ctrl-C, SIGTERM) while
// phase, whose failure end (the cancelled step, or Terraform stopped) is
// kept as Then — an end that says the interruption already stays.
func interruptedEnd(end *End, phase Phase) *End {
	if end.Is(CauseInterrupted) {
		return end
	}
	return &End{Cause: CauseInterrupted, Phase: phase, Then: end}
}

// with sets the step's object on e: a serial, an artifact or a run.
func (e *End) withSerial(s int64) *End    { e.Serial = s; return e }
func (e *End) withArtifact(a string) *End { e.Artifact = a; return e }
func (e *End) withRun(r string) *End      { e.Run = r; return e }

// Is reports whether the end has cause c (false for nil).
func (e *End) Is(c Cause) bool { return e != nil && e.Cause == c }
