package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// RecoverError is a refusal of Engine.Recover, in words the user can act
// on (docs/style.md 8). It unwraps to ErrInvalid (not an apply run that stopped
// after Terraform ran), ErrConflict (it committed already, or may still be
// running) or ErrNotFound (Kilolock saw nothing Terraform wrote).
type RecoverError struct {
	Run    string
	Reason string
	Err    error
}

func (e *RecoverError) Error() string {
	return fmt.Sprintf("cannot recover run %s: %s", e.Run, e.Reason)
}

// Unwrap returns the sentinel that classifies the refusal.
func (e *RecoverError) Unwrap() error { return e.Err }

// Recoverable is what an apply run that stopped without committing
// (failed, interrupted, lease-expired) left of Terraform's work where
// Kilolock saw it: the artifact holding the last state Terraform wrote and
// the addresses that state changed against the snapshot Terraform applied
// to. None of it is in any version until Recover commits it.
type Recoverable struct {
	Run string `json:"run"`
	// Artifact is ArtifactApplyResult (Terraform returned, the commit did
	// not happen) or ArtifactApplyCheckpoint (the holder died while
	// Terraform ran).
	Artifact   string     `json:"artifact"`
	BaseSerial int64      `json:"base_serial"`
	Changed    AddressSet `json:"changed"`
	// LateAfter is the version a first recovery committed when this is
	// the run's late result (LateResult, ADR 0071): Changed is then what
	// Terraform's final state adds to it.
	LateAfter int64 `json:"late_after,omitempty"`
	// HolderAlive is the run's holder when it is alive on this host
	// (ADR 0071): Recover refuses until it finishes or is stopped.
	HolderAlive *Holder `json:"holder_alive,omitempty"`
}

// Recover commits what Terraform last wrote for apply run id, which
// stopped without committing — its holder was killed mid-apply (the lease
// sweep ended it lease-expired), or it failed or was interrupted before its
// commit went through — so that, as docs/design.md apply step 6 promises, what
// Terraform wrote is not lost (`kl run recover RUN`).
//
// It reads the last state Kilolock saw Terraform write (ArtifactApplyResult,
// else ArtifactApplyCheckpoint) and the snapshot Terraform applied to (the
// "apply-started" marker's serial, else the plan's source serial), and
// commits what changed between them with the lease-lost rule (commit.go):
// nothing is merged unconditionally; a changed address is taken only where
// the head has not changed it since that snapshot and no other live run
// holds a reservation on it — elsewhere the head is kept and the deviation
// says so. The version is partial, with a "deviation" marker and a
// "recovered" marker naming the artifact and what was kept. The run keeps
// its status and end, no longer recoverable (End.Recoverable false: `kl run
// recover` is not the next step any more), and gains CommittedSerial; its
// plan is (or stays) failed, its end naming the version.
//
// A run commits at most once: the commit re-checks CommittedSerial inside
// the store transaction, so of two recoveries (or a recovery and the
// holder's own late commit) one commits and the other is refused.
//
// Refusals are *RecoverError: a plan run; a run that committed; a run
// still in progress (its holder may still be running: wait for its lease);
// a run whose lease ran out but whose holder process is alive on this host
// (holderLive, ADR 0071: wait for it, or stop it first); a run that never
// ran Terraform; no state Terraform wrote (no artifact); a state that
// changes nothing. ErrNotFound for an unknown run.
//
// A run recovered already whose holder came back with Terraform's final
// state (LateResult, ADR 0071) is recovered a second time: what that state
// adds to the recovered version, by the same rule (lateBase).
func (e *Engine) Recover(ctx context.Context, id string) (*ApplyOutcome, error) {
	e.expireLeases(ctx) // a dead holder's run reads lease-expired, not applying
	run, err := e.getRun(ctx, id)
	if err != nil {
		return nil, err
	}
	if l, err := e.backendLockRun(ctx, run); err != nil || l != nil {
		if err != nil {
			return nil, err
		}
		return e.recoverLock(ctx, l) // a backend lock (ADR 0056): its last checkpoint
	}
	if err := checkRecoverable(run); err != nil {
		return nil, err
	}
	unchecked, err := e.holderLive(ctx, run)
	if err != nil {
		return nil, err
	}
	plan, err := e.getRun(ctx, run.PlanRun)
	if err != nil {
		return nil, err
	}
	st, err := e.getState(ctx, run.State)
	if err != nil {
		return nil, err
	}
	if err := e.salvageLeft(ctx, run); err != nil {
		return nil, fmt.Errorf("recovering run %s: %w", id, err)
	}
	lo, err := e.recoverable(ctx, run, plan)
	if err != nil {
		return nil, err
	}
	// The plan Terraform applied: the reviewed one, or its re-plan.
	a := &applier{e: e, run: run, plan: plan, state: st, pf: &planFiles{run: e.appliedPlan(ctx, run, plan)}}
	keep, held, err := a.heldByOthers(ctx, lo.changed)
	if err != nil {
		return nil, fmt.Errorf("recovering run %s: %w", id, err)
	}
	tainted, err := parseAddresses(lo.result.Tainted())
	if err != nil {
		return nil, fmt.Errorf("recovering run %s: reading tainted addresses: %w", id, err)
	}
	planned := a.pf.run.Envelope.Footprint.Write
	spec := commitSpec{
		keep: keep, status: run.Status, end: run.End, partial: true, held: held,
		deviation: Deviation{Unplanned: lo.changed.Minus(planned), Unchanged: unchangedOf(planned, lo.changed), Tainted: tainted.Overlapping(lo.changed)},
		recovered: recoveredMarker(lo.artifact, e.Holder, unchecked), lateAfter: lateAfter(run),
	}
	v, err := a.commitRecovery(ctx, lo, spec)
	if err != nil {
		if errors.Is(err, ErrConflict) {
			if ce := e.committedMeanwhile(ctx, id); ce != nil {
				return nil, ce
			}
		}
		return nil, fmt.Errorf("recovering run %s: committing: %w", id, err)
	}
	e.recoveredPlan(ctx, run, v.Serial)
	if rp := a.replanApplied(); rp != "" {
		e.finishPlan(ctx, rp, run.ID, StatusFailed, &End{Cause: CauseApplyRecovered, Run: run.ID, Serial: v.Serial})
	}
	if unchecked == "" {
		// A holder on another host may share this work root (one volume,
		// two containers) and still be writing in the dir: kept there.
		e.removeWorkDir(id)
	}
	out := &ApplyOutcome{Version: v}
	if out.Run, err = e.getRun(ctx, id); err != nil {
		return nil, err
	}
	return out, nil
}

