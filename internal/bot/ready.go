package bot

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/migrations"
)

// riverLockKey is the first key of the advisory lock held while River's
// migrations run ("rv"), so replicas starting together migrate once.
const riverLockKey = 0x7276

// MigrateRiver applies River's own migrations (rivermigrate; each version
// in its own transaction: some alter enum types, which PostgreSQL does not
// allow to use in the transaction that altered them) while holding a
// session advisory lock, so replicas starting together migrate once.
// Kilolock's goose migrations, klbot's tables included, are applied by
// postgres.Open.
func MigrateRiver(ctx context.Context, pool *pgxpool.Pool) error {
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("migrating River: %w", err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrating River: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, hashtext(current_schema()))`, riverLockKey); err != nil {
		return fmt.Errorf("migrating River: taking the migration lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1, hashtext(current_schema()))`, riverLockKey) //nolint:errcheck // the session's end releases it too
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrating River: %w", err)
	}
	return nil
}

// Ready reports whether klbot can work: the database answers, Kilolock's
// goose migrations (migrations/postgres, klbot's tables included) are at
// least at the newest version this binary embeds (a newer binary's
// migrations are fine at the same level), this binary may write to the
// store (its compatibility level is not above this binary's: ADR 0048),
// and River's migrations are all applied. The error says which (for
// /readyz's 503): a replica a newer one has locked out names both
// versions.
func Ready(ctx context.Context, pool *pgxpool.Pool) error {
	if err := pool.Ping(ctx); err != nil {
		return fmt.Errorf("database unreachable: %w", err)
	}
	if err := gooseCurrent(ctx, pool.Config().ConnConfig); err != nil {
		return err
	}
	if err := postgres.CheckWritable(ctx, pool); err != nil {
		return err
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("checking River migrations: %w", err)
	}
	res, err := m.Validate(ctx, nil)
	if err != nil {
		return fmt.Errorf("checking River migrations: %w", err)
	}
	if !res.OK {
		return fmt.Errorf("river migrations pending: %s", strings.Join(res.Messages, "; "))
	}
	return nil
}

// gooseCurrent checks that the goose version of the database is at least
// the newest embedded migration's.
func gooseCurrent(ctx context.Context, cc *pgx.ConnConfig) error {
	fsys, err := fs.Sub(migrations.Postgres, "postgres")
	if err != nil {
		return fmt.Errorf("checking Kilolock migrations: %w", err)
	}
	db := stdlib.OpenDB(*cc)
	defer db.Close()
	return gooseCheck(ctx, db, fsys)
}

func gooseCheck(ctx context.Context, db *sql.DB, fsys fs.FS) error {
	p, err := postgres.MigrationProvider(db, fsys)
	if err != nil {
		return fmt.Errorf("checking Kilolock migrations: %w", err)
	}
	cur, target, err := p.GetVersions(ctx)
	if err != nil {
		return fmt.Errorf("checking Kilolock migrations: %w", err)
	}
	if cur < target {
		return fmt.Errorf("kilolock migrations pending: the database is at version %d, this klbot needs %d", cur, target)
	}
	return nil
}
