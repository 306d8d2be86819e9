package bot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/klyaml"
	"github.com/kilolock/kilolock/internal/webhook"
)

// Reconciliation (ADR 0042, issue 11 §5 and §14). Webhooks are not a
// reliable record of GitHub: a delivery may be dropped (GitHub does not
// redeliver by itself), and a replica may die mid-apply, its job left
// running in River until River's rescue hours later. A periodic job —
// River's periodic jobs: the elected leader enqueues it, so one replica
// runs each round — compares klbot's tables with GitHub and the engine:
//
//   - the lease sweep (Engine.Sweep) ends the runs whose holder died;
//   - the apply of each watched project that ended and was not reported as
//     it is now — a replica died mid-apply (lease expired, fenced when its
//     Terraform had started), or `kl run recover` / `kl run unfence` on the
//     CLI changed it — gets its "kl apply · PROJECT" check run and the
//     sticky comment rewritten from the engine's story;
//   - each open pull request is read from GitHub: one that is closed gets
//     the job its missed "closed" delivery would have made (TriggerClose,
//     or TriggerMerge for a merge: a project applied on merge is applied
//     now, not silently closed).

// KindReconcile is the reconcile job's kind (River's kind column).
const KindReconcile = "klbot_reconcile"

// DefaultReconcileInterval is how often the reconcile job runs when
// KLBOT_RECONCILE_INTERVAL is not set: each round reads every open pull
// request klbot tracks from GitHub (one request each), so a shorter
// interval spends more of the installation's rate limit (5,000 requests an
// hour and up, docs/github.md).
const DefaultReconcileInterval = 5 * time.Minute

// reconcileTimeout bounds one round.
const reconcileTimeout = 10 * time.Minute

// unfinished are the states of a job not yet finalized: a unique job is
// not inserted again while one is in them (River requires the first four).
var unfinished = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
	rivertype.JobStateScheduled, rivertype.JobStateRetryable}

// ReconcileArgs is the periodic reconcile job. It has no arguments; one is
// queued or running at a time, and a failed round is not retried: the next
// one does it again.
type ReconcileArgs struct{}

// Kind is KindReconcile.
func (ReconcileArgs) Kind() string { return KindReconcile }

// InsertOpts: one attempt; unique while one is unfinished.
func (ReconcileArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByState: unfinished}}
}

// AddReconcile registers the reconcile worker on w and returns the River
// periodic job that enqueues it every interval (KLBOT_RECONCILE_INTERVAL;
// DefaultReconcileInterval when not positive) and once when the leader
// starts; pass it as river.Config.PeriodicJobs.
func (b *Bot) AddReconcile(w *river.Workers, interval time.Duration) []*river.PeriodicJob {
	if interval <= 0 {
		interval = DefaultReconcileInterval
	}
	river.AddWorker(w, &reconcileWorker{b: b})
	return []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(interval),
		func() (river.JobArgs, *river.InsertOpts) { return ReconcileArgs{}, nil },
		&river.PeriodicJobOpts{ID: KindReconcile, RunOnStart: true})}
}

// reconcileWorker runs the reconcile job (Bot.reconcile).
type reconcileWorker struct {
	river.WorkerDefaults[ReconcileArgs]
	b *Bot
}

// Timeout bounds one round.
func (w *reconcileWorker) Timeout(*river.Job[ReconcileArgs]) time.Duration { return reconcileTimeout }

