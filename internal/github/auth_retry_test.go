package github_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gh "github.com/google/go-github/v62/github"

	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/github/githubfake"
)

func TestRetries(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0) // setup's client clock
	tests := map[string]struct {
		failures []githubfake.Failure
		waits    []time.Duration
		err      error // nil: success
	}{
		"502 then success": {
			failures: []githubfake.Failure{{Status: 502}},
			waits:    []time.Duration{time.Second},
		},
		"5xx backoff is bounded": {
			failures: []githubfake.Failure{{Status: 503, Times: 4}},
			waits:    []time.Duration{time.Second, 2 * time.Second, 4 * time.Second},
			err:      errors.New("503"),
		},
		"secondary limit with retry-after": {
			failures: []githubfake.Failure{{Status: 403, Header: http.Header{"Retry-After": {"1"}}}},
			waits:    []time.Duration{time.Second},
		},
		"429 with retry-after": {
			failures: []githubfake.Failure{{Status: 429, Header: http.Header{"Retry-After": {"7"}}}},
			waits:    []time.Duration{7 * time.Second},
		},
		"primary limit waits for the reset": {
			failures: []githubfake.Failure{{Status: 403, Header: http.Header{"X-Ratelimit-Remaining": {"0"},
				"X-Ratelimit-Reset": {strconv.FormatInt(now.Add(30*time.Second).Unix(), 10)}}}},
			waits: []time.Duration{31 * time.Second},
		},
		"secondary limit without headers: a minute, doubling": {
			failures: []githubfake.Failure{{Status: 403, Times: 2}},
			waits:    []time.Duration{time.Minute, 2 * time.Minute},
		},
		"rate limit waits are bounded": {
			failures: []githubfake.Failure{{Status: 403, Times: 4}},
			waits:    []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute},
			err:      github.ErrRateLimited,
		},
		"primary reset too far away is not waited for": {
			failures: []githubfake.Failure{{Status: 403, Header: http.Header{"X-Ratelimit-Remaining": {"0"},
				"X-Ratelimit-Reset": {strconv.FormatInt(now.Add(3*time.Hour).Unix(), 10)}}}},
			err: github.ErrRateLimited,
		},
		"403 that is no rate limit": {
			failures: []githubfake.Failure{{Status: 403, Body: `{"message":"Resource not accessible by integration"}`}},
			err:      errors.New("Resource not accessible by integration"),
		},
		"404 is not retried": {
			failures: []githubfake.Failure{{Status: 404}},
			err:      github.ErrNotFound,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			for _, fl := range tc.failures {
				fl.Method, fl.Path = "GET", "/repos/acme/infra/pulls/12"
				e.f.Fail(fl)
			}
			pr, err := e.c.GetPullRequest(ctx(t), repo, prNum)
			switch {
			case tc.err == nil && err != nil:
				t.Fatalf("err = %v", err)
			case tc.err == nil && pr.HeadSHA != headSHA:
				t.Fatalf("pr %+v", pr)
			case tc.err != nil && err == nil:
				t.Fatalf("no error; want %v", tc.err)
			case tc.err != nil && !errors.Is(err, tc.err) && !strings.Contains(err.Error(), tc.err.Error()):
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if got := e.sleeps.waits(); fmt.Sprint(got) != fmt.Sprint(tc.waits) && !(len(got) == 0 && len(tc.waits) == 0) {
				t.Errorf("waits %v, want %v", got, tc.waits)
			}
		})
	}
}

func TestWaitHonoursCancellation(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *github.Options) { o.Sleep = nil }) // the real sleeper
	e.f.FailNext("GET", "/repos/acme/infra/pulls/12", 403, http.Header{"Retry-After": {"60"}})
	c, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.c.GetPullRequest(c, repo, prNum)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("returned after %s; the wait ignored ctx", d)
	}
}

func TestExpiredInstallationToken(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if _, err := e.c.GetPullRequest(ctx(t), repo, prNum); err != nil {
		t.Fatal(err)
	}
	e.f.ExpireTokens()
	if _, err := e.c.GetPullRequest(ctx(t), repo, prNum); err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if n := e.f.TokensIssued(); n != 2 {
		t.Errorf("%d tokens issued, want 2 (one refresh)", n)
	}
	var unauthorized int
	for _, r := range e.f.Requests("GET", "/repos/acme/infra/pulls/12") {
		if r.Status == 401 {
			unauthorized++
		}
	}
	if unauthorized != 1 {
		t.Errorf("%d 401s, want 1", unauthorized)
	}
	// A token refused twice is an error, not a loop.
	e.f.Fail(githubfake.Failure{Method: "GET", Path: "/repos/acme/infra/pulls/12", Status: 401, Times: 5})
	_, err := e.c.GetPullRequest(ctx(t), repo, prNum)
	if !errors.Is(err, github.ErrUnauthorized) {
		t.Fatalf("err = %v, want ErrUnauthorized", err)
	}
	if n := e.f.TokensIssued(); n != 3 {
		t.Errorf("%d tokens issued, want 3 (exactly one more refresh)", n)
	}
	if n := len(e.f.Requests("GET", "/repos/acme/infra/pulls/12")); n != 5 {
		t.Errorf("%d requests, want 5 (2 + 1 + 2)", n)
	}
}

