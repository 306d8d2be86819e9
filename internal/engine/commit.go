package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// applyAndCommit runs Terraform on the plan's own snapshot, compares what
// changed with the plan, and commits (DESIGN.md apply steps 4–6).
func (a *applier) applyAndCommit(ctx context.Context) (*ApplyOutcome, error) {
	e := a.e
	env := a.pf.run.Envelope
	base, err := e.Store.Snapshot(ctx, a.state.Name, env.SourceSerial)
	if err != nil {
		a.abort(ctx, StatusFailed, fmt.Sprintf("reading snapshot %d: %v", env.SourceSerial, err), StatusPlanned)
		return nil, fmt.Errorf("reading snapshot %d of state %s: %w", env.SourceSerial, a.state.Name, err)
	}
	baseState, err := tfstate.Parse(base)
	if err != nil {
		a.abort(ctx, StatusFailed, fmt.Sprintf("parsing snapshot %d: %v", env.SourceSerial, err), StatusPlanned)
		return nil, fmt.Errorf("parsing snapshot %d of state %s: %w", env.SourceSerial, a.state.Name, err)
	}

	res, applyErr := e.Terraform.Apply(ctx, ApplyRequest{Run: a.run.ID, PlanFile: a.pf.planFile, Config: a.pf.config, Snapshot: base, Progress: a.in.Progress})
	// From here on ctx may be cancelled (Ctrl-C): finish with a context that
	// is not, so that what Terraform wrote is committed and reservations are
	// released exactly once.
	cctx, cancel := background(ctx)
	defer cancel()
	status := StatusApplied
	reason := ""
	if applyErr != nil {
		status, reason = StatusFailed, fmt.Sprintf("terraform apply: %v", applyErr)
		if errors.Is(applyErr, context.Canceled) || ctx.Err() != nil {
			status, reason = StatusInterrupted, "interrupted during terraform apply: committed what Terraform wrote"
		}
	}
	if res == nil || res.State == nil {
		// Terraform wrote nothing (it did not start, or failed in init).
		a.abort(ctx, status, reason, StatusPlanned)
		return nil, fmt.Errorf("applying run %s: %w", a.run.ID, applyErr)
	}
	// Keep exactly what Terraform wrote before anything else can fail.
	if err := e.Store.PutArtifact(cctx, a.run.ID, ArtifactApplyResult, res.State); err != nil {
		e.log().Error("storing apply result", "run", a.run.ID, "err", err)
	}
	result, err := tfstate.Parse(res.State)
	if err != nil {
		a.abort(ctx, StatusFailed, fmt.Sprintf("terraform wrote an unreadable state (kept as artifact %s): %v", ArtifactApplyResult, err), StatusStale)
		return nil, fmt.Errorf("parsing the state written by run %s: %w", a.run.ID, err)
	}
	changed, err := parseAddresses(tfstate.Changed(baseState, result))
	if err != nil {
		a.abort(ctx, StatusFailed, fmt.Sprintf("reading changed addresses: %v", err), StatusStale)
		return nil, fmt.Errorf("reading addresses changed by run %s: %w", a.run.ID, err)
	}
	planned := env.Footprint.Write
	drift := &Drift{Unplanned: changed.Minus(planned), Unchanged: planned.Minus(changed)}
	exact := len(drift.Unplanned) == 0 && len(drift.Unchanged) == 0
	if len(changed) == 0 && applyErr != nil {
		// Nothing was applied: the plan may be applied again.
		a.abort(ctx, status, reason, StatusPlanned)
		return nil, fmt.Errorf("applying run %s: %w", a.run.ID, applyErr)
	}
	applied := Marker{Kind: MarkerApplied, Count: len(changed), Addresses: changed}
	if applyErr != nil {
		applied.Reason = reason
	}
	if err := e.Store.AddMarkers(cctx, a.run.ID, applied); err != nil {
		e.log().Error("recording applied marker", "run", a.run.ID, "err", err)
	}

	v, err := a.commit(cctx, baseState, result, planned, exact, drift, status, reason, applyErr != nil, true)
	if errors.Is(err, ErrLeaseLost) {
		// Our reservations expired: others may have written our addresses.
		// Merge only what is unchanged at the head since the plan; keep the
		// head elsewhere and say so. Nothing Terraform wrote is dropped
		// silently: the raw result is kept as an artifact.
		reason = "lease lost before commit: merged only addresses unchanged at the head since the plan; " + reason
		v, err = a.commit(cctx, baseState, result, nil, false, drift, StatusFailed, reason, true, false)
	}
	if err != nil {
		a.abort(ctx, StatusFailed, fmt.Sprintf("committing (Terraform's result is kept as artifact %s): %v", ArtifactApplyResult, err), StatusStale)
		return nil, fmt.Errorf("committing run %s: %w", a.run.ID, err)
	}
	out := &ApplyOutcome{Version: v}
	if out.Run, err = e.Store.GetRun(cctx, a.run.ID); err != nil {
		return nil, fmt.Errorf("reading run %s: %w", a.run.ID, err)
	}
	if applyErr != nil {
		return out, fmt.Errorf("applying run %s (partial result committed as version %d): %w", a.run.ID, v.Serial, applyErr)
	}
	return out, nil
}

