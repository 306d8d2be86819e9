package github_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/github/githubfake"
)

// sha40 is a made-up 40-character commit SHA from a two-digit seed.
func sha40(seed int) string { return strings.Repeat(fmt.Sprintf("%02x", seed), 20) }

// TestPushedPullRequests asks the fake (enforcing GitHub's description of
// compare and of "list pull requests associated with a commit") which
// pull requests a push to main brought: a merge commit brings its pull
// request, found through the merge commit and its branch's commits alike
// (once); a merge queue's two merge commits bring two, in the order they
// merged (not by number); an open pull request holding one of the
// commits, or one merged into another branch, is left out; paging over
// more than one page of commits; an all-zero before is refused unsent.
func TestPushedPullRequests(t *testing.T) {
	t.Parallel()
	e := setup(t)
	before, m12, m9, after := sha40(1), sha40(2), sha40(3), sha40(4)
	branch12 := []string{sha40(10), sha40(11)}
	e.f.AddPR(repoStr, githubfake.PR{Number: 12, State: "closed", Merged: true, HeadSHA: branch12[1], Commits: branch12[:1], MergeCommitSHA: m12})
	e.f.AddPR(repoStr, githubfake.PR{Number: 9, State: "closed", Merged: true, HeadSHA: sha40(20), MergeCommitSHA: m9})
	e.f.AddPR(repoStr, githubfake.PR{Number: 14, HeadSHA: sha40(30), Commits: []string{branch12[0]}}) // open, stacked on #12's branch
	e.f.AddPR(repoStr, githubfake.PR{Number: 15, State: "closed", Merged: true, HeadSHA: sha40(40), BaseRef: "release", MergeCommitSHA: sha40(20)})
	// The push: #12's branch commits and merge commit, then #9's
	// (squash-)merge, then one commit pushed to main directly; and enough
	// filler commits (none associated) for a second page.
	commits := append(append([]string(nil), branch12...), m12, sha40(20), m9)
	for i := 0; i < 120; i++ {
		commits = append(commits, strings.Repeat("f", 37)+fmt.Sprintf("%03d", i))
	}
	commits = append(commits, after)
	e.f.SetCompare(repoStr, before, after, githubfake.Comparison{Commits: commits})

	got, err := e.c.PushedPullRequests(ctx(t), repo, "main", before, after)
	if err != nil {
		t.Fatal(err)
	}
	var nums []string
	for _, p := range got {
		nums = append(nums, fmt.Sprintf("#%d@%s", p.Number, p.HeadSHA[:4]))
	}
	if want := []string{"#12@0b0b", "#9@1414"}; strings.Join(nums, " ") != strings.Join(want, " ") {
		t.Errorf("pull requests brought = %v, want %v (in merge order, with their heads)", nums, want)
	}
	if len(got) == 2 && (got[0].MergeCommitSHA != m12 || !strings.HasSuffix(got[0].HTMLURL, "/acme/infra/pull/12")) {
		t.Errorf("#12 = %+v", got[0])
	}
	if n := len(e.f.Requests("GET", "/repos/acme/infra/compare/")); n != 2 {
		t.Errorf("%d compare requests, want 2 (two pages of commits)", n)
	}

	if _, err := e.c.PushedPullRequests(ctx(t), repo, "main", strings.Repeat("0", 40), after); !errors.Is(err, github.ErrValidation) {
		t.Errorf("a push that created the branch: err = %v, want ErrValidation", err)
	}
	if _, err := e.c.PushedPullRequests(ctx(t), repo, "main", sha40(99), after); !errors.Is(err, github.ErrNotFound) {
		t.Errorf("an old head GitHub cannot compare: err = %v, want ErrNotFound", err)
	}
}
