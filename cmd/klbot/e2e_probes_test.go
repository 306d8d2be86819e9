package main

// Adversarial end-to-end probes of issue 11's "Done when" claims, written
// by a review (branch wt-review11). A failing test here is a defect the
// review found; a passing one is a regression probe of a claim that held.

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github/githubfake"
)

// gitHubText is every check run (title, summary, text, details URL) of the
// repository and every bot comment on prs, one labelled block each.
func (h *harness) gitHubText(prs ...int) map[string]string {
	out := map[string]string{}
	for _, c := range h.fake.CheckRuns(repo) {
		where := fmt.Sprintf("check run %d %q on %s", c.ID, c.Name, c.HeadSHA[:7])
		out[where] = c.Title + "\n" + c.Summary + "\n" + c.Text
		if c.DetailsURL != "" {
			out[where+": details URL"] = c.DetailsURL
		}
	}
	for _, n := range prs {
		for _, c := range h.fake.Comments(repo, n) {
			if c.UserType == "Bot" {
				out[fmt.Sprintf("comment %d on #%d", c.ID, n)] = c.Body
			}
		}
	}
	return out
}

var anyURLRE = regexp.MustCompile(`https?://[^\s)\]>"'` + "`" + `]+`)

// linksResolve fails the test for any URL klbot posted (check runs, bot
// comments on prs) that is not the html_url of a pull request the fake
// has or a run page under publicURL (which linksOpen fetches; issue 11
// §16: "no link it posts may point at a page that does not exist").
func (h *harness) linksResolve(t *testing.T, prs ...int) {
	t.Helper()
	prURL := regexp.MustCompile("^" + regexp.QuoteMeta(h.fake.URL()) + `/acme/infra/pull/(\d+)$`)
	known := map[int]bool{}
	for _, n := range prs {
		known[n] = true
	}
	for where, body := range h.gitHubText(prs...) {
		for _, u := range anyURLRE.FindAllString(body, -1) {
			if pageLinkRE.MatchString(u) {
				continue
			}
			m := prURL.FindStringSubmatch(u)
			if m == nil {
				t.Errorf("%s links to %s, which is no pull request page", where, u)
				continue
			}
			if n, _ := strconv.Atoi(m[1]); !known[n] {
				t.Errorf("%s links to pull request %s, which this test did not open", where, u)
			}
		}
	}
}

// cliRE matches kl's CLI commands that have a comment command on GitHub
// (issue 11 §9): apply, apply --wait, plan --state, run recover, run
// unfence, run discard.
var cliRE = regexp.MustCompile("`kl (apply [0-9A-Z]{26}|apply --wait|plan --state|run recover|run unfence|run discard)[^`]*`")

// noCLICommands fails the test for GitHub text naming a CLI command where
// a comment exists.
func (h *harness) noCLICommands(t *testing.T, prs ...int) {
	t.Helper()
	for where, body := range h.gitHubText(prs...) {
		for _, m := range cliRE.FindAllString(rendered(body), -1) {
			t.Errorf("%s gives the CLI command %s, not the comment command:\n%s", where, m, body)
		}
	}
}

