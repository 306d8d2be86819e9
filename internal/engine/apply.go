package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// ApplyInput is one `kl apply RUN` (or klbot's /kl apply).
type ApplyInput struct {
	PlanRun string
	// State, when set, must be the plan's state (a plan from another state
	// is refused).
	State string
	Actor string
	PR    *PullRequest
	// Strict refuses on read-changed versions too (--strict-since-plan)
	// instead of re-planning.
	Strict bool
	// Wait bounds how long to wait for conflicting reservations; 0 fails at
	// once with the blockers named.
	Wait     time.Duration
	Progress func(Progress)
	// OnWait, if set, is called when the apply starts waiting on blockers.
	OnWait func([]Blocker)
	// OnReserved, if set, is called with the apply run's id once it holds
	// its reservations (its "reserved" marker is stored), from the apply's
	// goroutine.
	OnReserved func(run string)
	// Park makes a wait for other runs' reservations end the call instead
	// of blocking it (klbot: no worker is held while an apply waits, ADR
	// 0041): on a conflict before the wait's deadline the run records its
	// "waited" markers as it would, stays waiting with the plan claimed —
	// its lease extended to the deadline plus Lease, since nobody renews
	// it meanwhile — and Apply returns a *ParkedError (in a *RunError).
	// Continue it with Resume.
	Park bool
	// Resume continues apply run Resume, parked by an earlier Apply with
	// Park, instead of starting one: PlanRun must be its plan and it must
	// still be waiting (else a *StatusError, or ErrInvalid for another
	// plan's run). The wait keeps its start — its first "waited" marker —
	// so the deadline is that start plus Wait, however many calls the wait
	// spans, and the markers already written are not written again. Past
	// the deadline without the reservations, the apply is refused as a
	// wait that ran out in one call is.
	Resume string
	// MergeCommit, when set, is the pull request's merge commit, checked
	// out: a re-plan (step 3, a version since the plan changed what it
	// reads) plans its configuration instead of the reviewed plan's
	// archive, so that what the base branch gained before this merge — the
	// change of a pull request merged just ahead, which this one's head
	// lacks — is planned, not reverted (ADR 0062). Every check of the
	// re-plan stays. Nil: the reviewed configuration. A merge-time apply
	// only (klbot on a merge, kl apply --merge-commit).
	MergeCommit *MergeCommit
	// AfterMerge records on the run, as its first marker ("after-merge",
	// MarkerAfterMerge), that it applies after its pull request merged: a
	// refusal's next step is then not "re-plan on the PR's current head",
	// which a merged pull request can no longer be. Implied by
	// MergeCommit (its SHA the commit); ignored for a run without a pull
	// request. A resumed run keeps the marker its first call stored.
	AfterMerge *AfterMerge
	// Validate runs a native-lane plan's validation re-plan before
	// Terraform applies it (validate.go; kl apply --validate, klbot's
	// validate:); ignored for a terraform-lane plan.
	Validate bool
}

// MergeCommit is the configuration of a pull request's merge commit: the
// commit its merge put on the base branch (GitHub's merge_commit_sha; in
// a merge queue, its commit of the merge group — the base, the pull
// requests ahead of it and its own change, never one behind it), checked
// out at Dir (ADR 0062).
type MergeCommit struct {
	// SHA is the commit, 7 to 40 hexadecimal characters: named in the
	// re-plan's envelope and the apply's story.
	SHA string
	// Dir is the root module directory of the plan's scope in the
	// checkout of SHA. The scope's var files are read relative to it, as
	// kl plan --var-file is relative to -C; an absolute one cannot be
	// located in the commit and is refused (ErrInvalid).
	Dir string
}

// AfterMerge is what an apply's caller knows of the merge it applies
// after (ApplyInput.AfterMerge).
type AfterMerge struct {
	// Commit is the pull request's merge commit (GitHub's
	// merge_commit_sha, 7 to 40 hexadecimal characters), "" when unknown.
	Commit string
}

