package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/bradleyfalzon/ghinstallation/v2"
	gh "github.com/google/go-github/v62/github"
)

// Sentinels for errors.Is. An *APIError (GitHub's answer) or a
// *ValidationError (refused before sending) matches them.
var (
	// ErrNotFound: GitHub answered 404 (missing, or not visible to the token).
	ErrNotFound = errors.New("not found on GitHub")
	// ErrValidation: the request was refused as invalid, by this package
	// before sending (*ValidationError) or by GitHub with 422 (*APIError).
	ErrValidation = errors.New("invalid request to GitHub")
	// ErrUnauthorized: GitHub answered 401 even after one token refresh.
	ErrUnauthorized = errors.New("unauthorized by GitHub")
	// ErrRateLimited: a rate limit outlasted the waits the retry policy allows.
	ErrRateLimited = errors.New("rate limited by GitHub")
	// ErrTooLarge: a download exceeded its size cap.
	ErrTooLarge = errors.New("too large")
	// ErrInstallationRefused: GitHub refused the installation token itself
	// (*InstallationError).
	ErrInstallationRefused = errors.New("installation token refused by GitHub")
)

// InstallationError is GitHub refusing an installation token: POST
// /app/installations/{id}/access_tokens answered 404 (the installation is
// unknown: the App was uninstalled, or the id is wrong), 401 (the App's
// JWT was refused: wrong App id or key) or 403 (the installation is
// suspended). Nothing the App does with that installation can succeed
// until someone changes it on GitHub, so it is final: no request is sent
// with that installation (GitHub's REST reference, "Create an
// installation access token for an app").
type InstallationError struct {
	Installation int64
	Status       int
	err          error // ghinstallation's *HTTPError
}

func (e *InstallationError) Error() string {
	why := "the App cannot act for it"
	switch e.Status {
	case http.StatusNotFound:
		why = "the installation does not exist (the App was uninstalled, or the delivery names another App's installation)"
	case http.StatusUnauthorized:
		why = "the App's JSON web token was refused (wrong KLBOT_APP_ID or private key)"
	case http.StatusForbidden:
		why = "the installation is suspended"
	}
	return fmt.Sprintf("GitHub answered %d to the token request of installation %d: %s", e.Status, e.Installation, why)
}

// Unwrap returns ghinstallation's error.
func (e *InstallationError) Unwrap() error { return e.err }

// Is matches ErrInstallationRefused.
func (e *InstallationError) Is(target error) bool { return target == ErrInstallationRefused }

// installationError returns an *InstallationError when err is
// ghinstallation's refused token request (401, 403 or 404), else err.
func installationError(id int64, err error) error {
	var he *ghinstallation.HTTPError
	if !errors.As(err, &he) || he.Response == nil {
		return err
	}
	switch he.Response.StatusCode {
	case http.StatusNotFound, http.StatusUnauthorized, http.StatusForbidden:
		return &InstallationError{Installation: id, Status: he.Response.StatusCode, err: err}
	}
	return err
}

// APIError is an error answer from GitHub, keeping GitHub's message and
// its per-field errors. It wraps the go-github error (errors.As reaches
// *github.ErrorResponse, *github.RateLimitError, *github.AbuseRateLimitError).
type APIError struct {
	Status           int
	Message          string   // GitHub's message, e.g. "Validation Failed"
	Errors           []string // GitHub's field errors, "field: message"
	DocumentationURL string
	RetryAt          time.Time // rate limits: when GitHub said to come back; zero if unknown
	rateLimited      bool
	err              error
}

func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "GitHub answered %d", e.Status)
	if e.Message != "" {
		fmt.Fprintf(&b, " %q", e.Message)
	}
	if len(e.Errors) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(e.Errors, "; "))
	}
	if !e.RetryAt.IsZero() {
		fmt.Fprintf(&b, ", retry at %s", e.RetryAt.UTC().Format(time.RFC3339))
	}
	return b.String()
}

// Unwrap returns the go-github error.
func (e *APIError) Unwrap() error { return e.err }

// Is matches the package's sentinels by status.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrValidation:
		return e.Status == http.StatusUnprocessableEntity
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	case ErrRateLimited:
		return e.rateLimited
	}
	return false
}

// ValidationError is a request this package refused before sending it,
// because GitHub would reject it (docs/github.md limits).
type ValidationError struct {
	Field   string // e.g. actions[0].label
	Message string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Message }

// Is matches ErrValidation.
func (e *ValidationError) Is(target error) bool { return target == ErrValidation }

// mapErr turns go-github's errors into *APIError; other errors (context,
// network) pass through. It is the one place go-github errors are mapped.
func mapErr(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var rl *gh.RateLimitError
	if errors.As(err, &rl) {
		return &APIError{Status: status(rl.Response), Message: rl.Message, RetryAt: rl.Rate.Reset.Time,
			rateLimited: true, err: err}
	}
	var ab *gh.AbuseRateLimitError
	if errors.As(err, &ab) {
		e := &APIError{Status: status(ab.Response), Message: ab.Message, rateLimited: true, err: err}
		if ab.RetryAfter != nil {
			e.RetryAt = time.Now().Add(*ab.RetryAfter)
		}
		return e
	}
	var er *gh.ErrorResponse
	if errors.As(err, &er) {
		e := &APIError{Status: status(er.Response), Message: er.Message, DocumentationURL: er.DocumentationURL, err: err}
		for _, fe := range er.Errors {
			msg := fe.Message
			if msg == "" {
				msg = fe.Code
			}
			if fe.Field != "" {
				msg = fe.Field + ": " + msg
			}
			e.Errors = append(e.Errors, msg)
		}
		e.rateLimited = e.Status == http.StatusTooManyRequests
		return e
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = redactURL(ue.URL)
	}
	return err
}

func status(r *http.Response) int {
	if r == nil {
		return 0
	}
	return r.StatusCode
}

// redactURL drops the query of a URL: archive links carry a token there.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.RawQuery != "" {
		u.RawQuery = "REDACTED"
	}
	u.User = nil
	return u.String()
}

// retryableWrite tells whether a failed non-idempotent request (POST) may
// have failed before taking effect or after — a 5xx or a network error —
// so that the caller re-checks and retries.
func retryableWrite(err error) bool {
	var fe finalError
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &fe) {
		return false
	}
	var er *gh.ErrorResponse
	if errors.As(err, &er) {
		return retryableStatus(status(er.Response))
	}
	var ae *APIError
	if errors.As(err, &ae) {
		return retryableStatus(ae.Status)
	}
	var ue *url.Error
	return errors.As(err, &ue)
}

func retryableStatus(code int) bool {
	switch code {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// finalError marks an error of an idempotent step inside a write operation
// (a listing, an edit): the transport already retried it, so the operation
// must not retry it again (retries would multiply).
type finalError struct{ error }

func (e finalError) Unwrap() error { return e.error }
