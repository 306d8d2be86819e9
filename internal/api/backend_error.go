package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// backendRefusal maps an error of the engine's backend methods to the
// API's answer — the one place that does (the contract of issue 14 §2–§4):
//
//   - *engine.BackendLockedError: 423 with the holder's LockInfo (its ID
//     is the holding Kilolock run's id, its Info names the run, PR and
//     actor), which Terraform prints as "already locked: ID=…";
//   - *engine.FencedError, *engine.ConflictError (reservations held, by a
//     fence or live runs): 423 with a LockInfo made from the first blocker;
//   - engine.ErrLocked (a write without a live write lock of its id): 423;
//   - engine.ErrConflict (wrong lineage, a serial below the head's, an
//     unlock of what is not locked, a forced unlock of a kl run): 409;
//   - engine.ErrForbidden (a read-only token releasing more than its own
//     plan's read lock): 403;
//   - engine.ErrInvalid: 400; engine.ErrNotFound: 404;
//   - engine.ErrReadOnly (a newer binary raised the store's level): 503;
//   - a cancelled request: 503; an *Error as it is; anything else 500.
//
// The holder is nil unless the answer is a 423 that names one.
func backendRefusal(err error) (*Error, *engine.LockInfo) {
	var (
		e      *Error
		locked *engine.BackendLockedError
		fenced *engine.FencedError
		held   *engine.ConflictError
	)
	switch {
	case errors.As(err, &e):
		return e, nil
	case errors.As(err, &locked):
		h := locked.Holder
		return &Error{Status: http.StatusLocked, Msg: err.Error(), Err: err}, &h
	case errors.As(err, &fenced):
		return &Error{Status: http.StatusLocked, Msg: err.Error(), Err: err}, blockerHolder(fenced.Blockers, err)
	case errors.As(err, &held):
		return &Error{Status: http.StatusLocked, Msg: err.Error(), Err: err}, blockerHolder(held.Blockers, err)
	case errors.Is(err, engine.ErrLocked):
		return &Error{Status: http.StatusLocked, Msg: err.Error(), Err: err}, nil
	case errors.Is(err, engine.ErrReadOnly):
		return &Error{Status: http.StatusServiceUnavailable, Msg: err.Error(), Err: err}, nil
	case errors.Is(err, engine.ErrForbidden):
		return &Error{Status: http.StatusForbidden, Msg: err.Error(), Err: err}, nil
	case errors.Is(err, engine.ErrConflict):
		return &Error{Status: http.StatusConflict, Msg: err.Error(), Err: err}, nil
	case errors.Is(err, engine.ErrInvalid):
		return &Error{Status: http.StatusBadRequest, Msg: err.Error(), Err: err}, nil
	case errors.Is(err, engine.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Msg: err.Error(), Err: err}, nil
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: http.StatusServiceUnavailable, Msg: "the request ended before the store answered", Err: err}, nil
	}
	return &Error{Status: http.StatusInternalServerError, Msg: "internal error (the server's log says more)", Err: err}, nil
}

// blockerHolder is the LockInfo of a 423 whose engine error names
// blockers, not a holder: the first blocker's run id as ID (what Terraform
// prints), its actor as Who, and the refusal's words as Info.
func blockerHolder(bs []engine.Blocker, err error) *engine.LockInfo {
	h := &engine.LockInfo{Info: err.Error()}
	if len(bs) > 0 {
		h.ID, h.Who, h.Operation = bs[0].Run, bs[0].Actor, "kilolock run"
		if bs[0].Fenced {
			h.Operation = "kilolock fence"
		}
	}
	return h
}

// lockedDocument is a 423 that names the holder: Terraform's LockInfo at
// the top level (Terraform's client decodes the body as one and prints its
// ID) beside the kilolock/api-error/v1 fields (docs/json.md).
type lockedDocument struct {
	engine.LockInfo
	Schema string `json:"schema"`
	Status int    `json:"status"`
	Error  string `json:"error"`
}

// writeBackendError answers r with err mapped by backendRefusal; the
// reason goes to the request log like any refusal's.
func (s *Server) writeBackendError(w http.ResponseWriter, r *http.Request, err error) {
	e, holder := backendRefusal(err)
	if holder == nil {
		writeError(w, r, e)
		return
	}
	noteError(r, e)
	if strings.TrimSpace(holder.Info) == "" {
		holder.Info = e.Msg
	}
	writeJSON(w, e.Status, lockedDocument{LockInfo: *holder, Schema: SchemaError, Status: e.Status, Error: e.Msg})
}
