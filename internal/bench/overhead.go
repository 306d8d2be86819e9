package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/kilolock/kilolock/internal/terraform"
	"github.com/kilolock/kilolock/internal/testprovider"
	"github.com/kilolock/kilolock/internal/tfstate"
)

// OverheadOptions configures Overhead.
type OverheadOptions struct {
	// KL is the kl binary (required); Terraform the terraform binary both
	// sides run (required; passed to kl as KL_TERRAFORM).
	KL, Terraform string
	// Resources is the size of the synthetic state (2,000 if zero).
	Resources int
	// Runs is the number of interleaved repetitions (3 if zero).
	Runs int
	// TempDir is the parent of the benchmark's temporary directory.
	TempDir string
	// Progress receives one line per round (nil: discarded).
	Progress io.Writer
	// Mirror, when set, is a filesystem mirror of Kilolock's test provider
	// (testprovider.WriteMirror): the state's resources are then
	// kltest_object resources of a real provider instead of terraform_data
	// (testprovider.Synthesize), every one of them read from the fake cloud
	// API during the refresh, each Read taking ReadDelay. Both sides install
	// the provider from the mirror with the configuration's lock file
	// (testprovider.LockFile): bare Terraform through Terraform's own plugin
	// cache dir, kl through its plugin cache (ADR 0061); both caches are
	// filled before the first round, not timed.
	Mirror string
	// ReadDelay is the delay of every object (a Go duration; "20ms" if
	// empty): each Read, and the one Update, waits that long. Only with
	// Mirror.
	ReadDelay string
}

