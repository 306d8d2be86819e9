package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kilolock/kilolock/internal/store"
)

// checkCompat reads the compatibility level of the store, at schema
// version schema, and refuses it when this binary may not even read it
// (store.Binary.Check). A store it may only read opens: its writes are
// refused one by one (guarded).
func (s *Store) checkCompat(ctx context.Context, schema int64) error {
	c, err := readCompat(ctx, s.pool, schema, false)
	if err != nil {
		return s.mapErr(err)
	}
	s.compat = c
	if access, err := s.binary.Check(c); access == "" {
		return err
	}
	return nil
}

// readCompat reads the kl_compat row through q; lock takes it FOR SHARE
// (in a write transaction), which a raise's UPDATE waits for
// (store.LevelMigration).
func readCompat(ctx context.Context, q querier, schema int64, lock bool) (store.Compat, error) {
	query := store.CompatQuery
	if lock {
		query += ` FOR SHARE`
	}
	return store.ScanCompat(q.QueryRow(ctx, query), schema, pgx.ErrNoRows)
}

// Compat reads the store's compatibility record now (a newer binary may
// have raised it since Open), with the schema version Open found.
func (s *Store) Compat(ctx context.Context) (store.Compat, error) {
	c, err := readCompat(ctx, s.pool, s.compat.Schema, false)
	return c, s.mapErr(err)
}

// Access is what this binary may do with the store now: store.ReadWrite,
// or store.ReadOnly with the *store.CompatError its writes get.
func (s *Store) Access(ctx context.Context) (store.Access, error) {
	c, err := s.Compat(ctx)
	if err != nil {
		return "", err
	}
	return s.binary.Check(c)
}

// CheckWritable returns the *store.CompatError that refuses this binary's
// writes to the store at pool (its level is above this binary's: a newer
// binary raised it), or nil. klbot's readiness asks it, so that a replica
// a newer one has locked out stops getting webhooks.
func CheckWritable(ctx context.Context, pool *pgxpool.Pool) error {
	c, err := readCompat(ctx, pool, 0, false)
	if err != nil {
		return fmt.Errorf("reading the store's compatibility level: %w", err)
	}
	return store.ThisBinary().CheckWrite(c)
}

// guarded is fn preceded by the compatibility check of a write
// transaction: the kl_compat row read FOR SHARE — a migration raising the
// level waits for this transaction to end, and one that committed first
// is seen — and a *store.CompatError instead of fn when this binary may
// not write (store.Binary.CheckWrite).
func (s *Store) guarded(ctx context.Context, fn func(tx pgx.Tx) error) func(tx pgx.Tx) error {
	return func(tx pgx.Tx) error {
		c, err := readCompat(ctx, tx, s.compat.Schema, true)
		if err != nil {
			return s.mapErr(err)
		}
		if err := s.binary.CheckWrite(c); err != nil {
			return err
		}
		return fn(tx)
	}
}
