package store

import (
	"context"
	"fmt"
	"math"
	"time"
)

// StorageStats is how one state's versions are stored (ADR 0068): how many
// versions are whole snapshots and how many manifests, how many resource
// entries the state stores and their bytes (compressed, as stored), how
// many manifest intervals, and the compressed bytes of the whole snapshots
// and headers.
type StorageStats struct {
	Versions      int   `json:"versions"`
	Whole         int   `json:"whole"`
	Manifests     int   `json:"manifests"`
	Entries       int   `json:"entries"`
	EntryBytes    int64 `json:"entry_bytes"`
	Intervals     int   `json:"intervals"`
	SnapshotBytes int64 `json:"snapshot_bytes"`
	HeaderBytes   int64 `json:"header_bytes"`
}

// StorageStats is the StorageStats of state. ErrNotFound if unknown.
func (a Algorithms) StorageStats(ctx context.Context, state string) (StorageStats, error) {
	if _, err := a.DB.ReadState(ctx, state); err != nil {
		return StorageStats{}, fmt.Errorf("counting the storage of state %s: %w", state, err)
	}
	st, err := a.DB.StorageStats(ctx, state)
	if err != nil {
		return StorageStats{}, fmt.Errorf("counting the storage of state %s: %w", state, err)
	}
	return st, nil
}

// BackfillResult is what one Backfill call did, per state and in all.
type BackfillResult struct {
	// Converted: versions stored whole that now have manifests.
	Converted int `json:"converted"`
	// KeptWhole: versions left whole because their documents are not as
	// Terraform writes them (splitDoc): Snapshot returns their bytes as
	// committed, so they stay snapshots.
	KeptWhole int `json:"kept_whole"`
	// Finished: states whose every version has been visited.
	Finished []string `json:"finished"`
	// Remaining: states with versions still to visit when the call's
	// budget ran out.
	Remaining []string `json:"remaining"`
}

// backfillBatch is how many versions one backfill transaction converts:
// short, since it holds the state's lock a commit also takes.
const backfillBatch = 20

// Backfill gives the versions of states stored whole (every version before migration
// 17, ADR 0068) their manifests, beside live writers: newest first, so the
// versions plans are made against convert first, in transactions of at
// most 20 versions of one state under the state's lock (a commit waits at
// most one batch), at most budget versions in all (0: no limit). Entries
// are content-addressed, so a batch interrupted anywhere leaves the store
// readable, and readers choose per version (readDoc). Progress is kept in
// kl_backfill, so a later call resumes. A version whose document is not as
// Terraform writes it stays whole (KeptWhole).
func (a Algorithms) Backfill(ctx context.Context, states []string, budget int) (BackfillResult, error) {
	out := BackfillResult{Finished: []string{}, Remaining: []string{}}
	for _, st := range states {
		left := budget - out.Converted - out.KeptWhole
		if budget > 0 && left <= 0 {
			out.Remaining = append(out.Remaining, st)
			continue
		}
		done, err := a.backfillState(ctx, st, left, budget > 0, &out)
		if err != nil {
			return out, fmt.Errorf("backfilling manifests of state %s: %w", st, err)
		}
		if done {
			out.Finished = append(out.Finished, st)
		} else {
			out.Remaining = append(out.Remaining, st)
		}
	}
	return out, nil
}

// backfillState runs batches on one state until it is done or left (when
// limited) versions are used; it reports whether the state is done.
func (a Algorithms) backfillState(ctx context.Context, state string, left int, limited bool, out *BackfillResult) (bool, error) {
	for {
		n := backfillBatch
		if limited && left < n {
			n = left
		}
		if n <= 0 {
			return false, nil
		}
		var conv, kept int
		var done bool
		err := a.DB.InTx(ctx, func(tx Executor) error {
			var err error
			conv, kept, done, err = backfillBatchTx(ctx, tx, state, n)
			return err
		})
		if err != nil {
			return false, err
		}
		out.Converted += conv
		out.KeptWhole += kept
		left -= conv + kept
		if done {
			return true, nil
		}
	}
}

// backfillBatchTx converts up to n whole versions of state below its
// progress mark, under the state's lock, and moves the mark.
func backfillBatchTx(ctx context.Context, tx Executor, state string, n int) (conv, kept int, done bool, err error) {
	if _, err := tx.LockState(ctx, state); err != nil {
		return 0, 0, false, err
	}
	below, started, finished, err := tx.BackfillProgress(ctx, state)
	if err != nil || finished {
		return 0, 0, finished, err
	}
	if !started {
		below = math.MaxInt64
	}
	serials, err := tx.WholeVersions(ctx, state, below, n)
	if err != nil {
		return 0, 0, false, err
	}
	for _, s := range serials {
		ok, err := convertVersion(ctx, tx, state, s)
		if err != nil {
			return 0, 0, false, fmt.Errorf("version %d: %w", s, err)
		}
		if ok {
			conv++
		} else {
			kept++
		}
		below = s
	}
	var at *time.Time
	if len(serials) < n {
		now, err := tx.Now(ctx)
		if err != nil {
			return 0, 0, false, err
		}
		at, done = &now, true
	}
	return conv, kept, done, tx.SetBackfillProgress(ctx, state, below, at)
}

// convertVersion gives version serial (stored whole) its manifest, joined
// to the next version's intervals (ExtendEntries), or reports false when
// its document must stay whole.
func convertVersion(ctx context.Context, tx Executor, state string, serial int64) (bool, error) {
	d, err := tx.VersionDoc(ctx, state, serial)
	if err != nil {
		return false, err
	}
	doc, err := DecompressSnapshot(d.Snapshot, d.Size)
	if err != nil {
		return false, err
	}
	sp, err := splitDoc(doc)
	if err != nil || !sp.ok {
		return false, err
	}
	next, ok, err := tx.NextSerial(ctx, state, serial)
	if err != nil {
		return false, err
	}
	if !ok {
		next = 0
	}
	now, err := tx.Now(ctx)
	if err != nil {
		return false, err
	}
	var stored []Entry
	var rows []ManifestEntry
	for _, addr := range sortedAddrs(sp.entries) {
		en := sp.entries[addr]
		body, err := compressEntry(en.raw)
		if err != nil {
			return false, err
		}
		h := tx.EntryHash(en.raw)
		stored = append(stored, Entry{Hash: h, Size: int64(len(en.raw)), Body: body})
		rows = append(rows, ManifestEntry{Address: addr, Resource: en.resource, Hash: h, Size: int64(len(en.raw))})
	}
	if err := tx.InsertEntries(ctx, state, stored, now); err != nil {
		return false, err
	}
	if err := tx.ExtendEntries(ctx, state, serial, next, rows); err != nil {
		return false, err
	}
	return true, tx.ConvertVersion(ctx, state, serial, sp.header)
}
