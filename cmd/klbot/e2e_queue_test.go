package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/github/githubfake"
)

// TestAggregateCheck (issue 15 §2): every pull request head gets one
// aggregate "kl" check run beside the per-project ones — the check to
// require, since GitHub asks the same names of pull requests and merge
// groups. It passes while each touched project's plan is applicable or
// applied, and when nothing is touched; it fails once another pull
// request's commit makes a plan stale, and for an invalid kl.yaml.
func TestAggregateCheck(t *testing.T) {
	h := setup(t)
	app := "infra/app.tf"
	p1 := pr{1, sha(1), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}), []string{app}}
	p3 := pr{3, sha(3), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v3"`}), []string{app}}
	p8 := pr{8, sha(8), change(t, [3]string{"README.md", "infra", "infra, documented"}), []string{"README.md"}}
	bad := baseRepo()
	bad["kl.yaml"] = "version: 1\nprojects:\n  - name: infra\n    dirr: infra\n    state: acme/infra\n"
	p9 := pr{9, sha(9), bad, []string{"kl.yaml"}}
	for _, p := range []pr{p1, p3, p8, p9} {
		h.open(t, p)
		h.settle()
	}
	for _, p := range []pr{p1, p3} {
		k := h.shown(t, p.head, "kl")
		if k.Conclusion != "success" || k.Title != "1 project ready" {
			t.Errorf("PR %d's kl check: %s %q, want success \"1 project ready\"", p.n, k.Conclusion, k.Title)
		}
		mustContain(t, "the kl check of a planned head", rendered(k.Summary), "| `infra` | `acme/infra` |", "applicable; `/kl apply -p infra` applies it")
	}
	if k := h.shown(t, p8.head, "kl"); k.Conclusion != "success" || k.Title != "No project touched" {
		t.Errorf("PR 8's kl check: %s %q, want success \"No project touched\"", k.Conclusion, k.Title)
	}
	if k := h.shown(t, p9.head, "kl"); k.Conclusion != "failure" {
		t.Errorf("PR 9's kl check (invalid kl.yaml): %s %q, want failure", k.Conclusion, k.Title)
	} else {
		mustContain(t, "the kl check of an invalid kl.yaml", k.Summary, "kl.yaml is invalid", "`kl config`")
	}

	h.comment(t, 1, "alice", "/kl apply")
	h.settle()
	k1 := h.shown(t, p1.head, "kl")
	if k1.Conclusion != "success" {
		t.Errorf("PR 1's kl check after its apply: %s %q, want success", k1.Conclusion, k1.Title)
	}
	mustContain(t, "PR 1's kl check after its apply", rendered(k1.Summary), "applied by run", "version 2")
	k3 := h.shown(t, p3.head, "kl")
	if k3.Conclusion != "failure" {
		t.Errorf("PR 3's kl check after PR 1 changed its planned target: %s %q, want failure", k3.Conclusion, k3.Title)
	}
	mustContain(t, "PR 3's stale kl check", rendered(k3.Summary), "stale: version 2 by acme/infra#1", "/kl plan")
	golden(t, "queue/pr3-stale.kl.md", fmt.Sprintf("conclusion: %s\ntitle: %s\n\n%s", k3.Conclusion, k3.Title, k3.Summary))
	golden(t, "queue/pr9-config.kl.md", fmt.Sprintf("conclusion: %s\ntitle: %s\n\n%s", h.shown(t, p9.head, "kl").Conclusion, h.shown(t, p9.head, "kl").Title, h.shown(t, p9.head, "kl").Summary))
	for _, p := range []pr{p1, p3, p8, p9} {
		if n := len(h.checkRuns(p.head, "kl")); n != 1 {
			t.Errorf("PR %d's head has %d kl check runs, want 1", p.n, n)
		}
	}
}

// klYAMLQueue is klYAML with the merge queue judged and plans applied on
// merge (apply_trigger: merge), on the default branch and in every pull
// request.
const klYAMLQueue = "version: 1\napply_trigger: merge\nmerge_queue: true\nprojects:\n  - name: infra\n    dir: infra\n    state: acme/infra\n"

// queueRepo is change's repository with klYAMLQueue.
func queueRepo(t *testing.T, edits ...[3]string) map[string]string {
	t.Helper()
	files := change(t, edits...)
	files["kl.yaml"] = klYAMLQueue
	return files
}

// setupQueue is setup with klYAMLQueue on the default branch, whose head is
// sha(0).
func setupQueue(t *testing.T, extra ...string) *harness {
	t.Helper()
	h := setup(t, extra...)
	h.fake.SetFile(repo, githubfake.DefaultBranch, "kl.yaml", []byte(klYAMLQueue))
	h.fake.SetBranch(repo, githubfake.DefaultBranch, sha(0))
	return h
}

