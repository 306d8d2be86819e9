package cli_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// pairConfig is a root module of the read-after-write pair: net is what
// the first pull request changes, app (which reads net's output) what the
// second one changes.
func pairConfig(net, app string) string {
	return `resource "terraform_data" "net" {
  input = "` + net + `"
}

resource "terraform_data" "app" {
  input = "` + app + `:${terraform_data.net.id}"
}
`
}

// TestApplyMergeCommit (issue 15, ADR 0062): pull request B changes app,
// which reads net; pull request A, merged first, changes net. B's head
// lacks A's change, so the re-plan of B's reviewed configuration would
// revert net: refused, configuration behind the head. kl apply
// --merge-commit with a checkout of B's merge commit (A's and B's changes)
// re-plans that, finds B's intent unchanged and applies it; the story
// names the commit. Bad --merge-commit and --merge-dir values are refused
// before anything runs.
func TestApplyMergeCommit(t *testing.T) {
	t.Parallel()
	k := setup(t)
	const state = "prod"
	base, prA, prB, mergeB := filepath.Join(k.dir, "base"), filepath.Join(k.dir, "a"), filepath.Join(k.dir, "b"), filepath.Join(k.dir, "merge-b", "infra")
	write(t, filepath.Join(base, "main.tf"), pairConfig("n1", "a1"))
	write(t, filepath.Join(prA, "main.tf"), pairConfig("n2", "a1"))
	write(t, filepath.Join(prB, "main.tf"), pairConfig("n1", "a2"))
	write(t, filepath.Join(mergeB, "main.tf"), pairConfig("n2", "a2"))
	k.ok("state", "init", state)
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", state, "-C", base)))
	planB := reULID.FindString(k.ok("plan", "--state", state, "-C", prB, "--pr", "acme/infra#2", "--commit", "bbbbbbb"))
	planBOld := reULID.FindString(k.ok("plan", "--state", state, "-C", prB))
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", state, "-C", prA, "--pr", "acme/infra#1", "--commit", "aaaaaaa")))

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--merge-dir", mergeB}, "--merge-dir is for --merge-commit"},
		{[]string{"--merge-commit", "HEAD"}, `--merge-commit "HEAD": want a commit SHA`},
		{[]string{"--merge-commit", "ccccccc", "--merge-dir", filepath.Join(k.dir, "nope")}, "not a directory"},
	} {
		r := k.run(append([]string{"apply", planB}, tc.args...)...)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("kl apply %v = %v; want an error saying %q", tc.args, r.err, tc.want)
		}
	}
	if st := k.runStatus(planB); st != "planned" {
		t.Fatalf("plan B is %s after refused flags, want planned", st)
	}

	// Without the merge commit: behind the head.
	if r := k.run("apply", planBOld); r.code() != 3 || !strings.Contains(r.err.Error(), "configuration behind the head") {
		t.Fatalf("kl apply of B's plan without its merge commit: exit %d, %v; want refused, configuration behind the head", r.code(), r.err)
	}

	r := k.run("apply", "--pr", "acme/infra#2", "--commit", "bbbbbbb", "--merge-commit", "ccccccc0123", "--merge-dir", mergeB, "--json")
	if r.code() != 0 {
		t.Fatalf("kl apply --merge-commit: exit %d, %v\n%s", r.code(), r.err, r.out)
	}
	var story replanStoryDoc
	if err := json.Unmarshal([]byte(r.out), &story); err != nil {
		t.Fatal(err)
	}
	var commit string
	for _, m := range story.Markers {
		if m.Kind == "replanned" {
			commit = m.Commit
		}
	}
	if story.Verdict != "allowed" || story.Version == nil || story.Version.Provenance.AppliedPlanRun == "" || commit != "ccccccc0123" {
		t.Errorf("kl apply --merge-commit = %s (%s), version %+v, re-plan commit %q; want allowed, the merge commit's re-plan applied", story.Verdict, story.Text, story.Version, commit)
	}
	_, _, inputs := tfInstances(t, []byte(k.ok("state", "pull", state)))
	if inputs["net"] != "n2" || !strings.HasPrefix(inputs["app"], "a2:") {
		t.Errorf("head inputs net %q, app %q; want A's n2 kept and B's a2", inputs["net"], inputs["app"])
	}
	if text := k.ok("run", "show", story.Run.ID); !strings.Contains(text, "re-planned the merge commit ccccccc against head 2") {
		t.Errorf("kl run show does not name the merge commit:\n%s", text)
	}
	if story.Version != nil {
		// The re-plan's own story names the configuration it planned, not the PR's head.
		text := k.ok("run", "show", story.Version.Provenance.AppliedPlanRun)
		if !strings.Contains(text, "the merge commit ccccccc (the pull request's head is bbbbbbb)") {
			t.Errorf("kl run show of the re-plan does not say it planned the merge commit:\n%s", text)
		}
	}
}

