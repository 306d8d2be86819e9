-- kl_encryption: the keys that have sealed this store (encryption at
-- rest, ADR 0066), one row per key id: a canary (the text "kilolock
-- encryption canary" sealed under that key for the place
-- "encryption/KEY_ID"), when the key first sealed, and when `kl store
-- reseal` retired it (NULL while it may seal); times in Unix nanoseconds
-- UTC. A store with a row is encrypted: a binary with no key
-- (KL_ENCRYPTION_KEY, KLBOT_ENCRYPTION_KEY), with none of its live key
-- ids, or whose first key is retired, is refused at open instead of
-- writing clear rows or failing mid-run. A new table no older binary
-- reads or writes: an expand (ADR 0048).

-- +goose Up
CREATE TABLE kl_encryption (
    key_id     TEXT    NOT NULL PRIMARY KEY,
    canary     BYTEA   NOT NULL,
    added_at   BIGINT  NOT NULL,
    retired_at BIGINT 
);

-- +goose Down
DROP TABLE kl_encryption;