// queue builds the merge groups GitHub's merge queue makes of prs on the
// default branch at base: group i merges prs[i] onto group i-1 (the first
// onto base), commit heads[i], and is associated with its pull request.
func (h *harness) queue(base string, heads []string, prs ...pr) []githubfake.MergeGroup {
	var out []githubfake.MergeGroup
	parent := base
	for i, p := range prs {
		h.fake.AddCommit(repo, githubfake.Commit{SHA: heads[i], Parents: []string{parent, p.head},
			Message: fmt.Sprintf("Merge pull request #%d", p.n), PRs: []int{p.n}})
		out = append(out, githubfake.MergeGroup{HeadSHA: heads[i], HeadRef: githubfake.QueueRef("main", p.n, p.head),
			BaseSHA: base, BaseRef: "refs/heads/main"})
		parent = heads[i]
	}
	return out
}

// group delivers merge_group action (reason: destroyed's) for g.
func (h *harness) group(t *testing.T, action, reason string, g githubfake.MergeGroup) {
	t.Helper()
	h.deliver("merge_group", githubfake.MergeGroupEvent(repo, action, reason, g))
}

// merged marks pull request p merged on the fake at merge commit mc,
// whose archive holds files, and delivers its close.
func (h *harness) merged(t *testing.T, p pr, mc string, files map[string]string) {
	t.Helper()
	h.fake.SetTarball(repo, mc, tarball(t, mc, files))
	h.fake.AddPR(repo, githubfake.PR{Number: p.n, HeadSHA: p.head, Files: p.paths, Author: "alice", State: "closed", Merged: true, BaseSHA: sha(0), MergeCommitSHA: mc})
	body, err := githubfake.Patch(githubfake.MergedPullRequest(repo, p.n, p.head), map[string]any{"pull_request.merge_commit_sha": mc})
	if err != nil {
		t.Fatal(err)
	}
	h.deliver("pull_request", body)
}

