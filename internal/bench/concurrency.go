package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store/sqlite"
	"github.com/kilolock/kilolock/internal/terraform"
)

// ConcurrencyOptions configures Concurrency.
type ConcurrencyOptions struct {
	// Terraform is the terraform binary (required).
	Terraform string
	// Plans is the number of plans applied at once (8 if zero). Plan i
	// replaces terraform_data.slow_i only: write sets are disjoint.
	Plans int
	// Sleep is the local-exec sleep each apply makes, standing in for a slow
	// cloud API (2 s if zero; whole seconds).
	Sleep time.Duration
	// Runs is the number of interleaved repetitions of both modes (3 if zero).
	Runs int
	// Poll is how often a waiting apply retries (engine.Engine.Poll), the
	// same in both modes (50 ms if zero): short, so that the whole-state
	// queue is not charged for polling latency.
	Poll time.Duration
	// TempDir is the parent of the benchmark's temporary directory ("" for
	// the OS default); everything created below it is removed.
	TempDir string
	// Progress receives one line per phase (nil: discarded).
	Progress io.Writer
}

func (o *ConcurrencyOptions) defaults() {
	if o.Plans <= 0 {
		o.Plans = 8
	}
	if o.Sleep <= 0 {
		o.Sleep = 2 * time.Second
	}
	if o.Runs <= 0 {
		o.Runs = 3
	}
	if o.Poll <= 0 {
		o.Poll = 50 * time.Millisecond
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// ConcurrencyResult holds the wall clock of every apply phase, per mode in
// round order.
type ConcurrencyResult struct {
	Plans int
	Sleep time.Duration
	Poll  time.Duration
	// Reservations and WholeState are the apply-phase wall times of each
	// round with engine.LockReservations and engine.LockWholeState.
	Reservations []time.Duration
	WholeState   []time.Duration
	// PlanPhase is the wall time of making the N plans at once (not part of
	// the figure), one per round and mode.
	PlanPhase []time.Duration
	// LoadAtStart is the load average when the figure started.
	LoadAtStart string
}

// Ratio is the median over rounds of WholeState / Reservations: how many
// times faster the disjoint applies finish with reservations. Both modes of
// a round ran back to back, so a per-round ratio cancels the load both saw.
func (r ConcurrencyResult) Ratio() float64 {
	n := min(len(r.WholeState), len(r.Reservations))
	xs := make([]float64, n)
	for i := range n {
		xs[i] = Ratio(r.WholeState[i], r.Reservations[i])
	}
	return MedianFloat(xs)
}

// concurrencyStateName is the state every round creates in its own store.
const concurrencyStateName = "bench/concurrency"

// concurrencyConfig is the root module: n terraform_data "slow_i" whose
// triggers_replace is var.x_i, each with a create-time local-exec sleep. A
// var file setting x_i replaces slow_i alone, running its sleep once.
func concurrencyConfig(n int, sleep time.Duration) string {
	var b strings.Builder
	b.WriteString("# Written by klbench: one slow resource per plan (docs/design.md, make bench).\n")
	for i := range n {
		fmt.Fprintf(&b, "variable \"x_%d\" {\n  type    = string\n  default = \"v0\"\n}\n\n", i)
		fmt.Fprintf(&b, "resource \"terraform_data\" \"slow_%d\" {\n  triggers_replace = var.x_%d\n\n"+
			"  provisioner \"local-exec\" {\n    command = \"sleep %d\"\n  }\n}\n\n", i, i, int(sleep.Round(time.Second)/time.Second))
	}
	return b.String()
}

// Concurrency measures figure 1. It creates the N slow resources once (one
// apply, one sleep), then per round and mode: a fresh SQLite store adopting
// that state, N plans made at once (timed apart), and the N applies started
// together from N goroutines, timed from the start to the last commit. The
// modes alternate which goes first from round to round. Every apply must
// commit (else an error): the head serial must have grown by N.
func Concurrency(ctx context.Context, opts ConcurrencyOptions) (*ConcurrencyResult, error) {
	opts.defaults()
	if opts.Terraform == "" {
		return nil, fmt.Errorf("concurrency benchmark: no terraform binary")
	}
	root, err := os.MkdirTemp(opts.TempDir, "klbench-concurrency-")
	if err != nil {
		return nil, fmt.Errorf("concurrency benchmark: %w", err)
	}
	defer os.RemoveAll(root)

	cfg := filepath.Join(root, "config")
	if err := os.Mkdir(cfg, 0o700); err != nil {
		return nil, fmt.Errorf("concurrency benchmark: %w", err)
	}
	if err := os.WriteFile(filepath.Join(cfg, "main.tf"), []byte(concurrencyConfig(opts.Plans, opts.Sleep)), 0o600); err != nil {
		return nil, fmt.Errorf("concurrency benchmark: writing config: %w", err)
	}
	varFiles := make([]string, opts.Plans)
	for i := range varFiles {
		// Outside the config dir: kl archives var files separately.
		varFiles[i] = filepath.Join(root, fmt.Sprintf("x_%d.tfvars", i))
		if err := os.WriteFile(varFiles[i], fmt.Appendf(nil, "x_%d = \"v1\"\n", i), 0o600); err != nil {
			return nil, fmt.Errorf("concurrency benchmark: writing var file: %w", err)
		}
	}

	res := &ConcurrencyResult{Plans: opts.Plans, Sleep: opts.Sleep, Poll: opts.Poll, LoadAtStart: LoadAverage()}
	fmt.Fprintf(opts.Progress, "  setup: creating the %d slow resources once (one apply, one %g s sleep)\n", opts.Plans, opts.Sleep.Seconds())
	base, err := createConcurrencyState(ctx, opts, root, cfg)
	if err != nil {
		return nil, err
	}
	modes := []engine.LockMode{engine.LockReservations, engine.LockWholeState}
	for r := range opts.Runs {
		order := modes
		if r%2 == 1 {
			order = []engine.LockMode{engine.LockWholeState, engine.LockReservations}
		}
		for _, mode := range order {
			dir := filepath.Join(root, fmt.Sprintf("round%d-%s", r+1, mode))
			planWall, applyWall, err := concurrencyRound(ctx, opts, mode, dir, cfg, varFiles, base)
			if err != nil {
				return nil, fmt.Errorf("concurrency benchmark, round %d, %s: %w", r+1, mode, err)
			}
			res.PlanPhase = append(res.PlanPhase, planWall)
			if mode == engine.LockWholeState {
				res.WholeState = append(res.WholeState, applyWall)
			} else {
				res.Reservations = append(res.Reservations, applyWall)
			}
			fmt.Fprintf(opts.Progress, "  round %d %-12s  %d plans %s, %d applies %s\n",
				r+1, mode, opts.Plans, FormatSeconds(planWall), opts.Plans, FormatSeconds(applyWall))
			if err := os.RemoveAll(dir); err != nil {
				return nil, fmt.Errorf("concurrency benchmark: removing %s: %w", dir, err)
			}
		}
	}
	return res, nil
}

// benchEngine opens a store in dir and an engine over it with a Terraform
// runner whose work dirs are under dir.
func benchEngine(ctx context.Context, opts ConcurrencyOptions, dir string, mode engine.LockMode) (*engine.Engine, func(), error) {
	st, err := sqlite.Open(ctx, filepath.Join(dir, "kl.db"))
	if err != nil {
		return nil, nil, err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tf, err := terraform.NewRunner(terraform.RunnerOptions{WorkRoot: filepath.Join(dir, "runs"), Binary: opts.Terraform, Logger: log})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	e := engine.New(st, tf, log)
	e.LockMode = mode
	e.Poll = opts.Poll
	return e, func() { st.Close() }, nil
}

// createConcurrencyState plans and applies the configuration on an empty
// state and returns the committed head document: the N resources exist.
func createConcurrencyState(ctx context.Context, opts ConcurrencyOptions, root, cfg string) ([]byte, error) {
	dir := filepath.Join(root, "setup")
	defer os.RemoveAll(dir)
	e, closeStore, err := benchEngine(ctx, opts, dir, engine.LockReservations)
	if err != nil {
		return nil, fmt.Errorf("concurrency benchmark setup: %w", err)
	}
	defer closeStore()
	if _, err := e.InitState(ctx, concurrencyStateName, nil, "klbench"); err != nil {
		return nil, fmt.Errorf("concurrency benchmark setup: %w", err)
	}
	p, err := e.Plan(ctx, engine.PlanInput{State: concurrencyStateName, Dir: cfg, Actor: "klbench"})
	if err != nil {
		return nil, fmt.Errorf("concurrency benchmark setup: %w", err)
	}
	if _, err := e.Apply(ctx, engine.ApplyInput{PlanRun: p.Run.ID, Actor: "klbench"}); err != nil {
		return nil, fmt.Errorf("concurrency benchmark setup: %w", err)
	}
	doc, _, err := e.Pull(ctx, concurrencyStateName, -1)
	if err != nil {
		return nil, fmt.Errorf("concurrency benchmark setup: %w", err)
	}
	return doc, nil
}

// concurrencyRound runs one round in one mode and returns the wall times of
// the plan phase and of the apply phase.
func concurrencyRound(ctx context.Context, opts ConcurrencyOptions, mode engine.LockMode, dir, cfg string, varFiles []string, base []byte) (planWall, applyWall time.Duration, err error) {
	e, closeStore, err := benchEngine(ctx, opts, dir, mode)
	if err != nil {
		return 0, 0, err
	}
	defer closeStore()
	st, err := e.InitState(ctx, concurrencyStateName, base, "klbench")
	if err != nil {
		return 0, 0, err
	}

	n := len(varFiles)
	plans := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range n {
		wg.Go(func() {
			out, err := e.Plan(ctx, engine.PlanInput{State: st.Name, Dir: cfg, VarFiles: varFiles[i : i+1], Actor: fmt.Sprintf("klbench-%d", i)})
			if err != nil {
				errs[i] = fmt.Errorf("plan %d: %w", i, err)
				return
			}
			plans[i] = out.Run.ID
		})
	}
	wg.Wait()
	planWall = time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return 0, 0, err
	}

	// Start the applies together: each goroutine waits on the gate.
	gate := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-gate
			if _, err := e.Apply(ctx, engine.ApplyInput{PlanRun: plans[i], Actor: fmt.Sprintf("klbench-%d", i), Wait: 10 * time.Minute}); err != nil {
				errs[i] = fmt.Errorf("apply %d: %w", i, err)
			}
		})
	}
	t0 = time.Now()
	close(gate)
	wg.Wait()
	applyWall = time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return 0, 0, err
	}
	head, err := e.Store.GetState(ctx, st.Name)
	if err != nil {
		return 0, 0, err
	}
	if head.HeadSerial != st.HeadSerial+int64(n) {
		return 0, 0, fmt.Errorf("head serial %d after %d applies on serial %d: not every apply committed", head.HeadSerial, n, st.HeadSerial)
	}
	return planWall, applyWall, nil
}
