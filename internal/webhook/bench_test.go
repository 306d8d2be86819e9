package webhook

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kilolock/kilolock/internal/github/githubfake"
)

type noopSink struct{}

func (noopSink) Accept(context.Context, Delivery) (Outcome, error) { return Enqueued, nil }

// BenchmarkHandler measures one signed pull_request delivery, verified,
// parsed and routed to a sink that does nothing.
func BenchmarkHandler(b *testing.B) {
	h, err := NewHandler(HandlerConfig{
		Secret: []byte(testSecret),
		Sink:   noopSink{},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	body := githubfake.PullRequestEvent("pull_request.synchronize.22", "acme/infra", 7, headSHA)
	sig := githubfake.Sign(testSecret, body)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, hookURL, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(EventHeader, "pull_request")
		req.Header.Set(DeliveryHeader, "d-bench")
		req.Header.Set(SignatureHeader, sig)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusAccepted {
			b.Fatalf("status %d %s", rec.Code, rec.Body)
		}
	}
}
