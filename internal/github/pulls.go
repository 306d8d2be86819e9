package github

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	gh "github.com/google/go-github/v62/github"
)

// Repo names a repository.
type Repo struct {
	Owner, Name string
}

// ParseRepo parses "owner/name".
func ParseRepo(fullName string) (Repo, error) {
	owner, name, ok := strings.Cut(fullName, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return Repo{}, fmt.Errorf("parsing repository %q: want owner/name", fullName)
	}
	return Repo{Owner: owner, Name: name}, nil
}

func (r Repo) String() string { return r.Owner + "/" + r.Name }

// PullRequest is what klbot checks before planning or applying.
type PullRequest struct {
	Number    int
	State     string // open or closed
	Draft     bool
	Merged    bool
	MergedBy  string // login of who merged it; "" when GitHub names nobody
	Mergeable *bool  // nil while GitHub is still computing it
	HeadSHA   string
	HeadRef   string
	HeadRepo  string // owner/name of the head repository; "" when GitHub gives none (a deleted fork)
	Fork      bool   // the head repository is not the base repository, or is unknown (isFork)
	BaseRef   string
	BaseSHA   string
	Author    string
	HTMLURL   string
	// MergeCommitSHA is merge_commit_sha: for a merged pull request the
	// commit its merge put on the base branch (the merge, squash or last
	// rebased commit; in a merge queue, its merge group's commit); ""
	// when GitHub names none.
	MergeCommitSHA string
	// ChangedFiles is changed_files: how many files the pull request
	// changes, which may be more than ListPullRequestFiles lists
	// (MaxListedFiles).
	ChangedFiles int
}

// MaxListedFiles is how many files GitHub lists of a pull request at most
// (GET /repos/{o}/{r}/pulls/{n}/files: "Responses include a maximum of
// 3000 files"); a pull request changing more lists only the first 3000.
const MaxListedFiles = 3000

// GetPullRequest reads pull request number.
func (c *Client) GetPullRequest(ctx context.Context, repo Repo, number int) (PullRequest, error) {
	p, _, err := c.gh.PullRequests.Get(ctx, repo.Owner, repo.Name, number)
	if err != nil {
		return PullRequest{}, fmt.Errorf("getting pull request %s#%d: %w", repo, number, mapErr(err))
	}
	headRepo := p.GetHead().GetRepo().GetFullName()
	return PullRequest{
		Number: p.GetNumber(), State: p.GetState(), Draft: p.GetDraft(), Merged: p.GetMerged(), MergedBy: p.GetMergedBy().GetLogin(), Mergeable: p.Mergeable,
		HeadSHA: p.GetHead().GetSHA(), HeadRef: p.GetHead().GetRef(), HeadRepo: headRepo,
		Fork:    isFork(headRepo, repo),
		BaseRef: p.GetBase().GetRef(), BaseSHA: p.GetBase().GetSHA(), Author: p.GetUser().GetLogin(), HTMLURL: p.GetHTMLURL(),
		MergeCommitSHA: p.GetMergeCommitSHA(), ChangedFiles: p.GetChangedFiles(),
	}, nil
}

// isFork reports whether a pull request's head repository (owner/name) is
// not the repository base. It fails closed: an empty head — GitHub sends
// head.repo null once a fork is deleted — is a fork, so that a deleted
// fork is never taken for the repository's own branch (whose pushes klbot
// plans; see bot.Options.AllowForkPRs).
func isFork(head string, base Repo) bool {
	return head == "" || !strings.EqualFold(head, base.String())
}

// PullRequestFile is one changed file of a pull request.
type PullRequestFile struct {
	Filename         string
	PreviousFilename string // renames
	Status           string // added, removed, modified, renamed, copied, changed, unchanged
}

