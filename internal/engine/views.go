package engine

import (
	"context"
	"errors"
	"fmt"
)

// The operator views of ADR D6, assembled from stored facts only (ADR D2:
// never from logs), one file per view: story.go, history.go, why.go,
// status.go; internal/report renders them for a terminal, Markdown and
// JSON. Here: reading one run, as every view does.

// Run reads one run after the lease sweep (so a run whose holder died reads
// as lease-expired, as in every view). Errors: ErrNotFound (wrapped, naming
// the run and `kl runs`), or the store's.
func (e *Engine) Run(ctx context.Context, id string) (Run, error) {
	e.expireLeases(ctx)
	return e.getRun(ctx, id)
}

func (e *Engine) getRun(ctx context.Context, id string) (Run, error) {
	r, err := e.Store.GetRun(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return Run{}, Errorf(ErrNotFound, "run %s does not exist (see `kl runs`)", id)
	}
	if err != nil {
		return Run{}, fmt.Errorf("reading run %s: %w", id, err)
	}
	e.annotate(ctx, &r)
	return r, nil
}
