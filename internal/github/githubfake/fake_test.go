package githubfake

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

const (
	testRepo  = "acme/infra"
	testToken = "ghp_test_token"
	sha1      = "0123456789abcdef0123456789abcdef01234567"
)

func setup(t *testing.T) *Fake {
	t.Helper()
	f := New(t)
	f.AddRepo(testRepo)
	f.AddToken(testToken, "github-actions[bot]")
	f.AddPR(testRepo, PR{Number: 7, HeadSHA: sha1, Files: []string{"main.tf"}})
	return f
}

// do sends a request to the fake and returns status, headers and decoded body.
func do(t *testing.T, f *Fake, method, path, token, body string) (int, http.Header, any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.APIURL()+strings.TrimPrefix(path, "/"), rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "token "+token)
	}
	client := f.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if len(b) > 0 && strings.Contains(resp.Header.Get("Content-Type"), "json") {
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("decoding %s: %v", b, err)
		}
	}
	return resp.StatusCode, resp.Header, v
}

func TestEveryOperationIsServed(t *testing.T) {
	t.Parallel()
	api, err := LoadAPI()
	if err != nil {
		t.Fatal(err)
	}
	if len(api.Operations) < 20 {
		t.Fatalf("loaded %d operations", len(api.Operations))
	}
	for _, op := range api.Operations {
		if handlers[op.ID] == nil {
			t.Errorf("operation %s (%s %s) has no handler", op.ID, op.Method, op.Path)
		}
	}
}

func TestRejectsLikeGitHub(t *testing.T) {
	t.Parallel()
	f := setup(t)
	long := strings.Repeat("x", 21)
	tests := map[string]struct {
		method, path, token, body string
		status                    int
		field, code               string // of the first error, for 422
	}{
		"unknown route":               {"GET", "/repos/acme/infra/nonsense", testToken, "", 404, "", ""},
		"unknown method":              {"DELETE", "/repos/acme/infra/check-runs", testToken, "", 404, "", ""},
		"non-integer id":              {"GET", "/repos/acme/infra/check-runs/abc", testToken, "", 404, "", ""},
		"no credentials":              {"GET", "/repos/acme/infra/pulls/7", "", "", 401, "", ""},
		"bad token":                   {"GET", "/repos/acme/infra/pulls/7", "nope", "", 401, "", ""},
		"missing required field":      {"POST", "/repos/acme/infra/check-runs", testToken, `{"name":"kl"}`, 422, "head_sha", "missing_field"},
		"empty body, required fields": {"POST", "/repos/acme/infra/check-runs", testToken, ``, 422, "name", "missing_field"},
		"string over maxLength": {"POST", "/repos/acme/infra/check-runs", testToken,
			`{"name":"kl","head_sha":"` + sha1 + `","actions":[{"label":"` + long + `","description":"d","identifier":"i"}]}`, 422, "actions[0].label", "invalid"},
		"value outside enum": {"POST", "/repos/acme/infra/check-runs", testToken,
			`{"name":"kl","head_sha":"` + sha1 + `","status":"done"}`, 422, "status", "invalid"},
		"more items than maxItems": {"POST", "/repos/acme/infra/check-runs", testToken,
			`{"name":"kl","head_sha":"` + sha1 + `","actions":[` + strings.TrimSuffix(strings.Repeat(`{"label":"a","description":"d","identifier":"i"},`, 4), ",") + `]}`, 422, "actions", "invalid"},
		"wrong JSON type": {"POST", "/repos/acme/infra/check-runs", testToken, `{"name":5,"head_sha":"` + sha1 + `"}`, 422, "name", "invalid"},
		"output without summary": {"POST", "/repos/acme/infra/check-runs", testToken,
			`{"name":"kl","head_sha":"` + sha1 + `","output":{"title":"t"}}`, 422, "output.summary", "missing_field"},
		"bad date-time": {"POST", "/repos/acme/infra/check-runs", testToken,
			`{"name":"kl","head_sha":"` + sha1 + `","started_at":"yesterday"}`, 422, "started_at", "invalid"},
		"stale conclusion": {"POST", "/repos/acme/infra/check-runs", testToken,
			`{"name":"kl","head_sha":"` + sha1 + `","conclusion":"stale"}`, 422, "conclusion", "invalid"},
		"not a commit":          {"POST", "/repos/acme/infra/check-runs", testToken, `{"name":"kl","head_sha":"main"}`, 422, "head_sha", "custom"},
		"problems parsing JSON": {"POST", "/repos/acme/infra/check-runs", testToken, `{"name":`, 400, "", ""},
		"valid check run": {"POST", "/repos/acme/infra/check-runs", testToken,
			`{"name":"kl","head_sha":"` + sha1 + `","actions":[{"label":"Apply","description":"d","identifier":"apply"}]}`, 201, "", ""},
		"comment too long": {"POST", "/repos/acme/infra/issues/7/comments", testToken,
			`{"body":"` + strings.Repeat("é", 65537) + `"}`, 422, "data", "unprocessable"},
		"comment at the limit": {"POST", "/repos/acme/infra/issues/7/comments", testToken,
			`{"body":"` + strings.Repeat("é", 65536) + `"}`, 201, "", ""},
		"comment on unknown issue": {"POST", "/repos/acme/infra/issues/99/comments", testToken, `{"body":"x"}`, 404, "", ""},
		"reaction outside enum":    {"POST", "/repos/acme/infra/issues/comments/1/reactions", testToken, `{"content":"wave"}`, 422, "content", "invalid"},
		"query enum":               {"GET", "/repos/acme/infra/commits/" + sha1 + "/check-runs?status=done", testToken, "", 422, "status", "invalid"},
		"nullable accepts null":    {"POST", "/repos/acme/infra/statuses/" + sha1, testToken, `{"state":"success","description":null}`, 201, "", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			status, _, body := do(t, f, tc.method, tc.path, tc.token, tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d; body %v", status, tc.status, body)
			}
			if tc.status != 422 {
				return
			}
			m := body.(map[string]any)
			if m["message"] != "Validation Failed" || m["documentation_url"] == nil {
				t.Errorf("422 body %v: want GitHub's shape", m)
			}
			errs := m["errors"].([]any)
			first := errs[0].(map[string]any)
			if first["field"] != tc.field || first["code"] != tc.code {
				t.Errorf("first error %v, want field %s code %s", first, tc.field, tc.code)
			}
		})
	}
}

