package report

import (
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/plandiff"
)

// TestRevertWords: one revert said as each answer to "Is the branch behind
// the base?" klbot can record (ADR 0046 decision 7) — no answer (kl, or
// the compare failed): the question; behind: how far, and to bring it up
// to date; up to date with a base that holds the change (a merged pull
// request, a version's commit on the base): a fact, without ⚠, and
// deliberate; up to date but the base lacks it (the pull request not
// merged, the commit not on the base) or not known: a warning that says
// so. The title, the on_revert: fail refusal and the JSON follow.
func TestRevertWords(t *testing.T) {
	t.Parallel()
	pr21 := &engine.PullRequest{Repo: "acme/infra", Number: 21}
	change := engine.Revert{Address: "terraform_data.a", Serial: 4, Kind: engine.RevertChange, Attributes: []string{"input"}, Actor: "alice", PR: pr21}
	creation := engine.Revert{Address: "terraform_data.dns", Serial: 1, Kind: engine.RevertCreation, Run: "RUN1", Actor: "bootstrap"}
	upToDate := func(vs ...engine.VersionInBase) *engine.BranchStatus {
		return &engine.BranchStatus{Base: "main", BaseSHA: "b0b0", HeadSHA: "h1", AheadBy: 1, Versions: vs}
	}
	const warnChange = "⚠ would undo version 4's change to terraform_data.a (PR acme/infra#21, by alice): input back to its value before version 4. "
	tests := map[string]struct {
		rv         engine.Revert
		branch     *engine.BranchStatus
		want       string
		deliberate bool
		title      string
	}{
		"not asked": {rv: change, want: warnChange + "Is the branch behind the base?", title: "⚠ would undo version 4's change"},
		"behind": {rv: change, branch: &engine.BranchStatus{Base: "main", HeadSHA: "h1", AheadBy: 1, BehindBy: 3, Versions: []engine.VersionInBase{{Serial: 4, Holds: true}}},
			want: warnChange + "The branch is 3 commits behind main: bring it up to date.", title: "⚠ would undo version 4's change"},
		"one commit behind": {rv: change, branch: &engine.BranchStatus{Base: "main", HeadSHA: "h1", BehindBy: 1},
			want: warnChange + "The branch is 1 commit behind main: bring it up to date.", title: "⚠ would undo version 4's change"},
		"up to date, merged": {rv: change, branch: upToDate(engine.VersionInBase{Serial: 4, Holds: true}), deliberate: true,
			want:  "undoes version 4's change to terraform_data.a (PR acme/infra#21, by alice): input back to its value before version 4. The branch is up to date with main, where PR acme/infra#21 is merged, so this is deliberate.",
			title: "undoes version 4's change"},
		"up to date, not merged": {rv: change, branch: upToDate(engine.VersionInBase{Serial: 4}),
			want: warnChange + "The branch is up to date with main, but PR acme/infra#21 is not merged into it: the branch lacks that change.", title: "⚠ would undo version 4's change"},
		"up to date, not known": {rv: change, branch: upToDate(),
			want: warnChange + "The branch is up to date with main, but whether it holds version 4's change is not known.", title: "⚠ would undo version 4's change"},
		"up to date, commit on the base": {rv: creation, branch: upToDate(engine.VersionInBase{Serial: 1, Holds: true, Commit: "00c0ffee00000000000000000000000000000000"}), deliberate: true,
			want:  "undoes version 1's creation of terraform_data.dns (run RUN1, by bootstrap): this plan destroys what version 1 created. The branch is up to date with main, which holds commit 00c0ffe of version 1, so this is deliberate.",
			title: "undoes version 1's creation"},
		"up to date, commit not on the base": {rv: creation, branch: upToDate(engine.VersionInBase{Serial: 1, Commit: "77c0ffee00000000000000000000000000000000"}),
			want:  "⚠ would undo version 1's creation of terraform_data.dns (run RUN1, by bootstrap): this plan destroys what version 1 created. The branch is up to date with main, but commit 77c0ffe of version 1 is not on it: the branch lacks that change.",
			title: "⚠ would undo version 1's creation"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := &engine.Envelope{Reverts: []engine.Revert{tc.rv}, Branch: tc.branch}
			if got := revertWords(env, tc.rv).plain(); got != tc.want {
				t.Errorf("revert words\n got %q\nwant %q", got, tc.want)
			}
			if got := env.Deliberate(tc.rv); got != tc.deliberate {
				t.Errorf("Deliberate = %v, want %v", got, tc.deliberate)
			}
			if got := RevertTitle(env); got != tc.title {
				t.Errorf("title %q, want %q", got, tc.title)
			}
			out := &engine.PlanOutcome{Run: engine.Run{Envelope: env}}
			if refused := (Applying{RevertFail: true}).refusesReverts(out); refused == tc.deliberate {
				t.Errorf("on_revert: fail refuses = %v for a revert deliberate = %v", refused, tc.deliberate)
			}
			j := toReverts(env)
			if len(j) != 1 || j[0].Deliberate != tc.deliberate || j[0].Text != tc.want {
				t.Errorf("JSON reverts %+v, want deliberate %v and the words", j, tc.deliberate)
			}
		})
	}
}

