package terraform

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/kilolock/kilolock/internal/engine"
)

var _ engine.Terraform = (*Runner)(nil)

// RunnerOptions configures a Runner.
type RunnerOptions struct {
	// WorkRoot is the parent of the per-run work dirs (e.g. ".kl/runs");
	// created 0700 when missing.
	WorkRoot string
	// Binary is the terraform or tofu executable (see FindBinary).
	Binary string
	// Env is the caller's environment as KEY=VALUE entries, passed to
	// Terraform (PATH, HOME, TF_CLI_CONFIG_FILE, TF_PLUGIN_CACHE_DIR,
	// proxies, cloud credentials…) minus the variables terraform-exec refuses
	// (TF_VAR_*, TF_CLI_ARGS*, TF_WORKSPACE, TF_INPUT, TF_IN_AUTOMATION,
	// TF_LOG*…: logged once as a warning). Later entries win over earlier
	// ones of the same key. nil means os.Environ().
	Env []string
	// KeepWorkDirs leaves each run's work dir in place after the call, for
	// debugging. It holds the state and the plan: secrets.
	KeepWorkDirs bool
	// Logger receives the runner's logs (nil: discarded). Terraform-exec's
	// own command log goes to it at debug level.
	Logger *slog.Logger
}

// Runner runs Terraform through terraform-exec for one run at a time in an
// isolated work dir per call (WorkRoot/<run id>/: its own TF_DATA_DIR, its
// own config copy and a local backend whose path is its own snapshot file —
// TERRAFORM.md "Running many Terraform processes on one state safely"). It
// implements engine.Terraform and is safe for concurrent use by different
// runs; two calls for the same run id at once fail with engine.ErrConflict.
type Runner struct {
	workRoot string
	binary   string
	env      []string
	keep     bool
	log      *slog.Logger

	versionMu sync.Mutex
	version   string
}

