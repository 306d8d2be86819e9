package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/cli"
	"github.com/kilolock/kilolock/internal/github/githubfake"
)

// Test data of the `kl report github` tests: the repository, its pull
// request and head commit, and the token GitHub Actions would hand a job.
const (
	ghRepo  = "acme/infra"
	ghPR    = 7
	ghToken = "ghs_actions_token"
	ghState = "acme/prod"
)

var ghSHA = strings.Repeat("a1", 20)

// reportConfig is a root module of two terraform_data resources whose
// input comes from var.v (no provider download).
func reportConfig(v string) string {
	return `resource "terraform_data" "web" {
  input = "` + v + `"
}

resource "terraform_data" "db" {
  input = "db"
}
`
}

// ghKit is a kit with a GitHub fake holding ghRepo and its pull request,
// and the Actions environment of a pull_request job pointed at it.
type ghKit struct {
	*kit
	fake    *githubfake.Fake
	cfg     string // the root module directory
	summary string // $GITHUB_STEP_SUMMARY
	output  string // $GITHUB_OUTPUT
	event   string // $GITHUB_EVENT_PATH
	ghEnv   []string
}

// setupGitHub returns a ghKit whose state ghState exists, with the event
// payload event (nil: a pull_request event for ghPR at ghSHA).
func setupGitHub(t *testing.T, event []byte) *ghKit {
	t.Helper()
	k := setup(t)
	g := &ghKit{kit: k, fake: githubfake.New(t), cfg: filepath.Join(k.dir, "cfg"),
		summary: filepath.Join(k.dir, "summary.md"), output: filepath.Join(k.dir, "output.txt"),
		event: filepath.Join(k.dir, "event.json")}
	g.fake.AddRepo(ghRepo)
	g.fake.AddPR(ghRepo, githubfake.PR{Number: ghPR, HeadSHA: ghSHA})
	g.fake.AddToken(ghToken, "github-actions[bot]")
	if event == nil {
		event = githubfake.PullRequestEvent("pull_request.opened.0", ghRepo, ghPR, ghSHA)
	}
	write(t, g.event, string(event))
	write(t, filepath.Join(g.cfg, "main.tf"), reportConfig("v1"))
	k.ok("state", "init", ghState)
	g.ghEnv = append(append([]string(nil), k.env...),
		"GITHUB_ACTIONS=true",
		"GITHUB_API_URL="+g.fake.URL()+"/api/v3",
		"GITHUB_SERVER_URL="+g.fake.URL(),
		"GITHUB_REPOSITORY="+ghRepo,
		"GITHUB_RUN_ID=4242",
		"GITHUB_SHA="+strings.Repeat("0", 40), // the merge commit of a pull_request event: not the head
		"GITHUB_EVENT_NAME=pull_request",
		"GITHUB_EVENT_PATH="+g.event,
		"GITHUB_TOKEN="+ghToken,
		"GITHUB_STEP_SUMMARY="+g.summary,
		"GITHUB_OUTPUT="+g.output,
	)
	return g
}

// plan plans the configuration with --json into a file and returns the
// file and the run id.
func (g *ghKit) plan(name string) (doc, id string) {
	g.t.Helper()
	out := g.ok("plan", "--state", ghState, "-C", g.cfg, "--json")
	return g.save(name, out), runIDOf(g.t, out)
}

// save writes a kl --json document to the temp dir and returns its path.
func (g *ghKit) save(name, doc string) string {
	g.t.Helper()
	p := filepath.Join(g.dir, name+".json")
	write(g.t, p, doc)
	return p
}

func runIDOf(t *testing.T, doc string) string {
	t.Helper()
	var d struct {
		Run struct {
			ID string `json:"id"`
		} `json:"run"`
	}
	if err := json.Unmarshal([]byte(doc), &d); err != nil || d.Run.ID == "" {
		t.Fatalf("no run.id in kl --json output (%v):\n%s", err, doc)
	}
	return d.Run.ID
}

// report runs `kl report github ARGS` in the Actions environment, fresh
// summary and output files each time (as GitHub gives each step), and
// fails unless it exits 0.
func (g *ghKit) report(args ...string) (stdout, stderr string) {
	g.t.Helper()
	for _, p := range []string{g.summary, g.output} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			g.t.Fatal(err)
		}
	}
	r := g.runWith(g.ghEnv, "", append([]string{"report", "github"}, args...)...)
	if r.err != nil {
		g.t.Fatalf("kl report github %s: %v\nstderr:\n%s", strings.Join(args, " "), r.err, r.errOut)
	}
	return r.out, r.errOut
}

