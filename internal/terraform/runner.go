package terraform

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/terraform-exec/tfexec"
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/plandiff"
)

var (
	_ engine.Terraform      = (*Runner)(nil)
	_ engine.WorkDirRemover = (*Runner)(nil)
)

// RunnerOptions configures a Runner.
type RunnerOptions struct {
	// WorkRoot is the parent of the per-run work dirs (e.g. ".kl/runs");
	// created 0700 when missing.
	WorkRoot string
	// Binary is the terraform or tofu executable (see FindBinary).
	Binary string
	// Env is the caller's environment as KEY=VALUE entries, passed to
	// Terraform (PATH, HOME, TF_CLI_CONFIG_FILE, TF_PLUGIN_CACHE_DIR,
	// proxies, cloud credentials…) minus Kilolock's own (KL_*, KLBOT_*) and
	// minus the other variables terraform-exec refuses (TF_CLI_ARGS*,
	// TF_WORKSPACE, TF_INPUT, TF_IN_AUTOMATION, TF_LOG*…: logged once as a
	// warning). TF_VAR_* reach Terraform as its environment, through the
	// shim (shim.go): with their own, lowest, precedence, never on a command
	// line. Every TF_VAR_* of Env is passed: a caller that must pass fewer
	// (klbot: KLBOT_TF_VARS) leaves the others out of Env. Later entries win
	// over earlier ones of the same key. nil means os.Environ().
	Env []string
	// KeepWorkDirs leaves each run's work dir in place after the call, for
	// debugging. It holds the state and the plan: secrets; a kept work dir
	// is made private (dirs 0700, files 0600, executables 0700), Terraform's
	// own files included.
	KeepWorkDirs bool
	// StaleAfter: NewRunner removes the work dirs under WorkRoot that
	// nothing touched for this long — left by runs whose process was killed
	// before its cleanup (removeStaleWorkDirs). 0 means DefaultStaleAfter
	// (24 h, far longer than any lease); negative, or KeepWorkDirs, disables
	// it.
	StaleAfter time.Duration
	// Logger receives the runner's logs (nil: discarded). Terraform-exec's
	// own command log goes to it at debug level.
	Logger *slog.Logger
	// InterruptGrace is how long a Terraform command has to end after its
	// context is cancelled — terraform-exec then sends SIGINT — before it
	// is killed (SIGKILL) and its output pipes are closed (exec.Cmd's
	// WaitDelay). 0 means terraform-exec's default, 60 s; negative is
	// engine.ErrInvalid. It bounds two waits (measured: ADR 0043):
	// an apply that finishes its resource operations in flight first, and
	// a provider Terraform left behind holding its output open. A killed
	// apply's error says so (CommandError.Killed): the engine fences it.
	// klbot sets it from KLBOT_SHUTDOWN_TIMEOUT (ADR 0043).
	InterruptGrace time.Duration
	// PluginCacheDir is Kilolock's provider plugin cache (ADR 0061: kl's
	// .kl/plugins, klbot's KLBOT_WORKDIR/plugins), created 0700 when
	// missing; "" means none (Terraform installs providers as its CLI
	// configuration says). With one, every run's providers come from it:
	// filled before the run's init (one install per provider version at a
	// time, across processes: a file lock), checked against the root
	// module's .terraform.lock.hcl (h1: hashes), and copied into the run's
	// own work dir, its TF_PLUGIN_CACHE_DIR — replacing a TF_PLUGIN_CACHE_DIR
	// or plugin_cache_dir of the caller's, which Terraform would share
	// between runs unsafely (runatlantis/atlantis#5364). Disk: one package
	// per provider version, plus one copy per run in progress.
	PluginCacheDir string
}

// Runner runs Terraform through terraform-exec for one run at a time in an
// isolated work dir per call (WorkRoot/<run id>/: its own TF_DATA_DIR, its
// own config copy and a local backend whose path is its own snapshot file —
// docs/terraform.md "Running many Terraform processes on one state safely"). It
// implements engine.Terraform and is safe for concurrent use by different
// runs; two calls for the same run id at once fail with engine.ErrConflict.
type Runner struct {
	workRoot string
	binary   string
	env      []string
	keep     bool
	log      *slog.Logger
	// shim is this program's executable, run by terraform-exec in place of
	// binary when env has TF_VAR_* (shim.go); "" when it has none, or when
	// there is no shim (the variables are then dropped, with a warning).
	shim string
	// vars are the TF_VAR_* of env (TF_VAR_NAME → value), handed to
	// Terraform through the shim: all of them to a plan, those of
	// ephemeral variables to an apply (ephemeral.go).
	vars map[string]string
	// mask masks vars' values in logs and errors (redact.go).
	mask masker

	// grace is RunnerOptions.InterruptGrace (0: terraform-exec's default).
	grace time.Duration
	// cache is the plugin cache (RunnerOptions.PluginCacheDir); nil: none.
	cache *pluginCache

	versionMu sync.Mutex
	version   string
}

