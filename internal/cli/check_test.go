package cli_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/cli"
	"github.com/kilolock/kilolock/internal/github/githubfake"
)

// checkConfig is a root module of three terraform_data resources; b's
// input is b, or with b "" a's output (so that b's plan reads a).
func checkConfig(a, b, c string) string {
	bIn := fmt.Sprintf("%q", b)
	if b == "" {
		bIn = `"${terraform_data.a.output}-b"`
	}
	return fmt.Sprintf(`resource "terraform_data" "a" {
  input = %q
}

resource "terraform_data" "b" {
  input = %s
}

resource "terraform_data" "c" {
  input = %q
}
`, a, bIn, c)
}

// checkDoc is the part of kilolock/check/v1 these tests read.
type checkDoc struct {
	Schema     string `json:"schema"`
	Kind       string `json:"kind"`
	OK         bool   `json:"ok"`
	Title      string `json:"title"`
	MergeGroup *struct {
		Problem string `json:"problem"`
		PRs     []struct {
			Number   int  `json:"number"`
			Passes   bool `json:"passes"`
			Projects []struct {
				Verdict   string `json:"verdict"`
				SincePlan struct {
					HeadSerial int64 `json:"head_serial"`
				} `json:"since_plan"`
				Conflict *struct {
					PR        int      `json:"pr"`
					Class     string   `json:"class"`
					Addresses []string `json:"addresses"`
				} `json:"conflict"`
			} `json:"projects"`
		} `json:"pull_requests"`
	} `json:"merge_group"`
	PullRequest *struct {
		Problem  string `json:"problem"`
		Projects []struct {
			Verdict string `json:"verdict"`
			PlanRun string `json:"plan_run"`
		} `json:"projects"`
	} `json:"pull_request"`
}

// checkKit is a ghKit whose state holds a, b and c applied from main, and
// a GitHub fake whose main is at commit base.
type checkKit struct {
	*ghKit
	base string
}

func setupCheck(t *testing.T) *checkKit {
	t.Helper()
	g := setupGitHub(t, nil)
	write(t, filepath.Join(g.cfg, "main.tf"), checkConfig("a0", "b0", "c0"))
	out := g.ok("plan", "--state", ghState, "-C", g.cfg, "--json")
	g.ok("apply", runIDOf(t, out), "--state", ghState)
	g.ghEnv = append(g.ghEnv, "GITHUB_WORKSPACE="+g.dir) // projects are named relative to it
	k := &checkKit{ghKit: g, base: strings.Repeat("ba", 20)}
	g.fake.SetBranch(ghRepo, "main", k.base)
	return k
}

// planPR plans pull request n at head with configuration (a, b, c) with
// kl plan --pr, and registers it open on the fake.
func (k *checkKit) planPR(n int, head, a, b, c string) string {
	k.t.Helper()
	write(k.t, filepath.Join(k.cfg, "main.tf"), checkConfig(a, b, c))
	k.fake.AddPR(ghRepo, githubfake.PR{Number: n, HeadSHA: head})
	out := k.ok("plan", "--state", ghState, "-C", k.cfg, "--pr", fmt.Sprintf("%s#%d", ghRepo, n), "--commit", head, "--json")
	return runIDOf(k.t, out)
}

// group makes a merge group of prs on main, one commit each (the first
// on the base), and returns its head commit.
func (k *checkKit) group(prs ...int) (head, ref string) {
	k.t.Helper()
	parent := k.base
	for _, n := range prs {
		sha := fmt.Sprintf("%02x%s", n, strings.Repeat("9", 38))
		k.fake.AddCommit(ghRepo, githubfake.Commit{SHA: sha, Parents: []string{parent}, PRs: []int{n}})
		parent = sha
	}
	return parent, githubfake.QueueRef("main", prs[len(prs)-1], strings.Repeat("ee", 20))
}

// check runs kl github check with env (the kit's GitHub environment plus
// extra) and args, and decodes its --json.
func (k *checkKit) check(event []byte, args ...string) (checkDoc, result) {
	k.t.Helper()
	write(k.t, k.event, string(event))
	r := k.runWith(k.ghEnv, "", append([]string{"github", "check", "--json"}, args...)...)
	if !strings.HasPrefix(r.out, "{\n  \"schema\": \"kilolock/check/v1\",") {
		k.t.Errorf("kl github check --json does not open with its schema:\n%s", r.out)
	}
	var doc checkDoc
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		k.t.Fatalf("kl github check --json: %v\nstdout:\n%s\nstderr:\n%s", err, r.out, r.errOut)
	}
	return doc, r
}