// afterMerge is the run's AfterMerge: in.AfterMerge, its commit filled
// from MergeCommit when it names none; a MergeCommit alone implies it.
func (in ApplyInput) afterMerge() *AfterMerge {
	if in.AfterMerge == nil && in.MergeCommit == nil {
		return nil
	}
	am := AfterMerge{}
	if in.AfterMerge != nil {
		am = *in.AfterMerge
	}
	if am.Commit == "" && in.MergeCommit != nil {
		am.Commit = in.MergeCommit.SHA
	}
	return &am
}

// applicablePlan is in.PlanRun when an apply can claim it: a plan (else
// ErrInvalid), of in.State when set (else ErrInvalid), planned — after
// the lease sweep when an apply holds it, whose holder may have died —
// else a *StatusError naming its status.
func (e *Engine) applicablePlan(ctx context.Context, in ApplyInput) (Run, error) {
	plan, err := e.getRun(ctx, in.PlanRun)
	if err != nil {
		return Run{}, err
	}
	if plan.Kind != KindPlan {
		return Run{}, Errorf(ErrInvalid, "run %s is an apply run, not a plan: apply its plan run %s instead", plan.ID, plan.PlanRun)
	}
	if in.State != "" && in.State != plan.State {
		return Run{}, Errorf(ErrInvalid, "plan %s belongs to state %s, not %s", plan.ID, plan.State, in.State)
	}
	if plan.Status == StatusApplying {
		// Its apply's holder may have died: the lease sweep decides
		// whether the plan is really being applied.
		e.expireLeases(ctx)
		if plan, err = e.getRun(ctx, in.PlanRun); err != nil {
			return Run{}, err
		}
	}
	if plan.Status != StatusPlanned {
		se := &StatusError{Run: plan.ID, Kind: plan.Kind, Status: plan.Status, Want: []RunStatus{StatusPlanned}, By: plan.ApplyRun, End: plan.End}
		if plan.FinishedAt != nil {
			se.At = *plan.FinishedAt
		}
		return Run{}, se
	}
	return plan, nil
}

// checkMerge checks what in says of a merge: its merge commit against
// plan (checkMergeCommit) and its AfterMerge commit, a SHA or ""; else
// ErrInvalid naming the problem.
func checkMerge(in ApplyInput, plan Run) error {
	if err := checkMergeCommit(in.MergeCommit, plan); err != nil {
		return err
	}
	if am := in.AfterMerge; am != nil && am.Commit != "" && !isHex(am.Commit, 7, 40) {
		return Errorf(ErrInvalid, "after merge: merge commit %q: want a commit SHA, 7 to 40 hexadecimal characters", am.Commit)
	}
	return nil
}

// markAfterMerge stores new apply run's "after-merge" marker when in says
// it runs after its pull request merged (ApplyInput.AfterMerge) — first,
// so that every view of the run, a refusal's next step above all, knows
// the pull request has merged. Nothing for a run without a pull request.
func (e *Engine) markAfterMerge(ctx context.Context, in ApplyInput, run Run) error {
	am := in.afterMerge()
	if am == nil || run.PR == nil {
		return nil
	}
	if err := e.Store.AddMarkers(ctx, run.ID, Marker{Kind: MarkerAfterMerge, OtherPR: run.PR, Commit: am.Commit}); err != nil {
		return fmt.Errorf("recording that apply run %s runs after its pull request merged: %w", run.ID, err)
	}
	return nil
}

// ApplyOutcome is a finished apply run with the version it committed.
type ApplyOutcome struct {
	Run     Run
	Version *Version // nil when nothing was committed
}

