package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github/githubfake"
	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/terraform"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	appID  = 42
	repo   = "acme/infra"
	secret = "It's a Secret to Everybody"
)

// harness is klbot's run() on a free loopback port, against githubfake and
// a fresh PostgreSQL schema, with real Terraform.
type harness struct {
	t        *testing.T
	fake     *githubfake.Fake
	dsn      string
	url      string // http://127.0.0.1:PORT
	tfBin    string
	stop     context.CancelFunc
	done     chan error
	delivery atomic.Int64
}

// freeAddr returns a loopback address nobody listens on (run() takes an
// address, not a listener).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func terraformBinary(t *testing.T) string {
	t.Helper()
	bin, err := terraform.FindBinary(os.Getenv)
	if err != nil {
		t.Skipf("klbot's end-to-end tests run the real Terraform: %v", err)
	}
	return bin
}

// baseEnv is a valid klbot environment for the fake and dsn.
func baseEnv(t *testing.T, fake *githubfake.Fake, key []byte, dsn, addr, tfBin string) []string {
	t.Helper()
	return []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		fmt.Sprintf("KLBOT_APP_ID=%d", appID), "KLBOT_PRIVATE_KEY=" + string(key), "KLBOT_WEBHOOK_SECRET=" + secret,
		"KLBOT_DATABASE_URL=" + dsn, "KLBOT_GITHUB_URL=" + fake.APIURL(), "KLBOT_LISTEN=" + addr,
		"KLBOT_WORKERS=2", "KLBOT_APPLY_WAIT=5s", "KLBOT_WORKDIR=" + t.TempDir(), "KLBOT_TERRAFORM=" + tfBin,
		"KLBOT_LOG_LEVEL=error", "KLBOT_SHUTDOWN_TIMEOUT=30s", "KLBOT_LINK_KEY=" + linkKey,
	}
}

