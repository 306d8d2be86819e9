package api

import (
	"context"
	"net/http"
	"strings"
)

// capBodies refuses a request whose declared body (Content-Length) is over
// the cap with 413 before anything reads it, and caps every other body
// with http.MaxBytesReader: a handler that reads past the cap gets an
// *http.MaxBytesError, which writeError answers with 413 too, and the
// server closes the connection rather than read the rest.
func (s *Server) capBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > s.maxBody {
			s.tooLargePost(r)
			writeError(w, r, tooLarge(s.maxBody))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.maxBody)
		next.ServeHTTP(w, r)
	})
}

// tooLargePost records a backend POST refused for its declared length in
// the story of the lock it names (refusedPost), as the handler does for a
// body that passes the cap while it is read: Terraform declares the
// length of every state it sends. Only for a request whose token may
// write the state — anyone else's refusal is the request log's alone, so
// that nobody without access writes into a lock's story.
func (s *Server) tooLargePost(r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, BackendPath)
	if s.backend == nil || r.Method != http.MethodPost || !ok || strings.Trim(name, "/") == "" {
		return
	}
	id, err := s.auth.Authenticate(r)
	if err != nil || id.Allow(name, Write) != nil {
		return
	}
	if n := noteOf(r.Context()); n != nil {
		n.actor, n.token = id.Actor, id.Token
	}
	s.refusedPost(r.WithContext(context.WithValue(r.Context(), identityKey{}, id)), name, r.URL.Query().Get("ID"),
		&http.MaxBytesError{Limit: s.maxBody})
}
