package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/kilolock/kilolock/internal/testprovider"
)

// NativeOptions configures Native (figure 5, issue 17: the native lane,
// docs/adr/0069-native-lane.md).
type NativeOptions struct {
	// KL is the kl binary and Terraform the terraform binary kl runs and
	// the correctness check runs (both required).
	KL, Terraform string
	// Mirror is a filesystem mirror of the test provider
	// (BuildProviderMirror; required): every resource is a kltest_object
	// read from its fake cloud API, each Read taking ReadDelay.
	Mirror string
	// Resources is the size of the big state (10,000 if zero); PRs the
	// number of disjoint pull requests of figure 5b (8 if zero);
	// TinyResources the size of each of 5b's separate states (8 if zero).
	Resources, PRs, TinyResources int
	// ReadDelay is every object's delay (DefaultReadDelay if empty).
	ReadDelay string
	// Runs is the number of interleaved repetitions (3 if zero).
	Runs int
	// TempDir is the parent of the benchmark's temporary directory.
	TempDir string
	// Progress receives one line per round (nil: discarded).
	Progress io.Writer
}

func (o *NativeOptions) defaults() {
	if o.Resources <= 0 {
		o.Resources = DefaultNativeResources
	}
	if o.PRs <= 0 {
		o.PRs = 8
	}
	if o.TinyResources <= 0 {
		o.TinyResources = 8
	}
	if o.ReadDelay == "" {
		o.ReadDelay = DefaultReadDelay
	}
	if o.Runs <= 0 {
		o.Runs = 3
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
}

// DefaultNativeResources is the size of figure 5's big state: issue 17's
// 10,000 resources.
const DefaultNativeResources = 10000

// NativeRound is one repetition of figure 5: (a) one change planned and
// applied in each lane, each side on a fresh store holding the big state;
// (b) PRs disjoint native-lane plans on one big state and on PRs tiny
// states, made at once and then applied at once.
type NativeRound struct {
	// NativePlan, NativeApply: wall time of `kl plan --lane native
	// --target ADDR` and of its `kl apply`; TFPlan, TFApply the same in the
	// terraform lane (the whole configuration against the whole state).
	NativePlan, NativeApply, TFPlan, TFApply time.Duration
	// CPU time (user + sys, kl's Terraform processes included) of the same.
	NativeCPU, TFCPU time.Duration
	// The step timings kl logged (Step*) of each of the four commands.
	NativePlanSteps, NativeApplySteps, TFPlanSteps, TFApplySteps map[string]time.Duration
	// SharedPlans, SharedApplies: wall time of making the PRs plans on the
	// big state at once, then of applying them at once; TinyPlans,
	// TinyApplies the same on the tiny states, one plan each.
	SharedPlans, SharedApplies, TinyPlans, TinyApplies time.Duration
	// Each is the median over one side's PRs of each process, Shared on the
	// big state and Tiny on the tiny states: where 5b's time goes.
	Shared, Tiny PRTimes
}

// PRTimes are the medians over the PRs of figure 5b on one side of each
// `kl plan` and `kl apply` process: wall time, the Terraform runner's
// whole Plan or Apply call (StepRunnerAll, StepApplyAll: Terraform and the
// runner's files), and the rest (wall − runner: process start, store
// reads and writes, closure, slice, proof, commit, report).
type PRTimes struct {
	Plan, PlanRunner, PlanRest    time.Duration
	Apply, ApplyRunner, ApplyRest time.Duration
}

// NativeTotal is the native lane's plan + apply.
func (r NativeRound) NativeTotal() time.Duration { return r.NativePlan + r.NativeApply }

// TFTotal is the terraform lane's plan + apply.
func (r NativeRound) TFTotal() time.Duration { return r.TFPlan + r.TFApply }

// NativeResult is every round of figure 5.
type NativeResult struct {
	Resources, PRs, TinyResources int
	ReadDelay                     string
	// Changed is the address figure 5a changes.
	Changed string
	Rounds  []NativeRound
	// Checked is what the correctness check found after round 1's native
	// apply: a full `terraform plan -detailed-exitcode` of the whole
	// changed configuration against `kl state pull` of the native side's
	// head (exit 0: no changes); Native fails unless it found that.
	Checked     string
	LoadAtStart string
}

// ratio is the median over rounds of a(r) / b(r): both sides of a round
// ran back to back, so a per-round ratio cancels the load both saw.
func (r NativeResult) ratio(a, b func(NativeRound) time.Duration) float64 {
	xs := make([]float64, len(r.Rounds))
	for i, x := range r.Rounds {
		xs[i] = Ratio(a(x), b(x))
	}
	return MedianFloat(xs)
}

// Median is the median over rounds of f.
func (r NativeResult) Median(f func(NativeRound) time.Duration) time.Duration {
	xs := make([]time.Duration, len(r.Rounds))
	for i, x := range r.Rounds {
		xs[i] = f(x)
	}
	return Median(xs)
}

// Speedup is figure 5a: the median per-round terraform-lane plan + apply
// over the native lane's (issue 17's goal: at least 20).
func (r NativeResult) Speedup() float64 { return r.ratio(NativeRound.TFTotal, NativeRound.NativeTotal) }

// SharedRatio is figure 5b: the median per-round wall time of the PRs
// applies at once on the big state over that on the tiny states (issue
// 17's goal: at most 1.3).
func (r NativeResult) SharedRatio() float64 {
	return r.ratio(func(x NativeRound) time.Duration { return x.SharedApplies }, func(x NativeRound) time.Duration { return x.TinyApplies })
}

// nativeStateName is the big state of figure 5; tiny state i is
// nativeStateName-tiny-i.
const nativeStateName = "bench/native"

// nativeLineage is the lineage of the big state; tiny state i has
// tinyLineage(i).
const nativeLineage = "b3c5e1d4-0000-4000-8000-00000000a717"

func tinyLineage(i int) string { return fmt.Sprintf("b3c5e1d4-0000-4000-8000-%012d", i+1) }

// Native measures figure 5. Setup (not timed): the big state of
// opts.Resources kltest_object resources (testprovider.Synthesize), its
// configuration and the PR configurations, kl's plugin cache filled. Per
// round, each side from a fresh store and a fresh fake cloud API: (a) the
// native lane's plan and apply of one changed resource beside the
// terraform lane's, in alternating order; after round 1's native apply the
// correctness check (NativeResult.Checked); (b) the PRs plans made at once,
// then applied at once, on the big state beside the same on PRs tiny
// states, in alternating order. Every plan must be in the lane asked for
// (a fall-back is an error) and write only its resource; the terraform
// lane's plan is a full plan of the whole state and must plan that one
// update and nothing else; every apply must apply.
func Native(ctx context.Context, opts NativeOptions) (*NativeResult, error) {
	opts.defaults()
	if opts.KL == "" || opts.Terraform == "" || opts.Mirror == "" {
		return nil, fmt.Errorf("native benchmark: kl, terraform and the provider mirror are required")
	}
	root, err := os.MkdirTemp(opts.TempDir, "klbench-native-")
	if err != nil {
		return nil, fmt.Errorf("native benchmark: %w", err)
	}
	defer os.RemoveAll(root)
	fmt.Fprintf(opts.Progress, "  setup: %s-resource state, its configuration and %d PR configurations; kl's plugin cache filled\n", formatCount(opts.Resources), opts.PRs)
	fx, err := newNativeFixture(ctx, opts, root)
	if err != nil {
		return nil, err
	}
	res := &NativeResult{Resources: opts.Resources, PRs: opts.PRs, TinyResources: opts.TinyResources, ReadDelay: opts.ReadDelay,
		Changed: fx.changed, LoadAtStart: LoadAverage()}
	for r := range opts.Runs {
		dir := filepath.Join(root, fmt.Sprintf("round%d", r+1))
		round, checked, err := nativeRound(ctx, opts, fx, dir, r)
		if err != nil {
			return nil, fmt.Errorf("native benchmark, round %d: %w", r+1, err)
		}
		if checked != "" {
			res.Checked = checked
		}
		res.Rounds = append(res.Rounds, round)
		fmt.Fprintf(opts.Progress, "  round %d  (a) native plan %s + apply %s | terraform lane plan %s + apply %s (%s faster)   (b) %d applies at once: one state %s | %d tiny states %s (%s)\n",
			r+1, FormatSeconds(round.NativePlan), FormatSeconds(round.NativeApply), FormatSeconds(round.TFPlan), FormatSeconds(round.TFApply),
			FormatRatio(Ratio(round.TFTotal(), round.NativeTotal())), opts.PRs, FormatSeconds(round.SharedApplies), opts.PRs,
			FormatSeconds(round.TinyApplies), FormatRatio(Ratio(round.SharedApplies, round.TinyApplies)))
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("native benchmark: %w", err)
		}
	}
	return res, nil
}

