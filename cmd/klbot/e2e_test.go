package main

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/github/githubfake"
	"github.com/kilolock/kilolock/internal/store/pgtest"
)

// The repository of the end-to-end test: kl.yaml with one project "infra"
// (dir infra, state acme/infra) and 20 terraform_data resources in four
// files. app_config reads net_vpc (its input references net_vpc's output).
const klYAML = "version: 1\nprojects:\n  - name: infra\n    dir: infra\n    state: acme/infra\n"

func resources(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "resource \"terraform_data\" %q {\n  input = %q\n}\n\n", n, n+"-v1")
	}
	return b.String()
}

func baseRepo() map[string]string {
	return map[string]string{
		"kl.yaml":      klYAML,
		"README.md":    "# acme infra\n",
		"infra/net.tf": resources("net_vpc", "net_subnet_a", "net_subnet_b", "net_subnet_c", "net_subnet_d"),
		"infra/app.tf": resources("app_web", "app_api", "app_worker", "app_cache", "app_queue") +
			"resource \"terraform_data\" \"app_config\" {\n  input = \"cfg-v1:${terraform_data.net_vpc.id}\"\n}\n",
		"infra/db.tf":  resources("db_main", "db_replica", "db_backup", "db_users", "db_schema"),
		"infra/dns.tf": resources("dns_zone", "dns_a", "dns_b", "dns_c"),
	}
}

// change returns the base repository with old replaced by new in file.
func change(t *testing.T, edits ...[3]string) map[string]string {
	t.Helper()
	files := baseRepo()
	for _, e := range edits {
		body := files[e[0]]
		if !strings.Contains(body, e[1]) {
			t.Fatalf("%s does not hold %q", e[0], e[1])
		}
		files[e[0]] = strings.Replace(body, e[1], e[2], 1)
	}
	return files
}

// pr is one pull request of the scenario.
type pr struct {
	n     int
	head  string
	files map[string]string
	paths []string
}

// setup starts klbot against a new fake (installation 1 on repo; alice may
// write, mallory read) and a fresh schema whose state repo holds
// baseRepo() applied from commit sha(0), the tip of main (every pull
// request's base SHA); extra entries are added to klbot's environment.
func setup(t *testing.T, extra ...string) *harness {
	t.Helper()
	tfBin := terraformBinary(t)
	fake := githubfake.New(t)
	key := fake.NewAppKey(appID)
	fake.AddInstallation(1, appID, repo)
	fake.SetPermission(repo, "alice", "write")
	fake.SetPermission(repo, "mallory", "read")
	fake.SetCompare(repo, githubfake.DefaultBranch, sha(0), githubfake.Comparison{BaseSHA: sha(0)}) // main holds the bootstrap's commit
	dsn := pgtest.DSN(t)
	bootstrap(t, dsn, tfBin, repo, baseRepo())
	return start(t, fake, key, dsn, tfBin, extra...)
}

// seed registers pull request p (a draft when draft is set) and its head's
// tarball on the fake.
func (h *harness) seed(t *testing.T, p pr, draft bool) {
	t.Helper()
	h.fake.SetTarball(repo, p.head, tarball(t, p.head, p.files))
	t2 := true
	h.fake.AddPR(repo, githubfake.PR{Number: p.n, HeadSHA: p.head, Files: p.paths, Author: "alice", Mergeable: &t2, BaseSHA: sha(0), Draft: draft})
}

// prEvent delivers payload name (a pull_request.* example) for p's head,
// its pull_request.draft set to draft, and returns the delivery and the
// status klbot answered (202 enqueued, 200 duplicate).
func (h *harness) prEvent(t *testing.T, name string, p pr, draft bool) (sent, int) {
	t.Helper()
	body, err := githubfake.Patch(githubfake.PullRequestEvent(name, repo, p.n, p.head), map[string]any{"pull_request.draft": draft})
	if err != nil {
		t.Fatal(err)
	}
	d, code, took := h.deliver("pull_request", body)
	t.Logf("%s #%d answered %d in %s", name, p.n, code, took)
	return d, code
}