// TestReview11StrangersChangeNoCheckRun: users without write permission —
// mallory (read), tracy (triage), nobody (no role), and the author of a
// fork pull request — comment every command that needs write permission
// on an applied pull request (1), an unapplied one (2) and a fork's (3),
// press the Apply button of the applied and the unapplied plan, and post
// a 70,000-character command. No check run and no sticky comment may
// change (issue 11 "Done when": a comment from a user without permission
// changes no check run), each gets at most one reply per pull request,
// and every comment gets a reaction.
func TestReview11StrangersChangeNoCheckRun(t *testing.T) {
	h := setup(t)
	h.fake.SetPermission(repo, "tracy", "triage")
	app := "infra/app.tf"
	p1 := pr{1, sha(1), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}), []string{app}}
	p2 := pr{2, sha(2), change(t, [3]string{"infra/db.tf", `"db_main-v1"`, `"db_main-v2"`}), []string{"infra/db.tf"}}
	h.open(t, p1)
	h.open(t, p2)
	p3 := pr{3, sha(3), change(t, [3]string{"infra/dns.tf", `"dns_a-v1"`, `"dns_a-v2"`}), []string{"infra/dns.tf"}}
	h.fake.SetTarball(repo, p3.head, tarball(t, p3.head, p3.files))
	yes := true
	h.fake.AddPR(repo, githubfake.PR{Number: 3, HeadSHA: p3.head, Files: p3.paths, Author: "stranger", HeadRepo: "stranger/infra", Mergeable: &yes, BaseSHA: sha(0)})
	h.prEvent(t, "pull_request.opened.0", p3, false)
	h.settle()
	h.comment(t, 1, "alice", "/kl apply")
	h.settle()
	if c := h.one(t, sha(1), "kl apply · infra"); c.Conclusion != "success" {
		t.Fatalf("PR 1's apply: %s %q", c.Conclusion, c.Title)
	}
	before := h.checksAndSticky(t, 1, 2, 3)
	replies := map[int]int{1: len(h.bodies(1)), 2: len(h.bodies(2)), 3: len(h.bodies(3))}
	runs := h.count(`SELECT count(*) FROM runs`)

	long := "/kl apply " + strings.Repeat("y", 70000)
	commands := []string{long, "/kl apply", "/kl apply -p infra", "/kl plan", "/kl plan -p infra", "/kl recover", "/kl recover -p infra",
		"/kl unfence -- I checked", "/kl unfence -p infra -- I checked", "/kl apply -p nosuch"}
	type sentComment struct {
		n     int
		login string
		id    int64
		body  string
	}
	var all []sentComment
	for _, login := range []string{"mallory", "tracy", "nobody", "stranger"} {
		for _, n := range []int{1, 2, 3} {
			for _, body := range commands {
				_, id := h.comment(t, n, login, body)
				all = append(all, sentComment{n, login, id, body})
			}
		}
	}
	for _, n := range []int{1, 2} {
		h.deliver("check_run", githubfake.RequestedAction(repo, fmt.Sprintf("kl:%d:infra", n), sha(n), "mallory", "kl-apply"))
		h.deliver("check_run", githubfake.RequestedAction(repo, fmt.Sprintf("kl:%d:infra", n), sha(n), "nobody", "kl-apply"))
	}
	h.settle()

	if after := h.checksAndSticky(t, 1, 2, 3); after != before {
		t.Errorf("strangers' comments and button presses changed check runs or sticky comments:\n--- before\n%s\n--- after\n%s", before, after)
	}
	if n := h.count(`SELECT count(*) FROM runs`); n != runs {
		t.Errorf("strangers' comments made %d runs", n-runs)
	}
	for _, n := range []int{1, 2, 3} {
		// At most one reply per user and pull request (4 users; the
		// button presses carry no comment: mallory's and nobody's).
		if got := len(h.bodies(n)) - replies[n]; got > 4 {
			t.Errorf("PR %d: %d new bot comments after strangers' commands, want at most one per user (4)", n, got)
		}
	}
	for _, c := range all {
		if rs := reactionsOf(h, c.id); len(rs) == 0 || slices.Contains(rs, "eyes") {
			t.Errorf("%s's %.30q on #%d: reactions %v, want a refusal (👎 or 😕) and no 👀", c.login, c.body, c.n, rs)
		}
	}
	for _, n := range []int{1, 2, 3} {
		for _, b := range h.bodies(n) {
			if strings.Contains(b, strings.Repeat("y", 100)) || len(b) > 8000 && !strings.Contains(b, "kilolock:sticky:pr ") {
				t.Errorf("PR %d: a reply echoes the 70,000-character comment (%d bytes)", n, len(b))
			}
		}
	}
	h.linksResolve(t, 1, 2, 3)
	h.noCLICommands(t, 1, 2, 3)
}

// appConfigGated is app_config replaced (triggers_replace) reading
// net_vpc, net_subnet_a and net_subnet_b, its creation waiting for gate:
// an apply that holds read reservations on those three while its
// Terraform runs.
func appConfigGated(gate string) string {
	return fmt.Sprintf("resource \"terraform_data\" \"app_config\" {\n"+
		"  input            = \"cfg-v2:${terraform_data.net_vpc.id}:${terraform_data.net_subnet_a.id}:${terraform_data.net_subnet_b.id}\"\n"+
		"  triggers_replace = \"cfg-v2\"\n\n"+
		"  provisioner \"local-exec\" {\n    command = \"for i in $(seq 3000); do [ -e '%s' ] && exit 0; sleep 0.1; done; exit 1\"\n  }\n}\n", gate)
}

const appConfigV1 = "resource \"terraform_data\" \"app_config\" {\n  input = \"cfg-v1:${terraform_data.net_vpc.id}\"\n}\n"

