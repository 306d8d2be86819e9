package githubfake

import (
	"net/http"
	"strings"
	"testing"
)

// TestCommits: get-commit by SHA and by branch (parents in order), the
// pull requests associated with a commit, unknown commits answered as
// GitHub does (422 "No commit found for SHA"), and /commits/{sha}/pulls
// and /commits/{ref}/check-runs not taken for get-commit of a ref with a
// slash (the most literal route wins).
func TestCommits(t *testing.T) {
	t.Parallel()
	f := setup(t)
	base, merge := strings.Repeat("a", 40), strings.Repeat("b", 40)
	f.AddCommit(testRepo, Commit{SHA: merge, Parents: []string{base, sha1}, Message: "Merge pull request #7", PRs: []int{7}})
	f.SetBranch(testRepo, DefaultBranch, base)

	code, _, body := do(t, f, "GET", "/repos/acme/infra/commits/"+merge, testToken, "")
	if code != http.StatusOK {
		t.Fatalf("get-commit: %d %v", code, body)
	}
	m := body.(map[string]any)
	parents := m["parents"].([]any)
	if m["sha"] != merge || len(parents) != 2 || parents[0].(map[string]any)["sha"] != base || parents[1].(map[string]any)["sha"] != sha1 {
		t.Errorf("get-commit: sha %v parents %v", m["sha"], parents)
	}
	for _, ref := range []string{"main", "heads/main"} {
		code, _, body := do(t, f, "GET", "/repos/acme/infra/commits/"+ref, testToken, "")
		if code != http.StatusOK || body.(map[string]any)["sha"] != base {
			t.Errorf("get-commit %s: %d %v", ref, code, body)
		}
	}
	code, _, body = do(t, f, "GET", "/repos/acme/infra/commits/"+merge+"/pulls", testToken, "")
	if code != http.StatusOK {
		t.Fatalf("list PRs of a commit: %d %v", code, body)
	}
	if l := body.([]any); len(l) != 1 || l[0].(map[string]any)["number"] != float64(7) {
		t.Errorf("list PRs of the merge commit: %v", l)
	}
	// PR 7's head is sha1: associated with it though never added.
	if code, _, body := do(t, f, "GET", "/repos/acme/infra/commits/"+sha1+"/pulls", testToken, ""); code != http.StatusOK || len(body.([]any)) != 1 {
		t.Errorf("list PRs of PR 7's head: %d %v", code, body)
	}
	if code, _, body := do(t, f, "GET", "/repos/acme/infra/commits/"+merge+"/check-runs", testToken, ""); code != http.StatusOK || body.(map[string]any)["total_count"] == nil {
		t.Errorf("check runs of a commit were not routed to checks/list-for-ref: %d %v", code, body)
	}
	unknown := strings.Repeat("c", 40)
	for _, p := range []string{"/repos/acme/infra/commits/" + unknown, "/repos/acme/infra/commits/" + unknown + "/pulls"} {
		code, _, body := do(t, f, "GET", p, testToken, "")
		if code != http.StatusUnprocessableEntity || !strings.Contains(body.(map[string]any)["message"].(string), "No commit found for SHA") {
			t.Errorf("GET %s: %d %v, want 422 No commit found", p, code, body)
		}
	}
	if code, _, _ := do(t, f, "GET", "/repos/acme/infra/commits/"+merge, "", ""); code != http.StatusUnauthorized {
		t.Errorf("get-commit without a token: %d, want 401", code)
	}
}
