package githubfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"strings"
)

// Requests returns the logged requests whose method is method ("" for
// any) and whose API path (without /api/v3) starts with pathPrefix.
func (f *Fake) Requests(method, pathPrefix string) []Request {
	f.logMu.Lock()
	defer f.logMu.Unlock()
	var out []Request
	for _, r := range f.log {
		if method != "" && r.Method != method {
			continue
		}
		if !strings.HasPrefix(apiPath(r.Path), pathPrefix) {
			continue
		}
		out = append(out, r)
	}
	return out
}

func apiPath(p string) string {
	if rest, ok := strings.CutPrefix(p, "/api/v3"); ok && (rest == "" || rest[0] == '/') {
		return rest
	}
	return p
}

// Failure is one injected failure: the next request matching Method ("" or
// "*": any) and Path (a path.Match pattern over the API path without
// /api/v3, e.g. /repos/o/r/issues/*/comments) is answered with Status,
// Header and Body instead of being served. With AfterHandling the request
// is served first (its effect happens) and only the answer is replaced: a
// 502 from a proxy after GitHub created the comment.
type Failure struct {
	Method        string
	Path          string
	Status        int
	Header        http.Header
	Body          string // "" picks a GitHub-like body for Status
	AfterHandling bool
	Times         int // how many requests to fail; 0 means 1
}

// FailNext makes the next request matching method and pathPattern fail
// with status and headers (and a GitHub-like body: a secondary rate limit
// message for 403/429 — a primary one when headers hold
// x-ratelimit-remaining: 0 —, "Server Error" for 5xx). Failures queue in
// the order added.
func (f *Fake) FailNext(method, pathPattern string, status int, headers http.Header) {
	f.Fail(Failure{Method: method, Path: pathPattern, Status: status, Header: headers})
}

// Fail queues a failure.
func (f *Fake) Fail(fl Failure) {
	if _, err := path.Match(fl.Path, "/"); err != nil {
		panic(fmt.Sprintf("githubfake: bad path pattern %q: %v", fl.Path, err))
	}
	if fl.Times <= 0 {
		fl.Times = 1
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, &fl)
}

// takeFailure pops the first queued failure matching the request.
func (f *Fake) takeFailure(method, apiP string) *Failure {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, fl := range f.failures {
		if fl.Method != "" && fl.Method != "*" && fl.Method != method {
			continue
		}
		if ok, _ := path.Match(fl.Path, apiP); !ok {
			continue
		}
		fl.Times--
		if fl.Times == 0 {
			f.failures = append(f.failures[:i], f.failures[i+1:]...)
		}
		c := *fl
		return &c
	}
	return nil
}

func failureBody(fl *Failure) string {
	if fl.Body != "" {
		return fl.Body
	}
	var m map[string]any
	switch {
	case (fl.Status == 403 || fl.Status == 429) && fl.Header.Get("X-Ratelimit-Remaining") == "0":
		m = map[string]any{"message": "API rate limit exceeded for installation.",
			"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-the-primary-rate-limit"}
	case fl.Status == 403 || fl.Status == 429:
		m = map[string]any{"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
			"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}
	case fl.Status >= 500:
		m = map[string]any{"message": "Server Error"}
	case fl.Status == 401:
		m = map[string]any{"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}
	default:
		m = map[string]any{"message": http.StatusText(fl.Status), "documentation_url": "https://docs.github.com/rest"}
	}
	b, _ := json.Marshal(m)
	return string(b)
}