// outputs reads the step outputs written to $GITHUB_OUTPUT.
func (g *ghKit) outputs() map[string]string {
	g.t.Helper()
	b, err := os.ReadFile(g.output)
	if err != nil {
		g.t.Fatalf("reading step outputs: %v", err)
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			g.t.Fatalf("step output line %q is not name=value", l)
		}
		m[k] = v
	}
	return m
}

func (g *ghKit) summaryText() string {
	g.t.Helper()
	b, err := os.ReadFile(g.summary)
	if err != nil {
		g.t.Fatalf("reading the job summary: %v", err)
	}
	return string(b)
}

// checkRun returns the only check run named name, failing unless there is
// exactly one.
func (g *ghKit) checkRun(name string) githubfake.CheckRun {
	g.t.Helper()
	var got []githubfake.CheckRun
	for _, c := range g.fake.CheckRuns(ghRepo) {
		if c.Name == name {
			got = append(got, c)
		}
	}
	if len(got) != 1 {
		g.t.Fatalf("%d check runs named %q, want 1: %+v", len(got), name, got)
	}
	return got[0]
}

// comment returns the only comment on ghPR, failing unless there is
// exactly one.
func (g *ghKit) comment() githubfake.Comment {
	g.t.Helper()
	cs := g.fake.Comments(ghRepo, ghPR)
	if len(cs) != 1 {
		g.t.Fatalf("%d comments on #%d, want 1 sticky comment", len(cs), ghPR)
	}
	return cs[0]
}

func mustContain(t *testing.T, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s does not hold %q:\n%s", what, w, got)
		}
	}
}

// TestReportGitHub reports a plan, a second plan, its apply, a refused
// apply and a no-change plan of one state on one pull request: one check
// run per name, created once and then updated; one sticky comment, edited
// in place; the job summary and the step outputs each time.
func TestReportGitHub(t *testing.T) {
	g := setupGitHub(t, nil)
	planName, applyName := "kl plan · "+ghState, "kl apply · "+ghState

	// A first plan: the check run and the comment are created.
	doc1, p1 := g.plan("p1")
	out, _ := g.report("--from-json", doc1)
	mustContain(t, "stdout", out, "run "+p1, "created", "comment on #7: created")
	cr := g.checkRun(planName)
	if cr.HeadSHA != ghSHA || cr.Conclusion != "success" || cr.Updates != 0 || cr.ExternalID != p1 {
		t.Errorf("plan check run = %+v, want created on the PR head %s with success and external id %s", cr, ghSHA, p1)
	}
	if want := g.fake.URL() + "/" + ghRepo + "/actions/runs/4242"; cr.DetailsURL != want {
		t.Errorf("details URL = %q, want the workflow run %q", cr.DetailsURL, want)
	}
	mustContain(t, "check run summary", cr.Summary, "Plan `"+p1+"`", "acme/prod", "kl apply "+p1)
	mustContain(t, "check run title", cr.Title, "planned: 2 to add, 0 to change, 0 to destroy")
	mustContain(t, "job summary", g.summaryText(), "### 📝 Plan `"+p1+"` on **acme/prod**: planned", "<!-- kilolock:summary-end -->")
	if o := g.outputs(); o["run-id"] != p1 || o["conclusion"] != "success" || o["kind"] != "plan" || o["committed-serial"] != "" ||
		o["check-run-url"] == "" || o["comment-url"] == "" {
		t.Errorf("step outputs = %v", o)
	}
	c := g.comment()
	if c.User != "github-actions[bot]" || c.Edits != 0 {
		t.Errorf("comment by %s with %d edits, want github-actions[bot], new", c.User, c.Edits)
	}
	mustContain(t, "comment", c.Body, "<!-- kilolock:sticky:action:acme/prod -->", "Plan `"+p1+"`", "[workflow run 4242]", "for commit "+ghSHA[:12])

	// A second plan (the run id given as an argument): both updated in place.
	write(t, filepath.Join(g.cfg, "main.tf"), reportConfig("v2"))
	_, p2 := g.plan("p2")
	g.report(p2)
	if cr := g.checkRun(planName); cr.Updates != 1 || cr.ExternalID != p2 || !strings.Contains(cr.Summary, "Plan `"+p2+"`") {
		t.Errorf("plan check run after the second plan = %+v, want updated once with %s", cr, p2)
	}
	if c := g.comment(); c.Edits != 1 || !strings.Contains(c.Body, "Plan `"+p2+"`") {
		t.Errorf("comment after the second plan: %d edits, body:\n%s", c.Edits, c.Body)
	}

	// Its apply: an apply check run of its own; the same comment.
	applied := g.save("a2", g.ok("apply", p2, "--json"))
	g.report("--from-json", applied)
	ac := g.checkRun(applyName)
	if ac.Conclusion != "success" || ac.Status != "completed" {
		t.Errorf("apply check run = %+v, want completed with success", ac)
	}
	mustContain(t, "apply check run title", ac.Title, "applied: committed serial 1")
	if o := g.outputs(); o["kind"] != "apply" || o["conclusion"] != "success" || o["committed-serial"] != "1" || o["status"] != "applied" {
		t.Errorf("step outputs after the apply = %v", o)
	}
	if c := g.comment(); c.Edits != 2 || !strings.Contains(c.Body, "Apply `") {
		t.Errorf("comment after the apply: %d edits, body:\n%s", c.Edits, c.Body)
	}
	mustContain(t, "job summary", g.summaryText(), "Apply `", "of plan `"+p2+"`")

	// The first plan's apply is refused (its planned target changed): the
	// apply check run is updated to action_required, the JSON of a refusal
	// read like any other.
	r := g.run("apply", p1, "--json")
	if r.code() != 3 {
		t.Fatalf("kl apply %s: exit code %d (%v), want 3 (refused)", p1, r.code(), r.err)
	}
	g.report("--from-json", g.save("a1", r.out))
	if ac := g.checkRun(applyName); ac.Conclusion != "action_required" || ac.Updates != 1 {
		t.Errorf("apply check run after the refusal = %+v, want updated to action_required", ac)
	}
	if o := g.outputs(); o["conclusion"] != "action_required" || o["status"] != "refused" || o["committed-serial"] != "" {
		t.Errorf("step outputs after the refusal = %v", o)
	}

	// A plan of what was applied changes nothing: neutral.
	_, p3 := g.plan("p3")
	g.report(p3)
	if cr := g.checkRun(planName); cr.Conclusion != "neutral" || cr.Updates != 2 {
		t.Errorf("plan check run of a no-change plan = %+v, want updated to neutral", cr)
	}
	mustContain(t, "plan check run title", g.checkRun(planName).Title, "planned: no changes")
	if n := len(g.fake.CheckRuns(ghRepo)); n != 2 {
		t.Errorf("%d check runs, want 2 (one plan, one apply)", n)
	}
	g.comment()
}

