package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/github/githubfake"
)

// failRevertYAML is klYAML with on_revert: fail at the top level (line 2).
const failRevertYAML = "version: 1\non_revert: fail\nprojects:\n  - name: infra\n    dir: infra\n    state: acme/infra\n"

// TestPlanSaysWhatItWouldUndo is issue 12 §5 end to end (ADR 0046): PR
// #21 changes app_web v1 → v2 and is applied (version 2), not merged. PR
// #22, a branch made before it, changes db_main and still says app_web
// v1: its plan sets app_web back, and its "kl plan · infra" check run
// says it would undo version 2's change to terraform_data.app_web, naming
// PR #21 and its author, and that the branch, up to date with main, lacks
// that change because PR #21 is not merged — neutral under the default
// on_revert: warn. PR #23,
// made after, changes dns_a alone and is told nothing. Once the default
// branch's kl.yaml says on_revert: fail, PR #22's next plan fails its
// check run, without the Apply button, and "/kl apply" is refused; PR
// #24 cannot loosen the key in its own kl.yaml (a failing "kl config").
func TestPlanSaysWhatItWouldUndo(t *testing.T) {
	h := setup(t)
	app, db, dns := "infra/app.tf", "infra/db.tf", "infra/dns.tf"
	p21 := pr{21, sha(21), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}), []string{app}}
	h.open(t, p21)
	h.settle()
	h.comment(t, 21, "alice", "/kl apply")
	h.settle()
	if c := h.shown(t, p21.head, "kl apply · infra"); c.Conclusion != "success" {
		t.Fatalf("PR 21: apply %s %q", c.Conclusion, c.Title)
	}
	if serial := h.headSerial(); serial != 2 {
		t.Fatalf("head serial %d after PR 21's apply, want 2", serial)
	}

	p22 := pr{22, sha(22), change(t, [3]string{db, `"db_main-v1"`, `"db_main-v2"`}), []string{db}}
	h.open(t, p22)
	p23 := pr{23, sha(23), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}, [3]string{dns, `"dns_a-v1"`, `"dns_a-v2"`}), []string{dns}}
	h.open(t, p23)
	h.settle()
	undo := "would undo **version 2's** change to `terraform_data.app_web` (PR [acme/infra#21]"
	c := h.one(t, p22.head, "kl plan · infra")
	mustContain(t, "PR 22's plan check run", c.Summary, undo, "by alice): `input` back to its value before version 2. The branch is up to date with `main`, but PR [acme/infra#21](",
		") is not merged into it: the branch lacks that change.")
	if c.Conclusion != "neutral" || !strings.Contains(c.Title, "⚠ would undo version 2's change") || len(c.Actions) != 1 {
		t.Errorf("PR 22 (on_revert: warn): plan %s %q with %d actions; want neutral, the title saying so, the Apply button", c.Conclusion, c.Title, len(c.Actions))
	}
	golden(t, "revert/pr22.plan.warn.md", c.Summary)
	mustContain(t, "PR 22's sticky comment", h.sticky(t, 22), undo)
	if c := h.one(t, p23.head, "kl plan · infra"); strings.Contains(c.Summary, "would undo") || strings.Contains(c.Title, "undo") {
		t.Errorf("PR 23 changes dns_a alone and is told it would undo something: %q\n%s", c.Title, c.Summary)
	}

	// The default branch fails plans that would undo an earlier change.
	h.fake.SetFile(repo, githubfake.DefaultBranch, "kl.yaml", []byte(failRevertYAML))
	p22.head = sha(72)
	h.seed(t, p22, false)
	h.prEvent(t, "pull_request.synchronize.22", p22, false)
	h.settle()
	c = h.one(t, p22.head, "kl plan · infra")
	if c.Conclusion != "failure" || len(c.Actions) != 0 {
		t.Errorf("PR 22 (on_revert: fail): plan %s %q with %d actions; want failure without the Apply button", c.Conclusion, c.Title, len(c.Actions))
	}
	if !strings.HasPrefix(c.Summary, "> ⛔ This plan cannot be applied: it would undo earlier changes not shown to be deliberate (below) and project `infra` has `on_revert: fail`") {
		t.Errorf("PR 22 (on_revert: fail): the plan check run does not open with why it cannot be applied:\n%s", c.Summary)
	}
	mustContain(t, "PR 22's failing plan check run", c.Summary, undo,
		"- **next:** bring the branch up to date with its base and push (`on_revert: fail`)")
	if strings.Contains(c.Summary, "/kl apply") {
		t.Errorf("PR 22 (on_revert: fail): the plan check run still says how to apply it:\n%s", c.Summary)
	}
	golden(t, "revert/pr22.plan.fail.md", c.Summary)
	h.comment(t, 22, "alice", "/kl apply")
	h.settle()
	a := h.one(t, p22.head, "kl apply · infra")
	if a.Conclusion != "action_required" {
		t.Errorf("/kl apply of PR 22 (on_revert: fail): %s %q, want refused", a.Conclusion, a.Title)
	}
	mustContain(t, "the refusal of PR 22's apply", a.Summary, "rule:** on_revert: fail",
		"has `on_revert: fail` (kl.yaml) and plan", "would undo version 2's change to `terraform_data.app_web` (PR [acme/infra#21]")
	golden(t, "revert/pr22.apply.md", a.Summary)
	if serial := h.headSerial(); serial != 2 {
		t.Errorf("head serial %d after PR 22's refused apply, want 2", serial)
	}
	st := h.sticky(t, 22)
	mustContain(t, "PR 22's sticky comment", st, "⛔ It cannot be applied: it would undo earlier changes not shown to be deliberate (below) and project `infra` has `on_revert: fail`")
	if strings.Contains(st, "Apply it with") {
		t.Errorf("PR 22 (on_revert: fail): the sticky comment still says how to apply it:\n%s", st)
	}

	// A pull request cannot loosen it.
	files := change(t, [3]string{db, `"db_replica-v1"`, `"db_replica-v2"`})
	files["kl.yaml"] = strings.Replace(klYAML, "version: 1\n", "version: 1\non_revert: warn\n", 1)
	p24 := pr{24, sha(24), files, []string{db, "kl.yaml"}}
	h.open(t, p24)
	h.settle()
	if crs := h.checkRuns(p24.head, "kl plan · infra"); len(crs) != 0 {
		t.Errorf("PR 24 loosens on_revert and got %d plan check runs", len(crs))
	}
	cfg := h.checkRuns(p24.head, "kl config")
	if len(cfg) != 1 || cfg[0].Conclusion != "failure" {
		t.Fatalf("PR 24 loosens on_revert: %d kl config check runs, want one failure", len(cfg))
	}
	mustContain(t, "PR 24's kl config check run", cfg[0].Summary,
		"kl.yaml:2: project \"infra\": on_revert warn loosens fail set by the default branch's kl.yaml (line 2)")
}

