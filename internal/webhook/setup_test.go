package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/github/githubfake"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	testSecret = "kl-test-secret-7f3a9c"
	hookURL    = "http://klbot.test/webhook"
	headSHA    = "0123456789abcdef0123456789abcdef01234567"
)

var testNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// fakeSink records every Accept and answers with its fields: panicWith
// first, then err, then outcome (Enqueued when zero and unset).
type fakeSink struct {
	outcome   Outcome
	noOutcome bool // answer the zero Outcome
	err       error
	panicWith any
	// block, when set, waits for ctx to end and returns ctx.Err().
	block bool

	mu    sync.Mutex
	calls []sinkCall
}

type sinkCall struct {
	d           Delivery
	hasDeadline bool
	deadlineIn  time.Duration // time left when Accept began
	keys        []any
	ctxErr      error // ctx.Err() when Accept began
}

func (s *fakeSink) Accept(ctx context.Context, d Delivery) (Outcome, error) {
	dl, ok := ctx.Deadline()
	s.mu.Lock()
	s.calls = append(s.calls, sinkCall{d: d, hasDeadline: ok, deadlineIn: time.Until(dl),
		keys: RequestKeysFrom(ctx), ctxErr: ctx.Err()})
	s.mu.Unlock()
	switch {
	case s.panicWith != nil:
		panic(s.panicWith)
	case s.block:
		<-ctx.Done()
		return 0, ctx.Err()
	case s.err != nil:
		return 0, s.err
	case s.noOutcome:
		return 0, nil
	case s.outcome == 0:
		return Enqueued, nil
	}
	return s.outcome, nil
}

func (s *fakeSink) Calls() []sinkCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sinkCall(nil), s.calls...)
}

// syncBuffer is a bytes.Buffer safe for a logger shared by handlers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines decodes the JSON log lines.
func (b *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

type env struct {
	h    *Handler
	sink *fakeSink
	reg  *prometheus.Registry
	logs *syncBuffer
}

// setup builds a Handler on a fresh fake sink, registry and JSON log
// buffer; edit adjusts the config first.
func setup(t testing.TB, sink *fakeSink, edit func(*HandlerConfig)) *env {
	t.Helper()
	if sink == nil {
		sink = &fakeSink{}
	}
	e := &env{sink: sink, reg: prometheus.NewRegistry(), logs: &syncBuffer{}}
	cfg := HandlerConfig{
		Secret:  []byte(testSecret),
		Sink:    sink,
		Logger:  slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Metrics: e.reg,
		Now:     func() time.Time { return testNow },
	}
	if edit != nil {
		edit(&cfg)
	}
	h, err := NewHandler(cfg)
	if err != nil {
		t.Fatalf("NewHandler: %v", err)
	}
	e.h = h
	return e
}

// request is a signed delivery of body as event.
func request(t testing.TB, event, delivery string, body []byte) *http.Request {
	t.Helper()
	req, err := githubfake.WebhookRequest(hookURL, event, delivery, testSecret, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func (e *env) serve(req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

// decode reads a response body.
func decode(t *testing.T, rec *httptest.ResponseRecorder) response {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var r response
	if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
		t.Fatalf("response body %q: %v", rec.Body.String(), err)
	}
	return r
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := githubfake.Webhook(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func patch(t testing.TB, body []byte, set map[string]any) []byte {
	t.Helper()
	b, err := githubfake.Patch(body, set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func pingPayload(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "ping.none.2.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
