package github_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/github/githubfake"
)

const (
	appID   = int64(42)
	instID  = int64(7001)
	repoStr = "acme/infra"
	headSHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
	prNum   = 12
)

var repo = github.Repo{Owner: "acme", Name: "infra"}

// sleeps records the waits a client asks for and returns at once.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type env struct {
	f      *githubfake.Fake
	pem    []byte
	app    *github.App
	c      *github.Client
	sleeps *sleeps
	logs   *syncBuffer
	now    time.Time
}

// setup starts a fake with one app installation on acme/infra holding PR
// 12, and an installation client whose JWT exchange runs for real against
// it. mods adjust the client options.
func setup(t *testing.T, mods ...func(*github.Options)) *env {
	t.Helper()
	e := &env{f: githubfake.New(t), sleeps: &sleeps{}, logs: &syncBuffer{}, now: time.Unix(1_700_000_000, 0)}
	e.pem = e.f.NewAppKey(appID)
	e.f.AddInstallation(instID, appID, repoStr)
	e.f.AddPR(repoStr, githubfake.PR{Number: prNum, HeadSHA: headSHA, Files: []string{"main.tf"}})
	opts := github.Options{
		BaseURL: e.f.APIURL(),
		Logger:  slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Sleep:   e.sleeps.sleep,
		Now:     func() time.Time { return e.now },
	}
	for _, m := range mods {
		m(&opts)
	}
	var err error
	if e.app, err = github.NewApp(appID, e.pem, opts); err != nil {
		t.Fatal(err)
	}
	if e.c, err = e.app.Installation(instID); err != nil {
		t.Fatal(err)
	}
	return e
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}
