package bot

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/report"
)

// How jobs of one pull request take their turns beyond the locks (ADR
// 0041): an apply parked while it waits for reservations holds no lock,
// yet its project is not free — the jobs that change the whole pull
// request wait for it (parkedApplies), and a command asking for what an
// apply of the pull request is already doing joins it (joinApplies).

// applyingRun is the apply run in progress that claimed r's plan — one
// waiting (parked, or in another process's wait) or applying — if any,
// other than the job's own parked ones. A waiting run whose lease ran out
// is not: the lease sweep ends it and hands the plan back.
func (b *Bot) applyingRun(ctx context.Context, jr *jobRun, r projectRow) (*engine.Run, error) {
	if r.PlanRun == "" {
		return nil, nil
	}
	plan, err := b.eng.Run(ctx, r.PlanRun)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, nil
	}
	if err != nil || plan.Status != engine.StatusApplying || plan.ApplyRun == "" {
		return nil, err
	}
	for _, p := range jr.st.Parked {
		if p.Run == plan.ApplyRun {
			return nil, nil
		}
	}
	run, err := b.eng.Run(ctx, plan.ApplyRun)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, nil
	}
	if err != nil || !run.InProgress() || (!run.LeaseUntil.IsZero() && run.LeaseUntil.Before(time.Now())) {
		return nil, err
	}
	return &run, nil
}

// parkedApplies queues a job that changes the whole pull request (it
// holds the PR lock exclusive) behind the pull request's applies in
// progress — parked ones hold no lock — releasing its locks: lives say
// so, and the returned error snoozes the job. nil when there are none.
func (b *Bot) parkedApplies(ctx context.Context, jr *jobRun, c Client, repo github.Repo, lives []*liveCheck) error {
	rows, err := b.db.projects(ctx, jr.base.Repo, jr.base.PR)
	if err != nil {
		return err
	}
	var behind []report.LiveJob
	for _, r := range rows {
		run, err := b.applyingRun(ctx, jr, r)
		if err != nil {
			return err
		}
		if run != nil {
			behind = append(behind, report.LiveJob{Project: r.Project, Actor: run.Actor, Run: run.ID, Waiting: run.Status == engine.StatusWaiting})
		}
	}
	if len(behind) == 0 {
		return nil
	}
	jr.locks.unlockAll()
	if err := jr.queuedShow(ctx, c, repo, lives)(behind); err != nil {
		return err
	}
	return queued("behind %d apply run(s) of the pull request in progress", len(behind))
}

// joinApplying takes out of targets the projects whose plan an apply run
// in progress claimed — applying, or parked while it waits for
// reservations — and the projects this command joined on an earlier
// attempt. Only the first attempt joins (issue 11 §4: a second /kl apply
// is answered, not absorbed silently); joined lists what it joined now.
func (b *Bot) joinApplying(ctx context.Context, jr *jobRun, targets []projectRow, first bool) (rest []projectRow, joined []report.JoinedProject, err error) {
	for _, r := range targets {
		if slices.Contains(jr.st.Joined, r.Project) {
			continue
		}
		if !first {
			rest = append(rest, r)
			continue
		}
		run, err := b.applyingRun(ctx, jr, r)
		if err != nil {
			return nil, nil, err
		}
		if run == nil {
			rest = append(rest, r)
			continue
		}
		joined = append(joined, report.JoinedProject{Project: r.Project, Check: ApplyCheckName(r.Project), Run: run.ID,
			Job: report.LiveJob{Project: r.Project, Actor: run.Actor, Run: run.ID, Waiting: run.Status == engine.StatusWaiting}})
		jr.st.Joined = append(jr.st.Joined, r.Project)
	}
	return rest, joined, nil
}

// joinHolders takes out of targets the projects whose lock an apply job
// asked by comment or button holds (bl.applying): that job is applying
// them, and the command joins it.
func joinHolders(jr *jobRun, targets []projectRow, bl *blocked, joined []report.JoinedProject) ([]projectRow, []report.JoinedProject) {
	var rest []projectRow
	for _, r := range targets {
		h, ok := bl.applying[r.Project]
		if !ok {
			rest = append(rest, r)
			continue
		}
		joined = append(joined, report.JoinedProject{Project: r.Project, Check: ApplyCheckName(r.Project), Job: h.live})
		jr.st.Joined = append(jr.st.Joined, r.Project)
	}
	return rest, joined
}

// answerJoined replies to the command, once, with what it joined and
// what it goes on with (rest).
func (b *Bot) answerJoined(ctx context.Context, jr *jobRun, x *applyCtx, joined []report.JoinedProject, rest []projectRow) error {
	if len(joined) == 0 || jr.st.Replied {
		return nil
	}
	var names []string
	for _, r := range rest {
		names = append(names, r.Project)
	}
	logOf(ctx).Info("command joins applies already under way", "projects", jr.st.Joined, "goes_on_with", names)
	cmd := "`/kl apply`"
	if x.a.Trigger == TriggerButton {
		cmd = "the Apply button"
	}
	if err := b.replyNotice(ctx, x.c, x.repo, x.a.JobBase, report.Joined{Command: cmd, Joined: joined, Rest: names}); err != nil {
		return err
	}
	jr.st.Replied = true
	return nil
}
