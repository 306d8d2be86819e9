package bot

import (
	"bytes"
	"context"
	"errors"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/klyaml"
	"github.com/kilolock/kilolock/internal/report"
)

// applyCtx is one apply job's shared facts.
type applyCtx struct {
	a    ApplyArgs
	c    Client
	repo github.Repo
	pr   github.PullRequest
	// noApply: the rules of an apply cannot be read (Bot.applyRules), so
	// nothing applies; on merge, the plans are closed unapplied.
	noApply bool
}

// apply is the apply job (ApplyArgs). For a comment or the button, the
// actor's write permission is checked first: without it the refusal goes
// to the commenter only (Bot.mayWrite), never into a check run or the
// sticky comment (issue 11 §1). For "close" it supersedes the pull
// request's open plans. Otherwise the rules of the apply are read again
// from the safety keys' base (Bot.applyRules, ADR 0040: the default branch
// may have changed since the plan; when it cannot be read, nothing
// applies); then, for each target project (the one asked
// for, or every project of the PR; on merge those with apply_trigger merge)
// it checks the bot's rules — open PR, the project's apply trigger, a
// plan for the PR's current head, that plan still open, and the project's
// apply_requirements — and reports a refusal
// naming the rule (check run "kl apply · PROJECT", action_required, and the
// sticky comment); then engine.Apply does reservations, since-plan,
// re-plan, apply and commit, and its run story is reported. A refusal is
// not an error: the job succeeds after reporting it.
func (b *Bot) apply(ctx context.Context, a ApplyArgs) (JobResult, error) {
	c, repo, err := b.client(a.JobBase)
	if err != nil {
		return "", err
	}
	if a.Trigger == TriggerComment || a.Trigger == TriggerButton {
		cmd := "/kl apply"
		if a.Trigger == TriggerButton {
			cmd = "Apply button"
		}
		if ok, err := b.mayWrite(ctx, c, repo, a.JobBase, cmd); err != nil || !ok {
			return ResultRefused, err
		}
	}
	pr, err := b.pullRequest(ctx, c, repo, a.JobBase)
	if err != nil {
		return "", err
	}
	rows, err := b.db.projects(ctx, a.Repo, a.PR)
	if err != nil {
		return "", err
	}
	x := &applyCtx{a: a, c: c, repo: repo, pr: pr}
	if a.Trigger != TriggerClose { // the rules of an apply, read again (ADR 0040)
		ok := false
		if rows, ok, err = b.applyRules(ctx, x, rows); err != nil {
			return "", err
		}
		if x.noApply = !ok; x.noApply && a.Trigger != TriggerMerge {
			return ResultRefused, nil
		}
	}
	if a.Trigger == TriggerClose || a.Trigger == TriggerMerge {
		return b.closed(ctx, x, rows)
	}
	if a.Trigger == TriggerButton {
		if done, err := b.staleButton(ctx, x, rows); done || err != nil {
			return ResultRefused, err
		}
	}
	var targets []projectRow
	for _, r := range rows {
		if r.PlanRun == "" || (a.Project != "" && r.Project != a.Project) {
			continue
		}
		if a.Project == "" && r.ApplyRun == "" {
			// Without -p, a plan superseded by a push that no longer
			// touches its project is not a target. A plan run the store
			// does not have stays one: engine.Apply refuses it, and the
			// refusal is reported.
			run, err := b.eng.Run(ctx, r.PlanRun)
			switch {
			case err == nil && run.Status == engine.StatusSuperseded:
				continue
			case err != nil && !errors.Is(err, engine.ErrNotFound):
				return "", err
			}
		}
		targets = append(targets, r)
	}
	if len(targets) == 0 {
		return ResultRefused, b.replyNotice(ctx, c, repo, a.JobBase, report.NothingToApply{Project: a.Project, Planned: planned(rows)})
	}
	result := ResultOK
	for _, r := range targets {
		res, err := b.applyProject(ctx, x, r)
		if err != nil {
			return "", err
		}
		if res != ResultOK {
			result = res
		}
	}
	return result, b.updateSticky(context.WithoutCancel(ctx), c, repo, a.PR) // an interrupted apply is reported too
}

