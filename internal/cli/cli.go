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
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

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

// Config is kl's environment configuration (read with go-envconfig). An
// empty variable counts as unset. A value that does not parse, or is out of
// range, is an error that names the variable ("KL_LEASE=banana: not a
// duration (e.g. 2m)").
type Config struct {
	// Store is the store location: a SQLite file path (default .kl/kl.db),
	// or a postgres:// URL. The --store flag overrides it.
	Store string `env:"KL_STORE"`
	// Actor names who runs kl in run records (default: the OS user).
	Actor string `env:"KL_ACTOR"`
	// Terraform is the terraform/tofu binary (default: terraform, then tofu on PATH).
	Terraform string `env:"KL_TERRAFORM"`
	// Lease is the lease of reservations and of runs in progress, MinLease
	// to MaxLease; the holder renews every third of it, so a killed kl's
	// runs end lease-expired once it runs out.
	Lease time.Duration `env:"KL_LEASE, default=2m"`
	// WorkDir is where per-run work dirs are made (default: runs/ next to
	// the SQLite file, or the OS temp dir for PostgreSQL). Work dirs a
	// killed kl left there untouched for 24 h (or two leases, if longer)
	// are removed (terraform.DefaultStaleAfter).
	WorkDir string `env:"KL_WORKDIR"`
	// KeepWorkDirs keeps per-run work dirs for debugging (they hold secrets).
	KeepWorkDirs bool `env:"KL_KEEP_WORKDIRS"`
	// NoColor, set to anything, disables colour even on a terminal
	// (https://no-color.org: "regardless of its value").
	NoColor string `env:"NO_COLOR"`
	// Term is the terminal type; "dumb" gets no colour.
	Term string `env:"TERM"`
	// LogLevel is debug, info, warn or error (default warn), logged to stderr.
	LogLevel string `env:"KL_LOG_LEVEL, default=warn"`
}

// Bounds of KL_LEASE.
const (
	// MinLease is the shortest lease: the holder renews every third of it,
	// and a lease shorter than a store round trip under load lets the
	// reservations lapse while their run still works.
	MinLease = 3 * time.Second
	// MaxLease is the longest lease: the reservations of a killed kl block
	// other applies until their lease ends.
	MaxLease = 24 * time.Hour
)

// logLevels are the values of KL_LOG_LEVEL.
var logLevels = []string{"debug", "info", "warn", "error"}

// envError is a bad value of an environment variable, named as the user
// set it: "KL_LEASE=banana: not a duration (e.g. 2m)".
type envError struct {
	key, value, problem string
}

func (e *envError) Error() string {
	v := e.value
	if q := strconv.Quote(v); v == "" || q[1:len(q)-1] != v || strings.ContainsAny(v, " \t") || utf8.RuneCountInString(v) > 60 {
		v = preview(v)
	}
	return e.key + "=" + v + ": " + e.problem
}

// envTypes maps each variable of Config to its field's type, for
// checkEnvSyntax.
var envTypes = func() map[string]reflect.Type {
	m := map[string]reflect.Type{}
	t := reflect.TypeFor[Config]()
	for i := range t.NumField() {
		f := t.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("env"), ",")
		if key = strings.TrimSpace(key); key != "" {
			m[key] = f.Type
		}
	}
	return m
}()

// checkEnvSyntax is a go-envconfig mutator that parses a typed variable
// before go-envconfig does, so that a bad value is reported under its
// variable's name (go-envconfig's own errors name the Go field).
func checkEnvSyntax(_ context.Context, _, key, _, value string) (string, bool, error) {
	var problem string
	switch t := envTypes[key]; {
	case t == reflect.TypeFor[time.Duration]():
		if _, err := time.ParseDuration(value); err != nil {
			problem = "not a duration (e.g. 2m)"
		}
	case t != nil && t.Kind() == reflect.Bool:
		if _, err := strconv.ParseBool(value); err != nil {
			problem = "not a boolean (true or false)"
		}
	case t != nil && t.Kind() == reflect.Int:
		if _, err := strconv.Atoi(value); err != nil {
			problem = "not a whole number"
		}
	}
	if problem != "" {
		return "", true, &envError{key: key, value: value, problem: problem}
	}
	return value, false, nil
}