// TestCheckMergeGroup (issue 15 §2, ADR 0060): kl github check on a
// merge_group event finds the group's pull requests from GitHub (first
// parents, the commit→PR lookup) and judges their plans from the store in
// queue order: a disjoint plan passes; one writing what a plan ahead
// writes fails naming the pair; one reading what a plan ahead writes
// passes as read-after-write (its apply on merge re-plans) and fails with
// --strict-since-plan, naming the pair; exit 3 on failure.
func TestCheckMergeGroup(t *testing.T) {
	k := setupCheck(t)
	h1, h2, h3, h4 := strings.Repeat("a1", 20), strings.Repeat("a2", 20), strings.Repeat("a3", 20), strings.Repeat("a4", 20)
	k.planPR(1, h1, "a1", "b0", "c0") // writes a
	k.planPR(2, h2, "a0", "b0", "c2") // writes c: disjoint
	k.planPR(3, h3, "a3", "b0", "c0") // writes a too
	k.planPR(4, h4, "a0", "", "c0")   // writes b, which reads a

	head, ref := k.group(1, 2, 3)
	ev := githubfake.MergeGroupEvent(ghRepo, "checks_requested", "", githubfake.MergeGroup{HeadSHA: head, HeadRef: ref, BaseSHA: k.base, BaseRef: "refs/heads/main"})
	doc, r := k.check(ev)
	if ee := cli.ExitCode(r.err); ee != 3 {
		t.Fatalf("group 1, 2, 3: exit %d (%v), want 3", ee, r.err)
	}
	if doc.Schema != "kilolock/check/v1" || doc.Kind != "merge-group" || doc.OK || doc.MergeGroup == nil {
		t.Fatalf("group 1, 2, 3: %+v", doc)
	}
	g := doc.MergeGroup
	if len(g.PRs) != 3 || g.PRs[0].Number != 1 || g.PRs[1].Number != 2 || g.PRs[2].Number != 3 {
		t.Fatalf("group 1, 2, 3: pull requests %+v, want #1, #2, #3 in queue order", g.PRs)
	}
	for i, want := range []string{"independent", "independent", "write-conflict"} {
		if len(g.PRs[i].Projects) != 1 || g.PRs[i].Projects[0].Verdict != want {
			t.Fatalf("#%d: %+v, want one project %s", i+1, g.PRs[i].Projects, want)
		}
	}
	if c := g.PRs[2].Projects[0].Conflict; c == nil || c.PR != 1 || c.Class != "write-changed" || strings.Join(c.Addresses, ",") != "terraform_data.a" {
		t.Fatalf("#3's conflict %+v, want #1 writing terraform_data.a", c)
	}
	if g.PRs[0].Projects[0].SincePlan.HeadSerial == 0 {
		t.Errorf("#1: since-plan head serial 0, want the state's head")
	}
	if doc.Title != "Merge group fails: #3" {
		t.Errorf("title %q", doc.Title)
	}
	// Text: the Markdown of the job summary names the pair.
	rt := k.runWith(k.ghEnv, "", "github", "check")
	if !strings.Contains(rt.out, "PR #1 ahead in the queue writes `terraform_data.a`; re-plan after it merges") ||
		!strings.Contains(rt.out, "independent, 0 plan input changed, 0 planned target changed") || strings.Contains(rt.out, "/kl") {
		t.Errorf("kl github check's text does not name the pair, the since-plan classes, or names /kl comments:\n%s", rt.out)
	}

	head, ref = k.group(1, 4)
	ev = githubfake.MergeGroupEvent(ghRepo, "checks_requested", "", githubfake.MergeGroup{HeadSHA: head, HeadRef: ref, BaseSHA: k.base, BaseRef: "refs/heads/main"})
	doc, r = k.check(ev)
	if r.err != nil || !doc.OK || doc.MergeGroup.PRs[1].Projects[0].Verdict != "read-after-write" {
		t.Fatalf("group 1, 4: %v, %+v; want it to pass, #4 read-after-write", r.err, doc.MergeGroup)
	}
	doc, r = k.check(ev, "--strict-since-plan")
	p4 := doc.MergeGroup.PRs[1].Projects[0]
	if cli.ExitCode(r.err) != 3 || doc.OK || p4.Verdict != "read-conflict" || p4.Conflict == nil || p4.Conflict.PR != 1 || p4.Conflict.Class != "read-changed" {
		t.Fatalf("group 1, 4, strict: %v, %+v; want #4 to fail reading what #1 writes", r.err, p4)
	}

	// Disjoint alone passes; a destroyed group judges nothing.
	head, ref = k.group(1, 2)
	doc, r = k.check(githubfake.MergeGroupEvent(ghRepo, "checks_requested", "", githubfake.MergeGroup{HeadSHA: head, HeadRef: ref, BaseSHA: k.base, BaseRef: "refs/heads/main"}))
	if r.err != nil || !doc.OK || doc.Title != "Merge group passes: 2 pull requests" {
		t.Fatalf("group 1, 2: %v, %+v", r.err, doc)
	}
	// Plans applied before merging, not on merge: an open plan fails (the
	// merge would leave it unapplied), and writes nothing for #2.
	doc, r = k.check(githubfake.MergeGroupEvent(ghRepo, "checks_requested", "", githubfake.MergeGroup{HeadSHA: head, HeadRef: ref, BaseSHA: k.base, BaseRef: "refs/heads/main"}), "--applies-on-merge=false")
	if cli.ExitCode(r.err) != 3 || doc.OK || doc.MergeGroup.PRs[0].Projects[0].Verdict != "not-applied" || doc.MergeGroup.PRs[1].Projects[0].Conflict != nil {
		t.Fatalf("group 1, 2, --applies-on-merge=false: %v, %+v", r.err, doc.MergeGroup)
	}
	rt = k.runWith(k.ghEnv, "", "github", "check", "--applies-on-merge=false")
	if !strings.Contains(rt.out, "⛔ not applied, and this check was told plans do not apply on merge (`applies-on-merge: false`)") {
		t.Errorf("--applies-on-merge=false: the text does not say why an open plan fails:\n%s", rt.out)
	}
	doc, r = k.check(githubfake.MergeGroupEvent(ghRepo, "destroyed", "dequeued", githubfake.MergeGroup{HeadSHA: head, HeadRef: ref, BaseSHA: k.base, BaseRef: "refs/heads/main"}))
	if r.err != nil || !doc.OK || !strings.Contains(doc.Title, "dequeued") {
		t.Fatalf("destroyed: %v, %+v", r.err, doc)
	}
	// A group whose commits GitHub does not have fails, not judged.
	doc, r = k.check(nil, "--head", strings.Repeat("77", 20), "--base", "main")
	if cli.ExitCode(r.err) != 3 || doc.MergeGroup == nil || !strings.Contains(doc.MergeGroup.Problem, "GitHub has no commit `7777777`") {
		t.Fatalf("unknown head: %v, %+v", r.err, doc.MergeGroup)
	}
}