// NewRunner checks opts and returns a Runner. Binary is resolved once: a
// bare name is looked up on the process's PATH, a relative path against the
// current directory (Terraform runs in each work dir, where a relative path
// would no longer resolve). Unless KeepWorkDirs, it removes the work dirs
// killed runs left under WorkRoot (RunnerOptions.StaleAfter): best effort,
// never an error.
//
// Terraform runs the configuration's code (a pull request's, in klbot) as
// this process's user, so NewRunner marks the process non-dumpable on
// Linux (protectProcess: its environment and memory are not readable
// through /proc by that code), and Kilolock's own variables are never in
// Terraform's environment (terraformEnv). TF_VAR_* of Env reach Terraform
// through this program as a shim (shim.go): their names are logged at info,
// their values masked in the Runner's logs and errors (redact.go).
//
// Errors: an empty WorkRoot or a negative InterruptGrace
// (engine.ErrInvalid); a WorkRoot that is not a directory or cannot be
// created; an empty Binary, or one that is missing, a directory or not
// executable (ErrNoBinary).
func NewRunner(opts RunnerOptions) (*Runner, error) {
	if opts.WorkRoot == "" {
		return nil, engine.Errorf(engine.ErrInvalid, "creating terraform runner: RunnerOptions.WorkRoot is empty "+
			"(it is the parent of the per-run work dirs, e.g. .kl/runs)")
	}
	if opts.InterruptGrace < 0 {
		return nil, engine.Errorf(engine.ErrInvalid, "creating terraform runner: RunnerOptions.InterruptGrace is %s: want 0 (terraform-exec's 60 s) or more", opts.InterruptGrace)
	}
	bin, err := resolveBinary(opts.Binary)
	if err != nil {
		return nil, fmt.Errorf("creating terraform runner: %w", err)
	}
	root, err := filepath.Abs(opts.WorkRoot)
	if err != nil {
		return nil, fmt.Errorf("creating terraform runner: resolving work root %s: %w", opts.WorkRoot, err)
	}
	if fi, err := os.Stat(root); err == nil && !fi.IsDir() {
		return nil, engine.Errorf(engine.ErrInvalid, "creating terraform runner: work root %s is not a directory", root)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("creating terraform runner: creating work root: %w", err)
	}
	env := opts.Env
	if env == nil {
		env = os.Environ()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Terraform runs the configuration's code as this process's user: it
	// must not read this process's environment or memory through /proc.
	if err := protectProcess(); err != nil {
		log.Warn("could not mark the process non-dumpable: Terraform could read its environment through /proc", "err", err)
	}
	_, vars, dropped := terraformEnv(env, "")
	mask := newMasker(vars)
	log = mask.logger(log)
	shim := runnerShim(vars, dropped, log)
	if stale := opts.StaleAfter; !opts.KeepWorkDirs && stale >= 0 {
		if stale == 0 {
			stale = DefaultStaleAfter
		}
		removeStaleWorkDirs(root, stale, time.Now(), log)
	}
	var cache *pluginCache
	if opts.PluginCacheDir != "" {
		if cache, err = newPluginCache(opts.PluginCacheDir, DefaultStaleAfter, log); err != nil {
			return nil, fmt.Errorf("creating terraform runner: %w", err)
		}
	}
	return &Runner{workRoot: root, binary: bin, env: env, keep: opts.KeepWorkDirs, log: log, shim: shim, vars: vars, mask: mask,
		grace: opts.InterruptGrace, cache: cache}, nil
}

// runnerShim logs, once, the variables that do not reach Terraform
// (dropped: terraform-exec refuses them) and the TF_VAR_* names that do
// (vars), and returns the shim executable when there are TF_VAR_* to pass
// (shimExecutable); "" when there are none or there is no shim — then they
// are dropped too, with the reason. Only names are logged, never values.
func runnerShim(vars map[string]string, dropped []string, log *slog.Logger) string {
	if len(dropped) > 0 {
		log.Warn("environment variables not passed to terraform (terraform-exec refuses them; use var files)",
			"variables", dropped)
	}
	if len(vars) == 0 {
		return ""
	}
	names := slices.Sorted(maps.Keys(vars))
	shim, err := shimExecutable()
	if err != nil {
		log.Warn("TF_VAR_* variables not passed to terraform: no shim to pass them (use var files)",
			"variables", names, "error", err)
		return ""
	}
	log.Info("TF_VAR_* variables reach terraform as its environment, through this program as an exec shim",
		"variables", names, "shim", shim)
	return shim
}

// resolveBinary returns RunnerOptions.Binary as an absolute path to an
// executable file, or an error wrapping ErrNoBinary that says what is wrong.
func resolveBinary(bin string) (string, error) {
	if bin == "" {
		return "", fmt.Errorf("RunnerOptions.Binary is empty (FindBinary resolves it from KL_TERRAFORM and PATH): %w", ErrNoBinary)
	}
	p := bin
	if !strings.ContainsRune(bin, os.PathSeparator) && !strings.Contains(bin, "/") {
		lp, err := exec.LookPath(bin)
		if err != nil {
			return "", fmt.Errorf("terraform binary %q: not found on PATH: %w", bin, ErrNoBinary)
		}
		p = lp
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", fmt.Errorf("terraform binary %q: %w: %w", bin, ErrNoBinary, err)
	}
	if err := isExecutable(abs); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("terraform binary %s: no such file: %w", abs, ErrNoBinary)
		}
		return "", fmt.Errorf("terraform binary %q: %w: %w", bin, ErrNoBinary, err)
	}
	return abs, nil
}