func TestUpdateCheckRunAnyOf(t *testing.T) {
	t.Parallel()
	f := setup(t)
	status, _, body := do(t, f, "POST", "/repos/acme/infra/check-runs", testToken, `{"name":"kl","head_sha":"`+sha1+`"}`)
	if status != 201 {
		t.Fatalf("create: %d %v", status, body)
	}
	id := int64(body.(map[string]any)["id"].(float64))
	path := fmt.Sprintf("/repos/acme/infra/check-runs/%d", id)
	if status, _, body := do(t, f, "PATCH", path, testToken, `{"name":"kl","status":"completed"}`); status != 422 {
		t.Fatalf("completed without conclusion: %d %v", status, body)
	}
	status, _, body = do(t, f, "PATCH", path, testToken, `{"name":"kl","conclusion":"success","output":{"title":"t","summary":"s"}}`)
	if status != 200 {
		t.Fatalf("update: %d %v", status, body)
	}
	m := body.(map[string]any)
	if m["status"] != "completed" || m["conclusion"] != "success" || m["output"].(map[string]any)["summary"] != "s" {
		t.Errorf("answer %v", m)
	}
	if _, ok := m["check_suite"]; !ok {
		t.Errorf("answer lost the example's other fields: %v", m)
	}
	runs := f.CheckRuns(testRepo)
	if len(runs) != 1 || runs[0].Updates != 1 || runs[0].Summary != "s" {
		t.Errorf("stored %+v", runs)
	}
}

func TestPaginationLinks(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for i := range 75 {
		f.AddComment(testRepo, 7, "someone", fmt.Sprint("comment ", i))
	}
	status, hdr, body := do(t, f, "GET", "/repos/acme/infra/issues/7/comments?per_page=30&page=2", testToken, "")
	if status != 200 || len(body.([]any)) != 30 {
		t.Fatalf("page 2: %d, %d items", status, len(body.([]any)))
	}
	link := hdr.Get("Link")
	for _, want := range []string{`page=3&per_page=30>; rel="next"`, `page=3&per_page=30>; rel="last"`, `page=1&per_page=30>; rel="prev"`} {
		if !strings.Contains(link, want) {
			t.Errorf("Link %q lacks %q", link, want)
		}
	}
	_, hdr, body = do(t, f, "GET", "/repos/acme/infra/issues/7/comments?per_page=30&page=3", testToken, "")
	if len(body.([]any)) != 15 || strings.Contains(hdr.Get("Link"), `rel="next"`) {
		t.Errorf("last page: %d items, Link %q", len(body.([]any)), hdr.Get("Link"))
	}
}

func TestFailNext(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.FailNext("GET", "/repos/*/*/pulls/*", 502, nil)
	f.FailNext("GET", "/repos/*/*/pulls/*", 403, http.Header{"Retry-After": {"1"}})
	if status, _, _ := do(t, f, "GET", "/repos/acme/infra/pulls/7", testToken, ""); status != 502 {
		t.Fatalf("first: %d", status)
	}
	status, hdr, body := do(t, f, "GET", "/repos/acme/infra/pulls/7", testToken, "")
	if status != 403 || hdr.Get("Retry-After") != "1" || !strings.Contains(body.(map[string]any)["message"].(string), "secondary rate limit") {
		t.Fatalf("second: %d %v %v", status, hdr, body)
	}
	if status, _, _ := do(t, f, "GET", "/repos/acme/infra/pulls/7", testToken, ""); status != 200 {
		t.Fatalf("third: %d", status)
	}
	f.Fail(Failure{Method: "POST", Path: "/repos/acme/infra/issues/7/comments", Status: 502, AfterHandling: true})
	if status, _, _ := do(t, f, "POST", "/repos/acme/infra/issues/7/comments", testToken, `{"body":"hi"}`); status != 502 {
		t.Fatalf("after handling: %d", status)
	}
	if n := len(f.Comments(testRepo, 7)); n != 1 {
		t.Errorf("AfterHandling: %d comments, want the effect to have happened once", n)
	}
	reqs := f.Requests("GET", "/repos/acme/infra/pulls/")
	if len(reqs) != 3 || reqs[0].Status != 502 || reqs[1].Status != 403 || reqs[2].Status != 200 {
		t.Errorf("request log %+v", reqs)
	}
}

