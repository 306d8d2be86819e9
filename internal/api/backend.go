package api

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec // Content-MD5 is what Terraform sends (RFC 1864); an integrity check, not security
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// Backend is the engine as Terraform's http backend needs it (issue 14
// §2–§4; the contract of wt-i14c and wt-i14d): *engine.Engine implements
// it. The api takes it as an interface so that its HTTP tests can serve a
// fake beside the real engine.
type Backend interface {
	// LockBackend takes a whole-state reservation for a backend lock:
	// *engine.BackendLockedError (or a *engine.FencedError) when held.
	LockBackend(ctx context.Context, in engine.BackendLockInput) (*engine.BackendLock, error)
	// State is the state of that name: engine.ErrNotFound (or ErrInvalid
	// for a name no `kl state init` could make) when there is none.
	State(ctx context.Context, name string) (engine.State, error)
	// BackendHead is the head's state document (always one, with its
	// lineage) and serial.
	BackendHead(ctx context.Context, state string) (doc []byte, serial int64, err error)
	// WriteBackend stores a checkpoint under the live write lock in.LockID.
	WriteBackend(ctx context.Context, in engine.BackendWriteInput) error
	// RecordBackendRefusal records a POST refused before its document
	// reached the engine (413, a Content-MD5 mismatch) in the story of
	// the lock it names and the state's write locks.
	RecordBackendRefusal(ctx context.Context, in engine.BackendRefusal) ([]string, error)
	// UnlockBackend commits the lock's last checkpoint as one version and
	// releases the lock.
	UnlockBackend(ctx context.Context, in engine.BackendUnlockInput) (*engine.BackendUnlockOutcome, error)
}

var _ Backend = (*engine.Engine)(nil)

// OperationPlan is the Operation of the LockInfo `terraform plan` sends
// (Terraform's backend.OperationTypePlan, printed by its stringer): the one
// operation whose lock is a read lock.
const OperationPlan = "OperationTypePlan"

// BackendPath is the address of a state in Terraform's http backend:
// /tf/states/NAME, NAME as `kl state init` names it (it may hold "/").
const BackendPath = "/tf/states/"

// backendMethods are the methods the backend answers (the Allow header of
// a 405).
const backendMethods = "GET, HEAD, POST, LOCK, UNLOCK"

// backendRoutes registers Terraform's http backend, as its client
// (internal/backend/remote-state/http/client.go in hashicorp/terraform)
// speaks it: GET the state, POST a write under the lock (?ID=), LOCK and
// UNLOCK on the same address (lock_method and unlock_method at their
// defaults). Any other method is 405: DELETE in words of its own, since a
// state is not deleted through the backend.
func (s *Server) backendRoutes() {
	const p = BackendPath + "{name...}"
	s.mux.Handle("GET "+p, s.authenticated(http.HandlerFunc(s.getState)))
	s.mux.Handle("POST "+p, s.authenticated(http.HandlerFunc(s.postState)))
	s.mux.Handle("LOCK "+p, s.authenticated(http.HandlerFunc(s.lockState)))
	s.mux.Handle("UNLOCK "+p, s.authenticated(http.HandlerFunc(s.unlockState)))
	s.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", backendMethods)
		msg := fmt.Sprintf("method %s is not one of Terraform's http backend's (%s)", preview(r.Method), backendMethods)
		if r.Method == http.MethodDelete {
			msg = "states are not deleted through the backend: a state's versions are its history (kl history); " +
				"terraform state rm removes resources from it"
		}
		writeError(w, r, &Error{Status: http.StatusMethodNotAllowed, Msg: msg})
	})
}

// stateName is the request's state name (after /tf/states/), or a 404
// when there is none.
func stateName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if strings.Trim(name, "/") == "" {
		return "", &Error{Status: http.StatusNotFound, Msg: "no state name: a state's address is " + BackendPath + "NAME"}
	}
	return name, nil
}

// known is the request's state name once the state exists (read access
// to it: allowed), checked before anything else the request asks, so that
// a POST without ?ID=, a read-only token's LOCK or an UNLOCK of a state
// that does not exist all say that it does not (unknownState), not what
// else is wrong with them.
func (s *Server) known(r *http.Request) (string, error) {
	name, err := s.allowed(r, Read)
	if err != nil {
		return "", err
	}
	if _, err := s.backend.State(r.Context(), name); err != nil {
		if errors.Is(err, engine.ErrNotFound) {
			return "", unknownState(r, name, err)
		}
		e, _ := backendRefusal(err)
		return "", e
	}
	return name, nil
}

