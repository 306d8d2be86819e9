package github_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/github/githubfake"
)

func TestTarball(t *testing.T) {
	t.Parallel()
	tgz := []byte(strings.Repeat("\x1f\x8b tarball bytes ", 100))
	tests := map[string]struct {
		ref string
		max int64
		err error
	}{
		"download":       {ref: headSHA},
		"at the cap":     {ref: headSHA, max: int64(len(tgz))},
		"over the cap":   {ref: headSHA, max: int64(len(tgz)) - 1, err: github.ErrTooLarge},
		"unknown ref":    {ref: strings.Repeat("b", 40), err: github.ErrNotFound},
		"unusable ref":   {ref: "../x", err: github.ErrValidation},
		"ref with query": {ref: "a?b", err: github.ErrValidation},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, func(o *github.Options) { o.MaxTarballBytes = tc.max })
			e.f.SetTarball(repoStr, headSHA, tgz)
			got, err := e.c.DownloadTarball(ctx(t), repo, tc.ref)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || string(got) != string(tgz) {
				t.Fatalf("got %d bytes, %v", len(got), err)
			}
			for _, r := range e.f.Requests("GET", "/_fake/codeload/") {
				if r.Header.Get("Authorization") != "" {
					t.Errorf("the archive link was fetched with credentials")
				}
			}
		})
	}
}

func TestPermission(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, role := range []string{"admin", "maintain", "write", "triage", "read"} {
		e.f.SetPermission(repoStr, "user-"+role, role)
	}
	e.f.SetPermission(repoStr, "user-custom", "security-reviewer")
	tests := map[string]struct {
		want     github.Permission
		canApply bool // at least write
	}{
		"user-admin":    {github.PermissionAdmin, true},
		"user-maintain": {github.PermissionMaintain, true},
		"user-write":    {github.PermissionWrite, true},
		"user-triage":   {github.PermissionTriage, false},
		"user-read":     {github.PermissionRead, false},
		"user-custom":   {github.PermissionRead, false},
		"stranger":      {github.PermissionNone, false},
	}
	for user, tc := range tests {
		t.Run(user, func(t *testing.T) {
			t.Parallel()
			got, err := e.c.GetPermission(ctx(t), repo, user)
			if err != nil || got != tc.want || got.AtLeast(github.PermissionWrite) != tc.canApply {
				t.Errorf("GetPermission(%s) = %q, %v; want %q", user, got, err, tc.want)
			}
		})
	}
}

func TestReviews(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		reviews  [][2]string // user, state, in order
		approved bool
	}{
		"none":                             {nil, false},
		"one approval":                     {[][2]string{{"ann", "APPROVED"}}, true},
		"comment after approval keeps it":  {[][2]string{{"ann", "APPROVED"}, {"ann", "COMMENTED"}}, true},
		"changes requested blocks":         {[][2]string{{"ann", "APPROVED"}, {"bob", "CHANGES_REQUESTED"}}, false},
		"re-review clears the request":     {[][2]string{{"bob", "CHANGES_REQUESTED"}, {"ann", "APPROVED"}, {"bob", "APPROVED"}}, true},
		"dismissed approval":               {[][2]string{{"ann", "APPROVED"}, {"ann", "DISMISSED"}}, false},
		"approval after changes requested": {[][2]string{{"ann", "CHANGES_REQUESTED"}, {"ann", "APPROVED"}}, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			for _, rv := range tc.reviews {
				e.f.AddReview(repoStr, prNum, rv[0], rv[1])
			}
			got, err := e.c.ListReviews(ctx(t), repo, prNum)
			if err != nil || got.Approved() != tc.approved {
				t.Errorf("ListReviews = %+v, %v; approved want %v", got, err, tc.approved)
			}
		})
	}
}

func TestPullRequestAndFiles(t *testing.T) {
	t.Parallel()
	e := setup(t)
	files := make([]string, 250)
	for i := range files {
		files[i] = fmt.Sprintf("modules/m%03d/main.tf", i)
	}
	mergeable := true
	e.f.AddPR(repoStr, githubfake.PR{Number: 13, HeadSHA: headSHA, HeadRepo: "forker/infra", HeadRef: "patch-1",
		BaseRef: "main", Draft: true, Mergeable: &mergeable, Files: files})
	pr, err := e.c.GetPullRequest(ctx(t), repo, 13)
	if err != nil {
		t.Fatal(err)
	}
	if !pr.Fork || !pr.Draft || pr.Mergeable == nil || !*pr.Mergeable || pr.BaseRef != "main" || pr.HeadRef != "patch-1" || pr.State != "open" {
		t.Errorf("pr %+v", pr)
	}
	got, err := e.c.ListPullRequestFiles(ctx(t), repo, 13)
	if err != nil || len(got) != 250 || got[249].Filename != files[249] {
		t.Errorf("%d files, %v", len(got), err)
	}
	if _, err := e.c.GetPullRequest(ctx(t), repo, 99); !errors.Is(err, github.ErrNotFound) {
		t.Errorf("missing PR: %v", err)
	}
}

func TestParseRepo(t *testing.T) {
	t.Parallel()
	for in, ok := range map[string]bool{"acme/infra": true, "acme": false, "/infra": false, "a/b/c": false} {
		r, err := github.ParseRepo(in)
		if (err == nil) != ok || (ok && r.String() != in) {
			t.Errorf("ParseRepo(%q) = %v, %v", in, r, err)
		}
	}
}