// mergePR marks pull request p merged on the fake (closed, merged by
// alice) and delivers its closing.
func (h *harness) mergePR(t *testing.T, p pr) {
	t.Helper()
	h.fake.AddPR(repo, githubfake.PR{Number: p.n, HeadSHA: p.head, Files: p.paths, Author: "alice", BaseSHA: sha(0),
		State: "closed", Merged: true, MergedBy: "alice"})
	h.deliver("pull_request", githubfake.MergedPullRequest(repo, p.n, p.head))
	h.settle()
}

// TestRevertOnPurposeApplies (ADR 0046 decision 7): under on_revert: fail
// from the default branch, PR #21 adds terraform_data.feature, is applied
// (version 2) and merged. PR #22, branched from main after that merge —
// up to date, so it holds PR #21's change — deletes the resource on
// purpose. Its plan says it undoes version 2's creation as a fact, not a
// warning: the check run succeeds with its Apply button, and "/kl apply"
// applies it (version 3). Before klbot asked GitHub, the plan check run
// failed with "Is the branch behind the base?" and the refusal said to
// bring up to date a branch that already was: it could never be applied.
func TestRevertOnPurposeApplies(t *testing.T) {
	h := setup(t)
	h.fake.SetFile(repo, githubfake.DefaultBranch, "kl.yaml", []byte(failRevertYAML))
	withFeature := baseRepo()
	withFeature["kl.yaml"] = failRevertYAML
	withFeature["infra/feature.tf"] = resources("feature")
	p21 := pr{21, sha(21), withFeature, []string{"infra/feature.tf"}}
	h.open(t, p21)
	h.settle()
	h.comment(t, 21, "alice", "/kl apply")
	h.settle()
	if c := h.shown(t, p21.head, "kl apply · infra"); c.Conclusion != "success" || h.headSerial() != 2 {
		t.Fatalf("PR 21: apply %s %q, head serial %d; want applied as version 2", c.Conclusion, c.Title, h.headSerial())
	}
	h.mergePR(t, p21)

	without := baseRepo()
	without["kl.yaml"] = failRevertYAML
	p22 := pr{22, sha(22), without, []string{"infra/feature.tf"}}
	h.open(t, p22)
	h.settle()
	c := h.one(t, p22.head, "kl plan · infra")
	if c.Conclusion != "success" || len(c.Actions) != 1 || !strings.HasSuffix(c.Title, ", undoes version 2's creation") {
		t.Errorf("PR 22 deletes on purpose what PR 21 created: plan %s %q with %d actions; want success, the title saying so without ⚠, the Apply button", c.Conclusion, c.Title, len(c.Actions))
	}
	mustContain(t, "PR 22's plan check run", c.Summary,
		"undoes **version 2's** creation of `terraform_data.feature` (PR [acme/infra#21]",
		"by alice): this plan destroys what version 2 created. The branch is up to date with `main`, where PR [acme/infra#21]",
		" is merged, so this is deliberate.", "- **next:** `/kl apply -p infra`")
	if strings.Contains(c.Summary, "⛔") || strings.Contains(c.Summary, "Is the branch behind the base?") {
		t.Errorf("PR 22's plan check run still refuses or asks:\n%s", c.Summary)
	}
	golden(t, "revert/pr22.plan.deliberate.md", c.Summary)
	h.comment(t, 22, "alice", "/kl apply")
	h.settle()
	if a := h.shown(t, p22.head, "kl apply · infra"); a.Conclusion != "success" || h.headSerial() != 3 {
		t.Errorf("/kl apply of PR 22: %s %q, head serial %d; want applied as version 3:\n%s", a.Conclusion, a.Title, h.headSerial(), a.Summary)
	}
}