// ListPullRequestFiles lists a pull request's changed files, every page.
// GitHub lists at most MaxListedFiles: compare with
// PullRequest.ChangedFiles to know whether the list is whole.
func (c *Client) ListPullRequestFiles(ctx context.Context, repo Repo, number int) ([]PullRequestFile, error) {
	opts := &gh.ListOptions{PerPage: 100}
	var out []PullRequestFile
	for {
		files, resp, err := c.gh.PullRequests.ListFiles(ctx, repo.Owner, repo.Name, number, opts)
		if err != nil {
			return nil, fmt.Errorf("listing files of pull request %s#%d: %w", repo, number, mapErr(err))
		}
		for _, f := range files {
			out = append(out, PullRequestFile{Filename: f.GetFilename(), PreviousFilename: f.GetPreviousFilename(), Status: f.GetStatus()})
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

// Reviews sums up a pull request's reviews by each reviewer's latest
// deciding review (APPROVED, CHANGES_REQUESTED or DISMISSED; a COMMENTED
// review does not undo an approval, as on GitHub).
type Reviews struct {
	ApprovedBy         []string // sorted logins
	ChangesRequestedBy []string // sorted logins
}

// Approved: someone approved and nobody's latest review requests changes.
func (r Reviews) Approved() bool { return len(r.ApprovedBy) > 0 && len(r.ChangesRequestedBy) == 0 }

// ListReviews reads every review of a pull request (chronological, every
// page) and keeps each reviewer's latest deciding one.
func (c *Client) ListReviews(ctx context.Context, repo Repo, number int) (Reviews, error) {
	latest := map[string]string{}
	opts := &gh.ListOptions{PerPage: 100}
	for {
		list, resp, err := c.gh.PullRequests.ListReviews(ctx, repo.Owner, repo.Name, number, opts)
		if err != nil {
			return Reviews{}, fmt.Errorf("listing reviews of pull request %s#%d: %w", repo, number, mapErr(err))
		}
		for _, rv := range list {
			switch st := rv.GetState(); st {
			case "APPROVED", "CHANGES_REQUESTED", "DISMISSED":
				latest[rv.GetUser().GetLogin()] = st
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	var r Reviews
	for login, st := range latest {
		switch st {
		case "APPROVED":
			r.ApprovedBy = append(r.ApprovedBy, login)
		case "CHANGES_REQUESTED":
			r.ChangesRequestedBy = append(r.ChangesRequestedBy, login)
		}
	}
	sort.Strings(r.ApprovedBy)
	sort.Strings(r.ChangesRequestedBy)
	return r, nil
}

// Permission is a user's role on a repository.
type Permission string

// Roles, weakest first.
const (
	PermissionNone     Permission = "none"
	PermissionRead     Permission = "read"
	PermissionTriage   Permission = "triage"
	PermissionWrite    Permission = "write"
	PermissionMaintain Permission = "maintain"
	PermissionAdmin    Permission = "admin"
)

var permissionRank = map[Permission]int{PermissionNone: 0, PermissionRead: 1, PermissionTriage: 2,
	PermissionWrite: 3, PermissionMaintain: 4, PermissionAdmin: 5}

// AtLeast tells whether p grants at least min ("write" for /kl apply).
func (p Permission) AtLeast(min Permission) bool { return permissionRank[p] >= permissionRank[min] }

// GetPermission returns user's role on repo: admin, maintain, write,
// triage, read or none. GitHub's "permission" field folds maintain into
// write and triage into read, and go-github v62 does not decode
// "role_name", so the answer is decoded here: role_name when it is one of
// the five base roles, else (a custom role) the folded permission. A 404
// (no such user) is PermissionNone.
func (c *Client) GetPermission(ctx context.Context, repo Repo, user string) (Permission, error) {
	what := fmt.Sprintf("getting %s's permission on %s", user, repo)
	if user == "" {
		return PermissionNone, fmt.Errorf("%s: %w", what, &ValidationError{Field: "user", Message: "required"})
	}
	u := fmt.Sprintf("repos/%s/%s/collaborators/%s/permission", url.PathEscape(repo.Owner), url.PathEscape(repo.Name), url.PathEscape(user))
	req, err := c.gh.NewRequest("GET", u, nil)
	if err != nil {
		return PermissionNone, fmt.Errorf("%s: %w", what, err)
	}
	var v struct {
		Permission string `json:"permission"`
		RoleName   string `json:"role_name"`
	}
	if _, err := c.gh.Do(ctx, req, &v); err != nil {
		err = mapErr(err)
		if errors.Is(err, ErrNotFound) {
			return PermissionNone, nil
		}
		return PermissionNone, fmt.Errorf("%s: %w", what, err)
	}
	if _, ok := permissionRank[Permission(v.RoleName)]; ok {
		return Permission(v.RoleName), nil
	}
	if _, ok := permissionRank[Permission(v.Permission)]; ok {
		return Permission(v.Permission), nil
	}
	return PermissionNone, fmt.Errorf("%s: unknown permission %q (role %q)", what, v.Permission, v.RoleName)
}
