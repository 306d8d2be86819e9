// Package web serves Kilolock's run and state pages and the JSON views of
// /api/v1/ (issue 18; ADR 0064): what `kl run show`, `kl history`, `kl
// status`, `kl runs`, `kl why` and `kl state list` print, over HTTP, for
// the links klbot posts. `kl serve` and klbot mount it through
// api.Options.Web, behind the API's request log and body cap.
//
// Pages are server-rendered (html/template, assets embedded; no
// JavaScript): each is the report package's HTML rendering of the same
// report model the CLI prints (report.HTML), so the words are written
// once. The JSON views are the report package's JSON documents, byte for
// byte what `kl … --json` prints (docs/json.md).
//
// Routes:
//
//	GET /runs/RUN                  the run's story (kl run show RUN)
//	GET /states                    the states (kl state list)
//	GET /states/NAME[?before=N]    the head, live reservations, fences, waiting
//	                               runs and open plans (kl status --state NAME),
//	                               and a page of history (kl history --state NAME)
//	GET /states/NAME/timeline[.svg][?from=&to=&run=]   the runs over time (timeline.go)
//	GET /api/v1/states             kl state list --json
//	GET /api/v1/history?state=NAME[&limit=N&before=SERIAL]   kl history --json
//	GET /api/v1/runs[?state=NAME&limit=N&before=RUN]         kl runs --json
//	GET /api/v1/runs/RUN           kl run show RUN --json
//	GET /api/v1/runs/RUN/since-plan  kl history --since-plan RUN --json
//	GET /api/v1/runs/RUN/why       kl why RUN --json
//	GET /api/v1/status[?state=NAME]  kl status --json
//
// Authentication: nothing is served without it. A request sends a token of
// `kl token create` (read scope suffices) as HTTP Basic auth's password or
// a bearer token (api.TokenAuth), and may read the states its glob covers;
// or a page's link is signed (link.go): it opens that one page until it
// expires. A tampered link is 403 saying so; an expired one is a page
// that says so and offers to sign in with a token.
//
// No page or view shows a sensitive value (the plan's diff is redacted by
// internal/plandiff), a saved plan, a configuration archive or a state
// body: the views read only run records, markers, versions' metadata and
// reservations.
package web

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/kilolock/kilolock/internal/api"
	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/plandiff"
	"github.com/kilolock/kilolock/internal/report"
	"github.com/kilolock/kilolock/internal/token"
)

// Views is what the pages read: *engine.Engine implements it.
type Views interface {
	States(ctx context.Context) ([]engine.State, error)
	State(ctx context.Context, name string) (engine.State, error)
	History(ctx context.Context, state string, q engine.HistoryQuery) ([]engine.HistoryEntry, error)
	Runs(ctx context.Context, q engine.RunQuery) ([]engine.Run, error)
	RunStory(ctx context.Context, id string) (*engine.RunStory, error)
	PlanDiff(ctx context.Context, id string) (*plandiff.Diff, error)
	SincePlan(ctx context.Context, id string) (*engine.SincePlan, error)
	Why(ctx context.Context, id string) (*engine.Why, error)
	Status(ctx context.Context, state string) (*engine.Status, error)
}

var _ Views = (*engine.Engine)(nil)

// Options configures New.
type Options struct {
	// Views is the engine the pages read (required).
	Views Views
	// Auth authenticates tokens (required): api.TokenAuth over the store.
	Auth api.Authenticator
	// Links checks signed links; nil accepts none (tokens only).
	Links *Signer
	// Now is the clock of relative ages (time.Now if nil).
	Now func() time.Time
}

// Handler serves the routes of the package comment.
type Handler struct {
	o   Options
	mux *http.ServeMux
}

