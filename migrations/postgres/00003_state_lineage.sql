-- One Terraform lineage is one Kilolock state: Terraform tells states apart
-- by lineage, and adopting one state document twice would fork it (engine
-- InitState). The engine checks first, to name the state that has it; this
-- index makes the rule hold when two `kl state init` race.

-- +goose Up
CREATE UNIQUE INDEX states_lineage ON states (lineage);

-- +goose Down
DROP INDEX states_lineage;