// TestApplyAfterMerge (issue 15): a merge-time apply (kl apply
// --after-merge=SHA, as the Action passes it on a push) that is refused
// does not say "re-plan on the PR's current head" nor "merge the base
// branch into the PR": the pull request has merged, its change is not
// applied, and the step is a plan of the base branch at merge with the
// command to run; kl run show says the apply ran after the merge. Bad
// --after-merge values are refused before anything runs.
func TestApplyAfterMerge(t *testing.T) {
	t.Parallel()
	k := setup(t)
	const state = "prod"
	base, prA, prB := filepath.Join(k.dir, "base"), filepath.Join(k.dir, "a"), filepath.Join(k.dir, "b")
	write(t, filepath.Join(base, "main.tf"), pairConfig("n1", "a1"))
	write(t, filepath.Join(prA, "main.tf"), pairConfig("n2", "a1"))
	write(t, filepath.Join(prB, "main.tf"), pairConfig("n1", "a2"))
	k.ok("state", "init", state)
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", state, "-C", base)))
	planB := reULID.FindString(k.ok("plan", "--state", state, "-C", prB, "--pr", "acme/infra#2", "--commit", "bbbbbbb"))
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", state, "-C", prA, "--pr", "acme/infra#1", "--commit", "aaaaaaa")))

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--after-merge=HEAD"}, `--after-merge="HEAD": want the pull request's merge commit`},
		{[]string{"--after-merge=ddddddd", "--merge-commit", "eeeeeee", "--merge-dir", prB}, "name two merge commits"},
	} {
		r := k.run(append([]string{"apply", planB}, tc.args...)...)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("kl apply %v = %v; want an error saying %q", tc.args, r.err, tc.want)
		}
	}
	if st := k.runStatus(planB); st != "planned" {
		t.Fatalf("plan B is %s after refused flags, want planned", st)
	}

	r := k.run("apply", "--pr", "acme/infra#2", "--commit", "bbbbbbb", "--after-merge=ddddddd0123")
	if r.code() != 3 {
		t.Fatalf("kl apply --after-merge of B's plan behind the head: exit %d, %v; want 3 (refused)\n%s", r.code(), r.err, r.out)
	}
	for _, want := range []string{
		"configuration behind the head",
		"its pull request has merged, and its change is not applied",
		`kl plan --state prod --pr 'acme/infra#2' --commit "$(git rev-parse HEAD)" --at-merge -C ` + prB,
		"acme/infra#2 at bbbbbbb, merged as ddddddd: applied after the merge",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, r.out)
		}
	}
	for _, lack := range []string{"re-plan on the PR's current head", "merge the base branch into the PR"} {
		if strings.Contains(r.out, lack) {
			t.Errorf("the refusal of a merged pull request's apply says %q:\n%s", lack, r.out)
		}
	}
	apply := reULID.FindString(r.out[strings.Index(r.out, "Apply "):])
	if text := k.ok("run", "show", apply); !strings.Contains(text, "after merge: acme/infra#2 had merged as ddddddd") {
		t.Errorf("kl run show of the apply does not say it ran after the merge:\n%s", text)
	}
}