// Plan copies the configuration (req.Dir with its local modules and
// req.VarFiles, or the archive req.Config of an earlier plan) into the
// run's work dir, writes req.Snapshot as the run's state, runs `init`,
// `plan -out` (with -target and -var-file) and `show -json`, and derives
// the footprint, intent and summary. Lineage and Serial come from the plan
// file's tfstate entry. With req.Progress set the plan runs with -json and
// progress is reported, at most ~5 times a second: "init", "plan" (Done =
// resources refreshed, Current = the resource at hand, Total unknown: 0),
// "show".
//
// With req.Config, the var files are the archive's (.kl-varfiles/); a
// non-empty req.VarFiles must then name the same files (by base name, in
// order), else engine.ErrInvalid.
//
// A root module without configuration files (*.tf, *.tf.json; override
// files alone do not count) is refused with engine.ErrInvalid before
// anything is written: Terraform would plan to destroy every resource of
// the state (see checkConfigDir).
//
// Every TF_VAR_* of the Runner's environment reaches Terraform (through
// the shim, shim.go), whose own precedence puts var files and *.tfvars
// above them; their values are masked in the errors (redact.go).
//
// req.Options are Terraform's plan options (-destroy, -refresh-only,
// -refresh=false, -parallelism=N: planOptions; a refresh-only plan's
// footprint, intent and diff come from its resource_drift: derivePlan).
// req.Vars, the -var values, reach Terraform as TF_CLI_ARGS_plan through
// the shim, after the var files and with -var's precedence, never on a
// command line (cliargs.go); they are masked like TF_VAR_* values, as
// "(value of -var NAME)", in the logs, the errors and the diff (ADR 0045).
// Terraform's diagnostics — a failed plan's error, the warnings logged —
// are masked too, as "(sensitive value)", of the values req.Snapshot marks
// sensitive, those the var files and defaults give the variables the root
// module declares sensitive, and, once the plan succeeded, those its plan
// JSON marks (maskPlan, ADR 0047).
//
// Errors: engine.ErrInvalid for a bad request, configuration or archive;
// engine.ErrConflict when the run's work dir exists; a *CommandError
// (carrying Terraform's diagnostics) when Terraform fails; errors.Is(err,
// context.Canceled) after cancellation. Errors do not name the run: the
// caller (the engine) does.
func (r *Runner) Plan(ctx context.Context, req engine.PlanRequest) (_ *engine.PlanResult, err error) {
	mask := r.maskFor(req.Vars)
	defer func() { err = mask.error(err) }()
	log := mask.logger(r.log).With("run", req.Run, "op", "plan")
	start := time.Now()
	if err := checkPlanRequest(req); err != nil {
		return nil, err
	}
	archive, err := planArchive(req, log)
	if err != nil {
		return nil, err
	}
	w, err := newWorkDir(r.workRoot, req.Run)
	if err != nil {
		return nil, err
	}
	defer r.cleanup(w, log)
	varFiles, err := w.restorePlanInputs(archive, req)
	if err != nil {
		return nil, err
	}
	// Terraform truncates an existing plan file and keeps its mode: 0600,
	// not the 0644 it would create.
	if err := os.WriteFile(w.PlanFile, nil, 0o600); err != nil {
		return nil, fmt.Errorf("creating saved plan file: %w", err)
	}
	rep := newProgressReporter(req.Progress)
	defer rep.stop()

	notes, err := r.providers(ctx, &w, log)
	if err != nil {
		return nil, err
	}
	args := planCLIArgs(w, varFiles, req.Vars)
	tf, err := r.newTF(w, r.vars, args, log)
	if err != nil {
		return nil, err
	}
	if err := r.init(ctx, tf, w, rep, log); err != nil {
		return nil, err
	}
	notes = append(notes, r.lockNotes(w, log)...)
	plan, err := r.plan(ctx, tf, w, req, varFiles, args != nil, rep, log)
	if err != nil {
		return nil, err
	}
	res, err := r.planResult(ctx, tf, w, plan, archive, req)
	if err != nil {
		return nil, err
	}
	res.Notes = notes
	log.Info("plan done", "elapsed", time.Since(start), "serial", res.Serial, "digest", res.Digest,
		"write", len(res.Footprint.Write), "read", len(res.Footprint.Read))
	return res, nil
}

