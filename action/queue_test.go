package action_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/github/githubfake"
)

// queueConfig is mergeConfig, except that with b "" the input of b is a's
// output: b's plan then reads terraform_data.a.
func queueConfig(a, b, c string) string {
	if b != "" {
		return mergeConfig(a, b, c)
	}
	return strings.Replace(mergeConfig(a, "B", c), `input = "B"`, `input = "${terraform_data.a.output}-b"`, 1)
}

// group makes a merge group of prs on main (one commit each, the first on
// base) and the next use of the action its merge_group event (action
// checks_requested or destroyed with reason).
func (k *mergeKit) group(base, action, reason string, prs ...int) {
	k.t.Helper()
	parent := base
	for _, n := range prs {
		c := fmt.Sprintf("%02x%s", n, strings.Repeat("9", 38))
		k.fake.AddCommit(mergeRepo, githubfake.Commit{SHA: c, Parents: []string{parent}, PRs: []int{n}})
		parent = c
	}
	last := prs[len(prs)-1]
	g := githubfake.MergeGroup{HeadSHA: parent, HeadRef: githubfake.QueueRef("main", last, sha(last)), BaseSHA: base, BaseRef: "refs/heads/main"}
	k.setEvent("merge_group", githubfake.MergeGroupEvent(mergeRepo, action, reason, g), parent)
}

// TestActionMergeQueue (issue 15 §2, ADR 0060): command check on a
// merge_group event gives the kl verdict of the group from the shared
// store, as klbot does: its pull requests found from GitHub's fake (first
// parents, the commit→PR lookup), their reviewed plans — real Terraform
// plans made by the action on each pull request — judged in queue order.
// A disjoint pair passes; a pull request writing what one ahead writes
// fails the job naming the pair; one reading what one ahead writes passes
// when the apply on push re-plans it, and fails naming the pair with
// strict-since-plan; the job summary shows each pull request's since-plan
// classes. On pull_request, check passes for an applicable plan of the
// head and fails for a head with no plan.
func TestActionMergeQueue(t *testing.T) {
	k := newMergeKit(t)
	write := func(a, b, c string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(k.work, "infra", "main.tf"), []byte(queueConfig(a, b, c)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// main: a, b and c applied.
	write("a0", "b0", "c0")
	p0 := k.planPR(10, sha(0x10))
	k.use(map[string]string{"command": "apply", "state": "acme/prod", "plan-run": p0, "store": k.store}, 0)

	write("a1", "b0", "c0") // #1 writes a
	k.planPR(1, sha(1))
	write("a0", "b0", "c2") // #2 writes c: disjoint
	k.planPR(2, sha(2))
	write("a3", "b0", "c0") // #3 writes a too
	k.planPR(3, sha(3))
	write("a0", "", "c0") // #4 writes b, which reads a
	k.planPR(4, sha(4))

	base := sha(0xba)
	k.fake.SetBranch(mergeRepo, "main", base)
	check := map[string]string{"command": "check", "store": k.store}

	k.group(base, "checks_requested", "", 1, 2, 3)
	res := k.use(check, 3)
	if res.failed != "Exit with kl's status" || res.outputs["conclusion"] != "failure" {
		t.Errorf("group #1 #2 #3: failed step %q, outputs %v", res.failed, res.outputs)
	}
	for _, w := range []string{
		"Merge group fails: #3",
		"1. #1 at `0101010`", "2. #2 at `0202020`", "3. #3 at `0303030`",
		"⛔ PR #1 ahead in the queue writes `terraform_data.a`; re-plan after it merges",
		"since its plan (serial 1 → head 1): 0 independent, 0 plan input changed, 0 planned target changed",
		"against #1 ahead: independent",
	} {
		if !strings.Contains(res.summary, w) {
			t.Errorf("group #1 #2 #3: the job summary does not say %q:\n%s", w, res.summary)
		}
	}
	if strings.Contains(res.summary, "/kl ") || strings.Contains(res.summary, "klbot") {
		t.Errorf("the job summary names klbot or its /kl comments, which an Action user does not have:\n%s", res.summary)
	}
	if !strings.Contains(res.log, "::error title=kilolock::kl check fails: Merge group fails: #3") {
		t.Errorf("the log has no error naming the failing pull request:\n%s", res.log)
	}

	k.group(base, "checks_requested", "", 1, 2)
	res = k.use(check, 0)
	if !strings.Contains(res.summary, "Merge group passes: 2 pull requests") || res.outputs["conclusion"] != "success" {
		t.Errorf("group #1 #2: outputs %v, summary:\n%s", res.outputs, res.summary)
	}

	k.group(base, "checks_requested", "", 1, 4)
	res = k.use(check, 0)
	if !strings.Contains(res.summary, "✅ applies on merge after #1 (queue order); it reads what #1 writes") {
		t.Errorf("group #1 #4: #4's read-after-write is not explained:\n%s", res.summary)
	}
	res = k.use(map[string]string{"command": "check", "store": k.store, "strict-since-plan": "true"}, 3)
	if !strings.Contains(res.summary, "⛔ PR #1 ahead in the queue writes `terraform_data.a`, which this plan reads; re-plan after it merges") {
		t.Errorf("group #1 #4, strict-since-plan: the summary does not name the pair:\n%s", res.summary)
	}

	k.group(base, "destroyed", "dequeued", 1, 4)
	res = k.use(check, 0)
	if !strings.Contains(res.summary, "Merge group dequeued before it was judged") {
		t.Errorf("destroyed group: summary:\n%s", res.summary)
	}

	// The pull request's head: #2's plan is applicable; a head of #2 with
	// no plan fails.
	k.setEvent("pull_request", githubfake.PullRequestEvent("pull_request.synchronize.22", mergeRepo, 2, sha(2)), strings.Repeat("0f", 20))
	res = k.use(check, 0)
	if !strings.Contains(res.summary, "1 project ready") || !strings.Contains(res.summary, "applicable; applied when the pull request merges") {
		t.Errorf("#2's head: summary:\n%s", res.summary)
	}
	k.setEvent("pull_request", githubfake.PullRequestEvent("pull_request.synchronize.22", mergeRepo, 2, sha(0x22)), strings.Repeat("0f", 20))
	res = k.use(check, 3)
	if !strings.Contains(res.summary, "Not planned: the store holds no plan of it") {
		t.Errorf("#2 at an unplanned head: summary:\n%s", res.summary)
	}

	// check runs on merge_group and pull_request only.
	k.push(sha(1), sha(2), sha(2))
	res = k.use(check, 1)
	if res.failed != "Check inputs" || !strings.Contains(res.log, "command check runs on merge_group") {
		t.Errorf("check on push: failed step %q, log:\n%s", res.failed, res.log)
	}
}
