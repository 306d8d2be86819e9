package bot

import (
	"context"
	"strings"
	"time"

	"github.com/riverqueue/river"

	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/klyaml"
	"github.com/kilolock/kilolock/internal/queue"
	"github.com/kilolock/kilolock/internal/report"
)

// KindQueue is the job kind of a merge group of GitHub's merge queue.
const KindQueue = "klbot_queue"

// Merge group actions (QueueArgs.Action): GitHub's merge_group actions.
const (
	QueueChecksRequested = "checks_requested" // judge the group (also a Re-run of its "kl" check run)
	QueueDestroyed       = "destroyed"        // merged, dequeued or invalidated: nothing stays pending
)

// QueueArgs judges a merge group of GitHub's merge queue (merge_group
// checks_requested, or a Re-run of the group's "kl" check run) or ends its
// check (destroyed, with GitHub's Reason). JobBase.PR is 0: a group holds
// several pull requests. HeadSHA is the group's head commit; HeadRef
// (refs/heads/gh-readonly-queue/BASE/pr-N-SHA) names its last pull
// request, "" for a Re-run; BaseSHA is the base commit the group was made
// on ("" for a Re-run); BaseRef the branch it merges into
// (refs/heads/BASE).
type QueueArgs struct {
	JobBase
	Action  string `json:"action"`
	Reason  string `json:"reason,omitempty"`
	HeadSHA string `json:"head_sha"`
	HeadRef string `json:"head_ref,omitempty"`
	BaseSHA string `json:"base_sha,omitempty"`
	BaseRef string `json:"base_ref"`
}

// Kind is KindQueue.
func (QueueArgs) Kind() string { return KindQueue }

// InsertOpts sets the attempts.
func (QueueArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: MaxAttempts} }

// queueExternalID is the external id of a merge group's "kl" check run,
// "klq:BASE": a Re-run of it judges the group again.
func queueExternalID(baseRef string) string {
	return "klq:" + strings.TrimPrefix(baseRef, "refs/heads/")
}

// parseQueueExternalID is queueExternalID's base branch.
func parseQueueExternalID(s string) (string, bool) {
	base, ok := strings.CutPrefix(s, "klq:")
	return base, ok && base != "" && !strings.ContainsAny(base, " \t\n")
}

// judgeGroup is the merge-queue job (QueueArgs, ADR 0058): for destroyed,
// the group's "kl" check run is completed if still in progress;
// otherwise the group's "kl" check run is shown in progress, its pull
// requests are found (groupPRs), each one's plans read (queuedPR, with
// the safety keys read from the base: merge_queue, apply_trigger), judged
// in queue order (queue.Judge), the group recorded for the merge-time applies'
// order, and the check run completed: success when every pull request
// passes. A group GitHub destroyed before the job ran is not judged.
func (b *Bot) judgeGroup(ctx context.Context, jr *jobRun, a QueueArgs) (JobResult, error) {
	c, repo, err := b.client(a.JobBase)
	if err != nil {
		return "", err
	}
	if a.Action == QueueDestroyed {
		return b.groupDestroyed(ctx, c, repo, a)
	}
	if reason, err := b.db.groupDestroyed(ctx, a.Repo, a.HeadSHA); err != nil || reason != "" {
		if err != nil {
			return "", err
		}
		logOf(ctx).Info("merge group destroyed before it was judged", "head", a.HeadSHA, "reason", reason)
		return ResultSkipped, b.endDestroyed(ctx, jr, c, repo, a, reason)
	}
	lc := jr.liveFor(a.HeadSHA, CheckAggregate, queueExternalID(a.BaseRef), "",
		report.LiveJob{Kind: report.JobQueue, Ask: report.AskQueue, HeadSHA: a.HeadSHA})
	if err := jr.show(ctx, c, repo, lc, func(n *report.InProgress) { n.Phase = report.LiveJudging }); err != nil {
		return "", err
	}
	g := report.MergeGroup{HeadSHA: a.HeadSHA, BaseRef: strings.TrimPrefix(a.BaseRef, "refs/heads/")}
	if err := b.judgeInto(ctx, c, repo, a, &g); err != nil {
		return "", err
	}
	conclusion, res := "success", ResultOK
	if !g.OK() {
		conclusion, res = "failure", ResultRefused
	}
	_, err = b.putCheckRun(ctx, c, repo, github.CheckRun{Name: CheckAggregate, HeadSHA: a.HeadSHA, ExternalID: queueExternalID(a.BaseRef),
		Conclusion: conclusion, Title: g.Title(), Summary: noticeMarkdown(g, report.CheckRunSummaryLimit)})
	logOf(ctx).Info("merge group judged", "head", a.HeadSHA, "prs", len(g.PRs), "conclusion", conclusion, "problem", g.Problem)
	return res, err
}

