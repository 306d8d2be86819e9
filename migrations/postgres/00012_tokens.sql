-- +goose Up

-- kl_tokens: the API tokens of `kl token create` (ADR 0054), for
-- Terraform's http backend, the API and the pages. hash is the SHA-256 of
-- the whole token string (the secret is never stored); id is its ULID,
-- the public half that `kl token list` and `kl token revoke` name. states
-- is a doublestar glob over state names; read_only is 1 for a token that
-- may only read. Times are Unix nanoseconds UTC; expires_at and
-- revoked_at are NULL while they do not apply. A new table no older
-- binary reads or writes: an expand (ADR 0048).
CREATE TABLE kl_tokens (
    id         TEXT    NOT NULL PRIMARY KEY,
    hash       BYTEA   NOT NULL,
    actor      TEXT    NOT NULL,
    read_only  BIGINT  NOT NULL,
    states     TEXT    NOT NULL,
    created_at BIGINT  NOT NULL,
    created_by TEXT    NOT NULL,
    expires_at BIGINT,
    revoked_at BIGINT,
    revoked_by TEXT
);

-- +goose Down
DROP TABLE kl_tokens;
