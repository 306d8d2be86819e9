package action_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/github/githubfake"
)

// mergeKit is a GitHub fake, a workspace and a SQLite store that the
// action's steps run against for pull requests and for pushes to main.
type mergeKit struct {
	t     *testing.T
	r     *runner
	fake  *githubfake.Fake
	work  string
	temp  string
	store string
	event string
}

const mergeRepo, mergeToken = "acme/infra", "ghs_job_token_merge"

// mergeConfig is a root module of three terraform_data resources whose
// inputs are a, b and c.
func mergeConfig(a, b, c string) string {
	return fmt.Sprintf(`resource "terraform_data" "a" {
  input = %q
}

resource "terraform_data" "b" {
  input = %q
}

resource "terraform_data" "c" {
  input = %q
}
`, a, b, c)
}

func newMergeKit(t *testing.T) *mergeKit {
	t.Helper()
	if testing.Short() {
		t.Skip("builds kl and runs Terraform")
	}
	for _, bin := range []string{"bash", "go", "terraform", "git"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not on PATH", bin)
		}
	}
	actionPath, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := readAction(t)
	root := t.TempDir()
	k := &mergeKit{t: t, fake: githubfake.New(t), work: filepath.Join(root, "workspace"), temp: filepath.Join(root, "runner-temp"),
		store: filepath.Join(root, "store", "kl.db"), event: filepath.Join(root, "event.json")}
	for _, d := range []string{filepath.Join(k.work, "infra"), k.temp, filepath.Dir(k.store)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	k.fake.AddRepo(mergeRepo)
	k.fake.AddToken(mergeToken, "github-actions[bot]")
	k.r = &runner{t: t, action: a, work: k.work, temp: k.temp}
	k.r.github = map[string]string{
		"action_path": actionPath, "action_ref": "", "actor": "octocat", "token": mergeToken,
		"repository": mergeRepo, "workspace": k.work,
		"server_url": k.fake.URL(), "api_url": k.fake.URL() + "/api/v3", "run_id": "9002",
	}
	for _, kv := range os.Environ() {
		key, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(key, "GITHUB_") || strings.HasPrefix(key, "RUNNER_") || strings.HasPrefix(key, "INPUT_") ||
			strings.HasPrefix(key, "ACTIONS_") || strings.HasPrefix(key, "KL_") || strings.HasPrefix(key, "TF_") || key == "CI" {
			continue
		}
		k.r.env = append(k.r.env, kv)
	}
	k.r.env = append(k.r.env, "CI=true", "GITHUB_ACTIONS=true", "RUNNER_OS=Linux", "RUNNER_TEMP="+k.temp,
		"GITHUB_WORKSPACE="+k.work, "GITHUB_REPOSITORY="+mergeRepo, "GITHUB_EVENT_PATH="+k.event, "GITHUB_ACTOR=octocat",
		"GITHUB_API_URL="+k.r.github["api_url"], "GITHUB_SERVER_URL="+k.fake.URL(), "GITHUB_RUN_ID=9002",
		"TF_CLI_CONFIG_FILE=/dev/null", "CHECKPOINT_DISABLE=1")
	return k
}

// setEvent makes the next use of the action run for event name with
// payload, at commit sha (GITHUB_SHA).
func (k *mergeKit) setEvent(name string, payload []byte, sha string) {
	k.t.Helper()
	if err := os.WriteFile(k.event, payload, 0o644); err != nil {
		k.t.Fatal(err)
	}
	k.r.github["event_name"], k.r.github["sha"] = name, sha
	var env []string
	for _, kv := range k.r.env {
		if !strings.HasPrefix(kv, "GITHUB_EVENT_NAME=") && !strings.HasPrefix(kv, "GITHUB_SHA=") {
			env = append(env, kv)
		}
	}
	k.r.env = append(env, "GITHUB_EVENT_NAME="+name, "GITHUB_SHA="+sha)
}