// checkPlanRequest checks the plan options and -var values of req
// (engine.PlanOptions.Check, engine.CheckVars), and that the options name
// the variables the values are for. Errors wrap engine.ErrInvalid and
// never quote a value.
func checkPlanRequest(req engine.PlanRequest) error {
	if err := errors.Join(req.Options.Check(), engine.CheckVars(req.Vars)); err != nil {
		return err
	}
	if !slices.Equal(req.Options.Vars, engine.VarNames(req.Vars)) {
		return engine.Errorf(engine.ErrInvalid, "the plan options name the variables %v, but -var values are given for %v", req.Options.Vars, engine.VarNames(req.Vars))
	}
	return nil
}

// planCLIArgs is TF_CLI_ARGS_plan of a plan with -var values (cliArgs:
// the var files, then the -var options; cliargs.go), nil without any.
func planCLIArgs(w workDir, varFiles []string, vars []engine.Var) map[string]string {
	if len(vars) == 0 {
		return nil
	}
	return map[string]string{argsPrefix + "plan": cliArgs(w.varFilePaths(varFiles), vars)}
}

// maskFor is the Runner's masker, extended by the -var values of one call
// (varMasks): "(value of -var NAME)".
func (r *Runner) maskFor(vars []engine.Var) masker {
	if len(vars) == 0 {
		return r.mask
	}
	all := varMasks(vars)
	maps.Copy(all, r.vars)
	return newMasker(all)
}

// planArchive returns the configuration archive of a plan request: req.Config,
// or one built from req.Dir (its root module checked by checkConfigDir first)
// and req.VarFiles. Exactly one of Dir and Config is set, else
// engine.ErrInvalid.
func planArchive(req engine.PlanRequest, log *slog.Logger) ([]byte, error) {
	if (req.Dir == "") == (len(req.Config) == 0) {
		return nil, engine.Errorf(engine.ErrInvalid, "set exactly one of Dir and Config")
	}
	if req.Dir == "" {
		return req.Config, nil
	}
	dir, err := filepath.Abs(req.Dir)
	if err != nil {
		return nil, fmt.Errorf("resolving configuration dir %s: %w", req.Dir, err)
	}
	if err := checkConfigDir(dir, dir); err != nil {
		return nil, err
	}
	return buildConfigArchive(dir, req.VarFiles, log)
}

// restorePlanInputs restores archive into the work dir and writes
// req.Snapshot as the run's state; it returns the archive names of the var
// files. With req.Config, a non-empty req.VarFiles must name the archive's
// var files (sameVarFiles).
func (w *workDir) restorePlanInputs(archive []byte, req engine.PlanRequest) ([]string, error) {
	rc, err := w.restore(archive)
	if err != nil {
		return nil, err
	}
	if len(req.Config) > 0 && len(req.VarFiles) > 0 {
		if err := sameVarFiles(req.VarFiles, rc.VarFiles); err != nil {
			return nil, err
		}
	}
	if err := w.writeSnapshot(req.Snapshot); err != nil {
		return nil, err
	}
	return rc.VarFiles, nil
}

// plan runs `terraform plan` (runPlan) and `show -json` of the saved plan
// in w, and returns the parsed plan JSON. Terraform's diagnostics — the
// error of a failed plan or show, the warnings logged — are masked first
// (maskPlan: with the plan JSON's marks once there is one); varFilesInEnv
// is planOptions'.
func (r *Runner) plan(ctx context.Context, tf *tfexec.Terraform, w workDir, req engine.PlanRequest, varFiles []string, varFilesInEnv bool,
	rep *progressReporter, log *slog.Logger) (*tfjson.Plan, error) {
	opts := planOptions(w, varFiles, req.Targets, req.Replace, req.Options, varFilesInEnv)
	stream, err := runPlan(ctx, tf, opts, req.Progress != nil, rep, log)
	var plan *tfjson.Plan
	if err == nil {
		var raw []byte
		var decoded *tfjson.Plan
		if raw, decoded, err = showPlan(ctx, tf, w, rep, log); err == nil {
			plan, err = parsePlanJSON(raw, decoded)
		}
	}
	r.maskPlan(w, req, varFiles, plan, stream, err, log)
	stream.logWarnings()
	return plan, err
}

// runPlan runs `terraform plan` with opts; with progress, as `plan -json`
// whose UI stream reports the refresh to rep, and is returned (nil
// without progress) with its diagnostics not yet masked nor logged.
func runPlan(ctx context.Context, tf *tfexec.Terraform, opts []tfexec.PlanOption, progress bool, rep *progressReporter, log *slog.Logger) (*uiStream, error) {
	t := time.Now()
	rep.phase(phasePlan)
	var err error
	var stream *uiStream
	if progress {
		stream = newUIStream(phasePlan, rep, log)
		err = runCommand(ctx, tf, "plan", stream, func() error {
			_, err := tf.PlanJSON(ctx, stream, opts...)
			stream.close()
			tf.SetStdout(nil)
			return err
		})
	} else {
		err = runCommand(ctx, tf, "plan", nil, func() error {
			_, err := tf.Plan(ctx, opts...)
			return err
		})
	}
	if err != nil {
		return stream, err
	}
	log.Debug("terraform plan done", "elapsed", time.Since(t))
	return stream, nil
}

