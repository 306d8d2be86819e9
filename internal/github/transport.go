package github

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
)

// Sleeper waits d, or less when ctx ends first (then it returns ctx.Err()).
// Tests inject one that records the wait and returns at once.
type Sleeper func(ctx context.Context, d time.Duration) error

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// RetryPolicy bounds the retries of docs/github.md "Tokens and rate
// limits". Zero fields take the defaults shown.
type RetryPolicy struct {
	// Attempts for a 5xx or a network error, the first included (4).
	// Idempotent requests (GET, PATCH, PUT, DELETE, token and reaction
	// POSTs) are retried by the transport; other POSTs by the operation,
	// which first checks whether the failed attempt took effect.
	Attempts int
	// BaseDelay is the first backoff (1s), doubling up to MaxDelay (8s).
	BaseDelay, MaxDelay time.Duration
	// RateLimitWaits is how many rate-limit waits one request may take (3).
	RateLimitWaits int
	// SecondaryWait is the first wait on a secondary limit that names no
	// time (1m, GitHub's "at least a minute"), doubling up to
	// MaxSecondaryWait (8m).
	SecondaryWait, MaxSecondaryWait time.Duration
	// MaxWait is the longest single wait accepted (1h, a primary limit's
	// window); a longer one returns the rate-limit error at once.
	MaxWait time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if p.Attempts <= 0 {
		p.Attempts = 4
	}
	if p.RateLimitWaits <= 0 {
		p.RateLimitWaits = 3
	}
	def(&p.BaseDelay, time.Second)
	def(&p.MaxDelay, 8*time.Second)
	def(&p.SecondaryWait, time.Minute)
	def(&p.MaxSecondaryWait, 8*time.Minute)
	def(&p.MaxWait, time.Hour)
	return p
}

// backoff is the wait before retry n (n ≥ 1).
func (p RetryPolicy) backoff(n int) time.Duration {
	d := p.BaseDelay
	for i := 1; i < n && d < p.MaxDelay; i++ {
		d *= 2
	}
	return min(d, p.MaxDelay)
}

// retryTransport retries 5xx and network errors of idempotent requests
// with bounded exponential backoff, and waits out rate limits (403/429)
// for any request: GitHub refuses those before doing anything. It sits
// below ghinstallation, so token requests get the same treatment, and
// below go-github, so go-github's client-side rate-limit blocking never
// sees a limit that was waited out. It logs method, path and waits — never
// headers or queries.
type retryTransport struct {
	next   http.RoundTripper
	policy RetryPolicy
	sleep  Sleeper
	now    func() time.Time
	log    *slog.Logger
}

func (t *retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	var serverTries, rateWaits int
	cur := req
	for {
		resp, err := t.next.RoundTrip(cur)
		wait, reason, retry := t.plan(req, resp, err, &serverTries, &rateWaits)
		if !retry {
			return resp, err
		}
		next, rerr := rewind(req)
		if rerr != nil {
			return resp, err
		}
		if resp != nil {
			drain(resp)
		}
		t.log.LogAttrs(ctx, slog.LevelWarn, "github: retrying request",
			slog.String("method", req.Method), slog.String("path", req.URL.Path),
			slog.String("reason", reason), slog.Duration("wait", wait))
		if serr := t.sleep(ctx, wait); serr != nil {
			return nil, fmt.Errorf("waiting %s to retry %s %s after %s: %w", wait, req.Method, req.URL.Path, reason, serr)
		}
		cur = next
	}
}

// plan decides whether and how long to wait before another attempt.
func (t *retryTransport) plan(req *http.Request, resp *http.Response, err error, serverTries, rateWaits *int) (time.Duration, string, bool) {
	if !rewindable(req) || req.Context().Err() != nil {
		return 0, "", false
	}
	serverRetry := func(reason string) (time.Duration, string, bool) {
		if !idempotent(req) || *serverTries+1 >= t.policy.Attempts {
			return 0, "", false
		}
		*serverTries++
		return t.policy.backoff(*serverTries), reason, true
	}
	if err != nil {
		return serverRetry("a network error")
	}
	switch code := resp.StatusCode; {
	case retryableStatus(code):
		return serverRetry(fmt.Sprintf("status %d", code))
	case code == http.StatusForbidden || code == http.StatusTooManyRequests:
		wait, reason, limited := t.rateLimitWait(resp, *rateWaits)
		if !limited || *rateWaits >= t.policy.RateLimitWaits || wait > t.policy.MaxWait {
			return 0, "", false
		}
		*rateWaits++
		return wait, reason, true
	}
	return 0, "", false
}