// TestReview11ParkedApplyOutlivesItsPR: PR 1's apply runs Terraform,
// holding read reservations on net_vpc, net_subnet_a and net_subnet_b.
// PR 2 (writes net_vpc), PR 3 (net_subnet_a) and PR 4 (net_subnet_b) are
// applied by alice: each parks, waiting for PR 1's reservations. Then,
// while they wait: PR 2 is pushed (a new head, net_vpc-v3), PR 3 is closed
// without merging, PR 4 gets a "/kl plan", and PR 1 — whose Terraform
// runs — is closed too. Once PR 1's Terraform ends:
//
//   - PR 2's parked apply must not apply the plan of a head the pull
//     request no longer has (docs/klbot.md: an apply is allowed only when
//     "the plan is for the pull request's current head");
//   - PR 3's parked apply must not apply a pull request that was closed
//     unmerged ("the pull request is open");
//   - PR 4's /kl plan runs after its apply, in the check run that said it
//     was queued;
//   - nothing is left in progress, and no job fails.
func TestReview11ParkedApplyOutlivesItsPR(t *testing.T) {
	h := setup(t, "KLBOT_APPLY_WAIT=3m")
	st := openStore(t, h.dsn)
	gate, open := gateOf(t)
	defer open()
	net := "infra/net.tf"
	p1 := pr{1, sha(1), change(t, [3]string{"infra/app.tf", appConfigV1, appConfigGated(gate)}), []string{"infra/app.tf"}}
	p2 := pr{2, sha(2), change(t, [3]string{net, `"net_vpc-v1"`, `"net_vpc-v2"`}), []string{net}}
	p3 := pr{3, sha(3), change(t, [3]string{net, `"net_subnet_a-v1"`, `"net_subnet_a-v2"`}), []string{net}}
	p4 := pr{4, sha(4), change(t, [3]string{net, `"net_subnet_b-v1"`, `"net_subnet_b-v2"`}), []string{net}}
	for _, p := range []pr{p1, p2, p3, p4} {
		h.open(t, p)
		h.settle()
	}
	plans := map[int]string{}
	for _, n := range []int{1, 2, 3, 4} {
		plans[n] = h.planRun(n)
		r, err := st.GetRun(t.Context(), plans[n])
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("PR %d: plan %s writes %v reads %v", n, plans[n], r.Envelope.Footprint.Write, r.Envelope.Footprint.Read)
	}

	h.comment(t, 1, "alice", "/kl apply")
	apply1 := inTerraform(t, st, plans[1], 60*time.Second)
	for _, n := range []int{2, 3, 4} {
		h.comment(t, n, "alice", "/kl apply")
	}
	for _, n := range []int{2, 3, 4} {
		waitUntil(t, 60*time.Second, fmt.Sprintf("PR %d's apply parked", n), func() bool {
			crs := h.checkRuns(sha(n), "kl apply · infra")
			return len(crs) == 1 && strings.HasPrefix(crs[0].Title, "Waiting")
		})
	}
	parked := map[int]string{}
	for _, n := range []int{2, 3, 4} {
		runs := applyRuns(t, st, repo, plans[n])
		if len(runs) != 1 || runs[0].Status != engine.StatusWaiting {
			t.Fatalf("PR %d: apply runs %+v, want one waiting", n, runs)
		}
		parked[n] = runs[0].ID
	}

	// While they wait: a push to PR 2, PR 3 closed unmerged, /kl plan on PR 4.
	p2new := pr{2, sha(12), change(t, [3]string{net, `"net_vpc-v1"`, `"net_vpc-v3"`}), []string{net}}
	h.seed(t, p2new, false)
	h.prEvent(t, "pull_request.synchronize.22", p2new, false)
	h.closeOnFake(p3, false, "")
	closed3, err := githubfake.Patch(githubfake.PullRequestEvent("pull_request.closed.3", repo, 3, p3.head), map[string]any{"pull_request.merged": false})
	if err != nil {
		t.Fatal(err)
	}
	h.deliver("pull_request", closed3)
	_, plan4 := h.comment(t, 4, "alice", "/kl plan")
	// PR 1 is closed while its Terraform runs.
	h.closeOnFake(p1, false, "")
	closed1, err := githubfake.Patch(githubfake.PullRequestEvent("pull_request.closed.3", repo, 1, p1.head), map[string]any{"pull_request.merged": false})
	if err != nil {
		t.Fatal(err)
	}
	h.deliver("pull_request", closed1)
	waitFor(t, 30*time.Second, "the push's plan of PR 2 queued", func() bool {
		crs := h.checkRuns(sha(12), "kl plan · infra")
		return len(crs) == 1 && crs[0].Status == "in_progress"
	})
	time.Sleep(3 * time.Second) // let every job take its first turn
	for _, n := range []int{2, 3} {
		if s := h.runStatus(parked[n]); s != string(engine.StatusWaiting) {
			t.Logf("PR %d's parked apply is %s before PR 1's Terraform ended", n, s)
		}
	}

	open()
	h.settle()
	if s := h.runStatus(apply1); s != string(engine.StatusApplied) {
		t.Errorf("PR 1's apply (closed while Terraform ran): %s, want applied", s)
	}
	head := h.headSerial()
	for n, why := range map[int]string{2: "its pull request was pushed to (new head " + sha(12)[:7] + ") while it waited",
		3: "its pull request was closed without merging while it waited"} {
		r, err := st.GetRun(t.Context(), parked[n])
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("PR %d's parked apply %s: %s, committed %d, end %+v", n, r.ID, r.Status, r.CommittedSerial, r.End)
		if r.Status == engine.StatusApplied {
			t.Errorf("PR %d's parked apply %s applied (committed version %d of head %d) although %s", n, r.ID, r.CommittedSerial, head, why)
		}
	}
	if c := h.shown(t, sha(12), "kl plan · infra"); c.Status != "completed" || c.Conclusion == "" {
		t.Errorf("PR 2's new head: kl plan · infra %s %s %q", c.Status, c.Conclusion, c.Title)
	}
	// PR 4: its apply, then its /kl plan, in the check run that said it was queued.
	if s := h.runStatus(parked[4]); s != string(engine.StatusApplied) {
		t.Errorf("PR 4's apply: %s, want applied", s)
	}
	if rs := h.replies(4, plan4); len(rs) != 0 {
		t.Errorf("PR 4's /kl plan got replies: %v", rs)
	}
	for _, c := range h.fake.CheckRuns(repo) {
		if c.Status != "completed" {
			t.Errorf("check run %d %q on %s is left %s: %q", c.ID, c.Name, c.HeadSHA[:7], c.Status, c.Title)
		}
	}
	if errs := h.jobErrors(t); len(errs) > 0 {
		t.Errorf("jobs failed attempts:\n%s", strings.Join(errs, "\n"))
	}
	for _, n := range []int{1, 2, 3, 4} {
		t.Logf("PR %d's sticky comment:\n%s", n, h.sticky(t, n))
	}
	h.linksResolve(t, 1, 2, 3, 4)
	h.noCLICommands(t, 1, 2, 3, 4)
}