// TestReportGitHubFork: GitHub refuses every write of a fork pull
// request's read-only token (403): the report warns, says why, keeps the
// job summary and the outputs, and exits 0 — unless --strict.
func TestReportGitHubFork(t *testing.T) {
	ev, err := githubfake.Patch(githubfake.PullRequestEvent("pull_request.opened.0", ghRepo, ghPR, ghSHA),
		map[string]any{"pull_request.head.repo.full_name": "mallory/infra"})
	if err != nil {
		t.Fatal(err)
	}
	g := setupGitHub(t, ev)
	doc, id := g.plan("p1")
	deny := func() {
		for _, p := range []string{"/repos/acme/infra/check-runs", "/repos/acme/infra/issues/*/comments"} {
			g.fake.Fail(githubfake.Failure{Method: "POST", Path: p, Status: 403,
				Body: `{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/rest"}`})
		}
	}
	deny()
	out, errOut := g.report("--from-json", doc)
	mustContain(t, "stderr", errOut, "::warning title=kl report github::GitHub refused to write (403)",
		"Resource not accessible by integration", "fork mallory/infra", "read-only GITHUB_TOKEN", "job summary", "--strict",
		// The operation GitHub refused: the comment did not exist, so it
		// was being created, not updated (issue 15 §4).
		`creating check run "kl plan · acme/prod"`, `creating the sticky "action:acme/prod" comment on acme/infra#7`)
	if strings.Contains(errOut, "updating the sticky") {
		t.Errorf("the warning names an update of a comment that was being created:\n%s", errOut)
	}
	if strings.Count(errOut, "::warning") != 1 {
		t.Errorf("want one warning for both refused writes, got:\n%s", errOut)
	}
	if strings.Contains(out, "check run") || strings.Contains(out, "comment on") {
		t.Errorf("stdout claims a write GitHub refused:\n%s", out)
	}
	mustContain(t, "job summary", g.summaryText(), "Plan `"+id+"`")
	if o := g.outputs(); o["run-id"] != id || o["conclusion"] != "success" {
		t.Errorf("step outputs = %v", o)
	}
	if n, m := len(g.fake.CheckRuns(ghRepo)), len(g.fake.Comments(ghRepo, ghPR)); n+m != 0 {
		t.Errorf("%d check runs and %d comments, want none", n, m)
	}

	deny()
	r := g.runWith(g.ghEnv, "", "report", "github", id, "--strict")
	if r.code() != 1 || !strings.Contains(r.err.Error(), "403") || !strings.Contains(r.err.Error(), "fork mallory/infra") {
		t.Errorf("--strict: exit code %d, error %v; want 1 naming the 403 and the fork", r.code(), r.err)
	}

	// An issue_comment event does not say whether the pull request comes
	// from a fork: GitHub's answer for its head says so.
	g.fake.AddPR(ghRepo, githubfake.PR{Number: ghPR, HeadSHA: ghSHA, HeadRepo: "mallory/infra"})
	write(t, g.event, string(githubfake.IssueCommentOnPR(ghRepo, ghPR, "alice", "/kl plan")))
	deny()
	_, errOut = g.report(id)
	mustContain(t, "stderr (issue_comment)", errOut, "fork mallory/infra")
}