// showPlan runs `terraform show -json` on the saved plan and returns its
// output, and the plan terraform-exec decoded from it (with JSON numbers,
// as ParsePlanJSON decodes: parsePlanJSON takes it rather than decoding the
// output a second time).
func showPlan(ctx context.Context, tf *tfexec.Terraform, w workDir, rep *progressReporter, log *slog.Logger) ([]byte, *tfjson.Plan, error) {
	t := time.Now()
	rep.phase(phaseShow)
	var raw bytes.Buffer
	var plan *tfjson.Plan
	err := runCommand(ctx, tf, "show", nil, func() error {
		tf.SetStdout(&raw)
		defer tf.SetStdout(nil)
		var err error
		plan, err = tf.ShowPlanFile(ctx, w.rel(w.PlanFile), tfexec.JSONNumber(true))
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	log.Debug("terraform show done", "elapsed", time.Since(t), "bytes", raw.Len())
	return raw.Bytes(), plan, nil
}

// planResult derives the PlanResult from the plan JSON and the saved plan
// file in w: footprint, intent, summary and diff from the JSON
// (derivePlan), lineage and serial from the plan file's tfstate entry, the
// digest of the plan file.
func (r *Runner) planResult(ctx context.Context, tf *tfexec.Terraform, w workDir, plan *tfjson.Plan, archive []byte, req engine.PlanRequest) (*engine.PlanResult, error) {
	res, err := r.derivePlan(plan, w, req)
	if err != nil {
		return nil, err
	}
	planFile, err := os.ReadFile(w.PlanFile)
	if err != nil {
		return nil, fmt.Errorf("reading saved plan: %w", err)
	}
	info, err := inspectPlanFile(planFile)
	if err != nil {
		return nil, err
	}
	// The plan JSON names the Terraform that made it: no `terraform
	// version` process needed.
	tfVersion := plan.TerraformVersion
	if tfVersion == "" {
		if tfVersion, err = r.terraformVersion(ctx, tf); err != nil {
			return nil, err
		}
	}
	sum := sha256.Sum256(planFile)
	res.PlanFile, res.Digest, res.Config = planFile, "sha256:"+hex.EncodeToString(sum[:]), archive
	res.JSON = plan
	res.Lineage, res.Serial, res.TerraformVersion = info.Lineage, info.Serial, tfVersion
	return res, nil
}

// derivePlan derives footprint, intent, summary and diff from plan (the
// diff masks what req.Snapshot, the state planned against, marks
// sensitive, and the TF_VAR_* and -var values as the masker does:
// plandiff.Build). A refresh-only plan (req.Options.RefreshOnly) changes
// what the refresh found changed outside Terraform: Terraform leaves its
// resource_changes empty and lists those objects in resource_drift, so
// they are its write set and its intent (RefreshOnlyView), counted as
// Refresh in its summary, and its diff shows them as Terraform does,
// changed outside Terraform (ADR 0045).
func (r *Runner) derivePlan(plan *tfjson.Plan, w workDir, req engine.PlanRequest) (*engine.PlanResult, error) {
	secrets := slices.Collect(maps.Values(r.vars))
	for _, v := range req.Vars {
		secrets = append(secrets, v.Value)
	}
	diff, err := plandiff.Build(plan, plandiff.Options{PriorState: req.Snapshot, Secrets: secrets, RefreshOnly: req.Options.RefreshOnly})
	if err != nil {
		return nil, err
	}
	fp, sum, err := PlanFootprint(plan, ExtractOptions{ConfigDir: w.Root, ModulesManifest: w.modulesManifest(), RefreshOnly: req.Options.RefreshOnly})
	if err != nil {
		return nil, fmt.Errorf("extracting footprint: %w", err)
	}
	view := plan
	if req.Options.RefreshOnly {
		view = RefreshOnlyView(plan)
	}
	intent, err := ExtractIntent(view)
	if err != nil {
		return nil, fmt.Errorf("extracting intent: %w", err)
	}
	return &engine.PlanResult{Footprint: fp, Intent: intent, Summary: sum, Diff: diff, Planned: plandiff.PlannedOf(plan)}, nil
}

// Apply restores req.Config into the run's work dir, writes req.Snapshot as
// the run's state and req.PlanFile as plan.tfplan (and the plan's own
// .terraform.lock.hcl, so init selects the providers the plan was made
// with), and runs `apply -json plan.tfplan`. Terraform checks the
// snapshot's lineage and serial against the plan's (docs/terraform.md
// "Staleness"). With the plugin cache, no `terraform init` runs: the
// providers are linked into the data dir from the run's verified copies,
// and Terraform checks them against the plan's lock file when the apply
// starts (linkProviders); without it, or when a provider could not be
// taken from it, `init` runs first with the same relative backend path as
// the plan.
//
// The result is never nil: State holds the state file after the call — what
// Terraform wrote, also when the apply failed or was cancelled (Terraform
// persists partial state on error and on SIGINT, which terraform-exec sends
// on cancellation); Terraform's errored.tfstate is preferred when it had to
// write one; req.Snapshot when Terraform wrote nothing. Changed counts the
// resource instances Terraform reported done (apply_complete; a replace
// counts once). Progress: "init" (linking or init), then "apply" with Done of Total planned
// changes (≤5 reports a second). Checkpoint, when set, gets the state file
// as Terraform rewrites it (see engine.ApplyRequest.Checkpoint: after a
// resource completed or errored, at most every 2 s, only changed bytes,
// once more at the end), from a goroutine of its own (checkpointer).
//
// Log is what Terraform's UI stream said it did (engine.ApplyLog, ADR
// 0047): per resource instance, every diagnostic, the totals line — also
// after a failure or an interrupt. The values the plan and the states mark
// sensitive, and the TF_VAR_* values, are masked in its diagnostics and in
// the *CommandError's (maskApply: a `terraform show -json` of the saved
// plan, run only when there are diagnostics or stderr to mask).
//
// Terraform gets only the TF_VAR_* and the -var values (req.Vars) of the
// root module's ephemeral variables (applyVars): the saved plan holds
// every other value. req.Parallelism, the plan's -parallelism, bounds the
// apply too.
//
// Errors: as Plan (a Config whose root module has no configuration files
// too: its plan would destroy everything); a Terraform failure is a
// *CommandError holding the diagnostics; errors.Is(err, context.Canceled)
// after cancellation. Errors do not name the run: the engine does.
func (r *Runner) Apply(ctx context.Context, req engine.ApplyRequest) (_ *engine.ApplyResult, err error) {
	mask := r.maskFor(req.Vars)
	defer func() { err = mask.error(err) }()
	log := mask.logger(r.log).With("run", req.Run, "op", "apply")
	start := time.Now()
	res := &engine.ApplyResult{State: req.Snapshot}
	if len(req.PlanFile) == 0 || len(req.Config) == 0 {
		return res, engine.Errorf(engine.ErrInvalid, "PlanFile and Config are required")
	}
	w, err := newWorkDir(r.workRoot, req.Run)
	if err != nil {
		return res, err
	}
	defer r.cleanup(w, log)
	err = r.apply(ctx, &w, req, res, log) // sets w.Root, which readState needs for errored.tfstate
	if st, serr := w.readState(log); serr != nil {
		err = errors.Join(err, serr)
	} else if st != nil {
		res.State = st
	}
	if err != nil {
		return res, err
	}
	log.Info("apply done", "elapsed", time.Since(start), "changed", res.Changed)
	return res, nil
}

func (r *Runner) apply(ctx context.Context, w *workDir, req engine.ApplyRequest, res *engine.ApplyResult, log *slog.Logger) error {
	if _, err := w.restore(req.Config); err != nil {
		return err
	}
	if err := w.writeSnapshot(req.Snapshot); err != nil {
		return err
	}
	if err := os.WriteFile(w.PlanFile, req.PlanFile, 0o600); err != nil {
		return fmt.Errorf("writing saved plan: %w", err)
	}
	if err := w.writePlanLockFile(req.PlanFile); err != nil {
		return err
	}
	rep := newProgressReporter(req.Progress)
	defer rep.stop()
	notes, err := r.providers(ctx, w, log)
	res.Notes = notes
	if err != nil {
		return err
	}
	vars, args := r.applyVars(*w, req.Vars, log)
	tf, err := r.newTF(*w, vars, args, log)
	if err != nil {
		return err
	}
	if err := r.applyInit(ctx, tf, *w, rep, log); err != nil {
		return err
	}
	res.Notes = append(res.Notes, r.lockNotes(*w, log)...)
	t := time.Now()
	rep.phase(phaseApply)
	cp := newCheckpointer(req.Checkpoint, w.Snapshot, req.Snapshot, log)
	defer cp.finish() // before the work dir is removed
	stream := newUIStream(phaseApply, rep, log)
	stream.wrote = cp.kick
	err = runCommand(ctx, tf, "apply", stream, func() error {
		err := tf.ApplyJSON(ctx, stream, applyOptions(*w, req.Parallelism)...)
		stream.close()
		tf.SetStdout(nil)
		return err
	})
	// Terraform quotes sensitive values in its diagnostics: mask them
	// before they are logged, kept in the apply log or in the run's end.
	r.maskApply(ctx, tf, *w, req.Snapshot, stream, err, r.maskFor(req.Vars), log) // the TF_VAR_* and -var values too
	stream.logWarnings()
	res.Log = stream.applyLog()
	res.Changed = len(stream.applied)
	log.Debug("terraform apply done", "elapsed", time.Since(t), "applied", len(stream.applied), "errored", len(stream.errored))
	return err
}

// init runs `terraform init` in the work dir (not -json: Terraform 1.5.7
// has no init -json).
func (r *Runner) init(ctx context.Context, tf *tfexec.Terraform, w workDir, rep *progressReporter, log *slog.Logger) error {
	t := time.Now()
	rep.phase(phaseInit)
	if err := runCommand(ctx, tf, "init", nil, func() error { return tf.Init(ctx, initOptions(w)...) }); err != nil {
		return err
	}
	log.Debug("terraform init done", "elapsed", time.Since(t))
	return nil
}

// applyInit prepares an apply's data dir: the providers linked to the
// run's verified copies (workDir.linkProviders), or, when they are not all
// there, `terraform init` as a plan's.
func (r *Runner) applyInit(ctx context.Context, tf *tfexec.Terraform, w workDir, rep *progressReporter, log *slog.Logger) error {
	if !w.providersCopied {
		return r.init(ctx, tf, w, rep, log)
	}
	t := time.Now()
	rep.phase(phaseInit)
	if err := w.linkProviders(); err != nil {
		return err
	}
	log.Debug(StepProvidersLinked, "elapsed", time.Since(t), "providers", len(w.locked))
	return nil
}

// StepProvidersLinked is the debug log message of an apply that linked its
// providers instead of running `terraform init` (applyInit; the benchmark
// reads its elapsed attribute).
const StepProvidersLinked = "providers linked, no terraform init"

// newTF returns a fresh terraform-exec handle for one call (PlanJSON and
// ApplyJSON mutate it) working in the root module copy, with the run's
// environment (terraformEnv) and the interrupt grace. With TF_VAR_* in
// vars or TF_CLI_ARGS_* in args to pass, its executable is the shim
// (shim.go); args need it (they hold -var values: cliargs.go), and
// without a shim they are refused (engine.ErrInvalid), where TF_VAR_* are
// dropped with the warning NewRunner logged.
func (r *Runner) newTF(w workDir, vars, args map[string]string, log *slog.Logger) (*tfexec.Terraform, error) {
	env, _, _ := terraformEnv(r.env, w.Data)
	if w.Plugins != "" {
		env["TF_PLUGIN_CACHE_DIR"] = w.Plugins // the run's own copy (ADR 0061)
	}
	exe := r.binary
	shim := r.shim
	if len(args) > 0 && shim == "" {
		var err error
		if shim, err = shimExecutable(); err != nil {
			return nil, engine.Errorf(engine.ErrInvalid, "-var values cannot be handed to terraform here: %v (use a var file)", err)
		}
	}
	if shim == "" {
		vars = nil // dropped: NewRunner said so
	}
	if len(vars)+len(args) > 0 {
		// terraform-exec runs the shim, which execs r.binary with
		// TF_VAR_* and TF_CLI_ARGS_*.
		exe = shim
		shimEnvFor(env, vars, args, r.binary)
	}
	tf, err := tfexec.NewTerraform(w.Root, exe)
	if err != nil {
		return nil, fmt.Errorf("preparing terraform: %w", err)
	}
	if err := tf.SetEnv(env); err != nil {
		return nil, fmt.Errorf("preparing terraform environment: %w", err)
	}
	if r.grace > 0 {
		if err := tf.SetWaitDelay(r.grace); err != nil {
			return nil, fmt.Errorf("preparing terraform: %w", err)
		}
	}
	tf.SetLogger(slog.NewLogLogger(log.Handler(), slog.LevelDebug))
	return tf, nil
}

// applyVars returns what an apply of the plan in w hands Terraform of the
// variables: the TF_VAR_* (vars) and the -var options (args:
// TF_CLI_ARGS_apply, cliargs.go) of the root module's ephemeral variables
// (ephemeral.go; the saved plan holds every other value, and Terraform
// would print both values of one that differs). When the root module's
// variable blocks cannot be read, none: Terraform then says which
// ephemeral variable it misses.
func (r *Runner) applyVars(w workDir, planVars []engine.Var, log *slog.Logger) (vars, args map[string]string) {
	if len(r.vars) == 0 && len(planVars) == 0 {
		return nil, nil
	}
	eph, err := ephemeralVariables(w.Root)
	if err != nil {
		log.Warn("reading the root module's variable blocks: no TF_VAR_* or -var passed to the apply", "error", err)
		return nil, nil
	}
	vars = map[string]string{}
	for k, v := range r.vars {
		if eph[strings.TrimPrefix(k, varPrefix)] {
			vars[k] = v
		}
	}
	var ephVars []engine.Var
	for _, v := range planVars {
		if eph[v.Name] {
			ephVars = append(ephVars, v)
		}
	}
	if len(ephVars) > 0 {
		args = map[string]string{argsPrefix + "apply": cliArgs(nil, ephVars)}
	}
	return vars, args
}

// terraformVersion returns the binary's version ("1.11.4"), asked once per
// Runner.
func (r *Runner) terraformVersion(ctx context.Context, tf *tfexec.Terraform) (string, error) {
	r.versionMu.Lock()
	defer r.versionMu.Unlock()
	if r.version != "" {
		return r.version, nil
	}
	var v *version.Version
	err := runCommand(ctx, tf, "version", nil, func() error {
		var err error
		v, _, err = tf.Version(ctx, false)
		return err
	})
	if err != nil {
		return "", err
	}
	r.version = v.String()
	return r.version, nil
}

// cleanup removes the work dir unless KeepWorkDirs; a kept one is made
// private first (restrictWorkDir: Terraform creates its own files 0644).
func (r *Runner) cleanup(w workDir, log *slog.Logger) {
	if r.keep {
		if err := restrictWorkDir(w.Dir); err != nil {
			log.Error("restricting the modes of the kept work dir", "dir", w.Dir, "error", err)
		}
		log.Info("kept work dir (it holds secrets)", "dir", w.Dir)
		return
	}
	if err := os.RemoveAll(w.Dir); err != nil {
		log.Error("removing work dir", "dir", w.Dir, "error", err)
	}
}

// RemoveWorkDir removes the work dir of run below the work root if one is
// left (engine.WorkDirRemover): a process killed mid-apply leaves it until
// the stale sweep (DefaultStaleAfter); Engine.Recover removes it once it
// has committed what that Terraform wrote. It is WorkDirs.RemoveWorkDir
// with the Runner's work root and KeepWorkDirs.
func (r *Runner) RemoveWorkDir(run string) error { return r.dirs().RemoveWorkDir(run) }

// WorkDirs is the per-run work dirs below a work root, without a Terraform
// binary: what removes a killed run's work dir where no Runner is made
// (kl run recover runs no Terraform), and what reads the state a killed
// run's Terraform left there. It implements engine.LeftWorkDirs.
type WorkDirs struct {
	// Root is the work root, RunnerOptions.WorkRoot.
	Root string
	// Keep is RunnerOptions.KeepWorkDirs: a dir is kept (made private).
	Keep bool
	// Logger receives the note on a kept dir (nil: discarded).
	Logger *slog.Logger
}

// RemoveWorkDir removes Root/<run> if it is there. A missing dir is no
// error; a run id that is not a plain name is engine.ErrInvalid. With Keep
// the dir is kept, made private, as after any run.
func (w WorkDirs) RemoveWorkDir(run string) error {
	if run == "" || run == "." || run == ".." || strings.ContainsAny(run, `/\`) || !filepath.IsLocal(run) {
		return engine.Errorf(engine.ErrInvalid, "removing work dir: run id %q is not a plain name", run)
	}
	if w.Root == "" {
		return engine.Errorf(engine.ErrInvalid, "removing work dir of run %s: no work root", run)
	}
	dir := filepath.Join(w.Root, run)
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if w.Keep {
		if err := restrictWorkDir(dir); err != nil {
			return fmt.Errorf("restricting the modes of the kept work dir %s: %w", dir, err)
		}
		if w.Logger != nil {
			w.Logger.Info("kept work dir (it holds secrets)", "dir", dir)
		}
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing work dir %s: %w", dir, err)
	}
	return nil
}

// sameVarFiles checks that the var files of a re-plan request name the
// archive's var files (by base name, in order).
func sameVarFiles(requested, archived []string) error {
	ok := len(requested) == len(archived)
	for i := 0; ok && i < len(requested); i++ {
		ok = path.Base(archived[i]) == path.Base(varFileEntry(i, requested[i]))
	}
	if !ok {
		return engine.Errorf(engine.ErrInvalid, "var files %v differ from the configuration archive's %v", requested, archived)
	}
	return nil
}

// writePlanLockFile writes the saved plan's .terraform.lock.hcl into the
// root module copy, when the plan has one.
func (w workDir) writePlanLockFile(planFile []byte) error {
	zr, err := zip.NewReader(bytes.NewReader(planFile), int64(len(planFile)))
	if err != nil {
		return engine.Errorf(engine.ErrInvalid, "reading saved plan: not a zip archive (%v)", err)
	}
	for _, f := range zr.File {
		if f.Name == ".terraform.lock.hcl" {
			b, err := readZipEntry(zr, f.Name, 16<<20)
			if err != nil {
				return fmt.Errorf("reading saved plan: %w", err)
			}
			if err := os.WriteFile(filepath.Join(w.Root, f.Name), b, 0o600); err != nil {
				return fmt.Errorf("writing dependency lock file: %w", err)
			}
			return nil
		}
	}
	return nil
}

// readState returns the state Terraform left: errored.tfstate in the root
// module copy when Terraform could not persist its state (it writes that
// file then), else the snapshot file; nil when neither exists.
func (w workDir) readState(log *slog.Logger) ([]byte, error) {
	if w.Root != "" {
		errored := filepath.Join(w.Root, "errored.tfstate")
		if b, err := os.ReadFile(errored); err == nil {
			log.Warn("terraform could not persist its state; using errored.tfstate", "file", errored)
			return b, nil
		}
	}
	b, err := os.ReadFile(w.Snapshot)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading state after apply: %w", err)
	}
	return b, nil
}

// ArchiveConfig is engine.ConfigArchiver: the configuration archive Plan
// would make of dir and varFiles (relative ones against dir), without
// planning — a native-lane plan's whole configuration, for its validation
// re-plan (ADR 0069). Errors are Plan's for the same dir.
func (r *Runner) ArchiveConfig(dir string, varFiles []string) ([]byte, error) {
	return planArchive(engine.PlanRequest{Dir: dir, VarFiles: varFiles}, r.log)
}
