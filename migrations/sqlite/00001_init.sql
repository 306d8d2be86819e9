-- Kilolock schema v1 (SQLite). Mirrors migrations/postgres/00001_init.sql
-- (see package doc in migrations/embed.go): TEXT/INTEGER/BLOB columns, JSON
-- as TEXT, times as INTEGER Unix nanoseconds UTC.

-- +goose Up

-- states: one Terraform state Kilolock owns (docs/design.md "state").
-- head_serial is the serial of the newest version; a commit writes
-- head_serial+1 and moves it in the same transaction.
CREATE TABLE states (
    name        TEXT    NOT NULL PRIMARY KEY,
    lineage     TEXT    NOT NULL,
    head_serial INTEGER NOT NULL CHECK (head_serial >= 0),
    created_at  INTEGER NOT NULL
) STRICT;

-- versions: immutable snapshots of a state (docs/design.md "version").
-- provenance is the JSON of engine.Provenance (ADR D5); size is the
-- uncompressed snapshot length in bytes; snapshot is the Terraform state v4
-- document, gzip-compressed, kept as the LAST column so listing versions
-- never reads it.
CREATE TABLE versions (
    state      TEXT    NOT NULL REFERENCES states (name),
    serial     INTEGER NOT NULL CHECK (serial >= 0),
    lineage    TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    provenance TEXT    NOT NULL,
    resources  INTEGER NOT NULL CHECK (resources >= 0),
    size       INTEGER NOT NULL CHECK (size >= 0),
    snapshot   BLOB    NOT NULL,
    PRIMARY KEY (state, serial)
) STRICT;

-- version_changes: the addresses a version changed relative to the previous
-- one — the input of since-plan (ADR D3) and of per-address history.
CREATE TABLE version_changes (
    state   TEXT    NOT NULL,
    serial  INTEGER NOT NULL,
    address TEXT    NOT NULL,
    PRIMARY KEY (state, serial, address),
    FOREIGN KEY (state, serial) REFERENCES versions (state, serial)
) STRICT;

-- "which versions changed address A since serial N".
CREATE INDEX version_changes_by_address ON version_changes (state, address, serial);

-- runs: one plan or one apply (docs/design.md "run"); id is a ULID, so ORDER BY id
-- is creation order. The columns are the queryable projection of the run;
-- body is the JSON of the whole engine.Run (envelope, allowed-because facts,
-- since-plan, ...) and is written together with the columns, from the same
-- value, in the same statement. Absent references are NULL.
CREATE TABLE runs (
    id               TEXT    NOT NULL PRIMARY KEY,
    kind             TEXT    NOT NULL CHECK (kind IN ('plan', 'apply')),
    state            TEXT    NOT NULL REFERENCES states (name),
    actor            TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    finished_at      INTEGER,
    plan_run         TEXT,
    apply_run        TEXT,
    replan_of        TEXT,
    committed_serial INTEGER,
    pr               TEXT,
    body             TEXT    NOT NULL
) STRICT;

CREATE INDEX runs_by_state ON runs (state, id);
CREATE INDEX runs_by_status ON runs (status);

-- markers: typed, timestamped events on a run (ADR D4); seq counts 1, 2, 3…
-- per run; body is the JSON of the whole engine.Marker.
CREATE TABLE markers (
    run  TEXT    NOT NULL REFERENCES runs (id),
    seq  INTEGER NOT NULL CHECK (seq > 0),
    at   INTEGER NOT NULL,
    kind TEXT    NOT NULL,
    body TEXT    NOT NULL,
    PRIMARY KEY (run, seq)
) STRICT;

-- artifacts: named blobs of a run (saved plan, config archive, intent).
-- They hold secrets: server-side only.
CREATE TABLE artifacts (
    run        TEXT    NOT NULL REFERENCES runs (id),
    name       TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    data       BLOB    NOT NULL,
    PRIMARY KEY (run, name)
) STRICT;

-- reservations: (state, address, mode, holder run, lease) claims (docs/design.md
-- "reservation"). holder is the JSON of engine.Holder. A row whose
-- expires_at has passed is dead: it is deleted, and its run marked
-- lease-expired, by the next write transaction that sweeps leases.
CREATE TABLE reservations (
    state       TEXT    NOT NULL REFERENCES states (name),
    address     TEXT    NOT NULL,
    mode        TEXT    NOT NULL CHECK (mode IN ('read', 'write')),
    run         TEXT    NOT NULL REFERENCES runs (id),
    holder      TEXT    NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    PRIMARY KEY (run, address, mode)
) STRICT;

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