func planned(rows []projectRow) []string {
	var out []string
	for _, r := range rows {
		if r.PlanRun != "" {
			out = append(out, r.Project)
		}
	}
	return out
}

// applyProject applies one project after the bot's checks (the actor's
// write permission was checked before: Bot.mayWrite).
func (b *Bot) applyProject(ctx context.Context, x *applyCtx, r projectRow) (JobResult, error) {
	a, pr := x.a, x.pr
	no := x.refusal(r)
	dropped, err := b.droppedPlan(ctx, r)
	if err != nil {
		return "", err
	}
	switch {
	case pr.State != "open":
		no.Rule, no.PRState = report.BotRuleOpenPR, pr.State
	case r.Config.ApplyTrigger == klyaml.TriggerMerge:
		no.Rule = report.BotRuleTrigger
	case dropped != nil:
		// The project has nothing at the new head: the refusal goes on
		// the commit of its plan, where its check runs are.
		no.Rule, no.PlanClosed, no.Problem, no.PlanSHA = report.BotRuleOpenPlan, true, dropped.Why(), dropped.PlanSHA
		return b.refuseAt(ctx, x, r, no, dropped.PlanSHA)
	case a.HeadSHA != "" && a.HeadSHA != pr.HeadSHA:
		no.Rule, no.ButtonSHA = report.BotRuleHead, a.HeadSHA
	case r.HeadSHA != pr.HeadSHA:
		no.Rule = report.BotRuleHead
	default:
		held, err := b.requirementsHold(ctx, x, r, false)
		if err != nil {
			return "", err
		}
		if held != nil {
			return b.refuse(ctx, x, r, *held)
		}
		return b.runApply(ctx, x, r)
	}
	return b.refuse(ctx, x, r, no)
}

// refusal is a refusal of r's apply, its rule and rule facts left to fill.
func (x *applyCtx) refusal(r projectRow) report.BotRefusal {
	asked := report.AskedByComment
	switch x.a.Trigger {
	case TriggerButton:
		asked = report.AskedByButton
	case TriggerMerge:
		asked = report.AskedByMerge
	}
	return report.BotRefusal{AskedBy: asked, Actor: x.a.Actor, Repo: x.a.Repo, PR: x.a.PR, Project: r.Project,
		PlanRun: r.PlanRun, PlanSHA: r.HeadSHA, HeadSHA: x.pr.HeadSHA}
}

// requirementsHold checks the project's apply_requirements (kl.yaml): nil
// when they hold, else the refusal by the first that does not. merged
// says the pull request was merged (so it was mergeable).
func (b *Bot) requirementsHold(ctx context.Context, x *applyCtx, r projectRow, merged bool) (*report.BotRefusal, error) {
	for _, req := range r.Config.ApplyRequirements {
		no := x.refusal(r)
		switch req {
		case klyaml.RequireApproved:
			rv, err := x.c.ListReviews(ctx, x.repo, x.a.PR)
			if err != nil {
				return nil, err
			}
			if !rv.Approved() {
				no.Rule, no.ApprovedBy, no.ChangesRequestedBy = report.BotRuleApproved, rv.ApprovedBy, rv.ChangesRequestedBy
				return &no, nil
			}
		case klyaml.RequireMergeable:
			if !merged && (x.pr.Mergeable == nil || !*x.pr.Mergeable) {
				no.Rule, no.Mergeable = report.BotRuleMergeable, x.pr.Mergeable
				return &no, nil
			}
		}
	}
	return nil, nil
}

