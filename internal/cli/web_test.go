package cli_test

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// webKey is the KL_LINK_KEY of the web tests' kl serve.
const webKey = "kl-serve-web-test-key-0123456789abcdef"

// webStory is a store with a scripted history of concurrent runs on state
// prod, through kl on SQLite with real Terraform, and kl serve over it:
//
//   - PR B plans b (its read set holds r);
//   - main changes other and replaces r: two versions after B's plan;
//   - applying B re-plans against the head, and the re-plan would revert
//     main's change to other (outside B's footprint): refused, the re-plan
//     left open for review;
//   - plan C changes other; a terraform apply's backend lock holds the
//     whole state; kl apply C --wait waits on it, and applies once it is
//     unlocked.
type webStory struct {
	k       *kit
	s       *backendServer
	reader  string // a read-only token
	refused string // B's refused apply run
	plan    string // B's plan run
	replan  string // B's open re-plan
	waited  string // C's apply run, which waited on the backend lock
	lock    string // the backend lock's run
	planC   string
}

func newWebStory(t *testing.T, whileWaiting func(w *webStory)) *webStory {
	t.Helper()
	k := setup(t)
	k.env = append(k.env, "KL_LINK_KEY="+webKey)
	w := &webStory{k: k}
	config := func(other string) string {
		return staleReadConfig + `
resource "terraform_data" "other" {
  input = "` + other + `"
}
`
	}
	main := filepath.Join(k.dir, "main")
	write(t, filepath.Join(main, "main.tf"), config("o0"))
	prB := filepath.Join(k.dir, "pr-b")
	write(t, filepath.Join(prB, "main.tf"), config("o0"))
	write(t, filepath.Join(prB, "b.tfvars"), "bv = \"b1\"\n")
	const state = "prod"
	k.ok("state", "init", state)
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", state, "-C", main)))
	var b planDoc
	k.jsonOf(&b, "plan", "--state", state, "-C", prB, "--var-file", "b.tfvars")
	w.plan = b.Run.ID
	write(t, filepath.Join(main, "main.tf"), config("o1"))
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", state, "-C", main, "--target", "terraform_data.other")))
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", state, "-C", main, "--replace", "terraform_data.r", "--target", "terraform_data.r")))
	r := k.run("apply", b.Run.ID, "--json")
	var story replanStoryDoc
	if err := json.Unmarshal([]byte(r.out), &story); err != nil || r.code() != 3 || len(story.Replans) != 1 {
		t.Fatalf("kl apply %s: exit %d (%v), %d re-plans; want refused with one re-plan\n%s", b.Run.ID, r.code(), err, len(story.Replans), r.out)
	}
	w.refused, w.replan = story.Run.ID, story.Replans[0].ID

	writer, reader := k.tokens()
	w.reader = reader
	w.s = serveBackend(t, k)
	write(t, filepath.Join(main, "main.tf"), config("o2"))
	w.planC = reULID.FindString(k.ok("plan", "--state", state, "-C", main, "--target", "terraform_data.other"))
	info := `{"ID":"tf-web-1","Operation":"OperationTypeApply","Who":"bob@laptop","Version":"1.11.4","Created":"2026-12-02T10:00:00Z","Path":""}`
	if code, body := w.s.do("LOCK", state, writer, info); code != http.StatusOK {
		t.Fatalf("LOCK: %d %s", code, body)
	}
	applied := make(chan result, 1)
	go func() { applied <- k.runWith(nil, "", "apply", w.planC, "--wait", "2m", "--json") }()
	out := k.waitStatus(t, func(s statusDoc) bool { return s.waits() })
	var st statusDoc
	_ = json.Unmarshal([]byte(out), &st)
	for _, a := range st.Active {
		if a.Run.Kind == "backend-lock" {
			w.lock = a.Run.ID
		}
	}
	if whileWaiting != nil {
		whileWaiting(w)
	}
	if code, body := w.s.do("UNLOCK", state, writer, info); code != http.StatusOK {
		t.Fatalf("UNLOCK: %d %s", code, body)
	}
	var res result
	select {
	case res = <-applied:
	case <-time.After(2 * time.Minute):
		t.Fatal("kl apply --wait did not end within 2 minutes of the unlock")
	}
	var c storyDoc
	if err := json.Unmarshal([]byte(res.out), &c); err != nil || res.err != nil {
		t.Fatalf("kl apply %s --wait: %v %v\n%s%s", w.planC, res.err, err, res.out, res.errOut)
	}
	w.waited = c.Run.ID
	waited := false
	for _, m := range c.Markers {
		waited = waited || m.Kind == "waited"
	}
	if c.Run.Status != "applied" || !waited || w.lock == "" {
		t.Fatalf("C's apply %s: %s, waited %v, backend lock %q; want applied after a wait on the lock", c.Run.ID, c.Run.Status, waited, w.lock)
	}
	return w
}

