package githubfake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// maxCommentBody is GitHub's limit on an issue comment body; the OpenAPI
// description does not carry it (docs/github.md "Comments").
const maxCommentBody = 65536

// call is one routed API request.
type call struct {
	op     *Operation
	params map[string]string
	body   map[string]any // decoded with UseNumber; nil when none
	who    caller
	appID  int64 // app-JWT calls
}

func (c *call) str(name string) (string, bool) {
	v, ok := c.body[name]
	if !ok || v == nil {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}

func (c *call) intParam(name string) int64 {
	n, _ := strconv.ParseInt(c.params[name], 10, 64) // matched as an integer already
	return n
}

// handlers by operation id.
var handlers = map[string]func(f *Fake, w http.ResponseWriter, r *http.Request, c *call){
	"apps/create-installation-access-token":           (*Fake).createToken,
	"apps/get-repo-installation":                      (*Fake).getRepoInstallation,
	"checks/create":                                   (*Fake).createCheckRun,
	"checks/get":                                      (*Fake).getCheckRun,
	"checks/update":                                   (*Fake).updateCheckRun,
	"checks/list-for-ref":                             (*Fake).listCheckRuns,
	"issues/get":                                      (*Fake).getIssue,
	"issues/list-comments":                            (*Fake).listComments,
	"issues/create-comment":                           (*Fake).createComment,
	"issues/update-comment":                           (*Fake).updateComment,
	"issues/delete-comment":                           (*Fake).deleteComment,
	"reactions/create-for-issue-comment":              (*Fake).createReaction,
	"pulls/list":                                      (*Fake).listPulls,
	"pulls/get":                                       (*Fake).getPull,
	"pulls/list-files":                                (*Fake).listPullFiles,
	"pulls/list-reviews":                              (*Fake).listReviews,
	"repos/get-collaborator-permission-level":         (*Fake).getPermission,
	"repos/download-tarball-archive":                  (*Fake).tarball,
	"repos/get-content":                               (*Fake).getContent,
	"repos/create-commit-status":                      (*Fake).createStatus,
	"repos/compare-commits":                           (*Fake).compare,
	"repos/get-commit":                                (*Fake).getCommit,
	"repos/list-pull-requests-associated-with-commit": (*Fake).listCommitPulls,
}

// docURL is the documentation_url of an operation's errors.
var docURL = map[string]string{
	"checks/create":                      "https://docs.github.com/rest/checks/runs#create-a-check-run",
	"checks/update":                      "https://docs.github.com/rest/checks/runs#update-a-check-run",
	"issues/create-comment":              "https://docs.github.com/rest/issues/comments#create-an-issue-comment",
	"issues/update-comment":              "https://docs.github.com/rest/issues/comments#update-an-issue-comment",
	"reactions/create-for-issue-comment": "https://docs.github.com/rest/reactions/reactions#create-reaction-for-an-issue-comment",
	"repos/create-commit-status":         "https://docs.github.com/rest/commits/statuses#create-a-commit-status",
}

// validationFailed answers 422 in GitHub's shape.
func validationFailed(w http.ResponseWriter, op *Operation, errs []FieldError) {
	list := make([]map[string]any, len(errs))
	for i, e := range errs {
		list[i] = map[string]any{"resource": operationResource(op.ID), "field": e.Field, "code": e.Code, "message": e.Message}
	}
	doc := docURL[op.ID]
	if doc == "" {
		doc = "https://docs.github.com/rest"
	}
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "Validation Failed", "errors": list,
		"documentation_url": doc, "status": "422"})
}

