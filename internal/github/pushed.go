package github

import (
	"context"
	"fmt"
	"sort"
	"strings"

	gh "github.com/google/go-github/v62/github"
)

// MaxPushCommits is the most commits PushedPullRequests reads from one
// push: GitHub's compare lists at most 250 commits without paging; past
// this many the push is refused rather than half read.
const MaxPushCommits = 1000

// MergedPullRequest is a pull request a push to a branch brought: merged
// into it, its merge commit among the push's commits.
type MergedPullRequest struct {
	Number int
	// HeadSHA is the pull request's last commit (head.sha): the commit
	// its reviewed plan was made at.
	HeadSHA string
	// MergeCommitSHA is the commit its merge put on the branch
	// (merge_commit_sha: a merge, squash or last rebased commit).
	MergeCommitSHA string
	HTMLURL        string
	Title          string
}

// PushedPullRequests returns the pull requests a push to branch of repo
// brought, from before (the branch's old head) to after (its new head),
// in the order they reached the branch (issue 15 §1): for each commit
// GitHub's compare lists from before to after (GET
// /repos/{o}/{r}/compare/{before}...{after}, oldest first, paged), the
// pull requests associated with it (GET
// /repos/{o}/{r}/commits/{sha}/pulls), kept when merged into branch of
// repo; a merge queue, or a rebase merge, brings several. A pull request
// is placed at its merge commit (merge_commit_sha) when the push holds
// it, else at its first commit found. None: an empty list.
//
// Errors: ErrValidation for a before or after that is not a 40-character
// commit SHA (a push that created or deleted the branch has an all-zero
// one: there is no old head to compare with, or nothing was brought);
// ErrNotFound when GitHub cannot compare them (a force-push that dropped
// before); more than MaxPushCommits commits; a 5xx after the transport's
// retries as an *APIError.
func (c *Client) PushedPullRequests(ctx context.Context, repo Repo, branch, before, after string) ([]MergedPullRequest, error) {
	what := fmt.Sprintf("finding the pull requests the push %s...%s to %s of %s brought", shortSHA(before), shortSHA(after), branch, repo)
	for _, s := range [][2]string{{"before", before}, {"after", after}} {
		if !fullSHA(s[1]) || strings.Trim(s[1], "0") == "" {
			return nil, fmt.Errorf("%s: %w", what, &ValidationError{Field: s[0],
				Message: fmt.Sprintf("%q is not a commit SHA of the branch (a push that created or deleted the branch has none)", s[1])})
		}
	}
	commits, err := c.pushCommits(ctx, repo, before, after)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	pos := map[string]int{}
	for i, sha := range commits {
		pos[strings.ToLower(sha)] = i
	}
	at := map[int]int{} // number → position
	var out []MergedPullRequest
	for i, sha := range commits {
		prs, err := c.ListCommitPulls(ctx, repo, sha)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		for _, p := range prs {
			if _, seen := at[p.Number]; seen || !p.Merged || p.BaseRef != branch || !strings.EqualFold(p.BaseRepo, repo.String()) {
				continue
			}
			at[p.Number] = i
			if j, ok := pos[strings.ToLower(p.MergeCommitSHA)]; ok {
				at[p.Number] = j
			}
			out = append(out, MergedPullRequest{Number: p.Number, HeadSHA: p.HeadSHA,
				MergeCommitSHA: p.MergeCommitSHA, HTMLURL: p.HTMLURL, Title: p.Title})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return at[out[i].Number] < at[out[j].Number] })
	return out, nil
}

// pushCommits lists the commits of after that before lacks, oldest first.
func (c *Client) pushCommits(ctx context.Context, repo Repo, before, after string) ([]string, error) {
	var out []string
	opts := &gh.ListOptions{PerPage: 100}
	for {
		cmp, resp, err := c.gh.Repositories.CompareCommits(ctx, repo.Owner, repo.Name, before, after, opts)
		if err != nil {
			return nil, mapErr(err)
		}
		for _, rc := range cmp.Commits {
			out = append(out, rc.GetSHA())
		}
		if len(out) > MaxPushCommits {
			return nil, fmt.Errorf("the push holds more than %d commits: too many to look up one by one", MaxPushCommits)
		}
		if resp.NextPage == 0 || len(cmp.Commits) == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// fullSHA reports whether s is a 40-character hexadecimal commit SHA.
func fullSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}
