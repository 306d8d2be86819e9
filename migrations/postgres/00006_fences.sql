-- A fence (ADR 0035): when an apply's lease runs out after its Terraform
-- started (an "apply-started" marker) and before it committed, the lease
-- sweep does not delete its write reservations: it sets fenced_at (Unix
-- nanoseconds, UTC, the sweep's now) and they stay, live whatever expires_at
-- says, until `kl run recover` commits what the run's Terraform wrote, its
-- holder commits after all, or `kl run unfence` lifts them. NULL: a
-- reservation held by lease.

-- +goose Up
ALTER TABLE reservations ADD COLUMN fenced_at BIGINT;

-- +goose Down
ALTER TABLE reservations DROP COLUMN fenced_at;