func TestTarballRedirect(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.SetTarball(testRepo, sha1, []byte("tgz"))
	status, hdr, _ := do(t, f, "GET", "/repos/acme/infra/tarball/"+sha1, testToken, "")
	if status != 302 {
		t.Fatalf("status %d", status)
	}
	resp, err := http.Get(hdr.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "tgz" {
		t.Errorf("link: %d %q", resp.StatusCode, b)
	}
	if status, _, _ := do(t, f, "GET", "/repos/acme/infra/tarball/main", testToken, ""); status != 404 {
		t.Errorf("unknown ref: %d", status)
	}
}

// signJWT signs claims with RS256 (or the given alg name, signature still RS256).
func signJWT(t *testing.T, keyPEM []byte, alg string, claims map[string]any) string {
	t.Helper()
	block, _ := pem.Decode(keyPEM)
	key, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signing := enc(map[string]any{"alg": alg, "typ": "JWT"}) + "." + enc(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(nil, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func TestInstallationTokenJWT(t *testing.T) {
	t.Parallel()
	f := setup(t)
	key := f.NewAppKey(42)
	other := f.NewAppKey(43)
	f.AddInstallation(1, 42, testRepo)
	fixed := time.Now().Truncate(time.Second)
	f.Now = func() time.Time { return fixed }
	now := fixed.Unix()
	good := map[string]any{"iss": "42", "iat": now - 30, "exp": now + 90}
	tests := map[string]struct {
		jwt    string
		status int
	}{
		"valid":             {signJWT(t, key, "RS256", good), 201},
		"numeric iss":       {signJWT(t, key, "RS256", map[string]any{"iss": 42, "iat": now, "exp": now + 60}), 201},
		"signed by another": {signJWT(t, other, "RS256", good), 401},
		"alg HS256":         {signJWT(t, key, "HS256", good), 401},
		"exp too far":       {signJWT(t, key, "RS256", map[string]any{"iss": "42", "iat": now, "exp": now + 601}), 401},
		"exp at 10 minutes": {signJWT(t, key, "RS256", map[string]any{"iss": "42", "iat": now, "exp": now + 600}), 201},
		"unknown app":       {signJWT(t, key, "RS256", map[string]any{"iss": "44", "iat": now, "exp": now + 60}), 401},
		"expired":           {signJWT(t, key, "RS256", map[string]any{"iss": "42", "iat": now - 700, "exp": now - 100}), 401},
		"garbage":           {"a.b.c", 401},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequest("POST", f.APIURL()+"app/installations/1/access_tokens", nil)
			req.Header.Set("Authorization", "Bearer "+tc.jwt)
			resp, err := f.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var v map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&v)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %v", resp.StatusCode, tc.status, v)
			}
			if tc.status != 201 {
				return
			}
			tok := v["token"].(string)
			if !strings.HasPrefix(tok, "ghs_") || v["expires_at"] == nil {
				t.Fatalf("token answer %v", v)
			}
			if status, _, _ := do(t, f, "GET", "/repos/acme/infra/pulls/7", tok, ""); status != 200 {
				t.Errorf("using the token: %d", status)
			}
		})
	}
	// A token of installation 1 does not reach other repositories.
	f.AddRepo("acme/other")
	f.AddPR("acme/other", PR{Number: 1, HeadSHA: sha1})
	req, _ := http.NewRequest("POST", f.APIURL()+"app/installations/1/access_tokens", nil)
	req.Header.Set("Authorization", "Bearer "+signJWT(t, key, "RS256", good))
	resp, err := f.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&v)
	resp.Body.Close()
	if status, _, _ := do(t, f, "GET", "/repos/acme/other/pulls/1", v["token"].(string), ""); status != 404 {
		t.Errorf("other repository: %d, want 404", status)
	}
	f.ExpireTokens()
	if status, _, _ := do(t, f, "GET", "/repos/acme/infra/pulls/7", v["token"].(string), ""); status != 401 {
		t.Errorf("expired token: %d, want 401", status)
	}
}

func TestPermissionRoles(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.SetPermission(testRepo, "maria", "maintain")
	_, _, body := do(t, f, "GET", "/repos/acme/infra/collaborators/maria/permission", testToken, "")
	m := body.(map[string]any)
	if m["permission"] != "write" || m["role_name"] != "maintain" {
		t.Errorf("answer %v: want permission write, role_name maintain (GitHub folds maintain)", m)
	}
}
