package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/kilolock/kilolock/internal/api"
	"github.com/kilolock/kilolock/internal/bot"
	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/klyaml"
	"github.com/kilolock/kilolock/internal/report"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/terraform"
	"github.com/kilolock/kilolock/internal/version"
	"github.com/kilolock/kilolock/internal/web"
	"github.com/kilolock/kilolock/internal/webhook"
)

// run is klbot: it reads the environment, migrates the database (Kilolock's
// goose migrations, then River's), starts the River workers and serves
// POST /webhook, /healthz, /readyz and /metrics on KLBOT_LISTEN until ctx
// ends; then it stops accepting webhooks and jobs and ends within
// KLBOT_SHUTDOWN_TIMEOUT (bot.Shutdown, ADR 0043). It only wires; the work
// is internal/bot's.
func run(ctx context.Context, args []string, env []string) error {
	if len(args) > 1 {
		return fmt.Errorf("klbot takes no arguments (got %q): it is configured through KLBOT_* variables, see docs/klbot.md (klbot version prints its version)", strings.Join(args[1:], " "))
	}
	version.Stamp() // the version a store names (ADR 0048)
	cfg, key, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	log := newLogger(cfg.LogLevel)
	app, err := github.NewApp(cfg.AppID, key, github.Options{BaseURL: cfg.GitHubURL, Logger: log, Truncate: report.Truncate})
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.keyVar(), err)
	}
	workDir := cfg.WorkDir
	if workDir == "" {
		workDir = filepath.Join(os.TempDir(), "klbot")
	}
	tfEnv, withheld, unset := terraformEnv(env, cfg.tfVars)
	if len(withheld) > 0 {
		log.Warn("TF_VAR_* variables not passed to terraform: KLBOT_TF_VARS does not list them", "variables", withheld)
	}
	if len(unset) > 0 {
		log.Warn("KLBOT_TF_VARS lists variables that are not set", "variables", unset)
	}
	shutdown := bot.PlanShutdown(cfg.ShutdownTimeout)
	runner, tfBin, err := newRunner(ctx, cfg, tfEnv, filepath.Join(workDir, "runs"), shutdown.Interrupt, log)
	if err != nil {
		return err
	}
	store, err := postgres.Open(ctx, cfg.DatabaseURL, postgres.WithApplicationName("klbot"), postgres.WithKeyring(cfg.keys))
	if err != nil {
		return fmt.Errorf("KLBOT_DATABASE_URL: %w", err)
	}
	defer closeWithin(shutdown.Close/2, func() { store.Close() })
	// klbot only works if it may write: a store whose level a newer
	// binary raised (ADR 0048) is refused at start, naming both versions.
	if _, err := store.Access(ctx); err != nil {
		return fmt.Errorf("KLBOT_DATABASE_URL: %w", err)
	}
	pool, err := openPool(ctx, cfg.DatabaseURL, cfg.Workers)
	if err != nil {
		return err
	}
	defer closeWithin(shutdown.Close/2, pool.Close)
	if err := bot.MigrateRiver(ctx, pool); err != nil {
		return err
	}

	eng := engine.New(store, runner, log)
	eng.Lease = cfg.Lease
	eng.BackendLockTTL = cfg.BackendLockTTL
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	stopper := bot.NewStopper()
	b, rc, err := newBot(cfg, eng, app, pool, filepath.Join(workDir, "checkouts"), log, reg, stopper)
	if err != nil {
		return err
	}
	hook, err := newWebhookHandler(cfg, b, log, reg)
	if err != nil {
		return err
	}
	apiHandler, err := newAPI(cfg, eng, store, log)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: routes(hook, apiHandler, pool, reg), ReadHeaderTimeout: 10 * time.Second}
	stopSweep := b.StartWorkDirSweep(ctx, cfg.ReconcileInterval) // what crashed runs left here (ADR 0042)
	defer stopSweep()
	return serve(ctx, cfg, srv, rc, stopper, log, tfBin)
}

// newAPI is the HTTP API (ADR 0054) and Terraform's http backend (ADR
// 0056, 0059) on klbot's listener: the same handler as kl serve's, over
// the same store and engine (tokens come from kl token create with
// KL_STORE set to KLBOT_DATABASE_URL), with the run and state pages and
// the JSON views (internal/web, ADR 0064): tokens, or the links klbot
// signs.
func newAPI(cfg config, eng *engine.Engine, store *postgres.Store, log *slog.Logger) (*api.Server, error) {
	pages, err := web.New(web.Options{Views: eng, Auth: &api.TokenAuth{Tokens: store}, Links: cfg.links})
	if err != nil {
		return nil, err
	}
	return api.New(api.Options{Tokens: store, Backend: eng, Web: pages, Logger: log.With("component", "api"), MaxBody: int64(cfg.MaxBodyMiB) << 20})
}

