package bot

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Work dirs a crash leaves (ADR 0042, issue 11 §14). A job removes what it
// made when it ends; a replica killed mid-job leaves the Terraform work
// dir of its run (KLBOT_WORKDIR/runs/RUN: the state Terraform wrote, the
// saved plan — secrets) and its checkout (KLBOT_WORKDIR/checkouts/klbot-*:
// the repository). Neither the job's retry, nor `kl run recover`, nor a
// restart removed them. Each replica now sweeps its own work dirs when it
// starts and every reconcile interval after (StartWorkDirSweep): a run's
// dir once its run is no longer live (Engine.RemoveLeftWorkDirs, which
// first stores what a crashed apply's Terraform wrote there as its
// checkpoint), a checkout once it is older than any plan job may run.

// checkoutGrace is how much older than Options.PlanTimeout a checkout is
// before it is taken for one a dead process left: a plan job's context
// ends at its timeout, and the job removes its checkout on the way out.
const checkoutGrace = 10 * time.Minute

// StartWorkDirSweep removes the work dirs this replica's crashed runs and
// jobs left (sweepWorkDirs) at once — a restart — and then every interval
// (DefaultReconcileInterval when not positive) until ctx ends or stop is
// called; stop waits for a sweep under way. Failures are logged: a dir
// left is removed by a later sweep.
func (b *Bot) StartWorkDirSweep(ctx context.Context, interval time.Duration) (stop func()) {
	if interval <= 0 {
		interval = DefaultReconcileInterval
	}
	b.sweepWorkDirs(ctx)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				b.sweepWorkDirs(ctx)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// sweepWorkDirs is one sweep: the Terraform work dirs of runs no longer
// live (Engine.RemoveLeftWorkDirs: a run in progress — on this replica or
// another sharing the disk — keeps its dir), then stale checkouts.
func (b *Bot) sweepWorkDirs(ctx context.Context) {
	removed, err := b.eng.RemoveLeftWorkDirs(ctx)
	if err != nil && ctx.Err() == nil {
		b.log.Warn("removing the work dirs of runs no longer live (a later sweep tries again)", "err", err)
	}
	if len(removed) > 0 {
		b.log.Info("removed the work dirs that runs no longer live left behind (they held state)", "runs", removed)
	}
	b.removeStaleCheckouts(time.Now())
}

// removeStaleCheckouts removes the checkouts (Options.WorkDir/klbot-*,
// Bot.checkout) made longer than Options.PlanTimeout + checkoutGrace
// before now: no live plan job's, on this replica or another sharing the
// dir. Nothing is removed when the checkouts go to the OS temp dir itself
// (no Options.WorkDir): it is not klbot's alone.
func (b *Bot) removeStaleCheckouts(now time.Time) {
	root := b.opts.WorkDir
	if filepath.Clean(root) == filepath.Clean(os.TempDir()) {
		return
	}
	ents, err := os.ReadDir(root)
	if err != nil {
		return // none made yet
	}
	cutoff := now.Add(-(b.opts.PlanTimeout + checkoutGrace))
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "klbot-") {
			continue
		}
		fi, err := e.Info()
		if err != nil || fi.ModTime().After(cutoff) {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if err := os.RemoveAll(dir); err != nil {
			b.log.Warn("removing a checkout a dead plan job left", "dir", dir, "err", err)
			continue
		}
		b.log.Info("removed a checkout a dead plan job left", "dir", dir, "made", fi.ModTime().UTC())
	}
}