// commit writes version head+1: the snapshot-merge of result into the head
// (TERRAFORM.md "Snapshot-merge"). written are the addresses merged
// unconditionally (the write set we hold reservations on); every other
// change is merged only where the head still equals the plan's base.
func (a *applier) commit(ctx context.Context, base, result *tfstate.State, written AddressSet, exact bool, drift *Drift,
	status RunStatus, reason string, partial, requireRes bool) (*Version, error) {
	e := a.e
	pf := a.pf
	planStatus := StatusApplied
	if status != StatusApplied {
		planStatus = StatusFailed
	}
	v, err := e.Store.Commit(ctx, CommitRequest{
		State: a.state.Name, Run: a.run.ID, RequireReservations: requireRes,
		Merge: func(head Version, snapshot []byte) (CommitResult, error) {
			headState, err := tfstate.Parse(snapshot)
			if err != nil {
				return CommitResult{}, fmt.Errorf("parsing head %d: %w", head.Serial, err)
			}
			serial := head.Serial + 1
			merged, rep, err := tfstate.Merge(headState, base, result, written.Strings(), serial)
			if err != nil {
				return CommitResult{}, fmt.Errorf("merging into head %d: %w", head.Serial, err)
			}
			doc, err := merged.Marshal()
			if err != nil {
				return CommitResult{}, fmt.Errorf("encoding version %d: %w", serial, err)
			}
			changed, err := parseAddresses(rep.Changed)
			if err != nil {
				return CommitResult{}, err
			}
			d := *drift
			if d.Kept, err = parseAddresses(rep.Kept); err != nil {
				return CommitResult{}, err
			}
			if d.Overwritten, err = parseAddresses(rep.Overwritten); err != nil {
				return CommitResult{}, err
			}
			isExact := exact && len(d.Kept) == 0 && len(d.Overwritten) == 0
			prov := Provenance{
				Run: a.run.ID, PlanRun: a.plan.ID, AppliedPlanRun: pf.run.ID,
				SourceSerial: pf.run.Envelope.SourceSerial, CommittedSerial: serial,
				PlanDigest: pf.run.Envelope.PlanDigest, Mode: CommitSnapshotMerge,
				Exact: isExact, Partial: partial, Actor: a.run.Actor, PR: a.run.PR,
			}
			if !isExact {
				prov.Drift = &d
			}
			markers := []Marker{}
			if !isExact {
				markers = append(markers, Marker{Kind: MarkerDrift, Drift: &d, Reason: driftText(&d)})
			}
			markers = append(markers, Marker{Kind: MarkerCommitted, Serial: serial, FromSerial: head.Serial, Mode: CommitSnapshotMerge, Count: len(changed)})
			if status != StatusApplied {
				markers = append(markers, Marker{Kind: MarkerFailed, Reason: reason})
			}
			return CommitResult{
				Snapshot: doc, Changed: changed, Resources: merged.ResourceCount(), Provenance: prov,
				UpdateRun: func(r *Run) error {
					if r.CommittedSerial != 0 {
						// A run commits once (a retried commit must not write twice).
						return fmt.Errorf("%w: run %s already committed version %d", ErrConflict, r.ID, r.CommittedSerial)
					}
					r.Status = status
					r.Reason = reason
					r.CommittedSerial = serial
					t := e.now()
					r.FinishedAt = &t
					return nil
				},
				Markers: markers,
			}, nil
		},
	})
	if err != nil {
		return nil, err
	}
	e.finishPlans(ctx, a, planStatus, v.Serial)
	return &v, nil
}

// finishPlans marks the reviewed plan consumed: applied, or failed when the
// apply failed part-way (its partial result is version serial).
func (e *Engine) finishPlans(ctx context.Context, a *applier, s RunStatus, serial int64) {
	if _, err := e.Store.UpdateRun(ctx, a.plan.ID, []RunStatus{StatusApplying}, func(r *Run) error {
		r.Status = s
		if s != StatusApplied {
			r.Reason = fmt.Sprintf("apply run %s failed part-way; its partial result is version %d: re-plan", a.run.ID, serial)
		}
		return nil
	}); err != nil {
		e.log().Error("finishing plan", "run", a.plan.ID, "err", err)
	}
}

func driftText(d *Drift) string {
	var parts []string
	if len(d.Unplanned) > 0 {
		parts = append(parts, "changed but not planned: "+strings.Join(d.Unplanned.Strings(), ", "))
	}
	if len(d.Unchanged) > 0 {
		parts = append(parts, "planned but not changed: "+strings.Join(d.Unchanged.Strings(), ", "))
	}
	if len(d.Kept) > 0 {
		parts = append(parts, "not merged, the head changed them since the plan: "+strings.Join(d.Kept.Strings(), ", "))
	}
	if len(d.Overwritten) > 0 {
		parts = append(parts, "written over a change the head made since the plan (reservations lapsed?): "+strings.Join(d.Overwritten.Strings(), ", "))
	}
	return strings.Join(parts, "; ")
}
