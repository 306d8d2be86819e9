package api

import "net/http"

// capBodies refuses a request whose declared body (Content-Length) is over
// the cap with 413 before anything reads it, and caps every other body
// with http.MaxBytesReader: a handler that reads past the cap gets an
// *http.MaxBytesError, which writeError answers with 413 too, and the
// server closes the connection rather than read the rest.
func (s *Server) capBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > s.maxBody {
			writeError(w, r, tooLarge(s.maxBody))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.maxBody)
		next.ServeHTTP(w, r)
	})
}
