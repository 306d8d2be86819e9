package api

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/store/sqlite"
	"github.com/kilolock/kilolock/internal/token"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// stores opens a fresh store of each kind, closed at cleanup.
var stores = map[string]func(t *testing.T) token.Store{
	"sqlite": func(t *testing.T) token.Store {
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "kl.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	},
	"postgres": func(t *testing.T) token.Store {
		s, err := postgres.Open(t.Context(), pgtest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	},
}

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fixture is a real API on loopback over a real store, with a test route
// that does what the backend's write routes do: authenticate, Allow, read
// the body.
type fixture struct {
	t      *testing.T
	tokens token.Store
	url    string
	log    *lockedBuffer
}

// setup starts the API over newStore's store with o (Tokens and Logger
// filled in).
func setup(t *testing.T, newStore func(t *testing.T) token.Store, o Options) *fixture {
	t.Helper()
	f := &fixture{t: t, tokens: newStore(t), log: &lockedBuffer{}}
	o.Tokens = f.tokens
	o.Logger = slog.New(slog.NewJSONHandler(f.log, nil))
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	access := func(a Access) http.Handler {
		return s.authenticated(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := IdentityFrom(r.Context()).Allow(r.PathValue("name"), a); err != nil {
				writeError(w, r, err)
				return
			}
			body, err := io.ReadAll(r.Body)
			if err != nil {
				writeError(w, r, err)
				return
			}
			_, _ = w.Write([]byte("read " + strconv.Itoa(len(body))))
		}))
	}
	s.mux.Handle("POST /test/states/{name...}", access(Write))
	s.mux.Handle("GET /test/states/{name...}", access(Read))
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// mint stores a token for actor and returns its string.
func (f *fixture) mint(actor string, change func(*token.New)) string {
	f.t.Helper()
	id, secret, hash, err := token.Generate()
	if err != nil {
		f.t.Fatal(err)
	}
	n := token.New{ID: id, Actor: actor, States: token.AllStates, CreatedBy: "admin", Hash: hash}
	if change != nil {
		change(&n)
	}
	if _, err := f.tokens.CreateToken(f.t.Context(), n); err != nil {
		f.t.Fatal(err)
	}
	return secret.Reveal()
}

// do sends method path with the Authorization header auth ("" for none)
// and body, and returns the status and body.
func (f *fixture) do(method, path, auth string, body io.Reader) (int, string, http.Header) {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.t.Context(), method, f.url+path, body)
	if err != nil {
		f.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func basic(user, pass string) string {
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth(user, pass)
	return r.Header.Get("Authorization")
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	for kind, newStore := range stores {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f := setup(t, newStore, Options{})
			if code, body, _ := f.do("GET", "/healthz", "", nil); code != 200 || body != "ok\n" {
				t.Errorf("GET /healthz = %d %q, want 200 ok", code, body)
			}
			code, body, _ := f.do("GET", "/nowhere", "", nil)
			if code != 404 || !strings.Contains(body, `"no such route: GET /nowhere"`) || !strings.Contains(body, SchemaError) {
				t.Errorf("GET /nowhere = %d %s, want a 404 error document naming the route", code, body)
			}
		})
	}
}

func TestAuthenticate(t *testing.T) {
	t.Parallel()
	for kind, newStore := range stores {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			later := time.Now().Add(2 * time.Hour)
			clock := time.Now
			var mu sync.Mutex
			f := setup(t, newStore, Options{Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return clock() }})
			tok := f.mint("ci-deployer", func(n *token.New) { n.States = "acme/**"; n.TTL = time.Hour })
			revoked := f.mint("gone", nil)
			revokedID, _ := token.ParseID(revoked)
			if _, err := f.tokens.RevokeToken(t.Context(), revokedID, "admin"); err != nil {
				t.Fatal(err)
			}
			id, _ := token.ParseID(tok)
			wrongSecret := tok[:len(tok)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(tok, "AA")]
			unknown := func() string { _, s, _, _ := token.Generate(); return s.Reveal() }()

			cases := map[string]struct {
				auth     string
				wantCode int
				want     string
			}{
				"bearer":                     {"Bearer " + tok, 200, `"actor": "ci-deployer"`},
				"bearer, lower case":         {"bearer " + tok, 200, `"token": "` + id + `"`},
				"basic, any username":        {basic("whoever", tok), 200, `"states": "acme/**"`},
				"basic, the actor":           {basic("ci-deployer", tok), 200, `"read_only": false`},
				"basic, no username":         {basic("", tok), 200, `"expires_at"`},
				"no credentials":             {"", 401, "no token: send a token of kl token create"},
				"basic, no password":         {basic("ci-deployer", ""), 401, "without a password"},
				"basic, not base64":          {"Basic !!!", 401, "not base64"},
				"empty bearer":               {"Bearer ", 401, "empty bearer token"},
				"other scheme":               {"Digest abc", 401, `unknown authorization scheme \"Digest\"`},
				"a password, not a token":    {basic("ci", "hunter2"), 401, "not a Kilolock token"},
				"unknown token":              {"Bearer " + unknown, 401, "unknown token"},
				"known id, wrong secret":     {"Bearer " + wrongSecret, 401, "unknown token"},
				"revoked":                    {"Bearer " + revoked, 401, "token " + revokedID + " was revoked by admin"},
				"token in the wrong header?": {"Token " + tok, 401, "unknown authorization scheme"},
			}
			for name, c := range cases {
				code, body, h := f.do("GET", "/api/v1/whoami", c.auth, nil)
				if code != c.wantCode || !strings.Contains(body, c.want) {
					t.Errorf("%s: GET /api/v1/whoami = %d %s; want %d with %q", name, code, body, c.wantCode, c.want)
				}
				if code == 401 && len(h.Values("WWW-Authenticate")) != 2 {
					t.Errorf("%s: 401 without WWW-Authenticate for Basic and Bearer: %v", name, h.Values("WWW-Authenticate"))
				}
			}
			mu.Lock()
			clock = func() time.Time { return later }
			mu.Unlock()
			if code, body, _ := f.do("GET", "/api/v1/whoami", "Bearer "+tok, nil); code != 401 || !strings.Contains(body, "token "+id+" expired at") {
				t.Errorf("expired token: %d %s, want 401 saying it expired", code, body)
			}
			// Whatever was sent, no secret reaches the log.
			for _, secret := range []string{tok, revoked, unknown, wrongSecret} {
				if strings.Contains(f.log.String(), secret[len(token.Prefix)+27:]) {
					t.Errorf("a secret is in the request log:\n%s", f.log.String())
				}
			}
		})
	}
}