// commitRecovery commits what Terraform last wrote (lo) by spec after the
// since-plan check (sinceApplied, withInputs): a version committed after
// the snapshot Terraform applied to that changed the plan's footprint is
// named in the deviation, and the run's since-plan becomes the one at
// commit (ADR 0072); for a late result (ADR 0071) the versions up to its
// first recovery's are not others' changes. A head that moved after the
// check is checked again.
func (a *applier) commitRecovery(ctx context.Context, lo *leftover, spec commitSpec) (*Version, error) {
	for attempt := 1; ; attempt++ {
		ch, err := a.sinceApplied(ctx)
		if err != nil {
			return nil, err
		}
		sp := spec.withInputs(ch, false)
		if spec.lateAfter != 0 {
			// A late result's own first recovery is no one else's change.
			sp.since = slices.DeleteFunc(slices.Clone(sp.since), func(v Version) bool { return v.Serial <= spec.lateAfter })
		}
		v, err := a.commit(ctx, lo.base, lo.result, sp)
		if !errors.Is(err, errHeadMoved) || attempt >= maxCommitAttempts {
			return v, err
		}
	}
}

// recoveredMarker is the "recovered" marker of a recovery by holder from
// artifact; unchecked names the run's holder when Recover could not check
// that it had stopped (another host: the lease rule alone decided, ADR
// 0071).
func recoveredMarker(artifact string, holder Holder, unchecked string) *Marker {
	m := &Marker{Kind: MarkerRecovered, Extra: map[string]string{extraArtifact: artifact, "holder": holder.String()}}
	if unchecked != "" {
		m.Extra[ExtraUncheckedHolder] = unchecked
	}
	return m
}

// ExtraUncheckedHolder is the Marker.Extra key of a "recovered" marker
// naming the run's holder (host:pid) that Recover could not check was
// gone: it runs on another host (ADR 0071).
const ExtraUncheckedHolder = "unchecked-holder"

