package webhook

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func attrEqual(a, b slog.Attr) bool { return a.Equal(b) }

func TestRequestKeys(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		d    Delivery
		want []any
	}{
		"pull request": {
			d: Delivery{ID: "d1", Event: "pull_request", Action: "synchronize", Installation: 9, Repo: "acme/infra", PR: 7, HeadSHA: headSHA},
			want: []any{slog.String("delivery", "d1"), slog.String("event", "pull_request"), slog.String("action", "synchronize"),
				slog.Int64("installation", 9), slog.String("repo", "acme/infra"), slog.Int("pr", 7)},
		},
		"installation: no repo, no PR": {
			d: Delivery{ID: "d2", Event: "installation", Action: "created", Installation: 9},
			want: []any{slog.String("delivery", "d2"), slog.String("event", "installation"), slog.String("action", "created"),
				slog.Int64("installation", 9)},
		},
		"ping: no action": {
			d:    Delivery{ID: "d3", Event: "ping"},
			want: []any{slog.String("delivery", "d3"), slog.String("event", "ping")},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tc.want, RequestKeys(tc.d), cmp.Comparer(attrEqual)); diff != "" {
				t.Errorf("RequestKeys (-want +got):\n%s", diff)
			}
		})
	}
}

type otherKey struct{}

func TestDetachedContext(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	d := Delivery{ID: "d-detach", Event: "pull_request", Action: "opened", Installation: 1, Repo: "acme/infra", PR: 7}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), otherKey{}, "request-scoped"))
	ctx := NewContext(parent, slog.New(slog.NewTextHandler(&logs, nil)), d)
	detached := DetachedContext(ctx)
	cancel()

	if ctx.Err() == nil {
		t.Fatal("request context not cancelled")
	}
	if err := detached.Err(); err != nil {
		t.Errorf("detached context cancelled with the request: %v", err)
	}
	if _, ok := detached.Deadline(); ok {
		t.Error("detached context has a deadline")
	}
	if detached.Value(otherKey{}) != nil {
		t.Error("detached context carries a request value other than the logger and keys")
	}
	if diff := cmp.Diff(RequestKeys(d), RequestKeysFrom(detached), cmp.Comparer(attrEqual)); diff != "" {
		t.Errorf("detached request keys (-want +got):\n%s", diff)
	}
	LoggerFrom(detached).Info("async work")
	for _, want := range []string{"msg=\"async work\"", "delivery=d-detach", "repo=acme/infra", "pr=7", "installation=1"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("detached logger wrote %q, want %s", logs.String(), want)
		}
	}

	// Nothing to carry: a plain background context and a discarding logger.
	bare := DetachedContext(context.Background())
	if RequestKeysFrom(bare) != nil || LoggerFrom(bare) == nil {
		t.Error("a context without request keys detached into something else than a bare one")
	}
}
