package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/github/githubfake"
	"github.com/kilolock/kilolock/internal/store/pgtest"
)

// TestWebhookSecretRotation: klbot started with a new KLBOT_WEBHOOK_SECRET
// and the old one as KLBOT_WEBHOOK_SECRET_PREVIOUS verifies a real
// delivery signed with either (GitHub signs with the old secret until its
// setting is saved), refuses one signed with neither, and counts which
// secret matched on /metrics, so the operator sees when the old one is no
// longer used (docs/klbot.md "Rotating the webhook secret and the App's
// private key").
func TestWebhookSecretRotation(t *testing.T) {
	t.Parallel()
	const newSecret = "kl-e2e-new-webhook-secret-5a1d"
	tfBin := terraformBinary(t)
	fake := githubfake.New(t)
	key := fake.NewAppKey(appID)
	fake.AddInstallation(1, appID, repo)
	h := start(t, fake, key, pgtest.DSN(t), tfBin,
		"KLBOT_WEBHOOK_SECRET="+newSecret, "KLBOT_WEBHOOK_SECRET_PREVIOUS="+secret)

	body := githubfake.IssueCommentOnPR(repo, 1, "alice", "looks good to me")
	post := func(id, signWith string) int {
		t.Helper()
		req, err := githubfake.WebhookRequest(h.url+"/webhook", "issue_comment", id, signWith, body)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := post("rot-old", secret); code/100 != 2 {
		t.Errorf("signed with the previous secret: status %d, want 2xx", code)
	}
	if code := post("rot-new", newSecret); code/100 != 2 {
		t.Errorf("signed with the new secret: status %d, want 2xx", code)
	}
	if code := post("rot-other", "neither"); code != http.StatusUnauthorized {
		t.Errorf("signed with neither secret: status %d, want 401", code)
	}

	res, err := http.Get(h.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{
		`klbot_webhook_signature_verified_total{secret="current"} 1`,
		`klbot_webhook_signature_verified_total{secret="previous"} 1`,
		`klbot_webhook_delivery_rejected_total{reason="signature_mismatch"} 1`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, s := range []string{secret, newSecret} {
		if strings.Contains(string(metrics), s) {
			t.Errorf("/metrics holds a secret")
		}
	}
}
