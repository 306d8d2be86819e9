package store

import (
	"context"
	"fmt"

	"github.com/kilolock/kilolock/internal/engine"
)

// GetState is engine.Store.GetState over a.DB: the named state with its
// head serial, read without locks. ErrNotFound if unknown.
func (a Algorithms) GetState(ctx context.Context, name string) (engine.State, error) {
	st, err := a.DB.ReadState(ctx, name)
	if err != nil {
		return engine.State{}, fmt.Errorf("getting state %s: %w", name, err)
	}
	return st, nil
}

// History is engine.Store.History over a.DB: versions of state newest
// first, with their changed addresses — serials below q.Before (0: from
// the head), at most q.Limit (0: 50). ErrNotFound if the state is unknown;
// ErrInvalid for a negative limit.
func (a Algorithms) History(ctx context.Context, state string, q engine.HistoryQuery) ([]engine.Version, error) {
	out, err := a.history(ctx, state, q)
	if err != nil {
		return nil, fmt.Errorf("reading history of state %s: %w", state, err)
	}
	return out, nil
}

func (a Algorithms) history(ctx context.Context, state string, q engine.HistoryQuery) ([]engine.Version, error) {
	limit, err := Limit(q.Limit)
	if err != nil {
		return nil, err
	}
	if _, err := a.DB.ReadState(ctx, state); err != nil {
		return nil, err
	}
	vs, err := a.DB.VersionsBefore(ctx, state, q.Before, limit)
	if err != nil {
		return nil, err
	}
	return a.withChanges(ctx, state, vs)
}

// VersionsAfter is engine.Store.VersionsAfter over a.DB: every version of
// state with serial > after, oldest first, with changed addresses — the
// since-plan input (ADR D3). ErrNotFound if the state is unknown.
func (a Algorithms) VersionsAfter(ctx context.Context, state string, after int64) ([]engine.Version, error) {
	out, err := a.versionsAfter(ctx, state, after)
	if err != nil {
		return nil, fmt.Errorf("reading versions of state %s after %d: %w", state, after, err)
	}
	return out, nil
}

func (a Algorithms) versionsAfter(ctx context.Context, state string, after int64) ([]engine.Version, error) {
	if _, err := a.DB.ReadState(ctx, state); err != nil {
		return nil, err
	}
	vs, err := a.DB.VersionsFrom(ctx, state, after)
	if err != nil {
		return nil, err
	}
	return a.withChanges(ctx, state, vs)
}

// withChanges fills the changed addresses of vs (consecutive serials of one
// state, in either order) with one read. Versions are immutable and written
// with their changes in one transaction, so the two reads need no shared
// snapshot. Never nil.
func (a Algorithms) withChanges(ctx context.Context, state string, vs []engine.Version) ([]engine.Version, error) {
	if len(vs) == 0 {
		return []engine.Version{}, nil
	}
	lo, hi := vs[0].Serial, vs[len(vs)-1].Serial
	if lo > hi {
		lo, hi = hi, lo
	}
	changed, err := a.DB.Changes(ctx, state, lo, hi)
	if err != nil {
		return nil, err
	}
	for i := range vs {
		vs[i].Changed = changed[vs[i].Serial]
	}
	return vs, nil
}
