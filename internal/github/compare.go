package github

import (
	"context"
	"fmt"
	"strings"

	gh "github.com/google/go-github/v62/github"
)

// Comparison is how a head commit stands against a base, as GitHub's
// compare API answers it (GET /repos/{o}/{r}/compare/{base}...{head}:
// "equivalent to running git log BASE..HEAD").
type Comparison struct {
	// Status is "ahead", "behind", "identical" or "diverged".
	Status string
	// AheadBy counts the head's commits the base lacks; BehindBy the
	// base's commits the head lacks (0: the head holds all of the base).
	AheadBy, BehindBy int
	// BaseSHA is the base commit GitHub compared with (base_commit.sha):
	// the branch's tip at that moment when base is a branch name.
	BaseSHA string
}

// comparisonStatuses are the statuses GitHub's description allows.
var comparisonStatuses = map[string]bool{"ahead": true, "behind": true, "identical": true, "diverged": true}

// Compare compares head with base in repo (branch names or commit SHAs;
// "owner:branch" for a fork's branch). It asks for one commit a page: the
// counts and status are the answer, not the list. Errors: ErrNotFound when
// GitHub knows no such ref or commit (a head force-pushed away) or the two
// share no history; ErrValidation for a ref that cannot be asked for (empty,
// holding "...", a space or a query character) — refused before sending; a
// 5xx after the transport's retries as an *APIError; an answer outside the
// description (an unknown status, counts missing or negative) as an error
// naming it.
func (c *Client) Compare(ctx context.Context, repo Repo, base, head string) (Comparison, error) {
	what := fmt.Sprintf("comparing %s...%s in %s", shortSHA(base), shortSHA(head), repo)
	for _, ref := range [][2]string{{"base", base}, {"head", head}} {
		if ref[1] == "" || strings.Contains(ref[1], "...") || strings.ContainsAny(ref[1], "?# \t\n") {
			return Comparison{}, fmt.Errorf("%s: %w", what, &ValidationError{Field: ref[0], Message: fmt.Sprintf("%q is not a usable ref", ref[1])})
		}
	}
	cmp, _, err := c.gh.Repositories.CompareCommits(ctx, repo.Owner, repo.Name, base, head, &gh.ListOptions{PerPage: 1})
	if err != nil {
		return Comparison{}, fmt.Errorf("%s: %w", what, mapErr(err))
	}
	out := Comparison{Status: cmp.GetStatus(), AheadBy: cmp.GetAheadBy(), BehindBy: cmp.GetBehindBy(), BaseSHA: cmp.GetBaseCommit().GetSHA()}
	switch {
	case !comparisonStatuses[out.Status]:
		return Comparison{}, fmt.Errorf("%s: GitHub answered status %q, not ahead, behind, identical or diverged", what, out.Status)
	case cmp.AheadBy == nil || cmp.BehindBy == nil:
		return Comparison{}, fmt.Errorf("%s: GitHub's answer lacks ahead_by or behind_by", what)
	case out.AheadBy < 0 || out.BehindBy < 0:
		return Comparison{}, fmt.Errorf("%s: GitHub answered ahead_by %d, behind_by %d: counts cannot be negative", what, out.AheadBy, out.BehindBy)
	}
	return out, nil
}