// Work runs one round, logged and counted like the other jobs.
func (w *reconcileWorker) Work(ctx context.Context, job *river.Job[ReconcileArgs]) error {
	b := w.b
	ctx = webhook.NewContext(ctx, b.log.With("job", KindReconcile, "attempt", job.Attempt), webhook.Delivery{Event: "reconcile"})
	start := time.Now()
	if b.lockedOut(ctx) {
		// A newer klbot raised the store's level (ADR 0048): this replica
		// must not sweep leases or report; a replica that may write does
		// the round. A snooze does not spend the one attempt (River 0.51).
		b.metrics.job(KindReconcile, ResultSnoozed, time.Since(start))
		return river.JobSnooze(lockedOutSnooze)
	}
	n, err := b.reconcile(ctx)
	if err != nil && errors.Is(context.Cause(ctx), ErrShutdown) {
		// Not a failure: this replica stops (ADR 0043). A snooze hands the
		// round back without spending its one attempt, so River does not
		// discard it; another replica, or this one restarted, runs it.
		logOf(ctx).Info("reconciliation interrupted by the shutdown: River hands it back", "err", err)
		b.metrics.job(KindReconcile, ResultSnoozed, time.Since(start))
		return river.JobSnooze(time.Second)
	}
	if err != nil {
		logOf(ctx).Error("reconciliation failed; the next round does it again", "err", err)
		b.metrics.job(KindReconcile, ResultError, time.Since(start))
		return err
	}
	result := ResultSkipped
	if n > 0 {
		result = ResultOK
	}
	logOf(ctx).Debug("job done", "result", result, "pull_requests", n, "took", time.Since(start).Round(time.Millisecond))
	b.metrics.job(KindReconcile, result, time.Since(start))
	return nil
}

// reconcile is one round: the lease sweep, then each watched pull request
// (db.watchedProjects) by reconcilePR. A pull request that fails (GitHub
// down, a token refused) is logged and left to the next round; the round
// fails only when the sweep or klbot's tables do. It returns how many pull
// requests it acted on.
func (b *Bot) reconcile(ctx context.Context) (int, error) {
	swept, err := b.eng.Sweep(ctx)
	if err != nil {
		return 0, err
	}
	if len(swept) > 0 {
		logOf(ctx).Info("lease sweep: ended runs whose holder stopped renewing", "runs", swept)
	}
	rows, err := b.db.watchedProjects(ctx)
	if err != nil {
		return 0, err
	}
	acted := 0
	for len(rows) > 0 {
		n := 1
		for n < len(rows) && rows[n].Repo == rows[0].Repo && rows[n].PR == rows[0].PR {
			n++
		}
		did, err := b.reconcilePR(ctx, rows[:n])
		switch {
		case err != nil && ctx.Err() != nil:
			return acted, err
		case err != nil:
			logOf(ctx).Warn("reconciling a pull request failed; the next round tries again", "repo", rows[0].Repo, "pr", rows[0].PR, "err", err)
		case did:
			acted++
		}
		rows = rows[n:]
	}
	return acted, nil
}

// reconcilePR reconciles one pull request, rows its watched projects:
// ended applies not reported as they are now are reported (reportEnded);
// then, if klbot holds it open, GitHub is asked, and a closed pull request
// gets its close job (enqueueClosed). It reports whether it acted.
func (b *Bot) reconcilePR(ctx context.Context, rows []projectRow) (bool, error) {
	first := rows[0]
	base := JobBase{Delivery: "reconcile", Event: "reconcile", Installation: first.Installation, Repo: first.Repo, PR: first.PR}
	ctx = webhook.NewContext(ctx, logOf(ctx), webhook.Delivery{Event: base.Event, Installation: base.Installation, Repo: base.Repo, PR: base.PR})
	c, repo, err := b.client(base)
	if err != nil {
		return false, err
	}
	acted := false
	ended, err := b.unreported(ctx, rows)
	if err != nil {
		return false, err
	}
	if len(ended) > 0 {
		if acted, err = b.reportEnded(ctx, c, repo, base); err != nil {
			return acted, err
		}
	}
	open := false
	for _, r := range rows {
		open = open || r.Open
	}
	if !open {
		return acted, nil
	}
	pr, err := c.GetPullRequest(ctx, repo, base.PR)
	if err != nil {
		return acted, err
	}
	if pr.State != "closed" {
		return acted, nil
	}
	if pending, err := b.db.closeJobPending(ctx, base.Repo, base.PR); err != nil || pending {
		// Its closed delivery came: that job (a merge-time apply waiting
		// for reservations or for the merge queue's order) closes it.
		return acted, err
	}
	return true, b.enqueueClosed(ctx, base, pr)
}

// endedApply is the apply run of a project row that ended since klbot
// last reported it.
type endedApply struct {
	row projectRow
	run engine.Run
}