// Apply applies a plan run (docs/design.md "How a run flows", apply):
//
//  1. check the saved plan (digest, lineage, serial) and claim the plan for
//     one new apply run — a plan is applied at most once;
//  2. acquire every reservation of the envelope, all or none, waiting up to
//     in.Wait and recording a "waited" marker naming the holder;
//  3. preflight the since-plan versions (ADR D3): write-changed refuses;
//     read-changed re-plans against the head and proceeds, applying the
//     RE-PLAN, only if its intent is unchanged, it changes nothing outside
//     the footprint or that the plan reads, and the held reservations cover
//     it (strict: refuses; replan.go); independent proceeds;
//  4. apply the saved plan (or that re-plan) to the snapshot it was made
//     from, after an "apply-started" marker, storing the state Terraform
//     writes as it goes as a checkpoint (ArtifactApplyCheckpoint: what
//     Recover commits if this process dies before step 6);
//  5. compare what changed with the planned write set (exact or deviation);
//  6. snapshot-merge the result into the head as version head+1 and release,
//     in one transaction — also when Terraform failed or was interrupted
//     part-way, so that what it wrote is never lost (marked partial).
//
// A plan without changes (no reservations, no write set, an empty summary)
// stops after step 1: nothing is reserved, applied or committed; the run
// and the plan end applied (ApplyOutcome.Version nil).
//
// Every decision is a marker; the allowed-because facts are stored on the
// run (ADR D2, D4). Refusals return typed errors: *StatusError,
// *ConflictError, *StaleError, ErrIntentChanged (and the re-plan refusals
// that are one: ErrBehindHead, ErrOutsideFootprint, ErrBeyondReservations).
func (e *Engine) Apply(ctx context.Context, in ApplyInput) (*ApplyOutcome, error) {
	if in.Resume != "" {
		return e.resume(ctx, in)
	}
	plan, err := e.applicablePlan(ctx, in)
	if err != nil {
		return nil, err
	}
	st, err := e.getState(ctx, plan.State)
	if err != nil {
		return nil, err
	}
	if err := checkMerge(in, plan); err != nil {
		return nil, err
	}
	pf, err := e.loadPlan(ctx, plan, st)
	if err != nil {
		return nil, err
	}

	now := e.now()
	run := Run{
		ID: NewRunID(), Kind: KindApply, State: plan.State, Actor: in.Actor, Holder: e.Holder,
		Status: StatusWaiting, PR: in.PR, CreatedAt: now, UpdatedAt: now, PlanRun: plan.ID,
		LeaseUntil: now.Add(e.lease()),
	}
	if run.PR == nil {
		run.PR = plan.PR
	}
	if err := e.Store.CreateRun(ctx, run); err != nil {
		return nil, fmt.Errorf("creating apply run for plan %s: %w", plan.ID, err)
	}
	if err := e.markAfterMerge(ctx, in, run); err != nil {
		return nil, err
	}
	// Renewed from creation to the end — the wait, the re-plan, Terraform,
	// the commit: killed at any point, the run ends lease-expired and the
	// lease sweep hands its plan back.
	ka := e.keepAlive(ctx, run.ID)
	defer ka.Stop()
	// Claim: exactly one apply run takes a plan (planned → applying).
	if _, err := e.Store.UpdateRun(ctx, plan.ID, []RunStatus{StatusPlanned}, func(r *Run) error {
		r.Status = StatusApplying
		r.ApplyRun = run.ID
		return nil
	}); err != nil {
		a := &applier{e: e, in: in, run: run, plan: plan, state: st, ka: ka}
		a.abortWith(ctx, StatusRefused, &End{Cause: CauseRefusedClaim, Plan: plan.ID, Err: err.Error(), Kind: kindOf(err)}, "", nil)
		return nil, &RunError{Run: run.ID, Err: fmt.Errorf("claiming plan %s for apply run %s: %w", plan.ID, run.ID, err)}
	}
	a := &applier{e: e, in: in, run: run, plan: plan, state: st, pf: pf, ka: ka}
	do := a.do
	if nothingToApply(plan.Envelope) {
		do = a.applyNothing
	}
	out, err := do(ctx)
	if err != nil {
		return out, &RunError{Run: run.ID, Err: err}
	}
	return out, nil
}

