package bot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/klyaml"
	"github.com/kilolock/kilolock/internal/report"
	"github.com/kilolock/kilolock/internal/tarball"
)

// checkout is a pull request's head commit, extracted for one job.
type checkout struct {
	pr    github.PullRequest
	head  string
	files []string // changed files, repository-relative (renames: both names)
	root  string   // the extracted repository
	// partial says why files are not all the pull request changes (""
	// when they are: partialListing); baseRoot is the base commit's
	// extracted tree once a native-lane plan needed it (baseTree).
	partial  string
	baseRoot string
	config   *klyaml.Config
	// names are the projects to plan, in order; touched their changed
	// files (preparePlan).
	names   []string
	touched map[string][]string
}

// remove deletes the checkout (nil: nothing).
func (co *checkout) remove() {
	if co == nil {
		return
	}
	for _, root := range []string{co.root, co.baseRoot} {
		if root != "" {
			os.RemoveAll(filepath.Dir(root))
		}
	}
}

// plan is the plan job (PlanArgs): read the pull request (a push whose head
// moved on is superseded: stop), check the commenter's permission for a
// "/kl plan", list the changed files, download and extract the head's
// tarball, read kl.yaml (invalid, or loosening a safety key of its base,
// ADR 0040 → a failing "kl config" check run), supersede
// older plans of the pull request, plan every touched project (or the one
// asked for) with one "kl plan · PROJECT" check run each, and update the
// sticky comment.
//
// What needs no lock comes first, once (the first attempt): the permission,
// 👀, the pull request, the checkout and the projects it will plan. Then
// the job takes the pull request's lock, exclusive (a plan supersedes the
// plans of older heads), by try-lock: while another job of the pull request
// holds it, or an apply of it is parked waiting for reservations, the job's
// "kl plan · PROJECT" check runs say it is queued behind them and the job
// is snoozed (ADR 0041); a later attempt reads the pull request again and
// checks out its head once it has the lock.
//
// Drafts are decided by the pull request as fetched (the key only says what
// the delivery saw): a push job stops when the pull request is a draft and
// kl.yaml has plan_drafts: false; a KeyDraft job stops when the pull
// request is no longer a draft, because GitHub's ready_for_review delivery
// made a KeyPush job for the same head (one plan, not two). Comments and
// re-runs plan drafts too. Left to "/kl plan": a pull request converted to
// a draft before its KeyPush job ran and made ready again at the same head
// (that ready_for_review is a Duplicate).
func (b *Bot) plan(ctx context.Context, jr *jobRun, a PlanArgs) (JobResult, error) {
	c, repo, err := b.client(a.JobBase)
	if err != nil {
		return "", err
	}
	first := !jr.st.Authorized
	if first && a.Trigger == TriggerComment {
		if ok, err := b.mayWrite(ctx, c, repo, a.JobBase, "/kl plan"); err != nil || !ok {
			return ResultRefused, err
		}
	}
	var co *checkout
	defer func() { co.remove() }()
	if first {
		pr, err := b.pullRequest(ctx, c, repo, a.JobBase)
		if err != nil {
			return "", err
		}
		jr.st.Authorized, jr.st.Head = true, pr.HeadSHA
		var res JobResult
		if co, res, err = b.preparePlan(ctx, c, repo, a, pr); co == nil || err != nil {
			return res, err
		}
		jr.st.Names = co.names
	}
	lives := b.planLives(jr, a, jr.st.Head, jr.st.Names)
	if err := jr.lock(ctx, lockSet{Exclusive: true}, jr.queuedShow(ctx, c, repo, lives)); err != nil {
		return "", err
	}
	if err := b.parkedApplies(ctx, jr, c, repo, lives); err != nil {
		return "", err
	}
	if co == nil { // a later attempt: the pull request as it is now
		pr, err := c.GetPullRequest(ctx, repo, a.PR)
		if err != nil {
			return "", err
		}
		var res JobResult
		if co, res, err = b.preparePlan(ctx, c, repo, a, pr); co == nil || err != nil {
			return res, err
		}
	}
	return b.planLocked(ctx, jr, c, repo, a, co)
}