// runApply calls engine.Apply and reports the apply run's story.
func (b *Bot) runApply(ctx context.Context, x *applyCtx, r projectRow) (JobResult, error) {
	a, pr := x.a, x.pr
	out, err := b.eng.Apply(ctx, engine.ApplyInput{
		PlanRun: r.PlanRun, State: r.State, Actor: a.Actor, Wait: b.opts.ApplyWait,
		PR: &engine.PullRequest{Repo: a.Repo, Number: a.PR, HeadSHA: pr.HeadSHA, URL: pr.HTMLURL},
	})
	runID := ""
	var re *engine.RunError
	var se *engine.StatusError
	switch {
	case out != nil:
		runID = out.Run.ID
	case errors.As(err, &re):
		runID = re.Run
	case errors.As(err, &se) && se.By != "" && r.ApplyRun == "":
		// The plan was claimed by an apply run of an earlier attempt of
		// this job (a crash or a shutdown): report that run.
		runID = se.By
	case errors.As(err, &se) && se.By != "" && se.By == r.ApplyRun:
		runID = se.By
	case errors.As(err, &se):
		no := x.refusal(r)
		no.Rule, no.Problem, no.PlanClosed = report.BotRuleOpenPlan, se.Error(), true
		return b.refuse(ctx, x, r, no)
	case err != nil && ctx.Err() != nil:
		return "", err
	case errors.Is(err, engine.ErrNotFound) || errors.Is(err, engine.ErrInvalid):
		no := x.refusal(r)
		no.Rule, no.Problem = report.BotRuleOpenPlan, err.Error()
		return b.refuse(ctx, x, r, no)
	case err != nil:
		return "", err
	}
	story, serr := b.eng.RunStory(context.WithoutCancel(ctx), runID)
	if serr != nil {
		return "", serr
	}
	outcome, conclusion := applyOutcome(story.Run.Status)
	b.metrics.run("apply", outcome)
	var md bytes.Buffer
	if err := report.Apply(&md, story, report.Options{Format: report.Markdown, Commands: commandsOf(a.Repo, a.PR, r.Project)}); err != nil {
		return "", err
	}
	check := github.CheckRun{Name: ApplyCheckName(r.Project), HeadSHA: pr.HeadSHA, ExternalID: externalID(a.PR, r.Project),
		Conclusion: conclusion, Title: report.ApplyTitle(story), Summary: report.Truncate(md.String(), report.CheckRunSummaryLimit)}
	if _, err := b.putCheckRun(context.WithoutCancel(ctx), x.c, x.repo, check); err != nil {
		return "", err
	}
	plan, perr := b.eng.Run(context.WithoutCancel(ctx), r.PlanRun)
	if perr == nil && plan.Status != engine.StatusPlanned {
		b.retireButton(ctx, x.c, x.repo, r, string(plan.Status)) // applied, or closed by the apply's refusal
	}
	r.ApplyRun, r.Note = runID, note{}
	if err := b.db.saveProject(context.WithoutCancel(ctx), r); err != nil {
		return "", err
	}
	if err := b.db.noteApplyReported(context.WithoutCancel(ctx), r, story.Run); err != nil { // the reconcile job reports changes since
		return "", err
	}
	if story.Version != nil {
		if err := b.refreshOthers(ctx, r, story.Version.Serial); err != nil {
			logOf(ctx).Warn("enqueuing refreshes of other pull requests", "err", err)
		}
	}
	if err != nil && ctx.Err() != nil && (perr != nil || plan.Status == engine.StatusPlanned) {
		// Interrupted (shutdown) before Terraform ran: the plan is open
		// again and River hands the job back. Once Terraform ran, the
		// job is done: its partial version (or fence) is reported, and
		// what comes next is a person's call (ADR 0043).
		return "", err
	}
	if outcome == outcomeRefused {
		return ResultRefused, nil
	}
	return ResultOK, nil
}

// applyOutcome maps an ended apply run's status, through its verdict
// (engine.ApplyVerdict, the one mapping), to the metrics outcome and the
// check run conclusion.
func applyOutcome(s engine.RunStatus) (outcome runOutcome, conclusion string) {
	switch engine.ApplyVerdict(s) {
	case engine.VerdictAllowed:
		return outcomeApplied, "success"
	case engine.VerdictRefused:
		return outcomeRefused, "action_required"
	case engine.VerdictInterrupted:
		return outcomeInterrupted, "cancelled"
	}
	return outcomeFailed, "failure"
}

// refuse reports a refusal by a bot rule: the "kl apply · PROJECT" check
// run on the PR's head (conclusion action_required) and the project's note
// in the sticky comment, both naming the rule and why.
func (b *Bot) refuse(ctx context.Context, x *applyCtx, r projectRow, no report.BotRefusal) (JobResult, error) {
	return b.refuseAt(ctx, x, r, no, x.pr.HeadSHA)
}

