package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/plandiff"
	"github.com/kilolock/kilolock/internal/report"
)

// StepSummaryLimit is the most bytes GitHub shows of one step's job summary
// ($GITHUB_STEP_SUMMARY; docs/github.md "GitHub Actions": 1 MiB per step).
const StepSummaryLimit = 1 << 20

// SchemaReportGitHub is the schema of `kl report github --json`.
const SchemaReportGitHub = "kilolock/report-github/v1"

// reportCommand is `kl report`: tell a stored run's story somewhere else.
// Its one subcommand so far is `kl report github`.
func (a *app) reportCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Report a stored run elsewhere (GitHub: job summary, check run, sticky PR comment)",
	}
	cmd.AddCommand(a.reportGitHubCommand())
	return cmd
}

// ghReportFlags are the flags of `kl report github`.
type ghReportFlags struct {
	fromJSON      string
	repo          string
	pr            int
	sha           string
	summaryFile   string
	outputFile    string
	checkName     string
	tokenEnv      string
	apiURL        string
	commentAuthor string
	strict        bool
}

func (a *app) reportGitHubCommand() *cobra.Command {
	var f ghReportFlags
	cmd := &cobra.Command{
		Use:   "github [RUN] [--from-json FILE] [--repo OWNER/NAME] [--pr N] [--sha SHA]",
		Short: "Report run RUN to GitHub: job summary, one check run, one sticky PR comment",
		Long: `Report github tells the story of a stored run on GitHub, the way klbot does, from a
GitHub Actions step (or anywhere with a token):

  - its Markdown report (the apply report for an apply run; the plan report for an open
    or failed plan, with the plan's diff, the run story for a plan applied or gone stale
    since) is appended to the job summary, cut to GitHub's 1 MiB per step with the summary,
    the diff's summary line and its destructive changes kept;
  - ONE check run on the commit, named "kl plan · STATE" or "kl apply · STATE" (or
    --check-name), found again by name and commit so that a second report updates it (a
    plan's per-resource diff blocks go in its text);
    conclusion success (applied, planned), neutral (a plan with no changes),
    action_required (refused, stale, superseded), failure (failed, interrupted);
  - ONE sticky comment per state on the pull request, edited in place, when a pull
    request is known;
  - the step outputs run-id, kind, status, conclusion, committed-serial, then
    check-run-url and comment-url, appended to $GITHUB_OUTPUT.

It prints the same report as text for the step's log, then what it wrote where (with
--json: only a kilolock/report-github/v1 document of what it did).

RUN is a run id; --from-json FILE reads it instead from the document that
"kl plan --json" or "kl apply --json" wrote (its run.id), so no JSON tool is needed.

Defaults come from the Actions environment: GITHUB_REPOSITORY; the pull request and its
head commit from the event (GITHUB_EVENT_PATH: pull_request.number and .head.sha, or an
issue_comment on a pull request, whose head is asked from GitHub), else GITHUB_SHA;
GITHUB_API_URL (GitHub Enterprise Server too); the token from GITHUB_TOKEN or the
variable named by --token-env.

GitHub gives the workflows of pull requests from forks a read-only GITHUB_TOKEN: a 403
on a write is then a warning (exit 0, the job summary still written) that says so, and an
error only with --strict.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("summary-file") {
				f.summaryFile = a.getenv("GITHUB_STEP_SUMMARY")
			}
			if !cmd.Flags().Changed("github-output") {
				f.outputFile = a.getenv("GITHUB_OUTPUT")
			}
			if !cmd.Flags().Changed("api-url") {
				f.apiURL = a.getenv("GITHUB_API_URL")
			}
			return a.reportGitHub(cmd.Context(), args, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.fromJSON, "from-json", "", `read the run id from this "kl plan --json" or "kl apply --json" document ("-" reads stdin)`)
	fl.StringVar(&f.repo, "repo", "", "repository OWNER/NAME (default $GITHUB_REPOSITORY)")
	fl.IntVar(&f.pr, "pr", 0, "pull request number for the sticky comment (default: from the event; 0 and no event: no comment)")
	fl.StringVar(&f.sha, "sha", "", "commit of the check run (default: the pull request's head, else $GITHUB_SHA)")
	fl.StringVar(&f.summaryFile, "summary-file", "$GITHUB_STEP_SUMMARY", `append the Markdown report to this file ("" for none)`)
	fl.StringVar(&f.outputFile, "github-output", "$GITHUB_OUTPUT", `append step outputs (name=value lines) to this file ("" for none)`)
	fl.StringVar(&f.checkName, "check-name", "", `check run name (default "kl plan · STATE" or "kl apply · STATE")`)
	fl.StringVar(&f.tokenEnv, "token-env", "GITHUB_TOKEN", "environment variable that holds the GitHub token")
	fl.StringVar(&f.apiURL, "api-url", "$GITHUB_API_URL", "GitHub REST API base URL, e.g. https://HOST/api/v3 for GitHub Enterprise Server (unset: https://api.github.com)")
	fl.StringVar(&f.commentAuthor, "comment-author", "", `login whose comment is the sticky one (default: any bot, e.g. github-actions[bot]; set it to your login with a personal token)`)
	fl.BoolVar(&f.strict, "strict", false, "fail when GitHub refuses a write (403), instead of warning")
	return cmd
}

// ghConclusion returns the check run status and conclusion for a run:
// success for an applied apply or a plan with changes (planned, or applied
// since), neutral for a plan with no changes, action_required for a
// refused apply or a plan gone stale or superseded, failure for a failed,
// interrupted or lease-expired run; in_progress (no conclusion) for a run
// still going.
func ghConclusion(r engine.Run) (status, conclusion string) {
	switch r.Status {
	case engine.StatusPlanning, engine.StatusWaiting:
		return "in_progress", ""
	case engine.StatusApplying:
		if r.Kind == engine.KindApply {
			return "in_progress", ""
		}
		// A plan an apply has claimed: done as a plan.
	case engine.StatusRefused, engine.StatusStale, engine.StatusSuperseded:
		return "completed", "action_required"
	case engine.StatusFailed, engine.StatusInterrupted, engine.StatusLeaseExpired:
		return "completed", "failure"
	}
	// Planned, applied, and a plan an apply has claimed.
	if r.Kind == engine.KindPlan && r.Envelope != nil && r.Envelope.Summary.Empty() {
		return "completed", "neutral"
	}
	return "completed", "success"
}

// ghTitle is the check run's output title: the run's status and, for a
// plan, its changes in Terraform's words.
func ghTitle(r engine.Run) string {
	t := string(r.Status)
	switch {
	case r.Kind == engine.KindApply && r.CommittedSerial > 0:
		t += fmt.Sprintf(": committed serial %d", r.CommittedSerial)
	case r.Kind == engine.KindPlan && r.Envelope != nil:
		s := r.Envelope.Summary
		if s.Empty() {
			t += ": no changes"
		} else {
			t += fmt.Sprintf(": %d to add, %d to change, %d to destroy", s.Add, s.Change+s.Replace, s.Destroy)
		}
	}
	return fmt.Sprintf("%s %s on %s: %s", r.Kind, r.ID, r.State, t)
}

// runReport renders the run's report in format f: the apply report for an
// apply run; for a plan, the plan report while it is open or when it
// failed (with diff, the plan's diff: ADR 0044), else its story (applied
// since, stale, superseded).
func runReport(s *engine.RunStory, diff *plandiff.Diff, f report.Format) (string, error) {
	var b strings.Builder
	o := report.Options{Format: f}
	var err error
	switch r := s.Run; {
	case r.Kind == engine.KindApply:
		err = report.Apply(&b, s, o)
	case planView(r):
		err = report.Plan(&b, &engine.PlanOutcome{Run: r, Overlaps: s.Overlaps, Diff: diff}, o)
	default:
		err = report.RunStory(&b, s, o)
	}
	return b.String(), err
}

// planView tells a plan run whose report is its plan view (runReport).
func planView(r engine.Run) bool {
	return r.Kind == engine.KindPlan &&
		(r.Status == engine.StatusPlanned || r.Status == engine.StatusPlanning || r.Status == engine.StatusFailed)
}

// ghMarkdown is the run's Markdown report, fitted to each place `kl
// report github` writes it: one document (the job summary, the comment),
// or a check run's summary and text. A plan's view with its diff is a
// report.GitHubPlan (the check run's text holds the per-resource blocks);
// any other report is md, cut by report.Truncate.
type ghMarkdown struct {
	md   string
	plan *report.GitHubPlan
}

// newGHMarkdown renders story's Markdown report (runReport), a plan's
// view with diff as a report.GitHubPlan.
func newGHMarkdown(story *engine.RunStory, diff *plandiff.Diff) (ghMarkdown, error) {
	if planView(story.Run) {
		gp, err := report.NewGitHubPlan(&engine.PlanOutcome{Run: story.Run, Overlaps: story.Overlaps, Diff: diff}, "", report.Options{})
		return ghMarkdown{plan: gp}, err
	}
	md, err := runReport(story, nil, report.Markdown)
	return ghMarkdown{md: md}, err
}

// document is the report as one document of at most limit bytes.
func (g ghMarkdown) document(limit int) string {
	if g.plan != nil {
		return g.plan.Document(limit)
	}
	return report.Truncate(g.md, limit)
}

// checkRun is the report as a check run's summary and text (the client
// cuts either to GitHub's 65,535 characters).
func (g ghMarkdown) checkRun() (summary, text string) {
	if g.plan != nil {
		return g.plan.CheckRun()
	}
	return g.md, ""
}

// stickyKey is the sticky comment key of a state: "action:STATE", cut to
// the 100 characters a key may have with a digest of the whole name.
func stickyKey(state string) string {
	k := "action:" + state
	if len(k) <= 100 {
		return k
	}
	sum := sha256.Sum256([]byte(state))
	return k[:83] + "-" + hex.EncodeToString(sum[:8])
}

// ghReportResult is what `kl report github` did; --json prints it.
type ghReportResult struct {
	Schema          string        `json:"schema"`
	Run             string        `json:"run"`
	Kind            string        `json:"kind"`
	State           string        `json:"state"`
	Status          string        `json:"status"`
	Conclusion      string        `json:"conclusion,omitempty"`
	CommittedSerial int64         `json:"committed_serial,omitempty"`
	Repo            string        `json:"repo"`
	PR              int           `json:"pr,omitempty"`
	SHA             string        `json:"sha"`
	SummaryFile     string        `json:"summary_file,omitempty"`
	SummaryBytes    int           `json:"summary_bytes,omitempty"`
	CheckRun        *ghWriteShown `json:"check_run,omitempty"`
	Comment         *ghWriteShown `json:"comment,omitempty"`
	Warnings        []string      `json:"warnings"`
}

// ghWriteShown is one GitHub object the report wrote.
type ghWriteShown struct {
	Name   string `json:"name,omitempty"`
	ID     int64  `json:"id"`
	URL    string `json:"url,omitempty"`
	Action string `json:"action"` // created, updated, edited, unchanged
}

// reportGitHub is `kl report github`: it resolves the run and where it
// goes, renders the report, writes what stays in the job (summary,
// outputs) whatever GitHub answers, then the check run and the comment.
func (a *app) reportGitHub(ctx context.Context, args []string, f ghReportFlags) error {
	id, err := reportRunID(ctx, args, f, a.io.In)
	if err != nil {
		return err
	}
	target, err := a.ghTargetOf(f)
	if err != nil {
		return err
	}
	pageLink, err := a.runPageLink()
	if err != nil {
		return err
	}
	token := a.getenv(f.tokenEnv)
	if strings.TrimSpace(token) == "" {
		return fmt.Errorf("reporting to GitHub: no token in $%s (in a workflow: env GITHUB_TOKEN: ${{ github.token }}, or --token-env NAME)", f.tokenEnv)
	}
	client, err := github.NewTokenClient(token, github.Options{BaseURL: f.apiURL, Truncate: report.Truncate,
		Logger: a.logger(), BotLogin: f.commentAuthor})
	if err != nil {
		return fmt.Errorf("reporting to GitHub: %w", err)
	}
	e, err := a.engine(ctx, false)
	if err != nil {
		return err
	}
	story, err := e.RunStory(ctx, id)
	if err != nil {
		return err
	}
	var diff *plandiff.Diff // an open plan's (ADR 0044); none from an older kl
	if planView(story.Run) {
		if diff, err = e.PlanDiff(ctx, id); err != nil && !errors.Is(err, engine.ErrNotFound) {
			return err
		}
	}
	md, err := newGHMarkdown(story, diff)
	if err != nil {
		return err
	}
	var text string // the same report for the log of the step that reports
	if !a.jsonOut {
		if text, err = runReport(story, diff, report.Text); err != nil {
			return err
		}
	}
	run := story.Run
	target.adoptRunPR(run, f)
	if pageLink != nil {
		target.runPage = pageLink(run.ID)
	}
	res := ghReportResult{Schema: SchemaReportGitHub, Run: run.ID, Kind: string(run.Kind), State: run.State,
		Status: string(run.Status), CommittedSerial: run.CommittedSerial, Repo: target.repo.String(), PR: target.pr,
		Warnings: []string{}}
	_, res.Conclusion = ghConclusion(run)
	if err := a.writeJobFiles(f, md, run, &res); err != nil {
		return err
	}
	denied, failed := a.writeGitHub(ctx, client, f, &target, run, md, &res)
	if len(denied) > 0 {
		msg := deniedWords(denied, target)
		if f.strict {
			failed = append(failed, errors.New(msg))
		} else {
			res.Warnings = append(res.Warnings, msg)
			a.warn(msg)
		}
	}
	if err := a.printGitHubResult(text, res); err != nil {
		failed = append(failed, err)
	}
	return errors.Join(failed...)
}

// reportRunID is the run named by RUN or by --from-json's document.
func reportRunID(ctx context.Context, args []string, f ghReportFlags, stdin io.Reader) (string, error) {
	switch {
	case len(args) == 1 && f.fromJSON != "":
		return "", errors.New("report github needs a RUN or --from-json FILE, not both")
	case len(args) == 1:
		return args[0], nil
	case f.fromJSON != "":
		return runIDFrom(ctx, f.fromJSON, stdin)
	}
	return "", errors.New("report github needs a RUN or --from-json FILE")
}

// writeJobFiles appends the report to the job summary (a full summary is a
// warning) and the outputs run-id, kind, status, conclusion and
// committed-serial to $GITHUB_OUTPUT.
func (a *app) writeJobFiles(f ghReportFlags, md ghMarkdown, run engine.Run, res *ghReportResult) error {
	if f.summaryFile != "" {
		n, err := appendSummary(f.summaryFile, md)
		switch {
		case errors.Is(err, errSummaryFull):
			res.Warnings = append(res.Warnings, err.Error())
			a.warn(err.Error())
		case err != nil:
			return err
		default:
			res.SummaryFile, res.SummaryBytes = f.summaryFile, n
		}
	}
	committed := ""
	if run.CommittedSerial > 0 {
		committed = strconv.FormatInt(run.CommittedSerial, 10)
	}
	return appendOutputs(f.outputFile, [][2]string{{"run-id", run.ID}, {"kind", string(run.Kind)},
		{"status", string(run.Status)}, {"conclusion", res.Conclusion}, {"committed-serial", committed}})
}

// writeGitHub puts the check run and, with a pull request, the sticky
// comment, then appends the outputs check-run-url and comment-url. It
// asks GitHub for the head commit (and fork) of a pull request named by an
// issue_comment, into t. It returns the writes GitHub refused for want of
// permission (403) apart from the other errors, and tries the comment even
// when the check run failed.
func (a *app) writeGitHub(ctx context.Context, c *github.Client, f ghReportFlags, t *ghTarget, run engine.Run, md ghMarkdown, res *ghReportResult) (denied, failed []error) {
	keep := func(err error) {
		if forbidden(err) {
			denied = append(denied, err)
		} else {
			failed = append(failed, err)
		}
	}
	if t.askHead {
		pr, err := c.GetPullRequest(ctx, t.repo, t.pr)
		if err != nil {
			return nil, []error{err}
		}
		t.sha = pr.HeadSHA
		if pr.Fork {
			t.fork = pr.HeadRepo
		}
	}
	res.SHA = t.sha
	name := f.checkName
	if name == "" {
		name = fmt.Sprintf("kl %s · %s", run.Kind, run.State)
	}
	status, conclusion := ghConclusion(run)
	details := a.workflowRunURL()
	if t.runPage != "" {
		details = t.runPage // the run's story, where the workflow run is one click from the check run anyway
	}
	cr := github.CheckRun{Name: name, HeadSHA: t.sha, ExternalID: run.ID, DetailsURL: details,
		Status: status, Conclusion: conclusion, Title: ghTitle(run)}
	cr.Summary, cr.Text = md.checkRun()
	if conclusion != "" {
		cr.CompletedAt = time.Now()
	}
	if info, err := putCheckRun(ctx, c, t.repo, cr, run.CreatedAt); err != nil {
		keep(err)
	} else {
		res.CheckRun = &info
	}
	if t.pr > 0 {
		sc, err := c.UpsertStickyComment(ctx, t.repo, t.pr, stickyKey(run.State), a.commentBody(md, *t))
		if err != nil {
			keep(err)
		} else {
			res.Comment = &ghWriteShown{ID: sc.ID, URL: sc.HTMLURL, Action: sc.Action}
		}
	}
	var urls [][2]string
	if res.CheckRun != nil {
		urls = append(urls, [2]string{"check-run-url", res.CheckRun.URL})
	}
	if res.Comment != nil {
		urls = append(urls, [2]string{"comment-url", res.Comment.URL})
	}
	if err := appendOutputs(f.outputFile, urls); err != nil {
		failed = append(failed, err)
	}
	return denied, failed
}

// putCheckRun updates the newest check run named cr.Name on cr.HeadSHA, or
// creates one: a second report of the same name and commit updates the
// first instead of adding a check run.
func putCheckRun(ctx context.Context, c *github.Client, repo github.Repo, cr github.CheckRun, started time.Time) (ghWriteShown, error) {
	found, ok, err := c.FindCheckRun(ctx, repo, cr.HeadSHA, cr.Name)
	if err != nil {
		return ghWriteShown{}, err
	}
	action := "updated"
	var info github.CheckRunInfo
	if ok {
		info, err = c.UpdateCheckRun(ctx, repo, found.ID, cr)
	} else {
		action = "created"
		cr.StartedAt = started
		info, err = c.CreateCheckRun(ctx, repo, cr)
	}
	if err != nil {
		return ghWriteShown{}, err
	}
	return ghWriteShown{Name: cr.Name, ID: info.ID, URL: info.HTMLURL, Action: action}, nil
}

// forbidden tells a write GitHub refused for want of permission (403, not
// a rate limit): a read-only token.
func forbidden(err error) bool {
	var ae *github.APIError
	return errors.As(err, &ae) && ae.Status == http.StatusForbidden && !errors.Is(err, github.ErrRateLimited)
}

// deniedWords explains refused writes: a fork pull request's read-only
// token, or a job without the permissions.
func deniedWords(errs []error, t ghTarget) string {
	parts := make([]string, len(errs))
	for i, err := range errs {
		parts[i] = err.Error()
	}
	why := "the token cannot write to " + t.repo.String() + ": give the job `permissions: checks: write, pull-requests: write, contents: read`" +
		" (a pull request from a fork gets a read-only GITHUB_TOKEN whatever the workflow asks)"
	if t.fork != "" {
		why = fmt.Sprintf("pull request #%d comes from the fork %s, and GitHub gives the workflows of pull requests from forks a read-only GITHUB_TOKEN"+
			" whatever the workflow's permissions say, so nothing can be posted to it", t.pr, t.fork)
	}
	return "GitHub refused to write (403): " + strings.Join(parts, "; ") + " — " + why +
		". The report is in the job summary; --strict makes this an error"
}

// warn prints a warning on stderr: as a workflow command inside GitHub
// Actions (an annotation on the run), else as "warning: …".
func (a *app) warn(msg string) {
	if a.getenv("GITHUB_ACTIONS") == "true" {
		esc := strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A")
		fmt.Fprintf(a.io.Err, "::warning title=kl report github::%s\n", esc.Replace(msg))
		return
	}
	fmt.Fprintf(a.io.Err, "warning: %s\n", msg)
}

// workflowRunURL links the check run to the Actions run that reported it,
// when the environment says which.
func (a *app) workflowRunURL() string {
	server, repo, id := a.getenv("GITHUB_SERVER_URL"), a.getenv("GITHUB_REPOSITORY"), a.getenv("GITHUB_RUN_ID")
	if server == "" || repo == "" || id == "" {
		return ""
	}
	return strings.TrimSuffix(server, "/") + "/" + repo + "/actions/runs/" + id
}

// commentBody is the report, cut so that a footer naming the workflow run
// and the commit fits in a comment (report.CommentLimit, less the sticky
// marker).
func (a *app) commentBody(md ghMarkdown, t ghTarget) string {
	footer := "\n<sub>Reported by `kl report github`"
	if u := a.workflowRunURL(); u != "" {
		footer += " from [workflow run " + a.getenv("GITHUB_RUN_ID") + "](" + u + ")"
	}
	if t.sha != "" {
		footer += " for commit " + t.sha[:min(len(t.sha), 12)]
	}
	if t.runPage != "" {
		footer += " · [run page](" + t.runPage + ")"
	}
	footer += ".</sub>\n"
	const markerRoom = 200 // "<!-- kilolock:sticky:KEY -->\n", KEY ≤ 100
	return md.document(report.CommentLimit-markerRoom-len(footer)) + footer
}

// errSummaryFull: the step's job summary has no room left for the report.
var errSummaryFull = errors.New("no room left in the job summary")

// printGitHubResult prints the run's text report and what was done with
// it, or with --json the JSON result alone.
func (a *app) printGitHubResult(text string, r ghReportResult) error {
	if a.jsonOut {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding report result as JSON: %w", err)
		}
		_, err = fmt.Fprintf(a.io.Out, "%s\n", b)
		return err
	}
	var b strings.Builder
	b.WriteString(text + "\n")
	verdict := r.Conclusion
	if verdict == "" {
		verdict = "in progress"
	}
	fmt.Fprintf(&b, "reported %s run %s on %s (%s) to %s: %s\n", r.Kind, r.Run, r.State, r.Status, r.Repo, verdict)
	if r.SummaryFile != "" {
		fmt.Fprintf(&b, "  job summary: %d bytes appended to %s\n", r.SummaryBytes, r.SummaryFile)
	}
	if c := r.CheckRun; c != nil {
		fmt.Fprintf(&b, "  check run %q: %s %s\n", c.Name, c.Action, c.URL)
	}
	if c := r.Comment; c != nil {
		fmt.Fprintf(&b, "  comment on #%d: %s %s\n", r.PR, c.Action, c.URL)
	}
	_, err := io.WriteString(a.io.Out, b.String())
	return err
}
