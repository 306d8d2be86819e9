package githubfake

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// Commit is a commit of a repository of the fake (AddCommit): its SHA, its
// parents (the first parent first, as git orders them), its message, and
// the pull requests GitHub associates with it (GET
// /repos/{o}/{r}/commits/{sha}/pulls: the pull request a merge or a merge
// queue made it for, or whose branch holds it).
type Commit struct {
	SHA     string
	Parents []string
	Message string
	PRs     []int
}

// AddCommit registers (or replaces) commit c of repo "owner/name". It
// panics on a SHA that is not 40 hex digits (test setup).
func (f *Fake) AddCommit(fullName string, c Commit) {
	for _, s := range append([]string{c.SHA}, c.Parents...) {
		if !isSHA(s) {
			panic(fmt.Sprintf("githubfake: AddCommit(%s): %q is not a 40-hex commit SHA", fullName, s))
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rp := f.repoLocked(fullName)
	if rp.commits == nil {
		rp.commits = map[string]*Commit{}
	}
	c.Parents, c.PRs = append([]string(nil), c.Parents...), append([]int(nil), c.PRs...)
	rp.commits[c.SHA] = &c
}

// SetBranch points branch (e.g. DefaultBranch) of repo "owner/name" at
// commit sha: GET /repos/{o}/{r}/commits/{ref} answers that commit for ref
// BRANCH or heads/BRANCH. The commit is registered (without parents) if
// AddCommit did not.
func (f *Fake) SetBranch(fullName, branch, sha string) {
	if !isSHA(sha) {
		panic(fmt.Sprintf("githubfake: SetBranch(%s, %s): %q is not a 40-hex commit SHA", fullName, branch, sha))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rp := f.repoLocked(fullName)
	if rp.branches == nil {
		rp.branches = map[string]string{}
	}
	if rp.commits == nil {
		rp.commits = map[string]*Commit{}
	}
	if rp.commits[sha] == nil {
		rp.commits[sha] = &Commit{SHA: sha}
	}
	rp.branches[branch] = sha
}

// commitLocked resolves ref — a commit SHA, a branch name or heads/BRANCH
// — to a registered commit; nil when there is none. Call with f.mu held.
func (rp *repo) commitLocked(ref string) *Commit {
	if sha, ok := rp.branches[strings.TrimPrefix(ref, "heads/")]; ok {
		return rp.commits[sha]
	}
	return rp.commits[ref]
}

// noCommit answers as GitHub does for a ref it has no commit for: 422
// "No commit found for SHA: REF".
func noCommit(w http.ResponseWriter, ref string) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{"message": "No commit found for SHA: " + ref,
		"documentation_url": "https://docs.github.com/rest/commits/commits#get-a-commit", "status": "422"})
}

// getCommit answers GET /repos/{o}/{r}/commits/{ref}: the description's
// example with the commit's SHA, message, URLs and parents; its files and
// stats are left out (empty).
func (f *Fake) getCommit(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rp := f.callRepoLocked(w, c)
	if rp == nil {
		return
	}
	cm := rp.commitLocked(c.params["ref"])
	if cm == nil {
		noCommit(w, c.params["ref"])
		return
	}
	full := rp.owner + "/" + rp.name
	parents := []any{}
	for _, p := range cm.Parents {
		parents = append(parents, map[string]any{"sha": p, "url": fmt.Sprintf("%s/repos/%s/commits/%s", f.apiBase(), full, p),
			"html_url": fmt.Sprintf("%s/%s/commit/%s", f.htmlBase(), full, p)})
	}
	out := f.fill(c.op, http.StatusOK, map[string]any{
		"sha": cm.SHA, "node_id": "C_" + cm.SHA[:12],
		"url":      fmt.Sprintf("%s/repos/%s/commits/%s", f.apiBase(), full, cm.SHA),
		"html_url": fmt.Sprintf("%s/%s/commit/%s", f.htmlBase(), full, cm.SHA),
		"commit":   map[string]any{"message": cm.Message, "url": fmt.Sprintf("%s/repos/%s/git/commits/%s", f.apiBase(), full, cm.SHA)},
		"files":    []any{}, "stats": map[string]any{"additions": 0, "deletions": 0, "total": 0},
	}).(map[string]any)
	out["parents"] = parents // replaced, not merged: the example's parent is not this commit's
	writeJSON(w, http.StatusOK, out)
}

// listCommitPulls answers GET /repos/{o}/{r}/commits/{commit_sha}/pulls:
// the pull requests the commit is associated with — those AddCommit named
// (Commit.PRs), and those PR.associated holds (its head, its merge commit,
// its commits) — newest first, paginated; a commit the fake knows (also
// one a comparison lists) with none is []; one it knows nothing of is 422
// "No commit found for SHA".
func (f *Fake) listCommitPulls(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rp := f.callRepoLocked(w, c)
	if rp == nil {
		return
	}
	sha := c.params["commit_sha"]
	cm := rp.commitLocked(sha)
	var prs []*PR
	seen := map[int]bool{}
	if cm != nil {
		for _, n := range cm.PRs {
			if pr := rp.prs[n]; pr != nil && !seen[n] {
				seen[n] = true
				prs = append(prs, pr)
			}
		}
	}
	for _, pr := range rp.prs {
		if pr.associated(strings.ToLower(sha)) && !seen[pr.Number] {
			seen[pr.Number] = true
			prs = append(prs, pr)
		}
	}
	if cm == nil && len(prs) == 0 && !rp.comparedLocked(sha) {
		noCommit(w, sha)
		return
	}
	sort.Slice(prs, func(i, j int) bool { return prs[i].Number > prs[j].Number })
	f.writePage(w, r, c, len(prs), func(i int) map[string]any { return f.prFields(rp, prs[i]) })
}

// associated reports whether pr is one GitHub lists for commit sha:
// GitHub's "list pull requests associated with a commit" answers, for a
// commit on the base branch, the merged pull request that brought it
// (its merge_commit_sha: the merge, squash or last rebased commit), and
// for a commit on a branch, the pull requests whose commits hold it —
// here its head and PR.Commits.
func (pr *PR) associated(sha string) bool {
	if sha == "" {
		return false
	}
	if pr.MergeCommitSHA == sha || pr.HeadSHA == sha {
		return true
	}
	for _, c := range pr.Commits {
		if c == sha {
			return true
		}
	}
	return false
}

// comparedCommits is what a comparison lists as the head's commits the
// base lacks, oldest first: Commits when declared, else the head alone
// when it is ahead (the fake keeps no commit graph).
func comparedCommits(cmp Comparison, head string) []string {
	if len(cmp.Commits) > 0 {
		return cmp.Commits
	}
	if cmp.AheadBy > 0 {
		return []string{head}
	}
	return nil
}

// comparedLocked reports whether a comparison of SetCompare lists commit
// sha: a commit GitHub has, though no pull request holds it.
func (rp *repo) comparedLocked(sha string) bool {
	for _, c := range rp.compares {
		for _, x := range c.Commits {
			if strings.EqualFold(x, sha) {
				return true
			}
		}
	}
	return false
}
