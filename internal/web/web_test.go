package web_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/api"
	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store/sqlite"
	"github.com/kilolock/kilolock/internal/token"
	"github.com/kilolock/kilolock/internal/web"
)

const key = "0123456789abcdef0123456789abcdef-test-key"

// fixture is the pages over the real engine on SQLite, mounted in the
// API's handler as kl serve mounts them, with one state "acme/prod" and
// one run: a backend lock (an apply run made without Terraform).
type fixture struct {
	t      *testing.T
	url    string
	eng    *engine.Engine
	tokens token.Store
	run    string
	now    time.Time
	signer *web.Signer
}

func setup(t *testing.T) *fixture {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "kl.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{t: t, tokens: st, now: time.Now()}
	f.eng = engine.New(st, nil, slog.New(slog.DiscardHandler))
	if _, err := f.eng.InitState(t.Context(), "acme/prod", nil, "tester"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.eng.InitState(t.Context(), "other/dev", nil, "tester"); err != nil {
		t.Fatal(err)
	}
	lock, err := f.eng.LockBackend(t.Context(), engine.BackendLockInput{State: "acme/prod", Actor: "bob", Write: true,
		Info: engine.LockInfo{ID: "tf-1", Operation: engine.OperationTypeApply, Who: "bob@laptop", Version: "1.11.4"}})
	if err != nil {
		t.Fatal(err)
	}
	f.run = lock.Run.ID
	f.signer, err = web.NewSigner(key, time.Hour, func() time.Time { return f.now })
	if err != nil {
		t.Fatal(err)
	}
	pages, err := web.New(web.Options{Views: f.eng, Auth: &api.TokenAuth{Tokens: st}, Links: f.signer})
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.New(api.Options{Tokens: st, Web: pages, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// mint stores a read-only token for actor covering states and returns it.
func (f *fixture) mint(actor, states string) string {
	f.t.Helper()
	id, secret, hash, err := token.Generate()
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.tokens.CreateToken(f.t.Context(), token.New{ID: id, Actor: actor, ReadOnly: true, States: states, CreatedBy: "admin", Hash: hash}); err != nil {
		f.t.Fatal(err)
	}
	return secret.Reveal()
}

// get GETs path (relative to the server, or a full URL) with auth as the
// Authorization header ("" for none).
func (f *fixture) get(path, auth string) (int, string, http.Header) {
	f.t.Helper()
	u := path
	if strings.HasPrefix(path, "/") {
		u = f.url + path
	}
	req, err := http.NewRequestWithContext(f.t.Context(), http.MethodGet, u, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

// TestNothingWithoutAuth: every page and view is 401 without credentials,
// the pages with WWW-Authenticate Basic (the browser's sign-in) and a page
// that says how to sign in, the views with the API's error document.
func TestNothingWithoutAuth(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, p := range []string{"/runs/" + f.run, "/states", "/states/acme/prod", "/api/v1/states", "/api/v1/runs",
		"/api/v1/runs/" + f.run, "/api/v1/history?state=acme/prod", "/api/v1/status", "/api/v1/runs/" + f.run + "/why"} {
		code, body, h := f.get(p, "")
		if code != http.StatusUnauthorized || !strings.Contains(h.Get("WWW-Authenticate"), "Basic") {
			t.Errorf("GET %s without credentials: %d (WWW-Authenticate %q), want 401 asking for Basic auth", p, code, h.Get("WWW-Authenticate"))
		}
		if strings.HasPrefix(p, "/api/") {
			if !strings.Contains(body, api.SchemaError) {
				t.Errorf("GET %s: body %s, want the API's error document", p, body)
			}
		} else if !strings.Contains(body, "Sign in with a token of kl token create") {
			t.Errorf("GET %s: page does not say how to sign in:\n%s", p, body)
		}
		if strings.Contains(body, f.run) && !strings.HasPrefix(p, "/runs/") {
			t.Errorf("GET %s without credentials shows the run id", p)
		}
	}
}

// TestTokens: a read-only token opens the pages (Basic or bearer); one
// whose glob does not cover the run's state is 403 naming it; the states
// list shows only the states it covers.
func TestTokens(t *testing.T) {
	t.Parallel()
	f := setup(t)
	reader := f.mint("consumer", token.AllStates)
	for _, auth := range []string{"Bearer " + reader, basic("anyone", reader)} {
		code, body, h := f.get("/runs/"+f.run, auth)
		if code != http.StatusOK || !strings.Contains(body, f.run) || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
			t.Fatalf("GET /runs/RUN with %s: %d %s\n%s", strings.Fields(auth)[0], code, h.Get("Content-Type"), body)
		}
	}
	code, body, _ := f.get("/states/acme/prod", "Bearer "+reader)
	if code != http.StatusOK || !strings.Contains(body, "acme/prod") || !strings.Contains(body, f.run) {
		t.Errorf("GET /states/acme/prod: %d; want 200 naming the backend lock %s that holds it:\n%s", code, f.run, body)
	}
	narrow := f.mint("dev", "other/**")
	code, body, _ = f.get("/runs/"+f.run, "Bearer "+narrow)
	if code != http.StatusForbidden || !strings.Contains(body, "covers the states other/**, not acme/prod") {
		t.Errorf("GET /runs/RUN of acme/prod with a token for other/**: %d, want 403 naming the glob:\n%s", code, body)
	}
	code, body, _ = f.get("/states", "Bearer "+narrow)
	if code != http.StatusOK || strings.Contains(body, "acme/prod") || !strings.Contains(body, "other/dev") {
		t.Errorf("GET /states with a token for other/**: %d; want other/dev listed and acme/prod not:\n%s", code, body)
	}
	code, body, _ = f.get("/api/v1/runs", "Bearer "+narrow)
	if code != http.StatusForbidden || !strings.Contains(body, "?state=NAME") {
		t.Errorf("GET /api/v1/runs with a token for other/**: %d %s, want 403 asking for ?state=", code, body)
	}
	code, body, _ = f.get("/api/v1/runs?limit=0", "Bearer "+reader)
	if code != http.StatusBadRequest || !strings.Contains(body, "limit=0: want a whole number from 1 to 1000") {
		t.Errorf("GET /api/v1/runs?limit=0: %d %s, want 400 naming limit", code, body)
	}
	code, body, _ = f.get("/runs/not-a-run", "Bearer "+reader)
	if code != http.StatusBadRequest || !strings.Contains(body, "is not a run id") {
		t.Errorf("GET /runs/not-a-run: %d, want 400 saying it is not a run id:\n%s", code, body)
	}
	code, _, _ = f.get("/states/nope", "Bearer "+reader)
	if code != http.StatusNotFound {
		t.Errorf("GET /states/nope: %d, want 404", code)
	}
	code, body, h := f.get("/states/acme/prod/timeline.svg", "Bearer "+reader)
	if code != http.StatusOK || h.Get("Content-Type") != "image/svg+xml" || !strings.Contains(body, "<svg") || !strings.Contains(body, "backend lock") {
		t.Errorf("GET /states/acme/prod/timeline.svg: %d %s, want the SVG drawing the backend lock:\n%s", code, h.Get("Content-Type"), body)
	}
	for p, want := range map[string]string{
		"/states/acme/prod/timeline?from=yesterday": "from=yesterday: want a time in RFC 3339",
		"/states/acme/prod/timeline?run=xyz":        "run=xyz: not a run id",
		"/states/nope/timeline":                     "nope",
	} {
		if code, body, _ := f.get(p, "Bearer "+reader); code < 400 || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d, want an error page saying %q:\n%s", p, code, want, body)
		}
	}
	if code, _, _ := f.get("/states/acme/prod/timeline", ""); code != http.StatusUnauthorized {
		t.Errorf("GET the timeline without credentials: %d, want 401", code)
	}
	var doc struct {
		Schema string `json:"schema"`
		Run    struct {
			ID string `json:"id"`
		} `json:"run"`
	}
	_, body, _ = f.get("/api/v1/runs/"+f.run, "Bearer "+reader)
	if err := json.Unmarshal([]byte(body), &doc); err != nil || doc.Run.ID != f.run || !strings.HasPrefix(doc.Schema, "kilolock/run/") {
		t.Errorf("GET /api/v1/runs/RUN: %v %+v\n%s", err, doc, body)
	}
}

func basic(user, pass string) string {
	r, _ := http.NewRequest(http.MethodGet, "/", nil)
	r.SetBasicAuth(user, pass)
	return r.Header.Get("Authorization")
}

// TestSignedLinks: a signed link opens its one page without a token; the
// same signature on another run, another kind, a changed expiry or a cut
// signature is 403 saying the link was altered; once expired, its page
// says so and offers to sign in with a token, and shows nothing of the run.
func TestSignedLinks(t *testing.T) {
	t.Parallel()
	f := setup(t)
	link := f.signer.URL(f.url, web.KindRun, f.run)
	code, body, _ := f.get(link, "")
	if code != http.StatusOK || !strings.Contains(body, "Run "+f.run) || !strings.Contains(body, "opened with a signed link") {
		t.Fatalf("GET %s: %d, want the run's page:\n%s", link, code, body)
	}
	state := f.signer.URL(f.url, web.KindState, "acme/prod")
	if code, body, _ := f.get(state, ""); code != http.StatusOK || !strings.Contains(body, "State acme/prod") {
		t.Errorf("GET %s: %d, want the state's page:\n%s", state, code, body)
	}
	timeline := f.signer.TimelineURL(f.url, "acme/prod")
	if code, body, _ := f.get(timeline, ""); code != http.StatusOK || !strings.Contains(body, "Timeline of acme/prod") || !strings.Contains(body, "<svg") {
		t.Errorf("GET %s: %d, want the state's timeline:\n%s", timeline, code, body)
	}
	_, query, _ := strings.Cut(link, "?")
	other, err := f.eng.States(t.Context())
	if err != nil || len(other) != 2 {
		t.Fatal(err)
	}
	tampered := map[string]string{
		"another run":       "/runs/01J00000000000000000000000?" + query,
		"another kind":      "/states/" + f.run + "?" + query,
		"a later expiry":    "/runs/" + f.run + "?" + strings.Replace(query, "exp=", "exp=9", 1),
		"a cut signature":   "/runs/" + f.run + "?" + query[:len(query)-3],
		"no signature":      "/runs/" + f.run + "?" + strings.Split(query, "&")[0],
		"the state's query": "/states/other/dev?" + strings.SplitN(state, "?", 2)[1],
	}
	for what, p := range tampered {
		code, body, _ := f.get(p, "")
		if code != http.StatusForbidden || !strings.Contains(body, "this link was altered or was not signed by this server") {
			t.Errorf("a link with %s (%s): %d, want 403 saying it was altered:\n%s", what, p, code, body)
		}
	}
	// Signed with this key but for longer than any link it signs (the TTL
	// is capped at signing): refused, not honoured for years.
	future, err := web.NewSigner(key, time.Hour, func() time.Time { return f.now.Add(400 * 24 * time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	if code, body, _ := f.get(future.URL(f.url, web.KindRun, f.run), ""); code != http.StatusForbidden || !strings.Contains(body, "more than 366 days from now") {
		t.Errorf("a link expiring in 400 days: %d, want 403 saying no link lasts that long:\n%s", code, body)
	}
	f.now = f.now.Add(2 * time.Hour) // the link's hour has passed
	code, body, _ = f.get(link, "")
	if code != http.StatusForbidden || !strings.Contains(body, "this link expired at") || !strings.Contains(body, "Sign in with a token") ||
		!strings.Contains(body, `href="/runs/`+f.run+`"`) || strings.Contains(body, "bob@laptop") {
		t.Errorf("GET an expired link: %d, want 403 saying it expired, offering to sign in, showing nothing of the run:\n%s", code, body)
	}
	// A link signs a page, not the API.
	if code, _, _ := f.get("/api/v1/runs/"+f.run+"?"+query, ""); code != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/runs/RUN with a page's signature: %d, want 401", code)
	}
}

// TestSignerBadInput: a short key and a bad TTL are refused naming them.
func TestSignerBadInput(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		key  string
		ttl  time.Duration
		want string
	}{
		{"short", 0, "link signing key is 5 bytes: want at least 32"},
		{key, -time.Second, "link TTL -1s is negative"},
		{key, 400 * 24 * time.Hour, "link TTL 9600h0m0s is longer than 8784h0m0s"},
	} {
		if _, err := web.NewSigner(c.key, c.ttl, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewSigner(%d bytes, %s) = %v, want %q", len(c.key), c.ttl, err, c.want)
		}
	}
	s, err := web.NewSigner(key, 0, nil)
	if err != nil || s.TTL() != web.DefaultLinkTTL {
		t.Errorf("NewSigner with TTL 0: %v, TTL %s; want the default %s", err, s.TTL(), web.DefaultLinkTTL)
	}
}

// TestOtherMethods (fresh-eyes review): another method on a page or a
// view is 405 with Allow: GET, HEAD, not "no such page"; an unknown path
// stays 404.
func TestOtherMethods(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{http.MethodPost, "/runs/" + f.run, http.StatusMethodNotAllowed},
		{http.MethodDelete, "/states/acme/prod", http.StatusMethodNotAllowed},
		{http.MethodPut, "/api/v1/runs/" + f.run, http.StatusMethodNotAllowed},
		{http.MethodOptions, "/api/v1/status", http.StatusMethodNotAllowed},
		{http.MethodPost, "/nowhere", http.StatusNotFound},
		{http.MethodPost, "/api/v1/nowhere", http.StatusNotFound},
	} {
		req, err := http.NewRequestWithContext(t.Context(), tc.method, f.url+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, res.StatusCode, tc.want)
		}
		if tc.want == http.StatusMethodNotAllowed && res.Header.Get("Allow") != "GET, HEAD" {
			t.Errorf("%s %s: Allow %q, want GET, HEAD", tc.method, tc.path, res.Header.Get("Allow"))
		}
	}
}
