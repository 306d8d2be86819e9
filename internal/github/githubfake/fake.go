package githubfake

import (
	"bytes"
	"crypto/rsa"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// maxBody caps a request body the fake reads (GitHub's own cap is 25 MB
// for webhooks; API bodies are far smaller).
const maxBody = 30 << 20

// Fake is a GitHub REST API server for tests. Create it with New; seed it
// with AddRepo, AddInstallation, NewAppKey, AddToken, AddPR, SetDraft,
// AddComment, SetPermission, AddReview, SetTarball and SetFile; point clients at APIURL; read
// what happened with Requests, CheckRuns, Comments and Reactions. All
// methods are safe for concurrent use.
type Fake struct {
	srv *httptest.Server
	api *API

	// Now is the fake's clock for token and link expiry and timestamps.
	// Set it before the first request; the default is time.Now.
	Now func() time.Time

	mu            sync.Mutex
	apps          map[int64]*rsa.PublicKey
	slugs         map[int64]string
	installations map[int64]*installation
	tokens        map[string]*token
	repos         map[string]*repo // by lower-case owner/name
	checkRuns     map[int64]*CheckRun
	comments      map[int64]*Comment
	reactions     map[int64][]Reaction // by comment id
	statuses      []map[string]any
	links         map[string]tarLink
	failures      []*Failure
	// log is the request log, guarded by logMu (not mu: a handler that
	// holds mu writes its answer, and the answer is logged as it starts).
	logMu  sync.Mutex
	log    []Request
	nextID int64
	keys   int
}

type installation struct {
	id    int64
	appID int64
	repos map[string]bool // empty: every repository
}

type token struct {
	value          string
	installationID int64 // 0 for a plain token (AddToken)
	login          string
	expiresAt      time.Time
	expired        bool
}

type repo struct {
	id          int64
	owner, name string
	prs         map[int]*PR
	permissions map[string]string // login → role
	reviews     map[int][]Review
	tarballs    map[string][]byte            // ref → .tar.gz
	files       map[string]map[string][]byte // ref → path → content (SetFile)
	compares    map[string]Comparison        // "base...head" → comparison (SetCompare)
	commits     map[string]*Commit           // by SHA (AddCommit, SetBranch)
	branches    map[string]string            // branch → SHA (SetBranch)
}

type tarLink struct {
	data    []byte
	expires time.Time
}

// Request is one request the fake received.
type Request struct {
	Method string
	Path   string // as sent, including any /api/v3 prefix
	Query  string
	Header http.Header
	Body   []byte
	Time   time.Time
	Status int // status the fake answered with
}

// New starts a fake and stops it when the test ends.
func New(t testing.TB) *Fake {
	t.Helper()
	api, err := LoadAPI()
	if err != nil {
		t.Fatalf("githubfake: %v", err)
	}
	f := &Fake{
		api: api, Now: time.Now,
		apps: map[int64]*rsa.PublicKey{}, slugs: map[int64]string{},
		installations: map[int64]*installation{}, tokens: map[string]*token{},
		repos: map[string]*repo{}, checkRuns: map[int64]*CheckRun{}, comments: map[int64]*Comment{},
		reactions: map[int64][]Reaction{}, links: map[string]tarLink{}, nextID: 1000,
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serveHTTP))
	t.Cleanup(f.srv.Close)
	return f
}

// URL is the server root, e.g. http://127.0.0.1:PORT.
func (f *Fake) URL() string { return f.srv.URL }

// APIURL is the API base in GitHub Enterprise form, http://127.0.0.1:PORT/api/v3/,
// which go-github's WithEnterpriseURLs keeps as is. The fake also answers
// without the /api/v3 prefix (api.github.com form).
func (f *Fake) APIURL() string { return f.srv.URL + "/api/v3/" }

// Client returns a new *http.Client for the fake's server (callers may
// change it freely).
func (f *Fake) Client() *http.Client { return &http.Client{Transport: f.srv.Client().Transport} }

func (f *Fake) id() int64 {
	f.nextID++
	return f.nextID
}

func (f *Fake) now() time.Time { return f.Now().UTC().Truncate(time.Second) }

// recorder captures the status a handler writes, for the request log,
// and logs the request (logged) before the answer's first byte leaves: a
// client that has its answer finds its request in Requests.
type recorder struct {
	http.ResponseWriter
	status int
	buf    *bytes.Buffer // non-nil: hold the body (AfterHandling failures)
	logged func(status int)
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	if r.buf == nil {
		r.log()
		r.ResponseWriter.WriteHeader(code)
	}
}

// log logs the request once, with the status being sent.
func (r *recorder) log() {
	if r.logged != nil {
		r.logged(r.status)
		r.logged = nil
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if r.buf != nil {
		return r.buf.Write(b)
	}
	return r.ResponseWriter.Write(b)
}

func (f *Fake) serveHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	rec := &recorder{ResponseWriter: w}
	rec.logged = func(status int) {
		f.logMu.Lock()
		f.log = append(f.log, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			Header: r.Header.Clone(), Body: body, Time: f.Now(), Status: status})
		f.logMu.Unlock()
	}
	defer rec.log() // a handler that wrote nothing: net/http sends 200
	if err != nil || len(body) > maxBody {
		writeJSON(rec, http.StatusRequestEntityTooLarge, map[string]any{"message": "Request body too large"})
		return
	}
	apiP := apiPath(r.URL.Path)
	fl := f.takeFailure(r.Method, apiP)
	if fl != nil && !fl.AfterHandling {
		writeFailure(rec, fl)
		return
	}
	if fl != nil {
		rec.buf = &bytes.Buffer{}
	}
	if strings.HasPrefix(apiP, "/_fake/") {
		f.serveInternal(rec, r, apiP)
	} else {
		f.serveAPI(rec, r, body)
	}
	if fl != nil {
		rec.buf = nil
		for k := range w.Header() {
			delete(w.Header(), k)
		}
		writeFailure(rec, fl)
	}
}

func writeFailure(w http.ResponseWriter, fl *Failure) {
	for k, vs := range fl.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(fl.Status)
	_, _ = io.WriteString(w, failureBody(fl))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"message":"githubfake: encoding response"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func notFound(w http.ResponseWriter) {
	writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found",
		"documentation_url": "https://docs.github.com/rest", "status": "404"})
}