// judgeInto fills g: the group's pull requests judged in queue order, or
// the problem that kept klbot from finding them; the group is recorded.
func (b *Bot) judgeInto(ctx context.Context, c Client, repo github.Repo, a QueueArgs, g *report.MergeGroup) error {
	nums, problem, err := b.groupPRs(ctx, c, repo, a)
	if err != nil || problem != "" {
		g.Problem = problem
		return err
	}
	base, cp, err := b.base(ctx, c, repo)
	if err != nil {
		return err
	}
	if cp != nil {
		g.Problem = strings.ToLower(cp.Title[:1]) + cp.Title[1:]
		return nil
	}
	var queued []queue.PR
	var rec []groupPR
	for _, n := range nums {
		q, err := b.queuedPR(ctx, c, repo, n, g.BaseRef, base)
		if err != nil {
			return err
		}
		queued = append(queued, q)
		rec = append(rec, groupPR{PR: n, Head: q.Head})
	}
	g.PRs = queue.Judge(queued)
	return b.db.saveGroup(ctx, a.Repo, a.HeadSHA, g.BaseRef, rec)
}

// groupPRs finds a merge group's pull requests, in queue order
// (queue.Walk): a problem fails the group, not judged.
func (b *Bot) groupPRs(ctx context.Context, c Client, repo github.Repo, a QueueArgs) ([]int, string, error) {
	return queue.Walk(ctx, c, repo, queue.Group{HeadSHA: a.HeadSHA, HeadRef: a.HeadRef, BaseSHA: a.BaseSHA, BaseRef: a.BaseRef})
}

// queuedPR reads what the judgement needs of pull request n: its head,
// and for each project its head touches the plan of that head, with the
// rules of its apply read again from base (klyaml.Tighten, ADR 0040).
func (b *Bot) queuedPR(ctx context.Context, c Client, repo github.Repo, n int, baseBranch string, base *klyaml.Base) (queue.PR, error) {
	q, judge, err := queue.ReadPR(ctx, c, repo, n, baseBranch)
	if err != nil || !judge {
		return q, err
	}
	rows, err := b.db.projects(ctx, repo.String(), n)
	if err != nil {
		return q, err
	}
	for _, r := range rows {
		if !r.Open || r.HeadSHA != q.Head {
			continue
		}
		p, ok, err := b.queuedPlan(ctx, r, base)
		if err != nil {
			return q, err
		}
		if ok {
			q.Plans = append(q.Plans, p)
		}
	}
	return q, nil
}

// queuedPlan is project row r's plan as the judgement reads it; ok is
// false for a project its head no longer touches.
func (b *Bot) queuedPlan(ctx context.Context, r projectRow, base *klyaml.Base) (queue.Plan, bool, error) {
	cfg := r.Config
	cfg.State = r.State
	cfg = klyaml.Tighten(cfg, base)
	p := queue.Plan{Project: r.Project, State: r.State, PlanRun: r.PlanRun,
		OnMerge: cfg.ApplyTrigger == klyaml.TriggerMerge, MergeQueue: cfg.MergeQueue}
	agg, ok, err := b.aggregateProject(ctx, r)
	if err != nil || !ok {
		return p, ok, err
	}
	switch agg.Verdict {
	case report.VerdictApplied:
		p.St = queue.PlanApplied
		return p, true, nil
	case report.VerdictApplicable, report.VerdictStale, report.VerdictFenced:
	default:
		return p, true, nil // queue.PlanNone
	}
	run, err := b.eng.Run(ctx, r.PlanRun)
	if err != nil {
		return p, false, err
	}
	if run.Envelope == nil {
		return p, true, nil
	}
	sp, err := b.eng.SincePlan(ctx, run.ID)
	if err != nil {
		return p, false, err
	}
	p.St, p.Footprint, p.SincePlan, p.FencedBy = queue.PlanOpen, run.Envelope.Footprint, *sp, agg.FencedBy
	return p, true, nil
}