// nothingToApply reports whether a plan changes nothing and holds nothing:
// no reservations, an empty write set and a summary without changes. Such a
// plan has no footprint to reserve, and a commit needs reservations.
func nothingToApply(env *Envelope) bool {
	return len(env.Reservations) == 0 && len(env.Footprint.Write) == 0 && env.Summary.Empty()
}

// applyNothing ends the apply of a plan without changes (nothingToApply)
// at once: no reservation, no since-plan preflight, no Terraform, no
// version. The run ends applied with an "applied" marker of Count 0 and
// the plan is consumed (applied): applying nothing is done.
func (a *applier) applyNothing(ctx context.Context) (*ApplyOutcome, error) {
	e := a.e
	run, err := e.Store.UpdateRun(ctx, a.run.ID, applyInProgress, func(r *Run) error {
		r.Status = StatusApplied
		r.End = &End{Cause: CauseNothingToApply}
		t := e.now()
		r.FinishedAt = &t
		return nil
	}, Marker{Kind: MarkerApplied, End: &End{Cause: CauseNothingToApply}})
	if err != nil {
		err = leaseLost(a.run.ID, err)
		return nil, a.fail(ctx, StatusPlanned, Failed(StepRecordNoChanges, err),
			fmt.Errorf("ending apply run %s of plan %s without changes: %w", a.run.ID, a.plan.ID, err))
	}
	if _, err := e.Store.UpdateRun(ctx, a.plan.ID, []RunStatus{StatusApplying}, func(r *Run) error {
		if err := claimedBy(r, a.run.ID); err != nil {
			return err
		}
		r.Status = StatusApplied
		return nil
	}); err != nil {
		e.log().Error("finishing plan", "run", a.plan.ID, "err", err)
	}
	return &ApplyOutcome{Run: run}, nil
}

// planFiles is what an apply needs of a plan run.
type planFiles struct {
	run      Run
	planFile []byte
	config   []byte
	intent   Intent
	vars     []Var // the plan's -var values (ArtifactVars)
}

// loadPlan reads and verifies a plan run's artifacts: the saved plan's
// digest must match the envelope (else the saved plan is corrupted), and it
// must be made against the state's lineage at the envelope's source serial.
func (e *Engine) loadPlan(ctx context.Context, plan Run, st State) (*planFiles, error) {
	env := plan.Envelope
	if env == nil {
		return nil, Errorf(ErrInvalid, "plan run %s has no envelope (status %s)", plan.ID, plan.Status)
	}
	if env.Lineage != st.Lineage {
		return nil, Errorf(ErrInvalid, "plan %s was made against lineage %s, but state %s has lineage %s", plan.ID, env.Lineage, st.Name, st.Lineage)
	}
	get := func(name string) ([]byte, error) {
		b, err := e.Store.GetArtifact(ctx, plan.ID, name)
		if err != nil {
			return nil, fmt.Errorf("reading %s of plan %s: %w", name, plan.ID, err)
		}
		return b, nil
	}
	planFile, err := get(ArtifactPlanFile)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(planFile)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != env.PlanDigest {
		return nil, Errorf(ErrInvalid, "saved plan of run %s is corrupted: its digest is %s, the envelope recorded %s; re-plan", plan.ID, got, env.PlanDigest)
	}
	info, err := e.Terraform.InspectPlanFile(planFile)
	if err != nil {
		return nil, Errorf(ErrInvalid, "saved plan of run %s: %v", plan.ID, err)
	}
	if info.Lineage != st.Lineage || info.Serial != env.SourceSerial {
		return nil, Errorf(ErrInvalid, "saved plan of run %s was made against lineage %s serial %d; state %s has lineage %s and the envelope says serial %d", plan.ID, info.Lineage, info.Serial, st.Name, st.Lineage, env.SourceSerial)
	}
	config, err := get(ArtifactConfig)
	if err != nil {
		return nil, err
	}
	raw, err := get(ArtifactIntent)
	if err != nil {
		return nil, err
	}
	var intent Intent
	if err := json.Unmarshal(raw, &intent); err != nil {
		return nil, Errorf(ErrInvalid, "intent of plan %s: %v", plan.ID, err)
	}
	pf := &planFiles{run: plan, planFile: planFile, config: config, intent: intent}
	if len(env.Scope.Options.Vars) > 0 {
		raw, err := get(ArtifactVars)
		if err != nil {
			return nil, err
		}
		if pf.vars, err = UnmarshalVars(raw); err != nil {
			return nil, Errorf(ErrInvalid, "plan %s: %v", plan.ID, err)
		}
	}
	return pf, nil
}