// unreported lists, of rows, the projects whose latest apply run — the one
// that claimed the row's plan (its ApplyRun), else the row's own — is no
// longer in progress and was not reported as it is now
// (klbot_apply_reports: reportedFacts).
func (b *Bot) unreported(ctx context.Context, rows []projectRow) ([]endedApply, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	reps, err := b.db.applyReports(ctx, rows[0].Repo, rows[0].PR)
	if err != nil {
		return nil, err
	}
	var out []endedApply
	for _, r := range rows {
		id := r.ApplyRun
		if r.PlanRun != "" {
			plan, err := b.eng.Run(ctx, r.PlanRun)
			switch {
			case err == nil && plan.ApplyRun != "":
				id = plan.ApplyRun
			case err != nil && !errors.Is(err, engine.ErrNotFound):
				return nil, err
			}
		}
		if id == "" {
			continue
		}
		run, err := b.eng.Run(ctx, id)
		switch {
		case errors.Is(err, engine.ErrNotFound):
			continue
		case err != nil:
			return nil, err
		case run.InProgress():
			continue
		}
		if rep, ok := reps[r.Project]; ok && rep.run == id && rep.facts == reportedFacts(run) {
			continue
		}
		out = append(out, endedApply{row: r, run: run})
	}
	return out, nil
}

// reportEnded reports, under the pull request's lock, the ended applies
// of its projects (unreported, read again under the lock) and rewrites its
// sticky comment. When a job of the pull request holds the lock, nothing
// is done: that job writes the check runs and the sticky comment, and the
// next round sees what is left.
func (b *Bot) reportEnded(ctx context.Context, c Client, repo github.Repo, base JobBase) (bool, error) {
	unlock, ok, err := b.db.reconcileLock(ctx, base.Repo, base.PR)
	if err != nil || !ok {
		return false, err
	}
	defer unlock()
	rows, err := b.db.projects(ctx, base.Repo, base.PR)
	if err != nil {
		return false, err
	}
	ended, err := b.unreported(ctx, rows)
	if err != nil || len(ended) == 0 {
		return false, err
	}
	for _, e := range ended {
		logOf(ctx).Info("reporting an apply that ended outside any job of klbot's", "project", e.row.Project, "run", e.run.ID,
			"status", e.run.Status, "committed", e.run.CommittedSerial)
		if err := b.reportApplyRun(ctx, c, repo, e.row, e.run.ID); err != nil {
			return true, err
		}
	}
	return true, b.updateSticky(ctx, c, repo, base.PR)
}

// reportApplyRun writes apply run id's story into the "kl apply · PROJECT"
// check run of project row r — on the commit the apply was for, its
// conclusion the run's verdict, as runApply reports an apply it ran — takes
// the Apply button off a plan no longer applicable, makes the run the
// row's apply (what the sticky comment shows) and records what was
// reported (db.noteApplyReported). The caller holds the pull request's
// lock and rewrites the sticky comment.
func (b *Bot) reportApplyRun(ctx context.Context, c Client, repo github.Repo, r projectRow, id string) error {
	story, err := b.eng.RunStory(context.WithoutCancel(ctx), id)
	if err != nil {
		return err
	}
	sha := r.HeadSHA
	if story.Run.PR != nil && story.Run.PR.HeadSHA != "" {
		sha = story.Run.PR.HeadSHA
	} else if story.Plan != nil && story.Plan.PR != nil && story.Plan.PR.HeadSHA != "" {
		sha = story.Plan.PR.HeadSHA
	}
	check, err := applyCheck(story, r.Repo, r.PR, r.Project, sha)
	if err != nil {
		return err
	}
	check.DetailsURL = b.runLink(story.Run.ID)
	if _, err := b.putCheckRun(context.WithoutCancel(ctx), c, repo, check); err != nil {
		return err
	}
	if story.Plan != nil && story.Plan.Status != engine.StatusPlanned {
		b.retireButton(ctx, c, repo, r, string(story.Plan.Status))
	}
	r.ApplyRun, r.Note = id, note{}
	if err := b.db.saveProject(context.WithoutCancel(ctx), r); err != nil {
		return err
	}
	return b.db.noteApplyReported(context.WithoutCancel(ctx), r, story.Run)
}