// TestMergeQueue (issue 15 §2): a queue of three pull requests —
// #11 writes net_vpc; #12 changes app_config, which reads net_vpc
// (read-after-write); #13 writes net_vpc too (an overlapping write with
// #11, disjoint from #12). Each merge group's "kl" check run judges its
// pull requests in queue order: #11's and #11+#12's groups pass, the group
// of all three fails naming the pair and the address. When #11+#12 merge
// and #12's close arrives first, #12's merge-time apply waits for #11's
// (queue order) and then obeys the re-plan rule: its reviewed
// configuration predates #11, so it re-plans its merge commit — the
// group's commit, which holds #11's change — against the head #11 made,
// finds its intent unchanged and applies that re-plan (ADR 0062). #13 leaves the queue, is
// planned again with "/kl plan" and its new group passes; a Re-run of that
// group's "kl" check run judges it again.
func TestMergeQueue(t *testing.T) {
	logs := captureLogs(t)
	h := setupQueue(t, "KLBOT_LOG_LEVEL=info")
	defer func() {
		if t.Failed() {
			for _, l := range logs.lines(func(r map[string]any) bool { return r["pr"] == 11.0 || r["pr"] == 12.0 }) {
				t.Log(l)
			}
		}
	}()
	app, net := "infra/app.tf", "infra/net.tf"
	p11 := pr{11, sha(11), queueRepo(t, [3]string{net, `"net_vpc-v1"`, `"net_vpc-v2"`}), []string{net}}
	p12 := pr{12, sha(12), queueRepo(t, [3]string{app, "cfg-v1:", "cfg-v2:"}), []string{app}}
	p13 := pr{13, sha(13), queueRepo(t, [3]string{net, `"net_vpc-v1"`, `"net_vpc-v3"`}), []string{net}}
	for _, p := range []pr{p11, p12, p13} {
		h.open(t, p)
		h.settle()
		if k := h.shown(t, p.head, "kl"); k.Conclusion != "success" {
			t.Fatalf("PR %d's kl check: %s %q, want success", p.n, k.Conclusion, k.Title)
		}
	}
	gs := h.queue(sha(0), []string{sha(51), sha(52), sha(53)}, p11, p12, p13)
	for _, g := range gs {
		h.group(t, "checks_requested", "", g)
	}
	h.settle()
	k1, k2, k3 := h.shown(t, sha(51), "kl"), h.shown(t, sha(52), "kl"), h.shown(t, sha(53), "kl")
	if k1.Conclusion != "success" || k1.Title != "Merge group passes: 1 pull request" {
		t.Errorf("group [#11]: %s %q, want success", k1.Conclusion, k1.Title)
	}
	if k2.Conclusion != "success" {
		t.Errorf("group [#11 #12]: %s %q, want success", k2.Conclusion, k2.Title)
	}
	mustContain(t, "the group [#11 #12]", rendered(k2.Summary), "1. #11", "2. #12",
		"applies on merge after #11 (queue order)", "against #11 ahead: plan input changed: `terraform_data.net_vpc`")
	if k3.Conclusion != "failure" || k3.Title != "Merge group fails: #13" {
		t.Errorf("group [#11 #12 #13]: %s %q, want failure naming #13", k3.Conclusion, k3.Title)
	}
	mustContain(t, "the group [#11 #12 #13]", rendered(k3.Summary),
		"PR #11 ahead in the queue writes `terraform_data.net_vpc`; re-plan after it merges",
		"against #11 ahead: planned target changed: `terraform_data.net_vpc`", "against #12 ahead: independent",
		"0 independent, 0 plan input changed, 0 planned target changed")
	if n := h.applyRuns(); n != 1 {
		t.Errorf("judging the queue made %d apply runs, want only the bootstrap's", n-1)
	}
	for name, k := range map[string]githubfake.CheckRun{"group-11": k1, "group-11-12": k2, "group-11-12-13": k3} {
		golden(t, "queue/"+name+".kl.md", fmt.Sprintf("conclusion: %s\ntitle: %s\n\n%s", k.Conclusion, k.Title, k.Summary))
	}

	// #13 leaves the queue; #11 and #12 merge, #12's close arriving first.
	h.group(t, "destroyed", "dequeued", gs[2])
	h.fake.SetBranch(repo, githubfake.DefaultBranch, sha(52))
	h.group(t, "destroyed", "merged", gs[1])
	h.merged(t, p12, sha(52), queueRepo(t, [3]string{net, `"net_vpc-v1"`, `"net_vpc-v2"`}, [3]string{app, "cfg-v1:", "cfg-v2:"}))
	h.merged(t, p11, sha(51), p11.files)
	h.settle()
	for _, p := range []pr{p11, p12} {
		for _, c := range h.checkRuns(p.head, "kl apply · infra") {
			t.Logf("#%d's kl apply · infra: %s %s %q\n%s", p.n, c.Status, c.Conclusion, c.Title, c.Summary)
		}
	}
	a11, a12 := h.one(t, p11.head, "kl apply · infra"), h.one(t, p12.head, "kl apply · infra")
	if a11.Conclusion != "success" {
		t.Errorf("#11's merge-time apply: %s %q, want success", a11.Conclusion, a11.Title)
	}
	if a12.Conclusion != "success" {
		t.Errorf("#12's merge-time apply: %s %q, want success (its merge commit re-planned after #11)", a12.Conclusion, a12.Title)
	}
	mustContain(t, "#12's merge-time apply", rendered(a12.Summary), "re-planned the merge commit "+sha(52)[:7]+" against head 2",
		"configuration re-planned", "the merge commit `"+sha(52)[:7]+"` of the reviewed commit `"+sha(12)[:7]+"`", "acme/infra#11")
	if s := h.headSerial(); s != 3 {
		t.Errorf("the state's head is serial %d, want 3 (#11's apply, then #12's)", s)
	}

	// #13 is planned again on the new head, queued again, and passes.
	h.comment(t, 13, "alice", "/kl plan")
	h.settle()
	g4 := h.queue(sha(52), []string{sha(54)}, p13)[0]
	h.group(t, "checks_requested", "", g4)
	h.settle()
	k4 := h.shown(t, sha(54), "kl")
	if k4.Conclusion != "success" {
		t.Errorf("#13's new group after /kl plan: %s %q, want success:\n%s", k4.Conclusion, k4.Title, k4.Summary)
	}
	h.deliver("check_run", githubfake.CheckRunEvent("check_run.rerequested.7", repo, "klq:main", sha(54), "alice"))
	h.settle()
	if crs := h.checkRuns(sha(54), "kl"); len(crs) != 2 || crs[1].Conclusion != "success" || crs[1].Summary != k4.Summary {
		t.Errorf("a Re-run of the group's kl check: %d kl check runs, want a second one saying the same", len(crs))
	}
	for _, c := range h.fake.CheckRuns(repo) {
		if c.Status != "completed" {
			t.Errorf("check run %q on %s is still %s", c.Name, c.HeadSHA[:7], c.Status)
		}
	}
}

