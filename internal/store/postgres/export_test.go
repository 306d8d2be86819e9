package postgres

import (
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"

	"github.com/kilolock/kilolock/internal/store"
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

// WithBinary makes Open act as binary b (its version and compatibility
// level) instead of store.ThisBinary, with the Go migrations extra on top
// of the embedded ones: tests open a store as a newer binary would.
func WithBinary(b store.Binary, extra ...*goose.Migration) Option {
	return func(o *options) { o.binary, o.extra = b, extra }
}