// get GETs path from kl serve with the reader's token and returns the
// status and body.
func (w *webStory) get(t *testing.T, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, w.s.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+w.reader)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestWebAPIIsJSON: each JSON view of kl serve's /api/v1/ is, byte for
// byte, what `kl … --json` prints for the same store (issue 18 §4; the
// schemas of docs/json.md).
func TestWebAPIIsJSON(t *testing.T) {
	t.Parallel()
	w := newWebStory(t, nil)
	k := w.k
	for path, args := range map[string][]string{
		"/api/v1/states":                              {"state", "list"},
		"/api/v1/history?state=prod":                  {"history", "--state", "prod"},
		"/api/v1/history?state=prod&limit=2&before=4": {"history", "--state", "prod", "--limit", "2", "--before", "4"},
		"/api/v1/runs":                                {"runs"},
		"/api/v1/runs?state=prod&limit=3":             {"runs", "--state", "prod", "--limit", "3"},
		"/api/v1/runs/" + w.refused:                   {"run", "show", w.refused},
		"/api/v1/runs/" + w.plan:                      {"run", "show", w.plan},
		"/api/v1/runs/" + w.replan:                    {"run", "show", w.replan},
		"/api/v1/runs/" + w.waited:                    {"run", "show", w.waited},
		"/api/v1/runs/" + w.lock:                      {"run", "show", w.lock},
		"/api/v1/runs/" + w.refused + "/why":          {"why", w.refused},
		"/api/v1/runs/" + w.waited + "/why":           {"why", w.waited},
		"/api/v1/runs/" + w.plan + "/since-plan":      {"history", "--since-plan", w.plan},
		"/api/v1/status":                              {"status"},
		"/api/v1/status?state=prod":                   {"status", "--state", "prod"},
	} {
		code, got := w.get(t, path)
		want := k.ok(append(args, "--json")...)
		if code != http.StatusOK || got != want {
			t.Errorf("GET %s: %d, differs from kl %s --json:\n--- kl\n%s\n--- api\n%s", path, code, strings.Join(args, " "), want, got)
		}
	}
	// Bad input is the API's error document, naming the parameter.
	for path, want := range map[string]string{
		"/api/v1/history":                         "history needs ?state=NAME",
		"/api/v1/history?state=nope":              "nope",
		"/api/v1/history?state=prod&before=x":     "before=x: want a serial",
		"/api/v1/runs/01J0000000000000000000000X": "01J0000000000000000000000X",
		"/api/v1/runs/xyz/why":                    `\"xyz\" is not a run id`,
	} {
		code, body := w.get(t, path)
		if code < 400 || !strings.Contains(body, "kilolock/api-error/v1") || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d %s, want an error document saying %q", path, code, body, want)
		}
	}
}

// TestReportGitHubRunPage: given the public URL and the link key of a kl
// serve that shares its store (KL_PUBLIC_URL, KL_LINK_KEY), kl report
// github links the check run ("Details") and the sticky comment to the
// run's signed page, and the link opens there without a token. Without
// the key it posts no page link; a bad public URL or a short key is
// refused naming the variable, never printing the key.
func TestReportGitHubRunPage(t *testing.T) {
	t.Parallel()
	g := setupGitHub(t, nil)
	g.env = append(g.env, "KL_LINK_KEY="+webKey)
	s := serveBackend(t, g.kit)

	_, p1 := g.plan("p1")
	g.ghEnv = append(g.ghEnv, "KL_PUBLIC_URL="+s.url)
	g.report(p1) // no key: no page link
	if cr := g.checkRun("kl plan · " + ghState); strings.Contains(cr.DetailsURL, "/runs/"+p1) || strings.Contains(g.comment().Body, "run page") {
		t.Errorf("without KL_LINK_KEY: details URL %q, comment %q; want no page link", cr.DetailsURL, g.comment().Body)
	}
	g.ghEnv = append(g.ghEnv, "KL_LINK_KEY="+webKey)
	g.report(p1)
	link := g.checkRun("kl plan · " + ghState).DetailsURL
	if !strings.HasPrefix(link, s.url+"/runs/"+p1+"?exp=") {
		t.Fatalf("details URL = %q, want the signed page of %s on %s", link, p1, s.url)
	}
	mustContain(t, "the comment", g.comment().Body, "[run page]("+link+")")
	res, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(page), "Run "+p1) {
		t.Errorf("GET %s: %d, want the run's page:\n%s", link, res.StatusCode, page)
	}

	for env, want := range map[string]string{
		"KL_PUBLIC_URL=klserve.example.com": `KL_PUBLIC_URL="klserve.example.com": want the public base URL of a kl serve`,
		"KL_LINK_KEY=short-key":             "KL_LINK_KEY or KL_LINK_TTL: link signing key is 9 bytes: want at least 32",
		"KL_LINK_TTL=-5m":                   "KL_LINK_KEY or KL_LINK_TTL: link TTL -5m0s is negative",
	} {
		r := g.runWith(append(slices.Clone(g.ghEnv), env), "", "report", "github", p1)
		if r.err == nil || !strings.Contains(r.err.Error(), want) || strings.Contains(r.err.Error(), "short-key") {
			t.Errorf("kl report github with %s: %v, want %q (and not the key)", env, r.err, want)
		}
	}
	r := g.runWith(append(slices.Clone(g.env), "KL_LINK_KEY=short-key"), "", "serve", "--listen", "127.0.0.1:0")
	if r.err == nil || !strings.Contains(r.err.Error(), "KL_LINK_KEY or KL_LINK_TTL: link signing key is 9 bytes") || strings.Contains(r.err.Error(), "short-key") {
		t.Errorf("kl serve with a short KL_LINK_KEY: %v, want it refused naming the variable, not the key", r.err)
	}
}
