package sqlite

import (
	"context"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
)

var _ engine.Collector = (*Store)(nil)

// in is "(?, ?, …)" for n values and the names as arguments.
func in(names []string) (string, []any) {
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", len(names)), ", ") + ")", args
}

// ArtifactSizes returns the artifacts named one of names with their sizes
// (length(data): bytes), by run and name (store.Executor).
func (e executor) ArtifactSizes(ctx context.Context, names []string) ([]store.ArtifactSize, error) {
	out := []store.ArtifactSize{}
	if len(names) == 0 {
		return out, nil
	}
	set, args := in(names)
	rows, err := e.q.QueryContext(ctx, `SELECT run, name, length(data) FROM artifacts WHERE name IN `+set+` ORDER BY run, name`, args...)
	if err != nil {
		return nil, e.s.mapErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		var a store.ArtifactSize
		if err := rows.Scan(&a.Run, &a.Name, &a.Bytes); err != nil {
			return nil, e.s.mapErr(err)
		}
		out = append(out, a)
	}
	return out, e.s.mapErr(rows.Err())
}

// DeleteArtifacts deletes run's artifacts named one of names and returns
// them with their sizes (store.Executor).
func (e executor) DeleteArtifacts(ctx context.Context, run string, names []string) ([]store.ArtifactSize, error) {
	out := []store.ArtifactSize{}
	if len(names) == 0 {
		return out, nil
	}
	set, args := in(names)
	rows, err := e.q.QueryContext(ctx, `DELETE FROM artifacts WHERE run = ? AND name IN `+set+` RETURNING name, length(data)`, append([]any{run}, args...)...)
	if err != nil {
		return nil, e.s.mapErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		a := store.ArtifactSize{Run: run}
		if err := rows.Scan(&a.Name, &a.Bytes); err != nil {
			return nil, e.s.mapErr(err)
		}
		out = append(out, a)
	}
	return out, e.s.mapErr(rows.Err())
}

// GC deletes the artifacts no run needs any more (engine.Collector; ADR
// 0063): store.Algorithms.GC over the store's database.
func (s *Store) GC(ctx context.Context, req engine.GCRequest) (engine.GCResult, error) {
	return s.Algorithms.GC(ctx, req)
}
