package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/github/githubfake"
)

// planRuns counts the plan runs (the bootstrap's included).
func (h *harness) planRuns() int { return h.count(`SELECT count(*) FROM runs WHERE kind = 'plan'`) }

// planRun is the plan run klbot recorded for project infra of pull request n.
func (h *harness) planRun(n int) string {
	h.t.Helper()
	var id string
	h.scan(&id, `SELECT plan_run FROM klbot_projects WHERE repo = $1 AND pr = $2 AND project = 'infra'`, repo, n)
	return id
}

// runStatus is a run's status.
func (h *harness) runStatus(id string) string {
	h.t.Helper()
	var status string
	h.scan(&status, `SELECT status FROM runs WHERE id = $1`, id)
	return status
}

// effects is what a delivery may change: check runs (and their updates),
// bot comments, runs, River jobs.
func (h *harness) effects() string {
	updates := 0
	for _, c := range h.fake.CheckRuns(repo) {
		updates += c.Updates
	}
	var comments int
	for _, n := range []int{1, 2} {
		comments += len(h.fake.Comments(repo, n))
	}
	return fmt.Sprintf("check runs %d, updates %d, comments %d, runs %d, jobs %d", len(h.fake.CheckRuns(repo)), updates, comments,
		h.count(`SELECT count(*) FROM runs`), h.count(`SELECT count(*) FROM river_job WHERE kind NOT IN ('klbot_reconcile', 'klbot_gc')`))
}

// TestDraftPlannedWhenReady: a draft pull request is not planned on push
// (kl.yaml has no plan_drafts); marking it ready for review at the same
// head plans it, once — a redelivery of ready_for_review, or GitHub's
// synchronize of the same push, changes nothing. A draft made ready before
// its push job ran is planned once too, not twice.
func TestDraftPlannedWhenReady(t *testing.T) {
	h := setup(t)
	p := pr{1, sha(1), change(t, [3]string{"infra/app.tf", `"app_web-v1"`, `"app_web-v2"`}), []string{"infra/app.tf"}}

	h.seed(t, p, true)
	if _, code := h.prEvent(t, "pull_request.opened.0", p, true); code != http.StatusAccepted {
		t.Errorf("opened (draft) answered %d, want 202 (enqueued)", code)
	}
	h.settle()
	if n := len(h.checkRuns(p.head, "kl plan · infra")) + len(h.checkRuns(p.head, "kl plan")); n != 0 {
		t.Errorf("a draft got %d plan check runs, want none (plan_drafts is false)", n)
	}
	if n := h.planRuns(); n != 1 {
		t.Errorf("%d plan runs after a draft's push, want 1 (the bootstrap's)", n)
	}

	h.fake.SetDraft(repo, p.n, false)
	ready, code := h.prEvent(t, "pull_request.ready_for_review.15", p, false)
	if code != http.StatusAccepted {
		t.Errorf("ready_for_review of a former draft answered %d, want 202 (a new plan job)", code)
	}
	h.settle()
	if c := h.one(t, p.head, "kl plan · infra"); c.Conclusion != "success" {
		t.Errorf("plan check run after ready_for_review: conclusion %q, want success:\n%s", c.Conclusion, c.Summary)
	}
	h.sticky(t, p.n)
	if n := h.planRuns(); n != 2 {
		t.Errorf("%d plan runs after ready_for_review, want 2", n)
	}

	before := h.effects()
	if code, _ := h.redeliver(ready); code != http.StatusOK {
		t.Errorf("a redelivery of ready_for_review answered %d, want 200 (duplicate)", code)
	}
	if _, code := h.prEvent(t, "pull_request.synchronize.22", p, false); code != http.StatusOK {
		t.Errorf("synchronize of the planned head answered %d, want 200 (duplicate)", code)
	}
	h.settle()
	if after := h.effects(); after != before {
		t.Errorf("redelivering ready_for_review changed %s to %s", before, after)
	}

	// PR 2 was opened as a draft and is ready by the time its push job
	// runs: that job leaves it to ready_for_review's job, one plan.
	p2 := pr{2, sha(2), change(t, [3]string{"infra/db.tf", `"db_main-v1"`, `"db_main-v2"`}), []string{"infra/db.tf"}}
	h.seed(t, p2, false)
	h.prEvent(t, "pull_request.opened.0", p2, true)
	h.prEvent(t, "pull_request.ready_for_review.15", p2, false)
	h.settle()
	// Reported once: created in progress, completed by one update.
	if c := h.one(t, p2.head, "kl plan · infra"); c.Conclusion != "success" || c.Updates != 1 {
		t.Errorf("PR 2's plan check run: conclusion %q after %d updates, want success reported once (created in progress, completed)", c.Conclusion, c.Updates)
	}
	if n := h.planRuns(); n != 3 {
		t.Errorf("%d plan runs after PR 2, want 3 (PR 2 planned once)", n)
	}
}

