-- klbot's tables (PostgreSQL). klbot is PostgreSQL-only; the SQLite twin
-- (sqlite/00002_bot.sql) creates the same tables so that both sets keep
-- describing ONE schema (see migrations/embed.go, TestSchemaParity); kl never
-- touches them. River's own tables (river_job, …) are NOT here: River's
-- migrator (rivermigrate) owns them and klbot runs it at start.
-- Times are BIGINT Unix nanoseconds UTC, like the rest of the schema.

-- +goose Up

-- klbot_deliveries: every webhook delivery accepted, by X-GitHub-Delivery
-- (docs/github.md: a redelivery carries the same id). Sink.Accept inserts
-- the row and the delivery's jobs in one transaction; ON CONFLICT DO NOTHING
-- tells a redelivery.
CREATE TABLE klbot_deliveries (
    id           TEXT   NOT NULL PRIMARY KEY,
    event        TEXT   NOT NULL,
    action       TEXT   NOT NULL,
    installation BIGINT NOT NULL,
    repo         TEXT   NOT NULL,
    received_at  BIGINT NOT NULL
);

-- klbot_installations: the app's installations (installation created /
-- deleted webhooks). account is the login of the account it is installed on.
CREATE TABLE klbot_installations (
    id         BIGINT NOT NULL PRIMARY KEY,
    account    TEXT   NOT NULL,
    created_at BIGINT NOT NULL
);

-- klbot_check_runs: the check run klbot made for (repo, head SHA, name), so
-- that a retried job updates it instead of creating a second one.
CREATE TABLE klbot_check_runs (
    repo         TEXT   NOT NULL,
    head_sha     TEXT   NOT NULL,
    name         TEXT   NOT NULL,
    check_run_id BIGINT NOT NULL,
    PRIMARY KEY (repo, head_sha, name)
);

-- klbot_projects: per pull request and kl.yaml project, the latest plan and
-- apply runs and the bot's latest note (a refusal by a bot rule, "no longer
-- touched"): what the sticky comment is composed from. config is the JSON of
-- the project's kl.yaml entry at head_sha (apply trigger, requirements);
-- open is 1 while the pull request is open.
CREATE TABLE klbot_projects (
    repo         TEXT   NOT NULL,
    pr           BIGINT NOT NULL,
    project      TEXT   NOT NULL,
    state        TEXT   NOT NULL,
    installation BIGINT NOT NULL,
    head_sha     TEXT   NOT NULL,
    config       TEXT   NOT NULL,
    plan_run     TEXT   NOT NULL,
    apply_run    TEXT   NOT NULL,
    note         TEXT   NOT NULL,
    open         BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (repo, pr, project)
);

-- "the open pull requests with a project on state S" (refresh after a commit).
CREATE INDEX klbot_projects_by_state ON klbot_projects (state, open);

-- +goose Down
DROP TABLE klbot_projects;
DROP TABLE klbot_check_runs;
DROP TABLE klbot_installations;
DROP TABLE klbot_deliveries;
