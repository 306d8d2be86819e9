package report

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// storyAfterMerge is s with apply run a's "after-merge" marker first, as
// the engine records it for a merge-time apply (ApplyInput.AfterMerge).
func storyAfterMerge(s *engine.RunStory, commit string) *engine.RunStory {
	m := engine.Marker{Run: s.Run.ID, Seq: 0, At: s.Run.CreatedAt, Kind: engine.MarkerAfterMerge, OtherPR: s.Run.PR, Commit: commit}
	i := slices.IndexFunc(s.Markers, func(x engine.Marker) bool { return x.Run == s.Run.ID })
	s.Markers = slices.Insert(slices.Clone(s.Markers), max(i, 0), m)
	return s
}

// TestRefusalAfterMerge (issue 15): the refusal of an apply that runs
// after its pull request merged does not tell anyone to re-plan on the
// PR's current head — a merged branch cannot be re-planned, and klbot
// plans open pull requests only — nor to merge the base branch into it:
// its change is on the base branch, not applied, and the step is a plan
// of the base branch at merge with kl, in every view (no /kl comment plans
// a merged pull request); the story tells when the merge was.
func TestRefusalAfterMerge(t *testing.T) {
	t.Parallel()
	render := func(s *engine.RunStory, o Options) string {
		t.Helper()
		var b bytes.Buffer
		if err := Apply(&b, s, o); err != nil {
			t.Fatal(err)
		}
		return strings.ReplaceAll(b.String(), `\_`, "_")
	}
	const sha = "89abcdef0123456789abcdef0123456789abcdef"
	gh := Options{Format: Markdown, Commands: &Commands{PR: pr(42), Project: "app"}}
	plan := `kl plan --state acme/infra/prod --pr 'acme/infra#42' --commit "$(git rev-parse HEAD)" --at-merge -C infra/prod`
	for name, tc := range map[string]struct {
		story      *engine.RunStory
		o          Options
		want, lack []string
	}{
		"stale in kl": {storyAfterMerge(storyRefusedStale(), sha), Options{Format: Text},
			[]string{"its pull request has merged, and its change is not applied", plan, "kl apply RUN", "PR          acme/infra#42, merged as 89abcde: applied after the merge"},
			[]string{"re-plan on the PR's current head"}},
		"stale on github": {storyAfterMerge(storyRefusedStale(), sha), gh,
			[]string{"its pull request has merged, and its change is not applied", "`" + plan + "`"},
			[]string{"re-plan on the PR's current head", "/kl plan"}},
		"behind the head on github": {storyAfterMerge(storyRefusedBehindHead(), ""), gh,
			[]string{"its pull request has merged, and its change is not applied", "merged: applied after the merge"},
			[]string{"merge the base branch into the PR", "/kl plan", "re-plan on the PR's current head"}},
		"stale in JSON": {storyAfterMerge(storyRefusedStale(), sha), Options{Format: JSON},
			[]string{`"next_command": "kl plan --state acme/infra/prod --pr 'acme/infra#42' --commit \"$(git rev-parse HEAD)\" --at-merge -C infra/prod"`, `"kind": "after-merge"`, `"commit": "` + sha + `"`},
			nil},
		// Its Terraform ran and its holder died: part of the change may
		// be applied (recover commits it), so not "not applied".
		"lease expired after merge": {storyAfterMerge(storyLeaseExpiredRecoverable(), sha), Options{Format: Text},
			[]string{"recover first", "its pull request has merged, and its change is not fully applied"},
			[]string{"its change is not applied", "re-plan on the PR's current head"}},
		// An apply of an open pull request keeps its words.
		"open PR": {storyRefusedStale(), gh, []string{"re-plan on the PR's current head: `/kl plan -p app`"}, []string{"has merged"}},
	} {
		got := render(tc.story, tc.o)
		if name == "stale in kl" {
			// kl run show: the marker, in time order.
			var b bytes.Buffer
			if err := RunStory(&b, tc.story, tc.o); err != nil {
				t.Fatal(err)
			}
			if w := "after merge: acme/infra#42 had merged as 89abcde"; !strings.Contains(b.String(), w) {
				t.Errorf("kl run show lacks %q:\n%s", w, b.String())
			}
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: lacks %q:\n%s", name, w, got)
			}
		}
		for _, l := range tc.lack {
			if strings.Contains(got, l) {
				t.Errorf("%s: says %q:\n%s", name, l, got)
			}
		}
	}
}