// config writes the workspace's root module.
func (k *mergeKit) config(a, b, c string) {
	k.t.Helper()
	if err := os.WriteFile(filepath.Join(k.work, "infra", "main.tf"), []byte(mergeConfig(a, b, c)), 0o644); err != nil {
		k.t.Fatal(err)
	}
}

// planPR uses the action to plan pull request n at head on its
// pull_request event and returns the plan run.
func (k *mergeKit) planPR(n int, head string) string {
	k.t.Helper()
	k.fake.AddPR(mergeRepo, githubfake.PR{Number: n, HeadSHA: head})
	k.setEvent("pull_request", githubfake.PullRequestEvent("pull_request.synchronize.22", mergeRepo, n, head), strings.Repeat("0f", 20))
	res := k.use(map[string]string{"command": "plan", "state": "acme/prod", "working-directory": "infra", "store": k.store, "create-state": "true"}, 0)
	if res.outputs["run-id"] == "" {
		k.t.Fatalf("plan of #%d: no run-id: %v", n, res.outputs)
	}
	return res.outputs["run-id"]
}

// merged records pull request n, at head, as merged into main by commit
// merge (its merge_commit_sha).
func (k *mergeKit) merged(n int, head, merge string) {
	k.fake.AddPR(mergeRepo, githubfake.PR{Number: n, HeadSHA: head, State: "closed", Merged: true, MergeCommitSHA: merge})
}

// push makes the next use of the action a push to main from before to
// after, whose compare lists commits.
func (k *mergeKit) push(before, after string, commits ...string) {
	k.t.Helper()
	k.fake.SetCompare(mergeRepo, before, after, githubfake.Comparison{Commits: commits})
	payload := fmt.Sprintf(`{"ref":"refs/heads/main","before":%q,"after":%q,"repository":{"full_name":%q}}`, before, after, mergeRepo)
	k.setEvent("push", []byte(payload), after)
}

// use runs the action with inputs and wants exit status code; the store
// is never in the log but in add-mask commands.
func (k *mergeKit) use(inputs map[string]string, code int) run {
	k.t.Helper()
	res := k.r.use(inputs)
	k.t.Logf("action log:\n%s", res.log)
	if res.code != code || (code == 0) != (res.failed == "") {
		k.t.Fatalf("action: step %q failed with exit status %d, want %d", res.failed, res.code, code)
	}
	return res
}

