package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/queue"
	"github.com/kilolock/kilolock/internal/report"
)

// SchemaCheck is the schema of `kl github check --json`.
const SchemaCheck = "kilolock/check/v1"

// Kinds of `kl github check`: what it judged.
const (
	checkMergeGroup  = "merge-group"  // a merge group of GitHub's merge queue
	checkPullRequest = "pull-request" // a pull request's head
)

// checkFlags are the flags of `kl github check`.
type checkFlags struct {
	repo, head, headRef, base, baseSHA, tokenEnv, apiURL string
	pr                                                   int
	appliesOnMerge, strict                               bool
	root                                                 string // projectRoot
}

// checkClient is what kl github check asks GitHub.
type checkClient interface {
	queue.Client
	GetPullRequest(ctx context.Context, repo github.Repo, number int) (github.PullRequest, error)
}

func (a *app) checkCommand() *cobra.Command {
	var f checkFlags
	cmd := &cobra.Command{
		Use:   "check [--repo OWNER/NAME] [--head SHA --base BRANCH | --pr N [--head SHA]] [--applies-on-merge=false]",
		Short: "The kl verdict of a merge group of GitHub's merge queue, or of a pull request's head, from the store",
		Long: `Check computes the verdict klbot's "kl" check run gives (ADR 0058, ADR 0060), from the plans in
the store, for a workflow whose job is the "kl" check.

A merge group (a merge_group event, or --head SHA --base BRANCH): its pull requests are found
from GitHub — first parents from the group's head commit to the base branch's head (or the
group's base commit, --base-sha), and the pull requests of each commit — and judged in queue
order (the first merges first): for each project, the pull request's newest plan at its last
commit (kl plan --pr) against the state's head (since-plan: a changed planned target is stale)
and against the write sets of the plans ahead of it in the group. A plan ahead that writes what
it writes fails it, naming the pair; one ahead that writes what it reads fails it unless plans
apply on merge (the Action's apply on push: kl apply --pr re-plans it there, in queue order,
and goes on only with its intent unchanged; --strict-since-plan, as that apply's, fails it). A
plan applied already passes; a pull request with no plan of its last commit passes (it touches
no project kl planned: require "kl" on pull requests too, where no plan fails). --applies-on-merge=false says this repository applies plans before merging, not
on merge: an open plan then fails (merging would leave it unapplied) and writes nothing for
those behind it.

A pull request's head (a pull_request event, or --pr N [--head SHA]): passes when every plan of
the head — the newest of each project — is applicable (open, not stale, not fenced) or
applied; no plan of the head fails.

It prints the verdict as Markdown (the job summary's; --json: kilolock/check/v1) and exits 3
when the group or the head fails, 0 when it passes. A destroyed merge group judges nothing.

Defaults come from the Actions environment: GITHUB_REPOSITORY; GITHUB_EVENT_PATH (a merge_group
event's merge_group.head_sha, head_ref, base_sha, base_ref; a pull_request event's number and
head sha); GITHUB_API_URL; the token from GITHUB_TOKEN or --token-env (contents: read,
pull-requests: read).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("api-url") {
				f.apiURL = a.getenv("GITHUB_API_URL")
			}
			return a.check(cmd.Context(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.repo, "repo", "", "repository OWNER/NAME (default $GITHUB_REPOSITORY)")
	fl.StringVar(&f.head, "head", "", "the merge group's head commit (with --base), or the pull request's head (with --pr; default: GitHub's)")
	fl.StringVar(&f.headRef, "head-ref", "", "the merge group's ref, refs/heads/gh-readonly-queue/BASE/pr-N-SHA (optional: it names the group's last pull request)")
	fl.StringVar(&f.base, "base", "", "the branch the merge group merges into")
	fl.StringVar(&f.baseSHA, "base-sha", "", "the commit the merge group was made on (optional: the walk also stops at the base branch's head)")
	fl.IntVar(&f.pr, "pr", 0, "judge this pull request's head instead of a merge group")
	fl.BoolVar(&f.appliesOnMerge, "applies-on-merge", true, "plans are applied when their pull request merges (the Action's apply on push); false: before it merges")
	fl.BoolVar(&f.strict, "strict-since-plan", false, "the merge-time applies refuse a changed plan input instead of re-planning (kl apply --strict-since-plan): a plan that reads what one ahead writes fails")
	fl.StringVar(&f.tokenEnv, "token-env", "GITHUB_TOKEN", "environment variable that holds the GitHub token")
	fl.StringVar(&f.apiURL, "api-url", "$GITHUB_API_URL", "GitHub REST API base URL (unset: https://api.github.com)")
	return cmd
}

// checkEvent is the part of a merge_group or pull_request event payload
// kl github check reads.
type checkEvent struct {
	Action     string `json:"action"`
	Reason     string `json:"reason"`
	MergeGroup *struct {
		HeadSHA string `json:"head_sha"`
		HeadRef string `json:"head_ref"`
		BaseSHA string `json:"base_sha"`
		BaseRef string `json:"base_ref"`
	} `json:"merge_group"`
	PullRequest *struct {
		Number int `json:"number"`
		Head   struct {
			SHA string `json:"sha"`
		} `json:"head"`
	} `json:"pull_request"`
}

// checkDefaults fills f from the Actions environment; destroyed is
// GitHub's reason when the event is a destroyed merge group.
func (a *app) checkDefaults(f *checkFlags) (destroyed string, err error) {
	if f.repo == "" {
		f.repo = a.getenv("GITHUB_REPOSITORY")
	}
	if f.repo == "" {
		return "", errors.New("asking GitHub: no repository: pass --repo OWNER/NAME or set GITHUB_REPOSITORY")
	}
	switch {
	case f.pr != 0 && f.base != "":
		return "", errors.New("--pr judges a pull request's head, --base a merge group: not both")
	case f.pr < 0:
		return "", fmt.Errorf("--pr %d is not a pull request number", f.pr)
	case f.pr > 0 || (f.head != "" && f.base != ""):
		return "", nil
	case f.head != "" || f.base != "":
		return "", errors.New("a merge group needs both --head SHA and --base BRANCH")
	}
	p := a.getenv("GITHUB_EVENT_PATH")
	if p == "" {
		return "", errors.New("no event (GITHUB_EVENT_PATH is not set): pass --head SHA --base BRANCH for a merge group, or --pr N for a pull request")
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", fmt.Errorf("reading the Actions event %s: %w", p, err)
	}
	var ev checkEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		return "", fmt.Errorf("reading the Actions event %s: %w", p, err)
	}
	switch {
	case ev.MergeGroup != nil && ev.MergeGroup.HeadSHA != "" && ev.MergeGroup.BaseRef != "":
		f.head, f.headRef, f.baseSHA, f.base = ev.MergeGroup.HeadSHA, ev.MergeGroup.HeadRef, ev.MergeGroup.BaseSHA, ev.MergeGroup.BaseRef
		if ev.Action == "destroyed" {
			destroyed = ev.Reason
			if destroyed == "" {
				destroyed = "destroyed"
			}
		}
	case ev.PullRequest != nil && ev.PullRequest.Number > 0:
		f.pr = ev.PullRequest.Number
		if f.head == "" {
			f.head = ev.PullRequest.Head.SHA
		}
	default:
		return "", fmt.Errorf("the Actions event %s is neither a merge group nor a pull request: kl github check runs on merge_group and pull_request, or pass --head and --base, or --pr", p)
	}
	return destroyed, nil
}

// check is `kl github check`.
func (a *app) check(ctx context.Context, f checkFlags) error {
	f.root = a.projectRoot()
	destroyed, err := a.checkDefaults(&f)
	if err != nil {
		return err
	}
	repo, err := github.ParseRepo(f.repo)
	if err != nil {
		return fmt.Errorf("--repo: %w", err)
	}
	if f.head != "" && !commitSHA.MatchString(f.head) {
		return fmt.Errorf("--head %q: want a commit SHA, 7 to 40 hexadecimal characters", preview(f.head))
	}
	if destroyed != "" {
		g := report.MergeGroup{HeadSHA: f.head, BaseRef: strings.TrimPrefix(f.base, "refs/heads/"), Destroyed: destroyed, Workflow: true}
		return a.printCheck(repo, checkMergeGroup, g, g.Title(), true)
	}
	token := a.getenv(f.tokenEnv)
	if strings.TrimSpace(token) == "" {
		return fmt.Errorf("asking GitHub: no token in $%s (in a workflow: env GITHUB_TOKEN: ${{ github.token }}, or --token-env NAME)", f.tokenEnv)
	}
	client, err := github.NewTokenClient(token, github.Options{BaseURL: f.apiURL, Truncate: report.Truncate, Logger: a.logger()})
	if err != nil {
		return fmt.Errorf("asking GitHub: %w", err)
	}
	e, err := a.engine(ctx, false)
	if err != nil {
		return err
	}
	if f.pr > 0 {
		chk, err := prCheck(ctx, e, client, repo, f)
		if err != nil {
			return err
		}
		return a.printCheck(repo, checkPullRequest, chk, chk.Title(), chk.OK())
	}
	g, err := groupCheck(ctx, e, client, repo, f)
	if err != nil {
		return err
	}
	return a.printCheck(repo, checkMergeGroup, g, g.Title(), g.OK())
}

// groupCheck judges the merge group f names (queue.Walk, queue.Judge).
func groupCheck(ctx context.Context, e *engine.Engine, c checkClient, repo github.Repo, f checkFlags) (report.MergeGroup, error) {
	grp := queue.Group{HeadSHA: f.head, HeadRef: f.headRef, BaseSHA: f.baseSHA, BaseRef: f.base}
	g := report.MergeGroup{HeadSHA: f.head, BaseRef: grp.Base(), Workflow: true}
	nums, problem, err := queue.Walk(ctx, c, repo, grp)
	if err != nil || problem != "" {
		g.Problem = problem
		return g, err
	}
	var queued []queue.PR
	for _, n := range nums {
		q, err := queuedPR(ctx, e, c, repo, n, grp.Base(), f)
		if err != nil {
			return g, err
		}
		queued = append(queued, q)
	}
	g.PRs = queue.Judge(queued)
	return g, nil
}

// queuedPR reads pull request n of a merge group: its head from GitHub,
// and the newest plan of each project at that head from the store.
func queuedPR(ctx context.Context, e *engine.Engine, c checkClient, repo github.Repo, n int, base string, f checkFlags) (queue.PR, error) {
	q, judge, err := queue.ReadPR(ctx, c, repo, n, base)
	if err != nil || !judge {
		return q, err
	}
	runs, err := e.PRPlans(ctx, engine.PRPlanQuery{PR: engine.PullRequest{Repo: repo.String(), Number: n}, Commit: q.Head})
	if err != nil {
		return q, err
	}
	for _, r := range runs {
		p := queue.Plan{Project: runProject(r, f.root), State: r.State, PlanRun: r.ID, OnMerge: f.appliesOnMerge, Strict: f.strict, MergeQueue: true}
		switch {
		case r.Status == engine.StatusApplied:
			p.St = queue.PlanApplied
		case r.Status == engine.StatusPlanned && r.Envelope != nil:
			sp, err := e.SincePlan(ctx, r.ID)
			if err != nil {
				return q, err
			}
			_, fenced, err := queue.StaleOrFenced(ctx, e, r)
			if err != nil {
				return q, err
			}
			p.St, p.Footprint, p.SincePlan, p.FencedBy = queue.PlanOpen, r.Envelope.Footprint, *sp, fenced
		}
		q.Plans = append(q.Plans, p)
	}
	return q, nil
}

// prCheck is the aggregate check of pull request f.pr's head (f.head, or
// GitHub's): each project's newest plan at it, applicable or applied.
func prCheck(ctx context.Context, e *engine.Engine, c checkClient, repo github.Repo, f checkFlags) (report.PRCheck, error) {
	head := f.head
	if head == "" {
		pr, err := c.GetPullRequest(ctx, repo, f.pr)
		if err != nil {
			return report.PRCheck{}, err
		}
		head = pr.HeadSHA
	}
	chk := report.PRCheck{HeadSHA: head, Workflow: true}
	runs, err := e.PRPlans(ctx, engine.PRPlanQuery{PR: engine.PullRequest{Repo: repo.String(), Number: f.pr}, Commit: head})
	if err != nil {
		return chk, err
	}
	if len(runs) == 0 {
		chk.Problem = "the store holds no plan of it (kl plan --pr): plan it first"
		return chk, nil
	}
	for _, r := range runs {
		p := report.PRCheckProject{Project: runProject(r, f.root), State: r.State, PlanRun: r.ID, OnMerge: f.appliesOnMerge}
		switch r.Status {
		case engine.StatusApplied:
			p.Verdict, p.ApplyRun = report.VerdictApplied, r.ApplyRun
			if ap, err := e.Run(ctx, r.ApplyRun); err == nil {
				p.Serial = ap.CommittedSerial
			} else if !errors.Is(err, engine.ErrNotFound) {
				return chk, err
			}
		case engine.StatusPlanned:
			stale, fenced, err := queue.StaleOrFenced(ctx, e, r)
			switch {
			case err != nil:
				return chk, err
			case stale != nil:
				p.Verdict, p.Serial, p.By = report.VerdictStale, stale.Serial, stale.PR
			case len(fenced) > 0:
				p.Verdict, p.FencedBy = report.VerdictFenced, fenced
			default:
				p.Verdict = report.VerdictApplicable
			}
		default:
			p.Verdict, p.Status = report.VerdictNotOpen, r.Status
		}
		chk.Projects = append(chk.Projects, p)
	}
	return chk, nil
}

// runProject names a plan's project for the check: its scope directory
// relative to root (GITHUB_WORKSPACE, else the working directory) when
// under it, and its workspace when not default; its state when it stored
// no envelope.
func runProject(r engine.Run, root string) string {
	if r.Envelope == nil || r.Envelope.Scope.Dir == "" {
		return r.State
	}
	p := r.Envelope.Scope.Dir
	if rel, err := filepath.Rel(root, p); err == nil && root != "" && filepath.IsAbs(p) && !strings.HasPrefix(rel, "..") {
		p = filepath.ToSlash(rel)
	}
	if w := r.Envelope.Scope.Workspace; w != "" && w != "default" {
		p += " (workspace " + w + ")"
	}
	return p
}

// projectRoot is what runProject names directories relative to.
func (a *app) projectRoot() string {
	if w := a.getenv("GITHUB_WORKSPACE"); w != "" {
		return w
	}
	wd, _ := os.Getwd()
	return wd
}

// printCheck prints verdict v (a report.MergeGroup or report.PRCheck) as
// Markdown, or with --json as kilolock/check/v1; a failing one is exit 3.
func (a *app) printCheck(repo github.Repo, kind string, v report.BotNotice, title string, ok bool) error {
	if a.jsonOut {
		doc := jsonCheck{Schema: SchemaCheck, Kind: kind, Repo: repo.String(), OK: ok, Title: title}
		switch v := v.(type) {
		case report.MergeGroup:
			g := jsonGroup(v)
			doc.MergeGroup = &g
		case report.PRCheck:
			c := jsonPRCheck(v)
			doc.PullRequest = &c
		}
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return fmt.Errorf("encoding the check as JSON: %w", err)
		}
		if _, err := fmt.Fprintf(a.io.Out, "%s\n", b); err != nil {
			return err
		}
	} else if err := report.Notice(a.io.Out, v, report.Options{Format: report.Markdown}); err != nil {
		return err
	}
	if !ok {
		return &ExitError{Code: 3, Err: fmt.Errorf("kl check fails: %s", title)}
	}
	return nil
}

// The JSON of kilolock/check/v1 (docs/json.md); schema first.
type (
	jsonCheck struct {
		Schema      string          `json:"schema"`
		Kind        string          `json:"kind"`
		Repo        string          `json:"repo"`
		OK          bool            `json:"ok"`
		Title       string          `json:"title"`
		MergeGroup  *jsonCheckGroup `json:"merge_group,omitempty"`
		PullRequest *jsonCheckPR    `json:"pull_request,omitempty"`
	}
	jsonCheckGroup struct {
		HeadSHA   string        `json:"head_sha"`
		BaseRef   string        `json:"base_ref"`
		Problem   string        `json:"problem,omitempty"`
		Destroyed string        `json:"destroyed,omitempty"`
		PRs       []jsonQueuePR `json:"pull_requests"`
	}
	jsonQueuePR struct {
		Number   int                `json:"number"`
		HeadSHA  string             `json:"head_sha"`
		Passes   bool               `json:"passes"`
		Problem  string             `json:"problem,omitempty"`
		Projects []jsonQueueProject `json:"projects"`
	}
	jsonQueueProject struct {
		Project   string                  `json:"project"`
		State     string                  `json:"state"`
		PlanRun   string                  `json:"plan_run,omitempty"`
		OnMerge   bool                    `json:"on_merge"`
		Verdict   report.QueueVerdict     `json:"verdict"`
		Passes    bool                    `json:"passes"`
		SincePlan engine.SincePlanSummary `json:"since_plan"`
		Stale     *engine.SincePlanEntry  `json:"stale,omitempty"`
		FencedBy  []string                `json:"fenced_by,omitempty"`
		Ahead     []jsonAhead             `json:"ahead"`
		Conflict  *jsonAhead              `json:"conflict,omitempty"`
	}
	jsonAhead struct {
		PR        int                   `json:"pr"`
		Class     engine.SincePlanClass `json:"class"`
		Addresses []string              `json:"addresses"`
	}
	jsonCheckPR struct {
		HeadSHA  string             `json:"head_sha"`
		Problem  string             `json:"problem,omitempty"`
		Projects []jsonCheckProject `json:"projects"`
	}
	jsonCheckProject struct {
		Project  string                `json:"project"`
		State    string                `json:"state"`
		PlanRun  string                `json:"plan_run"`
		ApplyRun string                `json:"apply_run,omitempty"`
		Verdict  report.PRCheckVerdict `json:"verdict"`
		Passes   bool                  `json:"passes"`
		Serial   int64                 `json:"serial,omitempty"`
		By       *engine.PullRequest   `json:"by,omitempty"`
		FencedBy []string              `json:"fenced_by,omitempty"`
		Status   engine.RunStatus      `json:"status,omitempty"`
	}
)

func toJSONAhead(a report.QueueAhead) jsonAhead {
	return jsonAhead{PR: a.PR, Class: a.Class, Addresses: append([]string{}, a.Addresses...)}
}

func jsonGroup(g report.MergeGroup) jsonCheckGroup {
	out := jsonCheckGroup{HeadSHA: g.HeadSHA, BaseRef: g.BaseRef, Problem: g.Problem, Destroyed: g.Destroyed, PRs: []jsonQueuePR{}}
	for _, p := range g.PRs {
		jp := jsonQueuePR{Number: p.Number, HeadSHA: p.HeadSHA, Passes: p.Passes(), Problem: p.Problem, Projects: []jsonQueueProject{}}
		for _, pp := range p.Projects {
			jq := jsonQueueProject{Project: pp.Project, State: pp.State, PlanRun: pp.PlanRun, OnMerge: pp.OnMerge, Verdict: pp.Verdict,
				Passes: pp.Verdict.Passes(), SincePlan: pp.SincePlan, Stale: pp.Stale, FencedBy: pp.FencedBy, Ahead: []jsonAhead{}}
			for _, a := range pp.Ahead {
				jq.Ahead = append(jq.Ahead, toJSONAhead(a))
			}
			if pp.Conflict != nil {
				c := toJSONAhead(*pp.Conflict)
				jq.Conflict = &c
			}
			jp.Projects = append(jp.Projects, jq)
		}
		out.PRs = append(out.PRs, jp)
	}
	return out
}

func jsonPRCheck(c report.PRCheck) jsonCheckPR {
	out := jsonCheckPR{HeadSHA: c.HeadSHA, Problem: c.Problem, Projects: []jsonCheckProject{}}
	for _, p := range c.Projects {
		out.Projects = append(out.Projects, jsonCheckProject{Project: p.Project, State: p.State, PlanRun: p.PlanRun, ApplyRun: p.ApplyRun,
			Verdict: p.Verdict, Passes: p.Verdict.Passes(), Serial: p.Serial, By: p.By, FencedBy: p.FencedBy, Status: p.Status})
	}
	return out
}