func (f *Fake) serveAPI(w http.ResponseWriter, r *http.Request, body []byte) {
	op, params, _ := f.api.Match(r.Method, apiPath(r.URL.EscapedPath()))
	h := handlers[opID(op)]
	if op == nil || h == nil {
		notFound(w) // GitHub answers an unknown route or method with 404
		return
	}
	c := &call{op: op, params: params}
	if strings.HasPrefix(op.ID, "apps/") {
		id, ok := f.authJWT(w, r)
		if !ok {
			return
		}
		c.appID = id
	} else {
		who, ok := f.authToken(w, r)
		if !ok {
			return
		}
		c.who = who
	}
	var errs []FieldError
	q := r.URL.Query()
	for _, p := range op.Params {
		if p.In != "query" || !q.Has(p.Name) {
			continue
		}
		var v any = q.Get(p.Name)
		if p.Schema.Type == "integer" || p.Schema.Type == "number" {
			v = json.Number(q.Get(p.Name))
		}
		for _, e := range p.Schema.Validate(v) {
			e.Field = p.Name
			errs = append(errs, e)
		}
	}
	if op.Body != nil {
		trimmed := bytes.TrimSpace(body)
		var data any
		switch {
		case len(trimmed) == 0 || string(trimmed) == "null":
			if op.BodyRequired {
				data = map[string]any{} // report the missing required fields
			}
		default:
			dec := json.NewDecoder(bytes.NewReader(trimmed))
			dec.UseNumber()
			if err := dec.Decode(&data); err != nil {
				writeJSON(w, http.StatusBadRequest, map[string]any{"message": "Problems parsing JSON",
					"documentation_url": docURL[op.ID], "status": "400"})
				return
			}
		}
		if data != nil {
			errs = append(errs, op.Body.Validate(data)...)
			c.body, _ = data.(map[string]any)
		}
	}
	if len(errs) > 0 {
		validationFailed(w, op, errs)
		return
	}
	h(f, w, r, c)
}

func opID(op *Operation) string {
	if op == nil {
		return ""
	}
	return op.ID
}

// callRepoLocked finds the call's repository, reachable by the caller;
// otherwise it answers 404, as GitHub does for a repository the caller
// cannot see, and returns nil. Call with f.mu held.
func (f *Fake) callRepoLocked(w http.ResponseWriter, c *call) *repo {
	r := f.repos[strings.ToLower(c.params["owner"]+"/"+c.params["repo"])]
	if r == nil || !f.canReachLocked(c.who, r) {
		notFound(w)
		return nil
	}
	return r
}

// fill answers with the operation's example response for status, deep
// copied, with overrides merged in (nested objects merged key by key).
func (f *Fake) fill(op *Operation, status int, overrides map[string]any) any {
	return fillExample(op.Examples[status], overrides)
}

func fillExample(example any, overrides map[string]any) any {
	var base map[string]any
	if m, ok := deepCopy(example).(map[string]any); ok {
		base = m
	} else {
		base = map[string]any{}
	}
	merge(base, overrides)
	return base
}

func deepCopy(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = deepCopy(e)
		}
		return l
	}
	return v
}

func merge(dst, src map[string]any) {
	for k, v := range src {
		if sm, ok := v.(map[string]any); ok {
			if dm, ok := dst[k].(map[string]any); ok {
				merge(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
}

// writePage answers the page of a list of n items the request asks for:
// fields(i) are the stateful fields of item i, filled into the operation's
// example item.
func (f *Fake) writePage(w http.ResponseWriter, r *http.Request, c *call, n int, fields func(i int) map[string]any) {
	lo, hi := f.paginate(w, r, n)
	item := listExample(c.op, http.StatusOK)
	list := []any{}
	for i := lo; i < hi; i++ {
		list = append(list, fillExample(item, fields(i)))
	}
	writeJSON(w, http.StatusOK, list)
}

// listExample is the first element of a list operation's example.
func listExample(op *Operation, status int) any {
	if l, ok := op.Examples[status].([]any); ok && len(l) > 0 {
		return l[0]
	}
	return nil
}

// paginate picks the page of n items the request asks for (per_page
// default 30, at most 100, as GitHub) and sets GitHub's Link header.
func (f *Fake) paginate(w http.ResponseWriter, r *http.Request, n int) (lo, hi int) {
	q := r.URL.Query()
	per, err := strconv.Atoi(q.Get("per_page"))
	if err != nil || per < 1 {
		per = 30
	}
	per = min(per, 100)
	page, err := strconv.Atoi(q.Get("page"))
	if err != nil || page < 1 {
		page = 1
	}
	last := max(1, (n+per-1)/per)
	lo = min((page-1)*per, n)
	hi = min(lo+per, n)
	link := func(p int, rel string) string {
		q2 := url.Values{}
		for k, v := range q {
			q2[k] = v
		}
		q2.Set("page", strconv.Itoa(p))
		q2.Set("per_page", strconv.Itoa(per))
		return fmt.Sprintf("<%s%s?%s>; rel=%q", f.srv.URL, r.URL.Path, q2.Encode(), rel)
	}
	var links []string
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		links = append(links, link(1, "first"), link(min(page-1, last), "prev"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	return lo, hi
}

func ts(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339)
}

func (f *Fake) apiBase() string  { return f.srv.URL + "/api/v3" }
func (f *Fake) htmlBase() string { return f.srv.URL }

func tooLong(s string, n int) bool { return utf8.RuneCountInString(s) > n }
