package githubfake

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
)

// testdata holds the OpenAPI subset, the webhook payloads and their
// licence (MIT, Octokit contributors): see testdata/README.md.
//
//go:embed testdata/openapi/github-rest-subset.json testdata/webhooks/*.json testdata/LICENSE-octokit
var testdata embed.FS

// Operation is one operation of the OpenAPI subset.
type Operation struct {
	ID           string // operationId, e.g. checks/create
	Method       string
	Path         string // template, e.g. /repos/{owner}/{repo}/check-runs/{check_run_id}
	segments     []string
	Params       map[string]Param // by name
	Body         *Schema          // nil when the operation takes no body
	BodyRequired bool
	Examples     map[int]any // example response body by status code
}

// Param is one path or query parameter.
type Param struct {
	Name         string
	In           string // path or query
	Required     bool
	Schema       *Schema
	MultiSegment bool // x-multi-segment: a path parameter that may hold slashes (refs)
}

// API is the parsed OpenAPI subset.
type API struct {
	Source     string
	Operations []*Operation
}

var (
	apiOnce sync.Once
	apiVal  *API
	apiErr  error
)

// LoadAPI parses the embedded OpenAPI subset (testdata/openapi), once.
func LoadAPI() (*API, error) {
	apiOnce.Do(func() {
		b, err := testdata.ReadFile("testdata/openapi/github-rest-subset.json")
		if err != nil {
			apiErr = fmt.Errorf("reading openapi subset: %w", err)
			return
		}
		apiVal, apiErr = ParseAPI(b)
	})
	return apiVal, apiErr
}

// ParseAPI parses an OpenAPI subset in the shape of
// fixtures/github/openapi/github-rest-subset.json: {"operations": {ID:
// {method, path, parameters, requestBody, responses}}}.
func ParseAPI(b []byte) (*API, error) {
	var doc struct {
		Source     string `json:"source"`
		Operations map[string]struct {
			Method     string `json:"method"`
			Path       string `json:"path"`
			Parameters []struct {
				Name         string `json:"name"`
				In           string `json:"in"`
				Required     bool   `json:"required"`
				Schema       any    `json:"schema"`
				MultiSegment bool   `json:"x-multi-segment"`
			} `json:"parameters"`
			RequestBody *struct {
				Required bool `json:"required"`
				Schema   any  `json:"schema"`
			} `json:"requestBody"`
			Responses map[string]struct {
				Example json.RawMessage `json:"example"`
			} `json:"responses"`
		} `json:"operations"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decoding openapi subset: %w", err)
	}
	api := &API{Source: doc.Source}
	for id, o := range doc.Operations {
		op := &Operation{ID: id, Method: strings.ToUpper(o.Method), Path: o.Path,
			segments: strings.Split(strings.Trim(o.Path, "/"), "/"),
			Params:   map[string]Param{}, Examples: map[int]any{}}
		for _, p := range o.Parameters {
			s, err := ParseSchema(p.Schema)
			if err != nil {
				return nil, fmt.Errorf("operation %s parameter %s: %w", id, p.Name, err)
			}
			op.Params[p.Name] = Param{Name: p.Name, In: p.In, Required: p.Required, Schema: s, MultiSegment: p.MultiSegment}
		}
		if o.RequestBody != nil {
			s, err := ParseSchema(o.RequestBody.Schema)
			if err != nil {
				return nil, fmt.Errorf("operation %s request body: %w", id, err)
			}
			op.Body, op.BodyRequired = s, o.RequestBody.Required
		}
		for code, r := range o.Responses {
			var status int
			if _, err := fmt.Sscanf(code, "%d", &status); err != nil {
				return nil, fmt.Errorf("operation %s: response code %q: %w", id, code, err)
			}
			if len(r.Example) == 0 || string(r.Example) == "null" {
				continue
			}
			var ex any
			if err := json.Unmarshal(r.Example, &ex); err != nil {
				return nil, fmt.Errorf("operation %s: example %d: %w", id, status, err)
			}
			// A few examples are wrapped as {"value": …} (OpenAPI "examples" form).
			if m, ok := ex.(map[string]any); ok && len(m) == 1 {
				if v, ok := m["value"]; ok {
					ex = v
				}
			}
			op.Examples[status] = ex
		}
		api.Operations = append(api.Operations, op)
	}
	// A deterministic order; integer path parameters keep templates apart
	// (issues/comments/{id} vs issues/{number}/comments).
	sort.Slice(api.Operations, func(i, j int) bool { return api.Operations[i].ID < api.Operations[j].ID })
	return api, nil
}

// Match finds the operation for a method and an API path (without the
// /api/v3 prefix). It returns the path parameters (unescaped); pathKnown
// tells whether some operation has that path with another method. Of
// several operations matching, the one with the most literal segments
// wins, as GitHub routes: /commits/{commit_sha}/pulls and
// /commits/{ref}/check-runs are not get-commit of a ref "SHA/pulls"
// (its ref may hold slashes, x-multi-segment).
func (a *API) Match(method, escapedPath string) (op *Operation, params map[string]string, pathKnown bool) {
	segs := strings.Split(strings.Trim(escapedPath, "/"), "/")
	best := -1
	for _, o := range a.Operations {
		p := map[string]string{}
		if !matchSegments(o, o.segments, segs, p) {
			continue
		}
		if o.Method != method {
			pathKnown = true
			continue
		}
		if n := literalSegments(o); n > best {
			op, params, best = o, p, n
		}
	}
	if op != nil {
		return op, params, true
	}
	return nil, nil, pathKnown
}

// literalSegments counts the segments of o's path template that are not
// parameters.
func literalSegments(o *Operation) int {
	n := 0
	for _, s := range o.segments {
		if !strings.HasPrefix(s, "{") {
			n++
		}
	}
	return n
}

func matchSegments(op *Operation, tmpl, segs []string, out map[string]string) bool {
	if len(tmpl) == 0 {
		return len(segs) == 0
	}
	t := tmpl[0]
	if !strings.HasPrefix(t, "{") {
		return len(segs) > 0 && segs[0] == t && matchSegments(op, tmpl[1:], segs[1:], out)
	}
	name := strings.Trim(t, "{}")
	max := 1
	if op.Params[name].MultiSegment {
		max = len(segs) - (len(tmpl) - 1)
	}
	for n := 1; n <= max && n <= len(segs); n++ {
		parts := make([]string, n)
		for i := range parts {
			u, err := url.PathUnescape(segs[i])
			if err != nil || u == "" {
				return false
			}
			parts[i] = u
		}
		if ps := op.Params[name].Schema; ps != nil && ps.Type == "integer" && !hasType(json.Number(parts[0]), "integer") {
			return false
		}
		if matchSegments(op, tmpl[1:], segs[n:], out) {
			out[name] = strings.Join(parts, "/")
			return true
		}
	}
	return false
}

// operationResource names the resource in GitHub's validation errors.
func operationResource(id string) string {
	switch {
	case strings.HasPrefix(id, "checks/"):
		return "CheckRun"
	case strings.Contains(id, "comment") && strings.HasPrefix(id, "issues/"):
		return "IssueComment"
	case strings.HasPrefix(id, "reactions/"):
		return "Reaction"
	case id == "repos/create-commit-status":
		return "Status"
	case strings.HasPrefix(id, "apps/"):
		return "Installation"
	case strings.HasPrefix(id, "pulls/"):
		return "PullRequest"
	}
	return "Repository"
}
