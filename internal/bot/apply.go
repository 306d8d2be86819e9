package bot

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"

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
	// merge is the checkout of a merged pull request's merge commit
	// (mergeCommit), removed when the job ends.
	merge mergeTree
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
//
// Turns (ADR 0041): what needs no lock comes first — the permission, 👀,
// the pull request, the targets, and whether an apply of the pull request
// is already doing a target (the command joins it and is answered so);
// then the PR lock (shared) and each target's project lock, by try-lock:
// while another job holds one, the targets' "kl apply · PROJECT" check
// runs say the command is queued behind it and the job is snoozed. An
// apply that must wait for other runs' reservations is parked
// (engine.ApplyInput.Park): its check run says on which runs, the job is
// snoozed, and a later attempt resumes the same apply run.
func (b *Bot) apply(ctx context.Context, jr *jobRun, a ApplyArgs) (JobResult, error) {
	c, repo, err := b.client(a.JobBase)
	if err != nil {
		return "", err
	}
	first := !jr.st.Authorized
	if first && (a.Trigger == TriggerComment || a.Trigger == TriggerButton) {
		cmd := "/kl apply"
		if a.Trigger == TriggerButton {
			cmd = "Apply button"
		}
		if ok, err := b.mayWrite(ctx, c, repo, a.JobBase, cmd); err != nil || !ok {
			return ResultRefused, err
		}
	}
	x := &applyCtx{a: a, c: c, repo: repo}
	if first {
		if x.pr, err = b.pullRequest(ctx, c, repo, a.JobBase); err != nil {
			return "", err
		}
		jr.st.Authorized, jr.st.Head = true, x.pr.HeadSHA
	}
	rows, err := b.db.projects(ctx, a.Repo, a.PR)
	if err != nil {
		return "", err
	}
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
		return b.closed(ctx, jr, x, rows, first)
	}
	if first && a.Trigger == TriggerButton {
		if done, err := b.staleButton(ctx, x, rows); done || err != nil {
			return ResultRefused, err
		}
	}
	targets, err := b.targets(ctx, jr, a, rows)
	if err != nil {
		return "", err
	}
	if len(targets) == 0 && len(jr.st.Applied) == 0 && len(jr.st.Joined) == 0 {
		return ResultRefused, b.replyNotice(ctx, c, repo, a.JobBase, report.NothingToApply{Project: a.Project, Planned: planned(rows)})
	}
	if first && a.Trigger == TriggerComment {
		var done bool
		if targets, done, err = b.appliedAlready(ctx, x, targets); done || err != nil {
			return ResultRefused, err
		}
	}
	targets, joined, err := b.joinApplying(ctx, jr, targets, first)
	if err != nil {
		return "", err
	}
	return b.applyTargets(ctx, jr, x, targets, joined, first)
}

// appliedAlready takes out of a "/kl apply"'s targets the projects whose
// plan an earlier apply of the project applied: applying it again would
// do nothing, and re-rendering its "kl apply · PROJECT" check run would
// say nothing new. The commenter is answered in a reply, naming the run
// (issue 11 §8: a command on a plan no longer applicable is answered, not
// absorbed). done: nothing is left to apply, and the reply is made.
func (b *Bot) appliedAlready(ctx context.Context, x *applyCtx, targets []projectRow) (rest []projectRow, done bool, err error) {
	var notes []string
	for _, r := range targets {
		if r.ApplyRun == "" {
			rest = append(rest, r)
			continue
		}
		run, err := b.eng.Run(ctx, r.PlanRun)
		switch {
		case errors.Is(err, engine.ErrNotFound):
			rest = append(rest, r) // engine.Apply refuses it, and the refusal is reported
			continue
		case err != nil:
			return nil, false, err
		}
		if run.Status != engine.StatusApplied {
			rest = append(rest, r)
			continue
		}
		logOf(ctx).Info("/kl apply of a plan applied already", "project", r.Project, "plan", r.PlanRun, "apply", run.ApplyRun)
		notes = append(notes, noticeMarkdown(report.PlanNotApplicable{Comment: true, Project: r.Project, PlanRun: r.PlanRun, PlanSHA: r.HeadSHA,
			HeadSHA: x.pr.HeadSHA, Status: run.Status, End: run.End, ByApply: run.ApplyRun}, 0))
	}
	if len(notes) == 0 {
		return rest, false, nil
	}
	if err := b.reply(ctx, x.c, x.repo, x.a.JobBase, strings.Join(notes, "\n")); err != nil {
		return nil, false, err
	}
	return rest, len(rest) == 0, nil
}

