package githubfake

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// AddRepo registers a repository "owner/name" and returns its id.
func (f *Fake) AddRepo(fullName string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.repoLocked(fullName).id
}

func (f *Fake) repoLocked(fullName string) *repo {
	key := strings.ToLower(fullName)
	if r, ok := f.repos[key]; ok {
		return r
	}
	owner, name, ok := strings.Cut(fullName, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		panic(fmt.Sprintf("githubfake: repository %q is not owner/name", fullName))
	}
	r := &repo{id: f.id(), owner: owner, name: name, prs: map[int]*PR{}, permissions: map[string]string{},
		reviews: map[int][]Review{}, tarballs: map[string][]byte{}, files: map[string]map[string][]byte{}}
	f.repos[key] = r
	return r
}

// AddInstallation registers an installation of app appID (registered with
// NewAppKey) on the given repositories ("owner/name"; none: every one).
// Tokens of the installation reach only those repositories (404 elsewhere,
// as GitHub answers).
func (f *Fake) AddInstallation(id, appID int64, repos ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := &installation{id: id, appID: appID, repos: map[string]bool{}}
	for _, r := range repos {
		f.repoLocked(r)
		in.repos[strings.ToLower(r)] = true
	}
	f.installations[id] = in
}

// AddToken registers a plain token (a GITHUB_TOKEN or a personal token)
// acting as login; it never expires unless ExpireTokens is called.
func (f *Fake) AddToken(value, login string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens[value] = &token{value: value, login: login, expiresAt: f.now().Add(100 * 365 * 24 * time.Hour)}
}

// ExpireTokens makes every token issued or added so far expired: the next
// API call with one of them gets 401 "Bad credentials", as GitHub answers
// for an installation token past its hour.
func (f *Fake) ExpireTokens() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.tokens {
		t.expired = true
	}
}

// TokensIssued counts the installation tokens issued so far.
func (f *Fake) TokensIssued() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, t := range f.tokens {
		if t.installationID != 0 {
			n++
		}
	}
	return n
}

// PR seeds a pull request. Zero values get defaults: State "open",
// HeadRef "feature", BaseRef "main", Author "octocat".
type PR struct {
	Number    int
	Title     string
	Author    string
	State     string // open or closed
	Draft     bool
	Merged    bool
	MergedBy  string // login of who merged it (Merged); "" for none
	Mergeable *bool  // nil: GitHub has not computed it yet
	HeadSHA   string
	HeadRef   string
	HeadRepo  string // owner/name of the head repository; "" = the same repository (not a fork)
	BaseRef   string
	BaseSHA   string
	Files     []string // changed files, status "modified"
	// MergeCommitSHA is merge_commit_sha: for a merged pull request the
	// commit its merge put on the base (a merge, squash or last rebased
	// commit); "" answers null. Commits are its branch's commits besides
	// HeadSHA. Both decide what "list pull requests associated with a
	// commit" answers (commits.go).
	MergeCommitSHA string
	Commits        []string
}

// AddPR registers (or replaces) a pull request of repo "owner/name".
func (f *Fake) AddPR(fullName string, pr PR) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repoLocked(fullName)
	if pr.State == "" {
		pr.State = "open"
	}
	if pr.HeadRef == "" {
		pr.HeadRef = "feature"
	}
	if pr.BaseRef == "" {
		pr.BaseRef = "main"
	}
	if pr.Author == "" {
		pr.Author = "octocat"
	}
	if pr.Title == "" {
		pr.Title = fmt.Sprintf("PR %d", pr.Number)
	}
	pr.Files = append([]string(nil), pr.Files...)
	pr.Commits = append([]string(nil), pr.Commits...)
	r.prs[pr.Number] = &pr
}

