// Package cli is the `kl` command line: it parses arguments and the
// environment, opens the store and the Terraform runner, calls the engine,
// and renders its answers with internal/report. cmd/kl only wires it to the
// process (signals, exit code).
package cli

import (
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
	"github.com/kilolock/kilolock/internal/version"
)

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
	env     []string
	cfg     Config
	io      IO
	stdout  io.Writer // io.Out as given, to tell a terminal
	stderr  io.Writer // io.Err as given, to tell a terminal
	store   string
	jsonOut bool
	parsed  bool // the flags were parsed: jsonOut is what they say
	eng     *engine.Engine
	checked bool // the store's integrity was checked (engineToWrite)
	closers []func() error
	// createStore: this command creates a missing SQLite store (only kl
	// state init does; the others refuse a store that does not exist).
	createStore bool
	phase       phaseTracker // how far the command got, for an interrupt
	// versionErr: this build's version facts are bad (setVersionFlag).
	versionErr error
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
	version.Stamp() // the version a store names (ADR 0048)
	out := &countingWriter{w: streams.Out}
	// stderr is written by the command, its logger, its progress line and
	// the interrupt note, from several goroutines.
	errOut := &lockedWriter{w: streams.Err}
	a := &app{env: env, io: IO{In: streams.In, Out: out, Err: errOut}, stdout: streams.Out, stderr: streams.Err}
	defer a.close()
	stopNote := noteOnInterrupt(ctx, errOut, &a.phase)
	defer stopNote()
	root := a.rootCommand()
	root.SetArgs(args)
	root.SetOut(out)
	root.SetErr(errOut)
	root.SetContext(ctx)
	err := root.ExecuteContext(ctx)
	if err == nil {
		err = a.versionFlagErr(root)
	}
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
		// Before every command, once its flags are parsed (so that --json
		// is known when the environment is bad).
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			a.parsed = true
			return a.loadEnv(cmd.Context())
		},
	}
	root.PersistentFlags().StringVar(&a.store, "store", "", "store: SQLite file path, postgres:// URL or libpq key=value string (env KL_STORE; default: the nearest .kl/kl.db from the working directory upward)")
	root.PersistentFlags().BoolVar(&a.jsonOut, "json", false, "print JSON (versioned schema, see docs/json.md) instead of text")
	root.AddCommand(a.stateCommand(), a.planCommand(), a.applyCommand(), a.footprintCommand(),
		a.historyCommand(), a.runsCommand(), a.runCommand(), a.whyCommand(), a.statusCommand())
	root.AddCommand(a.reportCommand(), a.githubCommand(), a.versionCommand(), a.tokenCommand(), a.serveCommand(), a.gcCommand(), a.storeCommand())
	a.setVersionFlag(root)
	return root
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