// droppedPlan is r's plan when a push dropped its project (the plan run is
// superseded as untouched or removed, engine.SupersedeDropped), else nil.
// A run the store does not have is not dropped: engine.Apply refuses it.
func (b *Bot) droppedPlan(ctx context.Context, r projectRow) (*report.PlanSuperseded, error) {
	if r.PlanRun == "" || r.ApplyRun != "" {
		return nil, nil
	}
	run, err := b.eng.Run(ctx, r.PlanRun)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case run.Status != engine.StatusSuperseded || run.End == nil || run.PR == nil:
		return nil, nil
	}
	why := run.End.Superseded
	if why != engine.SupersededByUntouched && why != engine.SupersededByRemoved {
		return nil, nil
	}
	return &report.PlanSuperseded{Project: r.Project, HeadSHA: run.End.Commit, PlanRun: run.ID, PlanSHA: run.PR.HeadSHA,
		Gone: why == engine.SupersededByRemoved}, nil
}

// refuseAt is refuse with the check run on commit sha.
func (b *Bot) refuseAt(ctx context.Context, x *applyCtx, r projectRow, no report.BotRefusal, sha string) (JobResult, error) {
	check := github.CheckRun{Name: ApplyCheckName(r.Project), HeadSHA: sha, ExternalID: externalID(x.a.PR, r.Project),
		Conclusion: "action_required", Title: no.Title(), Summary: noticeMarkdown(no, report.CheckRunSummaryLimit)}
	if _, err := b.putCheckRun(ctx, x.c, x.repo, check); err != nil {
		return "", err
	}
	r.Note = note{Kind: noteRefused, Text: no.Note()}
	logOf(ctx).Info("apply refused", "project", r.Project, "rule", no.Rule, "why", no.Why())
	return ResultRefused, b.db.saveProject(ctx, r)
}

// closed handles a pull request that was closed: on a merge, the projects
// with apply_trigger merge and an open plan for the merged head are applied
// (requirements checked; mergeable holds by the merge); every other open
// plan is superseded ("closed without apply"), and the PR's rows are
// marked closed so no refresh touches it again.
func (b *Bot) closed(ctx context.Context, x *applyCtx, rows []projectRow) (JobResult, error) {
	result := ResultOK
	for _, r := range rows {
		if r.PlanRun == "" || r.ApplyRun != "" {
			continue
		}
		if x.a.Trigger == TriggerMerge && r.Config.ApplyTrigger == klyaml.TriggerMerge && !x.noApply {
			var res JobResult
			var err error
			switch held, rerr := b.requirementsHold(ctx, x, r, true); {
			case rerr != nil:
				return "", rerr
			case r.HeadSHA != x.pr.HeadSHA:
				no := x.refusal(r)
				no.Rule, no.Merged = report.BotRuleHead, true
				res, err = b.refuse(ctx, x, r, no)
			case held != nil:
				res, err = b.refuse(ctx, x, r, *held)
			default:
				res, err = b.runApply(ctx, x, r)
			}
			if err != nil {
				return "", err
			}
			if res != ResultOK {
				result = res
			}
			continue
		}
		pr := &engine.PullRequest{Repo: x.a.Repo, Number: x.a.PR}
		if err := b.eng.Supersede(ctx, r.PlanRun, engine.SupersededByClosedPR, pr, ""); err != nil && !notOpen(err) {
			return "", err
		}
		r.Note = note{Kind: noteSuperseded, Text: report.ClosedUnapplied{PlanRun: r.PlanRun, Merged: x.pr.Merged}.Note()}
		if err := b.db.saveProject(ctx, r); err != nil {
			return "", err
		}
	}
	if err := b.retireButtons(ctx, x.c, x.repo, rows); err != nil { // the plans closed unapplied
		return "", err
	}
	if err := b.db.closePR(ctx, x.a.Repo, x.a.PR); err != nil {
		return "", err
	}
	return result, b.updateSticky(ctx, x.c, x.repo, x.a.PR)
}