// preparePlan is what a plan job does before its lock: the pull request's
// state and head (closed, moved on, a draft planned by the
// ready_for_review's job, a fork not planned on push), the checkout, and
// the projects to plan. It returns a nil checkout, with the job's result,
// when there is nothing to plan.
func (b *Bot) preparePlan(ctx context.Context, c Client, repo github.Repo, a PlanArgs, pr github.PullRequest) (*checkout, JobResult, error) {
	log := logOf(ctx)
	switch {
	case pr.State != "open":
		log.Info("pull request is closed: not planning")
		return nil, ResultSkipped, nil
	case a.HeadSHA != "" && pr.HeadSHA != a.HeadSHA:
		log.Info("superseded: the pull request's head moved on", "job_head", a.HeadSHA, "head", pr.HeadSHA)
		return nil, ResultSkipped, nil
	case a.Key == KeyDraft && !pr.Draft:
		log.Info("ready for review since the delivery: the ready_for_review delivery's job plans it")
		return nil, ResultSkipped, nil
	case pr.Fork && a.Trigger == TriggerPush && !b.opts.AllowForkPRs:
		// Before the checkout: nothing of the fork's is fetched or run.
		log.Info("pull request from a fork: not planned on push (KLBOT_ALLOW_FORK_PRS)", "head_repo", pr.HeadRepo)
		return nil, ResultSkipped, b.reportFork(ctx, c, repo, pr)
	}
	co, err := b.checkout(ctx, c, repo, pr)
	if err != nil {
		return nil, "", err
	}
	if co.config == nil { // invalid kl.yaml, reported
		co.remove()
		return nil, ResultRefused, nil
	}
	if pr.Draft && !co.config.PlanDrafts && a.Trigger == TriggerPush {
		co.remove()
		log.Info("draft pull request: not planned (kl.yaml plan_drafts: false)")
		return nil, ResultSkipped, nil
	}
	co.touched = map[string][]string{}
	if a.Project != "" {
		p, ok := co.config.Project(a.Project)
		if !ok {
			co.remove()
			return nil, ResultRefused, b.replyNotice(ctx, c, repo, a.JobBase, report.NoSuchProject{Project: a.Project, Projects: co.config.Names()})
		}
		co.names, co.touched[p.Name] = []string{p.Name}, p.Touches(co.files)
	} else {
		sel := klyaml.Select(co.config, co.files)
		co.names, co.touched = sel.Order, sel.Touched
	}
	return co, "", nil
}

// planLives are the plan job's in-progress check runs: "kl plan ·
// PROJECT" on head for each of names.
func (b *Bot) planLives(jr *jobRun, a PlanArgs, head string, names []string) []*liveCheck {
	asked := report.LiveJob{Kind: report.JobPlan, Ask: jobAsk(a.Trigger), Project: a.Project, Actor: a.Actor, HeadSHA: a.HeadSHA}
	var out []*liveCheck
	for _, n := range names {
		out = append(out, jr.liveFor(head, PlanCheckName(n), externalID(a.PR, n), n, asked))
	}
	return out
}

// planLocked is the plan job once it holds its lock: supersede the older
// plans, plan each project of co, update the sticky comment.
func (b *Bot) planLocked(ctx context.Context, jr *jobRun, c Client, repo github.Repo, a PlanArgs, co *checkout) (JobResult, error) {
	rows, err := b.db.projects(ctx, a.Repo, a.PR)
	if err != nil {
		return "", err
	}
	if err := b.supersedeOlder(ctx, c, repo, rows, co, co.names, a.Project != ""); err != nil {
		return "", err
	}
	if len(co.names) == 0 {
		if err := b.reportNoneTouched(ctx, c, repo, a.PR, co); err != nil {
			return "", err
		}
		if err := b.reportAggregate(ctx, c, repo, a.PR, co.head, true); err != nil {
			return "", err
		}
		return ResultSkipped, b.updateSticky(ctx, c, repo, a.PR)
	}
	lives := b.planLives(jr, a, co.head, co.names)
	for i, name := range co.names {
		p, _ := co.config.Project(name)
		if err := b.planProject(ctx, jr, c, repo, a, co, p, co.touched[name], lives[i]); err != nil {
			return "", err
		}
	}
	if err := b.reportAggregate(ctx, c, repo, a.PR, co.head, true); err != nil {
		return "", err
	}
	return ResultOK, b.updateSticky(ctx, c, repo, a.PR)
}