// targets are the projects an apply job applies: the one asked for, or
// every project with a plan — less a plan superseded by a push that no
// longer touches its project (without -p), and less the projects the job
// applied already (before it was snoozed for another).
func (b *Bot) targets(ctx context.Context, jr *jobRun, a ApplyArgs, rows []projectRow) ([]projectRow, error) {
	var targets []projectRow
	for _, r := range rows {
		if r.PlanRun == "" || (a.Project != "" && r.Project != a.Project) || slices.Contains(jr.st.Applied, r.Project) {
			continue
		}
		if _, parked := jr.st.Parked[r.Project]; a.Project == "" && r.ApplyRun == "" && !parked {
			// A plan run the store does not have stays a target:
			// engine.Apply refuses it, and the refusal is reported.
			run, err := b.eng.Run(ctx, r.PlanRun)
			switch {
			case err == nil && run.Status == engine.StatusSuperseded:
				continue
			case err != nil && !errors.Is(err, engine.ErrNotFound):
				return nil, err
			}
		}
		targets = append(targets, r)
	}
	return targets, nil
}

// applyTargets takes the targets' locks — on the first attempt, a target
// another command's apply job holds is joined, and the command answered
// (with joined, what joinApplying joined) — and applies each target; a
// target whose apply is parked snoozes the job once the others are done.
// While a lock is held by another job the job is queued.
func (b *Bot) applyTargets(ctx context.Context, jr *jobRun, x *applyCtx, targets []projectRow, joined []report.JoinedProject, first bool) (JobResult, error) {
	for len(targets) > 0 {
		names := make([]string, len(targets))
		for i, r := range targets {
			names[i] = r.Project
		}
		bl, err := jr.tryLock(ctx, lockSet{Projects: names})
		if err != nil {
			return "", err
		}
		if bl == nil {
			break
		}
		if first && len(bl.applying) > 0 {
			targets, joined = joinHolders(jr, targets, bl, joined)
			continue
		}
		if err := b.answerJoined(ctx, jr, x, joined, targets); err != nil {
			return "", err
		}
		var lives []*liveCheck
		for _, r := range targets {
			lives = append(lives, b.applyLive(jr, x, r, jr.st.Head))
		}
		return "", jr.queue(ctx, bl, jr.queuedShow(ctx, x.c, x.repo, lives))
	}
	if err := b.answerJoined(ctx, jr, x, joined, targets); err != nil {
		return "", err
	}
	if len(targets) == 0 {
		if len(jr.st.Applied) > 0 {
			// An earlier attempt applied them and failed after (writing
			// the sticky comment, say): what it failed to write, this one
			// writes.
			return ResultOK, b.updateSticky(context.WithoutCancel(ctx), x.c, x.repo, x.a.PR)
		}
		return ResultJoined, nil
	}
	if !first { // the pull request as it is now
		pr, err := x.c.GetPullRequest(ctx, x.repo, x.a.PR)
		if err != nil {
			return "", err
		}
		x.pr = pr
	}
	result, waiting := ResultOK, 0
	for _, r := range targets {
		res, err := b.applyProject(ctx, jr, x, r)
		var q *queuedError
		switch {
		case errors.As(err, &q):
			waiting++
			continue
		case err != nil:
			return "", err
		}
		jr.st.Applied = append(jr.st.Applied, r.Project)
		if res != ResultOK {
			result = res
		}
	}
	if err := b.updateSticky(context.WithoutCancel(ctx), x.c, x.repo, x.a.PR); err != nil { // an interrupted apply is reported too
		return "", err
	}
	if err := b.reportAggregate(context.WithoutCancel(ctx), x.c, x.repo, x.a.PR, x.pr.HeadSHA, false); err != nil {
		return "", err
	}
	if waiting > 0 {
		return "", queued("%d apply run(s) wait for reservations", waiting)
	}
	return result, nil
}

// applyLive is the in-progress "kl apply · PROJECT" check run of target r
// on the pull request's head (head: as the job read it).
func (b *Bot) applyLive(jr *jobRun, x *applyCtx, r projectRow, head string) *liveCheck {
	a := x.a
	asked := report.LiveJob{Kind: report.JobApply, Ask: jobAsk(a.Trigger), Project: a.Project, Actor: a.Actor}
	return jr.liveFor(head, ApplyCheckName(r.Project), externalID(a.PR, r.Project), r.Project, asked)
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
// write permission was checked before: Bot.mayWrite). A parked apply of
// the job is resumed: its rules held when it started.
func (b *Bot) applyProject(ctx context.Context, jr *jobRun, x *applyCtx, r projectRow) (JobResult, error) {
	if p, ok := jr.st.Parked[r.Project]; ok {
		return b.resumeOrAbandon(ctx, jr, x, r, p)
	}
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
		return b.runApply(ctx, jr, x, r, parkedApply{}, nil)
	}
	return b.refuse(ctx, x, r, no)
}

