package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"
)

// requestNote is what the handlers learn about a request that its log
// record names: who (once authenticated) and why it was refused.
type requestNote struct {
	actor, token string
	err          *Error
}

type noteKey struct{}

// noteOf is r's note (nil outside logRequests).
func noteOf(ctx context.Context) *requestNote {
	n, _ := ctx.Value(noteKey{}).(*requestNote)
	return n
}

// noteError records e as r's refusal, for the log.
func noteError(r *http.Request, e *Error) {
	if n := noteOf(r.Context()); n != nil {
		n.err = e
	}
}

// statusWriter records the status and the bytes written.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logRequests logs one record per request when it ends: method, path
// (r.URL.Path: never the query, never a header, so never a credential),
// status, bytes written, duration_ms, remote address, and — when set —
// actor and token (the token's public id), and the refusal's reason. 5xx
// are errors, 4xx warnings, the rest info.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		note := &requestNote{}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), noteKey{}, note)))
		if sw.status == 0 {
			sw.status = http.StatusOK
		}
		attrs := []slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", sw.status),
			slog.Int64("bytes", sw.bytes), slog.Int64("duration_ms", time.Since(start).Milliseconds()), slog.String("remote", r.RemoteAddr)}
		if note.actor != "" {
			attrs = append(attrs, slog.String("actor", note.actor), slog.String("token", note.token))
		}
		level := slog.LevelInfo
		switch {
		case sw.status >= 500:
			level = slog.LevelError
		case sw.status >= 400:
			level = slog.LevelWarn
		}
		if note.err != nil {
			attrs = append(attrs, slog.String("reason", note.err.Msg))
			if note.err.Err != nil {
				attrs = append(attrs, slog.String("err", note.err.Err.Error()))
			}
		}
		s.log.LogAttrs(r.Context(), level, "http request", attrs...)
	})
}