// applier carries one apply through its steps.
type applier struct {
	e     *Engine
	in    ApplyInput
	run   Run
	plan  Run // the reviewed plan
	state State
	pf    *planFiles // the plan being applied (the reviewed one, or its re-plan)
	ka    *keepAlive // renews the run's lease and, once held, its reservations
	facts []Fact
	sp    SincePlan
	// started: the run recorded "apply-started"; Terraform may have run.
	started bool
	// wait is the wait for reservations so far: nil until reserve starts
	// one; rebuilt from the markers of a resumed run (ApplyInput.Resume).
	wait *waiting
}

func (a *applier) do(ctx context.Context) (*ApplyOutcome, error) {
	e := a.e
	held, err := a.reserve(ctx)
	if err != nil {
		return nil, err
	}
	a.facts = append(a.facts, concurrencyFacts(a.plan.Envelope.Footprint, held.Others, a.runPRs(ctx, held.Others))...)
	if sl := a.plan.Envelope.Slice; a.plan.Envelope.Lane == LaneNative && sl != nil && sl.Proved {
		// Decided when the plan was made (its closure proof), recorded as
		// a reason this apply may proceed on its slice (ADR 0033 D2).
		a.facts = append(a.facts, Fact{Kind: FactSliceClosure, Addresses: sl.Closure, SourceSerial: a.plan.Envelope.SourceSerial})
	}

	if err := a.preflight(ctx); err != nil {
		return nil, err
	}
	if err := a.validate(ctx); err != nil {
		return nil, err
	}
	if _, err := e.Store.UpdateRun(ctx, a.run.ID, []RunStatus{StatusApplying}, func(r *Run) error {
		r.Status = StatusApplying
		r.AllowedBecause = a.facts
		sp := a.sp
		r.SincePlan = &sp
		return nil
	}); err != nil {
		err = leaseLost(a.run.ID, err)
		return nil, a.fail(ctx, StatusPlanned, Failed(StepRecordAllowed, err), fmt.Errorf("recording allowed-because of run %s: %w", a.run.ID, err))
	}
	return a.applyAndCommit(ctx)
}

