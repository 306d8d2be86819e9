package githubfake

import (
	"fmt"
	"net/http"
	"sort"
	"time"
)

// checkRunRules are GitHub's rules the OpenAPI description does not
// encode: head_sha must name a commit (the fake takes any 40-hex SHA;
// GitHub answers "No commit found for SHA: …"), nobody but GitHub sets
// conclusion "stale", status "completed" needs a conclusion, and a
// completed check run does not go back to queued or in_progress — apps
// make a new check run of the name instead, which GitHub shows in its
// place (lyft/atlantis#265, Mergifyio/mergify#1989; what GitHub answers is
// not documented: the fake refuses it with a 422 so that a client relying
// on it fails a test).
func checkRunRules(c *call, current *CheckRun) []FieldError {
	var errs []FieldError
	if sha, ok := c.str("head_sha"); ok && !isSHA(sha) {
		errs = append(errs, FieldError{Field: "head_sha", Code: "custom", Message: "No commit found for SHA: " + sha})
	}
	concl, hasConcl := c.str("conclusion")
	if concl == "stale" {
		errs = append(errs, FieldError{Field: "conclusion", Code: "invalid", Message: "Only GitHub can set a conclusion of stale."})
	}
	status, _ := c.str("status")
	if status == "completed" && !hasConcl && (current == nil || current.Conclusion == "") {
		errs = append(errs, FieldError{Field: "conclusion", Code: "missing_field", Message: "\"conclusion\" wasn't supplied."})
	}
	if current != nil && current.Status == "completed" && (status == "queued" || status == "in_progress") {
		errs = append(errs, FieldError{Field: "status", Code: "invalid", Message: "A completed check run cannot go back to " + status + "."})
	}
	return errs
}

// applyCheckRun copies the fields present in the request body onto cr.
func (f *Fake) applyCheckRun(c *call, cr *CheckRun) {
	if v, ok := c.str("name"); ok {
		cr.Name = v
	}
	if v, ok := c.str("details_url"); ok {
		cr.DetailsURL = v
	}
	if v, ok := c.str("external_id"); ok {
		cr.ExternalID = v
	}
	if v, ok := c.str("status"); ok {
		cr.Status = v
	}
	if v, ok := c.str("started_at"); ok {
		cr.StartedAt, _ = time.Parse(time.RFC3339, v) // validated as date-time
	}
	if v, ok := c.str("completed_at"); ok {
		cr.CompletedAt, _ = time.Parse(time.RFC3339, v) // validated as date-time
	}
	if v, ok := c.str("conclusion"); ok {
		cr.Conclusion = v
		cr.Status = "completed" // a conclusion completes the run
	}
	if cr.Status == "completed" && cr.CompletedAt.IsZero() {
		cr.CompletedAt = f.now()
	}
	if out, ok := c.body["output"].(map[string]any); ok {
		if v, ok := out["title"].(string); ok {
			cr.Title = v
		}
		if v, ok := out["summary"].(string); ok {
			cr.Summary = v
		}
		if v, ok := out["text"].(string); ok {
			cr.Text = v
		}
		if a, ok := out["annotations"].([]any); ok {
			cr.Annotations += len(a) // annotations append, as on GitHub
		}
	}
	if acts, ok := c.body["actions"].([]any); ok {
		cr.Actions = nil
		for _, a := range acts {
			if m, ok := a.(map[string]any); ok {
				cr.Actions = append(cr.Actions, m)
			}
		}
	}
}

