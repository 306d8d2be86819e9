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

	// Say that Terraform runs before it does, in the run's own update: a
	// run the lease sweep ended meanwhile does not start Terraform, and
	// every story can tell whether Terraform ran (and a lapsed one may
	// have changed infrastructure: Recover).
	if _, err := e.Store.UpdateRun(ctx, a.run.ID, []RunStatus{StatusApplying}, func(*Run) error { return nil },
		Marker{Kind: MarkerApplyStarted, Serial: env.SourceSerial}); err != nil {
		err = leaseLost(a.run.ID, err)
		a.abort(ctx, StatusFailed, fmt.Sprintf("recording the start of terraform apply: %v", err), StatusPlanned)
		return nil, fmt.Errorf("recording the start of terraform apply for run %s: %w", a.run.ID, err)
	}
	res, applyErr := e.Terraform.Apply(ctx, ApplyRequest{Run: a.run.ID, PlanFile: a.pf.planFile, Config: a.pf.config, Snapshot: base,
		Progress: a.in.Progress, Checkpoint: a.checkpoint(ctx)})
	// From here on ctx may be cancelled (Ctrl-C): finish with a context that
	// is not, so that what Terraform wrote is committed and reservations are
	// released exactly once.
	cctx, cancel := background(ctx)
	defer cancel()
	status := StatusApplied
	reason := ""
	if applyErr != nil {
		status, reason = StatusFailed, applyErr.Error() // the runner says "terraform apply: …"
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
		a.abort(ctx, StatusFailed, fmt.Sprintf("terraform wrote an unreadable state (kept as artifact %s): %v", ArtifactApplyResult, err), StatusFailed)
		return nil, fmt.Errorf("parsing the state written by run %s: %w", a.run.ID, err)
	}
	changed, err := parseAddresses(tfstate.Changed(baseState, result))
	if err != nil {
		a.abort(ctx, StatusFailed, fmt.Sprintf("reading changed addresses: %v", err), StatusFailed)
		return nil, fmt.Errorf("reading addresses changed by run %s: %w", a.run.ID, err)
	}
	planned := env.Footprint.Write
	tainted, err := parseAddresses(result.Tainted())
	if err != nil {
		a.abort(ctx, StatusFailed, fmt.Sprintf("reading tainted addresses: %v", err), StatusFailed)
		return nil, fmt.Errorf("reading addresses tainted by run %s: %w", a.run.ID, err)
	}
	spec := commitSpec{
		written: planned, status: status, reason: reason, partial: applyErr != nil, requireRes: true,
		drift: Drift{Unplanned: changed.Minus(planned), Unchanged: planned.Minus(changed), Tainted: tainted.Overlapping(changed)},
	}
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

	v, err := a.commit(cctx, baseState, result, spec)
	leaseLost := errors.Is(err, ErrLeaseLost)
	if leaseLost {
		// Our reservations expired: others may have written our addresses
		// or hold them now. Merge only what the head has not changed since
		// the plan and no other live run holds; keep the head elsewhere and
		// say so. Nothing Terraform wrote is dropped silently: the raw
		// result is kept as an artifact.
		spec.written, spec.requireRes, spec.status, spec.partial = nil, false, StatusFailed, true
		spec.reason = "lease lost before commit: merged only addresses unchanged at the head since the plan and not held by another run"
		if reason != "" {
			spec.reason += "; " + reason
		}
		if spec.keep, err = a.heldByOthers(cctx, changed); err == nil {
			v, err = a.commit(cctx, baseState, result, spec)
		}
	}
	if err != nil {
		a.abort(ctx, StatusFailed, fmt.Sprintf("committing (Terraform's result is kept as artifact %s): %v", ArtifactApplyResult, err), StatusFailed)
		return nil, fmt.Errorf("committing run %s: %w", a.run.ID, err)
	}
	out := &ApplyOutcome{Version: v}
	if out.Run, err = e.Store.GetRun(cctx, a.run.ID); err != nil {
		return nil, fmt.Errorf("reading run %s: %w", a.run.ID, err)
	}
	if applyErr != nil {
		err = fmt.Errorf("partial result committed as version %d: %w", v.Serial, applyErr)
	}
	if leaseLost {
		// The run failed even when Terraform did not: say so to the caller.
		lost := fmt.Errorf("%w: the reservations expired before the commit; version %d holds only what the head had not changed since the plan", ErrLeaseLost, v.Serial)
		if err != nil {
			lost = fmt.Errorf("%w; %w", lost, err)
		}
		err = lost
	}
	return out, err
}

// checkpoint returns the ApplyRequest.Checkpoint of the run: it stores the
// state Terraform has written so far as ArtifactApplyCheckpoint,
// overwriting the last one. Best effort: a failure is logged and the apply
// goes on (the result is stored and committed when Terraform returns; the
// checkpoint only matters if this process dies first). It stores also
// after ctx is cancelled: an interrupted Terraform still writes.
func (a *applier) checkpoint(ctx context.Context) func([]byte) {
	return func(state []byte) {
		bctx, cancel := background(ctx)
		defer cancel()
		if err := a.e.Store.PutArtifact(bctx, a.run.ID, ArtifactApplyCheckpoint, state); err != nil {
			a.e.log().Warn("storing apply checkpoint (the apply goes on)", "run", a.run.ID, "bytes", len(state), "err", err)
		}
	}
}