// nativeRound runs round r (0-based) in dir: figure 5a, with the
// correctness check in round 0 (its finding is returned), then 5b.
func nativeRound(ctx context.Context, opts NativeOptions, fx *nativeFixture, dir string, r int) (NativeRound, string, error) {
	var round NativeRound
	native, err := fx.side(ctx, filepath.Join(dir, "native"), fx.big)
	if err != nil {
		return round, "", err
	}
	tf, err := fx.side(ctx, filepath.Join(dir, "terraform-lane"), fx.big)
	if err != nil {
		return round, "", err
	}
	steps := []func() error{
		func() error { return native.nativeChange(ctx, fx, &round) },
		func() error { return tf.terraformChange(ctx, fx, &round) },
	}
	if r%2 == 1 {
		slices.Reverse(steps)
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return round, "", err
		}
	}
	checked := ""
	if r == 0 {
		if checked, err = fx.checkNoChanges(ctx, native, filepath.Join(dir, "check")); err != nil {
			return round, "", err
		}
	}
	return round, checked, fx.prsRound(ctx, filepath.Join(dir, "prs"), r%2 == 1, &round)
}

// nativeChange plans fx.changed in the native lane and applies it.
func (s klSide) nativeChange(ctx context.Context, fx *nativeFixture, round *NativeRound) error {
	plan, err := s.plan(ctx, nativeStateName, fx.cfg, "native", fx.changed)
	if err != nil {
		return err
	}
	apply, err := s.apply(ctx, plan.id)
	if err != nil {
		return err
	}
	round.NativePlan, round.NativeApply, round.NativeCPU = plan.res.Wall, apply.Wall, plan.res.CPU+apply.CPU
	round.NativePlanSteps, round.NativeApplySteps = StepTimings(plan.res.Stderr), StepTimings(apply.Stderr)
	return nil
}

