package postgres

import (
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
)

// WithMigrations makes Open apply the goose migrations in fsys instead of
// the embedded migrations/postgres set: tests use it to run a deliberately
// failing migration.
func WithMigrations(fsys fs.FS) Option {
	return func(o *options) { o.migrations = fsys }
}

// Pool returns the store's connection pool, for tests that inspect the
// session (application_name, search_path).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