// lateAfter is the commitSpec.lateAfter of a recovery of run: the version
// its first recovery committed when run holds a late result, else 0.
func lateAfter(run Run) int64 {
	if LateResult(run) {
		return run.End.Serial
	}
	return 0
}

// recoverable is what run's Terraform last wrote (leftover) when there is
// something to recover; else the refusal: committed meanwhile by another
// recovery or its holder (whose commit deleted the artifacts, ADR 0063),
// nothing written, or nothing changed.
func (e *Engine) recoverable(ctx context.Context, run, plan Run) (*leftover, error) {
	lo, err := e.leftover(ctx, run, plan)
	if errors.Is(err, ErrNotFound) {
		if ce := e.committedMeanwhile(ctx, run.ID); ce != nil {
			return nil, ce
		}
		return nil, e.nothingSeen(ctx, run)
	}
	if err != nil {
		return nil, fmt.Errorf("recovering run %s: %w", run.ID, err)
	}
	if len(lo.changed) == 0 {
		return nil, &RecoverError{Run: run.ID, Err: ErrNotFound, Reason: fmt.Sprintf(
			"the last state Terraform wrote (artifact %s) changes nothing against serial %d, the snapshot it applied to: nothing to recover",
			lo.artifact, lo.baseSerial)}
	}
	return lo, nil
}

// committedMeanwhile is the refusal of a recovery of run id that another
// recovery, or its holder, committed meanwhile (it reads the run again);
// nil when it has not committed.
func (e *Engine) committedMeanwhile(ctx context.Context, id string) *RecoverError {
	r, err := e.Store.GetRun(ctx, id)
	if err != nil || r.CommittedSerial == 0 {
		return nil
	}
	return &RecoverError{Run: id, Err: ErrConflict, Reason: fmt.Sprintf(
		"it committed version %d meanwhile (another recovery, or its holder): nothing left to recover", r.CommittedSerial)}
}

// backendLockRun reads run as a backend lock (ADR 0056), nil when it is
// not one, with whether its fence stands.
func (e *Engine) backendLockRun(ctx context.Context, run Run) (*heldLock, error) {
	if run.Kind != KindApply || run.PlanRun != "" {
		return nil, nil
	}
	l, err := e.lockOf(ctx, run.ID)
	if l != nil {
		l.fenced = run.End != nil && len(run.End.Fenced) > 0 && run.End.Lifted == ""
	}
	return l, err
}

// neverReserved reports whether apply run id stopped before it held its
// reservations (no "reserved" and no "apply-started" marker): Terraform
// never ran for it. A failure to read its markers says false.
func (e *Engine) neverReserved(ctx context.Context, id string) bool {
	ms, err := e.Store.Markers(ctx, id)
	if err != nil {
		return false
	}
	for _, m := range ms {
		if m.Kind == MarkerReserved || m.Kind == MarkerApplyStarted {
			return false
		}
	}
	return true
}

// salvageLeft stores what run's Terraform last wrote in its work dir on
// this machine as its checkpoint when that is newer than the stored one
// (salvage): a holder stopped while its Terraform ran on, then killed,
// leaves Terraform's final state in the dir, not in the store. Errors: the
// dir's state is unreadable or of another lineage (it is kept, for an
// operator), or the store fails.
func (e *Engine) salvageLeft(ctx context.Context, run Run) error {
	w, ok := e.WorkDirs.(LeftWorkDirs)
	if !ok {
		if w, ok = e.Terraform.(LeftWorkDirs); !ok {
			return nil
		}
	}
	return e.salvage(ctx, w, run)
}

// removeWorkDir removes the work dir of recovered run id: what its killed
// Terraform wrote is committed, so the snapshot it wrote and the saved
// plan are no longer needed. Best effort: the stale sweep removes it later.
func (e *Engine) removeWorkDir(id string) {
	rm := e.WorkDirs
	if rm == nil {
		rm, _ = e.Terraform.(WorkDirRemover)
	}
	if rm == nil {
		return
	}
	if err := rm.RemoveWorkDir(id); err != nil {
		e.log().Warn("removing the work dir of the recovered run (the stale sweep removes it later)", "run", id, "err", err)
	}
}

