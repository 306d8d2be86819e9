package engine

import (
	"context"
	"fmt"
	"time"
)

// A parked apply (ApplyInput.Park, ADR 0041) is an apply run waiting for
// other runs' reservations while no process works on it: klbot ends the
// job's attempt instead of holding a worker for up to KLBOT_APPLY_WAIT,
// and a later attempt — on any replica — resumes the same run
// (ApplyInput.Resume). The run stays what a waiting run is everywhere
// else: status waiting, its plan claimed, its "waited" markers naming
// the holders (kl status lists it as waiting on them), and its wait ends
// as one that never left the process would: reserved after waiting
// (the "reserved" marker's Waited counts from the first "waited"
// marker), or refused once the deadline passed (End.Waited likewise).

// ParkedError is what Apply with ApplyInput.Park returns (in a *RunError)
// when the apply must wait: run Run is waiting for Blockers' reservations
// since Since and gives up at Until (Since + ApplyInput.Wait); call Apply
// with Resume: Run to go on.
type ParkedError struct {
	Run      string
	Blockers []Blocker
	Since    time.Time
	Until    time.Time
}

func (e *ParkedError) Error() string {
	return fmt.Sprintf("apply run %s waits for reservations held by %d other run(s) since %s, until %s at most: parked",
		e.Run, len(e.Blockers), e.Since.UTC().Format(time.RFC3339), e.Until.UTC().Format(time.RFC3339))
}

// park ends this call of a waiting apply (ApplyInput.Park): the fresh
// "waited" markers and the wait are recorded as recordWait does, the
// lease is extended to the deadline plus a lease (nobody renews it until
// a resume: keepAlive is stopped first, so no renewal shortens it), and
// the caller gets a *ParkedError.
func (a *applier) park(ctx context.Context, ce *ConflictError, fresh []Marker, deadline time.Time) error {
	e := a.e
	if a.ka != nil {
		a.ka.Stop()
	}
	if _, err := e.Store.UpdateRun(ctx, a.run.ID, applyInProgress, func(r *Run) error {
		r.Status = StatusWaiting
		r.End = &End{Cause: CauseWaiting, Blockers: ce.Blockers}
		r.LeaseUntil = deadline.Add(e.lease())
		return nil
	}, fresh...); err != nil {
		err = leaseLost(a.run.ID, err)
		return a.fail(ctx, StatusPlanned, Failed(StepRecordWait, err), fmt.Errorf("parking run %s: %w", a.run.ID, err))
	}
	a.wait.waited = true
	if len(fresh) > 0 && a.in.OnWait != nil {
		a.in.OnWait(ce.Blockers)
	}
	return &ParkedError{Run: a.run.ID, Blockers: ce.Blockers, Since: a.wait.started, Until: deadline}
}

// resume continues the parked apply run in.Resume (ApplyInput.Resume):
// this process takes it over (holder, lease), rebuilds its wait from its
// markers and goes on where Apply left it — reserving, then the rest of
// the apply.
func (e *Engine) resume(ctx context.Context, in ApplyInput) (*ApplyOutcome, error) {
	run, err := e.getRun(ctx, in.Resume)
	if err != nil {
		return nil, err
	}
	if run.Kind != KindApply || run.PlanRun != in.PlanRun {
		return nil, Errorf(ErrInvalid, "run %s is not an apply of plan %s: nothing to resume", run.ID, in.PlanRun)
	}
	plan, err := e.getRun(ctx, run.PlanRun)
	if err != nil {
		return nil, err
	}
	if err := checkMergeCommit(in.MergeCommit, plan); err != nil {
		return nil, err // checked as when the apply started; the run still waits
	}
	st, err := e.getState(ctx, plan.State)
	if err != nil {
		return nil, err
	}
	run, err = e.Store.UpdateRun(ctx, run.ID, []RunStatus{StatusWaiting}, func(r *Run) error {
		r.Holder = e.Holder
		r.LeaseUntil = e.now().Add(e.lease())
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("resuming apply run %s: %w", in.Resume, err) // a *StatusError: it no longer waits
	}
	ka := e.keepAlive(ctx, run.ID)
	defer ka.Stop()
	a := &applier{e: e, in: in, run: run, plan: plan, state: st, ka: ka}
	ms, err := e.Store.Markers(ctx, run.ID)
	if err != nil {
		return nil, &RunError{Run: run.ID, Err: a.fail(ctx, StatusPlanned, Failed(StepRecordWait, err),
			fmt.Errorf("reading the wait of apply run %s: %w", run.ID, err))}
	}
	a.wait = a.rebuildWait(ms)
	pf, err := e.loadPlan(ctx, plan, st)
	if err != nil {
		return nil, &RunError{Run: run.ID, Err: a.fail(ctx, StatusPlanned, Failed(StepReadArtifact, err).withArtifact(ArtifactPlanFile), err)}
	}
	a.pf = pf
	out, err := a.do(ctx)
	if err != nil {
		return out, &RunError{Run: run.ID, Err: err}
	}
	return out, nil
}

// rebuildWait is the wait a parked run recorded: it started at its first
// "waited" marker, first saw each blocking run at that run's marker, and
// waited for each of them (the waited-for facts blockedBy had added).
func (a *applier) rebuildWait(ms []Marker) *waiting {
	w := &waiting{started: a.e.now(), firstSeen: map[string]time.Time{}}
	for _, m := range ms {
		if m.Kind != MarkerWaited {
			continue
		}
		if !w.waited || m.At.Before(w.started) {
			w.started = m.At
		}
		w.waited = true
		if _, ok := w.firstSeen[m.Other]; ok {
			continue
		}
		w.firstSeen[m.Other] = m.At
		a.facts = append(a.facts, Fact{Kind: FactWaitedFor, Run: m.Other, PR: m.OtherPR, Addresses: m.Addresses})
	}
	return w
}

// AbandonParked ends parked apply run id without resuming it, as an apply
// interrupted while it waited: nothing applied, no reservation held, its
// plan handed back (planned) for what comes next — a push's plan
// supersedes it, a close closes it. klbot calls it when the apply's pull
// request was closed, or its head moved on, while the apply waited: the
// rules an apply must meet (open pull request, a plan of its head) are
// checked before it resumes, as before it started (issue 11 review).
// A *StatusError when the run no longer waits (it was resumed, or the
// lease sweep ended it).
func (e *Engine) AbandonParked(ctx context.Context, id string) error {
	run, err := e.getRun(ctx, id)
	if err != nil {
		return err
	}
	if run.Kind != KindApply || run.Status != StatusWaiting {
		return &StatusError{Run: id, Status: run.Status, Want: []RunStatus{StatusWaiting}}
	}
	plan, err := e.getRun(ctx, run.PlanRun)
	if err != nil {
		return err
	}
	a := &applier{e: e, run: run, plan: plan}
	a.abortWith(ctx, StatusInterrupted, &End{Cause: CauseInterrupted, Phase: PhaseWaiting}, StatusPlanned, nil)
	return nil
}
