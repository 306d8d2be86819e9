package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/klyaml"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/tarball"
	"github.com/kilolock/kilolock/internal/webhook"
)

// Client is what the bot needs of GitHub for one installation. The github
// adapter's *github.Client implements it (tests use that adapter against
// githubfake; the interface lets them swap it).
type Client interface {
	CreateCheckRun(ctx context.Context, repo github.Repo, run github.CheckRun) (github.CheckRunInfo, error)
	UpdateCheckRun(ctx context.Context, repo github.Repo, id int64, run github.CheckRun) (github.CheckRunInfo, error)
	FindCheckRun(ctx context.Context, repo github.Repo, sha, name string) (github.CheckRunInfo, bool, error)
	RemoveCheckRunActions(ctx context.Context, repo github.Repo, id int64, name string) error
	UpsertStickyComment(ctx context.Context, repo github.Repo, pr int, key, body string) (github.StickyComment, error)
	AddReaction(ctx context.Context, repo github.Repo, commentID int64, content string) error
	GetPermission(ctx context.Context, repo github.Repo, user string) (github.Permission, error)
	GetPullRequest(ctx context.Context, repo github.Repo, number int) (github.PullRequest, error)
	ListPullRequestFiles(ctx context.Context, repo github.Repo, number int) ([]github.PullRequestFile, error)
	ListReviews(ctx context.Context, repo github.Repo, number int) (github.Reviews, error)
	DownloadTarball(ctx context.Context, repo github.Repo, ref string) ([]byte, error)
	GetFile(ctx context.Context, repo github.Repo, path, ref string, max int64) (github.File, error)
	Compare(ctx context.Context, repo github.Repo, base, head string) (github.Comparison, error)
	GetCommit(ctx context.Context, repo github.Repo, ref string) (github.Commit, error)
	ListCommitPulls(ctx context.Context, repo github.Repo, sha string) ([]github.CommitPull, error)
}

// Installations hands out the Client of an installation (a GitHub App's
// github.App.Installation, wrapped).
type Installations func(installationID int64) (Client, error)

// Options configure a Bot.
type Options struct {
	// ApplyWait bounds how long an apply waits for other runs' reservations
	// (engine.ApplyInput.Wait; KLBOT_APPLY_WAIT). 0 fails at once.
	ApplyWait time.Duration
	// DefaultTrigger is the apply trigger of a repository without kl.yaml
	// and of projects that set none (KLBOT_APPLY_TRIGGER; default comment).
	DefaultTrigger klyaml.Trigger
	// RepoConfig is the server-side repository configuration
	// (KLBOT_REPO_CONFIG; nil: none): for a repository it has entries for,
	// the base of the safety keys instead of the default branch's kl.yaml
	// (ADR 0040).
	RepoConfig *klyaml.ServerConfig
	// Retention is the gc job's retention (KLBOT_RETENTION;
	// engine.ParseRetention, engine.GCRequest.Retention): 0 keeps closed
	// plans' artifacts forever.
	Retention time.Duration
	// WorkDir is where per-job repository checkouts are made (KLBOT_WORKDIR;
	// default the OS temp dir). They hold the repository: removed after each job.
	WorkDir string
	// PublicURL is klbot's public base URL (KLBOT_PUBLIC_URL), under which
	// it serves the run pages (internal/web, ADR 0064).
	PublicURL string
	// RunLink, when set, returns the signed link of a run's page under
	// PublicURL (web.Signer.URL): the details URL of the plan and apply
	// check runs, signed anew each time klbot writes one. nil (no
	// KLBOT_PUBLIC_URL or no KLBOT_LINK_KEY): check runs get no details
	// URL, since a page that asks a reviewer for a token is not one
	// klbot should send them to unannounced.
	RunLink func(runID string) string
	// TimelineLink, when set, returns the signed link of a state's
	// timeline page under PublicURL (web.Signer.TimelineURL): the sticky
	// comment links each of its states' timelines, signed anew each time
	// klbot writes it. nil: no link.
	TimelineLink func(state string) string
	// Extract caps repository tarballs.
	Extract tarball.Limits
	// PlanTimeout and ApplyTimeout bound one job (defaults 30m and
	// ApplyWait + 2h).
	PlanTimeout, ApplyTimeout time.Duration
	// AllowForkPRs plans pull requests from forks on push
	// (KLBOT_ALLOW_FORK_PRS; default false, as Atlantis's --allow-fork-prs).
	// A plan runs the pull request's Terraform code with klbot's cloud
	// credentials, and anyone can open a pull request from a fork; without
	// it, a fork's push gets a neutral "kl plan" check run instead, and a
	// user with write permission plans it with "/kl plan" once they have
	// read the code.
	AllowForkPRs bool
	// RefusalReplyWindow is how long a refusal about the commenter (no
	// write permission, a command that does not parse) gets a reaction
	// only, after klbot replied to that user on that pull request about
	// one (default DefaultRefusalReplyWindow; issue 11 §1).
	RefusalReplyWindow time.Duration
}

