package bot

import (
	"context"
	"errors"
	"fmt"

	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/klyaml"
	"github.com/kilolock/kilolock/internal/report"
)

// Titles of the "kl config" check runs about the safety keys (ADR 0040).
const (
	titleLoosens          = "kl.yaml loosens a safety key"
	titleBaseInvalid      = "the default branch's kl.yaml is invalid"
	titleBaseUnreadable   = "the default branch's kl.yaml cannot be used"
	defaultBranchFileWhat = "the default branch's " + klyaml.File
)

// base is where the safety keys of repo's pull requests come from (ADR
// 0040): its KLBOT_REPO_CONFIG entries when one matches (Options.RepoConfig),
// else the default branch's kl.yaml, read through the contents API (GET
// /repos/{o}/{r}/contents/kl.yaml without a ref is the default branch's);
// none there is klyaml.Default. A default-branch kl.yaml klbot cannot use —
// invalid, not a regular file (a link, a directory), over klyaml.MaxBytes
// — is a problem: the rules cannot be known, so nothing is planned or
// applied until it is fixed (fail closed). Other errors are GitHub's
// (River retries the job).
func (b *Bot) base(ctx context.Context, c Client, repo github.Repo) (*klyaml.Base, *report.ConfigProblem, error) {
	if base, ok := b.opts.RepoConfig.Base(repo.String(), b.opts.DefaultTrigger); ok {
		return base, nil, nil
	}
	f, err := c.GetFile(ctx, repo, klyaml.File, "", klyaml.MaxBytes)
	switch {
	case errors.Is(err, github.ErrNotFound):
		return klyaml.BaseOf(klyaml.Default(repo.String(), b.opts.DefaultTrigger)), nil, nil
	case errors.Is(err, github.ErrTooLarge):
		return nil, &report.ConfigProblem{Title: titleBaseUnreadable, OnDefaultBranch: true,
			Problem: fmt.Sprintf("%s: larger than %d bytes", defaultBranchFileWhat, klyaml.MaxBytes)}, nil
	case err != nil:
		return nil, nil, err
	case f.Type != "file" || f.Path != klyaml.File:
		// GitHub serves a link's target in its place: f.Path is the target's.
		return nil, &report.ConfigProblem{Title: titleBaseUnreadable, OnDefaultBranch: true,
			Problem: defaultBranchFileWhat + ": must be a regular file (not a link or a directory)"}, nil
	}
	cfg, err := klyaml.Parse(f.Content, b.opts.DefaultTrigger)
	var ce *klyaml.Error
	if errors.As(err, &ce) {
		return nil, &report.ConfigProblem{Title: titleBaseInvalid, OnDefaultBranch: true, Problems: ce.Problems}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return klyaml.BaseOf(cfg), nil, nil
}

// withBase is a pull request's kl.yaml cfg as it takes effect (klyaml.Merge
// with repo's base): a safety key it leaves out is the base's, one it
// loosens is a problem for the "kl config" check run, as is a base that
// cannot be used.
func (b *Bot) withBase(ctx context.Context, c Client, repo github.Repo, cfg *klyaml.Config) (*klyaml.Config, *report.ConfigProblem, error) {
	base, problem, err := b.base(ctx, c, repo)
	if err != nil || problem != nil {
		return nil, problem, err
	}
	merged, err := klyaml.Merge(cfg, base)
	var ce *klyaml.Error
	if errors.As(err, &ce) {
		return nil, &report.ConfigProblem{Title: titleLoosens, Problems: ce.Problems}, nil
	}
	return merged, nil, err
}

// applyRules returns rows with the rules of their apply read again from
// repo's base as it is now (klyaml.Tighten; ADR 0040: the default branch
// may have changed since the plan). When the base cannot be used, the
// "kl config" check run of the pull request's head says why, and ok is
// false: nothing may be applied.
func (b *Bot) applyRules(ctx context.Context, x *applyCtx, rows []projectRow) (out []projectRow, ok bool, err error) {
	base, problem, err := b.base(ctx, x.c, x.repo)
	if err != nil {
		return nil, false, err
	}
	if problem != nil {
		problem.HeadSHA = x.pr.HeadSHA
		logOf(ctx).Warn("not applying: "+problem.Title, "problem", problem.Problem, "problems", problem.Problems)
		return rows, false, b.reportConfig(ctx, x.c, x.repo, x.a.PR, *problem)
	}
	out = make([]projectRow, len(rows))
	for i, r := range rows {
		r.Config.State = r.State // the state the plan is of decides the base's rules
		r.Config = klyaml.Tighten(r.Config, base)
		out[i] = r
	}
	return out, true, nil
}