// supersedeOlder supersedes the plans a new plan of co replaces
// (supersedeOld), and takes the Apply button off the superseded plans of
// older heads; a plan of this head is replaced in its own check run by
// planProject.
func (b *Bot) supersedeOlder(ctx context.Context, c Client, repo github.Repo, rows []projectRow, co *checkout, names []string, one bool) error {
	if err := b.supersedeOld(ctx, rows, co, names, one); err != nil {
		return err
	}
	var older []projectRow
	for _, r := range rows {
		if r.HeadSHA != co.head {
			older = append(older, r)
		}
	}
	return b.retireButtons(ctx, c, repo, older)
}

// checkout lists the changed files, downloads the head's tarball with the
// installation token and extracts it safely into a temp dir of its own,
// then reads kl.yaml and merges its safety keys with their base (withBase,
// ADR 0040). An invalid kl.yaml, one loosening a safety key, or a base that
// cannot be used is reported as a failing "kl config" check run and leaves
// co.config nil. The caller removes the
// parent of co.root.
func (b *Bot) checkout(ctx context.Context, c Client, repo github.Repo, pr github.PullRequest) (*checkout, error) {
	co := &checkout{pr: pr, head: pr.HeadSHA}
	files, err := c.ListPullRequestFiles(ctx, repo, pr.Number)
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		co.files = append(co.files, f.Filename)
		if f.PreviousFilename != "" {
			co.files = append(co.files, f.PreviousFilename)
		}
	}
	co.partial = partialListing(len(files), pr.ChangedFiles)
	root, err := b.fetchTree(ctx, c, repo, pr.HeadSHA)
	if errors.Is(err, tarball.ErrUnsafe) {
		return co, b.reportConfig(ctx, c, repo, pr.Number, report.ConfigProblem{Title: "the repository archive was refused", HeadSHA: pr.HeadSHA, Problem: err.Error()})
	}
	if err != nil {
		return nil, err
	}
	co.root = root
	tmp := filepath.Dir(root)
	cfg, problem, err := readConfig(co.root, repo.String(), b.opts.DefaultTrigger)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	if problem != nil {
		problem.Title = "kl.yaml is invalid"
	} else {
		cfg, problem, err = b.withBase(ctx, c, repo, cfg) // the safety keys' base (ADR 0040)
	}
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	if problem != nil {
		problem.HeadSHA = pr.HeadSHA
		return co, b.reportConfig(ctx, c, repo, pr.Number, *problem)
	}
	co.config = cfg
	return co, nil
}

// fetchTree downloads the tarball of commit sha with the installation
// token and extracts it safely (b.opts.Extract; a refused archive wraps
// tarball.ErrUnsafe) into ROOT = a temp dir of its own under the work dir
// + "/repo"; the caller removes ROOT's parent.
func (b *Bot) fetchTree(ctx context.Context, c Client, repo github.Repo, sha string) (string, error) {
	tgz, err := c.DownloadTarball(ctx, repo, sha)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(b.opts.WorkDir, 0o700); err != nil {
		return "", fmt.Errorf("creating work dir: %w", err)
	}
	tmp, err := os.MkdirTemp(b.opts.WorkDir, "klbot-")
	if err != nil {
		return "", fmt.Errorf("creating checkout dir: %w", err)
	}
	root := filepath.Join(tmp, "repo")
	if err := os.Mkdir(root, 0o700); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("creating checkout dir: %w", err)
	}
	if err := tarball.Extract(tgz, root, b.opts.Extract); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("the archive of %s: %w", sha, err)
	}
	return root, nil
}

