package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github/githubfake"
	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/token"
)

// TestAPIMounted: klbot serves the HTTP API (ADR 0054) on its own
// listener, beside the webhook, over its store: a token made in the
// shared store (as `kl token create` with KL_STORE=KLBOT_DATABASE_URL
// makes one) is known to GET /api/v1/whoami; no token is 401; an unknown
// API route is the API's 404 document; an over-large body is 413 at
// KLBOT_MAX_BODY_MIB; Terraform's http backend serves a state of the
// store, over klbot's engine; klbot's own /healthz and /webhook stay klbot's.
func TestAPIMounted(t *testing.T) {
	t.Parallel()
	tfBin := terraformBinary(t)
	fake := githubfake.New(t)
	key := fake.NewAppKey(appID)
	fake.AddInstallation(1, appID, repo)
	dsn := pgtest.DSN(t)
	h := start(t, fake, key, dsn, tfBin, "KLBOT_MAX_BODY_MIB=1")

	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id, secret, hash, err := token.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateToken(ctx, token.New{ID: id, Actor: "ci-reader", ReadOnly: true, States: token.AllStates, CreatedBy: "alice", Hash: hash}); err != nil {
		t.Fatal(err)
	}

	do := func(method, path, tok string, body io.Reader) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, h.url+path, body)
		if err != nil {
			t.Fatal(err)
		}
		if tok != "" {
			req.SetBasicAuth("terraform", tok)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}

	code, body := do("GET", "/api/v1/whoami", secret.Reveal(), nil)
	if code != http.StatusOK {
		t.Fatalf("GET /api/v1/whoami with a token of the shared store: %d %s, want 200", code, body)
	}
	var who struct {
		Schema, Actor, Token string
		ReadOnly             bool `json:"read_only"`
	}
	if err := json.Unmarshal([]byte(body), &who); err != nil {
		t.Fatalf("whoami: %v in %s", err, body)
	}
	if who.Schema != "kilolock/whoami/v1" || who.Actor != "ci-reader" || who.Token != id || !who.ReadOnly {
		t.Errorf("whoami through klbot = %+v, want the token's actor ci-reader, id %s, read-only", who, id)
	}
	if code, body := do("GET", "/api/v1/whoami", "", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/whoami without a token: %d %s, want 401", code, body)
	}
	if code, body := do("GET", "/api/v1/nothing", "", nil); code != http.StatusNotFound || !strings.Contains(body, "kilolock/api-error/v1") {
		t.Errorf("GET /api/v1/nothing: %d %s, want the API's 404 document", code, body)
	}
	big := strings.NewReader(strings.Repeat("x", 1<<20+1))
	if code, body := do("POST", "/api/v1/whoami", secret.Reveal(), big); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "1 MiB") {
		t.Errorf("a body over KLBOT_MAX_BODY_MIB=1: %d %s, want 413 naming the limit", code, body)
	}
	// Terraform's http backend, over klbot's engine: a state made in the
	// shared store is served with its lineage; a read-only token may not
	// lock it for an apply.
	if _, err := engine.New(st, nil, nil).InitState(ctx, "prod/net", nil, "alice"); err != nil {
		t.Fatal(err)
	}
	code, body = do("GET", "/tf/states/prod/net", secret.Reveal(), nil)
	if code != http.StatusOK || !strings.Contains(body, `"lineage"`) {
		t.Errorf("GET /tf/states/prod/net through klbot: %d %s, want 200 with the head's document", code, body)
	}
	lock := strings.NewReader(`{"ID":"a1b2","Operation":"OperationTypeApply","Who":"ci@runner","Version":"1.11.4"}`)
	if code, body := do("LOCK", "/tf/states/prod/net", secret.Reveal(), lock); code != http.StatusForbidden {
		t.Errorf("LOCK for an apply with a read-only token through klbot: %d %s, want 403", code, body)
	}
	if code, body := do("GET", "/healthz", "", nil); code != http.StatusOK || body != "ok\n" {
		t.Errorf("klbot's /healthz: %d %q, want 200 ok", code, body)
	}
	if code, _ := do("POST", "/webhook", "", strings.NewReader("{}")); code != http.StatusUnauthorized {
		t.Errorf("an unsigned POST /webhook: %d, want 401 (the webhook stays klbot's)", code)
	}
}