// TestRevertBehindIsSaid (ADR 0046 decision 7): under on_revert: fail,
// PR #21 changes app_web v1 → v2, is applied (version 2) and merged. PR
// #22, a branch GitHub says is 2 commits behind main, changes db_main
// and still says app_web v1: its plan check run fails without the Apply
// button and says the branch is 2 commits behind `main` — an answer, not
// a question — and "/kl apply" is refused.
func TestRevertBehindIsSaid(t *testing.T) {
	h := setup(t)
	h.fake.SetFile(repo, githubfake.DefaultBranch, "kl.yaml", []byte(failRevertYAML))
	app, db := "infra/app.tf", "infra/db.tf"
	p21 := pr{21, sha(21), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}), []string{app}}
	h.open(t, p21)
	h.settle()
	h.comment(t, 21, "alice", "/kl apply")
	h.settle()
	if c := h.shown(t, p21.head, "kl apply · infra"); c.Conclusion != "success" {
		t.Fatalf("PR 21: apply %s %q", c.Conclusion, c.Title)
	}
	h.mergePR(t, p21)

	p22 := pr{22, sha(22), change(t, [3]string{db, `"db_main-v1"`, `"db_main-v2"`}), []string{db}}
	h.fake.SetCompare(repo, "main", p22.head, githubfake.Comparison{AheadBy: 1, BehindBy: 2})
	h.open(t, p22)
	h.settle()
	c := h.one(t, p22.head, "kl plan · infra")
	if c.Conclusion != "failure" || len(c.Actions) != 0 || !strings.HasSuffix(c.Title, "⚠ would undo version 2's change") {
		t.Errorf("PR 22, 2 commits behind: plan %s %q with %d actions; want failure, the title saying so, no Apply button", c.Conclusion, c.Title, len(c.Actions))
	}
	mustContain(t, "PR 22's plan check run", c.Summary,
		"⚠ would undo **version 2's** change to `terraform_data.app_web` (PR [acme/infra#21]",
		"by alice): `input` back to its value before version 2. The branch is 2 commits behind `main`: bring it up to date.",
		"- **next:** bring the branch up to date with its base and push (`on_revert: fail`)")
	if strings.Contains(c.Summary, "Is the branch behind the base?") {
		t.Errorf("PR 22's plan check run still asks what GitHub answered:\n%s", c.Summary)
	}
	golden(t, "revert/pr22.plan.behind.md", c.Summary)
	mustContain(t, "PR 22's sticky comment", h.sticky(t, 22), "The branch is 2 commits behind `main`: bring it up to date.", "⛔ It cannot be applied")
	h.comment(t, 22, "alice", "/kl apply")
	h.settle()
	a := h.one(t, p22.head, "kl apply · infra")
	if a.Conclusion != "action_required" || !strings.Contains(a.Summary, "rule:** on_revert: fail") {
		t.Errorf("/kl apply of PR 22: %s %q, want refused by on_revert: fail:\n%s", a.Conclusion, a.Title, a.Summary)
	}
	if serial := h.headSerial(); serial != 2 {
		t.Errorf("head serial %d after PR 22's refused apply, want 2", serial)
	}
}