// TestReview11StickyAfterFailedReport: PR 1's apply commits, then GitHub
// answers 502 to every try of editing the sticky comment (the transport's
// four), so the job's first attempt fails after its check run and project
// row were written. The retry must leave the sticky comment telling the
// apply (issue 11: no fault leaves a pull request showing what is not so).
func TestReview11StickyAfterFailedReport(t *testing.T) {
	h := setup(t)
	st := openStore(t, h.dsn)
	gate, open := gateOf(t)
	defer open()
	web := "resource \"terraform_data\" \"app_web\" {\n  input = \"app_web-v1\"\n}\n"
	p1 := pr{1, sha(1), change(t, [3]string{"infra/app.tf", web, gatedResource("app_web", "app_web-v2", gate)}), []string{"infra/app.tf"}}
	h.open(t, p1)
	h.settle()
	plan1 := h.planRun(1)
	h.comment(t, 1, "alice", "/kl apply")
	apply1 := inTerraform(t, st, plan1, 60*time.Second)
	h.fake.Fail(githubfake.Failure{Method: "PATCH", Path: "/repos/acme/infra/issues/comments/*", Status: http.StatusBadGateway, Times: 4})
	open()
	h.settle()
	if got := strings.Join(h.jobOutcome(), ", "); !strings.Contains(got, "klbot_apply completed") {
		t.Fatalf("jobs: %s", got)
	}
	if c := h.one(t, p1.head, "kl apply · infra"); c.Conclusion != "success" {
		t.Errorf("PR 1's apply check run: %s %q, want success", c.Conclusion, c.Title)
	}
	s := h.sticky(t, 1)
	t.Logf("PR 1's sticky comment after the retry:\n%s", s)
	mustContain(t, "PR 1's sticky comment after the apply's retry", s, apply1, "applied")
	mustLack(t, "PR 1's sticky comment after the apply's retry", s, "Apply it with")
}

