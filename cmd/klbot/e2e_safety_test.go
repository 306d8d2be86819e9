package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/github/githubfake"
)

// approvedYAML is klYAML requiring approval at the top level: the default
// branch's kl.yaml of the safety tests.
const approvedYAML = "version: 1\napply_requirements: [approved]\nprojects:\n  - name: infra\n    dir: infra\n    state: acme/infra\n"

// looseYAML is klYAML switching the requirements off (line 2).
const looseYAML = "version: 1\napply_requirements: []\nprojects:\n  - name: infra\n    dir: infra\n    state: acme/infra\n"

// headSerial is the head serial of state acme/infra.
func (h *harness) headSerial() int {
	return h.count(`SELECT head_serial::int FROM states WHERE name = $1`, repo)
}

// applyRuns counts the apply runs.
func (h *harness) applyRuns() int { return h.count(`SELECT count(*) FROM runs WHERE kind = 'apply'`) }

// TestPRCannotLoosenSafetyKeys: the default branch's kl.yaml requires
// approval; a pull request whose own kl.yaml sets apply_requirements: []
// gets a failing "kl config" check run naming the key, both values and
// where the base came from, nothing is planned, and "/kl apply" applies
// nothing (issue 11 §0). Once the pull request stops loosening it (it
// drops the key, so inherits [approved]), it plans, and its apply needs
// the approval. The requirements are read again at apply: a plan made
// while the default branch required nothing is refused once the default
// branch requires approval.
func TestPRCannotLoosenSafetyKeys(t *testing.T) {
	h := setup(t)
	h.fake.SetFile(repo, githubfake.DefaultBranch, "kl.yaml", []byte(approvedYAML))
	app := "infra/app.tf"
	files := change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`})
	files["kl.yaml"] = looseYAML
	p1 := pr{1, sha(1), files, []string{app, "kl.yaml"}}
	h.open(t, p1)
	h.settle()
	if crs := h.checkRuns(p1.head, "kl plan · infra"); len(crs) != 0 {
		t.Errorf("PR 1 loosens apply_requirements and got %d plan check runs: %s %q", len(crs), crs[0].Conclusion, crs[0].Title)
	}
	if cfg := h.checkRuns(p1.head, "kl config"); len(cfg) != 1 || cfg[0].Conclusion != "failure" {
		t.Errorf("PR 1 loosens apply_requirements: %d kl config check runs, want one failure", len(cfg))
	} else {
		mustContain(t, "the kl config check run", cfg[0].Summary,
			"kl.yaml:2: project \"infra\": apply_requirements [] loosens [approved] set by the default branch's kl.yaml (line 2)")
		golden(t, "safety/pr1.config.md", cfg[0].Summary)
	}

	_, cid := h.comment(t, 1, "alice", "/kl apply")
	h.settle()
	if crs := h.checkRuns(p1.head, "kl apply · infra"); len(crs) != 0 {
		t.Errorf("/kl apply of PR 1 made %d apply check runs: %s %q", len(crs), crs[0].Conclusion, crs[0].Title)
	}
	if n, serial := h.applyRuns(), h.headSerial(); n != 1 || serial != 1 {
		t.Fatalf("after an unapproved /kl apply of PR 1: %d apply runs, head serial %d; want the bootstrap's only (1, 1)", n, serial)
	}
	mustContain(t, "the reply to /kl apply of PR 1", h.replyTo(t, 1, cid), "nothing to apply")

	// The pull request drops the key: it inherits [approved], plans, and
	// its apply waits for an approval.
	p1.head, p1.files["kl.yaml"] = sha(11), klYAML
	h.seed(t, p1, false)
	h.prEvent(t, "pull_request.synchronize.22", p1, false)
	h.settle()
	if c := h.one(t, p1.head, "kl plan · infra"); c.Conclusion != "success" {
		t.Fatalf("PR 1 without the key: plan %s %q", c.Conclusion, c.Title)
	}
	h.comment(t, 1, "alice", "/kl apply")
	h.settle()
	c := h.one(t, p1.head, "kl apply · infra")
	if c.Conclusion != "action_required" {
		t.Fatalf("PR 1 unapproved: apply %s %q, want action_required", c.Conclusion, c.Title)
	}
	mustContain(t, "PR 1's unapproved apply", c.Summary, "requires an approving review")
	h.fake.AddReview(repo, 1, "bob", "APPROVED")
	h.comment(t, 1, "alice", "/kl apply")
	h.settle()
	if c := h.shown(t, p1.head, "kl apply · infra"); c.Conclusion != "success" {
		t.Fatalf("PR 1 approved: apply %s %q", c.Conclusion, c.Title)
	}

	// Apply-time: PR 2 plans while the default branch requires nothing;
	// then the default branch requires approval, and the apply needs it.
	h.fake.SetFile(repo, githubfake.DefaultBranch, "kl.yaml", []byte(klYAML))
	p2 := pr{2, sha(2), change(t, [3]string{"infra/db.tf", `"db_main-v1"`, `"db_main-v2"`}), []string{"infra/db.tf"}}
	h.open(t, p2)
	h.settle()
	// neutral: PR 2's branch predates PR 1's change to app_web, which its
	// plan sets back (on_revert: warn, ADR 0046).
	if c := h.one(t, p2.head, "kl plan · infra"); c.Conclusion != "neutral" || !strings.Contains(c.Title, "would undo version 2's change") {
		t.Fatalf("PR 2: plan %s %q", c.Conclusion, c.Title)
	}
	h.fake.SetFile(repo, githubfake.DefaultBranch, "kl.yaml", []byte(approvedYAML))
	h.comment(t, 2, "alice", "/kl apply")
	h.settle()
	c = h.one(t, p2.head, "kl apply · infra")
	if c.Conclusion != "action_required" || !strings.Contains(c.Summary, "requires an approving review") {
		t.Fatalf("PR 2 after the default branch required approval: apply %s %q, want refused for approval:\n%s", c.Conclusion, c.Title, c.Summary)
	}
	if serial := h.headSerial(); serial != 2 {
		t.Errorf("head serial %d, want 2 (PR 1's apply only)", serial)
	}

	// A default branch whose kl.yaml cannot be read: nothing applies, by
	// comment (PR 2, approved now) or on merge (PR 3, apply_trigger: merge,
	// approved, planned before); the "kl config" check run says why.
	p3 := pr{3, sha(3), change(t, [3]string{"infra/dns.tf", `"dns_a-v1"`, `"dns_a-v2"`},
		[3]string{"kl.yaml", "    state: acme/infra\n", "    state: acme/infra\n    apply_trigger: merge\n"}), []string{"infra/dns.tf", "kl.yaml"}}
	h.open(t, p3)
	h.settle()
	if c := h.one(t, p3.head, "kl plan · infra"); c.Conclusion != "success" && c.Conclusion != "neutral" { // neutral: it overlaps PR 2's plan
		t.Fatalf("PR 3: plan %s %q", c.Conclusion, c.Title)
	}
	h.fake.AddReview(repo, 2, "bob", "APPROVED")
	h.fake.AddReview(repo, 3, "bob", "APPROVED")
	h.fake.SetFile(repo, githubfake.DefaultBranch, "kl.yaml", []byte("version: 2\nprojects: []\n"))
	h.comment(t, 2, "alice", "/kl apply")
	h.fake.AddPR(repo, githubfake.PR{Number: 3, HeadSHA: p3.head, Files: p3.paths, Author: "alice", State: "closed", Merged: true})
	h.deliver("pull_request", githubfake.MergedPullRequest(repo, 3, p3.head))
	h.settle()
	for _, head := range []string{p2.head, p3.head} {
		c := h.one(t, head, "kl config")
		if c.Conclusion != "failure" {
			t.Errorf("kl config on %s: %s, want failure", head[:7], c.Conclusion)
		}
		mustContain(t, "kl config with the default branch's kl.yaml invalid", c.Summary,
			"the default branch's kl.yaml is invalid", "- kl.yaml:1: version 2: want version: 1", "Fix kl.yaml on the default branch")
	}
	golden(t, "safety/pr2.config.md", h.one(t, p2.head, "kl config").Summary)
	if crs := h.checkRuns(p3.head, "kl apply · infra"); len(crs) != 0 {
		t.Errorf("PR 3 merged while the default branch's kl.yaml is invalid: %d apply check runs (%s %q)", len(crs), crs[0].Conclusion, crs[0].Title)
	}
	if serial := h.headSerial(); serial != 2 {
		t.Errorf("head serial %d, want 2: nothing applies without readable rules", serial)
	}
	if st := h.runStatus(h.planRun(3)); st != "superseded" {
		t.Errorf("PR 3's plan is %s after its merge, want superseded (closed unapplied)", st)
	}
}

// TestRepoConfigAllowsOverride: with KLBOT_REPO_CONFIG, the safety keys
// of acme/infra come from the server-side file — every repository
// requires approval, and acme/infra's entry lets a pull request's kl.yaml
// change apply_requirements (allowed_overrides). A pull request setting
// apply_requirements: [] is planned and applied unapproved; one that does
// not set it gets the server's [approved].
func TestRepoConfigAllowsOverride(t *testing.T) {
	path := filepath.Join(t.TempDir(), "repos.yaml")
	server := "repos:\n  - id: /.*/\n    apply_requirements: [approved]\n  - id: acme/infra\n    allowed_overrides: [apply_requirements]\n"
	if err := os.WriteFile(path, []byte(server), 0o600); err != nil {
		t.Fatal(err)
	}
	h := setup(t, "KLBOT_REPO_CONFIG="+path)
	app := "infra/app.tf"
	files := change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`})
	files["kl.yaml"] = looseYAML
	p1 := pr{1, sha(1), files, []string{app, "kl.yaml"}}
	h.open(t, p1)
	h.settle()
	if crs := h.checkRuns(p1.head, "kl config"); len(crs) != 0 {
		t.Fatalf("PR 1 (an allowed override): kl config %s %q:\n%s", crs[0].Conclusion, crs[0].Title, crs[0].Summary)
	}
	if c := h.one(t, p1.head, "kl plan · infra"); c.Conclusion != "success" {
		t.Fatalf("PR 1: plan %s %q", c.Conclusion, c.Title)
	}
	h.comment(t, 1, "alice", "/kl apply")
	h.settle()
	if c := h.one(t, p1.head, "kl apply · infra"); c.Conclusion != "success" {
		t.Fatalf("PR 1 (apply_requirements: [] allowed by KLBOT_REPO_CONFIG): apply %s %q:\n%s", c.Conclusion, c.Title, c.Summary)
	}

	p2 := pr{2, sha(2), change(t, [3]string{"infra/db.tf", `"db_main-v1"`, `"db_main-v2"`}), []string{"infra/db.tf"}}
	h.open(t, p2)
	h.settle()
	h.comment(t, 2, "alice", "/kl apply")
	h.settle()
	c := h.one(t, p2.head, "kl apply · infra")
	if c.Conclusion != "action_required" || !strings.Contains(c.Summary, "requires an approving review") {
		t.Fatalf("PR 2 (no apply_requirements of its own): apply %s %q, want refused for approval:\n%s", c.Conclusion, c.Title, c.Summary)
	}
}
