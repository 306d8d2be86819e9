package github_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/github/githubfake"
)

func TestStickyComment(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// Another user's comment quoting the marker must not be taken over.
	e.f.AddComment(repoStr, prNum, "mallory", "<!-- kilolock:sticky:acme/infra/prod -->\nfake report")
	first, err := e.c.UpsertStickyComment(ctx(t), repo, prNum, "acme/infra/prod", "plan: 1 to add")
	if err != nil {
		t.Fatal(err)
	}
	second, err := e.c.UpsertStickyComment(ctx(t), repo, prNum, "acme/infra/prod", "apply: committed serial 8")
	if err != nil {
		t.Fatal(err)
	}
	third, err := e.c.UpsertStickyComment(ctx(t), repo, prNum, "acme/infra/prod", "apply: committed serial 8")
	if err != nil {
		t.Fatal(err)
	}
	if first.Action != "created" || second.Action != "edited" || third.Action != "unchanged" ||
		second.ID != first.ID || third.ID != first.ID {
		t.Errorf("actions %+v %+v %+v", first, second, third)
	}
	var ours []githubfake.Comment
	for _, cm := range e.f.Comments(repoStr, prNum) {
		if cm.User == e.f.BotLogin(appID) {
			ours = append(ours, cm)
		}
	}
	if len(ours) != 1 || ours[0].Body != "<!-- kilolock:sticky:acme/infra/prod -->\napply: committed serial 8" || ours[0].Edits != 1 {
		t.Fatalf("bot comments %+v", ours)
	}
	// Another key is another comment.
	if other, err := e.c.UpsertStickyComment(ctx(t), repo, prNum, "acme/infra/staging", "x"); err != nil || other.ID == first.ID {
		t.Errorf("other key: %+v, %v", other, err)
	}
	if _, err := e.c.UpsertStickyComment(ctx(t), repo, prNum, "bad key -->", "x"); !errors.Is(err, github.ErrValidation) {
		t.Errorf("bad key: %v", err)
	}
}

func TestStickyCommentFoundBeyondFirstPages(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for i := range 230 {
		e.f.AddComment(repoStr, prNum, "someone", fmt.Sprint("chatter ", i))
	}
	first, err := e.c.UpsertStickyComment(ctx(t), repo, prNum, "prod", "v1")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		e.f.AddComment(repoStr, prNum, "someone", fmt.Sprint("more chatter ", i))
	}
	second, err := e.c.UpsertStickyComment(ctx(t), repo, prNum, "prod", "v2")
	if err != nil {
		t.Fatal(err)
	}
	if second.ID != first.ID || second.Action != "edited" {
		t.Fatalf("second upsert %+v, first %+v", second, first)
	}
	if n := len(e.f.Comments(repoStr, prNum)); n != 271 {
		t.Errorf("%d comments, want 271 (one sticky)", n)
	}
	pages := map[string]bool{}
	for _, r := range e.f.Requests("GET", "/repos/acme/infra/issues/12/comments") {
		pages[r.Query] = true
	}
	if !pages["page=3&per_page=100"] {
		t.Errorf("comment pages read: %v; want page 3", pages)
	}
}

func TestStickyCommentBodyIsCut(t *testing.T) {
	t.Parallel()
	e := setup(t)
	body := "## Summary\nall good\n" + strings.Repeat("détail\n", 12000) // 84k characters
	if _, err := e.c.UpsertStickyComment(ctx(t), repo, prNum, "prod", body); err != nil {
		t.Fatal(err)
	}
	got := e.f.Comments(repoStr, prNum)[0].Body
	if n := utf8.RuneCountInString(got); n > github.MaxCommentBody || !strings.HasPrefix(got, "<!-- kilolock:sticky:prod -->\n## Summary\nall good\n") {
		t.Errorf("body: %d characters, starts %q", n, got[:60])
	}
}

func TestStickyCommentAfter502(t *testing.T) {
	t.Parallel()
	tests := map[string]bool{
		"502 before GitHub created it": false,
		"502 after GitHub created it":  true,
	}
	for name, after := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			e.f.Fail(githubfake.Failure{Method: "POST", Path: "/repos/acme/infra/issues/12/comments", Status: 502, AfterHandling: after})
			got, err := e.c.UpsertStickyComment(ctx(t), repo, prNum, "prod", "report")
			if err != nil {
				t.Fatal(err)
			}
			comments := e.f.Comments(repoStr, prNum)
			if got.Action != "created" {
				t.Errorf("action %q, want created", got.Action)
			}
			if len(comments) != 1 || comments[0].ID != got.ID {
				t.Fatalf("%d comments (%+v), want exactly one, id %d", len(comments), comments, got.ID)
			}
			if lists := len(e.f.Requests("GET", "/repos/acme/infra/issues/12/comments")); lists != 2 {
				t.Errorf("listed comments %d times, want 2 (re-list before retrying)", lists)
			}
			wantPosts := map[bool]int{false: 2, true: 1}[after]
			if posts := len(e.f.Requests("POST", "/repos/acme/infra/issues/12/comments")); posts != wantPosts {
				t.Errorf("%d POSTs, want %d", posts, wantPosts)
			}
			if w := e.sleeps.waits(); len(w) != 1 || w[0] != time.Second {
				t.Errorf("waits %v, want one backoff of 1s", w)
			}
		})
	}
}

func TestStickyCommentListingFailureIsNotRetriedTwice(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.f.Fail(githubfake.Failure{Method: "GET", Path: "/repos/acme/infra/issues/12/comments", Status: 500, Times: 10})
	if _, err := e.c.UpsertStickyComment(ctx(t), repo, prNum, "prod", "x"); err == nil {
		t.Fatal("no error")
	}
	// The transport tries a read 4 times; the operation must not multiply that.
	if n := len(e.f.Requests("GET", "/repos/acme/infra/issues/12/comments")); n != 4 {
		t.Errorf("%d listings, want 4", n)
	}
}

func TestAddReaction(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := e.f.AddComment(repoStr, prNum, "maria", "/kl apply")
	for range 2 { // twice: GitHub answers 200 for an existing reaction
		if err := e.c.AddReaction(ctx(t), repo, id, "eyes"); err != nil {
			t.Fatal(err)
		}
	}
	if r := e.f.Reactions(id); len(r) != 1 || r[0].Content != "eyes" {
		t.Errorf("reactions %+v", r)
	}
	if err := e.c.AddReaction(ctx(t), repo, id, "wave"); !errors.Is(err, github.ErrValidation) {
		t.Errorf("bad reaction: %v", err)
	}
}

func TestCutLines(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		in    string
		limit int
	}{
		"fits":       {"a\nb\n", 10},
		"lines":      {strings.Repeat("0123456789\n", 20), 100},
		"long line":  {strings.Repeat("é", 200), 50},
		"tiny limit": {strings.Repeat("x\n", 50), 5},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := github.CutLines(tc.in, tc.limit)
			if len(got) > tc.limit || !utf8.ValidString(got) {
				t.Errorf("CutLines = %q (%d bytes), limit %d", got, len(got), tc.limit)
			}
			if len(tc.in) <= tc.limit && got != tc.in {
				t.Errorf("changed a text that fits")
			}
		})
	}
}
