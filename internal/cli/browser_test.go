package cli_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/kilolock/kilolock/internal/web"
)

// chromium returns the path of a Chromium (Debian's chromium package; .ci/run
// installs it when missing). Without one the test is skipped, except in
// CI, where it fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH: the browser tests need one in CI (apt-get install chromium; .ci/run installs it)")
	}
	t.Skip("no chromium on PATH (apt-get install chromium)")
	return ""
}

// browser is one headless Chromium tab (chromedp) over kl serve.
type browser struct {
	t   *testing.T
	ctx context.Context
	dir string // where screenshots go
}

// newBrowser starts Chromium for at most limit; its cleanup stops it.
// Screenshots go to testdata/out/web (ignored by git), kept after the
// test for a person to look at.
func newBrowser(t *testing.T, limit time.Duration) *browser {
	t.Helper()
	bin := chromium(t)
	dir := filepath.Join("testdata", "out", "web")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1280, 1000))
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelTab(); cancelAlloc(); cancel() })
	if _, err := chromedp.Call(bctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	return &browser{t: t, ctx: bctx, dir: dir}
}

// load opens url (with header Authorization auth, unless ""), saves a
// full-page screenshot as NAME.png, and returns the page's text as a
// person reads it (innerText). It fails the test for any console error,
// uncaught exception or error entry of the browser log (a resource that
// failed to load, a Content-Security-Policy violation) the page caused.
func (b *browser) load(name, url, auth string) string { return b.loadStatus(name, url, auth, 0) }

// loadStatus is load of a page answered with HTTP status (0: 200): the
// browser's own "Failed to load resource" error for that status is the
// one console error it allows.
func (b *browser) loadStatus(name, url, auth string, status int) string {
	b.t.Helper()
	headers := network.Headers{}
	if auth != "" {
		headers["Authorization"] = auth
	}
	if _, err := chromedp.Call(b.ctx, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: headers}); err != nil {
		b.t.Fatal(err)
	}
	mctx, stop := context.WithCancel(b.ctx)
	var bad []string
	done := make(chan struct{})
	msgs := chromedp.Console(mctx)
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			allowed := status != 0 && strings.Contains(m.Text, fmt.Sprintf("the server responded with a status of %d", status))
			if (m.Type == chromedp.ConsoleError || m.IsException()) && !allowed {
				bad = append(bad, m.String())
			}
		}
	}()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(url), chromedp.WaitReady("main")); err != nil {
		b.t.Fatalf("loading %s (%s): %v", name, url, err)
	}
	title, err := chromedp.Run(b.ctx, chromedp.Title())
	if err != nil {
		b.t.Fatal(err)
	}
	text, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		b.t.Fatal(err)
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatal(err)
	}
	path := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	abs, _ := filepath.Abs(path)
	b.t.Logf("%s: %q, screenshot %s (%d bytes)", name, title, abs, len(png))
	time.Sleep(200 * time.Millisecond) // late console messages
	stop()
	<-done
	for _, e := range bad {
		b.t.Errorf("%s (%s): %s", name, url, e)
	}
	return text
}

// has fails the test unless text holds every one of wants.
func has(t *testing.T, what, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

// TestWebPagesInBrowser loads the run and state pages of a scripted story
// (a refusal with a re-plan left open, a wait on a backend lock) from kl
// serve in headless Chromium: through the signed links klbot would post,
// and with a token. Each page says what `kl run show` and `kl status` say,
// raises no console error, and is kept as a screenshot.
func TestWebPagesInBrowser(t *testing.T) {
	t.Parallel()
	chromium(t) // skip before the story when there is none
	signer, err := web.NewSigner(webKey, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	var b *browser
	w := newWebStory(t, func(w *webStory) {
		b = newBrowser(t, 90*time.Second)
		// While C's apply waits: the state page shows the backend lock that
		// holds the state and who waits on it.
		text := b.load("state-waiting", signer.URL(w.s.url, web.KindState, "prod"), "")
		has(t, "the state page while C's apply waits", text, "State prod", "opened with a signed link", "backend lock "+w.lock,
			"waiting", "bob (terraform apply")
	})
	k := w.k
	first := func(id string) string { return strings.SplitN(k.ok("run", "show", id), "\n", 2)[0] }

	text := b.load("run-refused", signer.URL(w.s.url, web.KindRun, w.refused), "")
	has(t, "the refused apply's page", text, "Run "+w.refused, first(w.refused), "outside the reviewed footprint", w.replan, "terraform_data.other")

	text = b.load("run-plan", signer.URL(w.s.url, web.KindRun, w.plan), "")
	has(t, "B's plan's page", text, first(w.plan), w.replan, "Diff of plan "+w.plan, "terraform_data.b")

	text = b.load("run-waited", signer.URL(w.s.url, web.KindRun, w.waited), "")
	has(t, "C's apply's page", text, first(w.waited), "waited", w.lock)

	text = b.load("state", w.s.url+"/states/prod", "Bearer "+w.reader)
	has(t, "the state page", text, "State prod", "History of prod", "head is version 4",
		"Status: 0 active runs", w.waited, "waited", w.lock)

	// The timeline: a row per run, the refusal and the wait drawn, the
	// since-plan arrows of B's apply (main's two versions: independent,
	// plan input changed).
	text = b.load("timeline", strings.Replace(signer.URL(w.s.url, web.KindState, "prod"), "/states/prod?", "/states/prod/timeline?", 1), "")
	has(t, "the timeline page", text, "Timeline of prod", "opened with a signed link")
	svg, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector("svg.timeline").outerHTML`))
	if err != nil {
		t.Fatal(err)
	}
	has(t, "the timeline's SVG", svg, `class="arrow independent"`, `class="arrow read-changed"`, `class="refused"`,
		`class="phase waiting"`, `class="waited"`, `class="phase planning"`, `class="version"`, "re-plan "+w.replan[20:], "backend lock "+w.lock[20:])

	text = b.load("states", w.s.url+"/states", "Bearer "+w.reader)
	has(t, "the states page", text, "States (1)", "prod")

	// A tampered link is refused in words; the page shows nothing of the run.
	text = b.loadStatus("run-tampered", strings.Replace(signer.URL(w.s.url, web.KindRun, w.refused), "exp=", "exp=1", 1), "", http.StatusForbidden)
	has(t, "a tampered link's page", text, "Link refused", "this link was altered")
	if strings.Contains(text, "terraform_data") {
		t.Errorf("a tampered link's page shows the run:\n%s", text)
	}
}
