package github

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	gh "github.com/google/go-github/v62/github"
)

// Check run limits (docs/github.md "Check runs").
const (
	MaxCheckRunOutput    = 65535 // characters in output.summary and output.text each
	MaxCheckRunActions   = 3
	MaxActionLabel       = 20
	MaxActionDescription = 40
	MaxActionIdentifier  = 20
)

// CheckRun is what klbot writes to a check run. Empty fields are not sent
// (on update they stay as they were), except Name, which GitHub requires
// and go-github v62 always sends on update (UpdateCheckRunOptions.Name has
// no omitempty). Title and Summary go together: output needs both. The
// output is sent whole: with a Title, an empty Text is sent too, so an
// update clears the text an earlier output had (a plan's diff blocks,
// ADR 0044, must not outlive its report).
type CheckRun struct {
	Name       string // required, create and update
	HeadSHA    string // required on create; ignored on update
	ExternalID string // maps the check run back to klbot's run and PR: forks give empty pull_requests
	DetailsURL string
	Status     string // queued, in_progress or completed
	Conclusion string // action_required, cancelled, failure, neutral, success, skipped, timed_out; sets status completed
	StartedAt  time.Time
	// CompletedAt is sent with a conclusion; zero lets GitHub stamp it.
	CompletedAt time.Time
	Title       string
	Summary     string // Markdown, cut to 65535 characters by the client's TruncateFunc
	Text        string // Markdown, likewise
	Actions     []CheckRunAction
}

// CheckRunAction is a button on a check run; a click sends check_run
// requested_action with Identifier.
type CheckRunAction struct {
	Label       string // ≤ 20 characters
	Description string // ≤ 40 characters
	Identifier  string // ≤ 20 characters
}

// CheckRunInfo is a check run as GitHub returns it.
type CheckRunInfo struct {
	ID         int64
	Name       string
	HeadSHA    string
	ExternalID string
	Status     string
	Conclusion string
	HTMLURL    string
}

var (
	checkStatuses    = map[string]bool{"queued": true, "in_progress": true, "completed": true}
	checkConclusions = map[string]bool{"action_required": true, "cancelled": true, "failure": true, "neutral": true,
		"success": true, "skipped": true, "timed_out": true} // "stale" is GitHub's own
)