// resumeOrAbandon goes on with target r's parked apply p — unless, while
// it waited, its pull request was closed or pushed to (x.pr is read again
// on every attempt after the first): an apply is allowed only for an open
// pull request and a plan of its head, at its start and so at its resume.
// Then the parked run ends without applying (engine.AbandonParked:
// interrupted while waiting, its plan handed back for the push's plan or
// the close to supersede) and the refusal names the rule.
func (b *Bot) resumeOrAbandon(ctx context.Context, jr *jobRun, x *applyCtx, r projectRow, p parkedApply) (JobResult, error) {
	no := x.refusal(r)
	switch {
	case x.pr.State != "open":
		no.Rule, no.PRState = report.BotRuleOpenPR, x.pr.State
	case r.HeadSHA != x.pr.HeadSHA:
		no.Rule = report.BotRuleHead
	default:
		return b.runApply(ctx, jr, x, r, p, nil)
	}
	var se *engine.StatusError
	if err := b.eng.AbandonParked(ctx, p.Run); err != nil && !errors.As(err, &se) {
		return "", err
	}
	delete(jr.st.Parked, r.Project)
	logOf(ctx).Info("parked apply abandoned: its pull request moved on while it waited", "project", r.Project, "run", p.Run, "rule", no.Rule)
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

// requirementsHold checks the project's apply_requirements (kl.yaml), then
// its on_revert (revertHolds, ADR 0046): nil when they hold, else the
// refusal by the first that does not. merged
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
	return b.revertHolds(ctx, x, r)
}

// runApply calls engine.Apply — parked while it waits for reservations,
// resumed from p when p.Run is set — and reports the apply run's story.
// The apply's check run is in progress meanwhile: applying, or waiting on
// the runs it names; a parked apply returns a queuedError.
func (b *Bot) runApply(ctx context.Context, jr *jobRun, x *applyCtx, r projectRow, p parkedApply, mc *engine.MergeCommit) (JobResult, error) {
	a, pr := x.a, x.pr
	lc := b.applyLive(jr, x, r, pr.HeadSHA)
	plan := r.PlanRun
	if p.Plan != "" {
		plan = p.Plan
	}
	applying := func(run string) error {
		return jr.show(ctx, x.c, x.repo, lc, func(n *report.InProgress) {
			n.Phase, n.Behind, n.WaitingOn, n.PlanRun, n.Run = report.LiveApplying, nil, nil, plan, run
		})
	}
	if p.Run == "" { // a resumed apply still shows its wait until it has the reservations
		if err := applying(""); err != nil {
			return "", err
		}
	}
	var merged *engine.AfterMerge
	if pr.Merged { // a merge-time apply: its refusal's next step cannot be a re-plan of the branch
		merged = &engine.AfterMerge{Commit: pr.MergeCommitSHA}
	}
	out, err := b.eng.Apply(ctx, engine.ApplyInput{
		PlanRun: plan, State: r.State, Actor: a.Actor, Wait: b.opts.ApplyWait, Park: true, Resume: p.Run, MergeCommit: mc, AfterMerge: merged,
		Validate: validates(r.Config, pr.Merged),
		PR:       &engine.PullRequest{Repo: a.Repo, Number: a.PR, HeadSHA: pr.HeadSHA, URL: pr.HTMLURL},
		Progress: jr.progress(lc),
		OnReserved: func(run string) {
			if err := applying(run); err != nil {
				logOf(ctx).Warn("showing the apply in progress", "project", r.Project, "err", err)
			}
		},
	})
	var pe *engine.ParkedError
	if errors.As(err, &pe) {
		jr.st.Parked[r.Project] = parkedApply{Run: pe.Run, Plan: plan, Since: pe.Since, Until: pe.Until}
		logOf(ctx).Info("apply waits for reservations: parked", "project", r.Project, "run", pe.Run, "blockers", len(pe.Blockers), "until", pe.Until)
		if err := jr.show(ctx, x.c, x.repo, lc, func(n *report.InProgress) {
			n.Phase, n.Run, n.WaitingOn, n.WaitSince, n.WaitUntil = report.LiveWaiting, pe.Run, pe.Blockers, pe.Since, pe.Until
		}); err != nil {
			return "", err
		}
		return "", queued("apply run %s of %s waits for reservations", pe.Run, r.Project)
	}
	delete(jr.st.Parked, r.Project)
	runID, res, err := b.applyRunOf(ctx, x, r, p, out, err)
	if runID == "" {
		return res, err
	}
	return b.reportApply(ctx, x, r, runID, err)
}

