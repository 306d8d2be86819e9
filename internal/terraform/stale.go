package terraform

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/oklog/ulid/v2"
)

// DefaultStaleAfter is how long a work dir may go untouched before a new
// Runner removes it (RunnerOptions.StaleAfter): far longer than the default
// lease (engine.DefaultLease, 2 min; a caller with longer leases passes at
// least twice its lease) — the runs of a dead process have ended
// lease-expired long before, and a live run's Terraform writes into its
// work dir as it goes — and long enough that an operator can still look
// into the dir of a run killed today (it may hold the only copy of what
// Terraform wrote before the kill).
const DefaultStaleAfter = 24 * time.Hour

// removeStaleWorkDirs removes, below root, the work dirs of runs whose
// process died before its own cleanup ran (kill -9, a crash, a reboot):
// each holds a state snapshot and a saved plan — secrets. A work dir is
// stale when nothing in it was modified for staleAfter before now: neither
// the dir nor any file or directory below it (Terraform rewrites the
// snapshot as it applies; init fills data/). Only directories named like a
// run id (a ULID) are candidates, so nothing else kept under root is ever
// removed. Best effort: it never fails, it logs what it did at debug.
//
// A dir kept on purpose (RunnerOptions.KeepWorkDirs) is removed too once it
// is stale, by a Runner that does not keep work dirs itself.
func removeStaleWorkDirs(root string, staleAfter time.Duration, now time.Time, log *slog.Logger) {
	ents, err := os.ReadDir(root)
	if err != nil {
		log.Debug("listing work dirs for stale ones", "root", root, "error", err)
		return
	}
	cutoff := now.Add(-staleAfter)
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if _, err := ulid.ParseStrict(e.Name()); err != nil {
			continue // not a run's work dir
		}
		dir := filepath.Join(root, e.Name())
		if touchedSince(dir, cutoff) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			log.Debug("removing stale work dir", "dir", dir, "error", err)
			continue
		}
		log.Debug("removed stale work dir (its run's process died before cleaning up)", "dir", dir, "untouched_for", staleAfter)
	}
}

// errTouched stops the walk of touchedSince at the first recent entry.
var errTouched = errors.New("touched")

// touchedSince reports whether dir or anything below it was modified after
// cutoff. An entry it cannot read counts as touched: when in doubt, keep.
func touchedSince(dir string, cutoff time.Time) bool {
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if fi.ModTime().After(cutoff) {
			return errTouched
		}
		return nil
	})
	return err != nil
}
