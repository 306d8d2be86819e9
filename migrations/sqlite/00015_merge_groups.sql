-- klbot_merge_groups: the merge groups of GitHub's merge queue klbot
-- judged (ADR 0058), by (repo, head_sha): the group's pull requests in
-- queue order as JSON ([{"pr": N, "head": "SHA"}, …]; the first merges
-- first), the branch it merges into, when it was judged, and GitHub's
-- reason once it was destroyed (merged, dequeued, invalidated; "" before).
-- The merge-time applies of a merged group run in its queue order. Times
-- are Unix nanoseconds UTC. A new table no older binary reads or writes:
-- an expand (ADR 0048).

-- +goose Up
CREATE TABLE klbot_merge_groups (
    repo      TEXT   NOT NULL,
    head_sha  TEXT   NOT NULL,
    base_ref  TEXT   NOT NULL,
    prs       TEXT   NOT NULL,
    judged_at INTEGER NOT NULL,
    destroyed TEXT   NOT NULL DEFAULT '',
    PRIMARY KEY (repo, head_sha)
) STRICT;

-- +goose Down
DROP TABLE klbot_merge_groups;
