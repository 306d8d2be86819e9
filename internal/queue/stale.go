package queue

import (
	"context"

	"github.com/kilolock/kilolock/internal/engine"
)

// StaleOrFenced reads whether open plan run is stale — the first version
// since its plan that changed its planned target (engine.SincePlan,
// ClassWriteChanged) — or else fenced: the ids of the crashed applies
// whose fences conflict with its reservations (engine.Status Fenced).
// Both nil: the plan is applicable. Errors are the engine's.
func StaleOrFenced(ctx context.Context, eng *engine.Engine, run engine.Run) (*engine.SincePlanEntry, []string, error) {
	sp, err := eng.SincePlan(ctx, run.ID)
	if err != nil {
		return nil, nil, err
	}
	if w := sp.Of(engine.ClassWriteChanged); len(w) > 0 {
		return &w[0], nil, nil
	}
	if run.Envelope == nil {
		return nil, nil, nil
	}
	st, err := eng.Status(ctx, run.State)
	if err != nil {
		return nil, nil, err
	}
	var fenced []string
	for _, f := range st.Fenced {
		if meets(run.Envelope.Reservations, f.Fences) {
			fenced = append(fenced, f.Run.ID)
		}
	}
	return nil, fenced, nil
}

// meets reports whether a plan's reservations conflict with any fence.
func meets(plan, fences []engine.Reservation) bool {
	for _, p := range plan {
		for _, f := range fences {
			if p.ConflictsWith(f) {
				return true
			}
		}
	}
	return false
}
