package github

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	gh "github.com/google/go-github/v62/github"
)

// MaxCommentBody is GitHub's limit on a comment body, in characters
// (docs/github.md "Comments": 422 "Body is too long" above it).
const MaxCommentBody = 65536

// StickyComment is the outcome of UpsertStickyComment.
type StickyComment struct {
	ID      int64
	HTMLURL string
	Action  string // "created", "edited" or "unchanged"
}

// StickyMarker is the hidden first line that identifies the sticky comment
// for key: "<!-- kilolock:sticky:KEY -->". A key is 1–100 characters of
// letters, digits and . _ - / : @ (a state name such as acme/infra/prod
// fits).
func StickyMarker(key string) (string, error) {
	if key == "" || len(key) > 100 {
		return "", &ValidationError{Field: "key", Message: fmt.Sprintf("sticky comment key %q must be 1–100 characters", key)}
	}
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-/:@", r)) {
			return "", &ValidationError{Field: "key", Message: fmt.Sprintf("sticky comment key %q holds %q", key, r)}
		}
	}
	return "<!-- kilolock:sticky:" + key + " -->", nil
}

// UpsertStickyComment makes pull request pr carry exactly one comment of
// this client's for key, with body: it edits the comment carrying key's
// marker (paginating all the PR's comments; the oldest such comment of a
// Bot author — of Options.BotLogin when set — wins), or creates one. The
// body is cut to 65536 characters by the client's TruncateFunc, the marker
// kept. An unchanged body is not re-sent. A create that fails with a 5xx
// or a network error is retried from the listing, so a comment GitHub
// created before failing is found and edited, never duplicated.
//
// Two concurrent calls for one PR and key can each create a comment:
// callers serialize per PR (klbot holds the pull request's writer lock).
func (c *Client) UpsertStickyComment(ctx context.Context, repo Repo, pr int, key, body string) (StickyComment, error) {
	// The error names the step that failed: a 403 on creating the
	// comment is not one on editing it (issue 15 §4).
	step := "writing"
	what := func() string { return fmt.Sprintf("%s the sticky %q comment on %s#%d", step, key, repo, pr) }
	marker, err := StickyMarker(key)
	if err != nil {
		return StickyComment{}, fmt.Errorf("%s: %w", what(), err)
	}
	room := MaxCommentBody - utf8.RuneCountInString(marker) - 1
	full := marker + "\n" + c.fit(body, room)
	var out StickyComment
	createFailed := false
	err = c.retryWrite(ctx, func() error {
		var err error
		out, err = c.upsertOnce(ctx, repo, pr, marker, full, &step)
		var fe finalError
		if err != nil && !errors.As(err, &fe) {
			createFailed = true
		}
		if err == nil && createFailed && out.Action == "unchanged" {
			out.Action = "created" // by the attempt whose answer was lost
		}
		return err
	}, nil)
	if err != nil {
		return StickyComment{}, fmt.Errorf("%s: %w", what(), mapErr(err))
	}
	return out, nil
}

// upsertOnce lists, then edits or creates. Only a failed create is left
// retryable for UpsertStickyComment; the listing and the edit are
// idempotent and were retried by the transport already. It sets step to
// what it does: "finding", "editing", "creating".
func (c *Client) upsertOnce(ctx context.Context, repo Repo, pr int, marker, full string, step *string) (StickyComment, error) {
	*step = "finding"
	existing, err := c.findSticky(ctx, repo, pr, marker)
	if err != nil {
		return StickyComment{}, finalError{err}
	}
	if existing != nil {
		if existing.GetBody() == full {
			return StickyComment{ID: existing.GetID(), HTMLURL: existing.GetHTMLURL(), Action: "unchanged"}, nil
		}
		*step = "editing"
		cm, _, err := c.gh.Issues.EditComment(ctx, repo.Owner, repo.Name, existing.GetID(), &gh.IssueComment{Body: &full})
		if err != nil {
			return StickyComment{}, finalError{err}
		}
		return StickyComment{ID: cm.GetID(), HTMLURL: cm.GetHTMLURL(), Action: "edited"}, nil
	}
	*step = "creating"
	cm, _, err := c.gh.Issues.CreateComment(ctx, repo.Owner, repo.Name, pr, &gh.IssueComment{Body: &full})
	if err != nil {
		return StickyComment{}, err
	}
	return StickyComment{ID: cm.GetID(), HTMLURL: cm.GetHTMLURL(), Action: "created"}, nil
}

// findSticky pages through the PR's comments (oldest first) for the first
// one of ours carrying marker.
func (c *Client) findSticky(ctx context.Context, repo Repo, pr int, marker string) (*gh.IssueComment, error) {
	opts := &gh.IssueListCommentsOptions{ListOptions: gh.ListOptions{PerPage: 100}}
	for {
		list, resp, err := c.gh.Issues.ListComments(ctx, repo.Owner, repo.Name, pr, opts)
		if err != nil {
			return nil, err
		}
		for _, cm := range list {
			if c.ours(cm) && strings.Contains(cm.GetBody(), marker) {
				return cm, nil
			}
		}
		if resp.NextPage == 0 {
			return nil, nil
		}
		opts.Page = resp.NextPage
	}
}

// ours: a user pasting the marker into their own comment must not capture
// the sticky comment.
func (c *Client) ours(cm *gh.IssueComment) bool {
	u := cm.GetUser()
	if c.o.BotLogin != "" {
		return strings.EqualFold(u.GetLogin(), c.o.BotLogin)
	}
	return u.GetType() == "Bot"
}

// Reactions GitHub accepts on a comment.
var reactions = map[string]bool{"+1": true, "-1": true, "laugh": true, "confused": true, "heart": true,
	"hooray": true, "rocket": true, "eyes": true}

// AddReaction reacts to issue comment commentID with content ("eyes" to
// acknowledge a /kl command). Adding a reaction that exists is a no-op on
// GitHub, so it is retried like a read.
func (c *Client) AddReaction(ctx context.Context, repo Repo, commentID int64, content string) error {
	what := fmt.Sprintf("reacting %q to comment %d on %s", content, commentID, repo)
	if !reactions[content] {
		return fmt.Errorf("%s: %w", what, &ValidationError{Field: "content", Message: fmt.Sprintf("%q is not a GitHub reaction", content)})
	}
	if _, _, err := c.gh.Reactions.CreateIssueCommentReaction(ctx, repo.Owner, repo.Name, commentID, content); err != nil {
		return fmt.Errorf("%s: %w", what, mapErr(err))
	}
	return nil
}
