package queue

import (
	"context"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/github"
)

// commits is a Client over a map of commits (first parent only) and the
// pull requests of each.
type commits struct {
	tip     string
	parents map[string]string
	pulls   map[string][]github.CommitPull
}

func (c commits) GetCommit(_ context.Context, _ github.Repo, ref string) (github.Commit, error) {
	if ref == "heads/main" {
		return github.Commit{SHA: c.tip}, nil
	}
	p, ok := c.parents[ref]
	if !ok {
		return github.Commit{}, github.ErrNotFound
	}
	cm := github.Commit{SHA: ref}
	if p != "" {
		cm.Parents = []string{p}
	}
	return cm, nil
}

func (c commits) ListCommitPulls(_ context.Context, _ github.Repo, sha string) ([]github.CommitPull, error) {
	return c.pulls[sha], nil
}

func sha(c byte) string { return strings.Repeat(string(c), 40) }

// TestWalk: the pull requests of a group in queue order (the first
// merges first) from the first-parent walk, open ones into the base only;
// the problems that keep a group from being judged.
func TestWalk(t *testing.T) {
	t.Parallel()
	open := func(n int) github.CommitPull { return github.CommitPull{Number: n, State: "open", BaseRef: "main"} }
	c := commits{tip: sha('0'), parents: map[string]string{sha('3'): sha('2'), sha('2'): sha('1'), sha('1'): sha('0'), sha('9'): ""},
		pulls: map[string][]github.CommitPull{
			sha('1'): {open(11)},
			sha('2'): {open(12), {Number: 99, State: "closed", BaseRef: "main"}, {Number: 98, State: "open", BaseRef: "dev"}},
			sha('3'): {open(13)},
		}}
	repo := github.Repo{Owner: "acme", Name: "infra"}
	ctx := context.Background()
	prs, problem, err := Walk(ctx, c, repo, Group{HeadSHA: sha('3'), HeadRef: "refs/heads/gh-readonly-queue/main/pr-13-" + sha('c'), BaseRef: "refs/heads/main"})
	if err != nil || problem != "" || len(prs) != 3 || prs[0] != 11 || prs[1] != 12 || prs[2] != 13 {
		t.Fatalf("Walk = %v, %q, %v; want [11 12 13]", prs, problem, err)
	}
	// The base commit the group was made on ends the walk too.
	prs, _, _ = Walk(ctx, c, repo, Group{HeadSHA: sha('3'), BaseSHA: sha('1'), BaseRef: "main"})
	if len(prs) != 2 || prs[0] != 12 {
		t.Fatalf("Walk to base sha 1 = %v, want [12 13]", prs)
	}
	for name, tc := range map[string]struct {
		g    Group
		want string
	}{
		"unknown commit": {Group{HeadSHA: sha('7'), BaseRef: "main"}, "GitHub has no commit `7777777`"},
		"root commit":    {Group{HeadSHA: sha('9'), BaseRef: "main"}, "reach a root commit, not the head of `main`"},
		"ref names a PR no commit is of": {Group{HeadSHA: sha('3'), HeadRef: "refs/heads/gh-readonly-queue/main/pr-14-" + sha('c'), BaseRef: "main"},
			"the group's ref names #14"},
	} {
		_, problem, err := Walk(ctx, c, repo, tc.g)
		if err != nil || !strings.Contains(problem, tc.want) {
			t.Errorf("%s: problem %q, err %v; want %q", name, problem, err, tc.want)
		}
	}
}

// pulls is a PRGetter over a map of pull requests.
type pulls map[int]github.PullRequest

func (p pulls) GetPullRequest(_ context.Context, _ github.Repo, n int) (github.PullRequest, error) {
	pr, ok := p[n]
	if !ok {
		return github.PullRequest{}, github.ErrNotFound
	}
	return pr, nil
}

// TestReadPR: an open pull request into the group's branch is judged at
// its head; a closed one or one into another branch fails with the
// reason, unjudged; GitHub's error is returned as it is.
func TestReadPR(t *testing.T) {
	t.Parallel()
	c := pulls{
		1: {HeadSHA: sha('a'), State: "open", BaseRef: "main"},
		2: {HeadSHA: sha('b'), State: "closed", BaseRef: "main"},
		3: {HeadSHA: sha('c'), State: "open", BaseRef: "dev"},
	}
	repo := github.Repo{Owner: "acme", Name: "infra"}
	ctx := context.Background()
	for _, tc := range []struct {
		n       int
		judge   bool
		problem string
	}{
		{1, true, ""},
		{2, false, "the pull request is closed"},
		{3, false, "the pull request is into `dev`, not `main`"},
	} {
		q, judge, err := ReadPR(ctx, c, repo, tc.n, "main")
		if err != nil || judge != tc.judge || q.Problem != tc.problem || q.Number != tc.n || q.Head != c[tc.n].HeadSHA {
			t.Errorf("ReadPR(%d) = %+v, %v, %v; want judge %v, problem %q", tc.n, q, judge, err, tc.judge, tc.problem)
		}
	}
	if _, _, err := ReadPR(ctx, c, repo, 4, "main"); err != github.ErrNotFound {
		t.Errorf("ReadPR(4) err = %v, want ErrNotFound", err)
	}
}
