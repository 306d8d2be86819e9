-- +goose Up

-- kl_compat: the store's compatibility level (ADR 0048), one row (id 1),
-- written by the Go migration that sets a level (store.LevelMigration,
-- first number 11) and read by every write transaction before it writes:
-- a binary whose level is below level must not write; one below read_level
-- must not read either. raised_by is the version of the binary whose
-- migration set the level, raised_at when (Unix nanoseconds, UTC), why
-- what changed.
CREATE TABLE kl_compat (
    id         INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    level      INTEGER NOT NULL CHECK (level >= 1),
    read_level INTEGER NOT NULL CHECK (read_level >= 1 AND read_level <= level),
    raised_by  TEXT    NOT NULL,
    raised_at  INTEGER NOT NULL,
    why        TEXT    NOT NULL
) STRICT;

-- +goose Down
DROP TABLE kl_compat;
