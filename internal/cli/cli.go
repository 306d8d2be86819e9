// Package cli is the `kl` command line: it parses arguments and the
// environment, opens the store and the Terraform runner, calls the engine,
// and renders its answers with internal/report. cmd/kl only wires it to the
// process (signals, exit code).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/sethvargo/go-envconfig"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/store/sqlite"
	"github.com/kilolock/kilolock/internal/terraform"
)

// Version is kl's version, set at build time with
// -ldflags "-X github.com/kilolock/kilolock/internal/cli.Version=…".
var Version = "dev"

// Config is kl's environment configuration (read with go-envconfig).
type Config struct {
	// Store is the store location: a SQLite file path (default .kl/kl.db),
	// or a postgres:// URL. The --store flag overrides it.
	Store string `env:"KL_STORE"`
	// Actor names who runs kl in run records (default: the OS user).
	Actor string `env:"KL_ACTOR"`
	// Terraform is the terraform/tofu binary (default: terraform, then tofu on PATH).
	Terraform string `env:"KL_TERRAFORM"`
	// Lease is the reservation lease; the holder renews every third of it.
	Lease time.Duration `env:"KL_LEASE, default=2m"`
	// WorkDir is where per-run work dirs are made (default: runs/ next to
	// the SQLite file, or the OS temp dir for PostgreSQL).
	WorkDir string `env:"KL_WORKDIR"`
	// KeepWorkDirs keeps per-run work dirs for debugging (they hold secrets).
	KeepWorkDirs bool `env:"KL_KEEP_WORKDIRS"`
	// NoColor disables colour even on a terminal (https://no-color.org).
	NoColor bool `env:"NO_COLOR"`
	// LogLevel is debug, info, warn or error (default warn), logged to stderr.
	LogLevel string `env:"KL_LOG_LEVEL, default=warn"`
}

// ExitError carries a process exit code chosen by a command: 1 for errors,
// 3 for a refusal (stale plan, reservation conflict, intent changed).
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// IO is the program's standard streams.
type IO struct {
	In       io.Reader
	Out, Err io.Writer
}

// app is one invocation's state, shared by the commands.
type app struct {
	ctx     context.Context
	env     []string
	cfg     Config
	io      IO
	store   string
	jsonOut bool
	eng     *engine.Engine
	closers []func() error
}

