package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/github/githubfake"
)

// checksAndSticky is every check run of the repository (id, conclusion,
// title, summary, actions, PATCHes applied) and the sticky comments of
// prs (body, edits): what a refusal about the commenter must leave as it
// was.
func (h *harness) checksAndSticky(t *testing.T, prs ...int) string {
	t.Helper()
	var b strings.Builder
	for _, c := range h.fake.CheckRuns(repo) {
		fmt.Fprintf(&b, "check run %d %q on %s: %s %q, %d actions, %d updates\n%s\n", c.ID, c.Name, c.HeadSHA[:7], c.Conclusion, c.Title,
			len(c.Actions), c.Updates, c.Summary)
	}
	for _, n := range prs {
		for _, c := range h.fake.Comments(repo, n) {
			if strings.Contains(c.Body, "kilolock:sticky:pr ") {
				fmt.Fprintf(&b, "sticky of #%d, %d edits:\n%s\n", n, c.Edits, c.Body)
			}
		}
	}
	return b.String()
}

// bodies is the bot's comments on pull request n.
func (h *harness) bodies(n int) []string {
	var out []string
	for _, c := range h.fake.Comments(repo, n) {
		if c.UserType == "Bot" {
			out = append(out, c.Body)
		}
	}
	return out
}

func reactionsOf(h *harness, id int64) []string {
	var out []string
	for _, r := range h.fake.Reactions(id) {
		out = append(out, r.Content)
	}
	return out
}

// TestDriveByRefusal: a "/kl apply" from mallory (read permission) on an
// applied pull request and on an unapplied one changes no check run and
// no sticky comment; mallory gets a 👎 reaction and one reply per pull
// request, and a second such comment within the window a reaction but no
// second reply (issue 11 §1). A refusal about the plan from alice (a
// plan for an old head) is still reported in the check run.
func TestDriveByRefusal(t *testing.T) {
	h := setup(t)
	app := "infra/app.tf"
	p1 := pr{1, sha(1), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}), []string{app}}
	p2 := pr{2, sha(2), change(t, [3]string{"infra/db.tf", `"db_main-v1"`, `"db_main-v2"`}), []string{"infra/db.tf"}}
	h.open(t, p1)
	h.open(t, p2)
	h.settle()
	h.comment(t, 1, "alice", "/kl apply")
	h.settle()
	if c := h.one(t, sha(1), "kl apply · infra"); c.Conclusion != "success" {
		t.Fatalf("PR 1's apply: %s %q", c.Conclusion, c.Title)
	}

	for _, n := range []int{1, 2} { // applied, unapplied
		before, replies := h.checksAndSticky(t, 1, 2), len(h.bodies(n))
		_, first := h.comment(t, n, "mallory", "/kl apply")
		h.settle()
		_, second := h.comment(t, n, "mallory", "please\n/kl apply -p infra")
		h.settle()
		if after := h.checksAndSticky(t, 1, 2); after != before {
			t.Errorf("PR %d: mallory's /kl apply changed check runs or sticky comments:\n--- before\n%s\n--- after\n%s", n, before, after)
		}
		if got := reactionsOf(h, first); fmt.Sprint(got) != "[-1]" {
			t.Errorf("PR %d: reactions on mallory's first /kl apply: %v, want [-1]", n, got)
		}
		if got := reactionsOf(h, second); fmt.Sprint(got) != "[-1]" {
			t.Errorf("PR %d: reactions on mallory's second /kl apply: %v, want [-1]", n, got)
		}
		bodies := h.bodies(n)
		if len(bodies) != replies+1 {
			t.Fatalf("PR %d: %d new bot comments after two refused comments, want 1 reply:\n%s", n, len(bodies)-replies, strings.Join(bodies, "\n---\n"))
		}
		reply := h.replyTo(t, n, first)
		mustContain(t, fmt.Sprintf("the reply to mallory on #%d", n), reply, "@mallory", "write permission", "@mallory has read permission on acme/infra")
		golden(t, fmt.Sprintf("refusal/pr%d.reply.md", n), reply)
	}
	if crs := h.checkRuns(sha(2), "kl apply · infra"); len(crs) != 0 {
		t.Errorf("mallory's /kl apply on unapplied PR 2 put %d apply check runs on its head", len(crs))
	}

	// The window is per user and pull request: a bad command by mallory on
	// PR 1 within it gets a reaction, no reply.
	replies := len(h.bodies(1))
	_, bad := h.comment(t, 1, "mallory", "/kl destroy")
	h.settle()
	if got := reactionsOf(h, bad); fmt.Sprint(got) != "[confused]" {
		t.Errorf("reactions on mallory's bad command: %v, want [confused]", got)
	}
	if got := len(h.bodies(1)); got != replies {
		t.Errorf("mallory's bad command within the window got %d replies, want none", got-replies)
	}

	// A refusal about the plan from a writer stays in the check run.
	t2 := true
	h.fake.AddPR(repo, githubfake.PR{Number: 2, HeadSHA: sha(12), Files: p2.paths, Author: "alice", Mergeable: &t2})
	h.comment(t, 2, "alice", "/kl apply")
	h.settle()
	c := h.one(t, sha(12), "kl apply · infra")
	if c.Conclusion != "action_required" {
		t.Errorf("alice's apply of an old head's plan: %s, want action_required", c.Conclusion)
	}
	mustContain(t, "alice's old-head refusal", c.Summary, "plan for the current head")
	mustContain(t, "PR 2's sticky comment", h.sticky(t, 2), "plan for the current head")
}