// TestRerunPlanCheckRun: the Re-run of a plan check run (check_run
// rerequested, GitHub's payload) plans that project again at the head:
// the new plan supersedes the old one and a new check run of the name on
// the head reports it, in progress first (GitHub does not put the
// completed one back in progress); the old one loses its Apply button. A
// redelivery changes nothing; the Re-run of a check run on a head the
// pull request moved away from plans nothing.
func TestRerunPlanCheckRun(t *testing.T) {
	h := setup(t)
	p := pr{1, sha(1), change(t, [3]string{"infra/app.tf", `"app_web-v1"`, `"app_web-v2"`}), []string{"infra/app.tf"}}
	h.open(t, p)
	h.settle()
	h.one(t, p.head, "kl plan · infra")
	old := h.planRun(1)
	if old == "" {
		t.Fatal("no plan run recorded for PR 1")
	}

	rerun, code, _ := h.deliver("check_run", githubfake.CheckRunEvent("check_run.rerequested.7", repo, "kl:1:infra", p.head, "alice"))
	if code != http.StatusAccepted {
		t.Errorf("check_run rerequested answered %d, want 202 (enqueued)", code)
	}
	h.settle()
	fresh := h.planRun(1)
	if fresh == "" || fresh == old {
		t.Fatalf("after the re-run PR 1's plan is %q, want a new plan (the old one was %s)", fresh, old)
	}
	if st := h.runStatus(old); st != "superseded" {
		t.Errorf("the old plan %s is %s, want superseded", old, st)
	}
	if st := h.runStatus(fresh); st != "planned" {
		t.Errorf("the new plan %s is %s, want planned", fresh, st)
	}
	crs := h.checkRuns(p.head, "kl plan · infra")
	if len(crs) != 2 {
		t.Fatalf("%d check runs \"kl plan · infra\" on the head after the re-run, want 2 (the push's and the re-run's)", len(crs))
	}
	if o := crs[0]; o.Status != "completed" || len(o.Actions) != 0 || !strings.Contains(o.Summary, old) {
		t.Errorf("the push's plan check run after the re-run: %s, %d actions; want completed, reporting %s, without its Apply button", o.Status, len(o.Actions), old)
	}
	c := h.shown(t, p.head, "kl plan · infra")
	if c.Conclusion != "success" || c.Updates != 1 {
		t.Errorf("plan check run after the re-run: conclusion %q, %d updates; want success, created in progress and completed once", c.Conclusion, c.Updates)
	}
	if !strings.Contains(c.Summary, fresh) || strings.Contains(c.Summary, old) {
		t.Errorf("the plan check run should report the new plan %s, not the old %s:\n%s", fresh, old, c.Summary)
	}
	mustContain(t, "PR 1's sticky comment", h.sticky(t, 1), fresh)
	if n := h.planRuns(); n != 3 {
		t.Errorf("%d plan runs, want 3 (bootstrap, push, re-run)", n)
	}

	before := h.effects()
	if code, _ := h.redeliver(rerun); code != http.StatusOK {
		t.Errorf("a redelivery of the re-run answered %d, want 200 (duplicate)", code)
	}
	h.settle()
	if after := h.effects(); after != before {
		t.Errorf("redelivering the re-run changed %s to %s", before, after)
	}

	// The pull request moved on: a Re-run of the old head's check run
	// plans nothing (the new head has its own plan).
	p11 := pr{1, sha(11), p.files, p.paths}
	h.seed(t, p11, false)
	h.prEvent(t, "pull_request.synchronize.22", p11, false)
	h.settle()
	h.one(t, p11.head, "kl plan · infra")
	plans := h.planRuns()
	h.deliver("check_run", githubfake.CheckRunEvent("check_run.rerequested.8", repo, "kl:1:infra", p.head, "alice"))
	h.settle()
	if n := h.planRuns(); n != plans {
		t.Errorf("a re-run of an old head's check run made %d plan runs, want none", n-plans)
	}
	// Updated twice: completed by the re-run, and by the push that
	// superseded its plan (its Apply button removed, issue 11 §8); the
	// re-run of the old head leaves it alone.
	if c := h.shown(t, p.head, "kl plan · infra"); c.Updates != 2 || len(c.Actions) != 0 {
		t.Errorf("the old head's check run was updated %d times and has %d actions, want 2 and none (left alone by the re-run)", c.Updates, len(c.Actions))
	}
	if n := len(h.checkRuns(p.head, "kl plan · infra")); n != 2 {
		t.Errorf("the re-run of the old head's check run made a check run: %d on the old head, want 2", n)
	}
}