// open seeds pull request p (ready for review) and delivers its opening.
func (h *harness) open(t *testing.T, p pr) sent {
	t.Helper()
	h.seed(t, p, false)
	d, _ := h.prEvent(t, "pull_request.opened.0", p, false)
	return d
}

// comment posts "/kl …" on pull request n as login (the comment exists on
// the fake, so that klbot's 👀 reaction lands on it).
func (h *harness) comment(t *testing.T, n int, login, body string) (sent, int64) {
	t.Helper()
	id := h.fake.AddComment(repo, n, login, body)
	payload, err := githubfake.Patch(githubfake.IssueCommentOnPR(repo, n, login, body), map[string]any{"comment.id": id})
	if err != nil {
		t.Fatal(err)
	}
	d, _, _ := h.deliver("issue_comment", payload)
	return d, id
}

// checkRuns returns the check runs named name on commit head.
func (h *harness) checkRuns(head, name string) []githubfake.CheckRun {
	var out []githubfake.CheckRun
	for _, c := range h.fake.CheckRuns(repo) {
		if c.HeadSHA == head && c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// one returns the single check run named name on head, failing otherwise.
func (h *harness) one(t *testing.T, head, name string) githubfake.CheckRun {
	t.Helper()
	crs := h.checkRuns(head, name)
	if len(crs) != 1 {
		t.Fatalf("want exactly one check run %q on %s, got %d", name, head[:7], len(crs))
	}
	return crs[0]
}

// shown returns the check run named name on head that GitHub shows — the
// newest: each job makes its own check run once the last one of the name
// is completed (GitHub does not put a completed check run back in
// progress) — failing when there is none, or when an older one of the
// name is still in progress (a job left it behind).
func (h *harness) shown(t *testing.T, head, name string) githubfake.CheckRun {
	t.Helper()
	crs := h.checkRuns(head, name)
	if len(crs) == 0 {
		t.Fatalf("no check run %q on %s", name, head[:7])
	}
	for _, c := range crs[:len(crs)-1] {
		if c.Status != "completed" {
			t.Errorf("an older check run %q on %s (id %d) is still %s: %q", name, head[:7], c.ID, c.Status, c.Title)
		}
	}
	return crs[len(crs)-1]
}

// sticky returns the one sticky comment of pull request n.
func (h *harness) sticky(t *testing.T, n int) string {
	t.Helper()
	var out []string
	for _, c := range h.fake.Comments(repo, n) {
		if strings.Contains(c.Body, "kilolock:sticky:pr ") {
			out = append(out, c.Body)
		}
	}
	if len(out) != 1 {
		t.Fatalf("want exactly one sticky comment on #%d, got %d", n, len(out))
	}
	return out[0]
}

// stickyOnce returns pull request n's sticky comment, rendered, once it
// holds every one of wants, or after 30 s as it is then: klbot updates
// the sticky comment after the check run, so a test that waited for the
// check run may read the comment first.
func (h *harness) stickyOnce(t *testing.T, n int, wants ...string) string {
	t.Helper()
	s := rendered(h.sticky(t, n))
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if all := !slices.ContainsFunc(wants, func(w string) bool { return !strings.Contains(s, w) }); all {
			break
		}
		time.Sleep(200 * time.Millisecond)
		s = rendered(h.sticky(t, n))
	}
	return s
}

func mustContain(t *testing.T, what, body string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if !strings.Contains(body, s) {
			t.Errorf("%s lacks %q:\n%s", what, s, body)
		}
	}
}

