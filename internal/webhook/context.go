package webhook

import (
	"context"
	"log/slog"
)

// RequestKeys returns d's request keys as slog attributes, for
// logger.With(RequestKeys(d)...): delivery and event always; action,
// installation, repo and pr when set (docs/style.md 11). internal/bot attaches
// the same keys to job logs.
func RequestKeys(d Delivery) []any {
	keys := make([]any, 0, 6)
	keys = append(keys, slog.String("delivery", d.ID), slog.String("event", d.Event))
	if d.Action != "" {
		keys = append(keys, slog.String("action", d.Action))
	}
	if d.Installation != 0 {
		keys = append(keys, slog.Int64("installation", d.Installation))
	}
	if d.Repo != "" {
		keys = append(keys, slog.String("repo", d.Repo))
	}
	if d.PR != 0 {
		keys = append(keys, slog.Int("pr", d.PR))
	}
	return keys
}

type ctxKey struct{}

// requestLog is what a context carries: the logger with the keys
// attached, and the keys themselves.
type requestLog struct {
	logger *slog.Logger
	keys   []any
}

// NewContext returns a copy of ctx carrying logger with RequestKeys(d)
// attached, and those keys. Sink.Accept gets such a context; a job that
// works on a stored Delivery can build one the same way. A nil logger
// discards.
func NewContext(ctx context.Context, logger *slog.Logger, d Delivery) context.Context {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	keys := RequestKeys(d)
	return context.WithValue(ctx, ctxKey{}, requestLog{logger: logger.With(keys...), keys: keys})
}

// LoggerFrom returns the request logger ctx carries (NewContext), or a
// logger that discards when it carries none.
func LoggerFrom(ctx context.Context) *slog.Logger {
	if rl, ok := ctx.Value(ctxKey{}).(requestLog); ok {
		return rl.logger
	}
	return slog.New(slog.DiscardHandler)
}

// RequestKeysFrom returns the request keys ctx carries (NewContext), or
// nil. The slice is a copy.
func RequestKeysFrom(ctx context.Context) []any {
	if rl, ok := ctx.Value(ctxKey{}).(requestLog); ok {
		return append([]any(nil), rl.keys...)
	}
	return nil
}

// DetachedContext returns a fresh context for async work started from a
// webhook request: it carries only ctx's request logger and request keys —
// not its cancellation, deadline or other values (docs/style.md 9, after
// palantir/go-githubapp's scheduler). The caller bounds it.
func DetachedContext(ctx context.Context) context.Context {
	rl, ok := ctx.Value(ctxKey{}).(requestLog)
	if !ok {
		return context.Background()
	}
	return context.WithValue(context.Background(), ctxKey{}, rl)
}