// NewRunner checks opts and returns a Runner. Errors: an empty WorkRoot or
// Binary, a Binary that does not exist, a WorkRoot that cannot be created.
func NewRunner(opts RunnerOptions) (*Runner, error) {
	if opts.WorkRoot == "" {
		return nil, fmt.Errorf("creating terraform runner: empty WorkRoot: %w", engine.ErrInvalid)
	}
	if opts.Binary == "" {
		return nil, fmt.Errorf("creating terraform runner: empty Binary: %w", ErrNoBinary)
	}
	if err := isExecutable(opts.Binary); err != nil {
		return nil, fmt.Errorf("creating terraform runner: %w: %w", ErrNoBinary, err)
	}
	root, err := filepath.Abs(opts.WorkRoot)
	if err != nil {
		return nil, fmt.Errorf("creating terraform runner: %w", err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("creating terraform runner: work root: %w", err)
	}
	env := opts.Env
	if env == nil {
		env = os.Environ()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if _, dropped := terraformEnv(env, ""); len(dropped) > 0 {
		log.Warn("environment variables not passed to terraform (terraform-exec refuses them; use var files)",
			"variables", dropped)
	}
	return &Runner{workRoot: root, binary: opts.Binary, env: env, keep: opts.KeepWorkDirs, log: log}, nil
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
// Errors: engine.ErrInvalid for a bad request, configuration or archive;
// engine.ErrConflict when the run's work dir exists; a *CommandError
// (carrying Terraform's diagnostics) when Terraform fails; errors.Is(err,
// context.Canceled) after cancellation.
func (r *Runner) Plan(ctx context.Context, req engine.PlanRequest) (*engine.PlanResult, error) {
	res, err := r.plan(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("planning run %s: %w", req.Run, err)
	}
	return res, nil
}

func (r *Runner) plan(ctx context.Context, req engine.PlanRequest) (*engine.PlanResult, error) {
	log := r.log.With("run", req.Run, "op", "plan")
	start := time.Now()
	if (req.Dir == "") == (len(req.Config) == 0) {
		return nil, fmt.Errorf("set exactly one of Dir and Config: %w", engine.ErrInvalid)
	}
	archive := req.Config
	if req.Dir != "" {
		var err error
		if archive, err = buildConfigArchive(req.Dir, req.VarFiles, log); err != nil {
			return nil, err
		}
	}
	w, err := newWorkDir(r.workRoot, req.Run)
	if err != nil {
		return nil, err
	}
	defer r.cleanup(w, log)
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
	tf, err := r.newTF(w, log)
	if err != nil {
		return nil, err
	}
	rep := newProgressReporter(req.Progress)
	defer rep.stop()

	if err := r.init(ctx, tf, w, rep, log); err != nil {
		return nil, err
	}

	t := time.Now()
	rep.phase(phasePlan)
	opts := planOptions(w, rc.VarFiles, req.Targets, req.Replace)
	if req.Progress != nil {
		stream := newUIStream(phasePlan, rep, log)
		_, err = tf.PlanJSON(ctx, stream, opts...)
		stream.close()
		tf.SetStdout(nil)
		err = commandError(ctx, "plan", err, stream)
	} else {
		_, err = tf.Plan(ctx, opts...)
		err = commandError(ctx, "plan", err, nil)
	}
	if err != nil {
		return nil, err
	}
	log.Debug("terraform plan done", "elapsed", time.Since(t))

	t = time.Now()
	rep.phase(phaseShow)
	var raw bytes.Buffer
	tf.SetStdout(&raw)
	_, err = tf.ShowPlanFile(ctx, w.rel(w.PlanFile))
	tf.SetStdout(nil)
	if err := commandError(ctx, "show", err, nil); err != nil {
		return nil, err
	}
	log.Debug("terraform show done", "elapsed", time.Since(t), "bytes", raw.Len())

	plan, err := ParsePlanJSON(raw.Bytes())
	if err != nil {
		return nil, err
	}
	fp, err := ExtractFootprint(plan, ExtractOptions{ConfigDir: w.Root, ModulesManifest: w.modulesManifest()})
	if err != nil {
		return nil, fmt.Errorf("extracting footprint: %w", err)
	}
	intent, err := ExtractIntent(plan)
	if err != nil {
		return nil, fmt.Errorf("extracting intent: %w", err)
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
	version := plan.TerraformVersion
	if version == "" {
		if version, err = r.terraformVersion(ctx, tf); err != nil {
			return nil, err
		}
	}
	sum := sha256.Sum256(planFile)
	res := &engine.PlanResult{
		PlanFile:         planFile,
		Digest:           "sha256:" + hex.EncodeToString(sum[:]),
		Config:           archive,
		Footprint:        fp,
		Intent:           intent,
		Summary:          Summarize(plan),
		Lineage:          info.Lineage,
		Serial:           info.Serial,
		TerraformVersion: version,
	}
	log.Info("plan done", "elapsed", time.Since(start), "serial", res.Serial, "digest", res.Digest,
		"write", len(fp.Write), "read", len(fp.Read))
	return res, nil
}

// Apply restores req.Config into the run's work dir, writes req.Snapshot as
// the run's state and req.PlanFile as plan.tfplan (and the plan's own
// .terraform.lock.hcl, so init selects the providers the plan was made
// with), runs `init` with the same relative backend path as the plan, and
// `apply -json plan.tfplan`. Terraform checks the snapshot's lineage and
// serial against the plan's (TERRAFORM.md "Staleness").
//
// The result is never nil: State holds the state file after the call — what
// Terraform wrote, also when the apply failed or was cancelled (Terraform
// persists partial state on error and on SIGINT, which terraform-exec sends
// on cancellation); Terraform's errored.tfstate is preferred when it had to
// write one; req.Snapshot when Terraform wrote nothing. Changed counts the
// resource instances Terraform reported done (apply_complete; a replace
// counts once). Progress: "init", then "apply" with Done of Total planned
// changes (≤5 reports a second).
//
// Errors: as Plan; a Terraform failure is a *CommandError holding the
// diagnostics; errors.Is(err, context.Canceled) after cancellation.
func (r *Runner) Apply(ctx context.Context, req engine.ApplyRequest) (*engine.ApplyResult, error) {
	log := r.log.With("run", req.Run, "op", "apply")
	start := time.Now()
	res := &engine.ApplyResult{State: req.Snapshot}
	if len(req.PlanFile) == 0 || len(req.Config) == 0 {
		return res, fmt.Errorf("applying run %s: PlanFile and Config are required: %w", req.Run, engine.ErrInvalid)
	}
	w, err := newWorkDir(r.workRoot, req.Run)
	if err != nil {
		return res, fmt.Errorf("applying run %s: %w", req.Run, err)
	}
	defer r.cleanup(w, log)
	err = r.apply(ctx, w, req, res, log)
	if st, serr := w.readState(log); serr != nil {
		err = errors.Join(err, serr)
	} else if st != nil {
		res.State = st
	}
	if err != nil {
		return res, fmt.Errorf("applying run %s: %w", req.Run, err)
	}
	log.Info("apply done", "elapsed", time.Since(start), "changed", res.Changed)
	return res, nil
}

func (r *Runner) apply(ctx context.Context, w workDir, req engine.ApplyRequest, res *engine.ApplyResult, log *slog.Logger) error {
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
	tf, err := r.newTF(w, log)
	if err != nil {
		return err
	}
	rep := newProgressReporter(req.Progress)
	defer rep.stop()
	if err := r.init(ctx, tf, w, rep, log); err != nil {
		return err
	}
	t := time.Now()
	rep.phase(phaseApply)
	stream := newUIStream(phaseApply, rep, log)
	err = tf.ApplyJSON(ctx, stream, applyOptions(w)...)
	stream.close()
	tf.SetStdout(nil)
	res.Changed = len(stream.applied)
	log.Debug("terraform apply done", "elapsed", time.Since(t), "applied", len(stream.applied), "errored", len(stream.errored))
	return commandError(ctx, "apply", err, stream)
}

// init runs `terraform init` in the work dir (not -json: Terraform 1.5.7
// has no init -json).
func (r *Runner) init(ctx context.Context, tf *tfexec.Terraform, w workDir, rep *progressReporter, log *slog.Logger) error {
	t := time.Now()
	rep.phase(phaseInit)
	if err := commandError(ctx, "init", tf.Init(ctx, initOptions(w)...), nil); err != nil {
		return err
	}
	log.Debug("terraform init done", "elapsed", time.Since(t))
	return nil
}

// newTF returns a fresh terraform-exec handle for one call (PlanJSON and
// ApplyJSON mutate it) working in the root module copy, with the run's
// environment.
func (r *Runner) newTF(w workDir, log *slog.Logger) (*tfexec.Terraform, error) {
	tf, err := tfexec.NewTerraform(w.Root, r.binary)
	if err != nil {
		return nil, fmt.Errorf("preparing terraform: %w", err)
	}
	env, _ := terraformEnv(r.env, w.Data)
	if err := tf.SetEnv(env); err != nil {
		return nil, fmt.Errorf("preparing terraform environment: %w", err)
	}
	tf.SetLogger(slog.NewLogLogger(log.Handler(), slog.LevelDebug))
	return tf, nil
}

// terraformVersion returns the binary's version ("1.11.4"), asked once per
// Runner.
func (r *Runner) terraformVersion(ctx context.Context, tf *tfexec.Terraform) (string, error) {
	r.versionMu.Lock()
	defer r.versionMu.Unlock()
	if r.version != "" {
		return r.version, nil
	}
	v, _, err := tf.Version(ctx, false)
	if err != nil {
		return "", commandError(ctx, "version", err, nil)
	}
	r.version = v.String()
	return r.version, nil
}

// cleanup removes the work dir unless KeepWorkDirs.
func (r *Runner) cleanup(w workDir, log *slog.Logger) {
	if r.keep {
		log.Info("kept work dir (it holds secrets)", "dir", w.Dir)
		return
	}
	if err := os.RemoveAll(w.Dir); err != nil {
		log.Error("removing work dir", "dir", w.Dir, "error", err)
	}
}

// commandError wraps a failed Terraform command in a *CommandError with the
// error diagnostics of its UI stream (nil stream: none). After cancellation
// Err is the context's error: terraform-exec's own error for an interrupted
// command may wrap a nil error, and errors.Is(err, context.Canceled) must
// hold.
func commandError(ctx context.Context, command string, err error, stream *uiStream) error {
	if err == nil {
		return nil
	}
	ce := &CommandError{Command: command, Err: err}
	if stream != nil {
		ce.Diagnostics = stream.errorDiagnostics()
	}
	if cerr := ctx.Err(); cerr != nil {
		ce.Err = fmt.Errorf("interrupted: %w", cerr)
	}
	return ce
}

// sameVarFiles checks that the var files of a re-plan request name the
// archive's var files (by base name, in order).
func sameVarFiles(requested, archived []string) error {
	ok := len(requested) == len(archived)
	for i := 0; ok && i < len(requested); i++ {
		ok = path.Base(archived[i]) == path.Base(varFileEntry(i, requested[i]))
	}
	if !ok {
		return fmt.Errorf("var files %v differ from the configuration archive's %v: %w", requested, archived, engine.ErrInvalid)
	}
	return nil
}

// writePlanLockFile writes the saved plan's .terraform.lock.hcl into the
// root module copy, when the plan has one.
func (w workDir) writePlanLockFile(planFile []byte) error {
	zr, err := zip.NewReader(bytes.NewReader(planFile), int64(len(planFile)))
	if err != nil {
		return fmt.Errorf("reading saved plan: not a zip archive (%v): %w", err, engine.ErrInvalid)
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
