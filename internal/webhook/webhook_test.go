package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/go-github/v62/github"
	"github.com/kilolock/kilolock/internal/github/githubfake"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The published test vector (shared/fixtures/github/README.md).
func TestSignatureVector(t *testing.T) {
	t.Parallel()
	const (
		secret = "It's a Secret to Everybody"
		body   = "Hello, World!"
		want   = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	)
	if got := githubfake.Sign(secret, []byte(body)); got != want {
		t.Fatalf("githubfake.Sign = %s, want %s", got, want)
	}
	e := setup(t, nil, func(c *HandlerConfig) { c.Secret = []byte(secret) })
	tests := map[string]struct {
		sig        string
		wantReason string
	}{
		"published vector":      {sig: want},
		"upper-case hex":        {sig: "sha256=" + strings.ToUpper(want[len("sha256="):])},
		"one digit off":         {sig: want[:len(want)-1] + "8", wantReason: reasonSigMismatch},
		"vector under sha1=":    {sig: "sha1=" + want[len("sha256="):], wantReason: reasonSigMalformed},
		"vector without prefix": {sig: want[len("sha256="):], wantReason: reasonSigMalformed},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			hdr := http.Header{}
			hdr.Set(SignatureHeader, tc.sig)
			if _, reason, msg := e.h.verify(hdr, []byte(body)); reason != tc.wantReason {
				t.Errorf("verify = %q (%s), want %q", reason, msg, tc.wantReason)
			}
		})
	}
	// Through the handler. Signed with another secret: 401.
	rec := e.serve(request(t, "ping", "vector-1", []byte(body)))
	if rec.Code != http.StatusUnauthorized {
		t.Errorf("signed with another secret: status %d, want 401", rec.Code)
	}
	// Signed with the vector: the signature holds, so the answer is about
	// the body ("Hello, World!" is no ping payload), not a 401.
	req, _ := http.NewRequest(http.MethodPost, hookURL, strings.NewReader(body))
	req.Header.Set(EventHeader, "ping")
	req.Header.Set(DeliveryHeader, "vector-2")
	req.Header.Set(SignatureHeader, want)
	rec = e.serve(req)
	if rec.Code != http.StatusBadRequest || !strings.Contains(decode(t, rec).Error, "not JSON") {
		t.Errorf("published vector: status %d %s, want 400 not JSON", rec.Code, rec.Body)
	}
}

