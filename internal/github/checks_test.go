package github_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/github/githubfake"
)

func TestCheckRunCreateUpdateFind(t *testing.T) {
	t.Parallel()
	e := setup(t)
	run := github.CheckRun{Name: "kilolock plan", HeadSHA: headSHA, ExternalID: "run-01H|pr-12", Status: "in_progress",
		Title: "Planning", Summary: "planning…",
		Actions: []github.CheckRunAction{{Label: "Apply", Description: "Apply this plan", Identifier: "apply"}}}
	created, err := e.c.CreateCheckRun(ctx(t), repo, run)
	if err != nil {
		t.Fatal(err)
	}
	if created.ID == 0 || created.Status != "in_progress" || created.ExternalID != run.ExternalID {
		t.Fatalf("created %+v", created)
	}
	updated, err := e.c.UpdateCheckRun(ctx(t), repo, created.ID, github.CheckRun{Name: "kilolock plan",
		Conclusion: "success", Title: "Plan: 2 to add", Summary: "## Plan\n2 to add"})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Status != "completed" || updated.Conclusion != "success" {
		t.Errorf("updated %+v", updated)
	}
	runs := e.f.CheckRuns(repoStr)
	if len(runs) != 1 || runs[0].Summary != "## Plan\n2 to add" || runs[0].ExternalID != run.ExternalID || len(runs[0].Actions) != 1 {
		t.Fatalf("fake holds %+v", runs)
	}
	patches := e.f.Requests("PATCH", "/repos/acme/infra/check-runs/")
	var sent map[string]any
	if err := json.Unmarshal(patches[0].Body, &sent); err != nil {
		t.Fatal(err)
	}
	if sent["name"] != "kilolock plan" {
		t.Errorf("update sent name %v; GitHub requires it", sent["name"])
	}
	found, ok, err := e.c.FindCheckRun(ctx(t), repo, headSHA, "kilolock plan")
	if err != nil || !ok || found.ID != created.ID {
		t.Errorf("FindCheckRun = %+v, %v, %v", found, ok, err)
	}
	if _, ok, err := e.c.FindCheckRun(ctx(t), repo, headSHA, "other"); err != nil || ok {
		t.Errorf("FindCheckRun(other) = %v, %v", ok, err)
	}
}

func TestCheckRunOutputIsCut(t *testing.T) {
	t.Parallel()
	var calls int
	var mu sync.Mutex
	e := setup(t, func(o *github.Options) {
		o.Truncate = func(md string, limit int) string {
			mu.Lock()
			calls++
			mu.Unlock()
			return github.CutLines(md, limit)
		}
	})
	summary := "# Summary\n" + strings.Repeat("line of plan output ü\n", 5000) // > 65535 characters
	if _, err := e.c.CreateCheckRun(ctx(t), repo, github.CheckRun{Name: "kl", HeadSHA: headSHA, Title: "t", Summary: summary}); err != nil {
		t.Fatal(err)
	}
	got := e.f.CheckRuns(repoStr)[0].Summary
	if n := utf8.RuneCountInString(got); n > github.MaxCheckRunOutput || !strings.HasPrefix(got, "# Summary\n") || !strings.Contains(got, "more lines cut") {
		t.Errorf("summary: %d characters, starts %q, ends %q", n, got[:20], got[len(got)-60:])
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Errorf("truncate called %d times, want 1 (summary only)", calls)
	}
}

func TestCheckRunValidation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ok := github.CheckRun{Name: "kl", HeadSHA: headSHA}
	act := func(l, d, i string) []github.CheckRunAction {
		return []github.CheckRunAction{{Label: l, Description: d, Identifier: i}}
	}
	tests := map[string]struct {
		run      github.CheckRun
		field    string // of the ValidationError, when refused before sending
		sent     bool   // reached GitHub (the fake) at all
		ghPhrase string // part of GitHub's message, when GitHub refused
	}{
		"label over 20":       {run: with(ok, func(r *github.CheckRun) { r.Actions = act("Apply this plan now!!", "d", "apply") }), field: "actions[0].label"},
		"description over 40": {run: with(ok, func(r *github.CheckRun) { r.Actions = act("Apply", strings.Repeat("d", 41), "apply") }), field: "actions[0].description"},
		"identifier over 20":  {run: with(ok, func(r *github.CheckRun) { r.Actions = act("Apply", "d", strings.Repeat("i", 21)) }), field: "actions[0].identifier"},
		"four actions": {run: with(ok, func(r *github.CheckRun) {
			r.Actions = append(append(append(act("a", "b", "c"), act("a", "b", "c")...), act("a", "b", "c")...), act("a", "b", "c")...)
		}), field: "actions"},
		"stale":                    {run: with(ok, func(r *github.CheckRun) { r.Conclusion = "stale" }), field: "conclusion"},
		"completed, no conclusion": {run: with(ok, func(r *github.CheckRun) { r.Status = "completed" }), field: "conclusion"},
		"summary without title":    {run: with(ok, func(r *github.CheckRun) { r.Summary = "s" }), field: "output.title"},
		"no head sha":              {run: with(ok, func(r *github.CheckRun) { r.HeadSHA = "" }), field: "head_sha"},
		"GitHub: not a commit":     {run: with(ok, func(r *github.CheckRun) { r.HeadSHA = "main" }), sent: true, ghPhrase: "No commit found for SHA: main"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tc.run.Name = "kl " + name // tells the cases' requests apart
			_, err := e.c.CreateCheckRun(ctx(t), repo, tc.run)
			if !errors.Is(err, github.ErrValidation) {
				t.Fatalf("err = %v, want ErrValidation", err)
			}
			var ve *github.ValidationError
			var ae *github.APIError
			switch {
			case !tc.sent && (!errors.As(err, &ve) || ve.Field != tc.field):
				t.Errorf("err = %v, want a ValidationError on %s", err, tc.field)
			case tc.sent && (!errors.As(err, &ae) || ae.Status != 422 || !strings.Contains(err.Error(), tc.ghPhrase)):
				t.Errorf("err = %v, want GitHub's 422 with %q", err, tc.ghPhrase)
			}
			sent := 0
			for _, r := range e.f.Requests("POST", "/repos/acme/infra/check-runs") {
				if strings.Contains(string(r.Body), `"kl `+name+`"`) {
					sent++
				}
			}
			if want := map[bool]int{false: 0, true: 1}[tc.sent]; sent != want {
				t.Errorf("%d requests reached GitHub, want %d (a 422 is never retried)", sent, want)
			}
		})
	}
}

func with(r github.CheckRun, f func(*github.CheckRun)) github.CheckRun {
	r.Actions = append([]github.CheckRunAction(nil), r.Actions...)
	f(&r)
	return r
}

func TestCheckRunCreateAfter502IsNotDuplicated(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.f.Fail(githubfake.Failure{Method: "POST", Path: "/repos/acme/infra/check-runs", Status: 502, AfterHandling: true})
	got, err := e.c.CreateCheckRun(ctx(t), repo, github.CheckRun{Name: "kl", HeadSHA: headSHA, ExternalID: "run-1"})
	if err != nil {
		t.Fatal(err)
	}
	runs := e.f.CheckRuns(repoStr)
	if len(runs) != 1 || runs[0].ID != got.ID {
		t.Errorf("check runs %+v, got %+v", runs, got)
	}
}
