package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// LeftWorkDirs is implemented by a Terraform that keeps each run's work in
// a dir of its own below a work root (internal/terraform's Runner): what
// Engine.RemoveLeftWorkDirs needs to find the dirs runs left behind — a
// holder killed mid-run leaves its dir, holding the state Terraform wrote
// and the saved plan (secrets) — and what the dir holds of Terraform's work.
type LeftWorkDirs interface {
	WorkDirRemover
	// WorkDirRuns lists the run ids of the work dirs below the work root,
	// sorted; only dirs named like a run id are listed.
	WorkDirRuns() ([]string, error)
	// LastState returns the state Terraform last wrote in run's work dir:
	// the state it could not persist (errored.tfstate), else the run's
	// snapshot file; nil, nil when the dir holds neither.
	LastState(run string) ([]byte, error)
}

// Sweep runs the lease sweep now (Store.ExpireLeases) and settles the
// re-plans the runs it ended had claimed, as every view does before it
// reads run statuses: runs whose holder died end lease-expired, an apply
// whose Terraform had started fences its write set (ADR 0035). It returns
// the ids of the runs this sweep ended, sorted — a run another sweep ended
// (any reservation request and any view sweeps) is not among them, so a
// caller that reports ended runs reads their statuses, not this list
// (klbot's reconciliation, ADR 0042).
func (e *Engine) Sweep(ctx context.Context) ([]string, error) {
	ids, err := e.Store.ExpireLeases(ctx)
	if err != nil {
		return nil, fmt.Errorf("sweeping leases: %w", err)
	}
	e.settleReplans(ctx)
	return ids, nil
}

// RemoveLeftWorkDirs removes the work dirs that runs no longer live left
// below the work root of the engine's Terraform (a LeftWorkDirs; nothing
// to do for another), and returns their run ids (ADR 0042). A killed
// holder leaves its run's dir; neither a retry nor `kl run recover` on
// another machine can remove it, so a process that keeps work dirs calls
// this at start and from time to time.
//
// A dir is removed only when its run is known to the store and not in
// progress after a lease sweep — a run of another process sharing the work
// root renews its lease while it lives — and no call of this process is
// working on it (a holder that stalled past its lease, ADR 0035, still
// uses its dir). A dir whose run the store does not know is kept (the
// Runner's own stale rule, 24 h untouched, removes it). Before the dir of
// an apply that died after its Terraform started and before it committed
// is removed, what Terraform last wrote there is stored as the run's
// checkpoint when it is newer than the stored one (salvage): the dir is
// not the only copy of it any more. A dir whose state cannot be salvaged
// (unreadable, another lineage) is kept, and logged, for an operator.
func (e *Engine) RemoveLeftWorkDirs(ctx context.Context) ([]string, error) {
	w, ok := e.Terraform.(LeftWorkDirs)
	if !ok {
		return nil, nil
	}
	ids, err := w.WorkDirRuns()
	if err != nil {
		return nil, fmt.Errorf("listing work dirs: %w", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	e.expireLeases(ctx)
	var removed []string
	for _, id := range ids {
		if e.live.has(id) {
			continue
		}
		run, err := e.getRun(ctx, id)
		switch {
		case errors.Is(err, ErrNotFound):
			continue
		case err != nil:
			return removed, fmt.Errorf("removing left work dirs: %w", err)
		case run.InProgress():
			continue
		}
		if err := e.salvage(ctx, w, run); err != nil {
			e.log().Warn("keeping the work dir of a run that is no longer live: what its Terraform wrote there cannot be salvaged", "run", id, "err", err)
			continue
		}
		if err := w.RemoveWorkDir(id); err != nil {
			return removed, fmt.Errorf("removing left work dirs: %w", err)
		}
		removed = append(removed, id)
	}
	return removed, nil
}

// salvage stores the state Terraform last wrote in the work dir of run r
// as r's ArtifactApplyCheckpoint, what Recover commits, when r is an apply
// that stopped after its Terraform started ("apply-started") without
// committing and without a stored ArtifactApplyResult (Terraform returned:
// that is final), and the dir's state is another than the stored
// checkpoint and not older (by serial): the checkpoint is taken after each
// resource completes, at most every few seconds, so the file a killed
// Terraform left can hold more. Nothing else is salvaged. Errors: the
// dir's state is unreadable or of another lineage than r's state
// (ErrInvalid), or the store fails.
func (e *Engine) salvage(ctx context.Context, w LeftWorkDirs, r Run) error {
	if r.Kind != KindApply || r.CommittedSerial != 0 || e.neverStarted(ctx, r.ID) {
		return nil
	}
	if _, err := e.Store.GetArtifact(ctx, r.ID, ArtifactApplyResult); err == nil {
		return nil
	} else if !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("reading %s of run %s: %w", ArtifactApplyResult, r.ID, err)
	}
	doc, err := w.LastState(r.ID)
	if err != nil || doc == nil {
		return err
	}
	left, err := tfstate.Parse(doc)
	if err != nil {
		return Errorf(ErrInvalid, "the state in the work dir of run %s is not readable: %v", r.ID, err)
	}
	st, err := e.getState(ctx, r.State)
	if err != nil {
		return err
	}
	if left.Lineage != st.Lineage {
		return Errorf(ErrInvalid, "the state in the work dir of run %s has lineage %q, state %s has %q", r.ID, left.Lineage, st.Name, st.Lineage)
	}
	cp, err := e.Store.GetArtifact(ctx, r.ID, ArtifactApplyCheckpoint)
	switch {
	case err == nil && bytes.Equal(cp, doc):
		return nil
	case err == nil:
		if old, perr := tfstate.Parse(cp); perr == nil && old.Serial > left.Serial {
			return nil
		}
	case !errors.Is(err, ErrNotFound):
		return fmt.Errorf("reading %s of run %s: %w", ArtifactApplyCheckpoint, r.ID, err)
	}
	if err := e.Store.PutArtifact(ctx, r.ID, ArtifactApplyCheckpoint, doc); err != nil {
		return fmt.Errorf("storing the salvaged %s of run %s: %w", ArtifactApplyCheckpoint, r.ID, err)
	}
	e.log().Info("stored the state a crashed apply's Terraform left in its work dir as its checkpoint", "run", r.ID, "serial", left.Serial)
	return nil
}

// neverStarted reports whether apply run id has no "apply-started" marker:
// its Terraform never ran. A failure to read the markers says false (the
// caller then looks at what the dir holds).
func (e *Engine) neverStarted(ctx context.Context, id string) bool {
	ms, err := e.Store.Markers(ctx, id)
	if err != nil {
		return false
	}
	for _, m := range ms {
		if m.Kind == MarkerApplyStarted {
			return false
		}
	}
	return true
}

// liveRuns are the runs a call of this process is working on (from
// keepAlive to its Stop), whatever their lease says: RemoveLeftWorkDirs
// leaves their dirs alone. The zero value is ready.
type liveRuns struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *liveRuns) add(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n = map[string]int{}
	}
	l.n[id]++
}

func (l *liveRuns) done(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n[id]--; l.n[id] <= 0 {
		delete(l.n, id)
	}
}

func (l *liveRuns) has(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[id] > 0
}