// checkRecoverable refuses runs Recover must not touch, with the reason.
func checkRecoverable(r Run) error {
	refuse := func(err error, format string, args ...any) error {
		return &RecoverError{Run: r.ID, Err: err, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case r.Kind != KindApply:
		if r.ApplyRun != "" {
			return refuse(ErrInvalid, "it is a plan run: recover the apply run that applied it, %s", r.ApplyRun)
		}
		return refuse(ErrInvalid, "it is a plan run: only an apply run has what Terraform wrote")
	case r.PlanRun == "":
		return refuse(ErrInvalid, "it is a day-2 operation (`kl state …`, ADR 0055): it ran no Terraform and commits in one transaction: nothing to recover")
	case r.CommittedSerial != 0 && !LateResult(r):
		return refuse(ErrConflict, "it committed version %d already: what Terraform wrote is there (`kl run show %s`)", r.CommittedSerial, r.ID)
	case r.InProgress():
		until := ""
		if !r.LeaseUntil.IsZero() {
			until = fmt.Sprintf(" (it runs until %s unless renewed)", r.LeaseUntil.UTC().Format("2006-01-02T15:04:05Z"))
		}
		return refuse(ErrConflict, "it is %s: its holder %s may still be running; wait for the lease%s, then recover", r.Status, r.Holder, until)
	}
	switch r.Status {
	case StatusFailed, StatusInterrupted, StatusLeaseExpired:
		return nil
	case StatusApplied:
		if r.End.Is(CauseNothingToApply) {
			return refuse(ErrInvalid, "it is applied without a version: the plan has no changes: nothing applied, nothing committed")
		}
		return refuse(ErrInvalid, "it is applied without a version: nothing to recover")
	case StatusRefused:
		return refuse(ErrInvalid, "it was refused before Terraform ran: nothing to recover")
	}
	return refuse(ErrInvalid, "it is %s: nothing to recover", r.Status)
}

// leftover is the last state Kilolock saw Terraform write for an apply run
// that did not commit, with the snapshot Terraform applied to.
type leftover struct {
	artifact     string
	baseSerial   int64
	base, result *tfstate.State
	changed      AddressSet
}

// leftover reads run's last written state (ArtifactApplyResult, else
// ArtifactApplyCheckpoint: ErrNotFound when it has neither) and the
// snapshot Terraform applied it to: the serial of the run's
// "apply-started" marker, or the plan's source serial for runs stored
// before that marker existed.
func (e *Engine) leftover(ctx context.Context, run, plan Run) (*leftover, error) {
	if plan.Envelope == nil {
		return nil, Errorf(ErrInvalid, "plan run %s of run %s has no envelope", plan.ID, run.ID)
	}
	lo := &leftover{baseSerial: plan.Envelope.SourceSerial}
	var doc []byte
	for _, name := range []string{ArtifactApplyResult, ArtifactApplyCheckpoint} {
		b, err := e.Store.GetArtifact(ctx, run.ID, name)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s of run %s: %w", name, run.ID, err)
		}
		doc, lo.artifact = b, name
		break
	}
	if doc == nil {
		return nil, Errorf(ErrNotFound, "run %s has no state Terraform wrote", run.ID)
	}
	ms, err := e.Store.Markers(ctx, run.ID)
	if err != nil {
		return nil, fmt.Errorf("reading markers of run %s: %w", run.ID, err)
	}
	env := plan.Envelope
	for _, m := range ms {
		if m.Kind == MarkerApplyStarted {
			lo.baseSerial = m.Serial
			if m.Other != "" {
				// Terraform applied that re-plan: its lane says what it
				// applied to (a native lane's slice, or the whole version).
				rp, err := e.getRun(ctx, m.Other)
				if err != nil {
					return nil, fmt.Errorf("reading re-plan %s of run %s: %w", m.Other, run.ID, err)
				}
				env = rp.Envelope
			}
		}
	}
	b, err := e.planBase(ctx, run.State, lo.baseSerial, env)
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %d of state %s: %w", lo.baseSerial, run.State, err)
	}
	if lo.base, err = tfstate.Parse(b); err != nil {
		return nil, fmt.Errorf("parsing snapshot %d of state %s: %w", lo.baseSerial, run.State, err)
	}
	if LateResult(run) && lo.artifact == ArtifactApplyResult {
		if lo.base, err = e.lateBase(ctx, run, lo.base); err != nil {
			return nil, err
		}
	}
	if lo.result, err = tfstate.Parse(doc); err != nil {
		return nil, Errorf(ErrInvalid, "artifact %s of run %s is not a readable state: %v", lo.artifact, run.ID, err)
	}
	if lo.changed, err = changedByRun(lo.base, nil, lo.result, plan.Envelope.Footprint.Write); err != nil {
		return nil, fmt.Errorf("reading addresses changed by run %s: %w", run.ID, err)
	}
	return lo, nil
}