func TestAllow(t *testing.T) {
	t.Parallel()
	for kind, newStore := range stores {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f := setup(t, newStore, Options{})
			writer := f.mint("deployer", func(n *token.New) { n.States = "acme/*" })
			reader := f.mint("consumer", func(n *token.New) { n.ReadOnly = true })
			readerID, _ := token.ParseID(reader)
			cases := map[string]struct {
				method, state, tok string
				wantCode           int
				want               string
			}{
				"writer writes":                {"POST", "acme/prod", writer, 200, "read"},
				"writer reads":                 {"GET", "acme/prod", writer, 200, "read"},
				"writer, state outside glob":   {"POST", "other/prod", writer, 403, "covers the states acme/*, not other/prod"},
				"writer, * stops at a slash":   {"GET", "acme/infra/prod", writer, 403, "not acme/infra/prod"},
				"read-only reads":              {"GET", "acme/infra/prod", reader, 200, "read"},
				"read-only writes":             {"POST", "acme/prod", reader, 403, "token " + readerID + " (actor consumer) is read-only"},
				"read-only writes, basic auth": {"POST", "acme/prod", reader, 403, "is read-only"},
			}
			for name, c := range cases {
				auth := "Bearer " + c.tok
				if strings.Contains(name, "basic") {
					auth = basic("consumer", c.tok)
				}
				code, body, _ := f.do(c.method, "/test/states/"+c.state, auth, strings.NewReader("{}"))
				if code != c.wantCode || !strings.Contains(body, c.want) {
					t.Errorf("%s: %s %s = %d %s; want %d with %q", name, c.method, c.state, code, body, c.wantCode, c.want)
				}
			}
		})
	}
}

func TestBodyCap(t *testing.T) {
	t.Parallel()
	for kind, newStore := range stores {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f := setup(t, newStore, Options{MaxBody: 1024})
			writer := f.mint("deployer", nil)
			big := strings.Repeat("x", 1025)
			// Declared length over the cap: refused before authentication
			// reads anything.
			code, body, _ := f.do("POST", "/test/states/acme/prod", "", strings.NewReader(big))
			if code != 413 || !strings.Contains(body, "request body too large: the limit is 1024 bytes (1024 bytes)") {
				t.Errorf("declared length over the cap: %d %s, want 413 naming the limit", code, body)
			}
			// No declared length (chunked): refused once it passes the cap.
			code, body, _ = f.do("POST", "/test/states/acme/prod", "Bearer "+writer, io.MultiReader(strings.NewReader(big)))
			if code != 413 || !strings.Contains(body, "the limit is 1024 bytes") {
				t.Errorf("chunked over the cap: %d %s, want 413 naming the limit", code, body)
			}
			if code, body, _ = f.do("POST", "/test/states/acme/prod", "Bearer "+writer, io.MultiReader(strings.NewReader(big[:1024]))); code != 200 {
				t.Errorf("chunked at the cap: %d %s, want 200", code, body)
			}
		})
	}
}

func TestRequestLog(t *testing.T) {
	t.Parallel()
	f := setup(t, stores["sqlite"], Options{})
	tok := f.mint("ci-deployer", nil)
	id, _ := token.ParseID(tok)
	f.do("GET", "/api/v1/whoami?ID=lock-1", basic("ci-deployer", tok), nil)
	f.do("GET", "/api/v1/whoami", "", nil)
	var recs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(f.log.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		recs = append(recs, m)
	}
	if len(recs) != 2 {
		t.Fatalf("want 2 records, got:\n%s", f.log.String())
	}
	ok, refused := recs[0], recs[1]
	for k, want := range map[string]any{"msg": "http request", "level": "INFO", "method": "GET", "path": "/api/v1/whoami",
		"status": 200.0, "actor": "ci-deployer", "token": id} {
		if ok[k] != want {
			t.Errorf("authenticated request's record: %s = %v, want %v (%v)", k, ok[k], want, ok)
		}
	}
	for k, want := range map[string]any{"level": "WARN", "status": 401.0} {
		if refused[k] != want {
			t.Errorf("refused request's record: %s = %v, want %v (%v)", k, refused[k], want, refused)
		}
	}
	if r, _ := refused["reason"].(string); !strings.HasPrefix(r, "no token") {
		t.Errorf("refused request's record has reason %q, want the 401's", r)
	}
	if strings.Contains(f.log.String(), tok[len(token.Prefix)+27:]) || strings.Contains(f.log.String(), "lock-1") {
		t.Errorf("the log holds the secret or the query:\n%s", f.log.String())
	}
}

// TestJSONDocumented checks that docs/json.md documents the API's
// documents.
func TestJSONDocumented(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "json.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{SchemaWhoami, SchemaError} {
		if !strings.Contains(string(b), "### `"+s+"`") {
			t.Errorf("docs/json.md has no section for %s", s)
		}
	}
}
