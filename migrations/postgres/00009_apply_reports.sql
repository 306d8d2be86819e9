-- klbot_apply_reports: what klbot last reported of the apply run of each
-- pull request's project (ADR 0042, issue 11 §5 and §14), so that its
-- reconciliation reports an apply once when it ends — also one whose
-- replica died mid-apply, ended by the lease sweep — and again when it
-- changes outside klbot (`kl run recover`, `kl run unfence`), and not on
-- every round. reported is the run's facts as reported (status, end,
-- committed version, recoverable, fence lifted); unsettled is 1 while
-- something outside klbot may still change the run (it is recoverable or
-- holds a fence), so it is watched after its pull request closed.
-- reported_at is Unix nanoseconds UTC.

-- +goose Up
CREATE TABLE klbot_apply_reports (
    repo        TEXT   NOT NULL,
    pr          BIGINT NOT NULL,
    project     TEXT   NOT NULL,
    apply_run   TEXT   NOT NULL,
    reported    TEXT   NOT NULL,
    unsettled   BIGINT NOT NULL,
    reported_at BIGINT NOT NULL,
    PRIMARY KEY (repo, pr, project)
);

-- "which pull request and project does open plan P belong to" (an overlap
-- is checked against that pull request before it is reported).
CREATE INDEX klbot_projects_by_plan ON klbot_projects (plan_run);

-- +goose Down
DROP INDEX klbot_projects_by_plan;
DROP TABLE klbot_apply_reports;