// newWebhookHandler is the webhook endpoint for the bot: it verifies
// deliveries with KLBOT_WEBHOOK_SECRET and, during a rotation, with
// KLBOT_WEBHOOK_SECRET_PREVIOUS too, which it logs at start.
func newWebhookHandler(cfg config, sink webhook.Sink, log *slog.Logger, reg prometheus.Registerer) (*webhook.Handler, error) {
	hc := webhook.HandlerConfig{Secret: []byte(cfg.WebhookSecret), Sink: sink, Logger: log, Metrics: reg}
	if cfg.WebhookSecretPrevious != "" {
		hc.PreviousSecret = []byte(cfg.WebhookSecretPrevious)
		log.Info("webhook secret rotation: deliveries signed with KLBOT_WEBHOOK_SECRET_PREVIOUS are accepted too; "+
			"unset it once klbot_webhook_signature_verified_total{secret=\"previous\"} stops growing on every replica",
			"variable", "KLBOT_WEBHOOK_SECRET_PREVIOUS")
	}
	hook, err := webhook.NewHandler(hc)
	if err != nil {
		return nil, fmt.Errorf("KLBOT_WEBHOOK_SECRET: %w", err)
	}
	return hook, nil
}

// pluginCacheOff is the KLBOT_PLUGIN_CACHE_DIR that disables the plugin
// cache.
const pluginCacheOff = "off"

// newRunner finds the Terraform binary (KLBOT_TERRAFORM, else terraform or
// tofu on PATH), checks that it is Terraform or OpenTofu, and returns a
// Runner working under workRoot that kills a Terraform still running
// interrupt after interrupting it (bot.ShutdownPlan.Interrupt), with the
// binary's path. Its plugin cache is KLBOT_PLUGIN_CACHE_DIR, default
// plugins/ beside workRoot (KLBOT_WORKDIR/plugins), none when "off".
func newRunner(ctx context.Context, cfg config, env []string, workRoot string, interrupt time.Duration, log *slog.Logger) (*terraform.Runner, string, error) {
	tfBin, err := terraform.FindBinaryNamed("KLBOT_TERRAFORM", func(k string) string {
		if k == "KLBOT_TERRAFORM" {
			return cfg.Terraform
		}
		return lookup(env, k)
	})
	if err != nil {
		return nil, "", err
	}
	if err := terraform.CheckVersion(ctx, tfBin, env); err != nil {
		return nil, "", fmt.Errorf("KLBOT_TERRAFORM=%s is not Terraform or OpenTofu: %w", tfBin, err)
	}
	plugins := cfg.PluginCacheDir
	switch plugins {
	case "":
		plugins = filepath.Join(filepath.Dir(workRoot), "plugins")
	case pluginCacheOff:
		plugins = ""
	}
	runner, err := terraform.NewRunner(terraform.RunnerOptions{WorkRoot: workRoot, Binary: tfBin, Env: env, Logger: log, InterruptGrace: interrupt,
		PluginCacheDir: plugins})
	if err != nil {
		return nil, "", fmt.Errorf("KLBOT_WORKDIR or KLBOT_PLUGIN_CACHE_DIR: %w", err)
	}
	return runner, tfBin, nil
}

// runLink is the signed link of a run's page under KLBOT_PUBLIC_URL
// (bot.Options.RunLink), or nil without a public URL or a signing key.
func runLink(cfg config) func(string) string {
	if cfg.PublicURL == "" || cfg.links == nil {
		return nil
	}
	return func(id string) string { return cfg.links.URL(cfg.PublicURL, web.KindRun, id) }
}

// timelineLink is the signed link of a state's timeline under
// KLBOT_PUBLIC_URL (bot.Options.TimelineLink), or nil without a public URL
// or a signing key.
func timelineLink(cfg config) func(string) string {
	if cfg.PublicURL == "" || cfg.links == nil {
		return nil
	}
	return func(state string) string { return cfg.links.TimelineURL(cfg.PublicURL, state) }
}