// heldByOthers returns the addresses of changed that another run holds a
// live reservation on (any mode, prefixes included).
func (a *applier) heldByOthers(ctx context.Context, changed AddressSet) ([]string, error) {
	res, err := a.e.Store.Reservations(ctx, a.state.Name)
	if err != nil {
		return nil, fmt.Errorf("reading reservations of state %s: %w", a.state.Name, err)
	}
	var out []string
	for _, c := range changed {
		for _, r := range res {
			if r.Run != a.run.ID && c.Overlaps(r.Address) {
				out = append(out, string(c))
				break
			}
		}
	}
	return out, nil
}

// commitSpec says how a commit merges and ends the run.
type commitSpec struct {
	// written are merged unconditionally (the write set we hold
	// reservations on); every other change is merged only where the head
	// still equals the plan's base and it is not in keep.
	written AddressSet
	keep    []string
	// drift is what the apply changed against the plan; Kept and
	// Overwritten are added by the merge.
	drift      Drift
	status     RunStatus
	reason     string
	partial    bool // Terraform failed or was interrupted part-way
	requireRes bool // fail with ErrLeaseLost unless the run still holds reservations
	// recovered makes the commit a recovery (Engine.Recover) of a run that
	// ended without committing: the run keeps its status, reason and end
	// and gains only CommittedSerial; this marker (Serial and Count set
	// here) is appended instead of a "failed" one; the plan is left to the
	// caller.
	recovered *Marker
}

// commit writes version head+1: the snapshot-merge of result into the head
// (TERRAFORM.md "Snapshot-merge"), with provenance, markers and the run's
// final status, in one store transaction.
func (a *applier) commit(ctx context.Context, base, result *tfstate.State, spec commitSpec) (*Version, error) {
	e := a.e
	pf := a.pf
	planStatus := StatusApplied
	if spec.status != StatusApplied {
		planStatus = StatusFailed
	}
	v, err := e.Store.Commit(ctx, CommitRequest{
		State: a.state.Name, Run: a.run.ID, RequireReservations: spec.requireRes,
		Merge: func(head Version, snapshot []byte) (CommitResult, error) {
			headState, err := tfstate.Parse(snapshot)
			if err != nil {
				return CommitResult{}, fmt.Errorf("parsing head %d: %w", head.Serial, err)
			}
			serial := head.Serial + 1
			merged, rep, err := tfstate.MergeKeeping(headState, base, result, spec.written.Strings(), spec.keep, serial)
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
			d := spec.drift
			if d.Kept, err = parseAddresses(rep.Kept); err != nil {
				return CommitResult{}, err
			}
			if d.Overwritten, err = parseAddresses(rep.Overwritten); err != nil {
				return CommitResult{}, err
			}
			exact := d.empty()
			prov := Provenance{
				Run: a.run.ID, PlanRun: a.plan.ID,
				SourceSerial: pf.run.Envelope.SourceSerial, CommittedSerial: serial,
				PlanDigest: pf.run.Envelope.PlanDigest, Mode: CommitSnapshotMerge,
				Exact: exact, Partial: spec.partial, Actor: a.run.Actor, PR: a.run.PR,
			}
			markers := []Marker{}
			if !exact {
				prov.Drift = &d
				markers = append(markers, Marker{Kind: MarkerDrift, Drift: &d, Reason: driftText(&d)})
			}
			markers = append(markers, Marker{Kind: MarkerCommitted, Serial: serial, FromSerial: head.Serial, Mode: CommitSnapshotMerge, Count: len(changed)})
			switch {
			case spec.recovered != nil:
				m := *spec.recovered
				m.Serial, m.Count, m.Addresses = serial, len(changed), d.Kept
				m.Reason = recoveredText(m.Extra[extraArtifact], serial, d.Kept)
				markers = append(markers, m)
			case spec.status != StatusApplied:
				markers = append(markers, Marker{Kind: MarkerFailed, Reason: spec.reason})
			}
			return CommitResult{
				Snapshot: doc, Changed: changed, Resources: merged.ResourceCount(), Provenance: prov,
				UpdateRun: func(r *Run) error {
					if r.CommittedSerial != 0 {
						// A run commits once (a retried commit, or a second
						// recovery, must not write twice).
						return fmt.Errorf("%w: run %s already committed version %d", ErrConflict, r.ID, r.CommittedSerial)
					}
					if spec.recovered != nil {
						if r.InProgress() {
							return fmt.Errorf("%w: run %s is %s again", ErrConflict, r.ID, r.Status)
						}
						r.CommittedSerial = serial
						return nil
					}
					r.Status = spec.status
					r.Reason = spec.reason
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
	if spec.recovered == nil {
		e.finishPlans(ctx, a, planStatus, v.Serial)
	}
	return &v, nil
}

// finishPlans marks the reviewed plan consumed: applied, or failed when the
// apply failed part-way (its partial result is version serial). A plan the
// lease sweep already failed for this run (its reservations lapsed before
// the lease-lost commit) gets the precise reason; a plan another apply
// claimed since is left alone.
func (e *Engine) finishPlans(ctx context.Context, a *applier, s RunStatus, serial int64) {
	if _, err := e.Store.UpdateRun(ctx, a.plan.ID, []RunStatus{StatusApplying, StatusFailed}, func(r *Run) error {
		if err := claimedBy(r, a.run.ID); err != nil {
			return err
		}
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
	if len(d.Tainted) > 0 {
		parts = append(parts, "tainted (created but not finished; the next plan replaces them): "+strings.Join(d.Tainted.Strings(), ", "))
	}
	if len(d.Overwritten) > 0 {
		parts = append(parts, "written over a change the head made since the plan (reservations lapsed?): "+strings.Join(d.Overwritten.Strings(), ", "))
	}
	return strings.Join(parts, "; ")
}