// DefaultRefusalReplyWindow is Options.RefusalReplyWindow's default.
const DefaultRefusalReplyWindow = time.Hour

// Bot is klbot: the webhook Sink and the River workers of its jobs (plan
// on push, apply, command replies, refresh), over the engine, the GitHub
// adapter and klbot's tables on the shared PostgreSQL pool.
type Bot struct {
	eng     *engine.Engine
	gh      Installations
	db      db
	river   *river.Client[pgx.Tx]
	log     *slog.Logger
	opts    Options
	metrics *Metrics
}

// runLink is the details URL of run id's check runs: Options.RunLink's
// signed page link, or "" without one.
func (b *Bot) runLink(id string) string {
	if b.opts.RunLink == nil || id == "" {
		return ""
	}
	return b.opts.RunLink(id)
}

// New returns a Bot. pool is the PostgreSQL pool of klbot's tables and of
// River (the same pool: Sink.Accept inserts the delivery and its jobs in
// one transaction). Attach the River client with SetRiver before Accept is
// called; register the workers with AddWorkers before creating that client.
func New(eng *engine.Engine, gh Installations, pool *pgxpool.Pool, log *slog.Logger, metrics *Metrics, opts Options) *Bot {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.DefaultTrigger == "" {
		opts.DefaultTrigger = klyaml.TriggerComment
	}
	if opts.WorkDir == "" {
		opts.WorkDir = os.TempDir()
	}
	if opts.PlanTimeout <= 0 {
		opts.PlanTimeout = 30 * time.Minute
	}
	if opts.ApplyTimeout <= 0 {
		opts.ApplyTimeout = opts.ApplyWait + 2*time.Hour
	}
	if opts.RefusalReplyWindow <= 0 {
		opts.RefusalReplyWindow = DefaultRefusalReplyWindow
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	return &Bot{eng: eng, gh: gh, db: db{pool: pool}, log: log, opts: opts, metrics: metrics}
}

// SetRiver attaches the River client jobs are inserted with.
func (b *Bot) SetRiver(c *river.Client[pgx.Tx]) { b.river = c }

// AddWorkers registers the bot's workers (one per job kind): plans and
// applies bounded by Options.PlanTimeout and ApplyTimeout, replies,
// refreshes and merge groups by 5 minutes.
func (b *Bot) AddWorkers(w *river.Workers) {
	river.AddWorker(w, &worker[PlanArgs]{b: b, timeout: b.opts.PlanTimeout, work: b.plan})
	river.AddWorker(w, &worker[ApplyArgs]{b: b, timeout: b.opts.ApplyTimeout, work: b.apply})
	river.AddWorker(w, &worker[ReplyArgs]{b: b, timeout: 5 * time.Minute, work: b.answer})
	river.AddWorker(w, &worker[RefreshArgs]{b: b, timeout: 5 * time.Minute, work: b.refresh})
	river.AddWorker(w, &worker[QueueArgs]{b: b, timeout: 5 * time.Minute, work: b.judgeGroup})
}

// jobArgs are the args of the bot's jobs: each embeds JobBase.
type jobArgs interface {
	river.JobArgs
	base() JobBase
}

// base returns the request keys every job carries (jobArgs).
func (j JobBase) base() JobBase { return j }

// worker runs one kind of job through runJob (the job's attempt state and
// locks, the logger, metrics), bounded by timeout; work returns the job's
// result.
type worker[T jobArgs] struct {
	river.WorkerDefaults[T]
	b       *Bot
	timeout time.Duration
	work    func(ctx context.Context, jr *jobRun, args T) (JobResult, error)
}

// Timeout bounds one run of the job.
func (w *worker[T]) Timeout(*river.Job[T]) time.Duration { return w.timeout }

// Work runs the job.
func (w *worker[T]) Work(ctx context.Context, job *river.Job[T]) error {
	at := attempts{job.Attempt, job.MaxAttempts}
	return w.b.runJob(ctx, job.JobRow, job.Args.base(), at, func(ctx context.Context, jr *jobRun) (JobResult, error) {
		return w.work(ctx, jr, job.Args)
	})
}

// lockedOutSnooze is how long a replica that may not write to the store
// (a newer klbot raised its compatibility level, ADR 0048) puts a job back
// before it, or another replica, takes it again.
const lockedOutSnooze = 5 * time.Second

// MaxAttempts is how often a job runs before River discards it (a job
// failing for a transient reason is retried with River's backoff; a
// refusal is not a failure).
const MaxAttempts = 8

// JobBase is what every job carries: the request keys of the delivery that
// caused it (docs/style.md 11) and where to report. It is exported because River
// reads the river:"unique" tags of embedded structs only when exported.
type JobBase struct {
	Delivery     string `json:"delivery"`
	Event        string `json:"event"`
	Installation int64  `json:"installation"`
	Repo         string `json:"repo" river:"unique"`
	PR           int    `json:"pr" river:"unique"`
	Actor        string `json:"actor,omitempty"`
	CommentID    int64  `json:"comment_id,omitempty"`
}

// jobContext returns ctx carrying the job's logger with the request keys
// of the delivery that caused it (docs/style.md 9, 11): jobs run on River's own
// context, never on the webhook request's.
func (b *Bot) jobContext(ctx context.Context, j JobBase, kind string, attempt int) context.Context {
	return webhook.NewContext(ctx, b.log.With("job", kind, "attempt", attempt),
		webhook.Delivery{ID: j.Delivery, Event: j.Event, Installation: j.Installation, Repo: j.Repo, PR: j.PR})
}

// logOf is the job's logger.
func logOf(ctx context.Context) *slog.Logger { return webhook.LoggerFrom(ctx) }

// client returns the GitHub client and parsed repository of a job.
func (b *Bot) client(j JobBase) (Client, github.Repo, error) {
	repo, err := github.ParseRepo(j.Repo)
	if err != nil {
		return nil, github.Repo{}, err
	}
	c, err := b.gh(j.Installation)
	if err != nil {
		return nil, github.Repo{}, fmt.Errorf("GitHub client for installation %d: %w", j.Installation, err)
	}
	return c, repo, nil
}

// pullRequest goes on with a job on a pull request, once the commenter
// may ask for it: 👀 on the command comment (if any), and the pull request
// as GitHub has it now.
func (b *Bot) pullRequest(ctx context.Context, c Client, repo github.Repo, j JobBase) (github.PullRequest, error) {
	if err := b.acknowledge(ctx, c, repo, j.CommentID); err != nil {
		return github.PullRequest{}, err
	}
	return c.GetPullRequest(ctx, repo, j.PR)
}

// attempts is which run of a job this is (River's attempt, from 1) of how
// many River allows (its max attempts).
type attempts struct{ n, max int }

// failed is the log message of a failed attempt: River retries the job,
// or — on the last attempt — discards it (River: a job that errors on its
// last attempt is discarded, never run again).
func (a attempts) failed() string {
	if a.max > 0 && a.n >= a.max {
		return fmt.Sprintf("job failed on its last attempt (%d of %d): River discards it, nothing retries it", a.n, a.max)
	}
	return "job failed; River retries it"
}

// lockedOut reports whether a newer klbot raised the store's compatibility
// level above this replica's (ADR 0048): it must not write to the store,
// so its jobs wait for a replica that may (logged as an error: the
// operator stops this replica). A failure to read the level is left to
// the job's own work.
func (b *Bot) lockedOut(ctx context.Context) bool {
	err := postgres.CheckWritable(ctx, b.db.pool)
	if !errors.Is(err, engine.ErrReadOnly) {
		return false
	}
	logOf(ctx).Error("job handed back: this replica may not write to the store; stop it, newer replicas do the jobs", "err", err, "again_in", lockedOutSnooze)
	return true
}

// runJob wraps a job's work: its attempt (state kept across attempts in
// River's metadata, the advisory locks it takes by try-lock), the logger,
// metrics. Work that must wait — for another job of the pull request or
// for reservations (queuedError) — snoozes the job (River's JobSnooze:
// no worker is held, and in River 0.51 a snooze does not count against
// MaxAttempts, ADR 0041), and so does every job of a replica locked out
// of the store (lockedOut). An error retrying cannot cure (finalReason)
// cancels the job; a failure of the last attempt says the job is
// discarded; both complete the check runs it left in progress.
func (b *Bot) runJob(ctx context.Context, row *rivertype.JobRow, j JobBase, at attempts, work func(ctx context.Context, jr *jobRun) (JobResult, error)) error {
	kind := row.Kind
	ctx = b.jobContext(ctx, j, kind, at.n)
	log := logOf(ctx)
	start := time.Now()
	if b.lockedOut(ctx) {
		b.metrics.job(kind, ResultSnoozed, time.Since(start))
		return river.JobSnooze(lockedOutSnooze)
	}
	ctx, jr, err := b.newJobRun(ctx, row.ID, kind, j, row.Metadata)
	if err != nil {
		b.metrics.job(kind, ResultError, time.Since(start))
		return err
	}
	defer jr.end()
	result, err := work(ctx, jr)
	var q *queuedError
	if errors.As(err, &q) {
		d := jr.snoozeFor()
		log.Info("job snoozed: "+q.why, "again_in", d, "snoozes", jr.snoozes+1)
		b.metrics.job(kind, ResultSnoozed, time.Since(start))
		return river.JobSnooze(d)
	}
	why := finalReason(err)
	last := err != nil && at.max > 0 && at.n >= at.max
	if why != "" || last {
		if c, repo, cerr := b.client(j); cerr == nil {
			jr.abandon(ctx, c, repo, err)
		}
	}
	if why != "" {
		log.Warn("job cancelled, not retried: "+why, "err", err)
		b.metrics.job(kind, ResultCancelled, time.Since(start))
		return river.JobCancel(err)
	}
	if err != nil && errors.Is(context.Cause(ctx), ErrShutdown) {
		// Not a failure: this replica stops, and River hands the job to
		// another (ADR 0043).
		log.Info("job interrupted by the shutdown: River hands it back", "err", err)
		b.metrics.job(kind, ResultError, time.Since(start))
		return err
	}
	if err != nil {
		log.Error(at.failed(), "err", err)
		b.metrics.job(kind, ResultError, time.Since(start))
		return err
	}
	if result == "" {
		result = ResultOK
	}
	if c, repo, cerr := b.client(j); cerr == nil {
		jr.abandon(ctx, c, repo, nil) // check runs shown while queued for what no longer applies
	}
	log.Info("job done", "result", result, "took", time.Since(jr.st.Started).Round(time.Millisecond))
	b.metrics.job(kind, result, time.Since(start))
	return nil
}