// SetDraft marks pull request number of repo "owner/name" as a draft or as
// ready for review (what GitHub's converted_to_draft and ready_for_review
// change). It panics when the pull request was not added (test setup).
func (f *Fake) SetDraft(fullName string, number int, draft bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pr := f.repoLocked(fullName).prs[number]
	if pr == nil {
		panic(fmt.Sprintf("githubfake: %s has no pull request %d", fullName, number))
	}
	pr.Draft = draft
}

// SetPermission sets a user's role on a repository: admin, maintain,
// write, triage or read (or a custom role name). GitHub answers
// "permission" with the legacy level (maintain → write, triage → read) and
// "role_name" with the role; the fake does the same.
func (f *Fake) SetPermission(fullName, login, role string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repoLocked(fullName).permissions[strings.ToLower(login)] = role
}

// Review is one pull request review.
type Review struct {
	ID          int64
	User        string
	State       string // APPROVED, CHANGES_REQUESTED, COMMENTED, DISMISSED, PENDING
	CommitID    string
	SubmittedAt time.Time
}

// AddReview appends a review (in chronological order) to a pull request.
func (f *Fake) AddReview(fullName string, pr int, login, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repoLocked(fullName)
	sha := ""
	if p := r.prs[pr]; p != nil {
		sha = p.HeadSHA
	}
	r.reviews[pr] = append(r.reviews[pr], Review{ID: f.id(), User: login, State: state, CommitID: sha,
		SubmittedAt: f.now().Add(time.Duration(len(r.reviews[pr])) * time.Second)})
}

// SetTarball registers the .tar.gz served for GET /repos/{o}/{r}/tarball/{ref}.
func (f *Fake) SetTarball(fullName, ref string, tgz []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.repoLocked(fullName).tarballs[ref] = append([]byte(nil), tgz...)
}

// CheckRun is a check run as the fake stores it.
type CheckRun struct {
	ID          int64
	Repo        string
	Name        string
	HeadSHA     string
	ExternalID  string
	DetailsURL  string
	Status      string
	Conclusion  string
	StartedAt   time.Time
	CompletedAt time.Time
	Title       string
	Summary     string
	Text        string
	Actions     []map[string]any
	Annotations int
	Updates     int // PATCHes applied
}

// CheckRuns lists the check runs of a repository, oldest first.
func (f *Fake) CheckRuns(fullName string) []CheckRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []CheckRun
	for _, c := range f.checkRuns {
		if strings.EqualFold(c.Repo, fullName) {
			out = append(out, *c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Comment is an issue (pull request) comment.
type Comment struct {
	ID        int64
	Repo      string
	Issue     int
	User      string
	UserType  string // User or Bot
	Body      string
	CreatedAt time.Time
	UpdatedAt time.Time
	Edits     int
}

// AddComment seeds a comment by login (a "…[bot]" login is a Bot) and
// returns its id.
func (f *Fake) AddComment(fullName string, issue int, login, body string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.repoLocked(fullName)
	c := &Comment{ID: f.id(), Repo: r.owner + "/" + r.name, Issue: issue, User: login, UserType: userType(login),
		Body: body, CreatedAt: f.now(), UpdatedAt: f.now()}
	f.comments[c.ID] = c
	return c.ID
}

func userType(login string) string {
	if strings.HasSuffix(login, "[bot]") {
		return "Bot"
	}
	return "User"
}

// Comments lists the comments of an issue or pull request, oldest first.
func (f *Fake) Comments(fullName string, issue int) []Comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.commentsLocked(fullName, issue)
}

func (f *Fake) commentsLocked(fullName string, issue int) []Comment {
	var out []Comment
	for _, c := range f.comments {
		if strings.EqualFold(c.Repo, fullName) && c.Issue == issue {
			out = append(out, *c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Reaction is a reaction on a comment.
type Reaction struct {
	ID      int64
	User    string
	Content string
}

// Reactions lists the reactions on a comment.
func (f *Fake) Reactions(commentID int64) []Reaction {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Reaction(nil), f.reactions[commentID]...)
}
