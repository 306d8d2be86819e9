package githubfake

import (
	gitsha1 "crypto/sha1" // a made-up tip of a branch the tests name no commit for
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
)

// Comparison is what the fake answers for GET
// /repos/{o}/{r}/compare/{base}...{head} (SetCompare): the head's commits
// the base lacks (AheadBy) and the base's commits the head lacks
// (BehindBy); status follows from them as GitHub's does (identical,
// ahead, behind, diverged). BaseSHA is the answer's base_commit.sha; ""
// picks one (see SetCompare).
type Comparison struct {
	AheadBy, BehindBy int
	BaseSHA           string
	// Commits are the head's commits the base lacks, oldest first, as the
	// answer lists them a page at a time (per_page, page); AheadBy is
	// their number when left 0. Nil: the head alone when AheadBy > 0
	// (commits.go: comparedCommits).
	Commits []string
}

// SetCompare declares how head (a commit SHA or a branch) compares with
// base in repo "owner/name". The fake keeps no commit graph, so an
// undeclared pair is answered by a rule: a pull request's head compared
// with its base ref is ahead by 1 and behind by 0 — branched from its
// base's tip, up to date — with base_commit the pull request's base SHA;
// a ref compared with itself is identical; anything else is 404 "Not
// Found", as GitHub answers for a commit it does not have (a head
// force-pushed away) or two commits without common history. Declare
// BehindBy for a branch made before its base moved on, and AheadBy 0 for
// a commit the base holds.
func (f *Fake) SetCompare(fullName, base, head string, c Comparison) {
	if c.AheadBy < 0 || c.BehindBy < 0 {
		panic(fmt.Sprintf("githubfake: SetCompare(%s, %s...%s): negative counts %d, %d", fullName, base, head, c.AheadBy, c.BehindBy))
	}
	if c.AheadBy == 0 {
		c.AheadBy = len(c.Commits)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rp := f.repoLocked(fullName)
	if rp.compares == nil {
		rp.compares = map[string]Comparison{}
	}
	rp.compares[base+"..."+head] = c
}

// compareLocked is the comparison of head with base in rp, by
// SetCompare's rules; false when GitHub would answer 404. Call with f.mu
// held.
func (rp *repo) compareLocked(base, head string) (Comparison, bool) {
	if c, ok := rp.compares[base+"..."+head]; ok {
		return c, true
	}
	if base == head {
		return Comparison{BaseSHA: base}, true
	}
	for _, pr := range rp.prs {
		if pr.HeadSHA == head && pr.BaseRef == base {
			return Comparison{AheadBy: 1, BaseSHA: pr.BaseSHA}, true
		}
	}
	return Comparison{}, false
}

// compare answers GET /repos/{o}/{r}/compare/{basehead}: the description's
// example with the comparison's status, counts, base commit and (per
// page) the head's commits; files are left out (an empty list).
func (f *Fake) compare(w http.ResponseWriter, r *http.Request, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	rp := f.callRepoLocked(w, c)
	if rp == nil {
		return
	}
	base, head, ok := strings.Cut(c.params["basehead"], "...")
	if !ok || base == "" || head == "" || strings.Contains(head, "...") {
		notFound(w) // GitHub: "Not Found" for a basehead that is not BASE...HEAD
		return
	}
	cmp, ok := rp.compareLocked(base, head)
	if !ok {
		notFound(w)
		return
	}
	baseSHA := cmp.BaseSHA
	if baseSHA == "" {
		sum := gitsha1.Sum([]byte(rp.owner + "/" + rp.name + ":" + base))
		baseSHA = hex.EncodeToString(sum[:])
	}
	full := rp.owner + "/" + rp.name
	commit := func(sha string) map[string]any {
		return map[string]any{"sha": sha, "url": fmt.Sprintf("%s/repos/%s/commits/%s", f.apiBase(), full, sha),
			"html_url": fmt.Sprintf("%s/%s/commit/%s", f.htmlBase(), full, sha)}
	}
	all := comparedCommits(cmp, head)
	lo, hi := f.paginate(w, r, len(all))
	commits := []any{}
	for _, sha := range all[lo:hi] {
		commits = append(commits, fillExample(listOf(c.op.Examples[http.StatusOK], "commits"), commit(sha)))
	}
	page := fmt.Sprintf("%s/%s/compare/%s", f.htmlBase(), full, c.params["basehead"])
	writeJSON(w, http.StatusOK, f.fill(c.op, http.StatusOK, map[string]any{
		"url": fmt.Sprintf("%s/repos/%s/compare/%s", f.apiBase(), full, c.params["basehead"]), "html_url": page,
		"permalink_url": fmt.Sprintf("%s/%s/compare/%s:%s...%s:%s", f.htmlBase(), full, rp.owner, baseSHA, rp.owner, head),
		"diff_url":      page + ".diff", "patch_url": page + ".patch",
		"base_commit": commit(baseSHA), "merge_base_commit": commit(baseSHA),
		"status": comparisonStatus(cmp), "ahead_by": cmp.AheadBy, "behind_by": cmp.BehindBy, "total_commits": cmp.AheadBy,
		"commits": commits, "files": []any{},
	}))
}

// comparisonStatus is GitHub's status for the counts.
func comparisonStatus(c Comparison) string {
	switch {
	case c.AheadBy == 0 && c.BehindBy == 0:
		return "identical"
	case c.BehindBy == 0:
		return "ahead"
	case c.AheadBy == 0:
		return "behind"
	}
	return "diverged"
}

// listOf is the first element of the list under key of an example object.
func listOf(example any, key string) any {
	if m, ok := example.(map[string]any); ok {
		if l, ok := m[key].([]any); ok && len(l) > 0 {
			return l[0]
		}
	}
	return nil
}
