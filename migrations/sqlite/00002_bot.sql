-- klbot's tables (SQLite twin of postgres/00002_bot.sql). klbot runs on
-- PostgreSQL only and kl never reads or writes these tables; they exist here
-- so that both migration sets keep describing ONE schema (migrations/embed.go,
-- TestSchemaParity).

-- +goose Up

CREATE TABLE klbot_deliveries (
    id           TEXT    NOT NULL PRIMARY KEY,
    event        TEXT    NOT NULL,
    action       TEXT    NOT NULL,
    installation INTEGER NOT NULL,
    repo         TEXT    NOT NULL,
    received_at  INTEGER NOT NULL
) STRICT;

CREATE TABLE klbot_installations (
    id         INTEGER NOT NULL PRIMARY KEY,
    account    TEXT    NOT NULL,
    created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE klbot_check_runs (
    repo         TEXT    NOT NULL,
    head_sha     TEXT    NOT NULL,
    name         TEXT    NOT NULL,
    check_run_id INTEGER NOT NULL,
    PRIMARY KEY (repo, head_sha, name)
) STRICT;

CREATE TABLE klbot_projects (
    repo         TEXT    NOT NULL,
    pr           INTEGER NOT NULL,
    project      TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    installation INTEGER NOT NULL,
    head_sha     TEXT    NOT NULL,
    config       TEXT    NOT NULL,
    plan_run     TEXT    NOT NULL,
    apply_run    TEXT    NOT NULL,
    note         TEXT    NOT NULL,
    open         INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (repo, pr, project)
) STRICT;

CREATE INDEX klbot_projects_by_state ON klbot_projects (state, open);

-- +goose Down
DROP TABLE klbot_projects;
DROP TABLE klbot_check_runs;
DROP TABLE klbot_installations;
DROP TABLE klbot_deliveries;
