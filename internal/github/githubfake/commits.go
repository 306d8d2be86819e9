package githubfake

import (
	"net/http"
	"sort"
	"strings"
)

// The commit → pull request lookup of a push (issue 15 §1: the GitHub
// Action's apply at merge): GET /repos/{o}/{r}/commits/{sha}/pulls, and
// the commits a comparison lists (Comparison.Commits). Registered here,
// apart from serve.go's table, so that another lookup of the same
// operation merges as one file.
func init() {
	handlers["repos/list-pull-requests-associated-with-commit"] = (*Fake).commitPulls
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

// commitPulls answers GET /repos/{o}/{r}/commits/{commit_sha}/pulls: the
// pull requests associated with the commit (PR.associated), lowest number
// first, a page at a time; a commit none is associated with gets [].
func (f *Fake) commitPulls(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rp := f.callRepoLocked(w, c)
	if rp == nil {
		return
	}
	sha := strings.ToLower(c.params["commit_sha"])
	var prs []*PR
	for _, pr := range rp.prs {
		if pr.associated(sha) {
			prs = append(prs, pr)
		}
	}
	sort.Slice(prs, func(i, j int) bool { return prs[i].Number < prs[j].Number })
	f.writePage(w, r, c, len(prs), func(i int) map[string]any { return f.prFields(rp, prs[i]) })
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