// TestRevertCompareFails (ADR 0046 decision 7): GitHub answers 502 to
// every compare (after the transport's retries): the plan is still made
// and reported, what it would undo stays the question "Is the branch
// behind the base?" (neutral under on_revert: warn), and the failure is
// logged.
func TestRevertCompareFails(t *testing.T) {
	logs := captureLogs(t)
	h := setup(t, "KLBOT_LOG_LEVEL=warn")
	app, db := "infra/app.tf", "infra/db.tf"
	p21 := pr{21, sha(21), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}), []string{app}}
	h.open(t, p21)
	h.settle()
	h.comment(t, 21, "alice", "/kl apply")
	h.settle()
	h.mergePR(t, p21)

	h.fake.Fail(githubfake.Failure{Method: "GET", Path: "/repos/acme/infra/compare/*", Status: http.StatusBadGateway, Times: 100})
	p22 := pr{22, sha(22), change(t, [3]string{db, `"db_main-v1"`, `"db_main-v2"`}), []string{db}}
	h.open(t, p22)
	h.settle()
	c := h.one(t, p22.head, "kl plan · infra")
	if c.Conclusion != "neutral" || len(c.Actions) != 1 || !strings.HasSuffix(c.Title, "⚠ would undo version 2's change") {
		t.Errorf("PR 22, compare failing: plan %s %q with %d actions; want neutral, the title saying so, the Apply button", c.Conclusion, c.Title, len(c.Actions))
	}
	mustContain(t, "PR 22's plan check run", c.Summary,
		"by alice): `input` back to its value before version 2. Is the branch behind the base?")
	if n := len(h.fake.Requests("GET", "/repos/acme/infra/compare/")); n < 4 {
		t.Errorf("%d compare requests, want the transport's 4 attempts at least", n)
	}
	if l := logs.lines(func(l map[string]any) bool {
		return l["level"] == "WARN" && strings.HasPrefix(fmt.Sprint(l["msg"]), "could not compare the branch with its base")
	}); len(l) != 1 || !strings.Contains(l[0], "502") {
		t.Errorf("log lines of the failed compare: %q, want one naming GitHub's 502", l)
	}
}