// rateLimitWait reads a 403/429 the way docs/github.md says: retry-after
// → that long; x-ratelimit-remaining: 0 → until x-ratelimit-reset; a
// secondary limit naming no time (or a bare 429) → at least a minute,
// doubling. Any other 403 (a permission refusal) is not a limit.
func (t *retryTransport) rateLimitWait(resp *http.Response, n int) (time.Duration, string, bool) {
	if v := resp.Header.Get("Retry-After"); v != "" {
		if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
			return time.Duration(s) * time.Second, "retry-after " + v + "s", true
		}
		if at, err := http.ParseTime(v); err == nil {
			return max(at.Sub(t.now()), 0), "retry-after " + v, true
		}
	}
	if resp.Header.Get("X-RateLimit-Remaining") == "0" {
		if s, err := strconv.ParseInt(resp.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			// One second past the reset: the header has whole seconds.
			return max(time.Unix(s, 0).Sub(t.now())+time.Second, time.Second), "primary rate limit", true
		}
	}
	if resp.StatusCode == http.StatusTooManyRequests || secondaryLimitBody(resp) {
		d := t.policy.SecondaryWait
		for i := 0; i < n && d < t.policy.MaxSecondaryWait; i++ {
			d *= 2
		}
		return min(d, t.policy.MaxSecondaryWait), "secondary rate limit", true
	}
	return 0, "", false
}

// secondaryLimitBody peeks at a 403 body for GitHub's secondary-limit
// message, leaving the body readable for the caller.
func secondaryLimitBody(resp *http.Response) bool {
	if resp.Body == nil {
		return false
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(b), resp.Body), resp.Body}
	if err != nil {
		return false
	}
	s := strings.ToLower(string(b))
	return strings.Contains(s, "secondary rate limit") || strings.Contains(s, "abuse") ||
		strings.Contains(s, "secondary-rate-limits")
}

// idempotent: repeating the request cannot duplicate an effect. POSTs are
// not, except a token request (a second token is harmless) and a reaction
// (GitHub answers 200 for an existing one).
func idempotent(req *http.Request) bool {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	case http.MethodPost:
		return strings.HasSuffix(req.URL.Path, "/access_tokens") || strings.HasSuffix(req.URL.Path, "/reactions")
	}
	return false
}

func rewindable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// rewind returns a copy of req with a fresh body.
func rewind(req *http.Request) (*http.Request, error) {
	r2 := req.Clone(req.Context())
	if req.Body == nil || req.Body == http.NoBody {
		return r2, nil
	}
	if req.GetBody == nil {
		return nil, errors.New("request body cannot be replayed")
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, fmt.Errorf("replaying request body: %w", err)
	}
	r2.Body = body
	return r2, nil
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

// installationTransport authenticates as one installation through
// ghinstallation, which renews the token before it expires. When GitHub
// answers 401 anyway (a token revoked or expired early), it builds a fresh
// ghinstallation transport — ghinstallation has no way to force a refresh —
// and retries the request once with the new token; a second 401 is
// returned as is, never looped on.
//
// A token request GitHub refuses (401, 403 or 404 on POST
// /app/installations/{id}/access_tokens) fails the request with an
// *InstallationError (ErrInstallationRefused): no API request is sent.
type installationTransport struct {
	installationID int64
	newTransport   func() (*ghinstallation.Transport, error)
	log            *slog.Logger

	mu  sync.Mutex
	cur *ghinstallation.Transport
}

func (t *installationTransport) current() (*ghinstallation.Transport, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur == nil {
		itr, err := t.newTransport()
		if err != nil {
			return nil, err
		}
		t.cur = itr
	}
	return t.cur, nil
}

// renew replaces stale with a fresh transport, unless another request
// already did.
func (t *installationTransport) renew(stale *ghinstallation.Transport) (*ghinstallation.Transport, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cur != stale {
		return t.cur, nil
	}
	itr, err := t.newTransport()
	if err != nil {
		return nil, err
	}
	t.cur = itr
	return itr, nil
}

func (t *installationTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	itr, err := t.current()
	if err != nil {
		return nil, fmt.Errorf("authenticating installation %d: %w", t.installationID, err)
	}
	resp, err := itr.RoundTrip(req)
	if err != nil {
		return resp, installationError(t.installationID, err)
	}
	if resp.StatusCode != http.StatusUnauthorized || !rewindable(req) {
		return resp, nil
	}
	next, rerr := rewind(req)
	if rerr != nil {
		return resp, nil
	}
	fresh, ferr := t.renew(itr)
	if ferr != nil {
		return resp, nil
	}
	drain(resp)
	t.log.LogAttrs(req.Context(), slog.LevelWarn, "github: installation token refused; retrying once with a fresh token",
		slog.Int64("installation", t.installationID), slog.String("method", req.Method), slog.String("path", req.URL.Path))
	resp, err = fresh.RoundTrip(next)
	if err != nil {
		return resp, installationError(t.installationID, err)
	}
	return resp, nil
}
