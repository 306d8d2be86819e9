package bot

import (
	"context"
	"errors"
	"net/http"

	"github.com/kilolock/kilolock/internal/github"
)

// finalReason says why a job's error cannot go away by running the job
// again, or returns "" when River should retry it (MaxAttempts). GitHub's
// answers that are final:
//
//   - a refused installation token (github.ErrInstallationRefused: 404,
//     the installation is unknown or was removed; 401, the App's JWT was
//     refused; 403, the installation is suspended);
//   - 404: the repository or pull request is gone, or the App's
//     installation does not cover the repository (GitHub answers 404, not
//     403, for what the token cannot see);
//   - 401 even after the github package's one token refresh;
//   - 403 that is not a rate limit: the App lacks a permission
//     (docs/github.md lists the ones it needs).
//
// Rate limits that outlasted the transport's waits, 5xx, network errors
// and context ends are not final.
func finalReason(err error) string {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, github.ErrRateLimited) {
		return ""
	}
	switch {
	case errors.Is(err, github.ErrInstallationRefused):
		return "GitHub refused the installation's token: the installation is gone or the App cannot act for it"
	case errors.Is(err, github.ErrNotFound):
		return "GitHub answered 404: the repository or pull request is gone, or the App's installation does not cover the repository"
	case errors.Is(err, github.ErrUnauthorized):
		return "GitHub answered 401 even with a fresh installation token"
	}
	var ae *github.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusForbidden {
		return "GitHub answered 403 (not a rate limit): the App lacks a permission on the repository"
	}
	return ""
}
