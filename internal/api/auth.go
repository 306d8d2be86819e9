package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/token"
)

// Identity is who a request acts as: what its token says.
type Identity struct {
	Actor     string    // the token's actor: run records and history name them
	Token     string    // the token's id (public; never its secret)
	ReadOnly  bool      // it may read but not lock or write
	States    string    // the doublestar glob of the states it covers
	ExpiresAt time.Time // zero: it does not expire
}

// Authenticator says who a request acts as. The backend handlers (issue
// 14 §2–§4) and every route that needs a token use it through
// Server.authenticated.
type Authenticator interface {
	// Authenticate returns r's identity, or an *Error of status 401 (no
	// credentials, not a Kilolock token, an unknown or wrong one, an
	// expired or revoked one) or 503 (the store did not answer).
	Authenticate(r *http.Request) (Identity, error)
}

// TokenAuth authenticates the tokens of `kl token create` (ADR 0054): the
// token is the password of HTTP Basic auth — the username is ignored,
// since Terraform's http backend sends credentials only when `username` is
// set, and the token alone says who acts — or an `Authorization: Bearer`
// token. It looks the token up by its id and compares the SHA-256 of what
// the request sent with the stored one in constant time.
type TokenAuth struct {
	Tokens token.Store
	// Now is the clock an expiry is compared with (time.Now if nil).
	Now func() time.Time
}

var _ Authenticator = (*TokenAuth)(nil)

// errNoCredentials is the 401 of a request without any.
var errNoCredentials = &Error{Status: http.StatusUnauthorized,
	Msg: "no token: send a token of kl token create as the password of HTTP Basic auth (any username; Terraform's http backend sends it only when username is set) or as a bearer token"}

// errUnknownToken is the 401 of a token no store holds, or whose secret is
// wrong: the two are not told apart.
var errUnknownToken = &Error{Status: http.StatusUnauthorized, Msg: "unknown token: it is not one of kl token list (mistyped, or made for another store)"}

// Authenticate returns r's identity (Authenticator).
func (a *TokenAuth) Authenticate(r *http.Request) (Identity, error) {
	secret, err := credentials(r)
	if err != nil {
		return Identity{}, err
	}
	id, err := token.ParseID(secret)
	if err != nil {
		return Identity{}, &Error{Status: http.StatusUnauthorized, Msg: "bad credentials: " + err.Error()}
	}
	t, hash, err := a.Tokens.GetToken(r.Context(), id)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return Identity{}, errUnknownToken
	case err != nil:
		return Identity{}, &Error{Status: http.StatusServiceUnavailable, Msg: "cannot check the token: the store did not answer", Err: err}
	case !token.Matches(secret, hash):
		return Identity{}, errUnknownToken
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	switch t.StatusAt(now()) {
	case token.Revoked:
		return Identity{}, &Error{Status: http.StatusUnauthorized,
			Msg: fmt.Sprintf("token %s was revoked by %s at %s", t.ID, t.RevokedBy, t.RevokedAt.UTC().Format(time.RFC3339))}
	case token.Expired:
		return Identity{}, &Error{Status: http.StatusUnauthorized,
			Msg: fmt.Sprintf("token %s expired at %s: make a new one with kl token create", t.ID, t.ExpiresAt.UTC().Format(time.RFC3339))}
	}
	return Identity{Actor: t.Actor, Token: t.ID, ReadOnly: t.ReadOnly, States: t.States, ExpiresAt: t.ExpiresAt}, nil
}

// credentials returns the token r sends: Basic auth's password, or a
// bearer token. A request without an Authorization header is
// errNoCredentials; one with another scheme, or a malformed one, a 401
// that names it.
func credentials(r *http.Request) (string, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", errNoCredentials
	}
	if _, pass, ok := r.BasicAuth(); ok {
		if pass == "" {
			return "", &Error{Status: http.StatusUnauthorized, Msg: "bad credentials: HTTP Basic auth without a password: the password is the token"}
		}
		return pass, nil
	}
	scheme, rest, _ := strings.Cut(h, " ")
	switch {
	case strings.EqualFold(scheme, "Bearer") && strings.TrimSpace(rest) != "":
		return strings.TrimSpace(rest), nil
	case strings.EqualFold(scheme, "Basic"):
		return "", &Error{Status: http.StatusUnauthorized, Msg: "bad credentials: the Basic auth header is not base64 of username:password"}
	case strings.EqualFold(scheme, "Bearer"):
		return "", &Error{Status: http.StatusUnauthorized, Msg: "bad credentials: an empty bearer token"}
	}
	return "", &Error{Status: http.StatusUnauthorized, Msg: fmt.Sprintf("bad credentials: unknown authorization scheme %q: use Basic or Bearer", preview(scheme))}
}

// preview is at most 20 bytes of s, for naming what a client sent without
// echoing much of it.
func preview(s string) string {
	if len(s) > 20 {
		return s[:20] + "…"
	}
	return s
}

type identityKey struct{}

// IdentityFrom returns the identity Server.authenticated found for the
// request of ctx (zero outside an authenticated route).
func IdentityFrom(ctx context.Context) Identity {
	id, _ := ctx.Value(identityKey{}).(Identity)
	return id
}

// NoteIdentity names id (its actor and token id) in r's request log
// record: what Server.authenticated does, for the routes of Options.Web,
// which authenticate themselves (a signed link, or a token).
func NoteIdentity(r *http.Request, id Identity) {
	if n := noteOf(r.Context()); n != nil {
		n.actor, n.token = id.Actor, id.Token
	}
}

// authenticated serves next only to a request its Authenticator accepts,
// with the Identity in the request's context (IdentityFrom) and in the
// request log; the others get its 401 (or 503).
func (s *Server) authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := s.auth.Authenticate(r)
		if err != nil {
			writeError(w, r, err)
			return
		}
		if n := noteOf(r.Context()); n != nil {
			n.actor, n.token = id.Actor, id.Token
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), identityKey{}, id)))
	})
}

// Access is what a request asks of a state.
type Access int

// Accesses.
const (
	// Read: GET a state (terraform_remote_state, terraform plan's read lock).
	Read Access = iota
	// Write: lock, write or unlock a state.
	Write
)

// Allow returns nil when id may have access a to state, else an *Error of
// status 403 saying why: a read-only token asked to write, or a state its
// glob does not cover.
func (id Identity) Allow(state string, a Access) error {
	if !(token.Token{States: id.States}).Covers(state) {
		return &Error{Status: http.StatusForbidden,
			Msg: fmt.Sprintf("token %s (actor %s) covers the states %s, not %s: make a token whose --state covers it", id.Token, id.Actor, id.States, state)}
	}
	if a == Write && id.ReadOnly {
		return &Error{Status: http.StatusForbidden,
			Msg: fmt.Sprintf("token %s (actor %s) is read-only: it may read state %s but not lock or write it; use a token made without --read-only", id.Token, id.Actor, state)}
	}
	return nil
}