// TestMergeTimeApplyRefused (issue 15): #11 and #13 both write net_vpc.
// #11 merges and is applied; #13 then merges without its plan being made
// again, so its merge-time apply is refused as stale. Its check run does
// not say "re-plan on the PR's current head" or "/kl plan" — a merged
// pull request can be neither, and klbot plans open ones only — but that
// its change is on the base branch and not applied, with the kl command
// that plans the base branch at merge; the apply is recorded as run after
// the merge, with its merge commit.
func TestMergeTimeApplyRefused(t *testing.T) {
	h := setupQueue(t)
	net := "infra/net.tf"
	p11 := pr{11, sha(11), queueRepo(t, [3]string{net, `"net_vpc-v1"`, `"net_vpc-v2"`}), []string{net}}
	p13 := pr{13, sha(13), queueRepo(t, [3]string{net, `"net_vpc-v1"`, `"net_vpc-v3"`}), []string{net}}
	for _, p := range []pr{p11, p13} {
		h.open(t, p)
		h.settle()
	}
	h.merged(t, p11, sha(51), p11.files)
	h.settle()
	for _, c := range h.checkRuns(p11.head, "kl apply · infra") {
		t.Logf("#11's kl apply · infra: %d %s %s %q\n%s", c.ID, c.Status, c.Conclusion, c.Title, c.Summary)
	}
	if a := h.one(t, p11.head, "kl apply · infra"); a.Conclusion != "success" {
		t.Fatalf("#11's merge-time apply: %s %q, want success", a.Conclusion, a.Title)
	}
	h.merged(t, p13, sha(53), p13.files)
	h.settle()
	a := h.one(t, p13.head, "kl apply · infra")
	if a.Conclusion == "success" {
		t.Fatalf("#13's merge-time apply: %s %q, want it refused (stale: #11 changed net_vpc)", a.Conclusion, a.Title)
	}
	body := rendered(a.Summary + a.Text)
	mustContain(t, "#13's refused merge-time apply", body,
		"stale plan", "its pull request has merged, and its change is not applied",
		`--pr 'acme/infra#13' --commit "$(git rev-parse HEAD)" --at-merge`,
		"at `"+sha(13)+"`, merged as `"+sha(53)[:7]+"`: applied after the merge")
	mustLack(t, "#13's refused merge-time apply", body, "re-plan on the PR's current head", "/kl plan")
	if s := h.headSerial(); s != 2 {
		t.Errorf("the state's head is serial %d, want 2 (#11's apply only)", s)
	}
}

// TestMergeGroupDestroyed (issue 15 §2): a pull request removed from its
// merge group while klbot judges it — the group's "kl" check run is in
// progress, the judging attempt failed on GitHub — leaves nothing pending:
// the destroyed delivery completes the check run (neutral, saying why),
// and the retried judging job judges nothing.
func TestMergeGroupDestroyed(t *testing.T) {
	logs := captureLogs(t)
	h := setupQueue(t, "KLBOT_LOG_LEVEL=info")
	defer func() {
		if t.Failed() {
			for _, l := range logs.lines(func(r map[string]any) bool { return r["job"] == "klbot_queue" }) {
				t.Log(l)
			}
		}
	}()
	net := "infra/net.tf"
	p11 := pr{11, sha(11), queueRepo(t, [3]string{net, `"net_vpc-v1"`, `"net_vpc-v2"`}), []string{net}}
	h.open(t, p11)
	h.settle()
	g := h.queue(sha(0), []string{sha(51)}, p11)[0]
	h.fake.FailNext("GET", "/repos/acme/infra/commits/heads/main", http.StatusConflict, nil)
	h.group(t, "checks_requested", "", g)
	for deadline := time.Now().Add(30 * time.Second); ; {
		if len(h.fake.Requests("GET", "/repos/acme/infra/commits/heads/main")) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("klbot never asked for the base branch's head")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if k := h.shown(t, sha(51), "kl"); k.Status != "in_progress" {
		t.Fatalf("while judging, the group's kl check is %s %q, want in_progress", k.Status, k.Title)
	}
	h.group(t, "destroyed", "dequeued", g)
	h.settle()
	crs := h.checkRuns(sha(51), "kl")
	if len(crs) != 1 || crs[0].Status != "completed" || crs[0].Conclusion != "neutral" || crs[0].Title != "Merge group dequeued before it was judged" {
		t.Fatalf("after destroyed: %d kl check runs, want one completed neutral \"Merge group dequeued before it was judged\": %+v", len(crs), crs)
	}
	mustContain(t, "the destroyed group's kl check", crs[0].Summary, "destroyed the merge group", "(dequeued)")
	golden(t, "queue/group-destroyed.kl.md", fmt.Sprintf("conclusion: %s\ntitle: %s\n\n%s", crs[0].Conclusion, crs[0].Title, crs[0].Summary))
	for _, r := range h.fake.Requests("GET", "/repos/acme/infra/commits/"+sha(51)) {
		if strings.HasSuffix(r.Path, sha(51)) || strings.HasSuffix(r.Path, "/pulls") {
			t.Errorf("the destroyed group was judged after all: GET %s", r.Path)
		}
	}
}
