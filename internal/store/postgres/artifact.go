package postgres

import (
	"context"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
)

var _ engine.Collector = (*Store)(nil)

// ArtifactSizes returns the artifacts named one of names with their sizes
// (octet_length(data): bytes, before TOAST), by run and name
// (store.Executor).
func (e executor) ArtifactSizes(ctx context.Context, names []string) ([]store.ArtifactSize, error) {
	out := []store.ArtifactSize{}
	rows, err := e.q.Query(ctx, `SELECT run, name, octet_length(data) FROM artifacts WHERE name = ANY($1::text[]) ORDER BY run, name`, names)
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
	rows, err := e.q.Query(ctx, `DELETE FROM artifacts WHERE run = $1 AND name = ANY($2::text[]) RETURNING name, octet_length(data)`, run, names)
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