func TestRoutesSupportedDeliveries(t *testing.T) {
	t.Parallel()
	type check func(t *testing.T, payload any)
	tests := map[string]struct {
		event string
		body  []byte
		want  Delivery // ID, Event, Received filled in by the test
		check check
	}{
		"pull_request opened": {
			event: "pull_request",
			body:  githubfake.PullRequestEvent("pull_request.opened.0", "acme/infra", 7, headSHA),
			want:  Delivery{Action: "opened", Installation: 1, Repo: "acme/infra", PR: 7, HeadSHA: headSHA},
		},
		"pull_request opened (App example)": {
			event: "pull_request",
			body:  fixture(t, "pull_request.opened.12"),
			want: Delivery{Action: "opened", Installation: 1, Repo: "Codertocat/Hello-World", PR: 2,
				HeadSHA: "ec26c3e57ca3a959ca5aad62de7213c562f8c821"},
		},
		"pull_request synchronize": {
			event: "pull_request",
			body:  githubfake.PullRequestEvent("pull_request.synchronize.22", "acme/infra", 8, headSHA),
			want:  Delivery{Action: "synchronize", Installation: 1, Repo: "acme/infra", PR: 8, HeadSHA: headSHA},
		},
		"pull_request reopened": {
			event: "pull_request",
			body:  githubfake.PullRequestEvent("pull_request.reopened.18", "acme/infra", 9, headSHA),
			want:  Delivery{Action: "reopened", Installation: 1, Repo: "acme/infra", PR: 9, HeadSHA: headSHA},
		},
		"pull_request ready_for_review": {
			event: "pull_request",
			body:  githubfake.PullRequestEvent("pull_request.ready_for_review.15", "acme/infra", 10, headSHA),
			want:  Delivery{Action: "ready_for_review", Installation: 1, Repo: "acme/infra", PR: 10, HeadSHA: headSHA},
		},
		"pull_request closed unmerged": {
			event: "pull_request",
			body:  githubfake.PullRequestEvent("pull_request.closed.3", "acme/infra", 11, headSHA),
			want:  Delivery{Action: "closed", Installation: 1, Repo: "acme/infra", PR: 11, HeadSHA: headSHA},
			check: func(t *testing.T, p any) {
				if p.(*github.PullRequestEvent).GetPullRequest().GetMerged() {
					t.Error("merged = true, want false")
				}
			},
		},
		"pull_request closed merged": {
			event: "pull_request",
			body:  githubfake.MergedPullRequest("acme/infra", 12, headSHA),
			want:  Delivery{Action: "closed", Installation: 1, Repo: "acme/infra", PR: 12, HeadSHA: headSHA},
			check: func(t *testing.T, p any) {
				pr := p.(*github.PullRequestEvent).GetPullRequest()
				if !pr.GetMerged() || pr.GetMergeCommitSHA() != strings.Repeat("d", 40) {
					t.Errorf("merged = %v, merge commit %q; want a merge", pr.GetMerged(), pr.GetMergeCommitSHA())
				}
			},
		},
		"issue_comment /kl apply on a PR": {
			event: "issue_comment",
			body:  githubfake.IssueCommentOnPR("acme/infra", 13, "alice", "/kl apply"),
			want:  Delivery{Action: "created", Installation: 1, Repo: "acme/infra", PR: 13},
			check: func(t *testing.T, p any) {
				e := p.(*github.IssueCommentEvent)
				if e.GetComment().GetBody() != "/kl apply" || e.GetComment().GetUser().GetLogin() != "alice" {
					t.Errorf("comment %q by %q, want /kl apply by alice", e.GetComment().GetBody(), e.GetComment().GetUser().GetLogin())
				}
			},
		},
		"check_run requested_action (Apply button)": {
			event: "check_run",
			body:  fixture(t, "check_run.requested_action.6"),
			want: Delivery{Action: "requested_action", Installation: 690857, Repo: "electron/electron", PR: 26764,
				HeadSHA: "5bd5f196a46b8222fb7484f05faba41a73cf34bd"},
			check: func(t *testing.T, p any) {
				if id := p.(*github.CheckRunEvent).GetRequestedAction().Identifier; id != "lgtm|26764" {
					t.Errorf("requested_action.identifier = %q", id)
				}
			},
		},
		"check_run requested_action from a fork (no pull_requests)": {
			event: "check_run",
			body:  patch(t, fixture(t, "check_run.requested_action.6"), map[string]any{"check_run.pull_requests": []any{}}),
			want: Delivery{Action: "requested_action", Installation: 690857, Repo: "electron/electron",
				HeadSHA: "5bd5f196a46b8222fb7484f05faba41a73cf34bd"},
		},
		"check_run rerequested": {
			event: "check_run",
			body: patch(t, fixture(t, "check_run.requested_action.6"), map[string]any{
				"action": "rerequested", "requested_action": nil}),
			want: Delivery{Action: "rerequested", Installation: 690857, Repo: "electron/electron", PR: 26764,
				HeadSHA: "5bd5f196a46b8222fb7484f05faba41a73cf34bd"},
		},
		"merge_group checks_requested": {
			event: "merge_group",
			body: githubfake.MergeGroupEvent("acme/infra", "checks_requested", "", githubfake.MergeGroup{HeadSHA: headSHA,
				HeadRef: githubfake.QueueRef("main", 12, strings.Repeat("e", 40)), BaseSHA: strings.Repeat("a", 40), BaseRef: "refs/heads/main"}),
			want: Delivery{Action: "checks_requested", Installation: 1, Repo: "acme/infra", HeadSHA: headSHA},
			check: func(t *testing.T, p any) {
				if g := p.(*github.MergeGroupEvent).GetMergeGroup(); g.GetBaseRef() != "refs/heads/main" || g.GetBaseSHA() != strings.Repeat("a", 40) {
					t.Errorf("merge group base %q at %q", g.GetBaseRef(), g.GetBaseSHA())
				}
			},
		},
		"merge_group destroyed (its reason kept)": {
			event: "merge_group",
			body: githubfake.MergeGroupEvent("acme/infra", "destroyed", "dequeued", githubfake.MergeGroup{HeadSHA: headSHA,
				HeadRef: githubfake.QueueRef("main", 12, strings.Repeat("e", 40)), BaseSHA: strings.Repeat("a", 40), BaseRef: "refs/heads/main"}),
			want: Delivery{Action: "destroyed", Installation: 1, Repo: "acme/infra", HeadSHA: headSHA, Reason: "dequeued"},
		},
		"merge_group checks_requested (the example as GitHub sent it)": {
			event: "merge_group",
			body:  fixture(t, "merge_group.checks_requested.0"),
			want:  Delivery{Action: "checks_requested", Installation: 1, Repo: "octo-org/octo-repo", HeadSHA: "2ffea6db159f6b6c47a24e778fb9ef40cf6b1c7d"},
		},
		"installation created": {
			event: "installation",
			body:  fixture(t, "installation.created.1"),
			want:  Delivery{Action: "created", Installation: 957387},
		},
		"installation deleted": {
			event: "installation",
			body:  fixture(t, "installation.deleted.0"),
			want:  Delivery{Action: "deleted", Installation: 2},
		},
		"ping": {
			event: "ping",
			body:  pingPayload(t),
			want:  Delivery{Repo: "Octocoders/Hello-World"},
			check: func(t *testing.T, p any) {
				if e := p.(*github.PingEvent); e.GetHookID() == 0 || e.GetZen() == "" {
					t.Errorf("ping hook_id %d, zen %q: payload lost", e.GetHookID(), e.GetZen())
				}
			},
		},
	}
	wantType := map[string]any{
		"pull_request":  &github.PullRequestEvent{},
		"merge_group":   &github.MergeGroupEvent{},
		"issue_comment": &github.IssueCommentEvent{},
		"check_run":     &github.CheckRunEvent{},
		"installation":  &github.InstallationEvent{},
		"ping":          &github.PingEvent{},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil, nil)
			id := "d-" + strings.ReplaceAll(name, " ", "-")
			rec := e.serve(request(t, tc.event, id, tc.body))
			if rec.Code != http.StatusAccepted {
				t.Fatalf("status %d %s, want 202", rec.Code, rec.Body)
			}
			if diff := cmp.Diff(response{Delivery: id, Outcome: "enqueued"}, decode(t, rec)); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
			calls := e.sink.Calls()
			if len(calls) != 1 {
				t.Fatalf("sink called %d times, want 1", len(calls))
			}
			got := calls[0].d
			want := tc.want
			want.ID, want.Event, want.Received = id, tc.event, testNow
			if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(Delivery{}, "Payload")); diff != "" {
				t.Errorf("delivery (-want +got):\n%s", diff)
			}
			if fmt.Sprintf("%T", got.Payload) != fmt.Sprintf("%T", wantType[tc.event]) {
				t.Errorf("payload %T, want %T", got.Payload, wantType[tc.event])
			}
			if tc.check != nil {
				tc.check(t, got.Payload)
			}
			if !calls[0].hasDeadline || calls[0].deadlineIn > DefaultAcceptTimeout {
				t.Errorf("sink context deadline set %v, %s ahead; want at most %s", calls[0].hasDeadline, calls[0].deadlineIn, DefaultAcceptTimeout)
			}
			if diff := cmp.Diff(RequestKeys(want), calls[0].keys, cmp.Comparer(attrEqual)); diff != "" {
				t.Errorf("sink context request keys (-want +got):\n%s", diff)
			}
			if n := testutil.ToFloat64(e.h.metrics.deliveries.WithLabelValues(tc.event, want.Action, "enqueued")); n != 1 {
				t.Errorf("deliveries_total{%s,%s,enqueued} = %v, want 1", tc.event, want.Action, n)
			}
		})
	}
}