// TestCheckPullRequest (issue 15 §2): on a pull_request event kl github
// check passes while the newest plan of each project of the head is
// applicable or applied; a plan made stale by an apply of another pull
// request fails it; a head with no plan in the store fails.
func TestCheckPullRequest(t *testing.T) {
	k := setupCheck(t)
	h1, h2 := strings.Repeat("a1", 20), strings.Repeat("a2", 20)
	run1 := k.planPR(1, h1, "a1", "b0", "c0")
	run2 := k.planPR(2, h2, "a2", "b0", "c0")
	doc, r := k.check(githubfake.PullRequestEvent("pull_request.opened.0", ghRepo, 1, h1))
	if r.err != nil || !doc.OK || doc.Kind != "pull-request" || len(doc.PullRequest.Projects) != 1 ||
		doc.PullRequest.Projects[0].Verdict != "applicable" || doc.PullRequest.Projects[0].PlanRun != run1 {
		t.Fatalf("#1 planned: %v, %+v", r.err, doc.PullRequest)
	}
	k.ok("apply", run2, "--state", ghState)
	doc, r = k.check(githubfake.PullRequestEvent("pull_request.opened.0", ghRepo, 2, h2))
	if r.err != nil || !doc.OK || doc.PullRequest.Projects[0].Verdict != "applied" {
		t.Fatalf("#2 applied: %v, %+v", r.err, doc.PullRequest)
	}
	doc, r = k.check(githubfake.PullRequestEvent("pull_request.opened.0", ghRepo, 1, h1))
	if cli.ExitCode(r.err) != 3 || doc.OK || doc.PullRequest.Projects[0].Verdict != "stale" || doc.Title != "Not applicable: cfg" {
		t.Fatalf("#1 after #2's apply: %v, %+v (%q), want stale", r.err, doc.PullRequest, doc.Title)
	}
	doc, r = k.check(githubfake.PullRequestEvent("pull_request.opened.0", ghRepo, 1, strings.Repeat("a9", 20)))
	if cli.ExitCode(r.err) != 3 || doc.OK || !strings.Contains(doc.PullRequest.Problem, "no plan") {
		t.Fatalf("#1 at an unplanned head: %v, %+v", r.err, doc.PullRequest)
	}
}
