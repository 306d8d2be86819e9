-- Kilolock schema v1 (PostgreSQL). Mirrors migrations/sqlite/00001_init.sql
-- (see package doc in migrations/embed.go): the same tables, columns, keys
-- and indexes; TEXT/BIGINT/BYTEA columns, JSON documents as TEXT, times as
-- BIGINT Unix nanoseconds UTC. Names, ids and addresses are COLLATE "C": they
-- compare and sort byte by byte, as SQLite's BINARY collation and Go's string
-- order do, whatever the database's locale (ULID order is creation order;
-- paging by id and address sets come out alike in both stores). Two
-- PostgreSQL-only storage settings, neither visible to queries:
--   * versions.snapshot is already gzip-compressed by the adapter
--     (store.CompressSnapshot), so it is stored EXTERNAL: out of line, without
--     TOAST's second (useless) compression pass;
--   * artifacts.data is stored EXTERNAL for the same reason (saved plans are
--     zip files).
-- goose runs this file in one transaction: PostgreSQL DDL is transactional,
-- so an interrupted migration leaves the previous version behind.

-- +goose Up

-- states: one Terraform state Kilolock owns (docs/design.md "state").
-- head_serial is the serial of the newest version; a commit locks this row
-- (SELECT … FOR NO KEY UPDATE), writes head_serial+1 and moves it in the
-- same transaction. Acquire locks it the same way, so reservations of one
-- state are checked and taken one transaction at a time.
CREATE TABLE states (
    name        TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    lineage     TEXT COLLATE "C" NOT NULL,
    head_serial BIGINT           NOT NULL CHECK (head_serial >= 0),
    created_at  BIGINT           NOT NULL
);

-- versions: immutable snapshots of a state (docs/design.md "version").
-- provenance is the JSON of engine.Provenance (ADR D5); size is the
-- uncompressed snapshot length in bytes; snapshot is the Terraform state v4
-- document, gzip-compressed, kept as the LAST column so listing versions
-- never reads it.
CREATE TABLE versions (
    state      TEXT COLLATE "C" NOT NULL REFERENCES states (name),
    serial     BIGINT           NOT NULL CHECK (serial >= 0),
    lineage    TEXT COLLATE "C" NOT NULL,
    created_at BIGINT           NOT NULL,
    provenance TEXT             NOT NULL,
    resources  BIGINT           NOT NULL CHECK (resources >= 0),
    size       BIGINT           NOT NULL CHECK (size >= 0),
    snapshot   BYTEA            NOT NULL,
    PRIMARY KEY (state, serial)
);
ALTER TABLE versions ALTER COLUMN snapshot SET STORAGE EXTERNAL;

-- version_changes: the addresses a version changed relative to the previous
-- one — the input of since-plan (ADR D3) and of per-address history.
CREATE TABLE version_changes (
    state   TEXT COLLATE "C" NOT NULL,
    serial  BIGINT           NOT NULL,
    address TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (state, serial, address),
    FOREIGN KEY (state, serial) REFERENCES versions (state, serial)
);

-- "which versions changed address A since serial N".
CREATE INDEX version_changes_by_address ON version_changes (state, address, serial);

-- runs: one plan or one apply (docs/design.md "run"); id is a ULID, so ORDER BY id
-- is creation order. The columns are the queryable projection of the run;
-- body is the JSON of the whole engine.Run (envelope, allowed-because facts,
-- since-plan, ...) and is written together with the columns, from the same
-- value, in the same statement. Absent references are NULL.
CREATE TABLE runs (
    id               TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    kind             TEXT COLLATE "C" NOT NULL CHECK (kind IN ('plan', 'apply')),
    state            TEXT COLLATE "C" NOT NULL REFERENCES states (name),
    actor            TEXT COLLATE "C" NOT NULL,
    status           TEXT COLLATE "C" NOT NULL,
    created_at       BIGINT           NOT NULL,
    updated_at       BIGINT           NOT NULL,
    finished_at      BIGINT,
    plan_run         TEXT COLLATE "C",
    apply_run        TEXT COLLATE "C",
    replan_of        TEXT COLLATE "C",
    committed_serial BIGINT,
    pr               TEXT,
    body             TEXT             NOT NULL
);

CREATE INDEX runs_by_state ON runs (state, id);
CREATE INDEX runs_by_status ON runs (status);

-- markers: typed, timestamped events on a run (ADR D4); seq counts 1, 2, 3…
-- per run; body is the JSON of the whole engine.Marker.
CREATE TABLE markers (
    run  TEXT COLLATE "C" NOT NULL REFERENCES runs (id),
    seq  BIGINT           NOT NULL CHECK (seq > 0),
    at   BIGINT           NOT NULL,
    kind TEXT COLLATE "C" NOT NULL,
    body TEXT             NOT NULL,
    PRIMARY KEY (run, seq)
);

-- artifacts: named blobs of a run (saved plan, config archive, intent).
-- They hold secrets: server-side only.
CREATE TABLE artifacts (
    run        TEXT COLLATE "C" NOT NULL REFERENCES runs (id),
    name       TEXT COLLATE "C" NOT NULL,
    created_at BIGINT           NOT NULL,
    data       BYTEA            NOT NULL,
    PRIMARY KEY (run, name)
);
ALTER TABLE artifacts ALTER COLUMN data SET STORAGE EXTERNAL;

-- reservations: (state, address, mode, holder run, lease) claims (docs/design.md
-- "reservation"). holder is the JSON of engine.Holder. A row whose
-- expires_at has passed is dead: it is deleted, and its run marked
-- lease-expired, by the next transaction that sweeps leases. expires_at is
-- compared with the DATABASE clock, so replicas on hosts whose clocks
-- disagree still agree on which leases have ended.
CREATE TABLE reservations (
    state       TEXT COLLATE "C" NOT NULL REFERENCES states (name),
    address     TEXT COLLATE "C" NOT NULL,
    mode        TEXT COLLATE "C" NOT NULL CHECK (mode IN ('read', 'write')),
    run         TEXT COLLATE "C" NOT NULL REFERENCES runs (id),
    holder      TEXT             NOT NULL,
    acquired_at BIGINT           NOT NULL,
    expires_at  BIGINT           NOT NULL,
    PRIMARY KEY (run, address, mode)
);

CREATE INDEX reservations_by_state ON reservations (state);
CREATE INDEX reservations_by_expiry ON reservations (expires_at);

-- +goose Down
DROP TABLE reservations;
DROP TABLE artifacts;
DROP TABLE markers;
DROP TABLE runs;
DROP TABLE version_changes;
DROP TABLE versions;
DROP TABLE states;
