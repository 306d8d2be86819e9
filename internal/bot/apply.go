package bot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/klyaml"
	"github.com/kilolock/kilolock/internal/report"
)

// Rules an apply is refused by before the engine runs (DESIGN.md apply step
// 1); each refusal names its rule.
const (
	ruleWrite     = "write permission"
	ruleHead      = "plan for the current head"
	ruleOpenPlan  = "an open plan"
	ruleTrigger   = "apply trigger"
	ruleOpenPR    = "open pull request"
	ruleApproved  = "approved"
	ruleMergeable = "mergeable"
)

// applyCtx is one apply job's shared facts.
type applyCtx struct {
	a    ApplyArgs
	c    Client
	repo github.Repo
	pr   github.PullRequest
}

// apply is the apply job (ApplyArgs). For "close" it supersedes the pull
// request's open plans. Otherwise, for each target project (the one asked
// for, or every project of the PR; on merge those with apply_trigger merge)
// it checks the bot's rules — open PR, the project's apply trigger, the
// actor's write permission, a plan for the PR's current head, that plan
// still open, and the project's apply_requirements — and reports a refusal
// naming the rule (check run "kl apply · PROJECT", action_required, and the
// sticky comment); then engine.Apply does reservations, since-plan,
// re-plan, apply and commit, and its run story is reported. A refusal is
// not an error: the job succeeds after reporting it.
func (b *Bot) apply(ctx context.Context, a ApplyArgs) (string, error) {
	c, repo, pr, err := b.pullRequest(ctx, a.JobBase)
	if err != nil {
		return "", err
	}
	rows, err := b.db.projects(ctx, a.Repo, a.PR)
	if err != nil {
		return "", err
	}
	x := &applyCtx{a: a, c: c, repo: repo, pr: pr}
	if a.Trigger == "close" || a.Trigger == "merge" {
		return b.closed(ctx, x, rows)
	}
	var targets []projectRow
	for _, r := range rows {
		if r.PlanRun == "" || (a.Project != "" && r.Project != a.Project) {
			continue
		}
		if a.Project == "" && r.ApplyRun == "" {
			// Without -p, a plan superseded by a push that no longer
			// touches its project is not a target.
			if run, err := b.eng.Store.GetRun(ctx, r.PlanRun); err == nil && run.Status == engine.StatusSuperseded {
				continue
			}
		}
		targets = append(targets, r)
	}
	if len(targets) == 0 {
		what := "any project"
		if a.Project != "" {
			what = "project `" + a.Project + "`"
		}
		return "refused", b.reply(ctx, c, repo, a.JobBase, fmt.Sprintf("### ⛔ `/kl apply`: nothing to apply\n\nThis pull request has no plan of %s (projects with a plan: %s). Push a change to the project or comment `/kl plan -p PROJECT` first.\n",
			what, codeListOr(planned(rows), "none")))
	}
	perm, err := c.GetPermission(ctx, repo, a.Actor)
	if err != nil {
		return "", err
	}
	result := "ok"
	for _, r := range targets {
		res, err := b.applyProject(ctx, x, r, perm)
		if err != nil {
			return "", err
		}
		if res != "ok" {
			result = res
		}
	}
	return result, b.updateSticky(ctx, c, repo, a.PR)
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

// applyProject applies one project after the bot's checks.
func (b *Bot) applyProject(ctx context.Context, x *applyCtx, r projectRow, perm github.Permission) (string, error) {
	a, pr := x.a, x.pr
	verb := "/kl apply"
	if a.Trigger == "button" {
		verb = "the Apply button"
	}
	switch {
	case pr.State != "open":
		return b.refuse(ctx, x, r, ruleOpenPR, fmt.Sprintf("%s#%d is %s: only an open pull request is applied by %s (on merge, projects with `apply_trigger: merge` apply by themselves)", a.Repo, a.PR, pr.State, verb))
	case r.Config.ApplyTrigger == klyaml.TriggerMerge:
		return b.refuse(ctx, x, r, ruleTrigger, fmt.Sprintf("project `%s` applies when the pull request is merged (`apply_trigger: merge` in %s), not by %s", r.Project, klyaml.File, verb))
	case !perm.AtLeast(github.PermissionWrite):
		return b.refuse(ctx, x, r, ruleWrite, permissionWhy(a.Actor, a.Repo, perm, verb))
	}
	if sha := a.HeadSHA; sha != "" && sha != pr.HeadSHA {
		return b.refuse(ctx, x, r, ruleHead, fmt.Sprintf("the Apply button is on the check run of commit `%s`, but the pull request's head is now `%s`: apply the plan of the current head", short(sha), short(pr.HeadSHA)))
	}
	if r.HeadSHA != pr.HeadSHA {
		return b.refuse(ctx, x, r, ruleHead, fmt.Sprintf("the plan `%s` is for commit `%s`, but the pull request's head is now `%s`: wait for the plan of the new head (or comment `/kl plan -p %s`) and apply that", r.PlanRun, short(r.HeadSHA), short(pr.HeadSHA), r.Project))
	}
	if why, ok, err := b.requirementsHold(ctx, x, r, false); err != nil || !ok {
		if err != nil {
			return "", err
		}
		return b.refuse(ctx, x, r, why[0], why[1])
	}
	return b.runApply(ctx, x, r)
}

// requirementsHold checks the project's apply_requirements; on a refusal it
// returns [rule, why].
func (b *Bot) requirementsHold(ctx context.Context, x *applyCtx, r projectRow, merged bool) ([2]string, bool, error) {
	for _, req := range r.Config.ApplyRequirements {
		switch req {
		case klyaml.RequireApproved:
			rv, err := x.c.ListReviews(ctx, x.repo, x.a.PR)
			if err != nil {
				return [2]string{}, false, err
			}
			if !rv.Approved() {
				return [2]string{ruleApproved, fmt.Sprintf("project `%s` requires an approving review and none requesting changes (approved by: %s; changes requested by: %s)",
					r.Project, loginsOrNone(rv.ApprovedBy), loginsOrNone(rv.ChangesRequestedBy))}, false, nil
			}
		case klyaml.RequireMergeable:
			if merged {
				continue // it was merged
			}
			switch m := x.pr.Mergeable; {
			case m == nil:
				return [2]string{ruleMergeable, fmt.Sprintf("project `%s` requires a mergeable pull request and GitHub has not computed mergeability yet: try again in a minute", r.Project)}, false, nil
			case !*m:
				return [2]string{ruleMergeable, fmt.Sprintf("project `%s` requires a mergeable pull request; GitHub says %s#%d is not mergeable (conflicts)", r.Project, x.a.Repo, x.a.PR)}, false, nil
			}
		}
	}
	return [2]string{}, true, nil
}

func loginsOrNone(ls []string) string {
	if len(ls) == 0 {
		return "none"
	}
	return "@" + strings.Join(ls, ", @")
}

// runApply calls engine.Apply and reports the apply run's story.
func (b *Bot) runApply(ctx context.Context, x *applyCtx, r projectRow) (string, error) {
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
		return b.refuse(ctx, x, r, ruleOpenPlan, fmt.Sprintf("plan `%s` cannot be applied: %v", r.PlanRun, se))
	case err != nil && ctx.Err() != nil:
		return "", err
	case errors.Is(err, engine.ErrNotFound) || errors.Is(err, engine.ErrInvalid):
		return b.refuse(ctx, x, r, ruleOpenPlan, err.Error())
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
	if err := report.Apply(&md, story, report.Options{Format: report.Markdown, RunURL: b.runURL}); err != nil {
		return "", err
	}
	check := github.CheckRun{Name: ApplyCheckName(r.Project), HeadSHA: pr.HeadSHA, ExternalID: externalID(a.PR, r.Project),
		Conclusion: conclusion, Title: applyTitle(story), Summary: report.Truncate(md.String(), report.CheckRunSummaryLimit),
		DetailsURL: b.runURL(runID)}
	if _, err := b.putCheckRun(context.WithoutCancel(ctx), x.c, x.repo, check); err != nil {
		return "", err
	}
	r.ApplyRun, r.Note = runID, ""
	if err := b.db.saveProject(context.WithoutCancel(ctx), r); err != nil {
		return "", err
	}
	if story.Version != nil {
		if err := b.refreshOthers(ctx, r, story.Version.Serial); err != nil {
			logOf(ctx).Warn("enqueuing refreshes of other pull requests", "err", err)
		}
	}
	if err != nil && ctx.Err() != nil {
		return "", err // interrupted (shutdown): reported; River hands the job back
	}
	if outcome == "refused" {
		return "refused", nil
	}
	return "ok", nil
}

// applyOutcome maps an apply run's status to the metrics outcome and the
// check run conclusion.
func applyOutcome(s engine.RunStatus) (outcome, conclusion string) {
	switch s {
	case engine.StatusApplied:
		return "applied", "success"
	case engine.StatusRefused:
		return "refused", "action_required"
	case engine.StatusInterrupted:
		return "interrupted", "cancelled"
	}
	return "failed", "failure"
}

func applyTitle(s *engine.RunStory) string {
	switch {
	case s.Run.Status == engine.StatusApplied && s.Version != nil:
		p := s.Version.Provenance
		match := "exact"
		if !p.Exact {
			match = "drift"
		}
		return fmt.Sprintf("Applied: version %d (serial %d → %d, %s, %s)", s.Version.Serial, p.SourceSerial, p.CommittedSerial, p.Mode, match)
	case s.Run.Status == engine.StatusRefused:
		return "Refused: " + clipWords(s.Run.Reason, 120)
	}
	return strings.ToUpper(string(s.Run.Status[:1])) + string(s.Run.Status[1:]) + ": " + clipWords(s.Run.Reason, 120)
}

func clipWords(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// refuse reports a refusal by a bot rule: the "kl apply · PROJECT" check
// run on the PR's head (conclusion action_required) and the project's note
// in the sticky comment, both naming the rule and why.
func (b *Bot) refuse(ctx context.Context, x *applyCtx, r projectRow, rule, why string) (string, error) {
	a := x.a
	verb := map[string]string{"button": "Apply button", "merge": "merge-time apply"}[a.Trigger]
	if verb == "" {
		verb = "`/kl apply`"
	}
	summary := fmt.Sprintf("### ⛔ %s of `%s` refused: %s\n\n%s.\n\n- **rule:** %s\n- **asked by:** @%s\n- **plan:** `%s` at `%s`\n",
		verb, r.Project, rule, upperFirst(why), rule, a.Actor, r.PlanRun, short(r.HeadSHA))
	check := github.CheckRun{Name: ApplyCheckName(r.Project), HeadSHA: x.pr.HeadSHA, ExternalID: externalID(a.PR, r.Project),
		Conclusion: "action_required", Title: "Refused: " + rule, Summary: report.Truncate(summary, report.CheckRunSummaryLimit)}
	if _, err := b.putCheckRun(ctx, x.c, x.repo, check); err != nil {
		return "", err
	}
	r.Note = fmt.Sprintf("⛔ %s by @%s refused: **%s** — %s.", verb, a.Actor, rule, why)
	logOf(ctx).Info("apply refused", "project", r.Project, "rule", rule, "why", why)
	return "refused", b.db.saveProject(ctx, r)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// closed handles a pull request that was closed: on a merge, the projects
// with apply_trigger merge and an open plan for the merged head are applied
// (requirements checked; mergeable holds by the merge); every other open
// plan is superseded ("closed without apply"), and the PR's rows are
// marked closed so no refresh touches it again.
func (b *Bot) closed(ctx context.Context, x *applyCtx, rows []projectRow) (string, error) {
	result := "ok"
	for _, r := range rows {
		if r.PlanRun == "" || r.ApplyRun != "" {
			continue
		}
		if x.a.Trigger == "merge" && r.Config.ApplyTrigger == klyaml.TriggerMerge {
			var res string
			var err error
			switch why, ok, rerr := b.requirementsHold(ctx, x, r, true); {
			case rerr != nil:
				return "", rerr
			case r.HeadSHA != x.pr.HeadSHA:
				res, err = b.refuse(ctx, x, r, ruleHead, fmt.Sprintf("the plan `%s` is for commit `%s`, but the pull request was merged at `%s`", r.PlanRun, short(r.HeadSHA), short(x.pr.HeadSHA)))
			case !ok:
				res, err = b.refuse(ctx, x, r, why[0], why[1])
			default:
				res, err = b.runApply(ctx, x, r)
			}
			if err != nil {
				return "", err
			}
			if res != "ok" {
				result = res
			}
			continue
		}
		reason := fmt.Sprintf("%s#%d was closed without applying it", x.a.Repo, x.a.PR)
		if err := b.eng.Supersede(ctx, r.PlanRun, reason); err != nil && !isStatusErr(err) {
			return "", err
		}
		how := "closed without merging"
		if x.pr.Merged {
			how = "merged"
		}
		r.Note = fmt.Sprintf("The pull request was %s without applying plan `%s`: it was superseded.", how, r.PlanRun)
		if err := b.db.saveProject(ctx, r); err != nil {
			return "", err
		}
	}
	if err := b.db.closePR(ctx, x.a.Repo, x.a.PR); err != nil {
		return "", err
	}
	return result, b.updateSticky(ctx, x.c, x.repo, x.a.PR)
}