// shortDuration prints d without zero minutes and seconds: "2m", "24h".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// loadEnv reads the environment into a.cfg and checks its values.
func (a *app) loadEnv(ctx context.Context) error {
	vars := envMap(a.env)
	for k, v := range vars {
		if v == "" {
			delete(vars, k) // an empty variable counts as unset
		}
	}
	err := envconfig.ProcessWith(ctx, &envconfig.Config{Target: &a.cfg, Lookuper: envconfig.MapLookuper(vars),
		Mutators: []envconfig.Mutator{envconfig.MutatorFunc(checkEnvSyntax)}})
	var ee *envError
	if errors.As(err, &ee) {
		return ee
	}
	if err != nil {
		return fmt.Errorf("reading environment: %w", err)
	}
	switch lease := vars["KL_LEASE"]; {
	case a.cfg.Lease < MinLease:
		return &envError{key: "KL_LEASE", value: lease, problem: fmt.Sprintf("too short: use at least %s (default %s): the holder renews its "+
			"reservations every third of the lease, and a lease shorter than a store round trip under load loses them to other runs",
			shortDuration(MinLease), shortDuration(engine.DefaultLease))}
	case a.cfg.Lease > MaxLease:
		return &envError{key: "KL_LEASE", value: lease, problem: fmt.Sprintf("too long: use at most %s (default %s): "+
			"the reservations of a kl that was killed block other applies until their lease ends",
			shortDuration(MaxLease), shortDuration(engine.DefaultLease))}
	}
	if !slices.Contains(logLevels, strings.ToLower(a.cfg.LogLevel)) {
		return &envError{key: "KL_LOG_LEVEL", value: a.cfg.LogLevel, problem: "use debug, info, warn or error"}
	}
	// Recorded on every run and printed to everyone who reads it.
	if p := wordsProblem(a.cfg.Actor, MaxActor); a.cfg.Actor != "" && p != "" {
		return &envError{key: "KL_ACTOR", value: a.cfg.Actor, problem: p + " (it names you on every run)"}
	}
	return nil
}

// ExitError carries a process exit code chosen by a command: 1 for errors,
// 3 for a refusal (stale plan, reservation conflict, intent changed, plan
// not applicable), 128+signal for a command a signal stopped (Interrupted).
type ExitError struct {
	Code int
	Err  error
	// noted: the interrupt note said all there is (Message).
	noted bool
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
	stdout  io.Writer // io.Out as given, to tell a terminal
	stderr  io.Writer // io.Err as given, to tell a terminal
	store   string
	jsonOut bool
	parsed  bool // the flags were parsed: jsonOut is what they say
	eng     *engine.Engine
	closers []func() error
	// createStore: this command creates a missing SQLite store (only kl
	// state init does; the others refuse a store that does not exist).
	createStore bool
	phase       phaseTracker // how far the command got, for an interrupt
}

// Run runs kl with args (without the program name) and environment env
// ("KEY=value" pairs). It returns nil on success, an *ExitError for a
// refusal, or another error for failures. With --json, a command that
// fails before it printed anything prints a kilolock/error/v1 document on
// streams.Out, so that a script always reads JSON.
//
// When ctx is cancelled with an *Interrupted cause (a signal), Run prints
// on streams.Err what the running command does about it, and a command
// that then fails returns an *ExitError of code 128+signal.
func Run(ctx context.Context, args, env []string, streams IO) error {
	out := &countingWriter{w: streams.Out}
	// stderr is written by the command, its logger, its progress line and
	// the interrupt note, from several goroutines.
	errOut := &lockedWriter{w: streams.Err}
	a := &app{ctx: ctx, env: env, io: IO{In: streams.In, Out: out, Err: errOut}, stdout: streams.Out, stderr: streams.Err}
	defer a.close()
	stopNote := noteOnInterrupt(ctx, errOut, &a.phase)
	defer stopNote()
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(errOut)
	root.SetContext(ctx)
	err := root.ExecuteContext(ctx)
	if in := interruptedBy(ctx); in != nil && err != nil {
		// Stopped before Terraform ran, with only the cancellation to
		// say: the interrupt note said it (Message prints nothing more).
		noted := errors.Is(err, context.Canceled) && slices.Contains([]phase{phaseOther, phaseApplyStart, phaseApplyWait}, a.phase.get())
		err = &ExitError{Code: in.Code(), Err: err, noted: noted}
	}
	if err != nil && out.n == 0 && a.wantsJSON(args) {
		if jerr := report.ErrorDocument(streams.Out, err, ExitCode(err)); jerr != nil {
			return errors.Join(err, jerr)
		}
	}
	return err
}