// unknownState is the answer to a request for state name, which the store
// does not have (cause): 400 for a GET, since Terraform reads a 404 as "no
// state yet" (getState), 404 for the other methods; its body names the
// state and the command that makes it (engine.ShellQuote'd). Terraform
// shows only the status; curl and the request log show the words.
func unknownState(r *http.Request, name string, cause error) *Error {
	status := http.StatusNotFound
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		status = http.StatusBadRequest
	}
	q := engine.ShellQuote(name)
	return &Error{Status: status, Err: cause,
		Msg: fmt.Sprintf("no state %s in this store: `kl state init %s` makes it (an empty one, which `terraform init -migrate-state` adopts), "+
			"or `kl state init %s --from FILE` from a state file; `kl state list` lists the states there are", name, q, q)}
}

// getState answers the head's document (read access). A state that does
// not exist is 400, not 404: Terraform reads 404 (and 204) as "no state
// yet" and would then write one of a lineage of its own, and
// terraform_remote_state would read no outputs from a mistyped name.
func (s *Server) getState(w http.ResponseWriter, r *http.Request) {
	name, err := s.allowed(r, Read)
	if err != nil {
		writeError(w, r, err)
		return
	}
	doc, _, err := s.backend.BackendHead(r.Context(), name)
	if errors.Is(err, engine.ErrNotFound) {
		writeError(w, r, unknownState(r, name, err))
		return
	}
	if err != nil {
		s.writeBackendError(w, r, err)
		return
	}
	sum := md5.Sum(doc) //nolint:gosec // Content-MD5
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-MD5", base64.StdEncoding.EncodeToString(sum[:]))
	_, _ = w.Write(doc)
}