// TestReview11CreateRetryAdoptsOldCheckRun: a "/kl plan" queued behind a
// running apply creates its "kl plan · infra" check run in progress; GitHub
// answers that create 502 without creating it (a proxy refusing it). The
// client's retry first looks for a check run the failed attempt may have
// made — same name, head and external id — and finds the push's plan check
// run, completed, with the same three. The job then writes in-progress
// phases into a completed check run (GitHub and the fake refuse that) and
// the /kl plan's report lands in the push plan's check run. Expected: the
// /kl plan gets a check run of its own that goes in progress → completed,
// the push's stays as it was, and no job fails an attempt.
func TestReview11CreateRetryAdoptsOldCheckRun(t *testing.T) {
	h := setup(t)
	st := openStore(t, h.dsn)
	gate, open := gateOf(t)
	defer open()
	web := "resource \"terraform_data\" \"app_web\" {\n  input = \"app_web-v1\"\n}\n"
	p1 := pr{1, sha(1), change(t, [3]string{"infra/app.tf", web, gatedResource("app_web", "app_web-v2", gate)}), []string{"infra/app.tf"}}
	h.open(t, p1)
	h.settle()
	push := h.one(t, p1.head, "kl plan · infra")
	plan1 := h.planRun(1)
	h.comment(t, 1, "alice", "/kl apply")
	inTerraform(t, st, plan1, 60*time.Second)
	h.fake.Fail(githubfake.Failure{Method: "POST", Path: "/repos/acme/infra/check-runs", Status: http.StatusBadGateway})
	h.comment(t, 1, "alice", "/kl plan")
	time.Sleep(5 * time.Second) // the /kl plan is queued behind the apply
	open()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if h.count(`SELECT count(*) FROM river_job WHERE kind = 'klbot_plan' AND (state = 'completed' OR attempt >= 3)`) >= 2 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	var jobs string
	h.scan(&jobs, `SELECT string_agg(kind || ' ' || state || ' attempt ' || attempt || ' ' || coalesce(left(errors::text, 600), ''), E'\n' ORDER BY id) FROM river_job WHERE kind NOT IN ('klbot_reconcile', 'klbot_gc')`)
	t.Logf("jobs:\n%s", jobs)
	crs := h.checkRuns(p1.head, "kl plan · infra")
	for _, c := range crs {
		t.Logf("kl plan · infra %d: %s %s %q, %d updates", c.ID, c.Status, c.Conclusion, c.Title, c.Updates)
	}
	if len(crs) != 2 {
		t.Errorf("%d check runs \"kl plan · infra\" on the head, want 2 (the push's and the /kl plan's)", len(crs))
	}
	if got := h.fake.CheckRuns(repo); len(got) > 0 {
		for _, c := range got {
			if c.ID == push.ID && (c.Updates != push.Updates+1 && c.Updates != push.Updates) {
				t.Errorf("the push's plan check run %d was written %d times after the /kl plan (its button taken off at most)", c.ID, c.Updates-push.Updates)
			}
		}
	}
	if n := h.count(`SELECT count(*) FROM river_job WHERE kind = 'klbot_plan' AND errors IS NOT NULL AND cardinality(errors) > 0`); n > 0 {
		t.Errorf("%d plan jobs failed an attempt", n)
	}
	if n := h.count(`SELECT count(*) FROM river_job WHERE kind = 'klbot_plan' AND state <> 'completed'`); n > 0 {
		t.Errorf("%d plan jobs not completed: the /kl plan is wedged", n)
	}
}

// baseApproved is the default branch's kl.yaml of the safety probes: the
// requirement is the project's (not the top level's).
const baseApproved = "version: 1\nprojects:\n  - name: infra\n    dir: infra\n    state: acme/infra\n    apply_requirements: [approved]\n"