// validate refuses, before anything is sent, a check run GitHub would refuse.
func (r CheckRun) validate(create bool) error {
	bad := func(field, format string, args ...any) error {
		return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
	}
	switch {
	case r.Name == "":
		return bad("name", "required")
	case create && r.HeadSHA == "":
		return bad("head_sha", "required")
	case r.Status != "" && !checkStatuses[r.Status]:
		return bad("status", "%q is not queued, in_progress or completed", r.Status)
	case r.Conclusion != "" && !checkConclusions[r.Conclusion]:
		return bad("conclusion", "%q is not a conclusion an app may set", r.Conclusion)
	case r.Status == "completed" && r.Conclusion == "":
		return bad("conclusion", "required when status is completed")
	case (r.Summary != "" || r.Text != "") && r.Title == "":
		return bad("output.title", "required when output is set")
	case r.Title != "" && r.Summary == "":
		return bad("output.summary", "required when output is set")
	case len(r.Actions) > MaxCheckRunActions:
		return bad("actions", "%d actions; GitHub allows %d", len(r.Actions), MaxCheckRunActions)
	}
	for i, a := range r.Actions {
		for _, f := range []struct {
			name, v string
			max     int
		}{{"label", a.Label, MaxActionLabel}, {"description", a.Description, MaxActionDescription}, {"identifier", a.Identifier, MaxActionIdentifier}} {
			n := utf8.RuneCountInString(f.v)
			if n == 0 {
				return bad(fmt.Sprintf("actions[%d].%s", i, f.name), "required")
			}
			if n > f.max {
				return bad(fmt.Sprintf("actions[%d].%s", i, f.name), "%q is %d characters; GitHub allows %d", f.v, n, f.max)
			}
		}
	}
	return nil
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func optTime(t time.Time) *gh.Timestamp {
	if t.IsZero() {
		return nil
	}
	return &gh.Timestamp{Time: t.UTC().Truncate(time.Second)}
}

func (c *Client) output(r CheckRun) *gh.CheckRunOutput {
	if r.Title == "" {
		return nil
	}
	return &gh.CheckRunOutput{Title: &r.Title, Summary: gh.String(c.fit(r.Summary, MaxCheckRunOutput)),
		Text: gh.String(c.fit(r.Text, MaxCheckRunOutput))}
}

func actions(r CheckRun) []*gh.CheckRunAction {
	var out []*gh.CheckRunAction
	for _, a := range r.Actions {
		out = append(out, &gh.CheckRunAction{Label: a.Label, Description: a.Description, Identifier: a.Identifier})
	}
	return out
}

func checkRunInfo(cr *gh.CheckRun) CheckRunInfo {
	return CheckRunInfo{ID: cr.GetID(), Name: cr.GetName(), HeadSHA: cr.GetHeadSHA(), ExternalID: cr.GetExternalID(),
		Status: cr.GetStatus(), Conclusion: cr.GetConclusion(), HTMLURL: cr.GetHTMLURL()}
}

func shortSHA(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// CreateCheckRun creates a check run on run.HeadSHA. A 5xx or network
// failure is retried; when run.ExternalID is set, a retry first looks for
// a check run the failed attempt may have created (same name, head SHA
// and external id, and newer than any of them before the first attempt:
// one request more, so that an older check run of the same name — the
// plan of an earlier job on this head — is never taken for it) and
// returns it instead of creating a second one.
func (c *Client) CreateCheckRun(ctx context.Context, repo Repo, run CheckRun) (CheckRunInfo, error) {
	what := fmt.Sprintf("creating check run %q on %s@%s", run.Name, repo, shortSHA(run.HeadSHA))
	if err := run.validate(true); err != nil {
		return CheckRunInfo{}, fmt.Errorf("%s: %w", what, err)
	}
	opts := gh.CreateCheckRunOptions{Name: run.Name, HeadSHA: run.HeadSHA, DetailsURL: optString(run.DetailsURL),
		ExternalID: optString(run.ExternalID), Status: optString(run.Status), Conclusion: optString(run.Conclusion),
		StartedAt: optTime(run.StartedAt), CompletedAt: optTime(run.CompletedAt), Output: c.output(run), Actions: actions(run)}
	var info CheckRunInfo
	var before int64 // the newest such check run before the first attempt
	if run.ExternalID != "" {
		prior, ok, err := c.findCheckRun(ctx, repo, run.HeadSHA, run.Name, run.ExternalID)
		if err != nil {
			return CheckRunInfo{}, fmt.Errorf("%s: looking for earlier ones: %w", what, mapErr(err))
		}
		if ok {
			before = prior.ID
		}
	}
	err := c.retryWrite(ctx, func() error {
		cr, _, err := c.gh.Checks.CreateCheckRun(ctx, repo.Owner, repo.Name, opts)
		if err == nil {
			info = checkRunInfo(cr)
		}
		return err
	}, func() (bool, error) {
		if run.ExternalID == "" {
			return false, nil
		}
		found, ok, err := c.findCheckRun(ctx, repo, run.HeadSHA, run.Name, run.ExternalID)
		if ok && found.ID > before { // made by the failed attempt, not an earlier job
			info = found
			return true, nil
		}
		return false, err
	})
	if err != nil {
		return CheckRunInfo{}, fmt.Errorf("%s: %w", what, mapErr(err))
	}
	return info, nil
}

// UpdateCheckRun updates check run id. Name is required (go-github v62
// sends it always). GitHub keeps fields not sent; output replaces the
// previous output.
func (c *Client) UpdateCheckRun(ctx context.Context, repo Repo, id int64, run CheckRun) (CheckRunInfo, error) {
	what := fmt.Sprintf("updating check run %d %q on %s", id, run.Name, repo)
	if err := run.validate(false); err != nil {
		return CheckRunInfo{}, fmt.Errorf("%s: %w", what, err)
	}
	opts := gh.UpdateCheckRunOptions{Name: run.Name, DetailsURL: optString(run.DetailsURL),
		ExternalID: optString(run.ExternalID), Status: optString(run.Status), Conclusion: optString(run.Conclusion),
		CompletedAt: optTime(run.CompletedAt), Output: c.output(run), Actions: actions(run)}
	cr, _, err := c.gh.Checks.UpdateCheckRun(ctx, repo.Owner, repo.Name, id, opts)
	if err != nil {
		return CheckRunInfo{}, fmt.Errorf("%s: %w", what, mapErr(err))
	}
	return checkRunInfo(cr), nil
}

// RemoveCheckRunActions removes every button (requested action) of check
// run id, named name, leaving the rest of it as it is: it sends "actions":
// [] (go-github's UpdateCheckRunOptions omits an empty list, which GitHub
// reads as "keep the actions").
func (c *Client) RemoveCheckRunActions(ctx context.Context, repo Repo, id int64, name string) error {
	what := fmt.Sprintf("removing the actions of check run %d %q on %s", id, name, repo)
	body := struct {
		Name    string               `json:"name"`
		Actions []*gh.CheckRunAction `json:"actions"`
	}{Name: name, Actions: []*gh.CheckRunAction{}}
	req, err := c.gh.NewRequest("PATCH", fmt.Sprintf("repos/%s/%s/check-runs/%d", repo.Owner, repo.Name, id), body)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if _, err := c.gh.Do(ctx, req, nil); err != nil {
		return fmt.Errorf("%s: %w", what, mapErr(err))
	}
	return nil
}

// FindCheckRun returns the newest check run named name on commit sha, and
// whether there is one.
func (c *Client) FindCheckRun(ctx context.Context, repo Repo, sha, name string) (CheckRunInfo, bool, error) {
	info, ok, err := c.findCheckRun(ctx, repo, sha, name, "")
	if err != nil {
		return CheckRunInfo{}, false, fmt.Errorf("finding check run %q on %s@%s: %w", name, repo, shortSHA(sha), mapErr(err))
	}
	return info, ok, nil
}

// findCheckRun lists the check runs named name on sha (all of them, newest
// first) and returns the newest, with external id externalID when not "".
func (c *Client) findCheckRun(ctx context.Context, repo Repo, sha, name, externalID string) (CheckRunInfo, bool, error) {
	opts := &gh.ListCheckRunsOptions{CheckName: &name, Filter: gh.String("all"), ListOptions: gh.ListOptions{PerPage: 100}}
	var best *gh.CheckRun
	for {
		res, resp, err := c.gh.Checks.ListCheckRunsForRef(ctx, repo.Owner, repo.Name, sha, opts)
		if err != nil {
			return CheckRunInfo{}, false, err
		}
		for _, cr := range res.CheckRuns {
			if cr.GetName() != name || (externalID != "" && cr.GetExternalID() != externalID) {
				continue
			}
			if best == nil || cr.GetID() > best.GetID() {
				best = cr
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	if best == nil {
		return CheckRunInfo{}, false, nil
	}
	return checkRunInfo(best), true, nil
}
