package githubfake

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
)

func (f *Fake) prFields(rp *repo, pr *PR) map[string]any {
	full := rp.owner + "/" + rp.name
	headFull, fork := full, false
	if pr.HeadRepo != "" && !strings.EqualFold(pr.HeadRepo, full) {
		headFull, fork = pr.HeadRepo, true
	}
	headOwner, headName, _ := strings.Cut(headFull, "/")
	var mergeable any
	if pr.Mergeable != nil {
		mergeable = *pr.Mergeable
	}
	var mergedAt, mergedBy, mergeCommit any
	if pr.MergeCommitSHA != "" {
		mergeCommit = pr.MergeCommitSHA
	}
	if pr.Merged {
		mergedAt = ts(f.now())
	}
	if pr.Merged && pr.MergedBy != "" {
		mergedBy = userFields(pr.MergedBy)
	}
	return map[string]any{
		"id": rp.id*1000 + int64(pr.Number), "number": pr.Number, "title": pr.Title, "state": pr.State,
		"draft": pr.Draft, "merged": pr.Merged, "merged_at": mergedAt, "merged_by": mergedBy, "mergeable": mergeable,
		"merge_commit_sha": mergeCommit,
		"changed_files":    len(pr.Files),
		"url":              fmt.Sprintf("%s/repos/%s/pulls/%d", f.apiBase(), full, pr.Number),
		"html_url":         fmt.Sprintf("%s/%s/pull/%d", f.htmlBase(), full, pr.Number),
		"user":             userFields(pr.Author),
		"head": map[string]any{"ref": pr.HeadRef, "sha": pr.HeadSHA, "label": headOwner + ":" + pr.HeadRef,
			"repo": map[string]any{"full_name": headFull, "name": headName, "fork": fork,
				"owner": map[string]any{"login": headOwner}}},
		"base": map[string]any{"ref": pr.BaseRef, "sha": pr.BaseSHA, "label": rp.owner + ":" + pr.BaseRef,
			"repo": map[string]any{"id": rp.id, "full_name": full, "name": rp.name, "fork": false,
				"owner": map[string]any{"login": rp.owner}}},
	}
}

// callPRLocked finds the call's pull request, answering 404 when there is
// none (then the pull request is nil). Call with f.mu held.
func (f *Fake) callPRLocked(w http.ResponseWriter, c *call) (*repo, *PR) {
	rp := f.callRepoLocked(w, c)
	if rp == nil {
		return nil, nil
	}
	pr := rp.prs[int(c.intParam("pull_number"))]
	if pr == nil {
		notFound(w)
		return nil, nil
	}
	return rp, pr
}

func (f *Fake) getPull(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rp, pr := f.callPRLocked(w, c)
	if pr == nil {
		return
	}
	writeJSON(w, http.StatusOK, f.fill(c.op, http.StatusOK, f.prFields(rp, pr)))
}

func (f *Fake) listPulls(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rp := f.callRepoLocked(w, c)
	if rp == nil {
		return
	}
	state := r.URL.Query().Get("state")
	if state == "" {
		state = "open"
	}
	var prs []*PR
	for _, pr := range rp.prs {
		if state == "all" || pr.State == state {
			prs = append(prs, pr)
		}
	}
	sort.Slice(prs, func(i, j int) bool { return prs[i].Number > prs[j].Number })
	f.writePage(w, r, c, len(prs), func(i int) map[string]any { return f.prFields(rp, prs[i]) })
}

func (f *Fake) listPullFiles(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, pr := f.callPRLocked(w, c)
	if pr == nil {
		return
	}
	files := pr.Files
	if len(files) > 3000 { // GitHub lists at most 3000 files
		files = files[:3000]
	}
	f.writePage(w, r, c, len(files), func(i int) map[string]any {
		return map[string]any{"filename": files[i], "status": "modified", "previous_filename": nil, "additions": 1, "deletions": 1, "changes": 2}
	})
}

func (f *Fake) listReviews(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rp, pr := f.callPRLocked(w, c)
	if pr == nil {
		return
	}
	reviews := rp.reviews[pr.Number]
	f.writePage(w, r, c, len(reviews), func(i int) map[string]any {
		rv := reviews[i]
		return map[string]any{"id": rv.ID, "node_id": fmt.Sprintf("PRR_%d", rv.ID), "user": userFields(rv.User), "state": rv.State,
			"commit_id": rv.CommitID, "body": "", "submitted_at": ts(rv.SubmittedAt)}
	})
}