// preflight classifies the since-plan versions and decides (docs/design.md apply
// step 3, ADR D3/D4/D8).
func (a *applier) preflight(ctx context.Context) error {
	e := a.e
	env := a.plan.Envelope
	versions, err := e.Store.VersionsAfter(ctx, a.state.Name, env.SourceSerial)
	if err != nil {
		return a.fail(ctx, StatusPlanned, Failed(StepReadSincePlan, err), fmt.Errorf("reading versions after %d of state %s: %w", env.SourceSerial, a.state.Name, err))
	}
	a.sp = ClassifySincePlan(a.plan.ID, env.SourceSerial, env.Footprint, versions)
	e.readChangesOrLog(ctx, a.state.Name, &a.sp)
	sum := a.sp.Summary()
	if err := e.Store.AddMarkers(ctx, a.run.ID, Marker{Kind: MarkerPreflight, SincePlan: &sum}); err != nil {
		return a.fail(ctx, StatusPlanned, Failed(StepRecordPreflight, err), fmt.Errorf("recording preflight of run %s: %w", a.run.ID, err))
	}
	bad := a.sp.Of(ClassWriteChanged)
	if a.in.Strict {
		bad = append(bad, a.sp.Of(ClassReadChanged)...)
	}
	if len(bad) > 0 {
		serr := &StaleError{Run: a.run.ID, PlanRun: a.plan.ID, Entries: bad, Strict: a.in.Strict}
		var ms []Marker
		for _, v := range bad {
			ms = append(ms, Marker{Kind: MarkerStalenessFailed, Serial: v.Serial, Other: v.Run, OtherPR: v.PR, Class: v.Class, Addresses: v.Addresses})
		}
		sp := a.sp
		end := &End{Cause: CauseRefusedStale, Plan: a.plan.ID, Stale: bad, Strict: a.in.Strict}
		a.abortWith(ctx, StatusRefused, end, StatusStale, func(r *Run) { r.SincePlan = &sp }, ms...)
		return fmt.Errorf("applying run %s: %w", a.run.ID, serr)
	}
	independent := a.sp.Of(ClassIndependent)
	a.facts = append(a.facts, Fact{
		Kind: FactStalenessPassed, Serials: Serials(independent),
		SourceSerial: env.SourceSerial, HeadSerial: a.sp.HeadSerial,
	})
	if rc := a.sp.Of(ClassReadChanged); len(rc) > 0 {
		return a.replan(ctx, rc)
	}
	return e.Store.AddMarkers(ctx, a.run.ID, Marker{Kind: MarkerStalenessPassed, SincePlan: &sum})
}

func reservedAddresses(rs []Reservation) AddressSet {
	out := make([]Address, len(rs))
	for i, r := range rs {
		out[i] = r.Address
	}
	return NewAddressSet(out...)
}

// runPRs looks up the pull requests of the runs holding reservations.
func (a *applier) runPRs(ctx context.Context, others []Reservation) map[string]*PullRequest {
	out := map[string]*PullRequest{}
	for _, r := range others {
		if _, ok := out[r.Run]; ok {
			continue
		}
		out[r.Run] = nil
		if o, err := a.e.Store.GetRun(ctx, r.Run); err == nil {
			out[r.Run] = o.PR
		}
	}
	return out
}

// concurrencyFacts explains why this run may hold its reservations beside
// every other run holding some on the state at acquisition time (ADR D2):
// disjoint write sets, and the read/read addresses they share.
func concurrencyFacts(fp Footprint, others []Reservation, prs map[string]*PullRequest) []Fact {
	byRun := map[string][]Reservation{}
	var order []string
	for _, r := range others {
		if _, ok := byRun[r.Run]; !ok {
			order = append(order, r.Run)
		}
		byRun[r.Run] = append(byRun[r.Run], r)
	}
	ownRead := fp.Read.Minus(fp.Write)
	var out []Fact
	for _, id := range order {
		var w, r []Address
		for _, res := range byRun[id] {
			if res.Mode == ModeWrite {
				w = append(w, res.Address)
			} else {
				r = append(r, res.Address)
			}
		}
		otherWrite := NewAddressSet(w...)
		out = append(out, Fact{Kind: FactDisjointWrites, Run: id, PR: prs[id], OwnWrite: fp.Write, OtherWrite: otherWrite})
		if shared := ownRead.Overlapping(NewAddressSet(r...)); len(shared) > 0 {
			out = append(out, Fact{Kind: FactReadRead, Run: id, PR: prs[id], Addresses: shared})
		}
	}
	return out
}