// ExitCode is the process exit status for err: 0 for nil, an
// *ExitError's code, else 1.
func ExitCode(err error) int {
	var ee *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	}
	return 1
}

// wantsJSON reports whether the invocation asked for --json: the parsed
// flag, or, when parsing failed (an unknown flag), a --json among args
// before "--".
func (a *app) wantsJSON(args []string) bool {
	if a.parsed {
		return a.jsonOut
	}
	for _, arg := range args {
		if arg == "--" {
			break
		}
		if arg == "--json" {
			return true
		}
		if v, ok := strings.CutPrefix(arg, "--json="); ok {
			b, err := strconv.ParseBool(v)
			return err == nil && b
		}
	}
	return false
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
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
		// Before every command, once its flags are parsed (so that --json
		// is known when the environment is bad).
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			a.parsed = true
			return a.loadEnv(cmd.Context())
		},
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
		// Work dirs are removed without a Terraform binary (kl run recover).
		a.eng.WorkDirs = terraform.WorkDirs{Root: a.cfg.WorkDir, Keep: a.cfg.KeepWorkDirs, Logger: log}
	}
	if needTerraform {
		bin, err := terraform.FindBinary(a.getenv)
		if err != nil {
			return nil, err
		}
		if v := strings.TrimSpace(a.getenv("KL_TERRAFORM")); v != "" {
			if err := terraform.CheckVersion(a.ctx, bin, a.env); err != nil {
				if errors.Is(err, context.Canceled) {
					return nil, err
				}
				return nil, fmt.Errorf("KL_TERRAFORM=%s is not Terraform or OpenTofu: %w; "+
					"set KL_TERRAFORM to a terraform or tofu binary, or unset it to use terraform or tofu on PATH", v, err)
			}
		}
		r, err := terraform.NewRunner(terraform.RunnerOptions{
			WorkRoot: a.cfg.WorkDir, Binary: bin, Env: a.env, KeepWorkDirs: a.cfg.KeepWorkDirs, Logger: log,
			// Never the work dir of a run whose lease may still run.
			StaleAfter: max(terraform.DefaultStaleAfter, 2*a.cfg.Lease),
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
	if missing, empty := storeMissing(path); missing && !a.createStore {
		// A mistyped KL_STORE must not start an empty store.
		src := "KL_STORE"
		switch {
		case a.store != "":
			src = "--store"
		case a.cfg.Store == "":
			src = "the default; set KL_STORE or --store to use another"
		}
		what := ""
		if empty {
			what = ": the file is empty"
		}
		return nil, "", fmt.Errorf("no Kilolock store at %s (%s)%s: \"kl state init NAME\" creates one", path, src, what)
	}
	st, err := sqlite.Open(a.ctx, path, sqlite.WithLogger(a.logger()))
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
	if u := a.getenv("USER"); wordsProblem(u, MaxActor) == "" {
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
	o.Color = o.Format == report.Text && useColor(a.cfg, isTTY(a.stdout))
	return o
}

// useColor says whether text on a terminal (tty) gets ANSI colour: not
// with NO_COLOR set to anything (https://no-color.org), nor on a terminal
// that has none (TERM=dumb, as Emacs shell buffers and some CI logs say).
func useColor(cfg Config, tty bool) bool {
	return tty && cfg.NoColor == "" && cfg.Term != "dumb"
}

// refusal turns the engine's refusals into exit code 3, by their kind: a
// reservation conflict or a run in the wrong status (ErrConflict), a stale
// plan (ErrStalePlan), a re-plan with another intent (ErrIntentChanged);
// and the kinds given in also (kl apply: ErrInvalid, a plan that is not
// applicable — an apply run, a plan of another state or lineage).
func refusal(err error, also ...error) error {
	if err == nil {
		return nil
	}
	for _, kind := range append([]error{engine.ErrConflict, engine.ErrStalePlan, engine.ErrIntentChanged}, also...) {
		if errors.Is(err, kind) {
			return &ExitError{Code: 3, Err: err}
		}
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
