package githubfake

import (
	gitsha1 "crypto/sha1" // git names a blob by the SHA-1 of "blob SIZE\0" and its bytes
	"encoding/base64"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// DefaultBranch is the default branch of every repository of the fake:
// GET /repos/{o}/{r}/contents/{path} without ref reads it, as GitHub reads
// the repository's default branch.
const DefaultBranch = "main"

// SetFile registers the file at path (no leading "/") of ref (a branch
// name or a commit SHA; DefaultBranch for the default branch) served by
// GET /repos/{o}/{r}/contents/{path}; content nil removes it. A path
// that is a prefix directory of registered files is served as a directory
// listing, as GitHub does.
func (f *Fake) SetFile(fullName, ref, path string, content []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rp := f.repoLocked(fullName)
	if rp.files[ref] == nil {
		rp.files[ref] = map[string][]byte{}
	}
	if content == nil {
		delete(rp.files[ref], path)
		return
	}
	rp.files[ref][path] = append([]byte{}, content...)
}

// getContent answers GET /repos/{o}/{r}/contents/{path}[?ref=REF]: a file
// as GitHub's content object (base64, wrapped at 60 characters), a
// directory as the list of its entries, anything else 404.
func (f *Fake) getContent(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rp := f.callRepoLocked(w, c)
	if rp == nil {
		return
	}
	ref := r.URL.Query().Get("ref")
	if ref == "" {
		ref = DefaultBranch
	}
	files, p := rp.files[ref], strings.Trim(c.params["path"], "/")
	if data, ok := files[p]; ok {
		writeJSON(w, http.StatusOK, f.fill(c.op, http.StatusOK, f.contentFields(rp, ref, p, data, true)))
		return
	}
	seen := map[string]bool{}
	var entries []map[string]any
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, p+"/")
		if !ok {
			continue
		}
		child, _, isDir := strings.Cut(rest, "/")
		if seen[child] {
			continue
		}
		seen[child] = true
		e := f.contentFields(rp, ref, p+"/"+child, files[name], false)
		if isDir {
			e["type"], e["size"] = "dir", 0
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		notFound(w)
		return
	}
	list := make([]any, len(entries))
	for i, e := range entries {
		list[i] = e
	}
	writeJSON(w, http.StatusOK, list)
}

// contentFields is GitHub's content object of the file p at ref; with
// body, its content too (GitHub leaves it out of directory listings).
func (f *Fake) contentFields(rp *repo, ref, p string, data []byte, body bool) map[string]any {
	full := rp.owner + "/" + rp.name
	blob := fmt.Sprintf("%x", gitsha1.Sum(append([]byte(fmt.Sprintf("blob %d\x00", len(data))), data...)))
	self := fmt.Sprintf("%s/repos/%s/contents/%s?ref=%s", f.apiBase(), full, p, ref)
	html := fmt.Sprintf("%s/%s/blob/%s/%s", f.htmlBase(), full, ref, p)
	git := fmt.Sprintf("%s/repos/%s/git/blobs/%s", f.apiBase(), full, blob)
	name := p[strings.LastIndex(p, "/")+1:]
	m := map[string]any{"type": "file", "size": len(data), "name": name, "path": p, "sha": blob,
		"url": self, "git_url": git, "html_url": html, "download_url": nil,
		"_links": map[string]any{"self": self, "git": git, "html": html}}
	if body {
		enc := base64.StdEncoding.EncodeToString(data)
		var b strings.Builder
		for len(enc) > 60 {
			b.WriteString(enc[:60] + "\n")
			enc = enc[60:]
		}
		b.WriteString(enc + "\n")
		m["encoding"], m["content"] = "base64", b.String()
	}
	return m
}