// fail is the applier's one failure path: it ends the run with end
// (failed; interrupted when ctx was cancelled) and its markers, returns the
// plan to planStatus and releases (abortWith), and returns err, the
// caller's error, for the caller to return.
func (a *applier) fail(ctx context.Context, planStatus RunStatus, end *End, err error, markers ...Marker) error {
	status := StatusFailed
	switch end.Cause {
	case CauseInterrupted:
		status = StatusInterrupted
	case CauseRefusedConflict, CauseRefusedFenced, CauseRefusedStale, CauseIntentChanged, CauseBehindHead, CauseOutsideFootprint, CauseBeyondReservations, CauseRefusedClaim:
		status = StatusRefused
	}
	a.abortWith(ctx, status, end, planStatus, nil, markers...)
	return err
}

// abortWith ends the apply run before it committed: status and end with
// markers on the run (update, if set, changes more in the same write), the
// plan returned to planStatus (planned: it may be retried;
// stale/superseded/failed: it may not), reservations released.
func (a *applier) abortWith(ctx context.Context, status RunStatus, end *End, planStatus RunStatus, update func(*Run), markers ...Marker) {
	e := a.e
	bctx, cancel := background(ctx)
	defer cancel()
	if ctx.Err() != nil && status != StatusRefused {
		status = StatusInterrupted
		phase := PhaseApplying
		if a.started {
			phase = PhaseTerraformApply
		}
		end = interruptedEnd(end, phase)
	}
	markers = append(markers, Marker{Kind: MarkerFailed, End: end})
	// Only a run still in progress: one the lease sweep ended stays
	// lease-expired, and the sweep has handed its plan back already.
	if _, err := e.Store.UpdateRun(bctx, a.run.ID, inProgress, func(r *Run) error {
		r.Status = status
		r.End = end
		r.AllowedBecause = nil
		t := e.now()
		r.FinishedAt = &t
		if update != nil {
			update(r)
		}
		return nil
	}, markers...); err != nil {
		if errors.Is(leaseLost(a.run.ID, err), ErrLeaseLost) {
			e.log().Warn("apply run ended by the lease sweep before it could record its end", "run", a.run.ID, "cause", end.Cause)
			planStatus = "" // the sweep handed the plan back
		} else {
			e.log().Error("recording end of apply run", "run", a.run.ID, "err", err)
		}
	}
	e.releasePlans(bctx, a, planStatus, end)
	if err := e.Store.Release(bctx, a.run.ID); err != nil {
		e.log().Error("releasing reservations", "run", a.run.ID, "err", err)
	}
}

// releasePlans hands the reviewed plan back in status s: planned (it may
// be applied again), or stale, superseded or failed (it may not: the plan's
// End then says which apply run found what). A re-plan the apply had
// claimed to apply in its place (takeReplan) ends as the reviewed plan
// does — superseded where that is planned: a retry re-plans anew.
func (e *Engine) releasePlans(ctx context.Context, a *applier, s RunStatus, end *End) {
	if s == "" {
		return // the plan was never claimed by this run
	}
	// ApplyRun keeps naming the last attempt, so `kl why PLAN` can say why
	// it did not go through; the status says whether it may be retried.
	ended := &End{Cause: CauseApplyEnded, Run: a.run.ID, Then: end}
	if _, err := e.Store.UpdateRun(ctx, a.plan.ID, []RunStatus{StatusApplying}, func(r *Run) error {
		if err := claimedBy(r, a.run.ID); err != nil {
			return err
		}
		r.Status = s
		if s != StatusPlanned {
			r.End = ended
		}
		return nil
	}); err != nil {
		e.log().Error("returning plan", "run", a.plan.ID, "status", s, "err", err)
	}
	if rp := a.replanApplied(); rp != "" {
		if s == StatusPlanned {
			s = StatusSuperseded
		}
		e.finishPlan(ctx, rp, a.run.ID, s, ended)
	}
}

// claimedBy refuses to change plan r unless apply run id claimed it: after
// the lease sweep handed a stalled apply's plan back, another apply may
// have claimed it since.
func claimedBy(r *Run, id string) error {
	if r.ApplyRun != id {
		return &StatusError{Run: r.ID, Kind: r.Kind, Status: r.Status, By: r.ApplyRun}
	}
	return nil
}