// Run runs kl with args (without the program name) and environment env
// ("KEY=value" pairs). It returns nil on success, an *ExitError for a
// refusal, or another error for failures.
func Run(ctx context.Context, args, env []string, streams IO) error {
	a := &app{ctx: ctx, env: env, io: streams}
	defer a.close()
	if err := envconfig.ProcessWith(ctx, &envconfig.Config{Target: &a.cfg, Lookuper: envconfig.MapLookuper(envMap(env))}); err != nil {
		return fmt.Errorf("reading environment: %w", err)
	}
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetOut(streams.Out)
	root.SetErr(streams.Err)
	root.SetContext(ctx)
	return root.ExecuteContext(ctx)
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "kl",
		Short: "Kilolock: concurrent Terraform plan/apply on one shared state, with its causal history",
		Long: `Kilolock replaces the global state lock with resource-level reservations, so plans that
touch different resources apply at the same time, and makes every run explain itself:
what it planned to read and write, what changed while it waited, why it was allowed,
whether it committed exactly what was planned, and which state version it produced.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.PersistentFlags().StringVar(&a.store, "store", "", "store: SQLite file path or postgres:// URL (env KL_STORE; default .kl/kl.db)")
	root.PersistentFlags().BoolVar(&a.jsonOut, "json", false, "print JSON (versioned schema, see docs/json.md) instead of text")
	root.AddCommand(a.stateCommand(), a.planCommand(), a.applyCommand(), a.footprintCommand(),
		a.historyCommand(), a.runsCommand(), a.runCommand(), a.whyCommand(), a.statusCommand())
	root.AddCommand(a.reportCommand())
	return root
}

// engine opens the store and the Terraform runner on first use.
func (a *app) engine(needTerraform bool) (*engine.Engine, error) {
	if a.eng != nil && (a.eng.Terraform != nil || !needTerraform) {
		return a.eng, nil
	}
	log := a.logger()
	if a.eng == nil {
		st, workRoot, err := a.openStore()
		if err != nil {
			return nil, err
		}
		a.eng = engine.New(st, nil, log)
		a.eng.Lease = a.cfg.Lease
		if a.cfg.WorkDir == "" {
			a.cfg.WorkDir = workRoot
		}
	}
	if needTerraform {
		bin, err := terraform.FindBinary(a.getenv)
		if err != nil {
			return nil, err
		}
		r, err := terraform.NewRunner(terraform.RunnerOptions{
			WorkRoot: a.cfg.WorkDir, Binary: bin, Env: a.env, KeepWorkDirs: a.cfg.KeepWorkDirs, Logger: log,
		})
		if err != nil {
			return nil, err
		}
		a.eng.Terraform = r
	}
	return a.eng, nil
}

// openStore opens the store named by --store, KL_STORE or the default.
func (a *app) openStore() (engine.Store, string, error) {
	loc := a.store
	if loc == "" {
		loc = a.cfg.Store
	}
	if loc == "" {
		loc = filepath.Join(".kl", "kl.db")
	}
	switch {
	case strings.HasPrefix(loc, "postgres://"), strings.HasPrefix(loc, "postgresql://"):
		st, err := postgres.Open(a.ctx, loc)
		if err != nil {
			return nil, "", err // it names the server (host, port, database, user), never the password
		}
		a.closers = append(a.closers, st.Close)
		return st, filepath.Join(os.TempDir(), "kilolock-runs"), nil
	case strings.Contains(loc, "://") && !strings.HasPrefix(loc, "sqlite://") && !strings.HasPrefix(loc, "file://"):
		return nil, "", fmt.Errorf("opening store %s: unknown store kind: use a file path or a postgres:// URL", redact(loc))
	}
	path := strings.TrimPrefix(strings.TrimPrefix(loc, "sqlite://"), "file://")
	st, err := sqlite.Open(a.ctx, path)
	if err != nil {
		return nil, "", err // it says "opening store PATH: …" itself
	}
	a.closers = append(a.closers, st.Close)
	return st, filepath.Join(filepath.Dir(path), "runs"), nil
}

func (a *app) close() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		_ = a.closers[i]()
	}
}

func (a *app) getenv(k string) string { return envMap(a.env)[k] }

func (a *app) actor() string {
	if a.cfg.Actor != "" {
		return a.cfg.Actor
	}
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := a.getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}

func (a *app) logger() *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(a.cfg.LogLevel)); err != nil {
		lvl = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(a.io.Err, &slog.HandlerOptions{Level: lvl}))
}

// isTTY reports whether w is a terminal.
func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// termWidth returns the width in columns of the terminal w, or 0.
func termWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok {
		return 0
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return 0
	}
	return cols
}

// reportOptions returns the rendering options for stdout.
func (a *app) reportOptions() report.Options {
	o := report.Options{Format: report.Text, Now: time.Now().UTC()}
	if a.jsonOut {
		o.Format = report.JSON
	}
	o.Color = o.Format == report.Text && !a.cfg.NoColor && isTTY(a.io.Out)
	return o
}

// refusal turns the engine's refusals into exit code 3.
func refusal(err error) error {
	if err == nil {
		return nil
	}
	var ce *engine.ConflictError
	var se *engine.StaleError
	var st *engine.StatusError
	if errors.As(err, &ce) || errors.As(err, &se) || errors.As(err, &st) || errors.Is(err, engine.ErrIntentChanged) {
		return &ExitError{Code: 3, Err: err}
	}
	return err
}

func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// redact hides a password in a URL-shaped store location.
func redact(loc string) string {
	if u, err := url.Parse(loc); err == nil && u.User != nil {
		return u.Redacted()
	}
	return loc
}