// validates is whether an apply of project p's plan (p's rules as
// applyRules read them again; merged: an apply at merge) runs the
// validation re-plan of a native-lane plan first (engine.ApplyInput.
// Validate; ignored for a terraform-lane plan): validate: always, or merge
// at merge (ADR 0069 §9, ADR 0070) — or a lane tightened to terraform
// since the plan: the default branch asks for the whole plan now, which
// the validation is.
func validates(p klyaml.Project, merged bool) bool {
	switch {
	case p.Lane == engine.LaneChoiceTerraform, p.Validate == klyaml.ValidateAlways:
		return true
	case p.Validate == klyaml.ValidateNever:
		return false
	}
	return merged // merge, and "" (stored before the key): ADR 0070's default
}

// applyRunOf is the apply run engine.Apply's answer (out, err) is about,
// or, for an answer about no run of ours, the refusal it makes (res, err).
func (b *Bot) applyRunOf(ctx context.Context, x *applyCtx, r projectRow, p parkedApply, out *engine.ApplyOutcome, err error) (string, JobResult, error) {
	var re *engine.RunError
	var se *engine.StatusError
	switch {
	case out != nil:
		return out.Run.ID, "", err
	case errors.As(err, &re):
		return re.Run, "", err
	case p.Run != "" && errors.As(err, &se) && se.Run == p.Run:
		// The parked run no longer waits (its lease ran out, or it was
		// ended): its story says how.
		return p.Run, "", nil
	case errors.As(err, &se) && se.By != "" && r.ApplyRun == "":
		// The plan was claimed by an apply run of an earlier attempt of
		// this job (a crash or a shutdown): report that run.
		return se.By, "", nil
	case errors.As(err, &se) && se.By != "" && se.By == r.ApplyRun:
		return se.By, "", nil
	case errors.As(err, &se):
		no := x.refusal(r)
		no.Rule, no.Problem, no.PlanClosed = report.BotRuleOpenPlan, se.Error(), true
		res, err := b.refuse(ctx, x, r, no)
		return "", res, err
	case err != nil && ctx.Err() != nil:
		return "", "", err
	case errors.Is(err, engine.ErrNotFound) || errors.Is(err, engine.ErrInvalid):
		no := x.refusal(r)
		no.Rule, no.Problem = report.BotRuleOpenPlan, err.Error()
		res, err := b.refuse(ctx, x, r, no)
		return "", res, err
	}
	return "", "", err
}

// reportApply reports apply run runID's story in "kl apply · PROJECT"
// (completing its in-progress check run), retires the plan's Apply
// button, records the run on the project and refreshes the other pull
// requests on the state after a commit. applyErr is engine.Apply's error.
func (b *Bot) reportApply(ctx context.Context, x *applyCtx, r projectRow, runID string, applyErr error) (JobResult, error) {
	a, pr := x.a, x.pr
	story, serr := b.eng.RunStory(context.WithoutCancel(ctx), runID)
	if serr != nil {
		return "", serr
	}
	outcome, _ := applyOutcome(story.Run.Status)
	b.metrics.run("apply", outcome)
	check, err := applyCheck(story, a.Repo, a.PR, r.Project, pr.HeadSHA)
	if err != nil {
		return "", err
	}
	check.DetailsURL = b.runLink(story.Run.ID)
	if _, err := b.putCheckRun(context.WithoutCancel(ctx), x.c, x.repo, check); err != nil {
		return "", err
	}
	planRun := story.Run.PlanRun
	if planRun == "" {
		planRun = r.PlanRun
	}
	plan, perr := b.eng.Run(context.WithoutCancel(ctx), planRun)
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
	if applyErr != nil && ctx.Err() != nil && (perr != nil || plan.Status == engine.StatusPlanned) {
		// Interrupted (shutdown) before Terraform ran: the plan is open
		// again and River hands the job back. Once Terraform ran, the
		// job is done: its partial version (or fence) is reported, and
		// what comes next is a person's call (ADR 0043).
		return "", applyErr
	}
	if outcome == outcomeRefused {
		return ResultRefused, nil
	}
	return ResultOK, nil
}