// TestReportGitHubTargets: where a report goes — an issue_comment on a
// pull request (its head asked from GitHub), explicit flags over the
// environment, a push without a pull request (no comment).
func TestReportGitHubTargets(t *testing.T) {
	g := setupGitHub(t, githubfake.IssueCommentOnPR(ghRepo, ghPR, "alice", "/kl apply"))
	_, id := g.plan("p1")

	g.report(id)
	if cr := g.checkRun("kl plan · " + ghState); cr.HeadSHA != ghSHA {
		t.Errorf("issue_comment: check run on %s, want the PR head %s asked from GitHub", cr.HeadSHA, ghSHA)
	}
	g.comment()

	other := strings.Repeat("b2", 20)
	g.fake.AddPR(ghRepo, githubfake.PR{Number: 8, HeadSHA: other})
	g.report(id, "--pr", "8", "--check-name", "infra plan", "--summary-file", "")
	if cr := g.checkRun("infra plan"); cr.HeadSHA != other {
		t.Errorf("--pr 8: check run on %s, want #8's head %s", cr.HeadSHA, other)
	}
	if n := len(g.fake.Comments(ghRepo, 8)); n != 1 {
		t.Errorf("--pr 8: %d comments on #8, want 1", n)
	}
	if _, err := os.Stat(g.summary); !os.IsNotExist(err) {
		t.Errorf(`--summary-file "": a summary was written (%v)`, err)
	}

	// --json: what was done, as a document.
	r := g.runWith(g.ghEnv, "", "report", "github", id, "--json")
	var doc struct {
		Schema     string `json:"schema"`
		Run        string `json:"run"`
		Conclusion string `json:"conclusion"`
		CheckRun   *struct {
			Action string `json:"action"`
		} `json:"check_run"`
		Comment *struct {
			Action string `json:"action"`
		} `json:"comment"`
		Warnings []string `json:"warnings"`
	}
	if r.err != nil {
		t.Fatalf("--json: %v", r.err)
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		t.Fatalf("--json: stdout is not one JSON document: %v\n%s", err, r.out)
	}
	if doc.Schema != cli.SchemaReportGitHub || doc.Run != id || doc.Conclusion != "success" || doc.CheckRun == nil ||
		doc.CheckRun.Action != "updated" || doc.Comment == nil || doc.Comment.Action != "unchanged" || len(doc.Warnings) != 0 {
		t.Errorf("--json document = %s", r.out)
	}

	push := strings.Repeat("c3", 20)
	write(t, g.event, `{"ref":"refs/heads/main","after":"`+push+`"}`)
	g.ghEnv = append(g.ghEnv, "GITHUB_EVENT_NAME=push", "GITHUB_SHA="+push)
	out, _ := g.report(id)
	if strings.Contains(out, "comment") {
		t.Errorf("push: a comment was reported without a pull request:\n%s", out)
	}
	var onPush int
	for _, c := range g.fake.CheckRuns(ghRepo) {
		if c.HeadSHA == push {
			onPush++
		}
	}
	if onPush != 1 {
		t.Errorf("push: %d check runs on GITHUB_SHA, want 1", onPush)
	}
}

