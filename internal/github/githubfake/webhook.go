package githubfake

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// Sign returns GitHub's X-Hub-Signature-256 value for body: "sha256=" and
// the hex HMAC-SHA256 of the raw body keyed with secret.
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Webhooks lists the embedded payload names, EVENT.ACTION.N (e.g.
// "pull_request.opened.0"), from @octokit/webhooks-examples 7.6.1 (MIT).
func Webhooks() []string {
	entries, err := fs.ReadDir(testdata, "testdata/webhooks")
	if err != nil {
		panic(fmt.Sprintf("githubfake: listing webhooks: %v", err))
	}
	var out []string
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(out)
	return out
}

// Webhook returns the raw payload EVENT.ACTION.N, exactly as stored.
// check_run.rerequested.7 and .8 carry check_run.app.created_at as
// "2018-04-25 20:42:10" (not RFC 3339), which go-github v62's ParseWebHook
// rejects: keep them for the "answer 400" test.
func Webhook(name string) ([]byte, error) {
	b, err := testdata.ReadFile("testdata/webhooks/" + name + ".json")
	if err != nil {
		return nil, fmt.Errorf("reading webhook payload %s: %w", name, err)
	}
	return b, nil
}

// Event is the X-GitHub-Event header value of a payload name
// ("pull_request.opened.0" → "pull_request").
func Event(name string) string {
	ev, _, _ := strings.Cut(name, ".")
	return ev
}

// Patch sets values in a JSON payload by dotted path ("pull_request.merged",
// "issue.pull_request.url"; a numeric segment indexes an array), creating
// missing objects on the way, and returns the re-encoded payload. A nil
// value sets JSON null.
func Patch(payload []byte, set map[string]any) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("patching payload: decoding: %w", err)
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys) // parents before children: "a" before "a.b"
	for _, k := range keys {
		var err error
		if doc, err = setPath(doc, strings.Split(k, "."), set[k]); err != nil {
			return nil, fmt.Errorf("patching payload at %s: %w", k, err)
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("patching payload: encoding: %w", err)
	}
	return out, nil
}

func setPath(node any, path []string, v any) (any, error) {
	if len(path) == 0 {
		return v, nil
	}
	switch n := node.(type) {
	case []any:
		i, err := strconv.Atoi(path[0])
		if err != nil || i < 0 || i >= len(n) {
			return nil, fmt.Errorf("index %q out of range", path[0])
		}
		child, err := setPath(n[i], path[1:], v)
		if err != nil {
			return nil, err
		}
		n[i] = child
		return n, nil
	case map[string]any:
		child, err := setPath(n[path[0]], path[1:], v)
		if err != nil {
			return nil, err
		}
		n[path[0]] = child
		return n, nil
	case nil:
		return setPath(map[string]any{}, path, v)
	}
	return nil, fmt.Errorf("%q is not an object", path[0])
}

// MustPatch is Patch of a named payload that panics on error (test data).
func MustPatch(name string, set map[string]any) []byte {
	b, err := Webhook(name)
	if err == nil {
		b, err = Patch(b, set)
	}
	if err != nil {
		panic(err)
	}
	return b
}

// MergedPullRequest is pull_request.closed.3 patched to a merge (no
// example has merged: true): merged, merged_at, merge_commit_sha set,
// with the repository, number and head SHA given.
func MergedPullRequest(repo string, number int, headSHA string) []byte {
	return pullRequestPayload("pull_request.closed.3", repo, number, headSHA, map[string]any{
		"pull_request.merged":           true,
		"pull_request.merged_at":        "2019-05-15T15:20:40Z",
		"pull_request.merge_commit_sha": strings.Repeat("d", 40),
	})
}

// PullRequestEvent is payload name (a pull_request.* example) pointed at
// repo "owner/name", PR number and head SHA; installation id 1 is kept or
// added so the payload routes like an App delivery.
func PullRequestEvent(name, repo string, number int, headSHA string) []byte {
	return pullRequestPayload(name, repo, number, headSHA, nil)
}

func pullRequestPayload(name, repo string, number int, headSHA string, extra map[string]any) []byte {
	set := inRepo(repo, map[string]any{
		"number":                           number,
		"pull_request.number":              number,
		"pull_request.head.sha":            headSHA,
		"installation.node_id":             "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uMQ==",
		"pull_request.base.repo.full_name": repo,
	})
	for k, v := range extra {
		set[k] = v
	}
	return MustPatch(name, set)
}