// TestReview11SafetyKeyTricks: the default branch's kl.yaml requires
// approval for project infra (state acme/infra). Pull requests try to
// loosen that with tricks of their own kl.yaml: renaming the project, a
// second project on the state, the key at the top level, a YAML merge key
// from an anchor, an alias of an empty list, a flow mapping, the key set
// twice, the key in other case, a list that is no superset. Each must get
// a failing "kl config" check run and no plan (ADR 0040). A null value
// (`apply_requirements: ~`) is the key left out: planned, and the apply
// needs the approval. Then the default branch moves the project to
// apply_trigger: merge, and a pull request setting apply_trigger: comment
// must fail "kl config" too.
func TestReview11SafetyKeyTricks(t *testing.T) {
	h := setup(t)
	h.fake.SetFile(repo, githubfake.DefaultBranch, "kl.yaml", []byte(baseApproved))
	proj := "  - name: infra\n    dir: infra\n    state: acme/infra\n"
	tricks := []struct{ name, yaml string }{
		{"renamed project", "version: 1\nprojects:\n  - name: infra-renamed\n    dir: infra\n    state: acme/infra\n    apply_requirements: []\n"},
		{"second project on the state", "version: 1\nprojects:\n" + proj + "    apply_requirements: [approved]\n" +
			"  - name: infra-b\n    dir: infra\n    state: acme/infra\n    apply_requirements: []\n"},
		{"top level", "version: 1\napply_requirements: []\nprojects:\n" + proj},
		{"merge key", "version: 1\nx-loose: &loose\n  apply_requirements: []\nprojects:\n  - <<: *loose\n    name: infra\n    dir: infra\n    state: acme/infra\n"},
		{"alias of an empty list", "version: 1\nx-none: &none []\nprojects:\n" + proj + "    apply_requirements: *none\n"},
		{"flow mapping", "version: 1\nprojects:\n  - {name: infra, dir: infra, state: acme/infra, apply_requirements: []}\n"},
		{"set twice", "version: 1\nprojects:\n" + proj + "    apply_requirements: [approved]\n    apply_requirements: []\n"},
		{"other case", "version: 1\nprojects:\n" + proj + "    Apply_Requirements: []\n"},
		{"no superset", "version: 1\nprojects:\n" + proj + "    apply_requirements: [mergeable]\n"},
		{"tagged", "version: 1\nprojects:\n" + proj + "    apply_requirements: !!seq []\n"},
	}
	for i, tr := range tricks {
		n := 10 + i
		files := change(t, [3]string{"infra/app.tf", `"app_web-v1"`, fmt.Sprintf(`"app_web-v%d"`, n)})
		files["kl.yaml"] = tr.yaml
		p := pr{n, sha(n), files, []string{"infra/app.tf", "kl.yaml"}}
		h.open(t, p)
		h.settle()
		if crs := h.checkRuns(p.head, "kl plan · infra"); len(crs) != 0 {
			t.Errorf("%s (PR %d): planned, %s %q; want no plan", tr.name, n, crs[0].Conclusion, crs[0].Title)
		}
		if crs := h.checkRuns(p.head, "kl plan · infra-renamed"); len(crs) != 0 {
			t.Errorf("%s (PR %d): planned as infra-renamed, %s %q; want no plan", tr.name, n, crs[0].Conclusion, crs[0].Title)
		}
		cfg := h.checkRuns(p.head, "kl config")
		if len(cfg) != 1 || cfg[0].Conclusion != "failure" {
			t.Errorf("%s (PR %d): %d kl config check runs, want one failure", tr.name, n, len(cfg))
			continue
		}
		t.Logf("%s (PR %d): kl config %q:\n%s", tr.name, n, cfg[0].Title, cfg[0].Summary)
	}
	if got := h.applyRuns(); got != 1 {
		t.Errorf("%d apply runs, want the bootstrap's only", got)
	}

	// A null value is the key left out: the base's [approved].
	files := change(t, [3]string{"infra/db.tf", `"db_main-v1"`, `"db_main-v2"`})
	files["kl.yaml"] = "version: 1\nprojects:\n" + proj + "    apply_requirements: ~\n"
	pNull := pr{30, sha(30), files, []string{"infra/db.tf", "kl.yaml"}}
	h.open(t, pNull)
	h.settle()
	if c := h.one(t, pNull.head, "kl plan · infra"); c.Conclusion != "success" && c.Conclusion != "neutral" {
		t.Fatalf("apply_requirements: ~ (PR 30): plan %s %q", c.Conclusion, c.Title)
	}
	h.comment(t, 30, "alice", "/kl apply")
	h.settle()
	if c := h.one(t, pNull.head, "kl apply · infra"); c.Conclusion != "action_required" || !strings.Contains(c.Summary, "approv") {
		t.Errorf("apply_requirements: ~ (PR 30): apply %s %q, want refused for approval:\n%s", c.Conclusion, c.Title, c.Summary)
	}

	// apply_trigger: merge on the default branch; a PR moves it back to comment.
	h.fake.SetFile(repo, githubfake.DefaultBranch, "kl.yaml", []byte("version: 1\nprojects:\n"+proj+"    apply_trigger: merge\n"))
	files = change(t, [3]string{"infra/dns.tf", `"dns_a-v1"`, `"dns_a-v2"`})
	files["kl.yaml"] = "version: 1\napply_trigger: comment\nprojects:\n" + proj
	pTrig := pr{31, sha(31), files, []string{"infra/dns.tf", "kl.yaml"}}
	h.open(t, pTrig)
	h.settle()
	if cfg := h.checkRuns(pTrig.head, "kl config"); len(cfg) != 1 || cfg[0].Conclusion != "failure" {
		t.Errorf("apply_trigger: comment over the base's merge (PR 31): %d kl config check runs, want one failure", len(cfg))
	}
	runs, serial := h.applyRuns(), h.headSerial()
	h.comment(t, 31, "alice", "/kl apply")
	h.settle()
	if got, s := h.applyRuns(), h.headSerial(); got != runs || s != serial {
		t.Errorf("PR 31's /kl apply: apply runs %d → %d, head %d → %d; want nothing applied", runs, got, serial, s)
	}
	h.linksResolve(t, 30, 31)
	h.noCLICommands(t, 30, 31)
}