func (o *OverheadOptions) defaults() {
	if o.Resources <= 0 {
		o.Resources = 2000
	}
	if o.Runs <= 0 {
		o.Runs = 3
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Mirror != "" && o.ReadDelay == "" {
		o.ReadDelay = DefaultReadDelay
	}
}

// DefaultReadDelay is OverheadOptions.ReadDelay's default: 20 ms per API
// call, issue 16 §5's figure.
const DefaultReadDelay = "20ms"

// Steps of a kl run as its debug log reports them (internal/terraform's
// runner logs these messages with an "elapsed" attribute).
const (
	StepInit = "terraform init done"
	// StepLinked is an apply's step in place of its init when the plugin
	// cache had every provider: linking the run's checked copies into
	// Terraform's data dir (terraform.StepProvidersLinked).
	StepLinked    = terraform.StepProvidersLinked
	StepPlan      = "terraform plan done"
	StepShow      = "terraform show done"
	StepApply     = "terraform apply done"
	StepRunnerAll = "plan done"  // the runner's whole Plan call
	StepApplyAll  = "apply done" // the runner's whole Apply call
)

// OverheadRound is one repetition: kl and bare Terraform on the same state
// and configuration, each from a fresh directory.
type OverheadRound struct {
	KLPlan, KLApply time.Duration // wall time of `kl plan`, `kl apply`
	// KLStart is the wall time of `kl state list`: process start and store
	// open, the fixed cost of every kl invocation.
	KLStart time.Duration
	// PlanSteps and ApplySteps are the step timings kl logged (Step*).
	PlanSteps, ApplySteps map[string]time.Duration
	// TFInit, TFPlan, TFApply: `terraform init`, `plan -out`, `apply PLAN`.
	TFInit, TFPlan, TFApply time.Duration
	// CPU time (user + system) of the same: kl's includes its Terraform
	// processes.
	KLPlanCPU, KLApplyCPU, TFInitCPU, TFPlanCPU, TFApplyCPU time.Duration
	// Breakdown aids, run on bare Terraform's side between plan and apply
	// and not part of its figure: `plan -json -out` (kl's plan command),
	// `show -json PLAN`, `terraform version`, and kl's own in-process
	// reading of the plan JSON (terraform.ParsePlanJSON, ExtractFootprint
	// with the config dir, ExtractIntent).
	TFPlanJSON, TFShow, TFVersion time.Duration
	TFPlanJSONCPU, TFShowCPU      time.Duration // CPU time of plan -json -out, show -json
	ParseJSON, Footprint, Intent  time.Duration
	// PlanJSONBytes is the size of `show -json`.
	PlanJSONBytes int
}

// KLTotal is kl plan + kl apply.
func (r OverheadRound) KLTotal() time.Duration { return r.KLPlan + r.KLApply }

// TFPlanStep is the bare-Terraform counterpart of `kl plan`: init + plan -out.
func (r OverheadRound) TFPlanStep() time.Duration { return r.TFInit + r.TFPlan }

// TFTotal is init + plan -out + apply.
func (r OverheadRound) TFTotal() time.Duration { return r.TFInit + r.TFPlan + r.TFApply }

// TFPlanStepCPU is the CPU time of init + plan -out.
func (r OverheadRound) TFPlanStepCPU() time.Duration { return r.TFInitCPU + r.TFPlanCPU }

// KLTotalCPU is the CPU time of kl plan + kl apply.
func (r OverheadRound) KLTotalCPU() time.Duration { return r.KLPlanCPU + r.KLApplyCPU }

// TFTotalCPU is the CPU time of init + plan -out + apply.
func (r OverheadRound) TFTotalCPU() time.Duration { return r.TFInitCPU + r.TFPlanCPU + r.TFApplyCPU }

// OverheadResult is every round of figure 2.
type OverheadResult struct {
	Resources   int
	Rounds      []OverheadRound
	LoadAtStart string
	// Provider is "" for terraform_data, else what the resources are
	// ("kltest_object, 20ms per API call"): OverheadOptions.Mirror.
	Provider string
}

// pick returns f of every round.
func (r OverheadResult) pick(f func(OverheadRound) time.Duration) []time.Duration {
	out := make([]time.Duration, len(r.Rounds))
	for i, x := range r.Rounds {
		out[i] = f(x)
	}
	return out
}

// Median returns the median over rounds of f.
func (r OverheadResult) Median(f func(OverheadRound) time.Duration) time.Duration {
	return Median(r.pick(f))
}

// overheadStateName is the state kl adopts in every round.
const overheadStateName = "bench/overhead"

// changedResource is the one resource whose input the configuration changes
// (an in-place update of terraform_data).
const changedResource = "r01000"

// Overhead measures figure 2. Per round, kl gets a fresh store (`kl state
// init --from`, not timed; `kl state list`, kl's fixed start cost) and bare
// Terraform a fresh copy of the configuration with the same state as its
// local terraform.tfstate. Then the paired steps run back to back, their
// order alternating from round to round, so that both sides of a pair see
// the same machine load: `kl plan` beside `terraform init` + `plan -out`;
// the breakdown aids of OverheadRound (bare Terraform, not timed in the
// figure); `kl apply` beside `terraform apply PLAN`. Both run the same
// binary with the same cleaned environment (CHECKPOINT_DISABLE,
// TF_IN_AUTOMATION, as terraform-exec sets for kl). kl runs with
// KL_LOG_LEVEL=debug so that its step timings can be read from stderr.
func Overhead(ctx context.Context, opts OverheadOptions) (*OverheadResult, error) {
	opts.defaults()
	if opts.KL == "" || opts.Terraform == "" {
		return nil, fmt.Errorf("overhead benchmark: kl and terraform binaries are required")
	}
	root, err := os.MkdirTemp(opts.TempDir, "klbench-overhead-")
	if err != nil {
		return nil, fmt.Errorf("overhead benchmark: %w", err)
	}
	defer os.RemoveAll(root)

	fx, err := newOverheadFixture(ctx, opts, root)
	if err != nil {
		return nil, err
	}
	res := &OverheadResult{Resources: opts.Resources, LoadAtStart: LoadAverage()}
	if opts.Mirror != "" {
		res.Provider = "kltest_object, " + opts.ReadDelay + " per API call"
	}
	for r := range opts.Runs {
		round, err := overheadRound(ctx, opts, filepath.Join(root, fmt.Sprintf("round%d", r+1)), fx, r%2 == 1)
		if err != nil {
			return nil, fmt.Errorf("overhead benchmark, round %d: %w", r+1, err)
		}
		res.Rounds = append(res.Rounds, round)
		fmt.Fprintf(opts.Progress, "  round %d  kl plan %s | terraform init + plan -out %s (%s)   kl apply %s | terraform apply %s (%s)   CPU: kl %s | terraform %s\n", r+1,
			FormatSeconds(round.KLPlan), FormatSeconds(round.TFPlanStep()), FormatRatio(Ratio(round.KLPlan, round.TFPlanStep())),
			FormatSeconds(round.KLApply), FormatSeconds(round.TFApply), FormatRatio(Ratio(round.KLApply, round.TFApply)),
			FormatSeconds(round.KLTotalCPU()), FormatSeconds(round.TFTotalCPU()))
	}
	return res, nil
}

// overheadFixture is what every round starts from: the state (also as a
// file, for kl state init --from), the configuration dir kl plans (cfg)
// and the files bare Terraform's dir gets (files: the configuration, its
// lock file with a provider, and the state), plus what the sides' Terraform
// needs in its environment (env: the provider's CLI configuration) and,
// with a provider, a function that writes the state's objects into a
// round's fake cloud API dir.
type overheadFixture struct {
	stateFile, cfg string
	files          map[string][]byte
	env            []string
	synth          func(apiDir string) error
}

// newOverheadFixture writes the fixture of opts below root: with
// opts.Mirror, the test provider's objects (and the two plugin caches,
// filled: warmPluginCaches); else terraform_data.
func newOverheadFixture(ctx context.Context, opts OverheadOptions, root string) (*overheadFixture, error) {
	fx := &overheadFixture{stateFile: filepath.Join(root, "state.tfstate"), cfg: filepath.Join(root, "config")}
	var state, config, lock []byte
	var err error
	if opts.Mirror == "" {
		if state, config, err = overheadFixtureData(opts.Resources); err != nil {
			return nil, err
		}
	} else {
		if lock, err = testprovider.LockFile(opts.Mirror); err != nil {
			return nil, fmt.Errorf("overhead benchmark: %w", err)
		}
		if state, config, err = providerFixtureData(filepath.Join(root, "api"), opts.Resources, opts.ReadDelay); err != nil {
			return nil, err
		}
		fx.synth = func(apiDir string) error {
			_, err := testprovider.Synthesize(apiDir, opts.Resources, opts.ReadDelay, overheadLineage, 1)
			return err
		}
		cliConfig := filepath.Join(root, testprovider.CLIConfigName)
		tfCache := filepath.Join(root, "terraform-plugins")
		if err := os.MkdirAll(tfCache, 0o700); err != nil {
			return nil, fmt.Errorf("overhead benchmark: %w", err)
		}
		if err := os.WriteFile(cliConfig, []byte(testprovider.CLIConfig(opts.Mirror, tfCache)), 0o600); err != nil {
			return nil, fmt.Errorf("overhead benchmark: %w", err)
		}
		fx.env = []string{"TF_CLI_CONFIG_FILE=" + cliConfig, "KL_PLUGIN_CACHE_DIR=" + filepath.Join(root, "kl-plugins")}
	}
	if err := os.WriteFile(fx.stateFile, state, 0o600); err != nil {
		return nil, fmt.Errorf("overhead benchmark: %w", err)
	}
	cfgFiles := map[string][]byte{"main.tf": config}
	if lock != nil {
		cfgFiles[".terraform.lock.hcl"] = lock
	}
	if err := writeFiles(fx.cfg, cfgFiles); err != nil {
		return nil, err
	}
	fx.files = maps.Clone(cfgFiles)
	fx.files["terraform.tfstate"] = state
	if opts.Mirror != "" {
		if err := warmPluginCaches(ctx, opts, filepath.Join(root, "warm"), fx, lock); err != nil {
			return nil, err
		}
	}
	return fx, nil
}

// warmPluginCaches fills both sides' plugin caches before the first round
// (a one-off install per cache, not what a run costs once a cache is
// there): bare `terraform init` of a configuration with the provider and no
// resources fills Terraform's plugin_cache_dir, `kl plan` of it on an
// empty state kl's plugin cache.
func warmPluginCaches(ctx context.Context, opts OverheadOptions, dir string, fx *overheadFixture, lock []byte) error {
	files := map[string][]byte{"main.tf": []byte(testprovider.RequiredProvidersBlock + "\nprovider \"kltest\" {}\n"), ".terraform.lock.hcl": lock}
	s, err := newOverheadSides(opts, dir, files, fx)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if _, err := s.tf(ctx, "init", "-input=false"); err != nil {
		return fmt.Errorf("overhead benchmark, filling terraform's plugin cache: %w", err)
	}
	if err := writeFiles(filepath.Join(dir, "config"), files); err != nil {
		return err
	}
	if _, err := s.kl(ctx, "state", "init", "bench/warm"); err != nil {
		return fmt.Errorf("overhead benchmark, filling kl's plugin cache: %w", err)
	}
	if _, err := s.kl(ctx, "plan", "--state", "bench/warm", "-C", filepath.Join(dir, "config")); err != nil {
		return fmt.Errorf("overhead benchmark, filling kl's plugin cache: %w", err)
	}
	return nil
}

// overheadRound runs one round in dir; tfFirst puts bare Terraform first in
// each pair.
func overheadRound(ctx context.Context, opts OverheadOptions, dir string, fx *overheadFixture, tfFirst bool) (OverheadRound, error) {
	var round OverheadRound
	defer os.RemoveAll(dir)
	s, err := newOverheadSides(opts, dir, fx.files, fx)
	if err != nil {
		return round, err
	}
	s.tfFirst = tfFirst
	if fx.synth != nil {
		// Each side its own fake cloud API with the state's objects: the
		// apply changes one of them.
		for _, api := range []string{s.klAPI, s.tfAPI} {
			if err := fx.synth(api); err != nil {
				return round, err
			}
		}
	}
	if round.KLStart, err = s.klStart(ctx, fx.stateFile); err != nil {
		return round, err
	}
	planRun, err := s.planPair(ctx, fx.cfg, &round)
	if err != nil {
		return round, err
	}
	if err := overheadBreakdown(ctx, opts, s.tfDir, s.tfEnv, &round); err != nil {
		return round, err
	}
	return round, s.applyPair(ctx, planRun, &round)
}

// overheadSides are the two sides of a round: kl with a store of its own
// in klDir, bare Terraform with the configuration and the state in tfDir.
type overheadSides struct {
	opts         OverheadOptions
	klDir, tfDir string
	// klAPI, tfAPI are the sides' fake cloud API dirs (KLTEST_API_DIR;
	// used with a provider only).
	klAPI, tfAPI string
	klEnv, tfEnv []string
	tfFirst      bool // bare Terraform first in each pair
}

// newOverheadSides prepares the round's dirs below dir, bare Terraform's
// holding files, and the two environments (with fx.env).
func newOverheadSides(opts OverheadOptions, dir string, files map[string][]byte, fx *overheadFixture) (overheadSides, error) {
	s := overheadSides{opts: opts, klDir: filepath.Join(dir, "kl"), tfDir: filepath.Join(dir, "terraform"),
		klAPI: filepath.Join(dir, "kl-api"), tfAPI: filepath.Join(dir, "terraform-api")}
	if err := os.MkdirAll(s.klDir, 0o700); err != nil {
		return s, err
	}
	if err := writeFiles(s.tfDir, files); err != nil {
		return s, err
	}
	s.klEnv = append(append(cleanEnv(os.Environ()), fx.env...),
		"KL_STORE="+filepath.Join(s.klDir, "kl.db"), "KL_WORKDIR="+filepath.Join(s.klDir, "runs"), "KL_TERRAFORM="+opts.Terraform,
		"KL_LOG_LEVEL=debug", "KL_ACTOR=klbench", "KL_KEEP_WORKDIRS=false", "NO_COLOR=1",
		"CHECKPOINT_DISABLE=1", testprovider.EnvAPIDir+"="+s.klAPI)
	s.tfEnv = append(append(cleanEnv(os.Environ()), fx.env...), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", testprovider.EnvAPIDir+"="+s.tfAPI)
	return s, nil
}

// kl runs kl with args in klDir.
func (s overheadSides) kl(ctx context.Context, args ...string) (commandResult, error) {
	return runCommand(ctx, s.klDir, s.klEnv, s.opts.KL, args...)
}

// tf runs bare Terraform with args in tfDir.
func (s overheadSides) tf(ctx context.Context, args ...string) (commandResult, error) {
	return runCommand(ctx, s.tfDir, s.tfEnv, s.opts.Terraform, args...)
}

// pair runs the two steps of a pair back to back, in the round's order.
func (s overheadSides) pair(klStep, tfStep func() error) error {
	first, second := klStep, tfStep
	if s.tfFirst {
		first, second = tfStep, klStep
	}
	if err := first(); err != nil {
		return err
	}
	return second()
}

// klStart adopts stateFile into kl's store (not timed) and returns the
// wall time of `kl state list`, kl's fixed start cost.
func (s overheadSides) klStart(ctx context.Context, stateFile string) (time.Duration, error) {
	if _, err := s.kl(ctx, "state", "init", overheadStateName, "--from", stateFile); err != nil {
		return 0, err
	}
	list, err := s.kl(ctx, "state", "list")
	if err != nil {
		return 0, err
	}
	return list.Wall, nil
}

// planPair times `kl plan -C cfg` beside `terraform init` + `plan -out`
// into round and returns kl's plan run.
func (s overheadSides) planPair(ctx context.Context, cfg string, round *OverheadRound) (string, error) {
	var planRun string
	err := s.pair(func() error {
		res, err := s.kl(ctx, "--json", "plan", "--state", overheadStateName, "-C", cfg)
		if err != nil {
			return err
		}
		round.KLPlan, round.KLPlanCPU, round.PlanSteps = res.Wall, res.CPU, StepTimings(res.Stderr)
		if planRun, err = runStatus(res.Stdout, "planned"); err != nil {
			return fmt.Errorf("kl plan: %w", err)
		}
		return nil
	}, func() error {
		init, err := s.tf(ctx, "init", "-input=false")
		if err != nil {
			return err
		}
		plan, err := s.tf(ctx, "plan", "-input=false", "-out=plan.tfplan")
		if err != nil {
			return err
		}
		round.TFInit, round.TFPlan, round.TFInitCPU, round.TFPlanCPU = init.Wall, plan.Wall, init.CPU, plan.CPU
		return nil
	})
	return planRun, err
}

// applyPair times `kl apply planRun` beside `terraform apply PLAN` into
// round.
func (s overheadSides) applyPair(ctx context.Context, planRun string, round *OverheadRound) error {
	return s.pair(func() error {
		res, err := s.kl(ctx, "--json", "apply", planRun)
		if err != nil {
			return err
		}
		round.KLApply, round.KLApplyCPU, round.ApplySteps = res.Wall, res.CPU, StepTimings(res.Stderr)
		if _, err := runStatus(res.Stdout, "applied"); err != nil {
			return fmt.Errorf("kl apply: %w", err)
		}
		return nil
	}, func() error {
		res, err := s.tf(ctx, "apply", "-input=false", "-auto-approve", "plan.tfplan")
		round.TFApply, round.TFApplyCPU = res.Wall, res.CPU
		return err
	})
}

// overheadLineage is the lineage of the benchmark's synthetic states.
const overheadLineage = "b3c5e1d4-0000-4000-8000-00000000be4c"

// overheadFixtureData returns the synthetic state of n terraform_data
// resources and its configuration with changedResource's input changed: a
// plan of one update.
func overheadFixtureData(n int) (state, config []byte, err error) {
	state, err = tfstate.SynthesizeTerraformData(n, 0, overheadLineage, 1).Marshal()
	if err != nil {
		return nil, nil, fmt.Errorf("overhead benchmark: synthesizing state: %w", err)
	}
	config = tfstate.SynthesizeTerraformDataConfig(n, 0)["main.tf"]
	old := fmt.Appendf(nil, "input = %q\n", changedResource)
	if bytes.Count(config, old) != 1 {
		return nil, nil, fmt.Errorf("overhead benchmark: %s is not in the synthetic configuration of %d resources", changedResource, n)
	}
	config = bytes.Replace(config, old, fmt.Appendf(nil, "input = %q\n", changedResource+"-changed"), 1)
	return state, config, nil
}

// providerFixtureData returns the synthetic state of n kltest_object
// resources of the given delay (testprovider.Synthesize, its objects
// written into apiDir) and their configuration with changedResource's name
// changed: a plan of one update in place.
func providerFixtureData(apiDir string, n int, delay string) (state, config []byte, err error) {
	if state, err = testprovider.Synthesize(apiDir, n, delay, overheadLineage, 1); err != nil {
		return nil, nil, fmt.Errorf("overhead benchmark: %w", err)
	}
	config = testprovider.SynthesizeConfig(n, delay)
	old := fmt.Appendf(nil, "name  = %q\n", changedResource)
	if bytes.Count(config, old) != 1 {
		return nil, nil, fmt.Errorf("overhead benchmark: %s is not in the synthetic configuration of %d resources", changedResource, n)
	}
	config = bytes.Replace(config, old, fmt.Appendf(nil, "name  = %q\n", changedResource+"-changed"), 1)
	return state, config, nil
}

// writeFiles writes name → content below dir (0700 dirs, 0600 files).
func writeFiles(dir string, files map[string][]byte) error {
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", p, err)
		}
	}
	return nil
}