// TestRevertBlocksDoubtFirst: a plan that undoes one change on purpose and
// another in doubt lists the warning first, its title and the refusal
// name only the one in doubt.
func TestRevertBlocksDoubtFirst(t *testing.T) {
	t.Parallel()
	pr21, pr22 := &engine.PullRequest{Repo: "acme/infra", Number: 21}, &engine.PullRequest{Repo: "acme/infra", Number: 22}
	env := &engine.Envelope{
		Reverts: []engine.Revert{
			{Address: "terraform_data.a", Serial: 2, Kind: engine.RevertChange, Attributes: []string{"input"}, PR: pr21},
			{Address: "terraform_data.b", Serial: 3, Kind: engine.RevertChange, Attributes: []string{"input"}, PR: pr22},
		},
		Branch: &engine.BranchStatus{Base: "main", HeadSHA: "h", Versions: []engine.VersionInBase{{Serial: 2, Holds: true}, {Serial: 3}}},
	}
	var lines []string
	for _, b := range revertBlocks(env) {
		lines = append(lines, sentence(b.(para)).plain())
	}
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "⚠ would undo version 3's change to terraform_data.b") || !strings.HasPrefix(lines[1], "undoes version 2's change to terraform_data.a") {
		t.Errorf("revert lines %q, want the one in doubt first", lines)
	}
	if got := RevertTitle(env); got != "⚠ would undo version 3's change" {
		t.Errorf("title %q, want only the one in doubt", got)
	}
	why := RevertRefusedWhy("infra", "P", env.RevertsInDoubt())
	if !strings.Contains(why, "would undo version 3's change to `terraform_data.b` (PR acme/infra#22), not shown to be deliberate;") || strings.Contains(why, "terraform_data.a") {
		t.Errorf("refusal %q, want only the one in doubt", why)
	}
}

// TestRevertWordsPaths: a revert says what of its attributes the plan
// sets back (engine.Revert.Paths, defect 6 of the issue 12 review): a
// path within an attribute, several, part of a sensitive value; a revert
// stored before paths were kept names its attributes. JSON carries the
// paths.
func TestRevertWordsPaths(t *testing.T) {
	t.Parallel()
	pr21 := &engine.PullRequest{Repo: "acme/infra", Number: 21}
	const head = "⚠ would undo version 2's change to terraform_data.a (PR acme/infra#21): "
	const tail = " before version 2. Is the branch behind the base?"
	tests := map[string]struct {
		attrs []string
		paths []plandiff.UndonePath
		want  string
	}{
		"one path":          {[]string{"input"}, []plandiff.UndonePath{{Path: "input.a"}}, "input.a back to its value"},
		"a whole attribute": {[]string{"input"}, []plandiff.UndonePath{{Path: "input"}}, "input back to its value"},
		"two paths": {[]string{"input", "tags"}, []plandiff.UndonePath{{Path: "input.a"}, {Path: `tags["env"]`}},
			`input.a, tags["env"] back to their value`},
		"part of a sensitive value": {[]string{"creds"}, []plandiff.UndonePath{{Path: "creds", Part: true}}, "part of creds back to its value"},
		"stored without paths":      {[]string{"input"}, nil, "input back to its value"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			rv := engine.Revert{Address: "terraform_data.a", Serial: 2, Kind: engine.RevertChange, Attributes: tc.attrs, Paths: tc.paths, PR: pr21}
			env := &engine.Envelope{Reverts: []engine.Revert{rv}}
			if got, want := revertWords(env, rv).plain(), head+tc.want+tail; got != want {
				t.Errorf("revert words\n got %q\nwant %q", got, want)
			}
			j := toReverts(env)
			if len(j) != 1 || len(j[0].Paths) != len(tc.paths) {
				t.Fatalf("JSON reverts %+v, want the paths %+v", j, tc.paths)
			}
			for i, p := range tc.paths {
				if j[0].Paths[i].Path != p.Path || j[0].Paths[i].Part != p.Part {
					t.Errorf("JSON path %d = %+v, want %+v", i, j[0].Paths[i], p)
				}
			}
		})
	}
}
