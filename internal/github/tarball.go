package github

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	gh "github.com/google/go-github/v62/github"
)

// DownloadTarball returns the .tar.gz of repo at ref (a commit SHA, for a
// plan: the PR's head). GitHub answers GET /repos/{o}/{r}/tarball/{ref}
// with a 302 to a link valid 5 minutes; the link is fetched at once with a
// client that sends no credentials (the link carries its own token), and
// the body is capped at Options.MaxTarballBytes (ErrTooLarge above it).
// Extraction — refusing absolute paths, "..", links leaving the root and
// oversize entries — is the caller's (docs/github.md).
func (c *Client) DownloadTarball(ctx context.Context, repo Repo, ref string) ([]byte, error) {
	what := fmt.Sprintf("downloading the tarball of %s@%s", repo, shortSHA(ref))
	if ref == "" || strings.ContainsAny(ref, "?# \t\n") || strings.Contains(ref, "..") {
		return nil, fmt.Errorf("%s: %w", what, &ValidationError{Field: "ref", Message: fmt.Sprintf("%q is not a usable ref", ref)})
	}
	link, resp, err := c.gh.Repositories.GetArchiveLink(ctx, repo.Owner, repo.Name, gh.Tarball, &gh.RepositoryContentGetOptions{Ref: ref}, 1)
	if err != nil {
		// GetArchiveLink bypasses go-github's error decoding: a 404 is a plain error.
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return nil, fmt.Errorf("%s: %w", what, &APIError{Status: http.StatusNotFound, Message: "Not Found", err: err})
		}
		return nil, fmt.Errorf("%s: getting the archive link: %w", what, mapErr(err))
	}
	if link.Scheme != "https" && link.Scheme != "http" {
		return nil, fmt.Errorf("%s: archive link has scheme %q", what, link.Scheme)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	res, err := c.plain.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = redactURL(ue.URL)
		}
		return nil, fmt.Errorf("%s: fetching the archive link: %w", what, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: archive link answered %s", what, res.Status)
	}
	max := c.o.MaxTarballBytes
	if res.ContentLength > max {
		return nil, fmt.Errorf("%s: %d bytes, over the %d-byte cap: %w", what, res.ContentLength, max, ErrTooLarge)
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: reading: %w", what, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: over the %d-byte cap: %w", what, max, ErrTooLarge)
	}
	return b, nil
}
