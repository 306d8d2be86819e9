package githubfake

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// commentRules: GitHub's body limit (not in the OpenAPI description).
func commentRules(c *call) []FieldError {
	if body, _ := c.str("body"); tooLong(body, maxCommentBody) {
		return []FieldError{{Field: "data", Code: "unprocessable",
			Message: fmt.Sprintf("Body is too long (maximum is %d characters)", maxCommentBody)}}
	}
	return nil
}

// callIssueLocked finds the call's issue: a pull request, or an issue some
// comment was seeded on. It answers 404 when there is none (then the
// repository is nil). Call with f.mu held.
func (f *Fake) callIssueLocked(w http.ResponseWriter, c *call) (*repo, int) {
	rp := f.callRepoLocked(w, c)
	if rp == nil {
		return nil, 0
	}
	n := int(c.intParam("issue_number"))
	if rp.prs[n] != nil {
		return rp, n
	}
	for _, cm := range f.comments {
		if cm.Repo == rp.owner+"/"+rp.name && cm.Issue == n {
			return rp, n
		}
	}
	notFound(w)
	return nil, 0
}

func (f *Fake) listComments(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rp, n := f.callIssueLocked(w, c)
	if rp == nil {
		return
	}
	all := f.commentsLocked(rp.owner+"/"+rp.name, n)
	if s := r.URL.Query().Get("since"); s != "" {
		since, _ := time.Parse(time.RFC3339, s) // validated as date-time
		kept := all[:0]
		for _, cm := range all {
			if !cm.UpdatedAt.Before(since) {
				kept = append(kept, cm)
			}
		}
		all = kept
	}
	f.writePage(w, r, c, len(all), func(i int) map[string]any { return f.commentFields(rp, &all[i]) })
}

func (f *Fake) createComment(w http.ResponseWriter, r *http.Request, c *call) {
	if errs := commentRules(c); len(errs) > 0 {
		validationFailed(w, c.op, errs)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rp, n := f.callIssueLocked(w, c)
	if rp == nil {
		return
	}
	body, _ := c.str("body")
	cm := &Comment{ID: f.id(), Repo: rp.owner + "/" + rp.name, Issue: n, User: c.who.login, UserType: userType(c.who.login),
		Body: body, CreatedAt: f.now(), UpdatedAt: f.now()}
	f.comments[cm.ID] = cm
	writeJSON(w, http.StatusCreated, f.fill(c.op, http.StatusCreated, f.commentFields(rp, cm)))
}

// callCommentLocked finds the call's comment, answering 404 when there is
// none (then the comment is nil). Call with f.mu held.
func (f *Fake) callCommentLocked(w http.ResponseWriter, c *call) (*repo, *Comment) {
	rp := f.callRepoLocked(w, c)
	if rp == nil {
		return nil, nil
	}
	cm := f.comments[c.intParam("comment_id")]
	if cm == nil || cm.Repo != rp.owner+"/"+rp.name {
		notFound(w)
		return nil, nil
	}
	return rp, cm
}

func (f *Fake) updateComment(w http.ResponseWriter, r *http.Request, c *call) {
	if errs := commentRules(c); len(errs) > 0 {
		validationFailed(w, c.op, errs)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rp, cm := f.callCommentLocked(w, c)
	if cm == nil {
		return
	}
	cm.Body, _ = c.str("body")
	cm.UpdatedAt = f.now()
	cm.Edits++
	writeJSON(w, http.StatusOK, f.fill(c.op, http.StatusOK, f.commentFields(rp, cm)))
}

func (f *Fake) deleteComment(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, cm := f.callCommentLocked(w, c)
	if cm == nil {
		return
	}
	delete(f.comments, cm.ID)
	w.WriteHeader(http.StatusNoContent)
}

func (f *Fake) createReaction(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, cm := f.callCommentLocked(w, c)
	if cm == nil {
		return
	}
	content, _ := c.str("content")
	for _, re := range f.reactions[cm.ID] {
		if re.User == c.who.login && re.Content == content {
			writeJSON(w, http.StatusOK, f.fill(c.op, http.StatusOK, f.reactionFields(re)))
			return
		}
	}
	re := Reaction{ID: f.id(), User: c.who.login, Content: content}
	f.reactions[cm.ID] = append(f.reactions[cm.ID], re)
	writeJSON(w, http.StatusCreated, f.fill(c.op, http.StatusCreated, f.reactionFields(re)))
}

func (f *Fake) reactionFields(re Reaction) map[string]any {
	return map[string]any{"id": re.ID, "node_id": fmt.Sprintf("REA_%d", re.ID), "content": re.Content,
		"user": userFields(re.User), "created_at": ts(f.now())}
}

func userFields(login string) map[string]any {
	return map[string]any{"login": login, "type": userType(login),
		"url": "https://api.github.com/users/" + strings.TrimSuffix(login, "[bot]")}
}

// commentFields: call with f.mu held.
func (f *Fake) commentFields(rp *repo, cm *Comment) map[string]any {
	full := rp.owner + "/" + rp.name
	kind := "issues"
	if rp.prs[cm.Issue] != nil {
		kind = "pull"
	}
	return map[string]any{
		"id": cm.ID, "node_id": fmt.Sprintf("IC_%d", cm.ID), "body": cm.Body,
		"url":        fmt.Sprintf("%s/repos/%s/issues/comments/%d", f.apiBase(), full, cm.ID),
		"html_url":   fmt.Sprintf("%s/%s/%s/%d#issuecomment-%d", f.htmlBase(), full, kind, cm.Issue, cm.ID),
		"issue_url":  fmt.Sprintf("%s/repos/%s/issues/%d", f.apiBase(), full, cm.Issue),
		"user":       map[string]any{"login": cm.User, "type": cm.UserType},
		"created_at": ts(cm.CreatedAt), "updated_at": ts(cm.UpdatedAt),
		"author_association": "NONE",
	}
}

func (f *Fake) getIssue(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rp, n := f.callIssueLocked(w, c)
	if rp == nil {
		return
	}
	full := rp.owner + "/" + rp.name
	fields := map[string]any{"number": n, "state": "open", "title": fmt.Sprintf("Issue %d", n),
		"url":      fmt.Sprintf("%s/repos/%s/issues/%d", f.apiBase(), full, n),
		"html_url": fmt.Sprintf("%s/%s/issues/%d", f.htmlBase(), full, n), "pull_request": nil}
	if pr := rp.prs[n]; pr != nil {
		fields["state"], fields["title"], fields["user"] = pr.State, pr.Title, userFields(pr.Author)
		fields["pull_request"] = map[string]any{
			"url":      fmt.Sprintf("%s/repos/%s/pulls/%d", f.apiBase(), full, n),
			"html_url": fmt.Sprintf("%s/%s/pull/%d", f.htmlBase(), full, n)}
	}
	res := f.fill(c.op, http.StatusOK, fields).(map[string]any)
	if rp.prs[n] == nil {
		delete(res, "pull_request") // GitHub omits the key on plain issues
	}
	writeJSON(w, http.StatusOK, res)
}
