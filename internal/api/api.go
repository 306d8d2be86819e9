// Package api is Kilolock's HTTP face (docs/design.md "Layout"; ADR 0054):
// one handler that `kl serve` mounts on its listener and klbot on its own.
// It owns every route — /healthz, /api/v1/whoami, Terraform's http
// backend (/tf/states/NAME, issue 14 §2–§4, backend.go) and, through
// Options.Web, the run and state pages and the JSON views of internal/web
// (ADR 0064) — and the middleware they share, outermost first:
//
//   - the request log (log.go): one slog record per request — method, path
//     (never the query), status, bytes, duration, and the actor and token
//     id once authenticated; never a credential;
//   - the body cap (body.go): a body over Options.MaxBody is refused with
//     413 naming the limit, before it is read when it declares its length,
//     and as soon as it passes the limit when it does not;
//   - authentication (auth.go), on the routes that need it: a token of
//     `kl token create` as HTTP Basic auth (the password; the username is
//     ignored) or as a bearer token. No token or a bad one is 401; a token
//     that may not do what it asks (read-only, or a state its glob does not
//     cover) is 403 (Identity.Allow).
//
// Errors are rendered in one place (error.go): a kilolock/api-error/v1
// JSON document (docs/json.md).
package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/kilolock/kilolock/internal/token"
)

// DefaultMaxBody is the default cap on a request body, in bytes: 64 MiB.
// Terraform sends a whole state with each write; a state of 2,000
// resources is about 1.25 MB (docs/terraform.md), so this leaves room for
// states fifty times that, and bounds what one request can make the server
// hold in memory.
const DefaultMaxBody = 64 << 20

// MaxBodyMiB is the largest cap a server may set, in MiB (4 GiB): the
// bound of kl serve's --max-body-mib and klbot's KLBOT_MAX_BODY_MIB.
const MaxBodyMiB = 4096

// Options configures New.
type Options struct {
	// Tokens is the store the token authenticator reads (required).
	Tokens token.Store
	// Logger receives the request log (slog.Default() if nil).
	Logger *slog.Logger
	// MaxBody caps request bodies, in bytes (DefaultMaxBody if 0; it must
	// not be negative).
	MaxBody int64
	// Now is the clock a token's expiry is compared with (time.Now if nil).
	Now func() time.Time
	// Backend serves Terraform's http backend at /tf/states/NAME
	// (backend.go); nil serves none (those paths are 404).
	Backend Backend
	// Web serves the run and state pages (/runs/, /states) and the JSON
	// views under /api/v1/ (internal/web, ADR 0064) behind the request log
	// and the body cap; it authenticates each request itself (a token of
	// kl token create, or a signed link). nil serves none (404).
	Web http.Handler
}

// Server is the API's handler: routes behind the shared middleware.
type Server struct {
	auth    Authenticator
	backend Backend
	web     http.Handler
	log     *slog.Logger
	maxBody int64
	mux     *http.ServeMux
	handler http.Handler
}

// New returns the API's handler over o. Errors: no token store; a negative
// MaxBody.
func New(o Options) (*Server, error) {
	if o.Tokens == nil {
		return nil, errors.New("api: no token store")
	}
	if o.MaxBody < 0 {
		return nil, errors.New("api: negative body cap")
	}
	if o.MaxBody == 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	s := &Server{auth: &TokenAuth{Tokens: o.Tokens, Now: o.Now}, backend: o.Backend, web: o.Web, log: o.Logger, maxBody: o.MaxBody, mux: http.NewServeMux()}
	s.routes()
	s.handler = s.logRequests(s.capBodies(s.mux))
	return s, nil
}

// ServeHTTP serves r through the middleware and the routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// MaxBody is the body cap in bytes.
func (s *Server) MaxBody() int64 { return s.maxBody }

// routes registers every route (Go's method+path patterns).
func (s *Server) routes() {
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.Handle("GET /api/v1/whoami", s.authenticated(http.HandlerFunc(s.whoami)))
	if s.backend != nil {
		s.backendRoutes()
	}
	if s.web != nil {
		// GET /api/v1/whoami, registered above, is the more specific
		// pattern: it stays the API's.
		for _, p := range []string{"/runs/", "/states", "/states/", "/api/v1/"} {
			s.mux.Handle(p, s.web)
		}
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, r, &Error{Status: http.StatusNotFound, Msg: "no such route: " + r.Method + " " + r.URL.Path})
	})
}

// healthz answers "ok": the process serves. It reads nothing, so a
// liveness probe does not fail while the store is slow.
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// SchemaWhoami is the schema of GET /api/v1/whoami's document.
const SchemaWhoami = "kilolock/whoami/v1"

// whoamiDocument is what GET /api/v1/whoami answers: the identity of the
// request's token (docs/json.md).
type whoamiDocument struct {
	Schema    string `json:"schema"`
	Actor     string `json:"actor"`
	Token     string `json:"token"`
	ReadOnly  bool   `json:"read_only"`
	States    string `json:"states"`
	ExpiresAt string `json:"expires_at,omitempty"`
}

// whoami answers who the request's token says it is: a way to check a
// token (`curl -u :TOKEN …/api/v1/whoami`).
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	id := IdentityFrom(r.Context())
	doc := whoamiDocument{Schema: SchemaWhoami, Actor: id.Actor, Token: id.Token, ReadOnly: id.ReadOnly, States: id.States}
	if !id.ExpiresAt.IsZero() {
		doc.ExpiresAt = id.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	writeJSON(w, http.StatusOK, doc)
}

// writeJSON writes v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
