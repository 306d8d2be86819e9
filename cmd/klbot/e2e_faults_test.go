package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/github/githubfake"
)

// jobOutcome waits until River has no job left to run now and returns
// each job's kind, state and attempt ("klbot_plan cancelled 1"). A job
// waiting to be retried fails the test at once: these tests expect none.
func (h *harness) jobOutcome() []string {
	h.t.Helper()
	ctx := context.Background()
	conn := h.conn()
	defer conn.Close(ctx)
	deadline := time.Now().Add(90 * time.Second)
	for {
		var pending, retryable int
		if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state IN ('available', 'running', 'pending', 'scheduled')),
			count(*) FILTER (WHERE state = 'retryable') FROM river_job`).Scan(&pending, &retryable); err != nil {
			h.t.Fatal(err)
		}
		if retryable > 0 {
			h.t.Fatalf("%d jobs wait to be retried; want every job done or cancelled", retryable)
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%d jobs still pending after 90s", pending)
		}
		time.Sleep(50 * time.Millisecond)
	}
	rows, err := conn.Query(ctx, `SELECT kind || ' ' || state || ' ' || attempt FROM river_job WHERE kind NOT IN ('klbot_reconcile', 'klbot_gc') ORDER BY id`)
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		h.t.Fatal(err)
	}
	return out
}

// TestUncoveredRepositoryCancelled: a delivery for a repository the App's
// installation does not cover is accepted (klbot cannot tell without
// asking GitHub), but its job's 404 from GitHub is final: River cancels
// the job after one attempt instead of retrying it MaxAttempts times.
// A 403 that is not a rate limit (the App lacks a permission) is final
// too.
func TestUncoveredRepositoryCancelled(t *testing.T) {
	h := setup(t)
	const other = "acme/other" // on GitHub, but not in installation 1
	head := sha(1)
	h.fake.AddPR(other, githubfake.PR{Number: 1, HeadSHA: head, BaseSHA: sha(0), Author: "alice", Files: []string{"main.tf"}})
	if _, code, _ := h.deliver("pull_request", githubfake.PullRequestEvent("pull_request.opened.0", other, 1, head)); code != http.StatusAccepted {
		t.Fatalf("opened on %s answered %d, want 202 (enqueued)", other, code)
	}
	if got, want := strings.Join(h.jobOutcome(), ", "), "klbot_plan cancelled 1"; got != want {
		t.Fatalf("jobs: %s, want %s", got, want)
	}
	var errs string
	h.scan(&errs, `SELECT errors::text FROM river_job WHERE kind = 'klbot_plan'`)
	if !strings.Contains(errs, "404") {
		t.Errorf("the cancelled job's error does not say 404: %s", errs)
	}
	if n := len(h.fake.Requests("GET", "/repos/acme/other/pulls/1")); n != 1 {
		t.Errorf("klbot asked GitHub for %s#1 %d times, want once", other, n)
	}

	// A permission refusal on a covered repository: cancelled too.
	p := pr{2, sha(2), change(t, [3]string{"infra/app.tf", `"app_web-v1"`, `"app_web-v2"`}), []string{"infra/app.tf"}}
	h.fake.Fail(githubfake.Failure{Method: "GET", Path: "/repos/acme/infra/pulls/2", Status: http.StatusForbidden, Times: 10,
		Body: `{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/rest"}`})
	h.open(t, p)
	if got, want := strings.Join(h.jobOutcome(), ", "), "klbot_plan cancelled 1, klbot_plan cancelled 1"; got != want {
		t.Fatalf("jobs: %s, want %s", got, want)
	}
	if n := len(h.checkRuns(p.head, "kl plan · infra")); n != 0 {
		t.Errorf("%d plan check runs after a 403, want none", n)
	}
}

// TestInvalidConfigCheckRun: an invalid kl.yaml fails the "kl config"
// check run on the head with every problem and its line, and nothing is
// planned.
func TestInvalidConfigCheckRun(t *testing.T) {
	h := setup(t)
	files := baseRepo()
	files["kl.yaml"] = "version: \"1\"\nprojects:\n  - name: infra\n    dirr: infra\n    state: acme/infra\n    apply_trigger: push\n"
	p := pr{1, sha(1), files, []string{"kl.yaml"}}
	h.open(t, p)
	h.settle()
	c := h.one(t, p.head, "kl config")
	if c.Conclusion != "failure" {
		t.Errorf("kl config: conclusion %q, want failure", c.Conclusion)
	}
	mustContain(t, "the kl config check run", c.Summary,
		"- kl.yaml:1: version: want a whole number, got the string \"1\"\n"+
			"- kl.yaml:4: unknown field \"dirr\" in a project (see docs/kl-yaml.md)\n"+
			"- kl.yaml:6: project \"infra\": apply_trigger \"push\": want comment or merge\n")
	if n := h.planRuns(); n != 1 {
		t.Errorf("%d plan runs after an invalid kl.yaml, want 1 (the bootstrap's)", n)
	}
}

// TestUnknownInstallationCancelled: deliveries for an installation GitHub
// does not know (the App was uninstalled, or the id is wrong) get a 404 on
// POST /app/installations/{id}/access_tokens. That refusal is final: each
// job is cancelled after one attempt, asks for a token once, and says why
// in one log line naming the installation — not eight attempts over an
// hour with nothing saying the installation is gone.
func TestUnknownInstallationCancelled(t *testing.T) {
	logs := captureLogs(t)
	h := setup(t, "KLBOT_LOG_LEVEL=info")
	p := pr{1, sha(1), change(t, [3]string{"infra/app.tf", `"app_web-v1"`, `"app_web-v2"`}), []string{"infra/app.tf"}}
	h.seed(t, p, false)
	const gone = 7
	opened, err := githubfake.Patch(githubfake.PullRequestEvent("pull_request.opened.0", repo, p.n, p.head), map[string]any{"installation.id": gone})
	if err != nil {
		t.Fatal(err)
	}
	d1, code, _ := h.deliver("pull_request", opened)
	if code != http.StatusAccepted {
		t.Fatalf("opened answered %d, want 202", code)
	}
	id := h.fake.AddComment(repo, p.n, "alice", "/kl plan")
	cmt, err := githubfake.Patch(githubfake.IssueCommentOnPR(repo, p.n, "alice", "/kl plan"), map[string]any{"comment.id": id, "installation.id": gone})
	if err != nil {
		t.Fatal(err)
	}
	d2, _, _ := h.deliver("issue_comment", cmt)
	if got, want := strings.Join(h.jobOutcome(), ", "), "klbot_plan cancelled 1, klbot_plan cancelled 1"; got != want {
		t.Fatalf("jobs: %s, want %s", got, want)
	}
	if n := len(h.fake.Requests("POST", "/app/installations/7/access_tokens")); n != 2 {
		t.Errorf("%d token requests for installation %d, want 2 (one per job)", n, gone)
	}
	for _, d := range []sent{d1, d2} {
		lines := logs.lines(func(l map[string]any) bool {
			return l["delivery"] == d.id && l["level"] != "INFO" && l["level"] != "DEBUG"
		})
		if len(lines) != 1 {
			t.Errorf("delivery %s: %d warning or error log lines, want one:\n%s", d.id, len(lines), strings.Join(lines, "\n"))
			continue
		}
		mustContain(t, "the log line of delivery "+d.id, lines[0], "job cancelled, not retried", "installation 7", "404")
	}
}

// TestFailedPlanAttemptRetried: a "/kl plan" whose check run cannot be
// written (GitHub answers 502 to ten updates: the transport's four tries
// of taking the Apply button off the push's plan check run — logged, not
// fatal —, four of completing the job's own check run, then two of the
// retry's) fails its first attempt after it superseded the PR's plan and
// made a new one. The retry plans again and reports it —
// the superseded plan is no conflict — and it leaves one open plan for the
// PR, the one its check run and klbot_projects name; a later push plans
// its head as usual. Before the fix every retry, and every later push,
// failed with "plan run X is superseded, not open: nothing to close".
func TestFailedPlanAttemptRetried(t *testing.T) {
	h := setup(t)
	p := pr{1, sha(1), change(t, [3]string{"infra/app.tf", `"app_web-v1"`, `"app_web-v2"`}), []string{"infra/app.tf"}}
	h.open(t, p)
	h.settle()
	first := h.planRun(1)

	h.fake.Fail(githubfake.Failure{Method: "PATCH", Path: "/repos/acme/infra/check-runs/*", Status: http.StatusBadGateway, Times: 10})
	h.comment(t, 1, "alice", "/kl plan")
	h.settle()
	if got, want := strings.Join(h.jobOutcome(), ", "), "klbot_plan completed 1, klbot_plan completed 2"; got != want {
		t.Fatalf("jobs: %s, want %s (the /kl plan done by its second attempt)", got, want)
	}
	open := h.count(`SELECT count(*) FROM runs WHERE kind = 'plan' AND status = 'planned'`)
	now := h.planRun(1)
	switch {
	case now == first:
		t.Fatalf("klbot_projects still names the superseded plan %s", first)
	case h.runStatus(now) != "planned":
		t.Errorf("klbot_projects names plan %s, %s; want it open", now, h.runStatus(now))
	case open != 1:
		t.Errorf("%d open plans after the retry, want 1 (no orphan of the failed attempt)", open)
	}
	if n := len(h.checkRuns(p.head, "kl plan · infra")); n != 2 {
		t.Errorf("%d check runs \"kl plan · infra\" on the head, want 2: the push's, and one of the /kl plan job (its retry completes the same)", n)
	}
	c := h.shown(t, p.head, "kl plan · infra")
	if c.Conclusion != "success" || !strings.Contains(c.Summary, now) {
		t.Errorf("kl plan · infra: %s, summary does not name plan %s:\n%s", c.Conclusion, now, c.Summary)
	}

	// A later push plans its head and posts its check run.
	p2 := pr{1, sha(2), change(t, [3]string{"infra/app.tf", `"app_web-v1"`, `"app_web-v3"`}), []string{"infra/app.tf"}}
	h.seed(t, p2, false)
	h.prEvent(t, "pull_request.synchronize.22", p2, false)
	h.settle()
	if c := h.one(t, p2.head, "kl plan · infra"); c.Conclusion != "success" {
		t.Errorf("kl plan · infra on the pushed head: %s, want success", c.Conclusion)
	}
	if n := h.count(`SELECT count(*) FROM runs WHERE kind = 'plan' AND status = 'planned'`); n != 1 {
		t.Errorf("%d open plans after the push, want 1", n)
	}
}

// TestLastAttemptSaysDiscarded: a job that fails on its last attempt is
// discarded by River, and its log line says so — not "River retries it".
// GitHub answers 502 to every GET of the pull request, and the job's max
// attempts are lowered to 2 while its first attempt runs, so its second
// attempt is the last.
func TestLastAttemptSaysDiscarded(t *testing.T) {
	logs := captureLogs(t)
	h := setup(t)
	p := pr{1, sha(1), change(t, [3]string{"infra/app.tf", `"app_web-v1"`, `"app_web-v2"`}), []string{"infra/app.tf"}}
	h.fake.Fail(githubfake.Failure{Method: "GET", Path: "/repos/acme/infra/pulls/1", Status: http.StatusBadGateway, Times: 100})
	d := h.open(t, p)
	waitJob := func(what, query string) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); h.count(query) == 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				var jobs string
				h.scan(&jobs, `SELECT string_agg(kind || ' ' || state || ' ' || attempt || '/' || max_attempts || ' ' || errors::text, '; ') FROM river_job`)
				t.Fatalf("the plan job: %s did not happen within 20s; jobs: %s", what, jobs)
			}
		}
	}
	waitJob("lowering max attempts after attempt 1",
		`WITH u AS (UPDATE river_job SET max_attempts = 2 WHERE kind = 'klbot_plan' AND attempt = 1 RETURNING 1) SELECT count(*) FROM u`)
	waitJob("discarding", `SELECT count(*) FROM river_job WHERE kind = 'klbot_plan' AND state = 'discarded' AND attempt = 2`)
	failed := logs.lines(func(l map[string]any) bool { return l["delivery"] == d.id && l["level"] == "ERROR" })
	if len(failed) != 2 {
		t.Fatalf("%d error log lines for delivery %s, want 2 (one per attempt):\n%s", len(failed), d.id, strings.Join(failed, "\n"))
	}
	mustContain(t, "attempt 1's log line", failed[0], "River retries it")
	mustContain(t, "the last attempt's log line", failed[1], "last attempt (2 of 2)", "River discards it")
}
