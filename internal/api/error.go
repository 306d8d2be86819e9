package api

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is a refusal the API answers with: an HTTP status and the sentence
// that says why, for the person reading it (curl, the log; Terraform shows
// only the status).
type Error struct {
	Status int    // an HTTP status: 401, 403, 404, 413, …
	Msg    string // the reason, lowercase, without a status label
	Err    error  // the cause, if any (not shown to the client)
}

func (e *Error) Error() string { return e.Msg }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// SchemaError is the schema of every error the API answers with.
const SchemaError = "kilolock/api-error/v1"

// errorDocument is an error's body (docs/json.md).
type errorDocument struct {
	Schema string `json:"schema"`
	Status int    `json:"status"`
	Error  string `json:"error"`
}

// writeError answers r with err: an *Error's status and message; a body
// over the cap (*http.MaxBytesError) as 413 naming the limit; anything
// else as 500 "internal error" (the cause goes to the request log, not to
// the client). A 401 carries WWW-Authenticate for both schemes the API
// accepts (RFC 7235, RFC 6750).
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	var mb *http.MaxBytesError
	switch {
	case errors.As(err, &e):
	case errors.As(err, &mb):
		e = tooLarge(mb.Limit)
	default:
		e = &Error{Status: http.StatusInternalServerError, Msg: "internal error (the server's log says more)", Err: err}
	}
	noteError(r, e)
	if e.Status == http.StatusUnauthorized {
		w.Header().Add("WWW-Authenticate", `Basic realm="kilolock", charset="UTF-8"`)
		w.Header().Add("WWW-Authenticate", `Bearer realm="kilolock"`)
	}
	writeJSON(w, e.Status, errorDocument{Schema: SchemaError, Status: e.Status, Error: e.Msg})
}

// WriteError answers r with err as writeError does: the
// kilolock/api-error/v1 document of every route, for the routes of
// Options.Web (internal/web's /api/v1/ views).
func WriteError(w http.ResponseWriter, r *http.Request, err error) { writeError(w, r, err) }

// tooLarge is the 413 of a body over limit bytes.
func tooLarge(limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge,
		Msg: fmt.Sprintf("request body too large: the limit is %s (%d bytes)", mib(limit), limit)}
}

// mib prints n bytes in MiB, or bytes below one.
func mib(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d bytes", n)
}
