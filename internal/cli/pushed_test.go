package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/github/githubfake"
)

// TestPushedPRsJSON: kl github pushed-prs --json opens with its schema,
// as every kl document does (docs/json.md), and lists the pull request
// the push's commit belongs to.
func TestPushedPRsJSON(t *testing.T) {
	t.Parallel()
	g := setupGitHub(t, nil)
	before, after := strings.Repeat("b0", 20), strings.Repeat("a1", 20)
	g.fake.AddPR(ghRepo, githubfake.PR{Number: ghPR, HeadSHA: ghSHA, State: "closed", Merged: true, MergedBy: "alice", MergeCommitSHA: after})
	g.fake.AddCommit(ghRepo, githubfake.Commit{SHA: after, Parents: []string{before}, PRs: []int{ghPR}})
	g.fake.SetCompare(ghRepo, before, after, githubfake.Comparison{BaseSHA: before, Commits: []string{after}})
	r := g.runWith(g.ghEnv, "", "github", "pushed-prs", "--json", "--branch", "main", "--before", before, "--after", after)
	if r.code() != 0 {
		t.Fatalf("kl github pushed-prs: exit %d\n%s%s", r.code(), r.out, r.errOut)
	}
	if !strings.HasPrefix(r.out, "{\n  \"schema\": \"kilolock/pushed-prs/v1\",") {
		t.Errorf("kl github pushed-prs --json does not open with its schema:\n%s", r.out)
	}
	var doc struct {
		Repo, Branch, Before, After string
		PullRequests                []struct {
			Number int `json:"number"`
		} `json:"pull_requests"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		t.Fatalf("kl github pushed-prs --json: %v\n%s", err, r.out)
	}
	if doc.Repo != ghRepo || doc.Branch != "main" || doc.Before != before || doc.After != after || len(doc.PullRequests) != 1 || doc.PullRequests[0].Number != ghPR {
		t.Errorf("kl github pushed-prs --json = %+v; want %s main %s..%s with #%d", doc, ghRepo, before, after, ghPR)
	}
}