// TestReportGitHubBadInput: what the command refuses before writing
// anything, each error saying what was being done and why.
func TestReportGitHubBadInput(t *testing.T) {
	g := setupGitHub(t, nil)
	doc, id := g.plan("p1")
	notJSON := g.save("not-json", "plan 01ABC planned\n")
	noRun := g.save("no-run", `{"schema":"kilolock/states/v1","states":[]}`)
	without := func(key string) []string {
		var env []string
		for _, kv := range g.ghEnv {
			if !strings.HasPrefix(kv, key+"=") {
				env = append(env, kv)
			}
		}
		return env
	}
	cases := map[string]struct {
		env  []string
		args []string
		want string
	}{
		"no run":         {args: nil, want: "needs a RUN or --from-json FILE"},
		"run and json":   {args: []string{id, "--from-json", doc}, want: "not both"},
		"not json":       {args: []string{"--from-json", notJSON}, want: "reading the run id from " + notJSON + ": not a kl --json document"},
		"no run in json": {args: []string{"--from-json", noRun}, want: "no run.id in it"},
		"unknown run":    {args: []string{"01NOSUCHRUN0000000000000000"}, want: "01NOSUCHRUN0000000000000000"},
		"no repository":  {env: without("GITHUB_REPOSITORY"), args: []string{id}, want: "no repository: pass --repo"},
		"bad repository": {args: []string{id, "--repo", "acme"}, want: `parsing repository "acme"`},
		"no token":       {env: without("GITHUB_TOKEN"), args: []string{id}, want: "no token in $GITHUB_TOKEN"},
		"other token env": {args: []string{id, "--token-env", "KL_GH_TOKEN"},
			want: "no token in $KL_GH_TOKEN"},
		"negative pr": {args: []string{id, "--pr", "-1"}, want: "--pr -1 is not a pull request number"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			env := c.env
			if env == nil {
				env = g.ghEnv
			}
			r := g.with(t).runWith(env, "", append([]string{"report", "github"}, c.args...)...)
			if r.err == nil || !strings.Contains(r.err.Error(), c.want) {
				t.Errorf("error %v, want one saying %q", r.err, c.want)
			}
		})
	}
	if n, m := len(g.fake.CheckRuns(ghRepo)), len(g.fake.Comments(ghRepo, ghPR)); n+m != 0 {
		t.Errorf("%d check runs and %d comments after refused reports, want none", n, m)
	}
	if _, err := os.Stat(g.summary); !os.IsNotExist(err) {
		t.Errorf("a refused report wrote the job summary (%v)", err)
	}
}

// TestReportGitHubSummaryLimit: the job summary never passes GitHub's
// 1 MiB per step — the report is cut (its summary kept, a note naming
// `kl run show`), and a summary with no room left is a warning, not the
// end of the check run and the comment.
func TestReportGitHubSummaryLimit(t *testing.T) {
	g := setupGitHub(t, nil)
	_, id := g.plan("p1")
	fill := func(n int) {
		t.Helper()
		write(t, g.summary, strings.Repeat("x", n-1)+"\n")
	}
	report := func() (string, result) {
		t.Helper()
		if err := os.Remove(g.output); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		r := g.runWith(g.ghEnv, "", "report", "github", id)
		if r.err != nil {
			t.Fatalf("kl report github: %v\n%s", r.err, r.errOut)
		}
		return g.summaryText(), r
	}

	fill(cli.StepSummaryLimit - 400)
	got, _ := report()
	if len(got) > cli.StepSummaryLimit {
		t.Errorf("job summary is %d bytes, over GitHub's %d", len(got), cli.StepSummaryLimit)
	}
	mustContain(t, "the cut report", got[cli.StepSummaryLimit-400:], "Plan `"+id+"`", "more lines omitted; see `kl run show "+id+"`")

	fill(cli.StepSummaryLimit - 10)
	got, r := report()
	if len(got) != cli.StepSummaryLimit-10 {
		t.Errorf("a full job summary was written to (%d bytes)", len(got))
	}
	mustContain(t, "stderr", r.errOut, "::warning", "no room left in the job summary")
	if n := len(g.fake.CheckRuns(ghRepo)); n != 1 {
		t.Errorf("%d check runs, want 1 despite the full summary", n)
	}
	if o := g.outputs(); o["run-id"] != id {
		t.Errorf("step outputs = %v", o)
	}
}