// enqueueClosed enqueues for pull request base.PR, which GitHub says is
// closed while klbot holds it open, the job its "closed" delivery would
// have made (Sink.route): TriggerMerge, its actor who merged it, when it
// was merged — projects applied on merge are applied, as on the delivery,
// their since-plan checked against the head as always — else TriggerClose.
// Either supersedes the other open plans with the closed pull request's
// reason and marks its rows closed (Bot.closed). Unique per pull request
// while one is unfinished, so a round does not queue it twice (nor the plan
// job's overlap check, openOverlaps).
func (b *Bot) enqueueClosed(ctx context.Context, base JobBase, pr github.PullRequest) error {
	trig := TriggerClose
	if pr.Merged {
		trig, base.Actor = TriggerMerge, pr.MergedBy
	}
	args := ApplyArgs{JobBase: base, Trigger: trig, HeadSHA: pr.HeadSHA}
	res, err := b.river.Insert(context.WithoutCancel(ctx), args, &river.InsertOpts{MaxAttempts: MaxAttempts,
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: unfinished}})
	if err != nil {
		return fmt.Errorf("enqueuing the close of %s#%d: %w", base.Repo, base.PR, err)
	}
	if !res.UniqueSkippedAsDuplicate {
		logOf(ctx).Info("pull request closed on GitHub but open in klbot (its closed delivery never came): closing its plans",
			"repo", base.Repo, "pr", base.PR, "merged", pr.Merged, "trigger", trig)
	}
	return nil
}

// openOverlaps returns the overlaps of a new plan (engine's
// PlanOutcome.Overlaps) without those with the plan of a pull request that
// GitHub says is closed — its "closed" delivery never came — unless it was
// merged and its project applies on merge (that apply is still to come):
// for each such pull request the close job is enqueued (enqueueClosed), so
// that its plans close. An overlap with a plan klbot does not track (a
// `kl plan`), or whose pull request cannot be read, is kept: a real overlap
// is never hidden.
func (b *Bot) openOverlaps(ctx context.Context, ovs []engine.Overlap) []engine.Overlap {
	out := ovs[:0:0]
	closed := map[string]*github.PullRequest{}
	for _, ov := range ovs {
		r, ok, err := b.db.projectOfPlan(ctx, ov.Run)
		if err != nil || !ok || !r.Open {
			out = append(out, ov)
			continue
		}
		key := fmt.Sprintf("%s#%d", r.Repo, r.PR)
		pr, seen := closed[key]
		if !seen {
			pr = b.closedPR(ctx, r)
			closed[key] = pr
		}
		if pr == nil || (pr.Merged && r.Config.ApplyTrigger == klyaml.TriggerMerge && r.ApplyRun == "") {
			out = append(out, ov)
			continue
		}
		logOf(ctx).Info("not reporting an overlap with the plan of a closed pull request", "plan", ov.Run, "repo", r.Repo, "pr", r.PR)
	}
	return out
}

// closedPR is r's pull request as GitHub has it when it is closed, its
// close job enqueued; nil when it is open or cannot be read (logged).
func (b *Bot) closedPR(ctx context.Context, r projectRow) *github.PullRequest {
	base := JobBase{Delivery: "reconcile", Event: "reconcile", Installation: r.Installation, Repo: r.Repo, PR: r.PR}
	c, repo, err := b.client(base)
	if err != nil {
		logOf(ctx).Warn("checking the pull request of an overlapping plan", "repo", r.Repo, "pr", r.PR, "err", err)
		return nil
	}
	pr, err := c.GetPullRequest(ctx, repo, r.PR)
	if err != nil {
		logOf(ctx).Warn("checking the pull request of an overlapping plan", "repo", r.Repo, "pr", r.PR, "err", err)
		return nil
	}
	if pr.State != "closed" {
		return nil
	}
	if err := b.enqueueClosed(ctx, base, pr); err != nil {
		logOf(ctx).Warn("enqueuing the close of the pull request of an overlapping plan", "repo", r.Repo, "pr", r.PR, "err", err)
	}
	return &pr
}