// applyCheck is the completed "kl apply · PROJECT" check run of an apply
// run's story, on commit sha of pull request repo#pr: its conclusion the
// run's verdict (applyOutcome), its title report.ApplyTitle, its summary
// report.Apply with klbot's comment commands, cut to GitHub's 65,535.
func applyCheck(story *engine.RunStory, repo string, pr int, project, sha string) (github.CheckRun, error) {
	_, conclusion := applyOutcome(story.Run.Status)
	var md bytes.Buffer
	if err := report.Apply(&md, story, report.Options{Format: report.Markdown, Commands: commandsOf(repo, pr, project)}); err != nil {
		return github.CheckRun{}, err
	}
	return github.CheckRun{Name: ApplyCheckName(project), HeadSHA: sha, ExternalID: externalID(pr, project),
		Conclusion: conclusion, Title: report.ApplyTitle(story), Summary: report.Truncate(md.String(), report.CheckRunSummaryLimit)}, nil
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
// marked closed so no refresh touches it again. It holds the PR lock
// exclusive, after the applies of the pull request in progress
// (parkedApplies); a merge-time apply that waits for reservations is
// parked like any other, and the pull request is marked closed once none
// waits.
func (b *Bot) closed(ctx context.Context, jr *jobRun, x *applyCtx, rows []projectRow, first bool) (JobResult, error) {
	defer x.merge.remove()
	var lives []*liveCheck
	for _, r := range rows {
		if x.a.Trigger == TriggerMerge && r.Config.ApplyTrigger == klyaml.TriggerMerge && r.PlanRun != "" && r.ApplyRun == "" {
			lives = append(lives, b.applyLive(jr, x, r, jr.st.Head))
		}
	}
	if err := jr.lock(ctx, lockSet{Exclusive: true}, jr.queuedShow(ctx, x.c, x.repo, lives)); err != nil {
		return "", err
	}
	if err := b.parkedApplies(ctx, jr, x.c, x.repo, lives); err != nil {
		return "", err
	}
	if !first {
		pr, err := x.c.GetPullRequest(ctx, x.repo, x.a.PR)
		if err != nil {
			return "", err
		}
		x.pr = pr
	}
	if x.a.Trigger == TriggerMerge && len(lives) > 0 && len(jr.st.Applied) == 0 {
		if err := b.mergeOrder(ctx, jr, x); err != nil { // the merge queue's order (ADR 0058)
			return "", err
		}
	}
	result, waiting := ResultOK, 0
	for _, r := range rows {
		if r.PlanRun == "" || r.ApplyRun != "" || slices.Contains(jr.st.Applied, r.Project) {
			continue
		}
		if x.a.Trigger == TriggerMerge && r.Config.ApplyTrigger == klyaml.TriggerMerge && !x.noApply {
			res, err := b.applyMerged(ctx, jr, x, r)
			var q *queuedError
			switch {
			case errors.As(err, &q):
				waiting++
				continue
			case err != nil:
				return "", err
			case res != ResultOK:
				result = res
			}
			jr.st.Applied = append(jr.st.Applied, r.Project)
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
	if waiting > 0 {
		if err := b.updateSticky(ctx, x.c, x.repo, x.a.PR); err != nil {
			return "", err
		}
		return "", queued("%d merge-time apply run(s) wait for reservations", waiting)
	}
	if err := b.retireButtons(ctx, x.c, x.repo, rows); err != nil { // the plans closed unapplied
		return "", err
	}
	if err := b.db.closePR(ctx, x.a.Repo, x.a.PR); err != nil {
		return "", err
	}
	return result, b.updateSticky(ctx, x.c, x.repo, x.a.PR)
}

// applyMerged applies project r on a merge (apply_trigger: merge): its
// requirements (mergeable holds by the merge) and its plan's head are
// checked when the apply starts, not when a parked one resumes.
func (b *Bot) applyMerged(ctx context.Context, jr *jobRun, x *applyCtx, r projectRow) (JobResult, error) {
	if p, ok := jr.st.Parked[r.Project]; ok {
		mc, err := b.mergeCommit(ctx, x, r)
		if err != nil {
			return "", err
		}
		return b.runApply(ctx, jr, x, r, p, mc)
	}
	switch held, err := b.requirementsHold(ctx, x, r, true); {
	case err != nil:
		return "", err
	case r.HeadSHA != x.pr.HeadSHA:
		no := x.refusal(r)
		no.Rule, no.Merged = report.BotRuleHead, true
		return b.refuse(ctx, x, r, no)
	case held != nil:
		return b.refuse(ctx, x, r, *held)
	}
	mc, err := b.mergeCommit(ctx, x, r)
	if err != nil {
		return "", err
	}
	return b.runApply(ctx, jr, x, r, parkedApply{}, mc)
}