func (f *Fake) createCheckRun(w http.ResponseWriter, r *http.Request, c *call) {
	if errs := checkRunRules(c, nil); len(errs) > 0 {
		validationFailed(w, c.op, errs)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rp := f.callRepoLocked(w, c)
	if rp == nil {
		return
	}
	cr := &CheckRun{ID: f.id(), Repo: rp.owner + "/" + rp.name, Status: "queued", StartedAt: f.now()}
	cr.HeadSHA, _ = c.str("head_sha")
	f.applyCheckRun(c, cr)
	f.checkRuns[cr.ID] = cr
	writeJSON(w, http.StatusCreated, f.checkRunJSON(c.op, http.StatusCreated, rp, cr))
}

// callCheckRunLocked finds the call's check run, answering 404 when there
// is none (then the check run is nil). Call with f.mu held.
func (f *Fake) callCheckRunLocked(w http.ResponseWriter, c *call) (*repo, *CheckRun) {
	rp := f.callRepoLocked(w, c)
	if rp == nil {
		return nil, nil
	}
	cr := f.checkRuns[c.intParam("check_run_id")]
	if cr == nil || cr.Repo != rp.owner+"/"+rp.name {
		notFound(w)
		return nil, nil
	}
	return rp, cr
}

func (f *Fake) getCheckRun(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rp, cr := f.callCheckRunLocked(w, c)
	if cr == nil {
		return
	}
	writeJSON(w, http.StatusOK, f.checkRunJSON(c.op, http.StatusOK, rp, cr))
}

func (f *Fake) updateCheckRun(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rp, cr := f.callCheckRunLocked(w, c)
	if cr == nil {
		return
	}
	if errs := checkRunRules(c, cr); len(errs) > 0 {
		validationFailed(w, c.op, errs)
		return
	}
	f.applyCheckRun(c, cr)
	cr.Updates++
	writeJSON(w, http.StatusOK, f.checkRunJSON(c.op, http.StatusOK, rp, cr))
}

func (f *Fake) listCheckRuns(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rp := f.callRepoLocked(w, c)
	if rp == nil {
		return
	}
	q := r.URL.Query()
	ref := c.params["ref"]
	var runs []*CheckRun
	for _, cr := range f.checkRuns {
		if cr.Repo != rp.owner+"/"+rp.name || cr.HeadSHA != ref {
			continue
		}
		if n := q.Get("check_name"); n != "" && cr.Name != n {
			continue
		}
		if s := q.Get("status"); s != "" && cr.Status != s {
			continue
		}
		runs = append(runs, cr)
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].ID > runs[j].ID }) // newest first
	if q.Get("filter") != "all" {
		seen := map[string]bool{}
		latest := runs[:0]
		for _, cr := range runs {
			if !seen[cr.Name] {
				seen[cr.Name] = true
				latest = append(latest, cr)
			}
		}
		runs = latest
	}
	lo, hi := f.paginate(w, r, len(runs))
	list := []any{}
	item := map[string]any{}
	if ex, ok := c.op.Examples[http.StatusOK].(map[string]any); ok {
		if l, ok := ex["check_runs"].([]any); ok && len(l) > 0 {
			item, _ = l[0].(map[string]any)
		}
	}
	for _, cr := range runs[lo:hi] {
		list = append(list, fillExample(item, f.checkRunFields(rp, cr)))
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(runs), "check_runs": list})
}

func (f *Fake) checkRunJSON(op *Operation, status int, rp *repo, cr *CheckRun) any {
	return f.fill(op, status, f.checkRunFields(rp, cr))
}

// checkRunFields are the stateful fields of a check run answer. Call with
// f.mu held.
func (f *Fake) checkRunFields(rp *repo, cr *CheckRun) map[string]any {
	full := rp.owner + "/" + rp.name
	var conclusion any
	if cr.Conclusion != "" {
		conclusion = cr.Conclusion
	}
	prs := []any{}
	for _, pr := range rp.prs {
		if pr.HeadSHA == cr.HeadSHA && pr.HeadRepo == "" && pr.State == "open" {
			prs = append(prs, map[string]any{
				"url": fmt.Sprintf("%s/repos/%s/pulls/%d", f.apiBase(), full, pr.Number), "id": int64(pr.Number) + rp.id*1000,
				"number": pr.Number,
				"head":   map[string]any{"ref": pr.HeadRef, "sha": pr.HeadSHA, "repo": map[string]any{"id": rp.id, "name": rp.name, "url": f.apiBase() + "/repos/" + full}},
				"base":   map[string]any{"ref": pr.BaseRef, "sha": pr.BaseSHA, "repo": map[string]any{"id": rp.id, "name": rp.name, "url": f.apiBase() + "/repos/" + full}},
			})
		}
	}
	var actions any = []any{}
	if len(cr.Actions) > 0 {
		l := make([]any, len(cr.Actions))
		for i, a := range cr.Actions {
			l[i] = a
		}
		actions = l
	}
	return map[string]any{
		"id": cr.ID, "node_id": fmt.Sprintf("CR_%d", cr.ID), "name": cr.Name, "head_sha": cr.HeadSHA,
		"external_id": cr.ExternalID, "details_url": cr.DetailsURL, "status": cr.Status, "conclusion": conclusion,
		"started_at": ts(cr.StartedAt), "completed_at": ts(cr.CompletedAt),
		"url":      fmt.Sprintf("%s/repos/%s/check-runs/%d", f.apiBase(), full, cr.ID),
		"html_url": fmt.Sprintf("%s/%s/runs/%d", f.htmlBase(), full, cr.ID),
		"output": map[string]any{"title": nilIfEmpty(cr.Title), "summary": nilIfEmpty(cr.Summary), "text": nilIfEmpty(cr.Text),
			"annotations_count": cr.Annotations,
			"annotations_url":   fmt.Sprintf("%s/repos/%s/check-runs/%d/annotations", f.apiBase(), full, cr.ID)},
		"pull_requests": prs,
		"actions":       actions,
	}
}

func isSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
