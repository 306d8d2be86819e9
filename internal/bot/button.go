package bot

import (
	"context"
	"errors"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/queue"
	"github.com/kilolock/kilolock/internal/report"
)

// The plan check run's Apply button lives as long as its plan can be
// applied (issue 11 §8): it is removed when the plan is applied,
// superseded or closed, and when a refresh finds it stale or fenced; a
// press on a button a page still shows is answered to whoever pressed it,
// not in a check run.

// retireButton removes the Apply button of r's plan check run ("kl plan ·
// PROJECT" on r.HeadSHA), if klbot made that check run. A failure is
// logged, not fatal: a press on the button left is answered
// (notApplicable).
func (b *Bot) retireButton(ctx context.Context, c Client, repo github.Repo, r projectRow, why string) {
	name := PlanCheckName(r.Project)
	var ok bool
	err := b.writing(ctx, repo, r.PR, func(ctx context.Context) error {
		var id int64
		var err error
		id, ok, err = b.db.checkRunID(ctx, repo.String(), r.HeadSHA, name)
		if err == nil && ok {
			err = c.RemoveCheckRunActions(context.WithoutCancel(ctx), repo, id, name)
		}
		return err
	})
	if err != nil {
		logOf(ctx).Warn("removing the Apply button of a plan no longer applicable", "project", r.Project, "plan", r.PlanRun, "why", why, "err", err)
		return
	}
	if ok {
		logOf(ctx).Info("Apply button removed: the plan is no longer applicable", "project", r.Project, "plan", r.PlanRun, "why", why)
	}
}

// notApplicable says why r's plan can no longer be applied from the Apply
// button of its check run on commit buttonSHA, the pull request's head
// being head: nil when it can. The reasons, in order: the plan is no
// longer planned (applied, superseded, …), the button is not on the
// head's check run, the plan is stale (a version since changed its write
// set), or fenced.
func (b *Bot) notApplicable(ctx context.Context, r projectRow, buttonSHA, head string) (*report.PlanNotApplicable, error) {
	n := &report.PlanNotApplicable{Project: r.Project, PlanRun: r.PlanRun, PlanSHA: r.HeadSHA, HeadSHA: head}
	if buttonSHA != "" {
		n.PlanSHA = buttonSHA
	}
	run, err := b.eng.Run(ctx, r.PlanRun)
	if err != nil {
		return nil, err
	}
	if run.Status != engine.StatusPlanned {
		n.Status, n.End, n.ByApply = run.Status, run.End, run.ApplyRun
		return n, nil
	}
	if n.PlanSHA != head || r.HeadSHA != head {
		return n, nil
	}
	stale, fenced, err := b.staleOrFenced(ctx, run)
	if err != nil || (stale == nil && len(fenced) == 0) {
		return nil, err
	}
	n.Stale, n.FencedBy = stale, fenced
	return n, nil
}

// staleOrFenced is queue.StaleOrFenced over klbot's engine.
func (b *Bot) staleOrFenced(ctx context.Context, run engine.Run) (*engine.SincePlanEntry, []string, error) {
	return queue.StaleOrFenced(ctx, b.eng, run)
}

// retireButtons removes the Apply button of each plan of rows not yet
// applied that can no longer be applied: no longer planned (superseded by
// a push or a close), stale after another pull request's commit, or
// fenced by a crashed apply.
func (b *Bot) retireButtons(ctx context.Context, c Client, repo github.Repo, rows []projectRow) error {
	for _, r := range rows {
		if r.PlanRun == "" || r.ApplyRun != "" {
			continue
		}
		run, err := b.eng.Run(ctx, r.PlanRun)
		if errors.Is(err, engine.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if run.Status != engine.StatusPlanned {
			b.retireButton(ctx, c, repo, r, string(run.Status))
			continue
		}
		stale, fenced, err := b.staleOrFenced(ctx, run)
		switch {
		case err != nil:
			return err
		case stale != nil:
			b.retireButton(ctx, c, repo, r, "stale")
		case len(fenced) > 0:
			b.retireButton(ctx, c, repo, r, "fenced")
		}
	}
	return nil
}

// staleButton answers a press of the Apply button of a plan that can no
// longer be applied (notApplicable): a reply to whoever pressed it saying
// why, and no check run or sticky comment changed. done is false when the plan can be applied.
func (b *Bot) staleButton(ctx context.Context, x *applyCtx, rows []projectRow) (done bool, err error) {
	for _, r := range rows {
		if r.Project != x.a.Project || r.PlanRun == "" {
			continue
		}
		n, err := b.notApplicable(ctx, r, x.a.HeadSHA, x.pr.HeadSHA)
		if err != nil || n == nil {
			return false, err
		}
		logOf(ctx).Info("Apply button pressed on a plan no longer applicable", "project", r.Project, "plan", r.PlanRun)
		return true, b.reply(ctx, x.c, x.repo, x.a.JobBase, noticeMarkdown(*n, 0))
	}
	return false, nil
}
