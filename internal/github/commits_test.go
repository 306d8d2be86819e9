package github_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/github/githubfake"
)

// TestCommitsAndTheirPulls reads commits from the fake (enforcing GitHub's
// description of get-commit and of the pull requests associated with a
// commit): parents in git's order, a branch resolved to its tip, the pull
// request a merge commit was made for, an unknown commit as ErrNotFound
// (GitHub's 422 "No commit found for SHA"), and a ref that cannot be asked
// for refused before sending.
func TestCommitsAndTheirPulls(t *testing.T) {
	t.Parallel()
	e := setup(t)
	base, merge := strings.Repeat("a", 40), strings.Repeat("b", 40)
	e.f.AddPR(repoStr, githubfake.PR{Number: prNum, HeadSHA: headSHA})
	e.f.AddCommit(repoStr, githubfake.Commit{SHA: merge, Parents: []string{base, headSHA}, Message: "Merge pull request #12", PRs: []int{prNum}})
	e.f.SetBranch(repoStr, githubfake.DefaultBranch, base)

	got, err := e.c.GetCommit(ctx(t), repo, merge)
	if err != nil {
		t.Fatal(err)
	}
	if got.SHA != merge || len(got.Parents) != 2 || got.Parents[0] != base || got.Parents[1] != headSHA || got.Message != "Merge pull request #12" {
		t.Errorf("GetCommit = %+v", got)
	}
	if tip, err := e.c.GetCommit(ctx(t), repo, "heads/main"); err != nil || tip.SHA != base {
		t.Errorf("GetCommit(heads/main) = %+v, %v; want %s", tip, err, base)
	}
	prs, err := e.c.ListCommitPulls(ctx(t), repo, merge)
	if err != nil {
		t.Fatal(err)
	}
	if len(prs) != 1 || prs[0].Number != prNum || prs[0].State != "open" || prs[0].HeadSHA != headSHA || prs[0].BaseRef != "main" {
		t.Errorf("ListCommitPulls = %+v", prs)
	}
	unknown := strings.Repeat("c", 40)
	if _, err := e.c.GetCommit(ctx(t), repo, unknown); !errors.Is(err, github.ErrNotFound) || !strings.Contains(err.Error(), "No commit found") {
		t.Errorf("GetCommit(unknown) err = %v, want ErrNotFound saying GitHub's words", err)
	}
	if _, err := e.c.ListCommitPulls(ctx(t), repo, unknown); !errors.Is(err, github.ErrNotFound) {
		t.Errorf("ListCommitPulls(unknown) err = %v, want ErrNotFound", err)
	}
	before := len(e.f.Requests("GET", "/repos/acme/infra/commits/"))
	if _, err := e.c.GetCommit(ctx(t), repo, ""); !errors.Is(err, github.ErrValidation) {
		t.Errorf("GetCommit(\"\") err = %v, want ErrValidation", err)
	}
	if _, err := e.c.ListCommitPulls(ctx(t), repo, "a/b"); !errors.Is(err, github.ErrValidation) {
		t.Errorf("ListCommitPulls(a/b) err = %v, want ErrValidation", err)
	}
	if n := len(e.f.Requests("GET", "/repos/acme/infra/commits/")); n != before {
		t.Errorf("refused refs were sent to GitHub (%d requests)", n-before)
	}
}
