package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/report"
)

// SchemaPushedPRs is the schema of `kl github pushed-prs --json`.
const SchemaPushedPRs = "kilolock/pushed-prs/v1"

// pushedDoc is kilolock/pushed-prs/v1 (docs/json.md), schema first as in
// every kl document: the pull requests a push of Branch from Before to
// After brought, in merge order.
type pushedDoc struct {
	Schema       string     `json:"schema"`
	Repo         string     `json:"repo"`
	Branch       string     `json:"branch"`
	Before       string     `json:"before"`
	After        string     `json:"after"`
	PullRequests []pushedPR `json:"pull_requests"`
}

// githubCommand is `kl github`: questions kl asks GitHub for a workflow.
func (a *app) githubCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "github",
		Short: "Ask GitHub what a workflow needs (the pull requests a push merged, the kl check of a merge group or pull request)",
	}
	cmd.AddCommand(a.pushedPRsCommand(), a.checkCommand())
	return cmd
}

// pushedFlags are the flags of `kl github pushed-prs`.
type pushedFlags struct {
	repo, branch, before, after, tokenEnv, apiURL string
}

func (a *app) pushedPRsCommand() *cobra.Command {
	var f pushedFlags
	cmd := &cobra.Command{
		Use:   "pushed-prs [--repo OWNER/NAME] [--branch NAME] [--before SHA] [--after SHA]",
		Short: "List the pull requests a push to a branch merged, in the order they merged",
		Long: `Pushed-prs lists the pull requests a push to a branch brought, in the order they reached
it, one a line: "OWNER/REPO#N HEAD_SHA MERGE_SHA" — the pull request, its last commit (the
commit its reviewed plan was made at: kl apply --pr OWNER/REPO#N --commit HEAD_SHA applies
it) and the commit its merge put on the branch. A merge queue or a rebase merge brings
several; a push of commits that no pull request merged, none (nothing is printed).

It asks GitHub for the commits from --before to --after (compare), and for each the pull
requests associated with it, keeping those merged into --branch of --repo.

Defaults come from a GitHub Actions push event: GITHUB_REPOSITORY; the branch (ref
refs/heads/NAME), before and after from GITHUB_EVENT_PATH; GITHUB_API_URL; the token from
GITHUB_TOKEN or the variable named by --token-env (contents: read and pull-requests: read).
A push that created or deleted the branch (an all-zero before or after) is an error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("api-url") {
				f.apiURL = a.getenv("GITHUB_API_URL")
			}
			return a.pushedPRs(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.repo, "repo", "", "repository OWNER/NAME (default $GITHUB_REPOSITORY)")
	fl.StringVar(&f.branch, "branch", "", "the branch pushed to (default: the push event's ref, refs/heads/NAME)")
	fl.StringVar(&f.before, "before", "", "the branch's head before the push, a 40-character SHA (default: the push event's before)")
	fl.StringVar(&f.after, "after", "", "the branch's head after the push (default: the push event's after)")
	fl.StringVar(&f.tokenEnv, "token-env", "GITHUB_TOKEN", "environment variable that holds the GitHub token")
	fl.StringVar(&f.apiURL, "api-url", "$GITHUB_API_URL", "GitHub REST API base URL (unset: https://api.github.com)")
	return cmd
}

// pushEvent is the part of a push event payload pushed-prs reads.
type pushEvent struct {
	Ref    string `json:"ref"`
	Before string `json:"before"`
	After  string `json:"after"`
}

// pushedPR is one line of pushed-prs, and one element of its JSON.
type pushedPR struct {
	PR             string `json:"pr"` // OWNER/REPO#N
	Number         int    `json:"number"`
	HeadSHA        string `json:"head_sha"`
	MergeCommitSHA string `json:"merge_commit_sha,omitempty"`
	URL            string `json:"url,omitempty"`
	Title          string `json:"title,omitempty"`
}

// pushedPRs is `kl github pushed-prs`.
func (a *app) pushedPRs(cmd *cobra.Command, f pushedFlags) error {
	if err := a.pushDefaults(&f); err != nil {
		return err
	}
	repo, err := github.ParseRepo(f.repo)
	if err != nil {
		return fmt.Errorf("--repo: %w", err)
	}
	token := a.getenv(f.tokenEnv)
	if strings.TrimSpace(token) == "" {
		return fmt.Errorf("asking GitHub: no token in $%s (in a workflow: env GITHUB_TOKEN: ${{ github.token }}, or --token-env NAME)", f.tokenEnv)
	}
	client, err := github.NewTokenClient(token, github.Options{BaseURL: f.apiURL, Truncate: report.Truncate, Logger: a.logger()})
	if err != nil {
		return fmt.Errorf("asking GitHub: %w", err)
	}
	prs, err := client.PushedPullRequests(cmd.Context(), repo, f.branch, f.before, f.after)
	if err != nil {
		return err
	}
	out := []pushedPR{}
	for _, p := range prs {
		out = append(out, pushedPR{PR: fmt.Sprintf("%s#%d", repo, p.Number), Number: p.Number, HeadSHA: p.HeadSHA,
			MergeCommitSHA: p.MergeCommitSHA, URL: p.HTMLURL, Title: p.Title})
	}
	if a.jsonOut {
		b, err := json.MarshalIndent(pushedDoc{Schema: SchemaPushedPRs, Repo: repo.String(), Branch: f.branch,
			Before: f.before, After: f.after, PullRequests: out}, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding pushed-prs as JSON: %w", err)
		}
		_, err = fmt.Fprintf(a.io.Out, "%s\n", b)
		return err
	}
	var b strings.Builder
	for _, p := range out {
		fmt.Fprintf(&b, "%s %s %s\n", p.PR, p.HeadSHA, p.MergeCommitSHA)
	}
	_, err = fmt.Fprint(a.io.Out, b.String())
	return err
}

// pushDefaults fills f from the Actions environment: GITHUB_REPOSITORY,
// and the push event's ref, before and after (GITHUB_EVENT_PATH).
func (a *app) pushDefaults(f *pushedFlags) error {
	if f.repo == "" {
		f.repo = a.getenv("GITHUB_REPOSITORY")
	}
	if f.repo == "" {
		return errors.New("asking GitHub: no repository: pass --repo OWNER/NAME or set GITHUB_REPOSITORY")
	}
	if f.branch != "" && f.before != "" && f.after != "" {
		return nil
	}
	p := a.getenv("GITHUB_EVENT_PATH")
	if p == "" {
		return errors.New("no push event (GITHUB_EVENT_PATH is not set): pass --branch, --before and --after")
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("reading the Actions event %s: %w", p, err)
	}
	var ev pushEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		return fmt.Errorf("reading the Actions event %s: %w", p, err)
	}
	branch, ok := strings.CutPrefix(ev.Ref, "refs/heads/")
	if !ok || ev.Before == "" || ev.After == "" {
		return fmt.Errorf("the Actions event %s is not a push to a branch (ref %q, before %q, after %q): kl github pushed-prs runs on push, or pass --branch, --before and --after",
			p, preview(ev.Ref), preview(ev.Before), preview(ev.After))
	}
	if f.branch == "" {
		f.branch = branch
	}
	if f.before == "" {
		f.before = ev.Before
	}
	if f.after == "" {
		f.after = ev.After
	}
	return nil
}
