package bot

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/github/githubfake"
)

// TestFinalReason: the errors the github package returns for GitHub's
// answers (from the fake, through the real client) are final — no River
// retry — for 404, 401 and a 403 that is not a rate limit; rate limits,
// 5xx and a context end are retried.
func TestFinalReason(t *testing.T) {
	t.Parallel()
	const repoName = "acme/infra"
	noRetryWaits := github.RetryPolicy{Attempts: 2, RateLimitWaits: 1}
	for name, tc := range map[string]struct {
		fail  *githubfake.Failure
		pr    int // the pull request asked for (1 exists)
		final bool
	}{
		"missing pull request": {pr: 2, final: true},
		"401 bad credentials":  {fail: &githubfake.Failure{Status: http.StatusUnauthorized}, pr: 1, final: true},
		"403 permission": {fail: &githubfake.Failure{Status: http.StatusForbidden,
			Body: `{"message":"Resource not accessible by integration","documentation_url":"https://docs.github.com/rest"}`}, pr: 1, final: true},
		"403 primary rate limit": {fail: &githubfake.Failure{Status: http.StatusForbidden, Header: http.Header{
			"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Reset": {fmt.Sprint(time.Now().Add(time.Minute).Unix())}}}, pr: 1},
		"403 secondary rate limit": {fail: &githubfake.Failure{Status: http.StatusForbidden}, pr: 1},
		"429":                      {fail: &githubfake.Failure{Status: http.StatusTooManyRequests}, pr: 1},
		"502":                      {fail: &githubfake.Failure{Status: http.StatusBadGateway}, pr: 1},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := githubfake.New(t)
			f.AddToken("ghp_test", "alice")
			f.AddPR(repoName, githubfake.PR{Number: 1, HeadSHA: "0123456789abcdef0123456789abcdef01234567", BaseSHA: "1123456789abcdef0123456789abcdef01234567"})
			if tc.fail != nil {
				fl := *tc.fail
				fl.Method, fl.Path, fl.Times = "GET", "/repos/*/*/pulls/*", 10
				f.Fail(fl)
			}
			c, err := github.NewTokenClient("ghp_test", github.Options{BaseURL: f.APIURL(), Retry: noRetryWaits,
				Sleep: func(context.Context, time.Duration) error { return nil }})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.GetPullRequest(context.Background(), github.Repo{Owner: "acme", Name: "infra"}, tc.pr)
			if err == nil {
				t.Fatal("GetPullRequest succeeded; want an error")
			}
			err = fmt.Errorf("planning: %w", err)
			if got := finalReason(err) != ""; got != tc.final {
				t.Errorf("finalReason(%v) = %q, want final %t", err, finalReason(err), tc.final)
			}
		})
	}
	if r := finalReason(fmt.Errorf("x: %w", context.Canceled)); r != "" {
		t.Errorf("a context end is final: %s", r)
	}
}