// runStatus reads the run id from kl's JSON output and checks its status.
func runStatus(out []byte, want string) (string, error) {
	var doc struct {
		Run struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"run"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return "", fmt.Errorf("reading JSON output: %w", err)
	}
	if doc.Run.Status != want {
		return "", fmt.Errorf("run %s is %q, want %q", doc.Run.ID, doc.Run.Status, want)
	}
	return doc.Run.ID, nil
}

// overheadBreakdown times, in an initialized dir holding plan.tfplan, the
// steps kl takes that bare Terraform does not: `plan -json`, `show -json`,
// `version`, and reading the plan JSON in-process as kl's runner does. It
// leaves the state untouched (a plan does not write it).
func overheadBreakdown(ctx context.Context, opts OverheadOptions, dir string, env []string, round *OverheadRound) error {
	res, err := runCommand(ctx, dir, env, opts.Terraform, "plan", "-json", "-input=false", "-out=plan-json.tfplan")
	if err != nil {
		return err
	}
	round.TFPlanJSON, round.TFPlanJSONCPU = res.Wall, res.CPU
	res, err = runCommand(ctx, dir, env, opts.Terraform, "show", "-json", "plan.tfplan")
	if err != nil {
		return err
	}
	raw := res.Stdout
	round.TFShow, round.TFShowCPU, round.PlanJSONBytes = res.Wall, res.CPU, len(raw)
	if res, err = runCommand(ctx, dir, env, opts.Terraform, "version", "-json"); err != nil {
		return err
	}
	round.TFVersion = res.Wall
	t0 := time.Now()
	plan, err := terraform.ParsePlanJSON(raw)
	if err != nil {
		return err
	}
	round.ParseJSON = time.Since(t0)
	t0 = time.Now()
	fp, err := terraform.ExtractFootprint(plan, terraform.ExtractOptions{ConfigDir: dir})
	if err != nil {
		return err
	}
	round.Footprint = time.Since(t0)
	if got := fp.Write.Strings(); len(got) != 1 {
		return fmt.Errorf("the plan writes %v, want one resource (%s)", got, changedResource)
	}
	t0 = time.Now()
	if _, err := terraform.ExtractIntent(plan); err != nil {
		return err
	}
	round.Intent = time.Since(t0)
	return nil
}