// terraformChange plans the whole changed configuration in the terraform
// lane and applies it.
func (s klSide) terraformChange(ctx context.Context, fx *nativeFixture, round *NativeRound) error {
	plan, err := s.plan(ctx, nativeStateName, fx.cfg, "terraform", fx.changed)
	if err != nil {
		return err
	}
	apply, err := s.apply(ctx, plan.id)
	if err != nil {
		return err
	}
	round.TFPlan, round.TFApply, round.TFCPU = plan.res.Wall, apply.Wall, plan.res.CPU+apply.CPU
	round.TFPlanSteps, round.TFApplySteps = StepTimings(plan.res.Stderr), StepTimings(apply.Stderr)
	return nil
}

// klSide is one kl store with its own fake cloud API (api), its commands
// run in dir.
type klSide struct {
	kl, dir, api string
	env          []string
}

// run runs kl with args in dir.
func (s klSide) run(ctx context.Context, args ...string) (commandResult, error) {
	return runCommand(ctx, s.dir, s.env, s.kl, args...)
}

// plannedRun is a finished `kl --json plan`: its run id and the command.
type plannedRun struct {
	id  string
	res commandResult
}

// plan runs `kl --json plan` of cfg against state in lane; with the
// native lane it targets addr. The plan must be in that lane, write addr
// alone and plan one update, nothing else: for the terraform lane that
// makes it the full plan that shows every other resource unchanged.
func (s klSide) plan(ctx context.Context, state, cfg, lane, addr string) (plannedRun, error) {
	args := []string{"--json", "plan", "--state", state, "-C", cfg, "--lane", lane}
	if lane == "native" {
		args = append(args, "--target", addr)
	}
	res, err := s.run(ctx, args...)
	if err != nil {
		return plannedRun{}, err
	}
	var doc struct {
		Run struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"run"`
		Envelope struct {
			Lane       string `json:"lane"`
			LaneReason string `json:"lane_reason"`
		} `json:"envelope"`
		Summary struct {
			Add, Change, Destroy, Replace int
		} `json:"summary"`
		Footprint struct {
			Write []string `json:"write"`
		} `json:"footprint"`
	}
	if err := json.Unmarshal(res.Stdout, &doc); err != nil {
		return plannedRun{}, fmt.Errorf("kl plan in the %s lane: reading its JSON: %w", lane, err)
	}
	s2 := doc.Summary
	switch {
	case doc.Run.Status != "planned":
		return plannedRun{}, fmt.Errorf("kl plan in the %s lane: run %s is %q, want planned", lane, doc.Run.ID, doc.Run.Status)
	case doc.Envelope.Lane != lane:
		return plannedRun{}, fmt.Errorf("kl plan in the %s lane: planned in the %q lane (%s)", lane, doc.Envelope.Lane, doc.Envelope.LaneReason)
	case !slices.Equal(doc.Footprint.Write, []string{addr}) || s2.Add != 0 || s2.Change != 1 || s2.Destroy != 0 || s2.Replace != 0:
		return plannedRun{}, fmt.Errorf("kl plan in the %s lane: writes %q with %d to add, %d to change, %d to destroy, %d to replace; want one update of %s",
			lane, doc.Footprint.Write, s2.Add, s2.Change, s2.Destroy, s2.Replace, addr)
	}
	return plannedRun{id: doc.Run.ID, res: res}, nil
}

// apply runs `kl --json apply run`; the run must be applied.
func (s klSide) apply(ctx context.Context, run string) (commandResult, error) {
	res, err := s.run(ctx, "--json", "apply", run)
	if err != nil {
		return res, err
	}
	if _, err := runStatus(res.Stdout, "applied"); err != nil {
		return res, fmt.Errorf("kl apply: %w", err)
	}
	return res, nil
}

// checkNoChanges is the correctness check of figure 5a: `kl state pull` of
// side's head into a dir with the whole changed configuration and its lock
// file, then bare `terraform init` and `terraform plan
// -detailed-exitcode` against it with side's fake cloud API: exit 0 (no
// changes) is what a native apply must leave; 2 (changes) or a failure is
// an error with Terraform's output.
func (fx *nativeFixture) checkNoChanges(ctx context.Context, side klSide, dir string) (string, error) {
	if err := writeFiles(dir, map[string][]byte{"main.tf": fx.changedConfig, ".terraform.lock.hcl": fx.lock}); err != nil {
		return "", err
	}
	if _, err := side.run(ctx, "state", "pull", nativeStateName, "-o", filepath.Join(dir, "terraform.tfstate")); err != nil {
		return "", fmt.Errorf("correctness check: %w", err)
	}
	env := append(append(cleanEnv(os.Environ()), fx.tfEnv...), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", side.apiEnv())
	if _, err := runCommand(ctx, dir, env, fx.opts.Terraform, "init", "-input=false"); err != nil {
		return "", fmt.Errorf("correctness check: %w", err)
	}
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, fx.opts.Terraform, "plan", "-input=false", "-detailed-exitcode", "-lock=false")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	took := time.Since(t0)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return fmt.Sprintf("a full terraform plan of the whole configuration against kl state pull after the native apply: no changes (exit 0 of -detailed-exitcode, %d resources refreshed, %s)",
			fx.opts.Resources, FormatSeconds(took)), nil
	case errors.As(err, &exit) && exit.ExitCode() == 2:
		return "", fmt.Errorf("correctness check: a full terraform plan after the native apply has changes:\n%s", tail(out.Bytes(), 4000))
	}
	return "", fmt.Errorf("correctness check: terraform plan: %w\n%s", err, tail(errb.Bytes(), 2000))
}

// apiEnv is side's fake cloud API setting (KLTEST_API_DIR).
func (s klSide) apiEnv() string { return testprovider.EnvAPIDir + "=" + s.api }

// tail is the last n bytes of b.
func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
