-- Per-resource storage (issue 16 §1, ADR 0068). A version whose header is
-- set is stored as a header and a manifest of resource entries instead of
-- a whole snapshot (then versions.snapshot is empty):
--
-- state_entries: one resource entry of a state — all instances of one
-- resource address in one module instance, the compact JSON Terraform
-- writes in "resources" — stored once per state by content hash (SHA-256
-- of the JSON) and shared by every version that has it. size is the JSON's
-- length in bytes, body the JSON gzip-compressed; created_at Unix
-- nanoseconds UTC (the garbage collector's grace period).
--
-- version_entries: the manifests of every version, as intervals: the entry
-- with hash is at address (the resource in its module instance, keys kept:
-- tfstate.Resource.EntryAddress; resource is the same without module
-- instance keys, tfstate.Resource.Address) in every version of state with a serial s where
-- since_serial <= s and (until_serial is NULL or s < until_serial). A
-- commit writes only the entries that changed: it closes their intervals
-- (until_serial = the new serial) and opens new ones. The foreign key
-- refuses deleting an entry a manifest still names.
--
-- versions.header: the version's document without its resources,
-- gzip-compressed (tfstate.State.Header); NULL for a version stored whole.
--
-- kl_backfill: per state, how far the backfill (kl store backfill, klbot's
-- gc job) has given the versions stored whole before migration 17 their
-- manifests: every version below `below` is still as it was; finished_at
-- (Unix nanoseconds UTC) once it reached the state's first version.
--
-- New tables and a nullable column: an expand. The raise that keeps older
-- binaries from reading a version they would misread is migration 19.

-- +goose Up
CREATE TABLE state_entries (
    state      TEXT COLLATE "C" NOT NULL REFERENCES states (name),
    hash       BYTEA   NOT NULL,
    size       BIGINT  NOT NULL CHECK (size >= 0),
    created_at BIGINT  NOT NULL,
    body       BYTEA   NOT NULL,
    PRIMARY KEY (state, hash)
);

CREATE TABLE version_entries (
    state        TEXT COLLATE "C" NOT NULL,
    address      TEXT COLLATE "C" NOT NULL,
    resource     TEXT COLLATE "C" NOT NULL,
    since_serial BIGINT  NOT NULL,
    until_serial BIGINT,
    hash         BYTEA   NOT NULL,
    PRIMARY KEY (state, address, since_serial),
    FOREIGN KEY (state, hash) REFERENCES state_entries (state, hash)
);

-- The head's manifest (until_serial IS NULL) and the entries a manifest
-- names (the foreign key's check, the collector's).
CREATE INDEX version_entries_open ON version_entries (state, until_serial);
CREATE INDEX version_entries_by_hash ON version_entries (state, hash);
-- A commit's merge reads the head's entries of a few resources, every
-- module instance of each (resource: the address without module keys).
CREATE INDEX version_entries_by_resource ON version_entries (state, resource, since_serial);

CREATE TABLE kl_backfill (
    state       TEXT COLLATE "C" NOT NULL PRIMARY KEY REFERENCES states (name),
    below       BIGINT  NOT NULL,
    finished_at BIGINT
);

ALTER TABLE versions ADD COLUMN header BYTEA;

-- +goose Down
ALTER TABLE versions DROP COLUMN header;
DROP TABLE kl_backfill;
DROP TABLE version_entries;
DROP TABLE state_entries;
