package engine

import (
	"context"
	"time"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/kilolock/kilolock/internal/plandiff"
)

// Terraform runs the Terraform (or OpenTofu) binary for one run at a time in
// an isolated work dir (its own TF_DATA_DIR and a local backend whose path is
// the run's own snapshot file — docs/terraform.md "Running many Terraform
// processes on one state safely"). Implementations must be safe for
// concurrent use by different runs.
type Terraform interface {
	// Plan materializes req.Snapshot, copies the configuration (req.Dir, or
	// req.Config when re-planning from a stored archive), runs init, plan -out
	// and show -json, and returns the saved plan with its footprint and intent.
	Plan(ctx context.Context, req PlanRequest) (*PlanResult, error)
	// Apply materializes req.Snapshot and applies req.PlanFile to it. On
	// failure or cancellation it still returns the state Terraform wrote
	// (ApplyResult.State non-nil) together with the error, so that what was
	// applied is committed, not lost (docs/design.md apply step 6).
	Apply(ctx context.Context, req ApplyRequest) (*ApplyResult, error)
	// InspectPlanFile reads the lineage and serial of the state snapshot a
	// saved plan was made against (the plan file's "tfstate" entry).
	// ErrInvalid if planFile is not a Terraform plan file.
	InspectPlanFile(planFile []byte) (PlanFileInfo, error)
}

// WorkDirRemover is implemented by a Terraform that keeps each run's work in
// a dir of its own (internal/terraform's Runner): RemoveWorkDir removes the
// work dir of run if one is left — a holder killed mid-apply leaves it,
// holding the snapshot Terraform wrote and the saved plan (secrets), until
// a stale sweep. Engine.Recover calls it once it has committed what that
// Terraform wrote: the dir is no longer needed. Nil when none is left.
type WorkDirRemover interface {
	RemoveWorkDir(run string) error
}

// UpgradedSnapshotReader is implemented by a Terraform that can read, from
// a saved plan, the snapshot it was made from as Terraform upgraded it to
// the providers' current schemas before refreshing (the plan file's
// "tfstate-prev", Terraform's PrevRunState). The commit compares it with
// what Terraform wrote to tell a re-encoding from a change (a provider that
// raised its schema version makes Terraform store every instance anew:
// tfstate.Reencoded, ADR 0038). UpgradedSnapshot returns nil, nil for a
// plan file without that entry (then every difference counts), and an
// error wrapping ErrInvalid for one that is not a plan file.
type UpgradedSnapshotReader interface {
	UpgradedSnapshot(planFile []byte) ([]byte, error)
}

// PlanRequest is one plan.
type PlanRequest struct {
	Run      string // the plan run id: names the work dir
	Dir      string // configuration directory (kl plan -C); or
	Config   []byte // a configuration archive made by a previous Plan
	Targets  []string
	VarFiles []string
	// Replace forces replacement of these instance addresses
	// (terraform plan -replace).
	Replace []string
	// Options are the plan options (-destroy, -refresh-only,
	// -refresh=false, -parallelism; ADR 0045); Options.Vars must name the
	// variables of Vars (VarNames), else ErrInvalid.
	Options PlanOptions
	// Vars are the plan's -var values, secrets: handed to Terraform only
	// through its environment, masked in logs and errors (ADR 0045).
	Vars     []Var
	Snapshot []byte // Terraform state v4 of the source version
	Progress func(Progress)
}

// PlanResult is a finished plan.
type PlanResult struct {
	PlanFile         []byte // the saved plan (a zip; holds secrets)
	Digest           string // "sha256:<hex>" of PlanFile
	Config           []byte // archive of the exact configuration planned, for apply and re-plan
	Footprint        Footprint
	Intent           Intent
	Summary          PlanSummary
	Lineage          string // of the snapshot planned against
	Serial           int64
	TerraformVersion string

	// Diff is what the plan does per resource instance and attribute,
	// sensitive values masked (ADR 0044); nil when the Terraform
	// implementation makes none (then none is stored or shown).
	Diff *plandiff.Diff
	// Planned are the planned values of the instances the plan writes
	// (plandiff.PlannedOf), for the revert check (ADR 0046). They hold
	// secrets: the engine compares them with snapshots and stores only
	// what it found. Nil: no revert check.
	Planned *plandiff.Planned
	// JSON is the plan JSON Terraform showed, decoded (terraform show
	// -json): the native lane proves its slice with it (closure's
	// checks). Never stored; nil when the implementation has none.
	JSON *tfjson.Plan
	// Notes are what the implementation says of how the run's providers
	// were installed, for the run's story (a "providers" marker each; ADR
	// 0061): a configuration without a lock file, a cached package moved
	// aside and reinstalled. None when all went as it should.
	Notes []string
}

// ApplyRequest is one apply of a saved plan against the snapshot it was
// made from (Terraform compares lineage and serial only — docs/terraform.md).
type ApplyRequest struct {
	Run      string // the apply run id: names the work dir
	PlanFile []byte
	Config   []byte // PlanResult.Config of the plan
	Snapshot []byte
	Progress func(Progress)
	// Parallelism is the plan's -parallelism (PlanOptions.Parallelism),
	// which bounds the apply's operations too (ADR 0045); 0: Terraform's
	// default.
	Parallelism int
	// Vars are the plan's -var values (ArtifactVars). A saved plan holds
	// every variable's value, so Terraform is given only those of the
	// root module's ephemeral variables, which it does not save.
	Vars []Var
	// Checkpoint, if set, is handed the run's state file as Terraform
	// rewrites it while it applies: after a resource completed or failed,
	// at most every few seconds, only when the bytes changed, and once more
	// when Terraform has finished. It is called from one goroutine of the
	// implementation's own, never from the one reading Terraform's output,
	// so a slow Checkpoint delays checkpoints, not Terraform. The bytes
	// hold secrets. The engine stores them as ArtifactApplyCheckpoint: what
	// Terraform wrote survives a holder killed mid-apply (Engine.Recover).
	Checkpoint func(state []byte)
}

// ApplyResult is the state Terraform wrote. Changed counts resources
// Terraform reported as done. Log is what Terraform said it did (ADR
// 0047), sensitive values masked — also when the apply failed or was
// interrupted; nil when Terraform's apply did not run (init failed) or
// the implementation reads no UI stream. The engine keeps it as the run's
// ArtifactApplyLog.
type ApplyResult struct {
	State   []byte
	Changed int
	Log     *ApplyLog
	// Notes: as PlanResult.Notes, of the apply's own init.
	Notes []string
}

// PlanFileInfo is what a saved plan file says about its base snapshot.
type PlanFileInfo struct {
	Lineage          string
	Serial           int64
	TerraformVersion string
}

// Progress is one progress report of a long Terraform step, for a terminal.
type Progress struct {
	Phase   string // "init", "plan", "show", "apply"
	Elapsed time.Duration
	Done    int // resources finished in this phase
	Total   int // resources expected (0 if unknown)
	Current string
}
