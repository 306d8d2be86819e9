package engine

import (
	"context"
	"errors"
	"fmt"
)

// Supersede closes an open plan run that can no longer be applied because
// something replaced it (klbot): a newer plan of its pull request pr at
// commit (SupersededByNewerPlan), or pr closed without applying it
// (SupersededByClosedPR). The run's status becomes superseded with that
// end, and a "failed" marker records it. A plan that is not open (planned)
// is left as it is and reported with a *StatusError, so a plan being
// applied is never pulled from under its apply.
func (e *Engine) Supersede(ctx context.Context, planRun string, why SupersedeReason, pr *PullRequest, commit string) error {
	return e.closePlan(ctx, planRun, &End{Cause: CauseSuperseded, Superseded: why, PR: pr, Commit: commit})
}

// SupersedeDropped closes the open plan run of a project that a push to
// its pull request pr dropped (klbot): the push at commit no longer
// touches project (SupersededByUntouched), or project is not in kl.yaml at
// commit any more (SupersededByRemoved). Nothing replaced the plan, so no
// newer plan is named (issue 11: it was reported as one). As Supersede
// otherwise; ErrInvalid for another reason or an empty project.
func (e *Engine) SupersedeDropped(ctx context.Context, planRun string, why SupersedeReason, pr *PullRequest, commit, project string) error {
	if why != SupersededByUntouched && why != SupersededByRemoved {
		return Errorf(ErrInvalid, "superseding plan %s: %q is not a reason a push drops a project", planRun, why)
	}
	if project == "" {
		return Errorf(ErrInvalid, "superseding plan %s: the dropped project is required", planRun)
	}
	return e.closePlan(ctx, planRun, &End{Cause: CauseSuperseded, Superseded: why, PR: pr, Commit: commit, Project: project})
}

// Discard closes an open plan run that an operator will not apply (`kl run
// discard`): like Supersede, with who (by, required) and why (may be "")
// stored in the run's end (End.By, End.Why) and in its marker
// ("discarded by BY[: WHY]"), so applying it later is refused as discarded —
// by whom, when and why (StatusError) — and it stops being listed as an
// overlap. ErrInvalid for an empty by.
func (e *Engine) Discard(ctx context.Context, planRun, by, why string) error {
	if by == "" {
		return Errorf(ErrInvalid, "discarding plan %s: who discards it is required", planRun)
	}
	return e.closePlan(ctx, planRun, &End{Cause: CauseDiscarded, By: by, Why: why})
}

// Discarded reports whether plan run r was discarded (Engine.Discard).
func (r Run) Discarded() bool {
	return r.Kind == KindPlan && r.Status == StatusSuperseded && r.End.Is(CauseDiscarded)
}

// closePlan is Supersede and Discard: status superseded with end, a
// "failed" marker with it, and the run's end time: when it closed.
func (e *Engine) closePlan(ctx context.Context, planRun string, end *End) error {
	// A plan claimed by an apply whose holder died is handed back by the
	// lease sweep first.
	e.expireLeases(ctx)
	_, err := e.Store.UpdateRun(ctx, planRun, []RunStatus{StatusPlanned}, func(r *Run) error {
		if r.Kind != KindPlan {
			return Errorf(ErrInvalid, "run %s is an apply run, not a plan", r.ID)
		}
		r.Status = StatusSuperseded
		r.End = end
		t := e.now()
		r.FinishedAt = &t
		return nil
	}, Marker{Kind: MarkerFailed, End: end})
	if errors.Is(err, ErrNotFound) {
		return Errorf(ErrNotFound, "run %s does not exist (see `kl runs`)", planRun)
	}
	var se *StatusError
	if errors.As(err, &se) {
		return Errorf(ErrConflict, "plan run %s is %s, not open: nothing to close", planRun, se.Status)
	}
	if err != nil {
		return fmt.Errorf("superseding plan %s: %w", planRun, err)
	}
	return nil
}
