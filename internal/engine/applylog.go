package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// ArtifactApplyLog (apply run) is what Terraform said it did in the apply
// (ApplyLog, JSON): per resource instance, every diagnostic, its totals
// line (ADR 0047). Sensitive values are masked in it by the Terraform
// adapter; it is kept with the run's artifacts because it grows with the
// plan (one entry per resource instance) and is read only to be shown.
const ArtifactApplyLog = "apply-log.json"

// ApplyLog is what Terraform said it did in one apply, from its
// machine-readable UI stream (`terraform apply -json`, ADR 0047): each
// resource instance it planned to change, with what became of it; every
// diagnostic, errors and warnings, in the order Terraform wrote them; and
// its change_summary — "Apply complete! Resources: 3 added, 0 changed, 0
// destroyed." — which Terraform writes only when the apply succeeds (nil
// then otherwise). Values the plan, the state or Kilolock's TF_VAR_*
// masking mark sensitive are masked in the diagnostics by the adapter
// before the engine sees them.
type ApplyLog struct {
	Resources   []ResourceApply `json:"resources"`
	Diagnostics []Diagnostic    `json:"diagnostics,omitempty"`
	Totals      *ChangeTotals   `json:"totals,omitempty"`
}

// ResourceOutcome is what became of one resource instance in an apply
// (ResourceApply.Outcome).
type ResourceOutcome string

// Resource outcomes, from Terraform's UI stream.
const (
	// ResourceApplied: every operation Terraform started on the instance
	// completed (apply_complete; a replacement takes two).
	ResourceApplied ResourceOutcome = "applied"
	// ResourceErrored: Terraform reported the operation failed
	// (apply_errored), or an error diagnostic names the instance.
	ResourceErrored ResourceOutcome = "errored"
	// ResourceStarted: Terraform started an operation on the instance and
	// reported no end of it: it was interrupted or killed meanwhile.
	ResourceStarted ResourceOutcome = "started"
	// ResourceNotStarted: planned, but Terraform never started it — it
	// stopped first (an error elsewhere, an interrupt).
	ResourceNotStarted ResourceOutcome = "not-started"
)

// ResourceApply is one resource instance of an ApplyLog.
type ResourceApply struct {
	// Address is the instance: `module.app.terraform_data.web[0]`.
	Address string `json:"address"`
	// Action is Terraform's planned_change action: create, update,
	// delete, replace, read — Terraform's words, kept as they are (a
	// newer Terraform may add some).
	Action  string          `json:"action"`
	Outcome ResourceOutcome `json:"outcome"`
	// Elapsed is the time from Terraform's first apply_start of the
	// instance to its last apply_complete or apply_errored (its last
	// apply_progress for one still running), by the @timestamp Terraform
	// wrote on each (microseconds; Terraform's own elapsed_seconds is whole
	// seconds); 0 for an instance never started.
	Elapsed Duration `json:"elapsed"`
	// IDKey and IDValue are the object's id as Terraform printed it on
	// completion ("id", "i-0abc…"): an identifier, not an attribute value;
	// empty when Terraform gave none (a delete, an error).
	IDKey   string `json:"id_key,omitempty"`
	IDValue string `json:"id_value,omitempty"`
}

// ChangeTotals is Terraform's change_summary message: its counts and its
// own line of words (Message), shown as Terraform wrote it.
type ChangeTotals struct {
	Add       int    `json:"add"`
	Change    int    `json:"change"`
	Import    int    `json:"import"`
	Remove    int    `json:"remove"`
	Operation string `json:"operation"` // "apply", "destroy", "refresh"
	Message   string `json:"message"`   // "Apply complete! Resources: 3 added, 0 changed, 0 destroyed."
}

// Count returns how many resource instances of l have outcome o.
func (l *ApplyLog) Count(o ResourceOutcome) int {
	if l == nil {
		return 0
	}
	n := 0
	for _, r := range l.Resources {
		if r.Outcome == o {
			n++
		}
	}
	return n
}

// storeApplyLog keeps what Terraform said it did as the run's
// ArtifactApplyLog, best effort: a failure is logged, never the run's end
// (the state Terraform wrote is what must not be lost).
func (a *applier) storeApplyLog(ctx context.Context, res *ApplyResult) {
	if res == nil || res.Log == nil {
		return
	}
	b, err := json.Marshal(res.Log)
	if err == nil {
		err = a.e.Store.PutArtifact(ctx, a.run.ID, ArtifactApplyLog, b)
	}
	if err != nil {
		a.e.log().Error("storing the apply log", "run", a.run.ID, "err", err)
	}
}

// ApplyLog returns what Terraform said it did in apply run id
// (ArtifactApplyLog, ADR 0047). ErrNotFound when the run is unknown, is a
// plan, or has none: Terraform never ran its apply (a refusal, a failure
// before it), or an older kl applied it.
func (e *Engine) ApplyLog(ctx context.Context, id string) (*ApplyLog, error) {
	run, err := e.getRun(ctx, id)
	if err != nil {
		return nil, err
	}
	if run.Kind != KindApply {
		return nil, Errorf(ErrNotFound, "run %s is a plan: its apply run has the apply log", id)
	}
	return e.applyLogOf(ctx, id)
}

// applyLogOf reads the apply log of apply run id; ErrNotFound when it has
// none.
func (e *Engine) applyLogOf(ctx context.Context, id string) (*ApplyLog, error) {
	b, err := e.Store.GetArtifact(ctx, id, ArtifactApplyLog)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, Errorf(ErrNotFound, "apply run %s has no apply log (Terraform did not apply, or an older kl ran it)", id)
		}
		return nil, fmt.Errorf("reading the apply log of run %s: %w", id, err)
	}
	var l ApplyLog
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("reading the apply log of run %s: %w", id, err)
	}
	return &l, nil
}