// TestReview11CommentCommandsEverywhere: on GitHub, next steps are comment
// commands (issue 11 §9). PR 1 and PR 3 change app_web; PR 1 is applied,
// so PR 3's apply is refused as stale. Then "/kl why" is asked about runs
// of other pull requests and older runs of this one, and "/kl history";
// nothing klbot posts may give kl apply/plan/recover/unfence CLI
// commands, and every link must be a pull request's page. Check runs of
// plans and applies must be created in progress, not completed at once.
func TestReview11CommentCommandsEverywhere(t *testing.T) {
	h := setup(t)
	st := openStore(t, h.dsn)
	app := "infra/app.tf"
	p1 := pr{1, sha(1), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}), []string{app}}
	p3 := pr{3, sha(3), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v3"`}), []string{app}}
	h.open(t, p1)
	h.open(t, p3)
	h.settle()
	plan3 := h.planRun(3)
	h.comment(t, 1, "alice", "/kl apply")
	h.settle()
	h.comment(t, 3, "alice", "/kl apply")
	h.settle()
	refused := lastApply(t, st, plan3)
	if refused.Status != engine.StatusRefused {
		t.Fatalf("PR 3's apply: %s, want refused (stale)", refused.Status)
	}
	// PR 3 pushes: its refused plan is superseded by a newer one.
	p3.head = sha(13)
	h.seed(t, p3, false)
	h.prEvent(t, "pull_request.synchronize.22", p3, false)
	h.settle()
	asks := []struct {
		n    int
		body string
	}{
		{1, "/kl why " + refused.ID}, {1, "/kl why " + plan3}, {1, "/kl why"}, {1, "/kl history"},
		{3, "/kl why " + refused.ID}, {3, "/kl why " + plan3}, {3, "/kl why"}, {3, "/kl history"},
	}
	for _, a := range asks {
		_, id := h.comment(t, a.n, "alice", a.body)
		h.settle()
		t.Logf("PR %d, %q:\n%s", a.n, a.body, h.replyTo(t, a.n, id))
	}
	h.noCLICommands(t, 1, 3)
	h.linksResolve(t, 1, 3)
	for _, r := range h.fake.Requests("POST", "/repos/acme/infra/check-runs") {
		if r.Status != http.StatusCreated {
			continue
		}
		b := string(r.Body)
		if (strings.Contains(b, `"kl plan · infra"`) || strings.Contains(b, `"kl apply · infra"`)) && strings.Contains(b, `"conclusion":"success"`) {
			t.Errorf("a check run was created completed (success), never shown in progress: %.300s", b)
		}
	}
}

