// Package migrations holds Kilolock's database schema as goose v3 SQL
// migrations, embedded so the kl and klbot binaries migrate their own
// database at start-up (docs/design.md "Layout": migrations/ postgres/ and
// sqlite/ SQL, embedded).
//
// The sqlite/ and postgres/ sets describe ONE schema: the same tables,
// columns, keys and indexes, numbered alike, so that the store adapters (and
// the shared storetest contract suite they both pass) see the same data model.
// The SQLite files therefore use nothing the PostgreSQL twin cannot mirror:
//
//   - TEXT, INTEGER (PostgreSQL BIGINT) and BLOB (BYTEA) columns; STRICT
//     tables so SQLite checks types the way PostgreSQL does;
//   - JSON documents as TEXT (PostgreSQL JSONB), written and read only by
//     the adapter — no json_* SQL functions;
//   - times as INTEGER Unix nanoseconds, UTC (PostgreSQL BIGINT), so lease
//     expiry compares integers in both;
//   - plain PRIMARY KEY / REFERENCES / CHECK / CREATE INDEX, and
//     INSERT … ON CONFLICT upserts in the adapters.
//
// The PostgreSQL files add only storage settings that no query can see
// (ALTER COLUMN … SET STORAGE EXTERNAL for the already-compressed blobs);
// TestSchemaParity checks that both sets create the same tables, columns and
// indexes.
package migrations

import "embed"

// SQLite is the goose v3 migration set of the embedded SQLite store
// (internal/store/sqlite), files "sqlite/NNNNN_name.sql" with
// "-- +goose Up" / "-- +goose Down" sections. Pass it through
// fs.Sub(SQLite, "sqlite") to goose.NewProvider.
//
//go:embed sqlite/*.sql
var SQLite embed.FS

// Postgres is the goose v3 migration set of the PostgreSQL store
// (internal/store/postgres), files "postgres/NNNNN_name.sql", numbered like
// the SQLite set. goose runs each file in one transaction (PostgreSQL DDL is
// transactional), so a migration that fails part-way leaves the previous
// schema version. Pass it through fs.Sub(Postgres, "postgres") to
// goose.NewProvider.
//
//go:embed postgres/*.sql
var Postgres embed.FS
