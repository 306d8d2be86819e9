package webhook

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kilolock/kilolock/internal/github/githubfake"
)

// Secrets of a rotation: GitHub's old one, and the new one it is changed to.
const (
	oldSecret = "kl-rotation-old-secret-31c0"
	newSecret = "kl-rotation-new-secret-98e4"
)

// signedWith is a delivery of body as event signed with secret.
func signedWith(t *testing.T, secret, event, delivery string, body []byte) *http.Request {
	t.Helper()
	req, err := githubfake.WebhookRequest(hookURL, event, delivery, secret, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestSecretRotation: the webhook secret is changed without a missed
// delivery (docs/klbot.md "Rotating the webhook secret and the App's
// private key"). Replicas run with the new secret and the old one as
// PreviousSecret; GitHub signs with the old one until its setting is
// saved, then with the new one. Real payloads, each signed with either
// secret, verify; one signed with a third is refused; which secret
// matched is counted and logged, and neither is ever printed.
func TestSecretRotation(t *testing.T) {
	t.Parallel()
	deliveries := map[string][]byte{
		"pull_request":  githubfake.PullRequestEvent("pull_request.opened.0", "acme/infra", 7, headSHA),
		"issue_comment": githubfake.IssueCommentOnPR("acme/infra", 7, "alice", "/kl apply"),
		"check_run":     githubfake.RequestedAction("acme/infra", "run-1", headSHA, "alice", "kl-apply"),
		"ping":          pingPayload(t),
	}
	// Before: one secret, the old one. A delivery signed with the new one is refused.
	before := setup(t, nil, func(c *HandlerConfig) { c.Secret = []byte(oldSecret) })
	if rec := before.serve(signedWith(t, newSecret, "ping", "d-before", pingPayload(t))); rec.Code != http.StatusUnauthorized {
		t.Fatalf("one secret, a delivery signed with another: status %d, want 401", rec.Code)
	}
	if strings.Contains(before.logs.String(), `"secret"`) {
		t.Errorf("without a previous secret the log names the secret that matched: %s", before.logs)
	}

	during := setup(t, nil, func(c *HandlerConfig) {
		c.Secret, c.PreviousSecret = []byte(newSecret), []byte(oldSecret)
	})
	n := 0
	for event, body := range deliveries {
		for _, secret := range []string{oldSecret, newSecret} {
			n++
			rec := during.serve(signedWith(t, secret, event, "d-"+event+"-"+which(secret), body))
			if rec.Code != http.StatusAccepted {
				t.Errorf("%s signed with the %s secret: status %d %s, want 202", event, which(secret), rec.Code, rec.Body)
			}
		}
		rec := during.serve(signedWith(t, "a third secret", event, "d-"+event+"-third", body))
		if rec.Code != http.StatusUnauthorized || !strings.Contains(decode(t, rec).Error, "nor with the previous one") {
			t.Errorf("%s signed with neither secret: status %d %s, want 401 naming both", event, rec.Code, rec.Body)
		}
	}
	if got := len(during.sink.Calls()); got != n {
		t.Errorf("sink got %d deliveries, want %d", got, n)
	}
	for _, label := range []string{secretCurrent, secretPrevious} {
		if got := testutil.ToFloat64(during.h.metrics.verified.WithLabelValues(label)); got != float64(len(deliveries)) {
			t.Errorf("signature_verified_total{secret=%q} = %v, want %d", label, got, len(deliveries))
		}
	}
	logged := map[string]int{}
	for _, line := range during.logs.lines(t) {
		if s, ok := line["secret"].(string); ok {
			logged[s]++
		}
	}
	if logged[secretCurrent] != len(deliveries) || logged[secretPrevious] != len(deliveries) {
		t.Errorf("log lines by secret %v, want %d current and %d previous", logged, len(deliveries), len(deliveries))
	}
	for _, s := range []string{oldSecret, newSecret} {
		if strings.Contains(during.logs.String(), s) {
			t.Errorf("the log holds a secret: %s", during.logs)
		}
	}

	// After: the previous secret removed, a delivery signed with it is refused.
	after := setup(t, nil, func(c *HandlerConfig) { c.Secret = []byte(newSecret) })
	if rec := after.serve(signedWith(t, oldSecret, "ping", "d-after", pingPayload(t))); rec.Code != http.StatusUnauthorized {
		t.Errorf("the previous secret removed, a delivery signed with it: status %d, want 401", rec.Code)
	}
}

func which(secret string) string {
	if secret == oldSecret {
		return "previous"
	}
	return "current"
}

// TestSecretRotationSharedFixtures: every real payload of
// shared/fixtures/github/webhooks signed with the previous secret is
// verified (the answer is what it would be with the current one: never a
// 401), and refused signed with neither.
func TestSecretRotationSharedFixtures(t *testing.T) {
	t.Parallel()
	entries, err := os.ReadDir(sharedWebhooks)
	if err != nil {
		t.Skipf("shared fixtures not found: %v", err)
	}
	e := setup(t, nil, func(c *HandlerConfig) { c.Secret, c.PreviousSecret = []byte(newSecret), []byte(oldSecret) })
	for _, ent := range entries {
		body, err := os.ReadFile(filepath.Join(sharedWebhooks, ent.Name()))
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(ent.Name(), ".json")
		event := githubfake.Event(name)
		old := e.serve(signedWith(t, oldSecret, event, "d-old-"+name, body))
		cur := e.serve(signedWith(t, newSecret, event, "d-new-"+name, body))
		if old.Code == http.StatusUnauthorized || old.Code != cur.Code {
			t.Errorf("%s: signed with the previous secret %d, with the current one %d; want the same, not 401", name, old.Code, cur.Code)
		}
		if rec := e.serve(signedWith(t, "a third secret", event, "d-third-"+name, body)); rec.Code != http.StatusUnauthorized {
			t.Errorf("%s signed with neither secret: status %d, want 401", name, rec.Code)
		}
	}
	if got := testutil.ToFloat64(e.h.metrics.verified.WithLabelValues(secretPrevious)); got != float64(len(entries)) {
		t.Errorf("signature_verified_total{secret=previous} = %v, want %d", got, len(entries))
	}
}

// TestPreviousSecretConfig: a previous secret equal to the secret is
// refused (a rotation that changes nothing is a mistake), and an empty one
// is none (an empty HMAC key would verify a signature anyone can make).
func TestPreviousSecretConfig(t *testing.T) {
	t.Parallel()
	_, err := NewHandler(HandlerConfig{Secret: []byte(testSecret), PreviousSecret: []byte(testSecret), Sink: &fakeSink{}})
	if err == nil || !strings.Contains(err.Error(), "the previous webhook secret is the current one") {
		t.Fatalf("NewHandler with PreviousSecret = Secret: %v", err)
	}
	e := setup(t, nil, func(c *HandlerConfig) { c.PreviousSecret = []byte{} })
	req := signedWith(t, testSecret, "ping", "d-empty-key", pingPayload(t))
	req.Header.Set(SignatureHeader, githubfake.Sign("", pingPayload(t)))
	rec := e.serve(req)
	if rec.Code != http.StatusUnauthorized || strings.Contains(decode(t, rec).Error, "previous") {
		t.Errorf("an empty PreviousSecret, a delivery signed with the empty key: status %d %s, want 401 without a previous secret", rec.Code, rec.Body)
	}
}