func TestIgnoresUnsupported(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		event, action string
		body          []byte
		note          string
	}{
		"push event": {
			event: "push", body: []byte(`{"ref":"refs/heads/main"}`), note: `event "push" is not handled`,
		},
		"event go-github does not know": {
			event: "brand_new_event", body: []byte(`not even JSON`), note: "not handled",
		},
		"pull_request labeled": {
			event: "pull_request", action: "labeled",
			body: patch(t, githubfake.PullRequestEvent("pull_request.opened.0", "acme/infra", 7, headSHA), map[string]any{"action": "labeled"}),
			note: `pull_request action "labeled" is not handled`,
		},
		"pull_request converted_to_draft with an unparsable payload": {
			// Ignored on its action, before parsing: no 400 for what klbot skips.
			event: "pull_request", action: "converted_to_draft",
			body: []byte(`{"action":"converted_to_draft","pull_request":{"created_at":"yesterday"}}`),
			note: "not handled",
		},
		"issue_comment on a plain issue": {
			event: "issue_comment", action: "created",
			body: patch(t, fixture(t, "issue_comment.created.0"), map[string]any{"installation.id": 1, "comment.body": "/kl apply"}),
			note: "comment on issue #1, not on a pull request",
		},
		"issue_comment edited": {
			event: "issue_comment", action: "edited",
			body: patch(t, githubfake.IssueCommentOnPR("acme/infra", 7, "alice", "/kl apply"), map[string]any{"action": "edited"}),
			note: "not handled",
		},
		"check_run completed": {
			event: "check_run", action: "completed",
			body: patch(t, fixture(t, "check_run.requested_action.6"), map[string]any{"action": "completed"}),
			note: "not handled",
		},
		"installation suspend": {
			event: "installation", action: "suspend",
			body: patch(t, fixture(t, "installation.created.1"), map[string]any{"action": "suspend"}),
			note: "not handled",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil, nil)
			rec := e.serve(request(t, tc.event, "d-ignored", tc.body))
			if rec.Code != http.StatusAccepted {
				t.Fatalf("status %d %s, want 202", rec.Code, rec.Body)
			}
			r := decode(t, rec)
			if r.Outcome != "ignored" || !strings.Contains(r.Note, tc.note) || r.Delivery != "d-ignored" {
				t.Errorf("response %+v, want outcome ignored with a note holding %q", r, tc.note)
			}
			if n := len(e.sink.Calls()); n != 0 {
				t.Errorf("sink called %d times, want 0", n)
			}
			label := tc.event
			if github.EventForType(label) == nil {
				label = "unknown"
			}
			if n := testutil.ToFloat64(e.h.metrics.deliveries.WithLabelValues(label, tc.action, "ignored")); n != 1 {
				t.Errorf("deliveries_total{%s,%s,ignored} = %v, want 1", label, tc.action, n)
			}
		})
	}
}

