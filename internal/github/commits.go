package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v62/github"
)

// Commit is a commit as GitHub's get-commit answers it (GET
// /repos/{o}/{r}/commits/{ref}): its SHA and its parents' SHAs, the first
// parent first (git's order: a merge's first parent is the branch merged
// into).
type Commit struct {
	SHA     string
	Parents []string
	Message string
}

// noCommit is the start of GitHub's 422 message for a ref it has no commit
// for ("No commit found for SHA: REF").
const noCommit = "No commit found"

// GetCommit reads commit ref (a SHA, a branch name or heads/BRANCH) of
// repo. Errors: ErrNotFound when GitHub has no such commit (a 404, or its
// 422 "No commit found for SHA"); ErrValidation for an empty ref, refused
// before sending; other answers as *APIError.
func (c *Client) GetCommit(ctx context.Context, repo Repo, ref string) (Commit, error) {
	what := fmt.Sprintf("getting commit %s of %s", shortSHA(ref), repo)
	if ref == "" || strings.ContainsAny(ref, "?# \t\n") {
		return Commit{}, fmt.Errorf("%s: %w", what, &ValidationError{Field: "ref", Message: fmt.Sprintf("%q is not a usable ref", ref)})
	}
	rc, _, err := c.gh.Repositories.GetCommit(ctx, repo.Owner, repo.Name, ref, &gh.ListOptions{PerPage: 1})
	if err != nil {
		return Commit{}, fmt.Errorf("%s: %w", what, commitErr(err))
	}
	out := Commit{SHA: rc.GetSHA(), Message: rc.GetCommit().GetMessage()}
	for _, p := range rc.Parents {
		out.Parents = append(out.Parents, p.GetSHA())
	}
	if out.SHA == "" {
		return Commit{}, fmt.Errorf("%s: GitHub's answer has no sha", what)
	}
	return out, nil
}

// CommitPull is a pull request GitHub associates with a commit, from the
// "pull-request-simple" shape GitHub lists (it has merged_at, not merged).
type CommitPull struct {
	Number int
	State  string // open or closed
	// Merged: merged_at is set.
	Merged  bool
	HeadSHA string
	BaseRef string
	// BaseRepo is the base repository's full name (owner/name).
	BaseRepo string
	// MergeCommitSHA is the commit its merge put on the base branch (a
	// merge, squash or last rebased commit); GitHub sets a test merge
	// commit on open ones too.
	MergeCommitSHA string
	HTMLURL        string
	Title          string
}

// ListCommitPulls lists the pull requests GitHub associates with commit
// sha (GET /repos/{o}/{r}/commits/{commit_sha}/pulls, every page): the one
// a merge or a merge queue made the commit for, and those whose branch
// holds it, open or closed. Errors as GetCommit's.
func (c *Client) ListCommitPulls(ctx context.Context, repo Repo, sha string) ([]CommitPull, error) {
	what := fmt.Sprintf("listing the pull requests of commit %s of %s", shortSHA(sha), repo)
	if sha == "" || strings.ContainsAny(sha, "/?# \t\n") {
		return nil, fmt.Errorf("%s: %w", what, &ValidationError{Field: "commit_sha", Message: fmt.Sprintf("%q is not a usable commit", sha)})
	}
	opts := &gh.ListOptions{PerPage: 100}
	var out []CommitPull
	for {
		prs, resp, err := c.gh.PullRequests.ListPullRequestsWithCommit(ctx, repo.Owner, repo.Name, sha, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, commitErr(err))
		}
		for _, p := range prs {
			out = append(out, CommitPull{Number: p.GetNumber(), State: p.GetState(), Merged: p.MergedAt != nil,
				HeadSHA: p.GetHead().GetSHA(), BaseRef: p.GetBase().GetRef(), BaseRepo: p.GetBase().GetRepo().GetFullName(),
				MergeCommitSHA: p.GetMergeCommitSHA(), HTMLURL: p.GetHTMLURL(), Title: p.GetTitle()})
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// commitErr maps err, and GitHub's 422 "No commit found for SHA" to
// ErrNotFound as well.
func commitErr(err error) error {
	err = mapErr(err)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusUnprocessableEntity && strings.HasPrefix(ae.Message, noCommit) {
		return fmt.Errorf("%w: %s", ErrNotFound, ae.Message)
	}
	return err
}
