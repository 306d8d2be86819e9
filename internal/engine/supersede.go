package engine

import (
	"context"
	"errors"
	"fmt"
)

// Supersede closes an open plan run that can no longer be applied because
// something newer replaced it — a newer push to its pull request, or a
// change that no longer touches its project (klbot). The run's status
// becomes superseded with reason, and a "failed" marker records why. A plan
// that is not open (planned) is left as it is and reported with a
// *StatusError, so a plan being applied is never pulled from under its
// apply.
func (e *Engine) Supersede(ctx context.Context, planRun, reason string) error {
	// A plan claimed by an apply whose holder died is handed back by the
	// lease sweep first.
	e.expireLeases(ctx)
	_, err := e.Store.UpdateRun(ctx, planRun, []RunStatus{StatusPlanned}, func(r *Run) error {
		if r.Kind != KindPlan {
			return fmt.Errorf("%w: run %s is an apply run, not a plan", ErrInvalid, r.ID)
		}
		r.Status = StatusSuperseded
		r.Reason = reason
		return nil
	}, Marker{Kind: MarkerFailed, Reason: "superseded: " + reason})
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