// New returns the handler over o. Errors: no Views, no Auth.
func New(o Options) (*Handler, error) {
	if o.Views == nil {
		return nil, errors.New("web: no views")
	}
	if o.Auth == nil {
		return nil, errors.New("web: no authenticator")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &Handler{o: o, mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /runs/{id}", h.runPage)
	h.mux.HandleFunc("GET /states", h.statesPage)
	h.mux.HandleFunc("GET /states/{name...}", h.statePage)
	h.mux.HandleFunc("GET /api/v1/states", h.apiStates)
	h.mux.HandleFunc("GET /api/v1/history", h.apiHistory)
	h.mux.HandleFunc("GET /api/v1/runs", h.apiRuns)
	h.mux.HandleFunc("GET /api/v1/runs/{id}", h.apiRun)
	h.mux.HandleFunc("GET /api/v1/runs/{id}/since-plan", h.apiSincePlan)
	h.mux.HandleFunc("GET /api/v1/runs/{id}/why", h.apiWhy)
	h.mux.HandleFunc("GET /api/v1/status", h.apiStatus)
	h.mux.HandleFunc("/", h.notFound)
	return h, nil
}

// notFound answers what no route serves: 405 with Allow: GET, HEAD when
// the path is a page or view another method asked for (RFC 9110 15.5.6;
// the catch-all route keeps ServeMux from saying so itself), else 404.
func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	status, msg := http.StatusNotFound, "no such route: "+r.Method+" "+r.URL.Path
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		get := r.Clone(r.Context())
		get.Method = http.MethodGet
		if _, pattern := h.mux.Handler(get); pattern != "/" {
			w.Header().Set("Allow", "GET, HEAD")
			status, msg = http.StatusMethodNotAllowed, r.Method+" "+r.URL.Path+": only GET and HEAD read pages and views"
		}
	}
	if strings.HasPrefix(r.URL.Path, "/api/") {
		api.WriteError(w, r, &api.Error{Status: status, Msg: msg})
		return
	}
	title := "Not found"
	if status == http.StatusMethodNotAllowed {
		title = "Method not allowed"
	}
	h.errorPage(w, r, status, title, strings.Replace(msg, "no such route", "no such page", 1))
}

// ServeHTTP serves r.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

//go:embed assets/page.html
var pageHTML string

//go:embed assets/style.css
var styleCSS string

var pageTmpl = template.Must(template.New("page").Parse(pageHTML))

// page is what the layout template fills in.
type page struct {
	Title   string
	CSS     template.CSS
	Body    template.HTML
	Signed  bool
	Expires string
}

// access is how a page request was let in.
type access struct {
	id     *api.Identity // a token's identity; nil for a signed link
	signed bool
	query  string // the signed link's query (exp, sig), kept on the page's own links
}

// covers reports whether the request may read state.
func (a access) covers(state string) error {
	if a.id == nil {
		return nil // a signed link's kind and id were checked
	}
	return a.id.Allow(state, api.Read)
}

