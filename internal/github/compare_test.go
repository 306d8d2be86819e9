package github_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/github/githubfake"
)

// TestCompare asks the fake's compare API (enforcing GitHub's description
// of GET /repos/{o}/{r}/compare/{basehead}) how a head stands against its
// base: a pull request's head is up to date by default; declared counts
// give GitHub's statuses; a branch name with a slash travels as one
// basehead; an unknown commit is ErrNotFound; a ref that cannot be asked
// for is refused before sending; a 5xx is retried, then returned.
func TestCompare(t *testing.T) {
	t.Parallel()
	const old = "1111111111111111111111111111111111111111"
	tests := map[string]struct {
		base, head string
		set        *githubfake.Comparison
		want       github.Comparison
		err        error
	}{
		"a pull request's head, up to date": {base: "main", head: headSHA,
			want: github.Comparison{Status: "ahead", AheadBy: 1, BaseSHA: "b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0"}},
		"behind":     {base: "main", head: old, set: &githubfake.Comparison{BehindBy: 3, BaseSHA: "b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0"}, want: github.Comparison{Status: "behind", BehindBy: 3, BaseSHA: "b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0"}},
		"diverged":   {base: "main", head: old, set: &githubfake.Comparison{AheadBy: 2, BehindBy: 5}, want: github.Comparison{Status: "diverged", AheadBy: 2, BehindBy: 5}},
		"identical":  {base: "main", head: old, set: &githubfake.Comparison{}, want: github.Comparison{Status: "identical"}},
		"a slash":    {base: "release/2025", head: old, set: &githubfake.Comparison{AheadBy: 1, BehindBy: 1}, want: github.Comparison{Status: "diverged", AheadBy: 1, BehindBy: 1}},
		"unknown":    {base: "main", head: old, err: github.ErrNotFound},
		"empty base": {base: "", head: headSHA, err: github.ErrValidation},
		"dots":       {base: "main...x", head: headSHA, err: github.ErrValidation},
		"a query":    {base: "main", head: "x?y=1", err: github.ErrValidation},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			e.f.AddPR(repoStr, githubfake.PR{Number: prNum, HeadSHA: headSHA, BaseSHA: "b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0"})
			if tc.set != nil {
				e.f.SetCompare(repoStr, tc.base, tc.head, *tc.set)
			}
			got, err := e.c.Compare(ctx(t), repo, tc.base, tc.head)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				if errors.Is(tc.err, github.ErrValidation) && len(e.f.Requests("GET", "/repos/acme/infra/compare/")) != 0 {
					t.Errorf("a refused ref was sent to GitHub")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.want.BaseSHA == "" {
				tc.want.BaseSHA = got.BaseSHA // the fake makes one up for a branch it knows no tip of
				if len(got.BaseSHA) != 40 {
					t.Errorf("base SHA %q, want a commit SHA", got.BaseSHA)
				}
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			reqs := e.f.Requests("GET", "/repos/acme/infra/compare/")
			if len(reqs) != 1 || !strings.Contains(reqs[0].Query, "per_page=1") {
				t.Errorf("requests %+v, want one asking for one commit a page", reqs)
			}
		})
	}
}

// TestCompareServerErrors: a compare answered 502 is retried by the
// transport (a GET), and after the last attempt the error is returned
// with GitHub's status, for the caller to log.
func TestCompareServerErrors(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.f.Fail(githubfake.Failure{Method: "GET", Path: "/repos/acme/infra/compare/*", Status: http.StatusBadGateway, Times: 10})
	_, err := e.c.Compare(ctx(t), repo, "main", headSHA)
	var ae *github.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadGateway {
		t.Fatalf("err = %v, want GitHub's 502", err)
	}
	if n := len(e.f.Requests("GET", "/repos/acme/infra/compare/")); n != 4 {
		t.Errorf("%d requests, want 4 (the transport's attempts)", n)
	}
	if !strings.Contains(err.Error(), "comparing main...ec26c3e57ca3 in acme/infra") {
		t.Errorf("err = %v, want it to say what was compared", err)
	}
}