// legacyPermission is the "permission" GitHub answers for a role.
func legacyPermission(role string) string {
	switch role {
	case "admin":
		return "admin"
	case "maintain", "write":
		return "write"
	case "triage", "read":
		return "read"
	case "none", "":
		return "none"
	}
	return "read" // a custom role; GitHub answers its base role
}

func (f *Fake) getPermission(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rp := f.callRepoLocked(w, c)
	if rp == nil {
		return
	}
	login := c.params["username"]
	role := rp.permissions[strings.ToLower(login)]
	if role == "" {
		role = "none"
	}
	writeJSON(w, http.StatusOK, f.fill(c.op, http.StatusOK, map[string]any{
		"permission": legacyPermission(role), "role_name": role, "user": userFields(login)}))
}

func (f *Fake) tarball(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rp := f.callRepoLocked(w, c)
	if rp == nil {
		return
	}
	data, ok := rp.tarballs[c.params["ref"]]
	if !ok {
		notFound(w)
		return
	}
	id := randomString("", 24)
	f.links[id] = tarLink{data: data, expires: f.Now().Add(linkLifetime)}
	w.Header().Set("Location", fmt.Sprintf("%s/_fake/codeload/%s/%s/legacy.tar.gz/%s?token=%s",
		f.srv.URL, rp.owner, rp.name, c.params["ref"], id))
	w.WriteHeader(http.StatusFound)
}

// serveInternal answers the fake's own URLs: the tarball links that
// GET …/tarball/{ref} redirects to (valid 5 minutes, like codeload's).
func (f *Fake) serveInternal(w http.ResponseWriter, r *http.Request, p string) {
	if r.Method != http.MethodGet || !strings.HasPrefix(p, "/_fake/codeload/") {
		notFound(w)
		return
	}
	f.mu.Lock()
	l, ok := f.links[r.URL.Query().Get("token")]
	f.mu.Unlock()
	if !ok || f.Now().After(l.expires) {
		notFound(w)
		return
	}
	w.Header().Set("Content-Type", "application/x-gzip")
	w.Header().Set("Content-Length", fmt.Sprint(len(l.data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(l.data)
}

func (f *Fake) createStatus(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rp := f.callRepoLocked(w, c)
	if rp == nil {
		return
	}
	st := map[string]any{"id": f.id(), "sha": c.params["sha"]}
	for k, v := range c.body {
		st[k] = v
	}
	f.statuses = append(f.statuses, st)
	writeJSON(w, http.StatusCreated, f.fill(c.op, http.StatusCreated, map[string]any{
		"id": st["id"], "state": st["state"], "context": stringOr(c, "context", "default"),
		"description": st["description"], "target_url": st["target_url"],
		"url": fmt.Sprintf("%s/repos/%s/%s/statuses/%s", f.apiBase(), rp.owner, rp.name, c.params["sha"])}))
}

func stringOr(c *call, name, def string) string {
	if s, ok := c.str(name); ok {
		return s
	}
	return def
}

func (f *Fake) getRepoInstallation(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rp := f.repos[strings.ToLower(c.params["owner"]+"/"+c.params["repo"])]
	if rp == nil {
		notFound(w)
		return
	}
	ids := make([]int64, 0, len(f.installations))
	for id := range f.installations {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		in := f.installations[id]
		if in.appID == c.appID && f.canReachLocked(caller{installationID: id}, rp) {
			writeJSON(w, http.StatusOK, f.fill(c.op, http.StatusOK, map[string]any{"id": id, "app_id": c.appID,
				"access_tokens_url": fmt.Sprintf("%s/app/installations/%d/access_tokens", f.apiBase(), id)}))
			return
		}
	}
	notFound(w)
}

func (f *Fake) createToken(w http.ResponseWriter, r *http.Request, c *call) {
	t, ok := f.issueToken(c.appID, c.intParam("installation_id"))
	if !ok {
		notFound(w)
		return
	}
	writeJSON(w, http.StatusCreated, f.fill(c.op, http.StatusCreated, map[string]any{
		"token": t.value, "expires_at": ts(t.expiresAt), "repository_selection": "all", "repositories": []any{},
		"permissions": map[string]any{"checks": "write", "pull_requests": "write", "issues": "write",
			"contents": "read", "metadata": "read"}}))
}