// pageAccess lets a page request in: a signed link to kind and id (when
// the query has sig or exp), or a token. Otherwise it answers — a
// tampered link 403, an expired link's page, no token 401 with the
// sign-in page — and returns false.
func (h *Handler) pageAccess(w http.ResponseWriter, r *http.Request, kind, id string) (access, bool) {
	q := r.URL.Query()
	if kind != "" && (q.Has("sig") || q.Has("exp")) {
		if h.o.Links == nil {
			h.errorPage(w, r, http.StatusForbidden, "Link refused", "this server checks no signed links (it has no link signing key): sign in with a token of kl token create")
			return access{}, false
		}
		err := h.o.Links.Check(kind, id, q.Get("exp"), q.Get("sig"))
		var exp *ExpiredError
		switch {
		case errors.As(err, &exp):
			h.expiredPage(w, r, exp)
			return access{}, false
		case err != nil:
			h.errorPage(w, r, http.StatusForbidden, "Link refused", err.Error())
			return access{}, false
		}
		return access{signed: true, query: "exp=" + q.Get("exp") + "&sig=" + q.Get("sig")}, true
	}
	ident, err := h.o.Auth.Authenticate(r)
	if err != nil {
		var ae *api.Error
		if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Basic realm="kilolock", charset="UTF-8"`)
			h.errorPage(w, r, http.StatusUnauthorized, "Sign in", ae.Msg+". "+signInHelp)
			return access{}, false
		}
		h.fail(w, r, err)
		return access{}, false
	}
	api.NoteIdentity(r, ident)
	return access{id: &ident}, true
}

// signInHelp says how to sign in to a page.
const signInHelp = "Sign in with a token of kl token create (kl token create --actor NAME --read-only): your browser asks for a user name, which is ignored, and a password, which is the token."

// expiredPage answers a signed link whose expiry passed: 403 with a page
// that says when, and a link to the same page without the signature, which
// asks for a token.
func (h *Handler) expiredPage(w http.ResponseWriter, r *http.Request, e *ExpiredError) {
	body := "<p class=\"notice\">" + template.HTMLEscapeString(e.Error()) + ". The server that posted it signs a new one each time it updates the check run or comment that holds it.</p>\n" +
		"<p><a href=\"" + template.HTMLEscapeString(r.URL.Path) + "\">Sign in with a token</a> to open the page: " + template.HTMLEscapeString(signInHelp) + "</p>\n"
	h.render(w, http.StatusForbidden, page{Title: "Link expired", Body: template.HTML(body)}) //nolint:gosec // escaped above
}

// errorPage answers with status and a page titled title that says msg.
func (h *Handler) errorPage(w http.ResponseWriter, _ *http.Request, status int, title, msg string) {
	h.render(w, status, page{Title: title, Body: template.HTML("<p class=\"refusal\">" + template.HTMLEscapeString(msg) + "</p>\n")}) //nolint:gosec // escaped
}

// fail answers a page request with err: an unknown run or state 404, bad
// input 400, a token that does not cover the state 403, else 500 (the
// cause goes to the request log).
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := apiError(err)
	api.WriteError(discard{}, r, e) // the request log's note
	title := http.StatusText(e.Status)
	h.errorPage(w, r, e.Status, title, e.Msg)
}

// discard is a ResponseWriter that keeps nothing: fail lets WriteError
// note the error in the request log, then writes the page itself.
type discard struct{}

func (d discard) Header() http.Header         { return http.Header{} }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}

// apiError is err as the API's *api.Error.
func apiError(err error) *api.Error {
	var ae *api.Error
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, engine.ErrNotFound):
		return &api.Error{Status: http.StatusNotFound, Msg: err.Error(), Err: err}
	case errors.Is(err, engine.ErrInvalid):
		return &api.Error{Status: http.StatusBadRequest, Msg: err.Error(), Err: err}
	}
	return &api.Error{Status: http.StatusInternalServerError, Msg: "internal error (the server's log says more)", Err: err}
}

func (h *Handler) render(w http.ResponseWriter, status int, p page) {
	p.CSS = template.CSS(styleCSS) //nolint:gosec // our own embedded file
	var b bytes.Buffer
	if err := pageTmpl.Execute(&b, p); err != nil {
		http.Error(w, "rendering the page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	hd.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// options are the report options of a page: HTML, run ids linked to
// their pages.
func (h *Handler) options() report.Options {
	return report.Options{Format: report.HTML, Now: h.o.Now().UTC(), RunURL: func(id string) string { return PagePath(KindRun, id) }}
}

// runPage is /runs/RUN: the story of `kl run show RUN`, with the plan's
// diff.
func (h *Handler) runPage(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	acc, ok := h.pageAccess(w, r, KindRun, id)
	if !ok {
		return
	}
	parsed, err := ulid.ParseStrict(id)
	if err != nil {
		h.errorPage(w, r, http.StatusBadRequest, "Bad run id", fmt.Sprintf("%q is not a run id (26 characters of Crockford base32, as kl runs shows)", preview(id)))
		return
	}
	id = parsed.String() // Crockford base32 reads lower case as upper case
	s, err := h.story(r.Context(), id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if err := acc.covers(s.Run.State); err != nil {
		h.fail(w, r, err)
		return
	}
	var b bytes.Buffer
	if err := report.RunStory(&b, s, h.options()); err != nil {
		h.fail(w, r, err)
		return
	}
	links := "<p class=\"links\">State <a href=\"" + template.HTMLEscapeString(PagePath(KindState, s.Run.State)) + "\"><code>" + template.HTMLEscapeString(s.Run.State) + "</code></a></p>\n"
	h.render(w, http.StatusOK, h.signedPage(acc, page{Title: "Run " + id, Body: template.HTML(links + b.String())})) //nolint:gosec // report.HTML escapes every word
}

// signedPage marks p as opened with a signed link.
func (h *Handler) signedPage(acc access, p page) page {
	if acc.signed {
		p.Signed = true
	}
	return p
}

// story is the run's story as kl run show builds it: with the plan's diff
// when it has one.
func (h *Handler) story(ctx context.Context, id string) (*engine.RunStory, error) {
	s, err := h.o.Views.RunStory(ctx, id)
	if err != nil {
		return nil, err
	}
	if s.Plan != nil {
		if s.Diff, err = h.o.Views.PlanDiff(ctx, s.Plan.ID); err != nil && !errors.Is(err, engine.ErrNotFound) {
			return nil, err
		}
	}
	return s, nil
}

// statesPage is /states: the states the token covers, each linked to its
// page.
func (h *Handler) statesPage(w http.ResponseWriter, r *http.Request) {
	acc, ok := h.pageAccess(w, r, "", "")
	if !ok {
		return
	}
	states, err := h.states(r.Context(), acc.id)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var b bytes.Buffer
	if err := report.States(&b, states, h.options()); err != nil {
		h.fail(w, r, err)
		return
	}
	var l strings.Builder
	l.WriteString("<ul class=\"states\">\n")
	for _, s := range states {
		fmt.Fprintf(&l, "<li><a href=\"%s\"><code>%s</code></a> — head serial %d</li>\n",
			template.HTMLEscapeString(PagePath(KindState, s.Name)), template.HTMLEscapeString(s.Name), s.HeadSerial)
	}
	l.WriteString("</ul>\n")
	h.render(w, http.StatusOK, page{Title: "States", Body: template.HTML(l.String() + b.String())}) //nolint:gosec // escaped
}

// states are the states id's token covers.
func (h *Handler) states(ctx context.Context, id *api.Identity) ([]engine.State, error) {
	all, err := h.o.Views.States(ctx)
	if err != nil {
		return nil, err
	}
	var out []engine.State
	for _, s := range all {
		if id == nil || (token.Token{States: id.States}).Covers(s.Name) {
			out = append(out, s)
		}
	}
	return out, nil
}

// historyPageSize is the number of versions a state page shows.
const historyPageSize = 20

// statePage is /states/NAME: the head, what runs hold and wait for now,
// the open plans (kl status --state NAME), and a page of its history.
func (h *Handler) statePage(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if base, view, ok := h.timelinePath(r.Context(), name); ok {
		h.timelinePage(w, r, base, view)
		return
	}
	acc, ok := h.pageAccess(w, r, KindState, name)
	if !ok {
		return
	}
	if err := acc.covers(name); err != nil {
		h.fail(w, r, err)
		return
	}
	before, err := serialParam(r, "before")
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ctx := r.Context()
	st, err := h.o.Views.State(ctx, name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	status, err := h.o.Views.Status(ctx, name)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	hs, err := h.o.Views.History(ctx, name, engine.HistoryQuery{Before: before, Limit: historyPageSize + 1})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	more := len(hs) > historyPageSize
	if more {
		hs = hs[:historyPageSize]
	}
	o := h.options()
	var b bytes.Buffer
	tlink := PagePath(KindState, name) + "/timeline"
	if acc.query != "" {
		tlink += "?" + acc.query
	}
	fmt.Fprintf(&b, "<p class=\"links\"><a href=\"%s\">Timeline</a>: the runs over time, who waited on whom, which versions made which plans stale</p>\n", template.HTMLEscapeString(tlink))
	for _, render := range []func() error{
		func() error { return report.States(&b, []engine.State{st}, o) },
		func() error { return report.Status(&b, status, o) },
		func() error { return report.History(&b, st, hs, o) },
	} {
		if err := render(); err != nil {
			h.fail(w, r, err)
			return
		}
	}
	if more {
		q := "before=" + strconv.FormatInt(hs[len(hs)-1].Version.Serial, 10)
		if acc.query != "" {
			q += "&" + acc.query
		}
		fmt.Fprintf(&b, "<nav class=\"pager\"><a href=\"%s?%s\">Older versions</a></nav>\n", template.HTMLEscapeString(PagePath(KindState, name)), template.HTMLEscapeString(q))
	}
	h.render(w, http.StatusOK, h.signedPage(acc, page{Title: "State " + name, Body: template.HTML(b.String())})) //nolint:gosec // report.HTML escapes every word
}

// timelinePath splits NAME/timeline and NAME/timeline.svg of a state NAME
// (a state itself named so is its own page, not a timeline).
func (h *Handler) timelinePath(ctx context.Context, name string) (state, view string, ok bool) {
	for _, v := range []string{"/timeline", "/timeline.svg"} {
		base, found := strings.CutSuffix(name, v)
		if !found || base == "" {
			continue
		}
		if _, err := h.o.Views.State(ctx, name); err == nil {
			return "", "", false
		}
		return base, v[1:], true
	}
	return "", "", false
}

// timelinePage is /states/NAME/timeline (the picture in a page) and
// /states/NAME/timeline.svg (the picture alone). It opens with a token or
// with the state's signed link. ?from= and ?to= (RFC 3339) bound the time
// window; ?run=RUN keeps that run's story and the runs whose versions its
// preflight classified.
func (h *Handler) timelinePage(w http.ResponseWriter, r *http.Request, state, view string) {
	acc, ok := h.pageAccess(w, r, KindState, state)
	if !ok {
		return
	}
	if err := acc.covers(state); err != nil {
		h.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	var from, to time.Time
	for key, t := range map[string]*time.Time{"from": &from, "to": &to} {
		if v := q.Get(key); v != "" {
			p, err := time.Parse(time.RFC3339, v)
			if err != nil {
				h.fail(w, r, &api.Error{Status: http.StatusBadRequest, Msg: fmt.Sprintf("%s=%s: want a time in RFC 3339 (2026-12-03T12:00:00Z)", key, preview(v))})
				return
			}
			*t = p
		}
	}
	filter := q.Get("run")
	if filter != "" {
		if _, err := ulid.ParseStrict(filter); err != nil {
			h.fail(w, r, &api.Error{Status: http.StatusBadRequest, Msg: fmt.Sprintf("run=%s: not a run id", preview(filter))})
			return
		}
	}
	if _, err := h.o.Views.State(r.Context(), state); err != nil {
		h.fail(w, r, err)
		return
	}
	tl, err := h.timelineOf(r.Context(), state, filter, from, to)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if view == "timeline.svg" {
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
		_, _ = w.Write([]byte(tl.svg(false)))
		return
	}
	body := "<p class=\"links\">State <a href=\"" + template.HTMLEscapeString(PagePath(KindState, state)) + "\"><code>" + template.HTMLEscapeString(state) + "</code></a> · " +
		fmt.Sprintf("%d runs (the newest %d at most); hover over a bar, a mark or an arrow for its times and class.", len(tl.rows), timelineRuns) + "</p>\n"
	if len(tl.rows) == 0 {
		body += "<p>No runs in this window.</p>\n"
	} else {
		body += "<div class=\"timeline\">" + tl.svg(!acc.signed) + "</div>\n"
	}
	h.render(w, http.StatusOK, h.signedPage(acc, page{Title: "Timeline of " + state, Body: template.HTML(body)})) //nolint:gosec // every word escaped in svg
}

// serialParam is the query parameter key as a serial (0 when absent);
// a 400 naming it otherwise.
func serialParam(r *http.Request, key string) (int64, error) {
	v := r.URL.Query().Get(key)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, &api.Error{Status: http.StatusBadRequest, Msg: fmt.Sprintf("%s=%s: want a serial (a whole number, 0 or more)", key, preview(v))}
	}
	return n, nil
}

// preview is at most 40 bytes of s.
func preview(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