// newBot returns the bot, with its River workers registered on a River
// client of pool (not started) that runs at most cfg.Workers jobs at once,
// each through stopper (the shutdown's interrupts); pull requests are
// checked out below checkouts.
func newBot(cfg config, eng *engine.Engine, app *github.App, pool *pgxpool.Pool, checkouts string, log *slog.Logger, reg *prometheus.Registry,
	stopper *bot.Stopper) (*bot.Bot, *river.Client[pgx.Tx], error) {
	b := bot.New(eng, func(id int64) (bot.Client, error) {
		c, err := app.Installation(id)
		if err != nil {
			return nil, err
		}
		return c, nil
	}, pool, log, bot.NewMetrics(reg), bot.Options{
		ApplyWait: cfg.ApplyWait, DefaultTrigger: klyaml.Trigger(cfg.ApplyTrigger), WorkDir: checkouts, PublicURL: cfg.PublicURL,
		RunLink: runLink(cfg), TimelineLink: timelineLink(cfg), AllowForkPRs: cfg.AllowForkPRs, RepoConfig: cfg.repoConfig, Retention: cfg.retention,
	})
	workers := river.NewWorkers()
	b.AddWorkers(workers)
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cfg.Workers}},
		Workers:              workers,
		Logger:               log.With("component", "river"),
		MaxAttempts:          bot.MaxAttempts,
		JobTimeout:           -1, // each worker sets its own Timeout
		RescueStuckJobsAfter: cfg.ApplyWait + 4*time.Hour,
		Middleware:           []rivertype.Middleware{stopper},
		PeriodicJobs:         append(b.AddReconcile(workers, cfg.ReconcileInterval), b.AddGC(workers, cfg.GCInterval)...), // ADR 0042, ADR 0063
	})
	if err != nil {
		return nil, nil, fmt.Errorf("creating the job queue: %w", err)
	}
	b.SetRiver(rc)
	return b, rc, nil
}

// serve listens on KLBOT_LISTEN, starts the job queue rc and serves srv
// until ctx ends or serving fails; then, within KLBOT_SHUTDOWN_TIMEOUT, it
// shuts srv down and stops the queue (stopQueue). tfBin is logged.
func serve(ctx context.Context, cfg config, srv *http.Server, rc *river.Client[pgx.Tx], stopper *bot.Stopper, log *slog.Logger, tfBin string) error {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("KLBOT_LISTEN: %w", err)
	}
	if err := rc.Start(context.WithoutCancel(ctx)); err != nil {
		ln.Close()
		return fmt.Errorf("starting the job queue: %w", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("klbot listening", "addr", ln.Addr().String(), "workers", cfg.Workers, "github", cfg.GitHubURL, "terraform", tfBin)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	start := time.Now()
	plan := bot.PlanShutdown(cfg.ShutdownTimeout)
	log.Info("klbot stopping: no new webhooks or jobs; interrupting plans now, applies if still running in "+plan.Finish.String(), "timeout", cfg.ShutdownTimeout)
	sctx, cancel := context.WithDeadline(context.Background(), start.Add(min(10*time.Second, plan.Timeout-plan.Close)))
	defer cancel()
	closed := make(chan struct{})
	go func() { _ = srv.Shutdown(sctx); close(closed) }()
	if err := stopQueue(start, rc, stopper, plan, log); err != nil && serveErr == nil {
		serveErr = err
	}
	<-closed
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

// stopQueue stops the job queue rc within plan from start (SIGTERM):
// plans and the other jobs are interrupted at once, applies once
// plan.Finish is over, their Terraform killed plan.Interrupt later
// (bot.Shutdown, ADR 0043).
func stopQueue(start time.Time, rc *river.Client[pgx.Tx], stopper *bot.Stopper, plan bot.ShutdownPlan, log *slog.Logger) error {
	err := bot.Shutdown(start, rc, stopper, plan, log)
	if err != nil {
		log.Error("klbot stopped with jobs still running", "err", err)
	}
	return err
}

// closeWithin calls close and waits for it at most d: a pool whose
// connections a job still holds (a shutdown that ran out of time) would
// block until that job returns.
func closeWithin(d time.Duration, close func()) {
	done := make(chan struct{}, 1)
	go func() { close(); done <- struct{}{} }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// routes serves the webhook, the probes, the metrics and, under /api/,
// /tf/, /runs/ and /states, the HTTP API with its pages (api.Server: kl
// serve's routes, ADR 0054, 0064).
func routes(hook, apiHandler http.Handler, pool *pgxpool.Pool, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /webhook", hook)
	mux.Handle("/api/", apiHandler)
	mux.Handle("/tf/", apiHandler)
	mux.Handle("/runs/", apiHandler)
	mux.Handle("/states", apiHandler)
	mux.Handle("/states/", apiHandler)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := bot.Ready(ctx, pool); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready: " + err.Error() + "\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}

// openPool opens the pool of klbot's tables and River: a connection per
// worker for the job and one for its pull-request lock, plus River's own.
func openPool(ctx context.Context, dsn string, workers int) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("KLBOT_DATABASE_URL: %w", err)
	}
	if pc.ConnConfig.RuntimeParams["application_name"] == "" {
		pc.ConnConfig.RuntimeParams["application_name"] = "klbot"
	}
	if want := int32(2*workers + 6); pc.MaxConns < want {
		pc.MaxConns = want
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("KLBOT_DATABASE_URL: %w", err)
	}
	return pool, nil
}

// logOutput is where klbot's JSON logs go (tests keep them).
var logOutput io.Writer = os.Stderr

func newLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(logOutput, &slog.HandlerOptions{Level: l}))
}

func lookup(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}