func hmacHex(h func() hash.Hash, secret string, body []byte) string {
	m := hmac.New(h, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func TestRejectsBadSignatures(t *testing.T) {
	t.Parallel()
	body := githubfake.PullRequestEvent("pull_request.opened.0", "acme/infra", 7, headSHA)
	good := githubfake.Sign(testSecret, body)
	tests := map[string]struct {
		headers map[string][]string // replaces the signature headers
		body    []byte              // sent instead of the signed body
		reason  string
		msg     string
	}{
		"missing": {
			headers: map[string][]string{}, reason: reasonSigMissing, msg: "missing X-Hub-Signature-256 header",
		},
		"empty": {
			headers: map[string][]string{SignatureHeader: {""}}, reason: reasonSigMissing, msg: "missing X-Hub-Signature-256",
		},
		"SHA-1 only (X-Hub-Signature)": {
			headers: map[string][]string{"X-Hub-Signature": {"sha1=" + hmacHex(sha1.New, testSecret, body)}},
			reason:  reasonSigMissing, msg: "SHA-1, is not accepted",
		},
		"valid SHA-1 MAC in the -256 header": {
			// github.ValidateSignature alone would accept this one.
			headers: map[string][]string{SignatureHeader: {"sha1=" + hmacHex(sha1.New, testSecret, body)}},
			reason:  reasonSigMalformed, msg: "want sha256= and 64 hex digits",
		},
		"valid SHA-512 MAC in the -256 header": {
			headers: map[string][]string{SignatureHeader: {"sha512=" + hmacHex(sha512.New, testSecret, body)}},
			reason:  reasonSigMalformed, msg: "malformed",
		},
		"not hex": {
			headers: map[string][]string{SignatureHeader: {"sha256=" + strings.Repeat("zz", 32)}},
			reason:  reasonSigMalformed, msg: "malformed",
		},
		"truncated": {
			headers: map[string][]string{SignatureHeader: {good[:len(good)-2]}},
			reason:  reasonSigMalformed, msg: "malformed",
		},
		"two values": {
			headers: map[string][]string{SignatureHeader: {good, good}},
			reason:  reasonSigMalformed, msg: "more than one value",
		},
		"wrong secret": {
			headers: map[string][]string{SignatureHeader: {githubfake.Sign("another secret", body)}},
			reason:  reasonSigMismatch, msg: "does not match the body",
		},
		"body changed after signing": {
			headers: map[string][]string{SignatureHeader: {good}},
			body:    bytes.Replace(body, []byte(`"opened"`), []byte(`"closed"`), 1),
			reason:  reasonSigMismatch, msg: "does not match the body",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil, nil)
			send := body
			if tc.body != nil {
				send = tc.body
			}
			req := request(t, "pull_request", "d-sig", send)
			req.Header.Del(SignatureHeader)
			for k, vs := range tc.headers {
				for _, v := range vs {
					req.Header.Add(k, v)
				}
			}
			rec := e.serve(req)
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("status %d %s, want 401", rec.Code, rec.Body)
			}
			r := decode(t, rec)
			if !strings.Contains(r.Error, tc.msg) {
				t.Errorf("error %q, want it to say %q", r.Error, tc.msg)
			}
			for _, secret := range []string{testSecret, good[len("sha256="):], hmacHex(sha1.New, testSecret, body)} {
				if strings.Contains(rec.Body.String(), secret) || strings.Contains(e.logs.String(), secret) {
					t.Errorf("response or log echoes a secret or signature: %s / %s", rec.Body, e.logs)
				}
			}
			if n := len(e.sink.Calls()); n != 0 {
				t.Errorf("sink called %d times, want 0", n)
			}
			if n := testutil.ToFloat64(e.h.metrics.rejected.WithLabelValues(tc.reason)); n != 1 {
				t.Errorf("delivery_rejected_total{%s} = %v, want 1", tc.reason, n)
			}
		})
	}
}

