package api

import (
	"crypto/md5" //nolint:gosec // Content-MD5
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/token"
)

// backendFixture is the API over a real token store and a fakeBackend
// holding state acme/prod (lineage L1).
func backendFixture(t *testing.T, o Options) (*fixture, *fakeBackend) {
	t.Helper()
	fb := newFakeBackend()
	fb.init("acme/prod", "L1")
	o.Backend = fb
	return setup(t, stores["sqlite"], o), fb
}

// send is do with headers.
func (f *fixture) send(method, path, auth, body string, headers map[string]string) (int, string, http.Header) {
	f.t.Helper()
	req, err := http.NewRequestWithContext(f.t.Context(), method, f.url+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// contentMD5 is the Content-MD5 header Terraform sends for body.
func contentMD5(body string) map[string]string {
	sum := md5.Sum([]byte(body)) //nolint:gosec // Content-MD5
	return map[string]string{"Content-MD5": base64.StdEncoding.EncodeToString(sum[:]), "Content-Type": "application/json"}
}

// lockInfo is Terraform's LockInfo JSON for id and op.
func lockInfo(id, op string) string {
	b, _ := json.Marshal(engine.LockInfo{ID: id, Operation: op, Who: "bob@laptop", Version: "1.11.4", Path: ""})
	return string(b)
}

const stateL1 = `{"version":4,"serial":3,"lineage":"L1","outputs":{},"resources":[]}`

// TestBackendProtocol walks Terraform's http backend protocol over the
// API: each route's answer, each refusal's status and words, and what the
// engine was asked.
func TestBackendProtocol(t *testing.T) {
	t.Parallel()
	f, fb := backendFixture(t, Options{MaxBody: 4096})
	writer := "Bearer " + f.mint("bob", nil)
	readerTok := f.mint("consumer", func(n *token.New) { n.ReadOnly = true })
	reader := basic("consumer", readerTok)
	readerID, err := token.ParseID(readerTok)
	if err != nil {
		t.Fatal(err)
	}
	other := "Bearer " + f.mint("carol", func(n *token.New) { n.States = "other/*" })
	p := BackendPath + "acme/prod"

	type step struct {
		name, method, path, auth, body string
		headers                        map[string]string
		wantCode                       int
		want                           []string // substrings of the body
	}
	steps := []step{
		{"GET the head", "GET", p, reader, "", nil, 200, []string{`"lineage":"L1"`}},
		{"GET without a token", "GET", p, "", "", nil, 401, []string{"no token"}},
		{"GET outside the token's glob", "GET", p, other, "", nil, 403, []string{"covers the states other/*, not acme/prod"}},
		{"GET of an unknown state is not a 404", "GET", BackendPath + "acme/nope", reader, "", nil, 400, []string{"no state acme/nope in this store: `kl state init acme/nope` makes it"}},
		{"GET without a name", "GET", BackendPath, reader, "", nil, 404, []string{"no state name"}},
		{"LOCK without a token", "LOCK", p, "", lockInfo("tf-1", "OperationTypeApply"), nil, 401, []string{"no token"}},
		{"read-only token, LOCK for apply", "LOCK", p, reader, lockInfo("tf-1", "OperationTypeApply"), nil, 403,
			[]string{"is read-only", "a lock for OperationTypeApply is a write lock; only OperationTypePlan locks to read"}},
		{"LOCK, not JSON", "LOCK", p, writer, "{nope", nil, 400, []string{"LOCK body is not Terraform's lock info"}},
		{"LOCK without a body", "LOCK", p, writer, "", nil, 400, []string{"LOCK without a body"}},
		{"LOCK without an ID", "LOCK", p, writer, `{"Operation":"OperationTypeApply"}`, nil, 400, []string{"without ID or Operation"}},
		{"read-only token, LOCK for plan", "LOCK", p, reader, lockInfo("tf-plan", OperationPlan), contentMD5(lockInfo("tf-plan", OperationPlan)), 200, []string{`"ID": "tf-plan"`}},
		{"read lock: POST refused", "POST", p + "?ID=tf-plan", writer, stateL1, nil, 423, []string{"no write lock tf-plan"}},
		{"read-only token, forced UNLOCK", "UNLOCK", p, reader, "", nil, 403, []string{"is read-only", "held by run run-1"}},
		{"read-only token, UNLOCK by a run id", "UNLOCK", p, reader, lockInfo("run-1", OperationPlan), nil, 403, []string{"is read-only", "held by run run-1"}},
		{"read-only token, UNLOCK of its plan's read lock", "UNLOCK", p, reader, lockInfo("tf-plan", OperationPlan), nil, 200, nil},
		{"LOCK for apply", "LOCK", p, writer, lockInfo("tf-1", "OperationTypeApply"), nil, 200, []string{`"Operation": "OperationTypeApply"`}},
		{"LOCK again: 423 with the holder", "LOCK", p, writer, lockInfo("tf-2", "OperationTypeApply"), nil, 423,
			[]string{`"ID": "run-2"`, `"Info": "backend lock run run-2 by bob (OperationTypeApply)"`, `"schema": "kilolock/api-error/v1"`, `"status": 423`}},
		{"read-only token, UNLOCK of the write lock", "UNLOCK", p, reader, lockInfo("tf-1", "OperationTypeApply"), nil, 403,
			[]string{"token " + readerID + " (actor consumer) is read-only: a read-only token may release only its own plan's read lock; state acme/prod is held by run run-2"}},
		{"read-only token, forced UNLOCK of the write lock", "UNLOCK", p, reader, "", nil, 403, []string{"is read-only", "held by run run-2"}},
		{"POST with a read-only token", "POST", p + "?ID=tf-1", reader, stateL1, nil, 403, []string{"is read-only"}},
		{"POST without ?ID=", "POST", p, writer, stateL1, nil, 423, []string{"without a lock (no ?ID=): set lock_address and unlock_address"}},
		{"POST under another id", "POST", p + "?ID=tf-2", writer, stateL1, nil, 423, []string{"no write lock tf-2"}},
		{"POST, Content-MD5 mismatch", "POST", p + "?ID=tf-1", writer, stateL1, contentMD5(stateL1 + " "), 400,
			[]string{"Content-MD5 mismatch: the header says", fmt.Sprintf("the body's %d bytes hash to", len(stateL1))}},
		{"POST, Content-MD5 not base64", "POST", p + "?ID=tf-1", writer, stateL1, map[string]string{"Content-MD5": "zz!"}, 400, []string{`Content-MD5 \"zz!\" is not the base64 of an MD5 digest`}},
		{"POST, empty", "POST", p + "?ID=tf-1", writer, "", nil, 400, []string{"an empty write"}},
		{"POST, not JSON", "POST", p + "?ID=tf-1", writer, "{", contentMD5("{"), 400, []string{"not JSON"}},
		{"POST, wrong lineage", "POST", p + "?ID=tf-1", writer, strings.Replace(stateL1, "L1", "L2", 1), nil, 409, []string{"lineage L2 is not state acme/prod's lineage L1"}},
		{"POST over the cap", "POST", p + "?ID=tf-1", writer, strings.Repeat(" ", 4097), nil, 413, []string{"the limit is 4096 bytes"}},
		{"POST", "POST", p + "?ID=tf-1", writer, stateL1, contentMD5(stateL1), 200, nil},
		{"DELETE", "DELETE", p, writer, "", nil, 405, []string{"states are not deleted through the backend"}},
		{"PUT", "PUT", p, writer, "", nil, 405, []string{"method PUT is not one of Terraform's http backend's (GET, HEAD, POST, LOCK, UNLOCK)"}},
		{"UNLOCK of another id", "UNLOCK", p, writer, lockInfo("tf-2", "OperationTypeApply"), nil, 409, []string{"not locked by tf-2"}},
		{"UNLOCK", "UNLOCK", p, writer, lockInfo("tf-1", "OperationTypeApply"), nil, 200, nil},
		{"GET the new head", "GET", p, reader, "", nil, 200, []string{`"serial":3`}},
		{"UNLOCK of nothing", "UNLOCK", p, writer, lockInfo("tf-1", "OperationTypeApply"), nil, 409, []string{"not locked"}},
		{"LOCK, unknown state", "LOCK", BackendPath + "acme/nope", writer, lockInfo("tf-9", "OperationTypeApply"), nil, 404, []string{"no state acme/nope in this store: `kl state init acme/nope` makes it"}},
		{"LOCK for force-unlock", "LOCK", p, writer, lockInfo("tf-3", "OperationTypeApply"), nil, 200, nil},
		{"UNLOCK, empty body (force-unlock)", "UNLOCK", p, writer, "", contentMD5(""), 200, nil},
	}
	for _, s := range steps {
		code, body, h := f.send(s.method, s.path, s.auth, s.body, s.headers)
		if code != s.wantCode {
			t.Errorf("%s: %s %s = %d %s, want %d", s.name, s.method, s.path, code, body, s.wantCode)
			continue
		}
		for _, w := range s.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: %s %s = %d %s, want it to say %q", s.name, s.method, s.path, code, body, w)
			}
		}
		if code == 405 && h.Get("Allow") != backendMethods {
			t.Errorf("%s: 405 with Allow %q", s.name, h.Get("Allow"))
		}
		if s.name == "GET the head" {
			sum := md5.Sum([]byte(body)) //nolint:gosec // Content-MD5
			if h.Get("Content-MD5") != base64.StdEncoding.EncodeToString(sum[:]) || h.Get("Content-Type") != "application/json" {
				t.Errorf("GET: Content-MD5 %q, Content-Type %q", h.Get("Content-MD5"), h.Get("Content-Type"))
			}
		}
		if code == 423 && strings.HasPrefix(s.method, "LOCK") {
			var holder engine.LockInfo // as Terraform's client decodes it
			if err := json.Unmarshal([]byte(body), &holder); err != nil || holder.ID == "" {
				t.Errorf("%s: the 423's body is not a LockInfo with an ID (%v): %s", s.name, err, body)
			}
		}
	}
	if got := fb.lastUnlock(); !got.Force || got.LockID != "" || got.Actor != "bob" {
		t.Errorf("an empty UNLOCK asked the engine %+v, want Force with no lock id, by bob", got)
	}
	wantCalls := []string{"lock acme/prod read tf-plan", "write acme/prod tf-plan", "unlock acme/prod  true read-only",
		"unlock acme/prod run-1 false read-only", "unlock acme/prod tf-plan false read-only",
		"lock acme/prod write tf-1", "lock acme/prod write tf-2", "unlock acme/prod tf-1 false read-only", "unlock acme/prod  true read-only",
		"write acme/prod tf-2", "refused acme/prod tf-1 content-md5", "refused acme/prod tf-1 content-md5", "write acme/prod tf-1", "write acme/prod tf-1",
		"refused acme/prod tf-1 too-large", "write acme/prod tf-1", "unlock acme/prod tf-2 false", "unlock acme/prod tf-1 false", "unlock acme/prod tf-1 false",
		"lock acme/prod write tf-3", "unlock acme/prod  true"}
	if got := fb.log(); strings.Join(got, "\n") != strings.Join(wantCalls, "\n") {
		t.Errorf("the engine was asked:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantCalls, "\n"))
	}
	// Every refusal's reason is in the request log.
	for _, reason := range []string{"lineage L2 is not state acme/prod's lineage L1", "Content-MD5 mismatch", "states are not deleted through the backend",
		"state acme/prod is locked: backend lock run run-2 by bob"} {
		if !strings.Contains(f.log.String(), `"reason":"`+reason) {
			t.Errorf("the request log has no reason %q:\n%s", reason, f.log.String())
		}
	}
}

// TestBackendRefusal maps each error the engine's backend methods return
// to the answer Terraform gets.
func TestBackendRefusal(t *testing.T) {
	t.Parallel()
	fence := &engine.FencedError{ConflictError: &engine.ConflictError{State: "s", Run: "r",
		Blockers: []engine.Blocker{{Run: "01FENCE", Actor: "alice", Fenced: true}}}}
	cases := map[string]struct {
		err        error
		wantStatus int
		wantHolder string // the holder's ID, "" for none
	}{
		"backend lock held": {&engine.BackendLockedError{State: "s", Holder: engine.LockInfo{ID: "01RUN", Info: "kl apply run 01RUN by alice"}}, 423, "01RUN"},
		"fenced":            {fmt.Errorf("locking: %w", fence), 423, "01FENCE"},
		"reservations held": {&engine.ConflictError{State: "s", Run: "r", Blockers: []engine.Blocker{{Run: "01LIVE"}}}, 423, "01LIVE"},
		"not locked":        {engine.Errorf(engine.ErrLocked, "no write lock x"), 423, ""},
		"wrong lineage":     {engine.Errorf(engine.ErrConflict, "lineage a is not b"), 409, ""},
		"invalid":           {engine.Errorf(engine.ErrInvalid, "not a state"), 400, ""},
		"not found":         {engine.Errorf(engine.ErrNotFound, "no state"), 404, ""},
		"read-only store":   {fmt.Errorf("writing: %w", engine.ErrReadOnly), 503, ""},
		"an API error":      {&Error{Status: 403, Msg: "no"}, 403, ""},
		"anything else":     {errors.New("disk on fire"), 500, ""},
	}
	for name, c := range cases {
		e, holder := backendRefusal(c.err)
		if e.Status != c.wantStatus {
			t.Errorf("%s: status %d, want %d", name, e.Status, c.wantStatus)
		}
		switch {
		case c.wantHolder == "" && holder != nil:
			t.Errorf("%s: a holder %+v, want none", name, holder)
		case c.wantHolder != "" && (holder == nil || holder.ID != c.wantHolder):
			t.Errorf("%s: holder %+v, want ID %s", name, holder, c.wantHolder)
		}
		if c.wantStatus == 500 && strings.Contains(e.Msg, "disk on fire") {
			t.Errorf("%s: a 500 shows its cause to the client: %s", name, e.Msg)
		}
	}
}

// TestBackendUnknownState: every method on a state the store does not
// have answers a body naming the state and the command that makes it —
// before whatever else is wrong with the request (no ?ID=, a read-only
// token, no body) — 400 for a GET (Terraform reads a 404 there as "no
// state yet"), 404 for the others; the engine is asked nothing else.
func TestBackendUnknownState(t *testing.T) {
	t.Parallel()
	f, fb := backendFixture(t, Options{})
	writer := "Bearer " + f.mint("bob", nil)
	reader := "Bearer " + f.mint("consumer", func(n *token.New) { n.ReadOnly = true })
	nope := BackendPath + "acme/nope"
	const want = "no state acme/nope in this store: `kl state init acme/nope` makes it (an empty one, which `terraform init -migrate-state` adopts)"
	cases := []struct {
		name, method, path, auth, body string
		code                           int
	}{
		{"GET", "GET", nope, reader, "", 400},
		{"POST", "POST", nope + "?ID=tf-1", writer, stateL1, 404},
		{"POST without ?ID=", "POST", nope, writer, stateL1, 404},
		{"POST, empty", "POST", nope + "?ID=tf-1", writer, "", 404},
		{"POST, read-only token", "POST", nope + "?ID=tf-1", reader, stateL1, 404},
		{"LOCK", "LOCK", nope, writer, lockInfo("tf-1", "OperationTypeApply"), 404},
		{"LOCK, read-only token for apply", "LOCK", nope, reader, lockInfo("tf-1", "OperationTypeApply"), 404},
		{"LOCK, no body", "LOCK", nope, writer, "", 404},
		{"UNLOCK", "UNLOCK", nope, writer, lockInfo("tf-1", "OperationTypeApply"), 404},
		{"UNLOCK, empty (force-unlock)", "UNLOCK", nope, writer, "", 404},
		{"UNLOCK, read-only token", "UNLOCK", nope, reader, "", 404},
		{"a name with a space, quoted for a shell", "LOCK", BackendPath + "acme/no%20pe", writer, lockInfo("tf-1", "OperationTypeApply"), 404},
	}
	for _, c := range cases {
		code, body, _ := f.send(c.method, c.path, c.auth, c.body, nil)
		w := want
		if strings.Contains(c.path, "%20") {
			w = "no state acme/no pe in this store: `kl state init 'acme/no pe'` makes it"
		}
		var doc errorDocument
		if err := json.Unmarshal([]byte(body), &doc); err != nil || code != c.code || doc.Status != c.code || !strings.Contains(doc.Error, w) {
			t.Errorf("%s: %s %s = %d %s, want %d saying %q", c.name, c.method, c.path, code, body, c.code, w)
		}
	}
	if got := fb.log(); len(got) != 0 {
		t.Errorf("the engine was asked %v about a state that does not exist", got)
	}
	if !strings.Contains(f.log.String(), `"reason":"no state acme/nope in this store`) {
		t.Errorf("the request log has no reason naming the state:\n%s", f.log.String())
	}
}

// TestBackendRefusedPostsReachTheLock: a POST refused before the engine
// reads its document — a body over the cap, declared (Content-Length, as
// Terraform sends it) or found while read (chunked), a Content-MD5
// mismatch — is recorded in the story of the lock its ?ID= names, with
// the words it was answered with (Terraform shows only "HTTP error:
// 413"); only for a token that may write the state.
func TestBackendRefusedPostsReachTheLock(t *testing.T) {
	t.Parallel()
	f, fb := backendFixture(t, Options{MaxBody: 4096})
	writer := "Bearer " + f.mint("bob", nil)
	reader := "Bearer " + f.mint("consumer", func(n *token.New) { n.ReadOnly = true })
	p := BackendPath + "acme/prod"
	if code, body, _ := f.send("LOCK", p, writer, lockInfo("tf-1", "OperationTypeApply"), nil); code != 200 {
		t.Fatalf("LOCK: %d %s", code, body)
	}
	big := strings.Repeat(" ", 5000)
	for _, c := range []struct {
		name, auth, body string
		headers          map[string]string
		code             int
	}{
		{"over the cap, declared", writer, big, nil, 413},
		{"over the cap, read-only token", reader, big, nil, 413},
		{"over the cap, no token", "", big, nil, 413},
		{"Content-MD5 mismatch", writer, stateL1, contentMD5(stateL1 + " "), 400},
	} {
		if code, body, _ := f.send("POST", p+"?ID=tf-1", c.auth, c.body, c.headers); code != c.code {
			t.Errorf("%s: %d %s, want %d", c.name, code, body, c.code)
		}
	}
	// A chunked body (no Content-Length) passes the cap while it is read.
	req, err := http.NewRequestWithContext(t.Context(), "POST", f.url+p+"?ID=tf-1", io.MultiReader(strings.NewReader(big)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", writer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Errorf("a chunked body over the cap: %d, want 413", resp.StatusCode)
	}
	got := fb.refused()
	want := []struct{ refusal, reason string }{
		{engine.RefusalTooLarge, "HTTP 413 to a POST by bob: request body too large: the limit is 4096 bytes"},
		{engine.RefusalContentMD5, "HTTP 400 to a POST by bob: Content-MD5 mismatch: the header says"},
		{engine.RefusalTooLarge, "HTTP 413 to a POST by bob: request body too large: the limit is 4096 bytes"},
	}
	if len(got) != len(want) {
		t.Fatalf("recorded refusals %+v, want %d (not the read-only token's, not the anonymous one's)", got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.State != "acme/prod" || g.LockID != "tf-1" || g.Actor != "bob" || g.Refusal != w.refusal || !strings.HasPrefix(g.Reason, w.reason) {
			t.Errorf("refusal %d = %+v, want %s saying %q", i, g, w.refusal, w.reason)
		}
	}
}