// start runs klbot until the test ends and waits for /readyz.
func start(t *testing.T, fake *githubfake.Fake, key []byte, dsn, tfBin string, extra ...string) *harness {
	t.Helper()
	addr := freeAddr(t)
	h := &harness{t: t, fake: fake, dsn: dsn, url: "http://" + addr, tfBin: tfBin, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	h.stop = cancel
	env := append(baseEnv(t, fake, key, dsn, addr, tfBin), extra...)
	go func() { h.done <- run(ctx, []string{"klbot"}, env) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-h.done:
			if err != nil {
				t.Errorf("run() returned %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Errorf("run() did not stop within a minute of its context ending")
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-h.done:
			t.Fatalf("run() stopped before it was ready: %v", err)
		default:
		}
		if res, err := http.Get(h.url + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return h
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("klbot did not become ready within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sent is a delivery as sent, to send again.
type sent struct {
	event, id string
	body      []byte
}

// deliver POSTs a signed delivery to /webhook and returns the status and
// how long klbot took to answer.
func (h *harness) deliver(event string, body []byte) (sent, int, time.Duration) {
	h.t.Helper()
	d := sent{event: event, id: fmt.Sprintf("delivery-%03d", h.delivery.Add(1)), body: body}
	code, took := h.redeliver(d)
	return d, code, took
}

func (h *harness) redeliver(d sent) (int, time.Duration) {
	h.t.Helper()
	req, err := githubfake.WebhookRequest(h.url+"/webhook", d.event, d.id, secret, d.body)
	if err != nil {
		h.t.Fatal(err)
	}
	t0 := time.Now()
	res, err := http.DefaultClient.Do(req)
	took := time.Since(t0)
	if err != nil {
		h.t.Fatalf("delivering %s %s: %v", d.event, d.id, err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		h.t.Fatalf("delivery %s (%s) answered %d: %s", d.id, d.event, res.StatusCode, b)
	}
	return res.StatusCode, took
}

// settle waits until River has no job left to run, then fails the test for
// any job River discarded.
func (h *harness) settle() {
	h.t.Helper()
	ctx := context.Background()
	conn := h.conn()
	defer conn.Close(ctx)
	deadline := time.Now().Add(90 * time.Second)
	for {
		var pending int
		// klbot_gc is housekeeping that no scenario waits for: its first
		// round runs when a leader starts, and a replica a test kills
		// leaves its round running until River rescues it (ADR 0063).
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state IN ('available', 'running', 'retryable', 'pending', 'scheduled') AND kind <> 'klbot_gc'`).Scan(&pending); err != nil {
			h.t.Fatal(err)
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%d jobs still pending after 90s", pending)
		}
		time.Sleep(50 * time.Millisecond)
	}
	rows, err := conn.Query(ctx, `SELECT kind, errors::text FROM river_job WHERE state = 'discarded' OR state = 'cancelled'`)
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind, errs string
		if err := rows.Scan(&kind, &errs); err != nil {
			h.t.Fatal(err)
		}
		h.t.Errorf("job %s was discarded: %s", kind, errs)
	}
}

// count runs one counting query.
func (h *harness) count(query string, args ...any) int {
	h.t.Helper()
	var n int
	h.scan(&n, query, args...)
	return n
}

// scan runs a query of one row and one column into dest.
func (h *harness) scan(dest any, query string, args ...any) {
	h.t.Helper()
	ctx := context.Background()
	conn := h.conn()
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, query, args...).Scan(dest); err != nil {
		h.t.Fatal(err)
	}
}

// conn connects to the test's database; the caller closes it.
func (h *harness) conn() *pgx.Conn {
	h.t.Helper()
	conn, err := pgx.Connect(context.Background(), h.dsn)
	if err != nil {
		h.t.Fatal(err)
	}
	return conn
}

// sha returns a commit SHA (40 hex digits) for a test name.
func sha(n int) string { return fmt.Sprintf("%02dc0ffee%032x", n, n) }

// tarball builds GitHub's .tar.gz of a commit: one top-level directory
// "acme-infra-SHORT/", a pax global header with the commit id.
func tarball(t *testing.T, commit string, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	top := "acme-infra-" + commit[:7] + "/"
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": commit}}))
	must(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: top, Mode: 0o755}))
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	dirs := map[string]bool{}
	for _, n := range names {
		if d := filepath.Dir(n); d != "." && !dirs[d] {
			dirs[d] = true
			must(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: top + d + "/", Mode: 0o755}))
		}
		must(tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: top + n, Mode: 0o644, Size: int64(len(files[n]))}))
		_, err := tw.Write([]byte(files[n]))
		must(err)
	}
	must(tw.Close())
	must(zw.Close())
	return buf.Bytes()
}

// bootstrap creates state name with the resources of the configuration in
// dir applied (serial 1), through the engine on the same database; env is
// added to Terraform's environment.
func bootstrap(t *testing.T, dsn, tfBin, name string, files map[string]string, env ...string) {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dir := t.TempDir()
	for n, body := range files {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runner, err := terraform.NewRunner(terraform.RunnerOptions{WorkRoot: t.TempDir(), Binary: tfBin, Env: append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(st, runner, nil)
	if _, err := eng.InitState(ctx, name, nil, "bootstrap"); err != nil {
		t.Fatal(err)
	}
	out, err := eng.Plan(ctx, engine.PlanInput{State: name, Dir: filepath.Join(dir, "infra"), ScopeDir: "infra", Actor: "bootstrap", CommitSHA: sha(0)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Apply(ctx, engine.ApplyInput{PlanRun: out.Run.ID, Actor: "bootstrap"}); err != nil {
		t.Fatal(err)
	}
}

var (
	ulidRE    = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`)
	timeRE    = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	digestRE  = regexp.MustCompile(`sha256:[0-9a-f]{64}`)
	urlRE     = regexp.MustCompile(`http://127\.0\.0\.1:\d+`)
	durRE     = regexp.MustCompile(`(<|&lt;)?\b\d+(\.\d+)?(ms|µs|s)\b`) // "<1ms" too (in Markdown "&lt;1ms")
	uuidRE    = regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	holderRE  = regexp.MustCompile(`[\w.-]+:\d+ \(holder\)`)
	commentRE = regexp.MustCompile(`reply-\d+`)
)

// normalize replaces what changes between runs: run ids (RUN-1, RUN-2, … in
// order of first appearance), times, plan digests, the fake's URL,
// durations, and UUIDs (the ids Terraform gives terraform_data objects).
// Serials stay.
func normalize(s string) string {
	ids := map[string]string{}
	s = ulidRE.ReplaceAllStringFunc(s, func(id string) string {
		if _, ok := ids[id]; !ok {
			ids[id] = fmt.Sprintf("RUN-%02d%s", len(ids)+1, strings.Repeat("x", 20))
		}
		return ids[id]
	})
	s = timeRE.ReplaceAllString(s, "TIME")
	s = digestRE.ReplaceAllString(s, "sha256:DIGEST")
	s = urlRE.ReplaceAllString(s, "https://github.test")
	s = durRE.ReplaceAllString(s, "DURATION")
	s = uuidRE.ReplaceAllString(s, "UUID")
	s = signatureRE.ReplaceAllString(s, "?exp=EXP&sig=SIG")
	s = holderRE.ReplaceAllString(s, "HOST:PID (holder)")
	return commentRE.ReplaceAllString(s, "reply-ID")
}

// golden compares got (normalized) with testdata/NAME, or rewrites it.
func golden(t *testing.T, name, got string) {
	t.Helper()
	got = normalize(got)
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Errorf("reading golden %s (run with -update to create it): %v", path, err)
		return
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (run with -update and review the diff):\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

// publicURL is the KLBOT_PUBLIC_URL the end-to-end tests set: klbot
// serves its run pages under it (a reverse proxy's name for h.url).
const publicURL = "https://klbot.example.com"

// linkKey is the KLBOT_LINK_KEY of every test klbot (baseEnv).
const linkKey = "klbot-test-link-key-0123456789abcdef"

// pageLinkRE matches a page link klbot posts under publicURL: a run's
// page (group 1, the run id) or a state's timeline (group 2, the state).
var pageLinkRE = regexp.MustCompile(regexp.QuoteMeta(publicURL) + `/(?:runs/([0-9A-Z]{26})|states/([A-Za-z0-9._/-]+)/timeline)\?[^\s)\]>"'` + "`" + `]+`)

// signatureRE is a signed link's query, which changes with the time of
// signing: golden files hold it normalised.
var signatureRE = regexp.MustCompile(`\?exp=[0-9]+&sig=[A-Za-z0-9_-]+`)

// linksOpen fails the test unless every link klbot posted under publicURL
// — in a check run's title, summary, text or details URL, or a bot
// comment on prs — opens: fetched from this klbot without credentials (the
// link's signature is its access), it is 200 and the page names the run
// (a run page) or the state (a timeline, which the sticky comment links).
// It also fails when no check run links to its run page at all (issue 18:
// check runs use the signed run page as details_url).
func (h *harness) linksOpen(t *testing.T, prs ...int) {
	t.Helper()
	opened, details := map[string]bool{}, 0
	for where, body := range h.gitHubText(prs...) {
		for _, m := range pageLinkRE.FindAllStringSubmatch(body, -1) {
			if strings.HasSuffix(where, "details URL") {
				details++
			}
			if opened[m[0]] {
				continue
			}
			opened[m[0]] = true
			res, err := http.Get(h.url + strings.TrimPrefix(m[0], publicURL))
			if err != nil {
				t.Errorf("%s links to %s: %v", where, m[0], err)
				continue
			}
			page, _ := io.ReadAll(res.Body)
			res.Body.Close()
			want := "Run " + m[1]
			if m[1] == "" {
				want = "Timeline of " + m[2]
			}
			if res.StatusCode != http.StatusOK || !strings.Contains(string(page), want) {
				t.Errorf("%s links to %s: %d, want 200 and a page saying %q:\n%s", where, m[0], res.StatusCode, want, page)
			}
		}
	}
	if details == 0 {
		t.Errorf("no check run has its run page as details URL (links opened: %d)", len(opened))
	}
}

// page GETs link (under publicURL) from this klbot without credentials
// and returns the page's text (HTML entities unescaped, so that a test
// matches the words); it fails the test unless it is 200.
func (h *harness) page(t *testing.T, link string) string {
	t.Helper()
	if !strings.HasPrefix(link, publicURL+"/") {
		t.Fatalf("link %q is not under %s", link, publicURL)
	}
	res, err := http.Get(h.url + strings.TrimPrefix(link, publicURL))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", link, res.StatusCode, b)
	}
	return html.UnescapeString(string(b))
}

// logBuffer is klbot's log output (JSON lines) kept for a test.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the log lines for which keep is true of their decoded record.
func (b *logBuffer) lines(keep func(map[string]any) bool) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, line := range strings.Split(b.buf.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && keep(rec) {
			out = append(out, line)
		}
	}
	return out
}

// captureLogs sends klbot's logs to a buffer until the test ends. Call it
// before start (or setup): its cleanup then runs after klbot stopped.
func captureLogs(t *testing.T) *logBuffer {
	t.Helper()
	b := &logBuffer{}
	prev := logOutput
	logOutput = b
	t.Cleanup(func() { logOutput = prev })
	return b
}