// kl runs the kl the action built against the store.
func (k *mergeKit) kl(args ...string) []byte {
	k.t.Helper()
	cmd := exec.Command(filepath.Join(k.temp, "kilolock", "bin", "kl"), args...)
	cmd.Env = append(append([]string(nil), k.r.env...), "KL_STORE="+k.store)
	out, err := cmd.Output()
	if err != nil {
		k.t.Fatalf("kl %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// runShow is the part of kl run show --json these tests read.
type runShow struct {
	Run struct {
		ID      string `json:"id"`
		Kind    string `json:"kind"`
		Status  string `json:"status"`
		PlanRun string `json:"plan_run"`
	} `json:"run"`
	Envelope *struct {
		PlanDigest     string `json:"plan_digest"`
		PlannedAtMerge bool   `json:"planned_at_merge"`
	} `json:"envelope"`
	Version *struct {
		Provenance struct {
			PlanRun    string `json:"plan_run"`
			PlanDigest string `json:"plan_digest"`
		} `json:"provenance"`
	} `json:"version"`
}

func (k *mergeKit) show(id string) runShow {
	k.t.Helper()
	var s runShow
	if err := json.Unmarshal(k.kl("--json", "run", "show", id), &s); err != nil {
		k.t.Fatal(err)
	}
	return s
}

func sha(seed int) string { return strings.Repeat(fmt.Sprintf("%02x", seed), 20) }

// TestActionAppliesReviewedPlanOnPush (issue 15 §1): on a push to main
// the action applies, for each pull request the push merged, in order,
// its reviewed plan — the plan made on its last commit, the same digest
// — and reports it on the pull request (its head's check run, its sticky
// comment); a stale reviewed plan fails the job; with on-missing-plan:
// plan-and-apply the pushed commit is planned at merge and applied, and
// the summary says loudly that nobody reviewed it; a push that merged two
// pull requests applies both, in the order they merged.
func TestActionAppliesReviewedPlanOnPush(t *testing.T) {
	k := newMergeKit(t)
	apply := map[string]string{"command": "apply", "state": "acme/prod", "working-directory": "infra", "store": k.store}

	// A merge commit: #12's reviewed plan, its digest, applied.
	k.config("v1", "v1", "v1")
	h12, m12 := sha(0x12), sha(0xa2)
	p12 := k.planPR(12, h12)
	k.merged(12, h12, m12)
	k.push(sha(1), m12, h12, m12)
	res := k.use(apply, 0)
	aid := res.outputs["run-id"]
	a := k.show(aid)
	want := k.show(p12).Envelope.PlanDigest
	if a.Run.Kind != "apply" || a.Run.PlanRun != p12 || a.Version == nil || a.Version.Provenance.PlanDigest != want {
		t.Fatalf("the push applied %+v, want #12's reviewed plan %s with digest %s", a, p12, want)
	}
	if o := res.outputs; o["conclusion"] != "success" || o["committed-serial"] != "1" || o["exit-code"] != "0" {
		t.Errorf("outputs = %v", o)
	}
	for _, w := range []string{"Apply `" + aid + "` of plan `" + p12 + "`", "reviewed `" + p12 + "`", "[acme/infra#12](" + k.fake.URL() + "/acme/infra/pull/12)"} {
		if !strings.Contains(res.summary, w) {
			t.Errorf("the job summary does not say %q:\n%s", w, res.summary)
		}
	}
	var applyCheck bool
	for _, c := range k.fake.CheckRuns(mergeRepo) {
		if c.Name == "kl apply · acme/prod" && c.HeadSHA == h12 && c.ExternalID == aid && c.Conclusion == "success" {
			applyCheck = true
		}
	}
	if !applyCheck {
		t.Errorf("no successful kl apply check run on #12's head: %+v", k.fake.CheckRuns(mergeRepo))
	}
	if cs := k.fake.Comments(mergeRepo, 12); len(cs) != 1 || !strings.Contains(cs[0].Body, "Apply `"+aid+"`") || cs[0].Edits != 1 {
		t.Errorf("#12's sticky comment was not updated with the apply: %+v", cs)
	}

	// #13 and #14 both change a; #14 merges first: #13's reviewed plan
	// is stale, and the job fails.
	h13, h14, m13, m14 := sha(0x13), sha(0x14), sha(0xa3), sha(0xa4)
	k.config("v13", "v1", "v1")
	p13 := k.planPR(13, h13)
	k.config("v14", "v1", "v1")
	k.planPR(14, h14)
	k.merged(14, h14, m14)
	k.push(m12, m14, h14, m14)
	k.use(apply, 0)
	k.merged(13, h13, m13)
	k.push(m14, m13, h13, m13)
	k.config("v13", "v1", "v1")
	res = k.use(apply, 3)
	if res.failed != "Exit with kl's status" || !strings.Contains(res.summary, "refused") || !strings.Contains(res.log, "acme/infra#13: its reviewed plan was not applied (exit 3)") {
		t.Errorf("a stale reviewed plan: step %q failed, summary:\n%s", res.failed, res.summary)
	}
	if s := k.show(p13).Run.Status; s != "stale" {
		t.Errorf("#13's plan is %s, want stale", s)
	}
	if strings.Contains(res.summary, "nobody reviewed") {
		t.Errorf("without on-missing-plan, a plan at merge was made:\n%s", res.summary)
	}
	// #13 has merged (kl apply --after-merge): the refusal's own "next"
	// says to plan the base branch at merge, not to re-plan its branch;
	// the summary adds the Action's own way, on-missing-plan.
	if !strings.Contains(res.summary, "### ⛔ acme/infra#13 has merged, and its change is not applied") ||
		!strings.Contains(res.summary, "on-missing-plan: plan-and-apply") ||
		!strings.Contains(res.summary, "--at-merge") || strings.Contains(res.summary, "re-plan on the PR's current head") {
		t.Errorf("the summary does not say that #13 merged unapplied, and what to do:\n%s", res.summary)
	}

	// The same push again, opted in: planned at merge, applied, and said.
	apply["on-missing-plan"] = "plan-and-apply"
	res = k.use(apply, 0)
	fresh := k.show(res.outputs["run-id"])
	fp := k.show(fresh.Run.PlanRun)
	if fresh.Run.Status != "applied" || fp.Envelope == nil || !fp.Envelope.PlannedAtMerge || fresh.Run.PlanRun == p13 {
		t.Fatalf("opted in: applied %+v of plan %+v, want a plan made at merge", fresh.Run, fp.Run)
	}
	for _, w := range []string{"### ⚠ acme/infra#13: applying a plan nobody reviewed", "planned at merge, not reviewed", "applied a plan nobody reviewed"} {
		if !strings.Contains(res.summary, w) {
			t.Errorf("the job summary does not say %q:\n%s", w, res.summary)
		}
	}
	if strings.Contains(res.summary, "reviewed `"+fresh.Run.PlanRun+"`") {
		t.Errorf("the job summary calls the plan made at merge reviewed:\n%s", res.summary)
	}

	// One push, two pull requests (a merge queue): both applied, in the
	// order they merged — #16 before #15, though numbered after it.
	h15, h16, m15, m16 := sha(0x15), sha(0x16), sha(0xa5), sha(0xa6)
	k.config("v13", "v15", "v1")
	p15 := k.planPR(15, h15)
	k.config("v13", "v1", "v16")
	p16 := k.planPR(16, h16)
	k.merged(15, h15, m15)
	k.merged(16, h16, m16)
	k.push(m13, m15, h16, m16, h15, m15)
	k.config("v13", "v15", "v16")
	res = k.use(apply, 0)
	if !strings.Contains(res.log, "this push merged: acme/infra#16 acme/infra#15") {
		t.Errorf("the push's pull requests, in order, are not #16 then #15:\n%s", res.log)
	}
	i16, i15 := strings.Index(res.summary, "of plan `"+p16+"`"), strings.Index(res.summary, "of plan `"+p15+"`")
	if i16 < 0 || i15 < 0 || i16 > i15 {
		t.Errorf("the summary does not tell #16's apply, then #15's:\n%s", res.summary)
	}
	for _, p := range []string{p15, p16} {
		if s := k.show(p).Run.Status; s != "applied" {
			t.Errorf("plan %s is %s, want applied", p, s)
		}
	}
}

// TestActionStoreInput (issue 15 §4): an empty store input — a secret not
// set — fails before anything is built or planned, saying so; a store in
// any DSN form is masked (the whole value and its password alone) before
// any step runs, and its password is in no output but the add-mask
// commands, whether kl reaches the server or not.
func TestActionStoreInput(t *testing.T) {
	k := newMergeKit(t)
	k.config("v1", "v1", "v1")
	k.fake.AddPR(mergeRepo, githubfake.PR{Number: 7, HeadSHA: sha(7)})
	k.setEvent("pull_request", githubfake.PullRequestEvent("pull_request.synchronize.22", mergeRepo, 7, sha(7)), sha(0x0f))

	// Blank is empty too: a secret holding only a newline would be a
	// SQLite file named " " or "\n" in the workspace, created by
	// create-state, a throwaway store.
	for _, blank := range []string{"", " ", "\n", " \t\n"} {
		res := k.r.use(map[string]string{"command": "plan", "state": "acme/prod", "working-directory": "infra", "store": blank, "create-state": "true"})
		if res.failed != "Check inputs" || !strings.Contains(res.log, "::error title=kilolock::input store is empty") {
			t.Errorf("store %q: step %q failed, want Check inputs to say the input is empty:\n%s", blank, res.failed, res.log)
		}
		if strings.Contains(res.log, "kl state init") || strings.Contains(res.log, "── kl plan\n") {
			t.Errorf("store %q went on to kl:\n%s", blank, res.log)
		}
	}

	const password = "st0re-pw-8841"
	for name, store := range map[string]string{
		"key=value":        "host=127.0.0.1 port=1 user=kl dbname=kl connect_timeout=3 password=" + password,
		"key=value quoted": "host=127.0.0.1 port=1 password='" + password + "' dbname=kl connect_timeout=3",
		"URL":              "postgres://kl:" + password + "@127.0.0.1:1/kl?connect_timeout=3",
	} {
		for _, create := range []string{"true", "false"} {
			t.Run(name+" create-state "+create, func(t *testing.T) {
				res := k.r.use(map[string]string{"command": "plan", "state": "acme/prod", "working-directory": "infra", "store": store, "create-state": create})
				if res.code != 1 {
					t.Errorf("an unreachable store: step %q exit %d, want 1:\n%s", res.failed, res.code, res.log)
				}
				masks := map[string]bool{}
				for _, line := range strings.Split(res.log, "\n") {
					if v, ok := strings.CutPrefix(line, "::add-mask::"); ok {
						masks[v] = true
						continue
					}
					if strings.Contains(line, password) {
						t.Errorf("the log shows the store's password outside an add-mask command: %q", line)
					}
				}
				if !masks[store] || !masks[password] {
					t.Errorf("add-mask of the store %v and of its password %v, want both: %v", masks[store], masks[password], masks)
				}
				if strings.Contains(res.summary, password) {
					t.Errorf("the job summary shows the store's password:\n%s", res.summary)
				}
				if !strings.Contains(res.log+res.summary, "PostgreSQL") {
					t.Errorf("the failure does not name a PostgreSQL store:\n%s", res.log)
				}
			})
		}
	}
}

// TestActionPlanAtMergeAfterReviewed (issue 15 §1, "a word must never
// claim more than happened"): with on-missing-plan: plan-and-apply, a push
// that merged #5, which has no reviewed plan, then #6, which has one,
// applies #6's reviewed plan — its digest — before #5 is planned at merge.
// The plan at merge is of the pushed commit, which holds #6's change too:
// made first, it applied #6's reviewed change as a plan nobody reviewed,
// under #5's name, and then refused #6's own plan as stale and said that
// #6 "had no applicable reviewed plan".
func TestActionPlanAtMergeAfterReviewed(t *testing.T) {
	k := newMergeKit(t)
	k.config("v1", "v1", "v1")
	p0 := k.planPR(10, sha(0x10))
	k.use(map[string]string{"command": "apply", "state": "acme/prod", "plan-run": p0, "store": k.store}, 0)

	k.config("v1", "v1", "v6")
	p6 := k.planPR(6, sha(6))
	h5, m5, m6 := sha(0x55), sha(0xa5), sha(0xa6)
	k.merged(5, h5, m5) // never planned at its head
	k.merged(6, sha(6), m6)
	k.push(sha(1), m6, h5, m5, sha(6), m6)
	k.config("v5", "v1", "v6")
	res := k.use(map[string]string{"command": "apply", "state": "acme/prod", "working-directory": "infra", "store": k.store, "on-missing-plan": "plan-and-apply"}, 0)

	if s := k.show(p6).Run.Status; s != "applied" {
		t.Errorf("#6's reviewed plan is %s, want applied", s)
	}
	if strings.Contains(res.summary, "acme/infra#6: applying a plan nobody reviewed") || strings.Contains(res.summary, "### acme/infra#6: no applicable reviewed plan") {
		t.Errorf("the summary says #6, which had an applicable reviewed plan, had none:\n%s", res.summary)
	}
	i6 := strings.Index(res.summary, "of plan `"+p6+"`")
	i5 := strings.Index(res.summary, "### ⚠ acme/infra#5: applying a plan nobody reviewed")
	if i6 < 0 || i5 < 0 || i6 > i5 {
		t.Errorf("the summary does not tell #6's reviewed apply, then #5's plan at merge (%d, %d):\n%s", i6, i5, res.summary)
	}
	fresh := k.show(res.outputs["run-id"])
	if fresh.Run.Status != "applied" || fresh.Run.PlanRun == p6 || !k.show(fresh.Run.PlanRun).Envelope.PlannedAtMerge {
		t.Errorf("the last apply is %+v, want #5's plan at merge applied", fresh.Run)
	}
	if !strings.Contains(res.log, "this push merged: acme/infra#5 acme/infra#6") {
		t.Errorf("the push's pull requests are not #5 then #6:\n%s", res.log)
	}
}

// TestActionAppliesUnchangedIntentReplanOnPush (issue 15 "Tests": "or a
// named re-plan with unchanged intent"): #4 changes b, which reads a; #1
// replaces a (a new id, the same input) and is applied before #4 merges.
// On the push, #4's reviewed plan is re-planned against the new head, its
// intent unchanged, and the re-plan is applied — named as such in the
// job summary, never as the reviewed plan itself.
func TestActionAppliesUnchangedIntentReplanOnPush(t *testing.T) {
	k := newMergeKit(t)
	write := func(b string) {
		t.Helper()
		cfg := strings.Replace(queueConfig("a0", "", "c0"), `-b"`, "-"+b+`"`, 1)
		if err := os.WriteFile(filepath.Join(k.work, "infra", "main.tf"), []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("b0")
	p0 := k.planPR(10, sha(0x10))
	k.use(map[string]string{"command": "apply", "state": "acme/prod", "plan-run": p0, "store": k.store}, 0)
	write("b4")
	p4 := k.planPR(4, sha(4))
	write("b0")
	var doc struct{ Run struct{ ID string } }
	if err := json.Unmarshal(k.kl("--json", "plan", "--state", "acme/prod", "-C", filepath.Join(k.work, "infra"),
		"--pr", mergeRepo+"#1", "--commit", sha(1), "--replace", "terraform_data.a"), &doc); err != nil {
		t.Fatal(err)
	}
	k.kl("apply", doc.Run.ID, "--state", "acme/prod")

	write("b4")
	k.merged(4, sha(4), sha(0xa4))
	k.push(sha(1), sha(0xa4), sha(4), sha(0xa4))
	res := k.use(map[string]string{"command": "apply", "state": "acme/prod", "working-directory": "infra", "store": k.store}, 0)
	a := k.show(res.outputs["run-id"])
	if a.Run.Kind != "apply" || a.Run.Status != "applied" || a.Run.PlanRun != p4 {
		t.Fatalf("the push applied %+v, want #4's reviewed plan %s re-planned", a.Run, p4)
	}
	for _, w := range []string{"plan input changed", "re-planned the merge commit " + sha(0xa4)[:7] + " against head 2, intent unchanged: applied the re-plan",
		"reviewed `" + p4 + "`", "(applied in place of the reviewed plan)"} {
		if !strings.Contains(res.summary, w) {
			t.Errorf("the job summary does not say %q:\n%s", w, res.summary)
		}
	}
	if strings.Contains(res.summary, "nobody reviewed") {
		t.Errorf("an unchanged-intent re-plan is called unreviewed:\n%s", res.summary)
	}
}

// pairConfig is the read-after-write pair's root module: app reads net's
// id (stable when net's input changes in place), other is disjoint.
func pairConfig(net, app, other string) string {
	return fmt.Sprintf(`resource "terraform_data" "net" {
  input = %q
}

resource "terraform_data" "app" {
  input = "%s:${terraform_data.net.id}"
}

resource "terraform_data" "other" {
  input = %q
}
`, net, app, other)
}

// TestActionReplansMergeCommitOnPush (issue 15, ADR 0062): one push
// brings #1 (writes net), #2 (changes app, which reads net: its head
// lacks #1's change) and #3 (writes other). #1's and #3's reviewed plans
// are applied as they are; #2's re-plan plans its own merge commit — not
// its head's configuration, which would revert net ("configuration behind
// the head"), and not the pushed commit, which holds #3 — found in the
// checkout's history (a worktree), and is applied with its intent
// unchanged, the commit named in the summary.
func TestActionReplansMergeCommitOnPush(t *testing.T) {
	k := newMergeKit(t)
	file := filepath.Join(k.work, "infra", "main.tf")
	put := func(net, app, other string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(pairConfig(net, app, other)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("n1", "a1", "o1")
	base := k.planPR(10, sha(0x10))
	k.use(map[string]string{"command": "apply", "state": "acme/prod", "plan-run": base, "store": k.store}, 0)
	put("n2", "a1", "o1")
	k.planPR(1, sha(1))
	put("n1", "a2", "o1")
	p2 := k.planPR(2, sha(2))
	put("n1", "a1", "o2")
	k.planPR(3, sha(3))

	// The checkout: main's history, one merge commit per pull request.
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = k.work
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	commit := func(net, app, other, msg string) string {
		t.Helper()
		put(net, app, other)
		git("add", "-A")
		git("commit", "-q", "-m", msg)
		return git("rev-parse", "HEAD")
	}
	m0 := commit("n1", "a1", "o1", "base")
	m1 := commit("n2", "a1", "o1", "Merge #1")
	m2 := commit("n2", "a2", "o1", "Merge #2")
	m3 := commit("n2", "a2", "o2", "Merge #3")
	k.merged(1, sha(1), m1)
	k.merged(2, sha(2), m2)
	k.merged(3, sha(3), m3)
	k.push(m0, m3, m1, m2, m3)
	res := k.use(map[string]string{"command": "apply", "state": "acme/prod", "working-directory": "infra", "store": k.store}, 0)
	for _, w := range []string{"re-planned the merge commit " + m2[:7] + " against head 2, intent unchanged: applied the re-plan",
		"reviewed `" + p2 + "`", "the merge commit `" + m2[:7] + "` of the reviewed commit `" + sha(2)[:7] + "`"} {
		if !strings.Contains(res.summary, w) {
			t.Errorf("the job summary does not say %q:\n%s", w, res.summary)
		}
	}
	if o := res.outputs; o["committed-serial"] != "4" || o["exit-code"] != "0" {
		t.Errorf("outputs = %v, want version 4 committed (#1, #2, #3)", o)
	}
	_, inputs := headInputs(t, k.kl("state", "pull", "acme/prod"))
	if inputs["net"] != "n2" || !strings.HasPrefix(inputs["app"], "a2:") || inputs["other"] != "o2" {
		t.Errorf("head inputs = %v; want net n2 (#1), app a2 (#2), other o2 (#3)", inputs)
	}
}

// headInputs reads a Terraform state v4 document (kl state pull): its
// serial and each terraform_data resource's input by name.
func headInputs(t *testing.T, doc []byte) (int64, map[string]string) {
	t.Helper()
	var st struct {
		Serial    int64 `json:"serial"`
		Resources []struct {
			Name      string `json:"name"`
			Instances []struct {
				Attributes struct {
					Input struct {
						Value any `json:"value"`
					} `json:"input"` // terraform_data keeps its input's type and value
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(doc, &st); err != nil {
		t.Fatalf("kl state pull: %v", err)
	}
	out := map[string]string{}
	for _, r := range st.Resources {
		if len(r.Instances) == 1 {
			out[r.Name] = fmt.Sprint(r.Instances[0].Attributes.Input.Value)
		}
	}
	return st.Serial, out
}
