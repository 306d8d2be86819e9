package bot

import (
	"context"
	"errors"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/klyaml"
	"github.com/kilolock/kilolock/internal/report"
)

// onRevert sets the conclusion of check, the "kl plan · PROJECT" check
// run of plan out, by project p's on_revert (kl.yaml, a safety key read
// from the base: ADR 0040, ADR 0046) when the plan would undo an earlier
// version's change not shown to be deliberate
// (engine.Envelope.RevertsInDoubt): warn makes a success neutral; fail
// makes it a failure without the Apply button (its summary already says
// why: report.Applying.RevertFail). A plan that undoes nothing, or only
// what its up-to-date branch changed back on purpose, is left as it is.
func onRevert(check *github.CheckRun, out *engine.PlanOutcome, p klyaml.Project) {
	if out == nil || len(out.Run.Envelope.RevertsInDoubt()) == 0 {
		return
	}
	if p.OnRevert != klyaml.RevertFail {
		if check.Conclusion == "success" {
			check.Conclusion = "neutral"
		}
		return
	}
	check.Conclusion, check.Actions = "failure", nil
}

// revertHolds checks project r's on_revert at apply (ADR 0046): nil when
// it is warn or the plan undoes nothing in doubt (what it undoes was shown
// deliberate when it was made: engine.Envelope.Deliberate), else the
// refusal naming what the plan would undo. r.Config is the project's rules
// as the apply read them again from the base (Bot.applyRules, ADR 0040
// decision 5).
func (b *Bot) revertHolds(ctx context.Context, x *applyCtx, r projectRow) (*report.BotRefusal, error) {
	if r.Config.OnRevert != klyaml.RevertFail || r.PlanRun == "" {
		return nil, nil
	}
	run, err := b.eng.Run(ctx, r.PlanRun)
	if err != nil {
		return nil, err
	}
	doubt := run.Envelope.RevertsInDoubt()
	if len(doubt) == 0 {
		return nil, nil
	}
	no := x.refusal(r)
	no.Rule, no.Problem = report.BotRuleRevert, report.RevertRefusedWhy(r.Project, r.PlanRun, doubt)
	return &no, nil
}

// recordBranch answers, for plan run of pull request pr, the question a
// plan that would undo earlier changes asks (ADR 0046 decision 7): is the
// branch behind its base? It asks GitHub's compare API for the base
// branch against the head, and, for each version the plan would undo,
// whether the base holds that version's change (versionInBase), and
// records the answers with the plan (engine.Engine.RecordBranch). A plan
// that undoes nothing asks nothing. Whatever fails — the compare (a 404
// after a force-push, a 5xx after the transport's retries), a lookup, the
// record — is logged and leaves the question open (the run returned as
// it was): it is never fatal to the plan.
func (b *Bot) recordBranch(ctx context.Context, c Client, repo github.Repo, pr github.PullRequest, run engine.Run) engine.Run {
	if run.Envelope == nil || len(run.Envelope.Reverts) == 0 {
		return run
	}
	log := logOf(ctx).With("base", pr.BaseRef, "head_sha", pr.HeadSHA)
	if pr.BaseRef == "" {
		log.Warn("the pull request names no base branch: what the plan would undo stays a question")
		return run
	}
	cmp, err := c.Compare(ctx, repo, pr.BaseRef, pr.HeadSHA)
	if err != nil {
		log.Warn("could not compare the branch with its base: what the plan would undo stays a question", "err", err)
		return run
	}
	st := engine.BranchStatus{Base: pr.BaseRef, BaseSHA: cmp.BaseSHA, HeadSHA: pr.HeadSHA, AheadBy: cmp.AheadBy, BehindBy: cmp.BehindBy}
	seen := map[int64]bool{}
	for _, rv := range run.Envelope.Reverts {
		if seen[rv.Serial] {
			continue
		}
		seen[rv.Serial] = true
		if v, ok := b.versionInBase(ctx, c, repo, pr.BaseRef, rv); ok {
			st.Versions = append(st.Versions, v)
		}
	}
	got, err := b.eng.RecordBranch(ctx, run.ID, st)
	if err != nil {
		log.Warn("could not record how the branch stands against its base", "err", err)
		return run
	}
	log.Info("branch compared with its base", "behind_by", cmp.BehindBy, "ahead_by", cmp.AheadBy, "versions_asked", len(seen), "versions_known", len(st.Versions))
	return got
}

// versionInBase says whether base holds the change of rv's version:
// for a version of a pull request of repo, whether that pull request is
// merged into base; for a version made outside a pull request, whether
// its plan's recorded commit is on base (the compare of base with it is
// ahead by 0). false (not known) for a pull request of another
// repository, a version whose plan recorded no commit, and a lookup that
// failed (logged; a 404 too: GitHub may not have the commit).
func (b *Bot) versionInBase(ctx context.Context, c Client, repo github.Repo, base string, rv engine.Revert) (engine.VersionInBase, bool) {
	log := logOf(ctx).With("serial", rv.Serial)
	if rv.PR != nil {
		if !strings.EqualFold(rv.PR.Repo, repo.String()) {
			return engine.VersionInBase{}, false
		}
		p, err := c.GetPullRequest(ctx, repo, rv.PR.Number)
		if err != nil {
			log.Warn("could not read the pull request of a version the plan would undo", "pr", rv.PR.Number, "err", err)
			return engine.VersionInBase{}, false
		}
		return engine.VersionInBase{Serial: rv.Serial, Holds: p.Merged && p.BaseRef == base}, true
	}
	if rv.PlanRun == "" {
		return engine.VersionInBase{}, false
	}
	plan, err := b.eng.Run(ctx, rv.PlanRun)
	if err != nil || plan.Envelope == nil || plan.Envelope.CommitSHA == "" {
		if err != nil {
			log.Warn("could not read the plan of a version the plan would undo", "plan_run", rv.PlanRun, "err", err)
		}
		return engine.VersionInBase{}, false
	}
	sha := plan.Envelope.CommitSHA
	cmp, err := c.Compare(ctx, repo, base, sha)
	if err != nil {
		if !errors.Is(err, github.ErrNotFound) {
			log.Warn("could not compare the commit of a version the plan would undo with the base", "commit", sha, "err", err)
		}
		return engine.VersionInBase{}, false
	}
	return engine.VersionInBase{Serial: rv.Serial, Holds: cmp.AheadBy == 0, Commit: sha}, true
}
