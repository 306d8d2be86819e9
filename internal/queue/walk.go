package queue

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kilolock/kilolock/internal/github"
)

// Client is what Walk asks GitHub: get-commit (a SHA, or heads/BRANCH for
// a branch's head; ErrNotFound for a commit GitHub does not have) and the
// pull requests GitHub associates with a commit. *github.Client and
// klbot's installation clients are Clients.
type Client interface {
	GetCommit(ctx context.Context, repo github.Repo, ref string) (github.Commit, error)
	ListCommitPulls(ctx context.Context, repo github.Repo, sha string) ([]github.CommitPull, error)
}

// MaxWalk bounds the first-parent walk from a group's head to its base:
// GitHub's merge queue builds at most 100 pull requests into a group, one
// commit each.
const MaxWalk = 100

// Group names a merge group as GitHub's merge_group event does: HeadSHA
// its head commit; HeadRef (refs/heads/gh-readonly-queue/BASE/pr-N-SHA)
// names its last pull request, "" when unknown (a Re-run); BaseSHA the
// base commit it was made on ("" when unknown); BaseRef the branch it
// merges into (refs/heads/BASE or BASE).
type Group struct {
	HeadSHA, HeadRef, BaseSHA, BaseRef string
}

// Base is the branch the group merges into, without refs/heads/.
func (g Group) Base() string { return strings.TrimPrefix(g.BaseRef, "refs/heads/") }

// refRE reads the last pull request of a group from its head ref.
var refRE = regexp.MustCompile(`^refs/heads/gh-readonly-queue/.+/pr-([0-9]+)-[0-9a-f]{40}$`)

// Walk finds group g's pull requests, in queue order (the first merges
// first): from the group's head commit along first parents to the base
// branch's current head (or g.BaseSHA), the open pull requests into that
// branch GitHub associates with each commit (get-commit and the pull
// requests of a commit). A walk that does not reach the base within
// MaxWalk commits, a commit GitHub does not have, a root commit, or a
// group whose head ref names a pull request the walk did not find is a
// problem (a sentence, lower case, no final stop): the group is not
// judged, and fails. err is GitHub failing otherwise.
func Walk(ctx context.Context, c Client, repo github.Repo, g Group) (prs []int, problem string, err error) {
	base := g.Base()
	tip, err := c.GetCommit(ctx, repo, "heads/"+base)
	if errors.Is(err, github.ErrNotFound) {
		return nil, fmt.Sprintf("the base branch `%s` has no head commit on GitHub", base), nil
	}
	if err != nil {
		return nil, "", err
	}
	var nums []int
	sha := g.HeadSHA
	for i := 0; sha != tip.SHA && sha != g.BaseSHA; i++ {
		if i == MaxWalk {
			return nil, fmt.Sprintf("the first parents of `%s` do not reach the head of `%s` within %d commits", ShortSHA(g.HeadSHA), base, MaxWalk), nil
		}
		cm, err := c.GetCommit(ctx, repo, sha)
		if errors.Is(err, github.ErrNotFound) {
			return nil, fmt.Sprintf("GitHub has no commit `%s`", ShortSHA(sha)), nil
		}
		if err != nil {
			return nil, "", err
		}
		pulls, err := c.ListCommitPulls(ctx, repo, sha)
		if err != nil && !errors.Is(err, github.ErrNotFound) {
			return nil, "", err
		}
		for _, p := range pulls {
			if p.State == "open" && p.BaseRef == base && !slices.Contains(nums, p.Number) {
				nums = append(nums, p.Number)
			}
		}
		if len(cm.Parents) == 0 {
			return nil, fmt.Sprintf("the first parents of `%s` reach a root commit, not the head of `%s`", ShortSHA(g.HeadSHA), base), nil
		}
		sha = cm.Parents[0]
	}
	slices.Reverse(nums)
	if m := refRE.FindStringSubmatch(g.HeadRef); m != nil {
		if n, _ := strconv.Atoi(m[1]); !slices.Contains(nums, n) {
			return nil, fmt.Sprintf("the group's ref names #%d, which none of its commits is of", n), nil
		}
	}
	return nums, "", nil
}

// ShortSHA abbreviates a commit SHA to 7 characters for messages.
func ShortSHA(s string) string {
	if len(s) > 7 {
		return s[:7]
	}
	return s
}

// PRGetter is what ReadPR asks GitHub: a pull request by number.
// *github.Client and klbot's installation clients are PRGetters.
type PRGetter interface {
	GetPullRequest(ctx context.Context, repo github.Repo, number int) (github.PullRequest, error)
}

// ReadPR reads pull request n of a merge group into branch base: its head,
// and the Problem that fails it unjudged — it is not open, or it is into
// another branch than the group's. judge is false when Problem is set:
// its plans need not be read. Errors are GitHub's.
func ReadPR(ctx context.Context, c PRGetter, repo github.Repo, n int, base string) (q PR, judge bool, err error) {
	pr, err := c.GetPullRequest(ctx, repo, n)
	if err != nil {
		return PR{}, false, err
	}
	q = PR{Number: n, Head: pr.HeadSHA}
	switch {
	case pr.State != "open":
		q.Problem = "the pull request is " + pr.State
		return q, false, nil
	case pr.BaseRef != base:
		q.Problem = fmt.Sprintf("the pull request is into `%s`, not `%s`", pr.BaseRef, base)
		return q, false, nil
	}
	return q, true, nil
}
