package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Supersede closes an open plan run that can no longer be applied because
// something newer replaced it — a newer push to its pull request, or a
// change that no longer touches its project (klbot). The run's status
// becomes superseded with reason, and a "failed" marker records why. A plan
// that is not open (planned) is left as it is and reported with a
// *StatusError, so a plan being applied is never pulled from under its
// apply. A reason "discarded by ACTOR[: WHY]" (`kl run discard`) is a
// discard: its marker keeps who and why, and applying the plan is refused
// as discarded, by whom, when and why (StatusError).
func (e *Engine) Supersede(ctx context.Context, planRun, reason string) error {
	marker := "superseded: " + reason
	if strings.HasPrefix(reason, discardedPrefix) {
		marker = reason // a discard: the marker says who, and why
	}
	return e.closePlan(ctx, planRun, reason, marker)
}

// discardedPrefix starts the reason of a plan discarded by an operator
// (`kl run discard`: "discarded by ACTOR" or "discarded by ACTOR: WHY").
const discardedPrefix = "discarded by "

// Discarded reports whether plan run r was discarded (Supersede with a
// reason "discarded by ACTOR[: WHY]"); its Reason then says by whom and why.
func (r Run) Discarded() bool {
	return r.Kind == KindPlan && r.Status == StatusSuperseded && strings.HasPrefix(r.Reason, discardedPrefix)
}

// closePlan is Supersede: status superseded with reason, a
// "failed" marker with marker (and the run's end time: when it closed).
func (e *Engine) closePlan(ctx context.Context, planRun, reason, marker string) error {
	// A plan claimed by an apply whose holder died is handed back by the
	// lease sweep first.
	e.expireLeases(ctx)
	_, err := e.Store.UpdateRun(ctx, planRun, []RunStatus{StatusPlanned}, func(r *Run) error {
		if r.Kind != KindPlan {
			return fmt.Errorf("%w: run %s is an apply run, not a plan", ErrInvalid, r.ID)
		}
		r.Status = StatusSuperseded
		r.Reason = reason
		t := e.now()
		r.FinishedAt = &t
		return nil
	}, Marker{Kind: MarkerFailed, Reason: marker})
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("run %s does not exist (see `kl runs`): %w", planRun, ErrNotFound)
	}
	var se *StatusError
	if errors.As(err, &se) {
		return fmt.Errorf("plan run %s is %s, not open: nothing to close: %w", planRun, se.Status, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("superseding plan %s: %w", planRun, err)
	}
	return nil
}