// readConfig reads kl.yaml at the repository root: absent →
// klyaml.Default; a symbolic link, a directory or more than
// klyaml.MaxBytes → a problem; invalid → every "kl.yaml:LINE: what".
func readConfig(root, repo string, trigger klyaml.Trigger) (*klyaml.Config, *report.ConfigProblem, error) {
	p := filepath.Join(root, klyaml.File)
	fi, err := os.Lstat(p)
	if errors.Is(err, os.ErrNotExist) {
		return klyaml.Default(repo, trigger), nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", klyaml.File, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, &report.ConfigProblem{Problem: klyaml.File + ": must be a regular file (not a link or a directory)"}, nil
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", klyaml.File, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, klyaml.MaxBytes+1))
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", klyaml.File, err)
	}
	if len(data) > klyaml.MaxBytes {
		return nil, &report.ConfigProblem{Problem: fmt.Sprintf("%s: larger than %d bytes", klyaml.File, klyaml.MaxBytes)}, nil
	}
	cfg, err := klyaml.Parse(data, trigger)
	var ce *klyaml.Error
	if errors.As(err, &ce) {
		return nil, &report.ConfigProblem{Problems: ce.Problems}, nil
	}
	return cfg, nil, err
}

// reportConfig fails the "kl config" check run on the head with what is
// wrong and where, and the "kl" check run with it.
func (b *Bot) reportConfig(ctx context.Context, c Client, repo github.Repo, pr int, n report.ConfigProblem) error {
	_, err := b.putCheckRun(ctx, c, repo, github.CheckRun{Name: CheckConfig, HeadSHA: n.HeadSHA, ExternalID: externalID(pr, ""),
		Conclusion: "failure", Title: n.Title, Summary: noticeMarkdown(n, report.CheckRunSummaryLimit)})
	if err != nil {
		return err
	}
	return b.putAggregate(ctx, c, repo, pr, report.PRCheck{HeadSHA: n.HeadSHA, Problem: n.Title, ProblemCheck: CheckConfig})
}

// reportFork says, in the "kl plan" check run, why a push to a pull
// request from a fork was not planned (Options.AllowForkPRs) and how to
// plan it.
func (b *Bot) reportFork(ctx context.Context, c Client, repo github.Repo, pr github.PullRequest) error {
	n := report.ForkNotPlanned{HeadSHA: pr.HeadSHA, HeadRepo: pr.HeadRepo, Repo: repo.String()}
	_, err := b.putCheckRun(ctx, c, repo, github.CheckRun{Name: CheckPlan, HeadSHA: pr.HeadSHA, ExternalID: externalID(pr.Number, ""),
		Conclusion: "neutral", Title: report.ForkNotPlannedTitle, Summary: noticeMarkdown(n, report.CheckRunSummaryLimit)})
	if err != nil {
		return err
	}
	return b.putAggregate(ctx, c, repo, pr.Number, report.PRCheck{HeadSHA: pr.HeadSHA, Problem: report.ForkNotPlannedTitle, ProblemCheck: CheckPlan})
}

// reportNoneTouched says, in the "kl plan" check run, that no project is
// touched by the changed files.
func (b *Bot) reportNoneTouched(ctx context.Context, c Client, repo github.Repo, pr int, co *checkout) error {
	n := report.NoneTouched{Files: len(co.files), HeadSHA: co.head}
	for _, p := range co.config.Projects {
		n.Projects = append(n.Projects, report.NoticeProject{Name: p.Name, Dir: p.Dir, WhenModified: p.WhenModified})
	}
	_, err := b.putCheckRun(ctx, c, repo, github.CheckRun{Name: CheckPlan, HeadSHA: co.head, ExternalID: externalID(pr, ""),
		Conclusion: "neutral", Title: report.NoneTouchedTitle, Summary: noticeMarkdown(n, report.CheckRunSummaryLimit)})
	return err
}

