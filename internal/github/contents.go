package github

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v62/github"
)

// File is what GitHub's contents API answered for a path: a file with its
// content, or the kind of what is there instead.
type File struct {
	// Path is the path GitHub answered for. It differs from the path asked
	// for when that is a symbolic link to a file: GitHub then serves the
	// link's target.
	Path string
	// Type is "file", "dir", "symlink" or "submodule".
	Type string
	// Size is the file's size in bytes (0 for a directory).
	Size int64
	// Content is the file's bytes (Type "file" only).
	Content []byte
}

// GetFile reads path (repository-relative, no "..") of repo at ref with GET
// /repos/{o}/{r}/contents/{path}; an empty ref is the repository's default
// branch (GitHub's rule for that endpoint). Errors: ErrNotFound when there
// is nothing at path (or no such ref); ErrTooLarge for a file over max bytes
// or one GitHub does not serve inline (its contents API gives no content
// over 1 MB: encoding "none"); ErrValidation for an unusable path or ref.
func (c *Client) GetFile(ctx context.Context, repo Repo, path, ref string, max int64) (File, error) {
	what := fmt.Sprintf("reading %s of %s", path, repo)
	if ref != "" {
		what += "@" + shortSHA(ref)
	} else {
		what += " on its default branch"
	}
	switch {
	case path == "" || strings.HasPrefix(path, "/") || strings.Contains(path, ".."):
		return File{}, fmt.Errorf("%s: %w", what, &ValidationError{Field: "path", Message: fmt.Sprintf("%q is not a repository-relative path", path)})
	case strings.ContainsAny(ref, "?# \t\n") || strings.Contains(ref, ".."):
		return File{}, fmt.Errorf("%s: %w", what, &ValidationError{Field: "ref", Message: fmt.Sprintf("%q is not a usable ref", ref)})
	}
	var opts *gh.RepositoryContentGetOptions
	if ref != "" {
		opts = &gh.RepositoryContentGetOptions{Ref: ref}
	}
	fc, dir, resp, err := c.gh.Repositories.GetContents(ctx, repo.Owner, repo.Name, path, opts)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return File{}, fmt.Errorf("%s: %w", what, &APIError{Status: http.StatusNotFound, Message: "Not Found", err: err})
		}
		return File{}, fmt.Errorf("%s: %w", what, mapErr(err))
	}
	if fc == nil && dir != nil { // GitHub answered a directory's entries
		return File{Path: path, Type: "dir"}, nil
	}
	f := File{Path: fc.GetPath(), Type: fc.GetType(), Size: int64(fc.GetSize())}
	if f.Type != "file" {
		return f, nil
	}
	switch {
	case f.Size > max:
		return f, fmt.Errorf("%s: %d bytes, over the %d-byte cap: %w", what, f.Size, max, ErrTooLarge)
	case fc.GetEncoding() == "none":
		return f, fmt.Errorf("%s: %d bytes, more than GitHub's contents API serves inline (1 MB): %w", what, f.Size, ErrTooLarge)
	}
	s, err := fc.GetContent()
	if err != nil {
		return f, fmt.Errorf("%s: decoding the content: %w", what, err)
	}
	if int64(len(s)) > max {
		return f, fmt.Errorf("%s: over the %d-byte cap: %w", what, max, ErrTooLarge)
	}
	f.Content = []byte(s)
	return f, nil
}
