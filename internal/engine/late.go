package engine

import (
	"context"
	"fmt"
)

// recoveredMeanwhile ends the commit of a holder that comes back to its
// run after `kl run recover` committed it (ADR 0071): the holder stalled or
// was slow past its lease on a host Recover could not check, the sweep
// fenced the run, and a recovery committed Terraform's checkpoint as
// version N. What Terraform wrote last (state: its final state when
// applyErr is nil) is not in N and must not be lost: it is stored (again:
// the recovery's commit deleted the run's state artifacts) as
// ArtifactApplyResult, never collected while it waits, and the run's end
// becomes CauseRecoveredMeanwhile, recoverable — `kl run recover RUN`
// commits what it adds to N — with a "failed" marker saying the same. The
// error, ErrConflict, says truthfully that the result was not committed,
// why, and where it is. It returns nil, nil when the run was not recovered
// (some other conflict: the caller's failure path goes on).
func (a *applier) recoveredMeanwhile(ctx context.Context, state []byte, applyErr error) (*ApplyOutcome, error) {
	e := a.e
	r, err := e.Store.GetRun(ctx, a.run.ID)
	if err != nil || r.CommittedSerial == 0 || !e.wasRecovered(ctx, r.ID) {
		return nil, nil
	}
	serial := r.CommittedSerial
	kept := ArtifactApplyResult
	if err := e.Store.PutArtifact(ctx, r.ID, ArtifactApplyResult, state); err != nil {
		e.log().Error("keeping the late result of a recovered run", "run", r.ID, "err", err)
		kept = ""
	}
	end := &End{Cause: CauseRecoveredMeanwhile, Serial: serial, Artifact: kept, TerraformDone: applyErr == nil,
		Then: terraformEnd(ctx, applyErr), Recoverable: kept != "", Holder: e.Holder}
	updated, err := e.Store.UpdateRun(ctx, r.ID, []RunStatus{StatusLeaseExpired, StatusFailed, StatusInterrupted}, func(run *Run) error {
		if run.CommittedSerial != serial {
			return Errorf(ErrConflict, "run %s committed version %d meanwhile", run.ID, run.CommittedSerial)
		}
		run.End = end
		return nil
	}, Marker{Kind: MarkerFailed, End: end})
	if err != nil {
		e.log().Error("recording the late result of a recovered run", "run", r.ID, "err", err)
		updated = r
	}
	where := fmt.Sprintf("Terraform's final state is kept as artifact %s of run %s: `kl run recover %s` commits what it adds to version %d", kept, r.ID, r.ID, serial)
	if applyErr != nil {
		where = fmt.Sprintf("what Terraform wrote last (it failed: %v) is kept as artifact %s of run %s: `kl run recover %s` commits what it adds to version %d", applyErr, kept, r.ID, r.ID, serial)
	}
	if kept == "" {
		where = "storing Terraform's final state failed too: check the real objects, then re-plan"
	}
	return &ApplyOutcome{Run: updated}, Errorf(ErrConflict,
		"applying run %s: Terraform's result was not committed: the run was recovered meanwhile (`kl run recover` committed version %d from its checkpoint after this holder's lease had run out); %s",
		r.ID, serial, where)
}

// wasRecovered reports whether run id has a "recovered" marker (a
// recovery committed it). A failure to read its markers says false.
func (e *Engine) wasRecovered(ctx context.Context, id string) bool {
	ms, err := e.Store.Markers(ctx, id)
	if err != nil {
		return false
	}
	for _, m := range ms {
		if m.Kind == MarkerRecovered {
			return true
		}
	}
	return false
}