// TestApplyButtonRetired: the Apply button of a plan check run goes when
// the plan can no longer be applied — applied (PR 1), stale after another
// PR's commit (PR 3 writes what PR 1 wrote), superseded by a push (PR 2) —
// and a press on one a page still shows is answered to whoever pressed
// it, saying why, with no check run or sticky comment changed (issue 11 §8).
func TestApplyButtonRetired(t *testing.T) {
	h := setup(t)
	app := "infra/app.tf"
	p1 := pr{1, sha(1), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}), []string{app}}
	p2 := pr{2, sha(2), change(t, [3]string{"infra/db.tf", `"db_main-v1"`, `"db_main-v2"`}), []string{"infra/db.tf"}}
	p3 := pr{3, sha(3), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v3"`}), []string{app}}
	for _, p := range []pr{p1, p2, p3} {
		h.open(t, p)
		h.settle()
		if acts := h.one(t, p.head, "kl plan · infra").Actions; len(acts) != 1 {
			t.Fatalf("PR %d's plan check run has %d actions, want the Apply button", p.n, len(acts))
		}
	}
	h.comment(t, 1, "alice", "/kl apply")
	h.settle()
	if c := h.one(t, sha(1), "kl apply · infra"); c.Conclusion != "success" {
		t.Fatalf("PR 1's apply: %s %q", c.Conclusion, c.Title)
	}
	if acts := h.one(t, sha(1), "kl plan · infra").Actions; len(acts) != 0 {
		t.Errorf("PR 1's applied plan still has its Apply button: %v", acts)
	}
	if acts := h.one(t, sha(3), "kl plan · infra").Actions; len(acts) != 0 {
		t.Errorf("PR 3's plan, stale since PR 1's commit, still has its Apply button: %v", acts)
	}

	for _, n := range []int{1, 3} {
		before, replies := h.checksAndSticky(t, 1, 2, 3), len(h.bodies(n))
		h.deliver("check_run", githubfake.RequestedAction(repo, fmt.Sprintf("kl:%d:infra", n), sha(n), "alice", "kl-apply"))
		h.settle()
		if after := h.checksAndSticky(t, 1, 2, 3); after != before {
			t.Errorf("PR %d: a press on a stale Apply button changed check runs or sticky comments:\n--- before\n%s\n--- after\n%s", n, before, after)
		}
		bodies := h.bodies(n)
		if len(bodies) != replies+1 {
			t.Fatalf("PR %d: %d new bot comments after a press on a stale button, want 1 reply", n, len(bodies)-replies)
		}
		reply := bodies[len(bodies)-1]
		want := map[int]string{1: "it was applied already", 3: "it is stale: version 2"}[n]
		mustContain(t, fmt.Sprintf("the reply to the press on PR %d", n), reply, "@alice", "no longer applicable", want)
		golden(t, fmt.Sprintf("refusal/pr%d.button.md", n), reply)
	}

	// A push supersedes PR 2's plan: the old head's button goes, the new one has it.
	p2.head = sha(12)
	h.seed(t, p2, false)
	h.prEvent(t, "pull_request.synchronize.22", p2, false)
	h.settle()
	if acts := h.one(t, sha(2), "kl plan · infra").Actions; len(acts) != 0 {
		t.Errorf("PR 2's superseded plan (old head) still has its Apply button: %v", acts)
	}
	if acts := h.one(t, sha(12), "kl plan · infra").Actions; len(acts) != 1 {
		t.Errorf("PR 2's new plan has %d actions, want the Apply button", len(acts))
	}
}