// supersedeOld closes the pull request's open plans that the new head (or
// the new plan of their project) replaces: a plan on an older head, or a
// plan of a project about to be planned again. A project the pull request
// no longer touches keeps its (now superseded) plan and gets a note for the
// sticky comment. explicit is true for "/kl plan -p": other projects stay.
func (b *Bot) supersedeOld(ctx context.Context, rows []projectRow, co *checkout, names []string, explicit bool) error {
	planned := map[string]bool{}
	for _, n := range names {
		planned[n] = true
	}
	for _, r := range rows {
		newHead := r.HeadSHA != co.head
		if !newHead && !planned[r.Project] {
			continue
		}
		dropped := !planned[r.Project] && !explicit
		_, kept := co.config.Project(r.Project)
		if r.PlanRun != "" && r.ApplyRun == "" {
			pr := &engine.PullRequest{Repo: r.Repo, Number: r.PR}
			var err error
			switch {
			case !dropped:
				err = b.eng.Supersede(ctx, r.PlanRun, engine.SupersededByNewerPlan, pr, co.head)
			case kept:
				err = b.eng.SupersedeDropped(ctx, r.PlanRun, engine.SupersededByUntouched, pr, co.head, r.Project)
			default:
				err = b.eng.SupersedeDropped(ctx, r.PlanRun, engine.SupersededByRemoved, pr, co.head, r.Project)
			}
			if err != nil && !notOpen(err) {
				return err
			}
		}
		if !dropped {
			continue
		}
		if r.Note.Kind != noteSuperseded { // else dropped by an earlier push: its words stand
			r.Note = note{Kind: noteSuperseded, Text: report.PlanSuperseded{Project: r.Project, HeadSHA: co.head, PlanRun: r.PlanRun,
				PlanSHA: r.HeadSHA, Gone: !kept}.Note()}
		}
		r.HeadSHA = co.head
		if err := b.db.saveProject(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// notOpen reports whether closing a plan failed only because it is no
// longer open (engine.Supersede: ErrConflict, "plan run X is superseded,
// not open"; a *StatusError): superseded by an earlier attempt of the
// same job that failed later, closed by a later push, or applied. Closing
// it again is not needed, so supersede-then-plan can run again.
func notOpen(err error) bool {
	var se *engine.StatusError
	return errors.As(err, &se) || errors.Is(err, engine.ErrConflict)
}

// planProject plans one project and reports it in "kl plan · PROJECT".
//
// lc is its in-progress check run: shown planning while Terraform runs,
// completed by the report.
func (b *Bot) planProject(ctx context.Context, jr *jobRun, c Client, repo github.Repo, a PlanArgs, co *checkout, p klyaml.Project, files []string, lc *liveCheck) error {
	log := logOf(ctx).With("project", p.Name, "state", p.State)
	row := projectRow{Repo: a.Repo, PR: a.PR, Project: p.Name, State: p.State, Installation: a.Installation,
		HeadSHA: co.head, Config: p, Open: true}
	check := github.CheckRun{Name: PlanCheckName(p.Name), HeadSHA: co.head, ExternalID: externalID(a.PR, p.Name)}
	if _, err := b.eng.State(ctx, p.State); errors.Is(err, engine.ErrNotFound) {
		n := report.MissingState{State: p.State, Project: p.Name}
		check.Conclusion, check.Title, check.Summary = "failure", n.Title(), noticeMarkdown(n, 0)
		row.Note = note{Kind: noteRefused, Text: n.Note()}
		b.metrics.run("plan", outcomeRefused)
		if _, err := b.putCheckRun(ctx, c, repo, check); err != nil {
			return err
		}
		return b.db.saveProject(ctx, row)
	} else if err != nil {
		return err
	}
	actor := a.Actor
	if actor == "" {
		actor = co.pr.Author
	}
	if err := jr.show(ctx, c, repo, lc, func(n *report.InProgress) { n.Phase, n.Behind = report.LivePlanning, nil }); err != nil {
		return err
	}
	in := engine.PlanInput{
		State: p.State, Dir: filepath.Join(co.root, filepath.FromSlash(p.Dir)), ScopeDir: p.Dir, Actor: actor,
		PR:        &engine.PullRequest{Repo: a.Repo, Number: a.PR, HeadSHA: co.head, URL: co.pr.HTMLURL},
		CommitSHA: co.head, ChangedFiles: files, Options: a.Options,
	}
	if err := b.laneInput(ctx, c, repo, co, p, &in); err != nil { // kl.yaml lane: (ADR 0070)
		return err
	}
	out, err := b.eng.Plan(ctx, in)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, engine.ErrReadOnly) {
			// Shutting down, timed out, or locked out of the store by a
			// newer klbot (ADR 0048): River retries, on another replica.
			return err
		}
		log.Warn("plan failed", "err", err)
		b.metrics.run("plan", outcomeFailed)
		n := report.PlanFailed{Project: p.Name, State: p.State, Error: err.Error(), CheckRun: PlanCheckName(p.Name)}
		check.Conclusion, check.Title = "failure", n.Title()
		check.Summary = noticeMarkdown(n, report.CheckRunSummaryLimit)
		row.Note = note{Kind: noteFailed, Text: n.Note()}
		if _, err := b.putCheckRun(ctx, c, repo, check); err != nil {
			return err
		}
		return b.db.saveProject(ctx, row)
	}
	b.metrics.run("plan", outcomePlanned)
	out.Overlaps = b.openOverlaps(ctx, out.Overlaps) // not with the plan of a pull request closed meanwhile (ADR 0042)
	row.PlanRun = out.Run.ID
	// Recorded before it is reported: if reporting fails, the job's retry
	// supersedes this plan (supersedeOld) instead of leaving it open and
	// named by nothing.
	if err := b.db.saveProject(context.WithoutCancel(ctx), row); err != nil {
		return err
	}
	out.Run = b.recordBranch(ctx, c, repo, co.pr, out.Run) // is what it would undo deliberate? (ADR 0046)
	if err := b.putPlanCheck(ctx, c, repo, a, p, check, out); err != nil {
		return err
	}
	return b.db.saveProject(ctx, row)
}

// putPlanCheck completes check, project p's "kl plan · PROJECT" check run,
// with plan out: the view and the diff's summary and destructive changes
// in the summary, the per-resource blocks in the text (ADR 0044), the
// title, the conclusion, the Apply button, and on_revert (ADR 0046).
func (b *Bot) putPlanCheck(ctx context.Context, c Client, repo github.Repo, a PlanArgs, p klyaml.Project, check github.CheckRun, out *engine.PlanOutcome) error {
	cm := commandsOf(a.Repo, a.PR, p.Name)
	cm.RevertFail = p.OnRevert == klyaml.RevertFail // ADR 0046
	gp, err := report.NewGitHubPlan(out, report.PlanHeader(out, applying(p.Name, p)), report.Options{Commands: cm})
	if err != nil {
		return err
	}
	check.Summary, check.Text = gp.CheckRun()
	check.Title, check.Conclusion = report.PlanTitle(out), "success"
	if len(out.Overlaps) > 0 {
		check.Conclusion = "neutral"
	}
	if len(out.Fences) > 0 {
		check.Conclusion = "action_required" // a crashed apply's fence must be lifted first (ADR 0035)
	}
	if p.ApplyTrigger == klyaml.TriggerComment && out.Run.Envelope != nil && !out.Run.Envelope.Summary.Empty() && len(out.Fences) == 0 {
		check.Actions = []github.CheckRunAction{{Label: report.ApplyButtonLabel, Description: report.ApplyButtonDescription, Identifier: ApplyActionID}}
	}
	onRevert(&check, out, p) // on_revert (ADR 0046)
	check.DetailsURL = b.runLink(out.Run.ID)
	_, err = b.putCheckRun(ctx, c, repo, check)
	return err
}

// applying is how project p's plan gets applied, for report.
func applying(project string, p klyaml.Project) report.Applying {
	a := report.Applying{Project: project, OnMerge: p.ApplyTrigger == klyaml.TriggerMerge, PlanCheck: PlanCheckName(project),
		RevertFail: p.OnRevert == klyaml.RevertFail}
	for _, r := range p.ApplyRequirements {
		a.Requirements = append(a.Requirements, string(r))
	}
	return a
}