// cleanEnv drops from env what terraform-exec refuses to pass to Terraform
// (TF_VAR_*, TF_CLI_ARGS*, TF_LOG*, TF_WORKSPACE, TF_DATA_DIR…) and any KL_*
// setting, so that kl's Terraform and bare Terraform see the same
// environment.
func cleanEnv(env []string) []string {
	m := map[string]string{}
	var keys []string
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.HasPrefix(k, "KL_") {
			continue
		}
		if _, seen := m[k]; !seen {
			keys = append(keys, k)
		}
		m[k] = v
	}
	m = tfexec.CleanEnv(m)
	delete(m, "TF_DATA_DIR")
	out := make([]string, 0, len(m))
	for _, k := range keys {
		if v, ok := m[k]; ok {
			out = append(out, k+"="+v)
		}
	}
	return out
}

// commandResult is one finished command: its output, its wall time, and
// its CPU time (user + system, including the child processes it waited for:
// kl's Terraform processes count to kl). CPU time is far less sensitive
// than wall time to other load on a shared machine.
type commandResult struct {
	Stdout, Stderr []byte
	Wall, CPU      time.Duration
}

// runCommand runs bin with args in dir; a failure carries the end of
// stderr.
func runCommand(ctx context.Context, dir string, env []string, bin string, args ...string) (commandResult, error) {
	var out, errb bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	res := commandResult{Wall: time.Since(t0)}
	if ps := cmd.ProcessState; ps != nil {
		res.CPU = ps.UserTime() + ps.SystemTime()
	}
	if err != nil {
		tail := errb.Bytes()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return res, fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, tail)
	}
	res.Stdout, res.Stderr = out.Bytes(), errb.Bytes()
	return res, nil
}

// logLine matches a log/slog text-handler line with a message and an
// elapsed duration.
var logLine = regexp.MustCompile(`\bmsg=("(?:[^"\\]|\\.)*"|\S+).*?\belapsed=(\S+)`)

// StepTimings reads kl's debug log (slog text lines) and returns the
// elapsed attribute by message ("terraform init done" → 412ms). A message
// logged twice sums; lines without an elapsed attribute are ignored.
func StepTimings(log []byte) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, line := range strings.Split(string(log), "\n") {
		m := logLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		msg := m[1]
		if strings.HasPrefix(msg, `"`) {
			var s string
			if json.Unmarshal([]byte(msg), &s) != nil {
				continue
			}
			msg = s
		}
		d, err := time.ParseDuration(m[2])
		if err != nil {
			continue
		}
		out[msg] += d
	}
	return out
}