// recoverableOf is the Recoverable of an apply run for the views: nil when
// the run is not one Recover would take, or left nothing it could commit.
// A failure to read it is logged: a view goes on without it.
func (e *Engine) recoverableOf(ctx context.Context, run Run, plan *Run) *Recoverable {
	if checkRecoverable(run) != nil || plan == nil || plan.ID != run.PlanRun {
		return nil
	}
	lo, err := e.leftover(ctx, run, *plan)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		e.log().Warn("reading what Terraform wrote for a run that did not commit", "run", run.ID, "err", err)
		return nil
	}
	if len(lo.changed) == 0 {
		return nil
	}
	rec := &Recoverable{Run: run.ID, Artifact: lo.artifact, BaseSerial: lo.baseSerial, Changed: lo.changed, LateAfter: lateAfter(run)}
	if _, err := e.holderLive(ctx, run); err != nil {
		h := run.Holder
		rec.HolderAlive = &h
	}
	return rec
}

// recoveredPlan marks the reviewed plan of recovered apply run a failed,
// its reason naming the version (whatever it said before): infrastructure
// changed, so it cannot be applied again. A plan another apply claimed
// since is left alone.
func (e *Engine) recoveredPlan(ctx context.Context, a Run, serial int64) {
	if _, err := e.Store.UpdateRun(ctx, a.PlanRun, []RunStatus{StatusFailed, StatusPlanned}, func(r *Run) error {
		if err := claimedBy(r, a.ID); err != nil {
			return err
		}
		r.Status = StatusFailed
		r.End = &End{Cause: CauseApplyRecovered, Run: a.ID, Serial: serial}
		return nil
	}); err != nil {
		e.log().Error("finishing plan of a recovered run", "run", a.PlanRun, "err", err)
	}
}

// extraArtifact is the Marker.Extra key of the artifact a "recovered"
// marker committed from.
const extraArtifact = "artifact"

// nothingSeen is the refusal of recovering apply run, whose Terraform left
// no state Kilolock saw: it never ran (never reserved), or it ran and
// wrote no artifact. A fenced run's fence is then lifted only by an
// unfence, after checking the real objects (ADR 0035); until then any
// apply there — a re-plan's too — is refused, so the refusal says so.
func (e *Engine) nothingSeen(ctx context.Context, run Run) error {
	id := run.ID
	if e.neverReserved(ctx, id) {
		return &RecoverError{Run: id, Err: ErrNotFound, Reason: fmt.Sprintf(
			"it stopped before it held its reservations, so Terraform never ran: nothing to recover; its plan %s is as it was", run.PlanRun)}
	}
	for _, name := range GCStateArtifacts {
		if note := e.retentionNote(ctx, id, name); note != "" {
			return &RecoverError{Run: id, Err: ErrNotFound, Reason: fmt.Sprintf(
				"%s (ADR 0063): what Terraform wrote is no longer stored; check the infrastructure, then re-plan", note)}
		}
	}
	then := "then re-plan"
	if run.End != nil && len(run.End.Fenced) > 0 && run.End.Lifted == "" {
		then = "then lift its fence: kl run unfence " + id + " --reason TEXT"
	}
	return &RecoverError{Run: id, Err: ErrNotFound, Reason: fmt.Sprintf(
		"Terraform wrote nothing Kilolock saw: run %s has no %s or %s artifact (Terraform may not have completed a resource before its holder died); check the infrastructure, %s",
		id, ArtifactApplyResult, ArtifactApplyCheckpoint, then)}
}