// endDestroyed completes the "kl" check run an earlier attempt of the
// judging job left in progress on a group GitHub destroyed since (the
// destroyed job may have found none yet): nothing stays pending.
func (b *Bot) endDestroyed(ctx context.Context, jr *jobRun, c Client, repo github.Repo, a QueueArgs, reason string) error {
	run := github.CheckRun{Name: CheckAggregate, HeadSHA: a.HeadSHA, ExternalID: queueExternalID(a.BaseRef)}
	if jr.liveOf(run) == nil {
		return nil
	}
	g := report.MergeGroup{HeadSHA: a.HeadSHA, BaseRef: strings.TrimPrefix(a.BaseRef, "refs/heads/"), Destroyed: reason}
	run.Conclusion, run.Title, run.Summary = "neutral", g.Title(), noticeMarkdown(g, report.CheckRunSummaryLimit)
	_, err := b.putCheckRun(ctx, c, repo, run)
	return err
}

// groupDestroyed ends a destroyed merge group (merged, dequeued,
// invalidated): the reason is recorded (a judging job that runs later
// judges nothing), and its "kl" check run, if still in progress, is
// completed — neutral, saying it was destroyed before it was judged — so
// that nothing stays pending.
func (b *Bot) groupDestroyed(ctx context.Context, c Client, repo github.Repo, a QueueArgs) (JobResult, error) {
	reason := a.Reason
	if reason == "" {
		reason = "destroyed"
	}
	if err := b.db.destroyGroup(ctx, a.Repo, a.HeadSHA, strings.TrimPrefix(a.BaseRef, "refs/heads/"), reason); err != nil {
		return "", err
	}
	info, found, err := c.FindCheckRun(ctx, repo, a.HeadSHA, CheckAggregate)
	if err != nil {
		return "", err
	}
	if !found || info.Status == "completed" {
		return ResultOK, nil
	}
	g := report.MergeGroup{HeadSHA: a.HeadSHA, BaseRef: strings.TrimPrefix(a.BaseRef, "refs/heads/"), Destroyed: reason}
	err = b.writing(ctx, repo, 0, func(ctx context.Context) error {
		_, err := c.UpdateCheckRun(ctx, repo, info.ID, github.CheckRun{Name: CheckAggregate, Conclusion: "neutral",
			Title: g.Title(), Summary: noticeMarkdown(g, report.CheckRunSummaryLimit)})
		return err
	})
	logOf(ctx).Info("merge group destroyed: its kl check run completed", "head", a.HeadSHA, "reason", reason)
	return ResultOK, err
}

// mergeOrderWait bounds how long a merge-time apply waits for the
// merge-time applies of the pull requests ahead of it in its merge group.
const mergeOrderWait = 15 * time.Minute

// mergeOrder holds back the merge-time applies of a pull request merged by
// GitHub's merge queue until those of the pull requests ahead of it in its
// merge group are done (their project rows closed): the applies run in
// queue order (ADR 0058), each under the re-plan rule. It returns a
// queuedError while one ahead still has a merge-time plan to apply, for at
// most mergeOrderWait from the job's start; after that the apply goes on,
// its since-plan still guarding it.
func (b *Bot) mergeOrder(ctx context.Context, jr *jobRun, x *applyCtx) error {
	ahead, err := b.db.aheadInGroup(ctx, x.a.Repo, x.a.PR, x.pr.HeadSHA)
	if err != nil || len(ahead) == 0 {
		return err
	}
	for _, g := range ahead {
		rows, err := b.db.projects(ctx, x.a.Repo, g.PR)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if !r.Open || r.HeadSHA != g.Head || r.PlanRun == "" || r.ApplyRun != "" || r.Config.ApplyTrigger != klyaml.TriggerMerge {
				continue
			}
			if time.Since(jr.st.Started) > mergeOrderWait {
				logOf(ctx).Warn("merge-time apply goes on without the one ahead in the merge queue", "ahead", g.PR, "project", r.Project, "waited", mergeOrderWait)
				return nil
			}
			return queued("after the merge-time apply of #%d, ahead in the merge queue", g.PR)
		}
	}
	return nil
}