// inRepo adds to set what points a payload at repo "owner/name" and
// routes it like an App delivery of installation id 1.
func inRepo(repo string, set map[string]any) map[string]any {
	owner, rname, _ := strings.Cut(repo, "/")
	set["repository.full_name"] = repo
	set["repository.name"] = rname
	set["repository.owner.login"] = owner
	set["installation.id"] = 1
	return set
}

// IssueCommentOnPR is issue_comment.created.0 patched to a comment on pull
// request number of repo holding body (no example is on a pull request or
// holds a command): issue.pull_request is added, comment.body set, the
// commenter is login.
func IssueCommentOnPR(repo string, number int, login, body string) []byte {
	return MustPatch("issue_comment.created.0", inRepo(repo, map[string]any{
		"issue.number": number,
		"issue.pull_request": map[string]any{
			"url":      fmt.Sprintf("https://api.github.com/repos/%s/pulls/%d", repo, number),
			"html_url": fmt.Sprintf("https://github.com/%s/pull/%d", repo, number),
		},
		"comment.body":       body,
		"comment.user.login": login,
		"sender.login":       login,
	}))
}

// CheckRunEvent is payload name (a check_run.* example) pointed at a check
// run of repo: its external_id and head SHA, an empty pull_requests (as
// GitHub sends for a fork's push: the app maps the run through
// external_id), sent by login, installation id 1. The app timestamps of
// check_run.rerequested.7 and .8 ("2018-04-25 20:42:10", which go-github
// v62 rejects) are rewritten in RFC 3339, as GitHub sends them today.
func CheckRunEvent(name, repo, externalID, headSHA, login string) []byte {
	set := inRepo(repo, map[string]any{
		"check_run.external_id":   externalID,
		"check_run.head_sha":      headSHA,
		"check_run.pull_requests": []any{},
		"sender.login":            login,
	})
	if strings.HasPrefix(name, "check_run.rerequested.") {
		for _, app := range []string{"check_run.app", "check_run.check_suite.app"} {
			set[app+".created_at"] = "2018-04-25T20:42:10Z"
			set[app+".updated_at"] = "2018-04-25T20:42:10Z"
		}
	}
	return MustPatch(name, set)
}

// RequestedAction is check_run.requested_action.6 as CheckRunEvent makes
// it, for the button identifier: a click on a check run's button.
func RequestedAction(repo, externalID, headSHA, login, identifier string) []byte {
	b, err := Patch(CheckRunEvent("check_run.requested_action.6", repo, externalID, headSHA, login),
		map[string]any{"requested_action.identifier": identifier})
	if err != nil {
		panic(err)
	}
	return b
}

// MergeGroup is a merge group of GitHub's merge queue, as its merge_group
// deliveries carry it: the group's head commit and ref
// (refs/heads/gh-readonly-queue/BASE/pr-N-SHA: the last pull request of
// the group), and the base branch's commit the group was made on.
type MergeGroup struct {
	HeadSHA, HeadRef string
	BaseSHA, BaseRef string
}

// QueueRef is the head ref GitHub gives the merge group whose last pull
// request is pr at head commit prHead, on base branch base:
// refs/heads/gh-readonly-queue/BASE/pr-N-SHA.
func QueueRef(base string, pr int, prHead string) string {
	return fmt.Sprintf("refs/heads/gh-readonly-queue/%s/pr-%d-%s", base, pr, prHead)
}

// MergeGroupEvent is merge_group.checks_requested.0 (the only action the
// examples have) pointed at group g of repo, with action set: checks_requested,
// or destroyed with reason (merged, dequeued, invalidated), which GitHub
// adds to a destroyed delivery and the example lacks. Installation id 1.
func MergeGroupEvent(repo, action, reason string, g MergeGroup) []byte {
	set := inRepo(repo, map[string]any{
		"action":                     action,
		"merge_group.head_sha":       g.HeadSHA,
		"merge_group.head_ref":       g.HeadRef,
		"merge_group.base_sha":       g.BaseSHA,
		"merge_group.base_ref":       g.BaseRef,
		"merge_group.head_commit.id": g.HeadSHA,
	})
	if reason != "" {
		set["reason"] = reason
	}
	return MustPatch("merge_group.checks_requested.0", set)
}

// WebhookRequest builds the POST GitHub would send to url: event and
// delivery headers, JSON content type, and X-Hub-Signature-256 over body
// with secret (no signature header when secret is "").
func WebhookRequest(url, event, delivery, secret string, body []byte) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", event)
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("User-Agent", "GitHub-Hookshot/fake")
	if secret != "" {
		req.Header.Set("X-Hub-Signature-256", Sign(secret, body))
	}
	return req, nil
}