// TestReview11ApplyFaults: no fault wedges a pull request (issue 11 "Done
// when"). (a) GitHub answers 502 to every try of the commenter's
// permission and of the pull request when alice's /kl apply starts; (b)
// it answers 502 to every try of completing the apply check run after
// Terraform applied; (c) mallory's /kl apply meets 502s on her
// permission; (d) PR 4 is pushed while its apply runs Terraform. Each
// ends with one apply run per apply, the check runs completed (the one
// shown success), the sticky comment telling the apply, mallory refused
// with no check run, and PR 4's new head planned after its apply.
func TestReview11ApplyFaults(t *testing.T) {
	h := setup(t)
	st := openStore(t, h.dsn)
	gate, open := gateOf(t)
	defer open()
	web := "resource \"terraform_data\" \"app_web\" {\n  input = \"app_web-v1\"\n}\n"
	db := "resource \"terraform_data\" \"db_main\" {\n  input = \"db_main-v1\"\n}\n"
	p1 := pr{1, sha(1), change(t, [3]string{"infra/dns.tf", `"dns_a-v1"`, `"dns_a-v2"`}), []string{"infra/dns.tf"}}
	p2 := pr{2, sha(2), change(t, [3]string{"infra/app.tf", web, gatedResource("app_web", "app_web-v2", gate)}), []string{"infra/app.tf"}}
	p3 := pr{3, sha(3), change(t, [3]string{"infra/dns.tf", `"dns_b-v1"`, `"dns_b-v2"`}), []string{"infra/dns.tf"}}
	p4 := pr{4, sha(4), change(t, [3]string{"infra/db.tf", db, gatedResource("db_main", "db_main-v2", gate)}), []string{"infra/db.tf"}}
	for _, p := range []pr{p1, p2, p3, p4} {
		h.open(t, p)
		h.settle()
	}

	// (a)
	h.fake.Fail(githubfake.Failure{Method: "GET", Path: "/repos/acme/infra/collaborators/alice/permission", Status: http.StatusBadGateway, Times: 4})
	h.fake.Fail(githubfake.Failure{Method: "GET", Path: "/repos/acme/infra/pulls/1", Status: http.StatusBadGateway, Times: 4})
	h.comment(t, 1, "alice", "/kl apply")
	h.settle()
	if c := h.shown(t, p1.head, "kl apply · infra"); c.Conclusion != "success" {
		t.Errorf("(a) PR 1's apply: %s %q", c.Conclusion, c.Title)
	}
	if n := len(applyRuns(t, st, repo, h.planRun(1))); n != 1 {
		t.Errorf("(a) %d apply runs of PR 1's plan, want 1", n)
	}

	// (b)
	plan2 := h.planRun(2)
	h.comment(t, 2, "alice", "/kl apply")
	apply2 := inTerraform(t, st, plan2, 60*time.Second)
	h.fake.Fail(githubfake.Failure{Method: "PATCH", Path: "/repos/acme/infra/check-runs/*", Status: http.StatusBadGateway, Times: 4})
	open()
	h.settle()
	crs := h.checkRuns(p2.head, "kl apply · infra")
	for _, c := range crs {
		t.Logf("(b) kl apply · infra %d: %s %s %q", c.ID, c.Status, c.Conclusion, c.Title)
	}
	if c := h.shown(t, p2.head, "kl apply · infra"); c.Conclusion != "success" {
		t.Errorf("(b) PR 2's apply: %s %q", c.Conclusion, c.Title)
	}
	if len(crs) != 1 {
		t.Errorf("(b) %d apply check runs on PR 2's head, want 1 (the in-progress one, completed by the retry)", len(crs))
	}
	if n := len(applyRuns(t, st, repo, plan2)); n != 1 {
		t.Errorf("(b) %d apply runs of PR 2's plan, want 1", n)
	}
	mustContain(t, "(b) PR 2's sticky comment", h.sticky(t, 2), apply2, "applied")

	// (c)
	before := h.checksAndSticky(t, 1, 2, 3, 4)
	h.fake.Fail(githubfake.Failure{Method: "GET", Path: "/repos/acme/infra/collaborators/mallory/permission", Status: http.StatusBadGateway, Times: 4})
	_, m := h.comment(t, 3, "mallory", "/kl apply")
	h.settle()
	if after := h.checksAndSticky(t, 1, 2, 3, 4); after != before {
		t.Errorf("(c) mallory's /kl apply after 502s changed check runs or sticky comments:\n--- before\n%s\n--- after\n%s", before, after)
	}
	if rs := reactionsOf(h, m); !slices.Contains(rs, "-1") {
		t.Errorf("(c) mallory's /kl apply: reactions %v, want 👎", rs)
	}

	// (d) a push while PR 4's apply runs Terraform (the gate is open now:
	// a second gate holds it).
	gate2, open2 := gateOf(t)
	defer open2()
	p4.files = change(t, [3]string{"infra/db.tf", db, gatedResource("db_main", "db_main-v2", gate2)})
	// PR 4 was planned with the first gate, open already: it would not
	// wait. Push a head gated by the second and plan it.
	p4.head = sha(14)
	h.seed(t, p4, false)
	h.prEvent(t, "pull_request.synchronize.22", p4, false)
	h.settle()
	plan4 := h.planRun(4)
	h.comment(t, 4, "alice", "/kl apply")
	apply4 := inTerraform(t, st, plan4, 60*time.Second)
	p4new := pr{4, sha(24), change(t, [3]string{"infra/db.tf", `"db_main-v1"`, `"db_main-v3"`}), []string{"infra/db.tf"}}
	h.seed(t, p4new, false)
	h.prEvent(t, "pull_request.synchronize.22", p4new, false)
	waitFor(t, 30*time.Second, "PR 4's new head's plan queued", func() bool {
		crs := h.checkRuns(p4new.head, "kl plan · infra")
		return len(crs) == 1 && crs[0].Status == "in_progress"
	})
	open2()
	h.settle()
	if s := h.runStatus(apply4); s != string(engine.StatusApplied) {
		t.Errorf("(d) PR 4's apply: %s", s)
	}
	if c := h.one(t, p4new.head, "kl plan · infra"); c.Status != "completed" || c.Conclusion == "failure" {
		t.Errorf("(d) PR 4's new head: plan %s %s %q", c.Status, c.Conclusion, c.Title)
	}
	if c := h.shown(t, p4.head, "kl apply · infra"); c.Conclusion != "success" {
		t.Errorf("(d) PR 4's apply check run: %s %q", c.Conclusion, c.Title)
	}
	for _, c := range h.fake.CheckRuns(repo) {
		if c.Status != "completed" {
			t.Errorf("check run %d %q on %s is left %s: %q", c.ID, c.Name, c.HeadSHA[:7], c.Status, c.Title)
		}
	}
	t.Logf("PR 4's sticky comment:\n%s", h.sticky(t, 4))
	h.linksResolve(t, 1, 2, 3, 4)
}