func TestConcurrentCallsShareOneToken(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.c.GetPullRequest(ctx(t), repo, prNum)
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := e.f.TokensIssued(); n != 1 {
		t.Errorf("%d tokens issued, want 1", n)
	}
	c2, err := e.app.Installation(instID)
	if err != nil || c2 != e.c {
		t.Errorf("Installation(%d) again = %p, %v; want the cached client %p", instID, c2, err, e.c)
	}
}

func TestWrongAppKeyIsRefused(t *testing.T) {
	t.Parallel()
	e := setup(t)
	o := githubfake.New(t)
	o.NewAppKey(1)
	other := o.NewAppKey(appID) // a second pooled key: e.f knows only the first
	app, err := github.NewApp(appID, other, github.Options{BaseURL: e.f.APIURL(), Sleep: e.sleeps.sleep})
	if err != nil {
		t.Fatal(err)
	}
	c, err := app.Installation(instID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetPullRequest(ctx(t), repo, prNum); err == nil {
		t.Fatal("a JWT signed with an unknown key was accepted")
	}
	if n := len(e.f.Requests("POST", "/app/installations/7001/access_tokens")); n != 1 {
		t.Errorf("%d token requests, want 1 (no retry loop on 401)", n)
	}
	if _, err := github.NewApp(appID, []byte("not a key"), github.Options{}); err == nil || strings.Contains(err.Error(), "not a key") {
		t.Errorf("bad key: %v", err)
	}
}

func TestTokenClient(t *testing.T) {
	t.Parallel()
	f := githubfake.New(t)
	f.AddToken("ghs_actions_token", "github-actions[bot]")
	f.AddPR(repoStr, githubfake.PR{Number: prNum, HeadSHA: headSHA})
	s := &sleeps{}
	c, err := github.NewTokenClient("ghs_actions_token", github.Options{BaseURL: f.APIURL(), Sleep: s.sleep, BotLogin: "github-actions[bot]"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpsertStickyComment(ctx(t), repo, prNum, "prod", "from Actions"); err != nil {
		t.Fatal(err)
	}
	if cm := f.Comments(repoStr, prNum); len(cm) != 1 || cm[0].User != "github-actions[bot]" {
		t.Errorf("comments %+v", cm)
	}
	f.ExpireTokens()
	if _, err := c.GetPullRequest(ctx(t), repo, prNum); !errors.Is(err, github.ErrUnauthorized) {
		t.Errorf("expired plain token: %v", err)
	}
	if n := len(f.Requests("GET", "/repos/acme/infra/pulls/12")); n != 1 {
		t.Errorf("%d requests: a plain token's 401 is not retried", n)
	}
	if _, err := github.NewTokenClient(" ", github.Options{}); err == nil {
		t.Error("empty token accepted")
	}
}

func TestSecretsStayOutOfLogsAndErrors(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.f.FailNext("GET", "/repos/acme/infra/pulls/12", 502, nil)
	e.f.SetTarball(repoStr, headSHA, []byte("tgz"))
	var errs []string
	if _, err := e.c.GetPullRequest(ctx(t), repo, prNum); err != nil {
		t.Fatal(err)
	}
	e.f.ExpireTokens()
	if _, err := e.c.DownloadTarball(ctx(t), repo, headSHA); err != nil {
		t.Fatal(err)
	}
	e.f.Fail(githubfake.Failure{Method: "GET", Path: "/_fake/codeload/*/*/*/*", Status: 500, Times: 4})
	if _, err := e.c.DownloadTarball(ctx(t), repo, headSHA); err == nil {
		t.Fatal("no error from a failing archive link")
	} else {
		errs = append(errs, err.Error())
	}
	out := e.logs.String() + strings.Join(errs, "\n") + fmt.Sprintf("%v %+v %#v %s", e.app, e.app, e.app, e.app)
	if !strings.Contains(out, "retrying") {
		t.Errorf("expected retry logs, got %q", out)
	}
	var secrets []string
	for _, r := range e.f.Requests("", "") {
		if a := r.Header.Get("Authorization"); a != "" {
			secrets = append(secrets, a[strings.Index(a, " ")+1:])
		}
		if strings.Contains(r.Query, "token=") {
			secrets = append(secrets, strings.TrimPrefix(r.Query, "token="))
		}
	}
	keyBytes := fmt.Sprintf("%#v", e.pem[40:60]) // how %#v would print the key: []byte{0x4d, …}
	secrets = append(secrets, "PRIVATE KEY", string(e.pem[40:80]), keyBytes[len("[]byte{"):len(keyBytes)-1])
	if len(secrets) < 4 {
		t.Fatalf("found only %d secrets to look for", len(secrets))
	}
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("a secret (%.8s…) appears in logs or errors", s)
		}
	}
}

// The client is built on go-github; its error types stay reachable.
func TestAPIErrorUnwrapsToGoGitHub(t *testing.T) {
	t.Parallel()
	e := setup(t)
	_, err := e.c.GetPullRequest(ctx(t), repo, 404)
	var er *gh.ErrorResponse
	if !errors.As(err, &er) || er.Response.StatusCode != 404 {
		t.Errorf("err = %v; want a *github.ErrorResponse inside", err)
	}
}
