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
		// The version is committed even when the head keeps every address:
		// it is the provenance of an apply that ran (who, which plan, what
		// Terraform wrote and where it went), and its drift names what no
		// version holds.
		spec.written, spec.requireRes, spec.status = nil, false, StatusFailed
		spec.leaseLost = true
		spec.reason = "lease lost before commit: merged only addresses unchanged at the head since the plan and not held by another run"
		if applyErr == nil {
			spec.reason = "lease lost before commit: Terraform finished, but the reservations had expired; merged only addresses unchanged at the head since the plan and not held by another run"
		}
		if reason != "" {
			spec.reason += "; " + reason
		}
		var held []Reservation
		if spec.keep, held, err = a.heldByOthers(cctx, changed); err == nil {
			if spec.since, err = e.Store.VersionsAfter(cctx, a.state.Name, env.SourceSerial); err != nil {
				err = fmt.Errorf("reading versions after %d of state %s: %w", env.SourceSerial, a.state.Name, err)
			}
		}
		if err == nil {
			spec.held = held
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
		if d := v.Provenance.Drift; d != nil && len(d.Lost) > 0 {
			lost = fmt.Errorf("%w; %s", lost, lostText(d.Lost))
		}
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
// live reservation on (any mode, prefixes included), and those
// reservations.
func (a *applier) heldByOthers(ctx context.Context, changed AddressSet) ([]string, []Reservation, error) {
	res, err := a.e.Store.Reservations(ctx, a.state.Name)
	if err != nil {
		return nil, nil, fmt.Errorf("reading reservations of state %s: %w", a.state.Name, err)
	}
	var out []string
	var held []Reservation
	for _, c := range changed {
		for _, r := range res {
			if r.Run != a.run.ID && c.Overlaps(r.Address) {
				out = append(out, string(c))
				held = append(held, r)
				break
			}
		}
	}
	return out, held, nil
}

// lostWrites says, for each address the head kept (kept) in a commit after
// the run's lease lapsed, why: the last version since the plan that changed
// it (among since, with its run), or else the run holding it (held).
func lostWrites(kept AddressSet, since []Version, held []Reservation) []LostWrite {
	var out []LostWrite
	for _, k := range kept {
		l := LostWrite{Address: k}
		for i := len(since) - 1; i >= 0; i-- {
			v := since[i]
			if len(v.Changed.Overlapping(AddressSet{k})) > 0 {
				l.Serial, l.Run, l.Actor, l.PR = v.Serial, v.Provenance.Run, v.Provenance.Actor, v.Provenance.PR
				break
			}
		}
		if l.Serial == 0 {
			for _, r := range held {
				if k.Overlaps(r.Address) {
					l.Run, l.Held = r.Run, true
					break
				}
			}
		}
		out = append(out, l)
	}
	return out
}

// lostText puts lost writes into words, for a run's reason and the
// caller's error: "terraform_data.a kept as version 7 (run X) changed it:
// what this apply did to it is in no version; check the real object, then
// import or remove it".
func lostText(lost []LostWrite) string {
	var parts []string
	for _, l := range lost {
		switch {
		case l.Serial > 0 && l.Run != "":
			parts = append(parts, fmt.Sprintf("%s (version %d, run %s, changed it while this run's lease had lapsed)", l.Address, l.Serial, l.Run))
		case l.Serial > 0:
			parts = append(parts, fmt.Sprintf("%s (version %d changed it while this run's lease had lapsed)", l.Address, l.Serial))
		case l.Run != "":
			parts = append(parts, fmt.Sprintf("%s (run %s holds it)", l.Address, l.Run))
		default:
			parts = append(parts, string(l.Address))
		}
	}
	what := "it"
	if len(lost) > 1 {
		what = "them"
	}
	return fmt.Sprintf("the head kept %s: what this apply did to %s is in no version — check the real object, then import or remove it",
		strings.Join(parts, ", "), what)
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
	// leaseLost marks the commit after the run's reservations expired:
	// the drift's Lost says why the head kept each address, from since
	// (the versions after the plan's source serial) and held (other runs'
	// reservations on changed addresses). A recovery fills Lost the same
	// way.
	leaseLost bool
	since     []Version
	held      []Reservation
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
			reason := spec.reason
			if spec.leaseLost || spec.recovered != nil {
				// Both merge only what the head has not changed since the
				// snapshot Terraform applied to: say why each kept address
				// was kept, and that this apply's change to it is in no
				// version.
				d.Lost = lostWrites(d.Kept, spec.since, spec.held)
			}
			if spec.leaseLost {
				if len(d.Lost) > 0 {
					reason += "; " + lostText(d.Lost)
				}
				if len(changed) == 0 {
					reason += fmt.Sprintf("; version %d changes nothing: it records that this apply ran and where its changes went", serial)
				}
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
				markers = append(markers, Marker{Kind: MarkerFailed, Reason: reason})
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
	if spec.recovered == nil {
		e.finishPlans(ctx, a, planStatus, v.Serial, spec.partial)
	}
	return &v, nil
}

// finishPlans marks the reviewed plan consumed: applied, or failed when the
// apply failed part-way (its partial result is version serial). A plan the
// lease sweep already failed for this run (its reservations lapsed before
// the lease-lost commit) gets the precise reason; a plan another apply
// claimed since is left alone.
func (e *Engine) finishPlans(ctx context.Context, a *applier, s RunStatus, serial int64, partial bool) {
	if _, err := e.Store.UpdateRun(ctx, a.plan.ID, []RunStatus{StatusApplying, StatusFailed}, func(r *Run) error {
		if err := claimedBy(r, a.run.ID); err != nil {
			return err
		}
		r.Status = s
		switch {
		case s == StatusApplied:
		case partial:
			r.Reason = fmt.Sprintf("apply run %s failed part-way; its partial result is version %d: re-plan", a.run.ID, serial)
		default:
			r.Reason = fmt.Sprintf("apply run %s lost its lease before its commit; version %d holds what the head could take: re-plan", a.run.ID, serial)
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