// TestEndToEnd drives klbot's run() against the GitHub fake, a fresh
// PostgreSQL schema and real Terraform through one scenario: plans on push
// (with a duplicate push delivery), faults on the way (a 502 after a comment
// was created, a secondary rate limit, expired installation tokens), applies
// of disjoint PRs by comment and by the Apply button, a stale refusal, a
// re-plan refusal, a permission refusal (a reply only), an old-head refusal, a redelivery,
// and a merge-time apply. Every check-run summary and text and comment
// body is compared with its golden file.
func TestEndToEnd(t *testing.T) {
	h := setup(t, "KLBOT_PUBLIC_URL="+publicURL)
	fake := h.fake

	app := "infra/app.tf"
	prs := []pr{
		{1, sha(1), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}), []string{app}},
		{2, sha(2), change(t, [3]string{"infra/db.tf", `"db_main-v1"`, `"db_main-v2"`}), []string{"infra/db.tf"}},
		{3, sha(3), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v3"`}), []string{app}},
		{4, sha(4), change(t, [3]string{app, "cfg-v1:", "cfg-v2:"}), []string{app}},
		{5, sha(5), change(t, [3]string{"infra/net.tf", `"net_vpc-v1"`, `"net_vpc-v2"`}), []string{"infra/net.tf"}},
		{6, sha(6), change(t, [3]string{"infra/dns.tf", `"dns_zone-v1"`, `"dns_zone-v2"`}), []string{"infra/dns.tf"}},
		{8, sha(8), change(t, [3]string{"README.md", "infra", "infra, documented"}), []string{"README.md"}},
	}

	// --- Plans on push, one at a time (overlaps depend on the order). ---
	for _, p := range prs {
		switch p.n {
		case 2: // a 502 after GitHub created the sticky comment: still one comment
			fake.Fail(githubfake.Failure{Method: "POST", Path: "/repos/acme/infra/issues/2/comments", Status: http.StatusBadGateway, AfterHandling: true})
		case 3: // a secondary rate limit with Retry-After on the check run: waits, then succeeds
			fake.FailNext("POST", "/repos/acme/infra/check-runs", http.StatusForbidden, http.Header{"Retry-After": {"1"}})
		}
		h.open(t, p)
		if p.n == 1 {
			// GitHub sends synchronize and ready_for_review for one push:
			// the second delivery of one head is a duplicate plan.
			_, code, _ := h.deliver("pull_request", githubfake.PullRequestEvent("pull_request.ready_for_review.15", repo, 1, p.head))
			if code != http.StatusOK {
				t.Errorf("a second delivery for the same head answered %d, want 200 (duplicate)", code)
			}
		}
		h.settle()
	}
	for _, p := range prs {
		if p.n == 8 {
			h.one(t, p.head, "kl plan") // no project touched
			continue
		}
		h.one(t, p.head, "kl plan · infra")
		h.sticky(t, p.n)
	}
	if got := len(fake.Comments(repo, 2)); got != 1 {
		t.Errorf("PR 2 has %d comments after a 502 on creation, want 1", got)
	}
	var limited, created int
	for _, r := range fake.Requests("POST", "/repos/acme/infra/check-runs") {
		switch r.Status {
		case http.StatusForbidden:
			limited++
		case http.StatusCreated:
			created++
		}
	}
	if limited != 1 {
		t.Errorf("want 1 rate-limited check-run create, got %d", limited)
	}
	if plans := h.count(`SELECT count(*) FROM runs WHERE kind = 'plan'`); plans != 7 { // 6 PR plans + bootstrap
		t.Errorf("want 7 plan runs (one per pushed head + bootstrap), got %d", plans)
	}

	// --- PR 1: /kl apply after every installation token expired. ---
	fake.ExpireTokens()
	tokens := fake.TokensIssued()
	apply1, cid := h.comment(t, 1, "alice", "Ship it.\n/kl apply")
	h.settle()
	if got := fake.TokensIssued(); got != tokens+1 {
		t.Errorf("after the tokens expired klbot got %d new tokens, want exactly 1", got-tokens)
	}
	if rs := fake.Reactions(cid); len(rs) != 1 || rs[0].Content != "eyes" {
		t.Errorf("want one 👀 reaction on the command, got %+v", rs)
	}
	if c := h.one(t, sha(1), "kl apply · infra"); c.Conclusion != "success" {
		t.Errorf("PR 1 apply: conclusion %q, want success", c.Conclusion)
	}

	// --- PR 2: the check run's Apply button (requested_action). ---
	h.deliver("check_run", githubfake.RequestedAction(repo, "kl:2:infra", sha(2), "alice", "kl-apply"))
	h.settle()
	if c := h.one(t, sha(2), "kl apply · infra"); c.Conclusion != "success" {
		t.Errorf("PR 2 apply: conclusion %q, want success", c.Conclusion)
	}
	mustContain(t, "PR 2's sticky comment", h.sticky(t, 2), "independent", "acme/infra#1")
	mustContain(t, "PR 1's sticky comment", h.sticky(t, 1), "independent", "acme/infra#2")

	// --- PR 3 changed app_web too, planned before PR 1 applied: stale. ---
	h.comment(t, 3, "alice", "/kl apply -p infra")
	h.settle()
	c3 := h.one(t, sha(3), "kl apply · infra")
	if c3.Conclusion != "action_required" {
		t.Errorf("PR 3 apply: conclusion %q, want action_required", c3.Conclusion)
	}
	mustContain(t, "PR 3's apply check run", c3.Summary, "stale plan", "acme/infra#1", "version 2")
	mustContain(t, "PR 3's sticky comment", h.sticky(t, 3), "planned target changed", "acme/infra#1")

	// --- PR 5 replaces what PR 4 reads; PR 4's apply re-plans. ---
	h.comment(t, 5, "alice", "/kl apply")
	h.settle()
	mustContain(t, "PR 4's sticky comment before its apply", h.sticky(t, 4), "plan input changed", "acme/infra#5")
	h.comment(t, 4, "alice", "/kl apply")
	h.settle()
	c4 := h.one(t, sha(4), "kl apply · infra")
	if c4.Conclusion != "action_required" {
		t.Errorf("PR 4 apply: conclusion %q, want action_required", c4.Conclusion)
	}
	// The re-plan outcome here: the re-plan against the head would change
	// net_vpc, which PR 4 reads (its configuration predates PR 5): refused
	// as "configuration behind the head" with a replanned marker.
	mustContain(t, "PR 4's apply check run", c4.Summary, "configuration behind the head", "re-plan `", "terraform_data.net_vpc", "acme/infra#5")
	mustContain(t, "PR 4's sticky comment", h.sticky(t, 4), "plan input changed", "acme/infra#5")

	// --- PR 6: a reader may not apply; then a plan for an old head. ---
	// The refusal is mallory's, not the plan's: a reply, no check run and
	// no word in the sticky comment (issue 11 §1).
	_, m6 := h.comment(t, 6, "mallory", "/kl apply")
	h.settle()
	if crs := h.checkRuns(sha(6), "kl apply · infra"); len(crs) != 0 {
		t.Errorf("mallory's refused /kl apply made %d apply check runs on PR 6", len(crs))
	}
	mustContain(t, "the reply to mallory on PR 6", h.replyTo(t, 6, m6), "write permission", "@mallory has read permission")
	if s := h.sticky(t, 6); strings.Contains(s, "mallory") {
		t.Errorf("PR 6's sticky comment tells of mallory's refused comment:\n%s", s)
	}
	t2 := true
	fake.AddPR(repo, githubfake.PR{Number: 6, HeadSHA: sha(16), Files: prs[5].paths, Author: "alice", Mergeable: &t2})
	h.comment(t, 6, "alice", "/kl apply")
	h.settle()
	c16 := h.one(t, sha(16), "kl apply · infra")
	mustContain(t, "PR 6's old-head refusal", c16.Summary, "plan for the current head", sha(6)[:7], sha(16)[:7])

	// --- Redelivering a delivery changes nothing. ---
	before := []int{len(fake.CheckRuns(repo)), len(fake.Comments(repo, 1)), h.count(`SELECT count(*) FROM runs`), len(fake.Reactions(cid))}
	if code, _ := h.redeliver(apply1); code != http.StatusOK {
		t.Errorf("a redelivery answered %d, want 200 (duplicate)", code)
	}
	h.settle()
	after := []int{len(fake.CheckRuns(repo)), len(fake.Comments(repo, 1)), h.count(`SELECT count(*) FROM runs`), len(fake.Reactions(cid))}
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Errorf("a redelivery changed check runs/comments/runs/reactions from %v to %v", before, after)
	}

	// --- PR 7 (kl.yaml apply_trigger: merge) applies when merged. ---
	// PR 7 is based on the main branch after the merges of PRs 1, 2 and 5.
	p7 := pr{7, sha(7), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}, [3]string{"infra/db.tf", `"db_main-v1"`, `"db_main-v2"`},
		[3]string{"infra/net.tf", `"net_vpc-v1"`, `"net_vpc-v2"`}, [3]string{"infra/dns.tf", `"dns_a-v1"`, `"dns_a-v2"`},
		[3]string{"kl.yaml", "    state: acme/infra\n", "    state: acme/infra\n    apply_trigger: merge\n"}), []string{"infra/dns.tf", "kl.yaml"}}
	h.open(t, p7)
	h.settle()
	if acts := h.one(t, sha(7), "kl plan · infra").Actions; len(acts) != 0 {
		t.Errorf("a merge-applied project's plan has an Apply button: %v", acts)
	}
	fake.AddPR(repo, githubfake.PR{Number: 7, HeadSHA: sha(7), Files: p7.paths, Author: "alice", State: "closed", Merged: true})
	h.deliver("pull_request", githubfake.MergedPullRequest(repo, 7, sha(7)))
	h.settle()
	if c := h.one(t, sha(7), "kl apply · infra"); c.Conclusion != "success" {
		t.Errorf("PR 7 merge-time apply: conclusion %q, want success: %s", c.Conclusion, c.Summary)
	}

	// --- Installations are recorded and forgotten, nothing else. ---
	jobs := h.count(`SELECT count(*) FROM river_job WHERE kind NOT IN ('klbot_reconcile', 'klbot_gc')`)
	h.deliver("installation", githubfake.MustPatch("installation.created.1", map[string]any{"installation.id": 77}))
	if n := h.count(`SELECT count(*) FROM klbot_installations WHERE id = 77`); n != 1 {
		t.Errorf("installation created: %d rows, want 1", n)
	}
	h.deliver("installation", githubfake.MustPatch("installation.deleted.0", map[string]any{"installation.id": 77}))
	if n := h.count(`SELECT count(*) FROM klbot_installations WHERE id = 77`); n != 0 {
		t.Errorf("installation deleted: %d rows, want 0", n)
	}
	if n := h.count(`SELECT count(*) FROM river_job WHERE kind NOT IN ('klbot_reconcile', 'klbot_gc')`); n != jobs {
		t.Errorf("installation events enqueued %d jobs, want none", n-jobs)
	}

	// --- /metrics exposes the webhook's and the bot's counters. ---
	res, err := http.Get(h.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	mustContain(t, "/metrics", string(metrics), "klbot_webhook_deliveries_total", `klbot_deliveries_total{event="pull_request",outcome="duplicate"}`,
		`klbot_jobs_total{kind="klbot_apply",result="refused"}`, `klbot_runs_total{kind="apply",outcome="applied"}`, "klbot_job_duration_seconds_bucket")

	// --- Every run page link opens (issue 11 §16, issue 18). ---
	h.linksOpen(t, 1, 2, 3, 4, 5, 6, 7, 8)

	// --- Every check-run summary and comment body against its golden. ---
	label := map[string]string{}
	for _, p := range append(prs, p7) {
		label[p.head] = fmt.Sprintf("pr%d", p.n)
	}
	label[sha(16)] = "pr6-new-head"
	for _, c := range fake.CheckRuns(repo) {
		name := strings.NewReplacer(" · ", "-", " ", "-").Replace(c.Name)
		body := fmt.Sprintf("conclusion: %s\ntitle: %s\nactions: %d\n\n%s", c.Conclusion, c.Title, len(c.Actions), c.Summary)
		if c.Text != "" {
			body += "\n---- text ----\n" + c.Text
		}
		golden(t, fmt.Sprintf("e2e/%s.%s.md", label[c.HeadSHA], name), body)
	}
	for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8} {
		var bodies []string
		for _, c := range fake.Comments(repo, n) {
			if c.UserType == "Bot" {
				bodies = append(bodies, c.Body)
			}
		}
		sort.Strings(bodies)
		for i, b := range bodies {
			golden(t, fmt.Sprintf("e2e/pr%d.comment-%d.md", n, i+1), b)
		}
	}
}
