package web

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"

	"github.com/oklog/ulid/v2"

	"github.com/kilolock/kilolock/internal/api"
	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
	"github.com/kilolock/kilolock/internal/token"
)

// The JSON views of /api/v1/: each is the report package's JSON document,
// the one `kl … --json` prints for the same store (docs/json.md). They
// take a token only (no signed link), and answer errors with the API's
// kilolock/api-error/v1 document.

// apiAccess authenticates a JSON view's request, or answers it.
func (h *Handler) apiAccess(w http.ResponseWriter, r *http.Request) (api.Identity, bool) {
	id, err := h.o.Auth.Authenticate(r)
	if err != nil {
		api.WriteError(w, r, err)
		return api.Identity{}, false
	}
	api.NoteIdentity(r, id)
	return id, true
}

// everyState refuses a view across every state to a token that does not
// cover every state: it names the parameter that narrows the view.
func everyState(id api.Identity, what string) error {
	if id.States == token.AllStates {
		return nil
	}
	return &api.Error{Status: http.StatusForbidden,
		Msg: fmt.Sprintf("token %s (actor %s) covers the states %s, not every state: ask for %s of one state with ?state=NAME", id.Token, id.Actor, id.States, what)}
}

// stateParam is ?state=NAME, checked against id's glob and known to the
// store ("" when absent).
func (h *Handler) stateParam(r *http.Request, id api.Identity, what string) (string, error) {
	name := r.URL.Query().Get("state")
	if name == "" {
		return "", everyState(id, what)
	}
	if err := id.Allow(name, api.Read); err != nil {
		return "", err
	}
	if _, err := h.o.Views.State(r.Context(), name); err != nil {
		return "", err
	}
	return name, nil
}

// limitParam is ?limit=N (def when absent), at least 1 and at most 1000.
func limitParam(r *http.Request, def int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		return 0, &api.Error{Status: http.StatusBadRequest, Msg: fmt.Sprintf("limit=%s: want a whole number from 1 to 1000", preview(v))}
	}
	return n, nil
}

// runParam is the {id} of the path, a run id.
func runParam(r *http.Request) (string, error) {
	id, err := ulid.ParseStrict(r.PathValue("id"))
	if err != nil {
		return "", &api.Error{Status: http.StatusBadRequest, Msg: fmt.Sprintf("%q is not a run id (26 characters of Crockford base32, as kl runs shows)", preview(r.PathValue("id")))}
	}
	return id.String(), nil
}