// holderLive refuses the recovery of run while its holder may still be
// working on it (ADR 0071): the lease sweep ended it (lease-expired) and
// the holder never said it stopped — no end of its own (End.Then, a
// "failed" marker), no late result (CauseRecoveredMeanwhile) — after its
// Terraform had started (End.Recoverable or End.Fenced), and that holder
// is alive: this very process with the run live in it, or a live
// process of this host (processAlive: the same pid, started before the run
// was created). What its Terraform writes from now on would otherwise be
// lost to a recovery of an older checkpoint. The refusal is a conflict
// (exit 3) naming the pid, the host and what to do. unchecked is the
// holder Recover cannot check (another host, or a system where it cannot
// tell): the lease rule alone decides there, and the recovered marker says
// so.
func (e *Engine) holderLive(ctx context.Context, run Run) (unchecked string, err error) {
	h := run.Holder
	switch {
	case run.Status != StatusLeaseExpired || run.End == nil || run.End.Then != nil || run.End.Is(CauseRecoveredMeanwhile) || e.holderEnded(ctx, run.ID):
		return "", nil // the holder ended the run itself: it is done with it
	case !run.End.Recoverable && len(run.End.Fenced) == 0:
		return "", nil // swept before its Terraform started: it never will
	}
	if h == (Holder{}) {
		return "", nil
	}
	alive, known := false, true
	switch {
	case h.Host != e.Holder.Host:
		return h.String(), nil
	case h.PID == e.Holder.PID:
		alive = e.live.has(run.ID)
	default:
		alive, known = processAlive(h.PID, run.CreatedAt)
	}
	if !known {
		return h.String(), nil
	}
	if !alive {
		return "", nil
	}
	return "", &RecoverError{Run: run.ID, Err: ErrConflict, Reason: fmt.Sprintf(
		"its holder process %d on host %s is alive: its lease ran out, but it may still be running Terraform for this run (slow or stalled, not dead), "+
			"and what Terraform writes from now on would be lost to a recovery of its last checkpoint; wait for it to finish (its own commit lifts the fence), "+
			"or stop it first (kill %d on %s), then recover", h.PID, h.Host, h.PID, h.Host)}
}

// holderEnded reports whether run id's holder wrote the run's end itself
// (a "failed" marker: a killed Terraform's fenceKilled, a failure before
// the commit). A failure to read the markers says false.
func (e *Engine) holderEnded(ctx context.Context, id string) bool {
	ms, err := e.Store.Markers(ctx, id)
	if err != nil {
		return false
	}
	for _, m := range ms {
		if m.Kind == MarkerFailed {
			return true
		}
	}
	return false
}

// LateResult reports whether apply run r holds a late result (ADR 0071):
// `kl run recover` committed its checkpoint while its holder's lease had
// run out, the holder then came back with what Terraform wrote last, and
// no recovery has committed that yet — r's end is CauseRecoveredMeanwhile
// and recoverable. Its ArtifactApplyResult is kept (never collected) until
// Recover commits it.
func LateResult(r Run) bool {
	return r.Kind == KindApply && r.CommittedSerial != 0 && r.End.Is(CauseRecoveredMeanwhile) && r.End.Recoverable
}

// lateBase is the base a late result is compared and merged against
// (ADR 0071): the snapshot Terraform applied to, with the entries the first
// recovery committed (version End.Serial's changed addresses) as that
// version holds them. So what Terraform changed beyond the recovery is
// what differs from it, and the merge takes an address only where the head
// still holds what this run itself committed (or, for one the recovery
// kept at the head, what Terraform started from).
func (e *Engine) lateBase(ctx context.Context, run Run, base *tfstate.State) (*tfstate.State, error) {
	serial := run.End.Serial
	v, err := e.Store.GetVersion(ctx, run.State, serial)
	if err != nil {
		return nil, fmt.Errorf("reading version %d, the recovery of run %s: %w", serial, run.ID, err)
	}
	b, err := e.Store.Snapshot(ctx, run.State, serial)
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %d, the recovery of run %s: %w", serial, run.ID, err)
	}
	rec, err := tfstate.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("parsing snapshot %d: %w", serial, err)
	}
	merged, _, err := tfstate.MergeWith(tfstate.MergeInput{Head: base, Base: base, Result: rec, Written: v.Changed.Strings(), Serial: base.Serial})
	if err != nil {
		return nil, fmt.Errorf("merging version %d, the recovery of run %s, into its base: %w", serial, run.ID, err)
	}
	return merged, nil
}