// postState stores a write of Terraform under the lock its ?ID= names
// (write access): a checkpoint of the lock's run, committed as one
// version at UNLOCK. A POST without ?ID= is 423: Terraform sends one only
// when lock_address is set, and nothing writes a state without a
// reservation.
func (s *Server) postState(w http.ResponseWriter, r *http.Request) {
	name, err := s.known(r)
	if err == nil {
		err = IdentityFrom(r.Context()).Allow(name, Write)
	}
	if err != nil {
		writeError(w, r, err)
		return
	}
	lockID := r.URL.Query().Get("ID")
	if lockID == "" {
		writeError(w, r, &Error{Status: http.StatusLocked,
			Msg: fmt.Sprintf("a write of state %s without a lock (no ?ID=): set lock_address and unlock_address in the backend block, so that Terraform locks before it writes", name)})
		return
	}
	body, err := readBody(r)
	if err != nil {
		s.refusedPost(r, name, lockID, err)
		writeError(w, r, err)
		return
	}
	if len(body) == 0 {
		writeError(w, r, &Error{Status: http.StatusBadRequest, Msg: "an empty write: the body must be a state document (JSON, format version 4)"})
		return
	}
	id := IdentityFrom(r.Context())
	if err := s.backend.WriteBackend(r.Context(), engine.BackendWriteInput{State: name, LockID: lockID, Actor: id.Actor, Document: body}); err != nil {
		s.writeBackendError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// refusedPost records the refusal err of a POST of state name under
// lockID that the engine never saw — a body over the cap, a Content-MD5
// mismatch — in the lock's story (Backend.RecordBackendRefusal): Terraform
// shows only "HTTP error: 413" or "400", so `kl status`, `kl run show`
// and `kl why` must say why. Best effort: a failure is logged.
func (s *Server) refusedPost(r *http.Request, name, lockID string, err error) {
	var e *Error
	var mb *http.MaxBytesError
	refusal := engine.RefusalContentMD5
	switch {
	case errors.As(err, &mb):
		refusal, e = engine.RefusalTooLarge, tooLarge(mb.Limit)
	case errors.As(err, &e) && e.Status == http.StatusBadRequest:
	default:
		return // the connection failed: nothing was refused
	}
	id := IdentityFrom(r.Context())
	in := engine.BackendRefusal{State: name, LockID: lockID, Actor: id.Actor, Refusal: refusal,
		Reason: fmt.Sprintf("HTTP %d to a POST by %s: %s", e.Status, orWords(id.Actor, "an unknown actor"), e.Msg)}
	if _, rerr := s.backend.RecordBackendRefusal(context.WithoutCancel(r.Context()), in); rerr != nil && !errors.Is(rerr, engine.ErrNotFound) {
		s.log.Error("recording a refused write in the lock's story", "state", name, "err", rerr)
	}
}

// orWords is s, or otherwise when s is empty.
func orWords(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// lockState takes a backend lock from Terraform's LockInfo: a read lock
// for a plan (OperationPlan: read access is enough), a write lock for any
// other operation (write access). 200 answers the LockInfo as held; 423
// the holder's (lockedDocument).
func (s *Server) lockState(w http.ResponseWriter, r *http.Request) {
	name, err := s.known(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	body, err := readBody(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	if len(bytes.TrimSpace(body)) == 0 {
		writeError(w, r, &Error{Status: http.StatusBadRequest, Msg: "LOCK without a body: it must be Terraform's lock info (JSON with ID and Operation)"})
		return
	}
	info, err := parseLockInfo(body, "LOCK")
	if err != nil {
		writeError(w, r, err)
		return
	}
	id := IdentityFrom(r.Context())
	write := info.Operation != OperationPlan
	if write {
		if err := id.Allow(name, Write); err != nil {
			writeError(w, r, withOperation(err, info.Operation))
			return
		}
	}
	lock, err := s.backend.LockBackend(r.Context(), engine.BackendLockInput{State: name, Actor: id.Actor, Info: info, Write: write})
	if err != nil {
		s.writeBackendError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, lock.Info)
}

// unlockState releases a backend lock. Terraform sends the LockInfo it
// locked with; `terraform force-unlock ID` sends an empty body (a fresh
// client holds no lock info, and the ID is not sent at all): an empty
// body is a forced unlock, which lifts the state's live backend lock
// whoever holds it — never a kl or klbot run's reservations, nor a fence.
// A token that may not write the state (read-only) is passed on as
// BackendUnlockInput.ReadOnly: the engine releases only its own plan's
// read lock, named by Terraform's lock id (ADR 0059 decision 2), and its
// 403 names the lock it refused and what would release it.
func (s *Server) unlockState(w http.ResponseWriter, r *http.Request) {
	name, err := s.known(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	body, err := readBody(r)
	if err != nil {
		writeError(w, r, err)
		return
	}
	info, err := parseLockInfo(body, "UNLOCK")
	if err != nil {
		writeError(w, r, err)
		return
	}
	id := IdentityFrom(r.Context())
	in := engine.BackendUnlockInput{State: name, Actor: id.Actor, LockID: info.ID, Force: len(bytes.TrimSpace(body)) == 0,
		ReadOnly: id.Allow(name, Write) != nil}
	if _, err := s.backend.UnlockBackend(r.Context(), in); err != nil {
		if in.ReadOnly && errors.Is(err, engine.ErrForbidden) {
			err = &Error{Status: http.StatusForbidden, Err: err, Msg: fmt.Sprintf("token %s (actor %s) is read-only: %v", id.Token, id.Actor, err)}
		}
		s.writeBackendError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// allowed is the request's state name once its identity may have access a
// to it (Identity.Allow: 403 otherwise).
func (s *Server) allowed(r *http.Request, a Access) (string, error) {
	name, err := stateName(r)
	if err != nil {
		return "", err
	}
	if err := IdentityFrom(r.Context()).Allow(name, a); err != nil {
		return "", err
	}
	return name, nil
}

// withOperation adds Terraform's operation to a 403 of a write lock, since
// a read-only token may lock for a plan and the refusal must say why not
// here.
func withOperation(err error, op string) error {
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusForbidden {
		return &Error{Status: e.Status, Msg: fmt.Sprintf("%s (a lock for %s is a write lock; only %s locks to read)", e.Msg, preview(op), OperationPlan), Err: e.Err}
	}
	return err
}

// readBody reads r's body (the cap's *http.MaxBytesError past it) and
// checks it against Content-MD5 when the request sends one (Terraform
// does, with every body: base64 of the MD5, RFC 1864): a mismatch is 400
// naming both digests.
func readBody(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	raw := r.Header.Get("Content-MD5")
	if raw == "" {
		return body, nil
	}
	want, err := base64.StdEncoding.DecodeString(strings.TrimSpace(raw))
	if err != nil || len(want) != md5.Size {
		return nil, &Error{Status: http.StatusBadRequest, Msg: fmt.Sprintf("Content-MD5 %q is not the base64 of an MD5 digest (16 bytes)", preview(raw))}
	}
	if got := md5.Sum(body); !bytes.Equal(got[:], want) { //nolint:gosec // Content-MD5
		return nil, &Error{Status: http.StatusBadRequest,
			Msg: fmt.Sprintf("Content-MD5 mismatch: the header says %s, the body's %d bytes hash to %s: the body was changed or cut on the way",
				hex.EncodeToString(want), len(body), hex.EncodeToString(got[:]))}
	}
	return body, nil
}

// parseLockInfo decodes Terraform's LockInfo from the body of method (an
// empty body is a zero LockInfo). A body that is not one is 400.
func parseLockInfo(body []byte, method string) (engine.LockInfo, error) {
	var info engine.LockInfo
	if len(bytes.TrimSpace(body)) == 0 {
		return info, nil
	}
	if err := json.Unmarshal(body, &info); err != nil {
		return info, &Error{Status: http.StatusBadRequest, Msg: fmt.Sprintf("%s body is not Terraform's lock info (JSON with ID and Operation): %v", method, err)}
	}
	if method == "LOCK" && (info.ID == "" || info.Operation == "") {
		return info, &Error{Status: http.StatusBadRequest, Msg: "LOCK body without ID or Operation: it must be Terraform's lock info"}
	}
	return info, nil
}
