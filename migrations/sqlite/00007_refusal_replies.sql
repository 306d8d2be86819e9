-- klbot_refusal_replies: when klbot last replied to LOGIN on pull request
-- (repo, pr) about a refusal of the commenter (no write permission, a
-- command that does not parse; issue 11 §1). Anyone can comment and a reply
-- counts against the installation's content-creation limit, so such a
-- refusal gets a reaction always and a reply at most once per user and
-- pull request within a window. reply_key is the sticky key of that reply
-- ("reply-COMMENT"): a retried job of the same comment replies again (it
-- edits its own reply). replied_at is Unix nanoseconds UTC.

-- +goose Up
CREATE TABLE klbot_refusal_replies (
    repo       TEXT    NOT NULL,
    pr         INTEGER NOT NULL,
    login      TEXT    NOT NULL,
    reply_key  TEXT    NOT NULL,
    replied_at INTEGER NOT NULL,
    PRIMARY KEY (repo, pr, login)
) STRICT;

-- +goose Down
DROP TABLE klbot_refusal_replies;