// writeView writes a JSON document rendered by render, or the error.
func writeView(w http.ResponseWriter, r *http.Request, render func(o report.Options, b *bytes.Buffer) error) {
	var b bytes.Buffer
	if err := render(report.Options{Format: report.JSON}, &b); err != nil {
		api.WriteError(w, r, apiError(err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
}

// fail answers a JSON view with err.
func apiFail(w http.ResponseWriter, r *http.Request, err error) { api.WriteError(w, r, apiError(err)) }

func (h *Handler) apiStates(w http.ResponseWriter, r *http.Request) {
	id, ok := h.apiAccess(w, r)
	if !ok {
		return
	}
	states, err := h.states(r.Context(), &id)
	if err != nil {
		apiFail(w, r, err)
		return
	}
	writeView(w, r, func(o report.Options, b *bytes.Buffer) error { return report.States(b, states, o) })
}

func (h *Handler) apiHistory(w http.ResponseWriter, r *http.Request) {
	id, ok := h.apiAccess(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Get("state") == "" {
		apiFail(w, r, &api.Error{Status: http.StatusBadRequest, Msg: "history needs ?state=NAME (kl history --state NAME)"})
		return
	}
	name, err := h.stateParam(r, id, "the history")
	if err != nil {
		apiFail(w, r, err)
		return
	}
	q := engine.HistoryQuery{}
	if q.Limit, err = limitParam(r, 50); err == nil {
		q.Before, err = serialParam(r, "before")
	}
	if err != nil {
		apiFail(w, r, err)
		return
	}
	hs, err := h.o.Views.History(r.Context(), name, q)
	if err != nil {
		apiFail(w, r, err)
		return
	}
	st, err := h.o.Views.State(r.Context(), name)
	if err != nil {
		apiFail(w, r, err)
		return
	}
	writeView(w, r, func(o report.Options, b *bytes.Buffer) error { return report.History(b, st, hs, o) })
}

func (h *Handler) apiRuns(w http.ResponseWriter, r *http.Request) {
	id, ok := h.apiAccess(w, r)
	if !ok {
		return
	}
	var q engine.RunQuery
	var err error
	if q.State, err = h.stateParam(r, id, "the runs"); err == nil {
		q.Limit, err = limitParam(r, 20)
	}
	if err != nil {
		apiFail(w, r, err)
		return
	}
	if v := r.URL.Query().Get("before"); v != "" {
		b, err := ulid.ParseStrict(v)
		if err != nil {
			apiFail(w, r, &api.Error{Status: http.StatusBadRequest, Msg: fmt.Sprintf("before=%s: not a run id", preview(v))})
			return
		}
		q.Before = b.String()
	}
	// One more than shown tells whether there is a next page, as kl runs.
	page := q
	page.Limit++
	rs, err := h.o.Views.Runs(r.Context(), page)
	if err != nil {
		apiFail(w, r, err)
		return
	}
	more := len(rs) > q.Limit
	if more {
		rs = rs[:q.Limit]
	}
	writeView(w, r, func(o report.Options, b *bytes.Buffer) error {
		return report.Runs(b, rs, report.RunsPage{State: q.State, More: more}, o)
	})
}

// runOf reads the {id} run's story and checks that id's token covers its
// state.
func (h *Handler) runOf(w http.ResponseWriter, r *http.Request, id api.Identity) (*engine.RunStory, bool) {
	run, err := runParam(r)
	if err != nil {
		apiFail(w, r, err)
		return nil, false
	}
	s, err := h.story(r.Context(), run)
	if err == nil {
		err = id.Allow(s.Run.State, api.Read)
	}
	if err != nil {
		apiFail(w, r, err)
		return nil, false
	}
	return s, true
}

func (h *Handler) apiRun(w http.ResponseWriter, r *http.Request) {
	id, ok := h.apiAccess(w, r)
	if !ok {
		return
	}
	s, ok := h.runOf(w, r, id)
	if !ok {
		return
	}
	writeView(w, r, func(o report.Options, b *bytes.Buffer) error { return report.RunStory(b, s, o) })
}

func (h *Handler) apiSincePlan(w http.ResponseWriter, r *http.Request) {
	id, ok := h.apiAccess(w, r)
	if !ok {
		return
	}
	s, ok := h.runOf(w, r, id)
	if !ok {
		return
	}
	sp, err := h.o.Views.SincePlan(r.Context(), s.Run.ID)
	if err == nil && s.Plan == nil {
		err = engine.Errorf(engine.ErrInvalid, "run %s has no plan", s.Run.ID)
	}
	if err != nil {
		apiFail(w, r, err)
		return
	}
	writeView(w, r, func(o report.Options, b *bytes.Buffer) error { return report.SincePlan(b, sp, *s.Plan, o) })
}

func (h *Handler) apiWhy(w http.ResponseWriter, r *http.Request) {
	id, ok := h.apiAccess(w, r)
	if !ok {
		return
	}
	s, ok := h.runOf(w, r, id)
	if !ok {
		return
	}
	y, err := h.o.Views.Why(r.Context(), s.Run.ID)
	if err != nil {
		apiFail(w, r, err)
		return
	}
	writeView(w, r, func(o report.Options, b *bytes.Buffer) error { return report.Why(b, y, o) })
}

func (h *Handler) apiStatus(w http.ResponseWriter, r *http.Request) {
	id, ok := h.apiAccess(w, r)
	if !ok {
		return
	}
	name, err := h.stateParam(r, id, "the status")
	if err != nil {
		apiFail(w, r, err)
		return
	}
	st, err := h.o.Views.Status(r.Context(), name)
	if err != nil {
		apiFail(w, r, err)
		return
	}
	writeView(w, r, func(o report.Options, b *bytes.Buffer) error { return report.Status(b, st, o) })
}
