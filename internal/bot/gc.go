package bot

import (
	"context"
	"errors"
	"time"

	"github.com/riverqueue/river"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
	"github.com/kilolock/kilolock/internal/webhook"
)

// The store's gc (ADR 0063), as `kl gc` runs it: a River periodic job —
// the elected leader enqueues it, so one replica runs each round — deletes
// the artifacts no run needs any more, with the retention of
// Options.Retention (KLBOT_RETENTION). Each run's deletion is one
// transaction under its row lock (engine.Collector), so a round beside
// jobs that claim plans and commit loses nothing they need. Each round
// then runs the store's backfill (ADR 0068) for at most 500 versions.

// KindGC is the gc job's kind (River's kind column).
const KindGC = "klbot_gc"

// DefaultGCInterval is how often the gc job runs when KLBOT_GC_INTERVAL is
// not set. A round reads the name and size of every state and plan
// artifact, then locks only the runs it deletes from.
const DefaultGCInterval = time.Hour

// gcTimeout bounds one round.
const gcTimeout = 10 * time.Minute

// GCArgs is the periodic gc job: one queued or running at a time, one
// attempt (the next round does it again).
type GCArgs struct{}

// Kind is KindGC.
func (GCArgs) Kind() string { return KindGC }

// InsertOpts: one attempt; unique while one is unfinished.
func (GCArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByState: unfinished}}
}

// AddGC registers the gc worker on w and returns the River periodic job
// that enqueues it every interval (KLBOT_GC_INTERVAL; DefaultGCInterval
// when not positive) and once when the leader starts.
func (b *Bot) AddGC(w *river.Workers, interval time.Duration) []*river.PeriodicJob {
	if interval <= 0 {
		interval = DefaultGCInterval
	}
	river.AddWorker(w, &gcWorker{b: b})
	return []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(interval),
		func() (river.JobArgs, *river.InsertOpts) { return GCArgs{}, nil },
		&river.PeriodicJobOpts{ID: KindGC, RunOnStart: true})}
}

// gcWorker runs the gc job.
type gcWorker struct {
	river.WorkerDefaults[GCArgs]
	b *Bot
}

// Timeout bounds one round.
func (w *gcWorker) Timeout(*river.Job[GCArgs]) time.Duration { return gcTimeout }

// Work runs one gc round with Options.Retention, logged and counted like
// the other jobs; a replica locked out of writing (ADR 0048) or stopping
// (ADR 0043) hands it back.
func (w *gcWorker) Work(ctx context.Context, job *river.Job[GCArgs]) error {
	b := w.b
	ctx = webhook.NewContext(ctx, b.log.With("job", KindGC, "attempt", job.Attempt), webhook.Delivery{Event: "gc"})
	start := time.Now()
	if b.lockedOut(ctx) {
		b.metrics.job(KindGC, ResultSnoozed, time.Since(start))
		return river.JobSnooze(lockedOutSnooze)
	}
	res, err := b.eng.GC(ctx, engine.GCRequest{Retention: b.opts.Retention})
	switch {
	case err != nil && errors.Is(context.Cause(ctx), ErrShutdown):
		b.metrics.job(KindGC, ResultSnoozed, time.Since(start))
		return river.JobSnooze(time.Second)
	case err != nil:
		logOf(ctx).Error("gc failed; the next round does it again", "err", err)
		b.metrics.job(KindGC, ResultError, time.Since(start))
		return err
	}
	result := ResultSkipped
	if len(res.Deleted) > 0 {
		result = ResultOK
		logOf(ctx).Info("gc: deleted artifacts no run needs", "artifacts", len(res.Deleted), "runs", res.Runs, "bytes", res.Bytes,
			"retention", engine.RetentionName(b.opts.Retention))
	}
	if converted, err := w.backfill(ctx); err != nil {
		logOf(ctx).Error("backfill failed; the next round resumes it", "err", err)
		b.metrics.job(KindGC, ResultError, time.Since(start))
		return err
	} else if converted > 0 {
		result = ResultOK
	}
	b.metrics.job(KindGC, result, time.Since(start))
	return nil
}

// backfillBudget is how many versions one gc round gives manifests at most
// (ADR 0068): a round of a few seconds, the rest next round.
const backfillBudget = 500

// backfill runs the store's backfill (kl store backfill) for one round's
// budget, when the store has one, and reports how many versions it
// converted.
func (w *gcWorker) backfill(ctx context.Context) (int, error) {
	b, ok := w.b.eng.Store.(interface {
		Backfill(ctx context.Context, budget int) (store.BackfillResult, error)
	})
	if !ok {
		return 0, nil
	}
	res, err := b.Backfill(ctx, backfillBudget)
	if err != nil {
		return 0, err
	}
	if res.Converted+res.KeptWhole > 0 {
		logOf(ctx).Info("backfill: versions stored whole given manifests of entries", "converted", res.Converted,
			"kept_whole", res.KeptWhole, "remaining_states", len(res.Remaining))
	}
	return res.Converted, nil
}
