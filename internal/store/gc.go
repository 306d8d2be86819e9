package store

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// ArtifactSize is one stored artifact without its data: its run, name and
// stored size in bytes (what deleting it frees, before the database's own
// overhead).
type ArtifactSize struct {
	Run   string
	Name  string
	Bytes int64
}

// GC is engine.Collector's GC over the adapter's DB (ADR 0063). It lists
// the artifacts named by engine.GCStateArtifacts and engine.GCPlanArtifacts
// with their sizes, then, per run, decides on the run as read (gcNames)
// and, when that deletes something, decides again in one transaction under
// the run's row lock, on the run as it is then, and deletes; a run that
// retention deleted artifacts of gains an engine.MarkerArtifactsDeleted in
// the same transaction. A dry run decides on each run as read without a
// lock and deletes nothing. It is safe beside a concurrent claim and
// commit because a run's status only moves from open to closed, and the
// deciding read is under the lock a claim (UpdateRun from planned) takes; a
// commit deletes its run's state artifacts itself.
func (a Algorithms) GC(ctx context.Context, req engine.GCRequest) (engine.GCResult, error) {
	out := engine.GCResult{DryRun: req.DryRun, Deleted: []engine.GCDeleted{}}
	if req.Retention < 0 {
		return out, engine.Errorf(engine.ErrInvalid, "gc: retention %s is negative", req.Retention)
	}
	wanted := append(slices.Clone(engine.GCStateArtifacts), engine.GCPlanArtifacts...)
	sizes, err := a.DB.ArtifactSizes(ctx, wanted)
	if err != nil {
		return out, fmt.Errorf("gc: listing artifacts: %w", err)
	}
	byRun := map[string][]ArtifactSize{}
	var runs []string
	for _, s := range sizes {
		if byRun[s.Run] == nil {
			runs = append(runs, s.Run)
		}
		byRun[s.Run] = append(byRun[s.Run], s)
	}
	sort.Strings(runs)
	for _, id := range runs {
		got, err := a.gcRun(ctx, req, id, byRun[id])
		if err != nil {
			return out, err
		}
		sort.Slice(got, func(i, j int) bool { return got[i].Name < got[j].Name })
		if len(got) > 0 {
			out.Runs++
		}
		for _, d := range got {
			out.Bytes += d.Bytes
		}
		out.Deleted = append(out.Deleted, got...)
	}
	return out, nil
}

// gcRun is GC of run id, whose candidate artifacts are sizes: decided on
// a plain read, then, outside a dry run and when that deletes something,
// decided again and deleted in one transaction under the run's row lock,
// with the marker of a retention deletion. It returns what it deleted (or,
// dry, would delete).
func (a Algorithms) gcRun(ctx context.Context, req engine.GCRequest, id string, sizes []ArtifactSize) ([]engine.GCDeleted, error) {
	decide := func(x Executor, r engine.Run) ([]string, string, error) {
		now, err := x.Now(ctx)
		if err != nil {
			return nil, "", err
		}
		return gcNames(ctx, x, r, now, req.Retention)
	}
	// First without a lock: a run kept (most runs, each round) takes no
	// write transaction. What this read deletes is decided again under
	// the lock; a run that becomes due meanwhile waits a round.
	r, err := a.DB.GetRun(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("gc: reading run %s: %w", id, err)
	}
	names, why, err := decide(a.DB, r)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	var got []engine.GCDeleted
	if req.DryRun {
		for _, s := range sizes {
			if slices.Contains(names, s.Name) {
				got = append(got, engine.GCDeleted{Run: id, Kind: r.Kind, Name: s.Name, Bytes: s.Bytes, Why: why})
			}
		}
		return got, nil
	}
	err = a.DB.InTx(ctx, func(tx Executor) error {
		got = nil
		r, err := tx.LockRun(ctx, id)
		if err != nil {
			return err
		}
		names, why, err := decide(tx, r)
		if err != nil || len(names) == 0 {
			return err
		}
		deleted, err := tx.DeleteArtifacts(ctx, id, names)
		if err != nil || len(deleted) == 0 {
			return err
		}
		var gone []string
		for _, d := range deleted {
			got = append(got, engine.GCDeleted{Run: id, Kind: r.Kind, Name: d.Name, Bytes: d.Bytes, Why: why})
			gone = append(gone, d.Name)
		}
		if why != engine.GCRetention {
			return nil
		}
		seq, err := tx.LastMarkerSeq(ctx, id)
		if err != nil {
			return err
		}
		now, err := tx.Now(ctx)
		if err != nil {
			return err
		}
		sort.Strings(gone)
		return tx.InsertMarkers(ctx, id, []engine.Marker{{Seq: seq + 1, At: now, Kind: engine.MarkerArtifactsDeleted,
			Reason: engine.GCRetention, Extra: map[string]string{"artifacts": strings.Join(gone, ","), "retention": req.Retention.String()}}})
	})
	if err != nil {
		return nil, fmt.Errorf("gc: run %s: %w", id, err)
	}
	return got, nil
}

// gcNames is which artifacts of run r the gc deletes at now, and why
// (engine.GCCommitted, engine.GCRetention), read through x (under r's lock
// outside a dry run):
//   - an apply run that committed: its state artifacts — unless it holds a
//     late result (engine.LateResult, ADR 0071), which waits for its
//     recovery whatever the retention;
//   - an apply run that did not, is not in progress, holds no fence and no
//     live reservation, and last changed (UpdatedAt, FinishedAt) and had
//     its fence lifted (a "fence-lifted" marker) more than retention ago:
//     its state artifacts;
//   - a plan run that is closed (not engine.RunStatus.Open), finished more
//     than retention ago, and whose apply (Run.ApplyRun) holds no fence and
//     no live reservation: its plan artifacts.
//
// A retention of 0 deletes by retention nothing.
func gcNames(ctx context.Context, x Executor, r engine.Run, now time.Time, retention time.Duration) ([]string, string, error) {
	closed := r.UpdatedAt
	if r.FinishedAt != nil && r.FinishedAt.After(closed) {
		closed = *r.FinishedAt
	}
	expired := retention > 0 && !closed.After(now.Add(-retention))
	held := func(id string) (bool, error) {
		if id == "" {
			return false, nil
		}
		return x.HoldsLive(ctx, id, "", now)
	}
	switch r.Kind {
	case engine.KindApply:
		if engine.LateResult(r) {
			return nil, "", nil // a late result waits for its recovery (ADR 0071)
		}
		if r.CommittedSerial != 0 {
			return engine.GCStateArtifacts, engine.GCCommitted, nil
		}
		if retention > 0 && expired {
			// An unfenced run stays recoverable (ADR 0035): its retention
			// counts from the lift.
			at, ok, err := x.FirstMarkerAt(ctx, r.ID, engine.MarkerFenceLifted)
			if err != nil {
				return nil, "", err
			}
			expired = !ok || !at.After(now.Add(-retention))
		}
		if !expired || r.InProgress() || r.Status.Open() {
			return nil, "", nil
		}
		if h, err := held(r.ID); err != nil || h {
			return nil, "", err
		}
		return engine.GCStateArtifacts, engine.GCRetention, nil
	case engine.KindPlan:
		if !expired || r.Status.Open() {
			return nil, "", nil
		}
		if h, err := held(r.ApplyRun); err != nil || h {
			return nil, "", err
		}
		return engine.GCPlanArtifacts, engine.GCRetention, nil
	}
	return nil, "", nil
}