func TestRejectsLargeBodies(t *testing.T) {
	t.Parallel()
	const maxBody = 4096
	ping := pingPayload(t) // 7.7 kB: over the cap
	small := []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`)
	atCap := append(append([]byte(nil), small...), bytes.Repeat([]byte(" "), maxBody-len(small))...)
	tests := map[string]struct {
		body          []byte
		unknownLength bool // chunked: no Content-Length, caught by MaxBytesReader
		want          int
	}{
		"over the cap, Content-Length known": {body: ping, want: http.StatusRequestEntityTooLarge},
		"over the cap, chunked":              {body: ping, unknownLength: true, want: http.StatusRequestEntityTooLarge},
		"exactly the cap":                    {body: atCap, want: http.StatusAccepted},
		"exactly the cap, chunked":           {body: atCap, unknownLength: true, want: http.StatusAccepted},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil, func(c *HandlerConfig) { c.MaxBody = maxBody })
			req := request(t, "ping", "d-size", tc.body)
			if tc.unknownLength {
				req.ContentLength = -1
				req.Body = io.NopCloser(bytes.NewReader(tc.body)) // hides the length from net/http
			}
			rec := e.serve(req)
			if rec.Code != tc.want {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.want)
			}
			if tc.want == http.StatusRequestEntityTooLarge {
				if r := decode(t, rec); !strings.Contains(r.Error, "body over 4096 bytes") {
					t.Errorf("error %q, want it to name the cap", r.Error)
				}
				if n := testutil.ToFloat64(e.h.metrics.rejected.WithLabelValues(reasonTooLarge)); n != 1 {
					t.Errorf("delivery_rejected_total{%s} = %v, want 1", reasonTooLarge, n)
				}
			}
		})
	}
}

func TestRejectsBadRequests(t *testing.T) {
	t.Parallel()
	pr := githubfake.PullRequestEvent("pull_request.opened.0", "acme/infra", 7, headSHA)
	tests := map[string]struct {
		method string
		event  string
		body   []byte
		edit   func(*http.Request)
		want   int
		reason string
		msg    string
	}{
		"GET": {
			method: http.MethodGet, event: "pull_request", body: pr,
			want: http.StatusMethodNotAllowed, reason: reasonMethod, msg: "method GET not allowed",
		},
		"missing X-GitHub-Event": {
			event: "pull_request", body: pr, edit: func(r *http.Request) { r.Header.Del(EventHeader) },
			want: http.StatusBadRequest, reason: reasonHeader, msg: "missing X-GitHub-Event header",
		},
		"missing X-GitHub-Delivery": {
			event: "pull_request", body: pr, edit: func(r *http.Request) { r.Header.Del(DeliveryHeader) },
			want: http.StatusBadRequest, reason: reasonHeader, msg: "missing X-GitHub-Delivery header",
		},
		"check_run.rerequested.7 (created_at not RFC 3339)": {
			event: "check_run", body: fixture(t, "check_run.rerequested.7"),
			want: http.StatusBadRequest, reason: reasonUnparsable, msg: `parsing check_run payload: parsing time "\"2018-04-25 20:42:10\""`,
		},
		"check_run.rerequested.8 (created_at not RFC 3339)": {
			event: "check_run", body: fixture(t, "check_run.rerequested.8"),
			want: http.StatusBadRequest, reason: reasonUnparsable, msg: `parsing time "\"2018-04-25 20:42:10\""`,
		},
		"not JSON": {
			event: "pull_request", body: []byte(`action=opened`),
			want: http.StatusBadRequest, reason: reasonUnparsable, msg: "payload is not JSON",
		},
		"form-encoded": {
			event: "pull_request", body: []byte(`payload=%7B%7D`),
			edit: func(r *http.Request) { r.Header.Set("Content-Type", "application/x-www-form-urlencoded") },
			want: http.StatusBadRequest, reason: reasonUnparsable, msg: "set the webhook content type to application/json",
		},
		"wrong JSON type": {
			event: "pull_request", body: []byte(`{"action":"opened","number":"seven"}`),
			want: http.StatusBadRequest, reason: reasonUnparsable, msg: "parsing pull_request payload",
		},
		"pull_request without installation (raw example)": {
			event: "pull_request", body: fixture(t, "pull_request.opened.0"),
			want: http.StatusBadRequest, reason: reasonField, msg: "pull_request opened payload has no installation.id",
		},
		"pull_request without repository": {
			event: "pull_request", body: patch(t, pr, map[string]any{"repository": nil}),
			want: http.StatusBadRequest, reason: reasonField, msg: "has no repository.full_name",
		},
		"pull_request without number": {
			event: "pull_request", body: patch(t, pr, map[string]any{"number": nil, "pull_request.number": nil}),
			want: http.StatusBadRequest, reason: reasonField, msg: "has no pull_request.number",
		},
		"pull_request without head SHA": {
			event: "pull_request", body: patch(t, pr, map[string]any{"pull_request.head.sha": nil}),
			want: http.StatusBadRequest, reason: reasonField, msg: "has no pull_request.head.sha",
		},
		"issue_comment without installation": {
			event: "issue_comment", body: patch(t, githubfake.IssueCommentOnPR("acme/infra", 7, "alice", "/kl apply"), map[string]any{"installation": nil}),
			want: http.StatusBadRequest, reason: reasonField, msg: "issue_comment created payload has no installation.id",
		},
		"check_run requested_action without identifier": {
			event: "check_run", body: patch(t, fixture(t, "check_run.requested_action.6"), map[string]any{"requested_action": nil}),
			want: http.StatusBadRequest, reason: reasonField, msg: "has no requested_action.identifier",
		},
		"check_run without repository": {
			event: "check_run", body: patch(t, fixture(t, "check_run.requested_action.6"), map[string]any{"repository": nil}),
			want: http.StatusBadRequest, reason: reasonField, msg: "has no repository.full_name",
		},
		"installation without installation": {
			event: "installation", body: patch(t, fixture(t, "installation.deleted.0"), map[string]any{"installation": nil}),
			want: http.StatusBadRequest, reason: reasonField, msg: "installation deleted payload has no installation.id",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil, nil)
			req := request(t, tc.event, "d-bad", tc.body)
			if tc.method != "" {
				req.Method = tc.method
			}
			if tc.edit != nil {
				tc.edit(req)
			}
			rec := e.serve(req)
			if rec.Code != tc.want {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.want)
			}
			if r := decode(t, rec); !strings.Contains(r.Error, tc.msg) {
				t.Errorf("error %q, want it to say %q", r.Error, tc.msg)
			}
			if tc.want == http.StatusMethodNotAllowed && rec.Header().Get("Allow") != http.MethodPost {
				t.Errorf("Allow = %q, want POST", rec.Header().Get("Allow"))
			}
			if n := len(e.sink.Calls()); n != 0 {
				t.Errorf("sink called %d times, want 0", n)
			}
			if n := testutil.ToFloat64(e.h.metrics.rejected.WithLabelValues(tc.reason)); n != 1 {
				t.Errorf("delivery_rejected_total{%s} = %v, want 1", tc.reason, n)
			}
		})
	}
}

func TestSinkOutcomes(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		sink    *fakeSink
		want    int
		outcome string // response and metric
		errMsg  string // in the response
		log     string // in the log line
	}{
		"enqueued":  {sink: &fakeSink{outcome: Enqueued}, want: http.StatusAccepted, outcome: "enqueued", log: `"msg":"webhook accepted"`},
		"duplicate": {sink: &fakeSink{outcome: Duplicate}, want: http.StatusOK, outcome: "duplicate", log: `"outcome":"duplicate"`},
		"ignored":   {sink: &fakeSink{outcome: Ignored}, want: http.StatusAccepted, outcome: "ignored", log: `"outcome":"ignored"`},
		"error": {
			sink: &fakeSink{err: fmt.Errorf("enqueuing delivery: %w", io.ErrUnexpectedEOF)},
			want: http.StatusServiceUnavailable, outcome: "error", errMsg: "not recorded; redeliver",
			log: `"error":"enqueuing delivery: unexpected EOF"`,
		},
		"panic": {
			sink: &fakeSink{panicWith: "sink exploded"}, want: http.StatusInternalServerError, outcome: "panic",
			errMsg: "not recorded; redeliver", log: `"panic":"sink exploded"`,
		},
		"no outcome": {
			sink: &fakeSink{noOutcome: true}, want: http.StatusInternalServerError, outcome: "error",
			errMsg: "may not be recorded", log: "sink returned no outcome",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, tc.sink, nil)
			rec := e.serve(request(t, "pull_request", "d-outcome",
				githubfake.PullRequestEvent("pull_request.synchronize.22", "acme/infra", 7, headSHA)))
			if rec.Code != tc.want {
				t.Fatalf("status %d %s, want %d", rec.Code, rec.Body, tc.want)
			}
			r := decode(t, rec)
			wantOutcome := tc.outcome
			if wantOutcome == "panic" {
				wantOutcome = "error" // the response does not tell a panic from an error
			}
			if r.Delivery != "d-outcome" || r.Outcome != wantOutcome || !strings.Contains(r.Error, tc.errMsg) {
				t.Errorf("response %+v, want delivery d-outcome, outcome %s, error holding %q", r, wantOutcome, tc.errMsg)
			}
			if strings.Contains(rec.Body.String(), "unexpected EOF") {
				t.Errorf("response leaks the sink's error: %s", rec.Body)
			}
			logs := e.logs.String()
			if !strings.Contains(logs, tc.log) || !strings.Contains(logs, `"delivery":"d-outcome"`) {
				t.Errorf("log %s, want it to hold %s and the delivery id", logs, tc.log)
			}
			if n := testutil.ToFloat64(e.h.metrics.deliveries.WithLabelValues("pull_request", "synchronize", tc.outcome)); n != 1 {
				t.Errorf("deliveries_total{pull_request,synchronize,%s} = %v, want 1", tc.outcome, n)
			}
			if n := testutil.CollectAndCount(e.h.metrics.latency); n != 1 {
				t.Errorf("handler_duration_seconds series = %d, want 1", n)
			}
		})
	}
}

// The sink's context is the request's (cancelled with it) and bounded by
// AcceptTimeout.
func TestSinkContext(t *testing.T) {
	t.Parallel()
	body := githubfake.PullRequestEvent("pull_request.opened.12", "acme/infra", 7, headSHA)
	t.Run("bounded by AcceptTimeout", func(t *testing.T) {
		t.Parallel()
		e := setup(t, &fakeSink{block: true}, func(c *HandlerConfig) { c.AcceptTimeout = 20 * time.Millisecond })
		rec := e.serve(request(t, "pull_request", "d-slow", body))
		if rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("status %d %s, want 503", rec.Code, rec.Body)
		}
		if !strings.Contains(e.logs.String(), "context deadline exceeded") {
			t.Errorf("log %s, want the deadline named", e.logs)
		}
	})
	t.Run("cancelled with the request", func(t *testing.T) {
		t.Parallel()
		e := setup(t, nil, nil)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		rec := e.serve(request(t, "pull_request", "d-gone", body).WithContext(ctx))
		calls := e.sink.Calls()
		if len(calls) != 1 || calls[0].ctxErr == nil {
			t.Fatalf("sink calls %+v: want one, with the request's cancellation (status %d)", calls, rec.Code)
		}
	})
}

// Each request logs once, with the request keys, and never the body,
// the secret or the signature.
func TestLogging(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	body := githubfake.IssueCommentOnPR("acme/infra", 42, "alice", "/kl apply # secret-looking-body-marker")
	req := request(t, "issue_comment", "d-log", body)
	sig := req.Header.Get(SignatureHeader)
	if rec := e.serve(req); rec.Code != http.StatusAccepted {
		t.Fatalf("status %d %s", rec.Code, rec.Body)
	}
	lines := e.logs.lines(t)
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want 1: %s", len(lines), e.logs)
	}
	want := map[string]any{
		"delivery": "d-log", "event": "issue_comment", "action": "created",
		"installation": float64(1), "repo": "acme/infra", "pr": float64(42),
		"outcome": "enqueued", "status": float64(202),
	}
	for k, v := range want {
		if lines[0][k] != v {
			t.Errorf("log %s = %v, want %v", k, lines[0][k], v)
		}
	}
	for _, leak := range []string{"secret-looking-body-marker", testSecret, sig[len("sha256="):], "GitHub-Hookshot"} {
		if strings.Contains(e.logs.String(), leak) {
			t.Errorf("log holds %q: %s", leak, e.logs)
		}
	}
}

func TestNewHandler(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		cfg     HandlerConfig
		wantErr string
	}{
		"no secret":        {cfg: HandlerConfig{Sink: &fakeSink{}}, wantErr: "a webhook secret is required"},
		"empty secret":     {cfg: HandlerConfig{Secret: []byte{}, Sink: &fakeSink{}}, wantErr: "a webhook secret is required"},
		"no sink":          {cfg: HandlerConfig{Secret: []byte("s")}, wantErr: "a sink is required"},
		"negative MaxBody": {cfg: HandlerConfig{Secret: []byte("s"), Sink: &fakeSink{}, MaxBody: -1}, wantErr: "negative MaxBody"},
		"defaults":         {cfg: HandlerConfig{Secret: []byte("s"), Sink: &fakeSink{}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, err := NewHandler(tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.maxBody != 25<<20 || h.acceptTimeout != DefaultAcceptTimeout || h.now == nil || h.logger == nil {
				t.Errorf("defaults: maxBody %d, acceptTimeout %s", h.maxBody, h.acceptTimeout)
			}
		})
	}
	t.Run("secret is copied", func(t *testing.T) {
		t.Parallel()
		secret := []byte(testSecret)
		e := setup(t, nil, func(c *HandlerConfig) { c.Secret = secret })
		secret[0] = 'X'
		rec := e.serve(request(t, "ping", "d-copy", pingPayload(t)))
		if rec.Code != http.StatusAccepted {
			t.Errorf("status %d %s after the caller changed its slice, want 202", rec.Code, rec.Body)
		}
	})
	t.Run("two handlers share one registry", func(t *testing.T) {
		t.Parallel()
		reg := prometheus.NewRegistry()
		a := setup(t, nil, func(c *HandlerConfig) { c.Metrics = reg })
		b := setup(t, nil, func(c *HandlerConfig) { c.Metrics = reg })
		a.serve(request(t, "ping", "d-a", pingPayload(t)))
		b.serve(request(t, "ping", "d-b", pingPayload(t)))
		if n := testutil.ToFloat64(a.h.metrics.deliveries.WithLabelValues("ping", "", "enqueued")); n != 2 {
			t.Errorf("shared deliveries_total{ping} = %v, want 2", n)
		}
		names := map[string]bool{}
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			names[mf.GetName()] = true
		}
		for _, n := range []string{"klbot_webhook_deliveries_total", "klbot_webhook_handler_duration_seconds"} {
			if !names[n] {
				t.Errorf("registry lacks %s (has %v)", n, names)
			}
		}
	})
}

// Through a real server and client, as GitHub would send it.
func TestServer(t *testing.T) {
	t.Parallel()
	e := setup(t, nil, nil)
	srv := httptest.NewServer(e.h)
	t.Cleanup(srv.Close)
	req, err := githubfake.WebhookRequest(srv.URL, "pull_request", "d-server", testSecret,
		githubfake.MergedPullRequest("acme/infra", 3, headSHA))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || string(b) != `{"delivery":"d-server","outcome":"enqueued"}`+"\n" {
		t.Errorf("got %d %s, want 202 enqueued", resp.StatusCode, b)
	}
}
