package store

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pressly/goose/v3"
)

// RunKindsOpenVersion is the schema version of RunKindsOpenMigration.
const RunKindsOpenVersion = 5

// Dialect names the SQL of a store's Go migrations.
type Dialect int

// Dialects.
const (
	SQLite Dialect = iota
	Postgres
)

// GoMigrations are the schema migrations of both stores written in Go
// (those the SQL files of migrations/ cannot express), for goose's
// WithGoMigrations: 4 (TypedEndsMigration), 5 (RunKindsOpenMigration) and
// 11 (LevelMigration to level 1), 16 (to level 2, ADR 0065), 19 (to level 3, ADR 0068), and those of build-tagged test files.
func GoMigrations(d Dialect) []*goose.Migration {
	out := []*goose.Migration{TypedEndsMigration(placeholders(d)), RunKindsOpenMigration(d),
		LevelMigration(LevelOneVersion, d, levelOne, Level{}), LevelMigration(InstancesVersion, d, levelTwo, levelOne),
		LevelMigration(EntriesVersion, d, levelThree, levelTwo)}
	for _, m := range extraGoMigrations {
		out = append(out, m(d))
	}
	return out
}

// kindCheck is the constraint migrations 1 put on runs.kind.
const kindCheck = ` CHECK (kind IN ('plan', 'apply'))`

// RunKindsOpenMigration is schema migration 5 of both stores: runs.kind
// loses its CHECK (kind IN ('plan', 'apply')), so a later run kind (an http
// backend lock, a push) needs no schema rewrite; the kinds a run may have
// are checked in code (CheckRun). PostgreSQL drops the constraint; SQLite,
// which cannot drop a constraint, has its table definition rewritten in
// place — SQLite's documented procedure for removing a CHECK constraint
// ("Making Other Kinds Of Table Schema Changes": writable_schema, a new
// schema_version, then integrity_check), which changes nothing stored.
// Down is a no-op: a run of a later kind would break the constraint.
func RunKindsOpenMigration(d Dialect) *goose.Migration {
	up := func(ctx context.Context, tx *sql.Tx) error {
		if d == Postgres {
			_, err := tx.ExecContext(ctx, `ALTER TABLE runs DROP CONSTRAINT IF EXISTS runs_kind_check`)
			return err
		}
		var version int64
		if err := tx.QueryRowContext(ctx, `PRAGMA schema_version`).Scan(&version); err != nil {
			return fmt.Errorf("reading schema_version: %w", err)
		}
		for _, q := range []string{
			`PRAGMA writable_schema = ON`,
			`UPDATE sqlite_schema SET sql = replace(sql, '` + sqlQuote(kindCheck) + `', '') WHERE type = 'table' AND name = 'runs'`,
			fmt.Sprintf(`PRAGMA schema_version = %d`, version+1),
			`PRAGMA writable_schema = OFF`,
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		var ok string
		if err := tx.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
			return fmt.Errorf("integrity check after opening runs.kind: %q, %v", ok, err)
		}
		return nil
	}
	return goose.NewGoMigration(RunKindsOpenVersion, &goose.GoFunc{RunTx: up}, &goose.GoFunc{RunTx: func(context.Context, *sql.Tx) error { return nil }})
}

// sqlQuote doubles the single quotes of s for a SQL string literal.
func sqlQuote(s string) string {
	out := make([]byte, 0, len(s)+4)
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			out = append(out, '\'')
		}
		out = append(out, s[i])
	}
	return string(out)
}
