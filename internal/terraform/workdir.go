package terraform

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/kilolock/kilolock/internal/engine"
)

// overrideFileName is the override file Kilolock writes into the root module
// copy. An override file replaces the user's own backend block (s3, …):
// Kilolock owns the state, and the run's state is its snapshot file
// (docs/terraform.md "Running many Terraform processes on one state safely").
const overrideFileName = "zz_kilolock_backend_override.tf"

// overrideFile is its content. The backend block must be on its own line:
// `terraform { backend "local" {} }` on one line is a syntax error.
const overrideFile = "# Written by Kilolock: the run's state is its own snapshot file.\n" +
	"terraform {\n  backend \"local\" {}\n}\n"

// workDir is the isolated directory of one run, WorkRoot/<run id>/:
//
//	cfg/               the restored configuration archive
//	cfg/<root sub>/    the root module copy: Terraform's working directory
//	data/              TF_DATA_DIR
//	snapshot.tfstate   the run's state: the local backend's path
//	plan.tfplan        the saved plan
//	plugins/           the run's copy of its providers (with a plugin cache)
//
// Directories are 0700 and files 0600: the snapshot and the plan hold
// secrets. The Runner creates its files so (the plan file too, before
// Terraform truncates and fills it); Terraform creates its own 0644/0755,
// inside the 0700 dir, and a kept work dir is restricted afterwards
// (restrictWorkDir).
type workDir struct {
	Dir      string
	Cfg      string
	Root     string // set once the archive is restored
	Data     string
	Snapshot string
	PlanFile string
	// Plugins is the run's own plugin dir, plugins/ (its
	// TF_PLUGIN_CACHE_DIR: copies of the plugin cache's verified
	// packages, ADR 0061); "" without a plugin cache.
	Plugins string
	// noLockFile: the configuration had no .terraform.lock.hcl when the
	// plugin cache step ran (Runner.lockNotes).
	noLockFile bool
	// providersCopied: the plugin cache step put a verified copy of every
	// provider of the lock file into Plugins (locked; none without a lock
	// file), so an apply links them instead of running init
	// (linkProviders).
	providersCopied bool
	locked          []lockedProvider
}

// newWorkDir creates WorkRoot/<run>/ with cfg/ and data/. The run id must be
// one plain path element (engine.ErrInvalid otherwise). A directory already
// there means another call for the same run is in progress or a kept work
// dir is in the way: engine.ErrConflict, never a shared dir.
func newWorkDir(workRoot, run string) (workDir, error) {
	if run == "" || run == "." || run == ".." || strings.ContainsAny(run, `/\`) || !filepath.IsLocal(run) {
		return workDir{}, engine.Errorf(engine.ErrInvalid, "creating work dir: run id %q is not a plain name", run)
	}
	if err := os.MkdirAll(workRoot, 0o700); err != nil {
		return workDir{}, fmt.Errorf("creating work root: %w", err)
	}
	dir := filepath.Join(workRoot, run)
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return workDir{}, engine.Errorf(engine.ErrConflict, "creating work dir %s: it exists (another call for the same run, or a kept work dir)",
				dir)
		}
		return workDir{}, fmt.Errorf("creating work dir: %w", err)
	}
	w := workDir{
		Dir:      dir,
		Cfg:      filepath.Join(dir, "cfg"),
		Data:     filepath.Join(dir, "data"),
		Snapshot: filepath.Join(dir, "snapshot.tfstate"),
		PlanFile: filepath.Join(dir, "plan.tfplan"),
	}
	for _, d := range []string{w.Cfg, w.Data} {
		if err := os.Mkdir(d, 0o700); err != nil {
			_ = os.RemoveAll(dir)
			return workDir{}, fmt.Errorf("creating work dir: %w", err)
		}
	}
	return w, nil
}

// restore extracts a configuration archive into cfg/, sets Root, checks
// that the root module has configuration files (checkConfigDir) and writes
// the backend override into it.
func (w *workDir) restore(archive []byte) (restoredConfig, error) {
	rc, err := restoreConfigArchive(archive, w.Cfg)
	if err != nil {
		return rc, err
	}
	w.Root = filepath.Join(w.Cfg, filepath.FromSlash(rc.RootSub))
	if err := checkConfigDir(w.Root, fmt.Sprintf("the root module %q of the configuration archive", rc.RootSub)); err != nil {
		return rc, err
	}
	if err := os.WriteFile(filepath.Join(w.Root, overrideFileName), []byte(overrideFile), 0o600); err != nil {
		return rc, fmt.Errorf("writing backend override: %w", err)
	}
	return rc, nil
}

// writeSnapshot writes the run's state file; an empty snapshot writes
// nothing (Terraform then starts a new state with a new lineage).
func (w workDir) writeSnapshot(snapshot []byte) error {
	if len(snapshot) == 0 {
		return nil
	}
	if err := os.WriteFile(w.Snapshot, snapshot, 0o600); err != nil {
		return fmt.Errorf("writing snapshot: %w", err)
	}
	return nil
}

// isPrimaryConfigFile reports whether a directory entry is a configuration
// file of its module as Terraform reads one (configs.Parser.dirFiles, as in
// terraform-config-inspect's tfconfig): a *.tf or *.tf.json file that is
// not ignored (a name starting with "." or ending in "~", or "#…#": editor
// files) and is not an override file (override.tf, *_override.tf and their
// .tf.json forms: they only amend the other files).
func isPrimaryConfigFile(name string, isDir bool) bool {
	if isDir {
		return false
	}
	var base string
	switch {
	case strings.HasSuffix(name, ".tf"):
		base = strings.TrimSuffix(name, ".tf")
	case strings.HasSuffix(name, ".tf.json"):
		base = strings.TrimSuffix(name, ".tf.json")
	default:
		return false
	}
	if strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") ||
		(strings.HasPrefix(name, "#") && strings.HasSuffix(name, "#")) {
		return false
	}
	return base != "override" && !strings.HasSuffix(base, "_override")
}

// checkConfigDir refuses, wrapping engine.ErrInvalid, a root module
// directory without a configuration file (isPrimaryConfigFile); shown names
// it in the error. Terraform itself refuses to plan an empty directory
// ("No configuration files … Planning without a configuration would mark
// everything for destruction"), but it counts override files as
// configuration, so the backend override Kilolock writes into every copy
// would defeat its check: this one runs before anything is written.
func checkConfigDir(dir, shown string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("reading configuration dir: %w", err)
	}
	if !fi.IsDir() {
		return engine.Errorf(engine.ErrInvalid, "reading configuration dir %s: not a directory", dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading configuration dir: %w", err)
	}
	var others []string
	for _, e := range ents {
		if isPrimaryConfigFile(e.Name(), e.IsDir()) {
			return nil
		}
		if !e.IsDir() && (strings.HasSuffix(e.Name(), ".tf") || strings.HasSuffix(e.Name(), ".tf.json")) {
			others = append(others, e.Name())
		}
	}
	found := ""
	if len(others) > 0 {
		found = fmt.Sprintf("; it has only override or ignored files (%s), which are not a configuration by themselves",
			strings.Join(others, ", "))
	}
	return engine.Errorf(engine.ErrInvalid, "no Terraform configuration files in %s: a plan would destroy every resource of the state; "+
		"refusing (a destroy-everything plan needs an explicit request, which kl does not offer yet)%s",
		shown, found)
}

// restrictWorkDir makes a work dir private: directories 0700, files
// without group and other permissions (0600, executables 0700). The Runner
// writes its own files so; Terraform creates the ones it writes (a new
// snapshot, its backup, errored.tfstate, .terraform.lock.hcl, TF_DATA_DIR)
// 0644 or 0755. Symlinks are left alone (their targets, e.g. a provider
// plugin cache, are not the run's).
func restrictWorkDir(dir string) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		perm := fi.Mode().Perm()
		want := perm &^ 0o077
		if d.IsDir() {
			want = 0o700
		}
		if perm == want {
			return nil
		}
		return os.Chmod(p, want)
	})
}

// rel returns target relative to the root module copy, slash-separated:
// the form recorded in the plan, identical in every work dir of the same
// archive. A plan records a relative backend path and `apply PLANFILE` from
// another work dir with the same layout writes that work dir's snapshot
// (docs/terraform.md facts, verified with 1.11.4).
func (w workDir) rel(target string) string {
	r, err := filepath.Rel(w.Root, target)
	if err != nil { // both are absolute below Dir: cannot happen
		return target
	}
	return filepath.ToSlash(r)
}

// modulesManifest returns TF_DATA_DIR/modules/modules.json, or "" when init
// wrote none.
func (w workDir) modulesManifest() string {
	p := filepath.Join(w.Data, "modules", "modules.json")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// initOptions are the options of `terraform init` in a work dir:
// -backend-config=path=<snapshot relative to the root copy> -reconfigure
// (tfexec adds -input=false).
func initOptions(w workDir) []tfexec.InitOption {
	return []tfexec.InitOption{
		tfexec.BackendConfig("path=" + w.rel(w.Snapshot)),
		tfexec.Reconfigure(true),
	}
}

// planOptions are the options of `terraform plan`: -out=<plan file,
// relative>, -var-file for each archived var file (archive names, relative
// to cfg/) unless varFilesInEnv (a plan with -var values: cliArgs carries
// them, cliargs.go), -target for each target, -replace for each forced
// replacement, and the plan options o (ADR 0045): -destroy,
// -refresh-only, -refresh=false, -parallelism=N (tfexec adds
// -input=false, -detailed-exitcode, and -refresh=true and -parallelism=10
// when not set).
func planOptions(w workDir, varFiles, targets, replace []string, o engine.PlanOptions, varFilesInEnv bool) []tfexec.PlanOption {
	opts := []tfexec.PlanOption{tfexec.Out(w.rel(w.PlanFile))}
	if !varFilesInEnv {
		for _, vf := range w.varFilePaths(varFiles) {
			opts = append(opts, tfexec.VarFile(vf))
		}
	}
	for _, t := range targets {
		opts = append(opts, tfexec.Target(t))
	}
	for _, r := range replace {
		opts = append(opts, tfexec.Replace(r))
	}
	if o.Destroy {
		opts = append(opts, tfexec.Destroy(true))
	}
	if o.RefreshOnly {
		opts = append(opts, tfexec.RefreshOnly(true))
	}
	if o.NoRefresh {
		opts = append(opts, tfexec.Refresh(false))
	}
	if o.Parallelism > 0 {
		opts = append(opts, tfexec.Parallelism(o.Parallelism))
	}
	return opts
}

// ownVariable reports whether k is one of Kilolock's own environment
// variables (kl's KL_*, klbot's KLBOT_*), never passed to Terraform.
func ownVariable(k string) bool {
	return strings.HasPrefix(k, "KL_") || strings.HasPrefix(k, "KLBOT_")
}

// applyOptions are the options of `terraform apply PLANFILE`, with the
// plan's -parallelism when it had one (ADR 0045: it bounds the apply's
// operations as it bounded the plan's refresh; tfexec adds -auto-approve
// and -input=false, and -parallelism=10 when not set).
func applyOptions(w workDir, parallelism int) []tfexec.ApplyOption {
	opts := []tfexec.ApplyOption{tfexec.DirOrPlan(w.rel(w.PlanFile))}
	if parallelism > 0 {
		opts = append(opts, tfexec.Parallelism(parallelism))
	}
	return opts
}

// terraformEnv builds the environment of every Terraform process of a run
// from the caller's environment (KEY=VALUE entries; a later entry wins over
// an earlier one of the same key): terraform-exec's SetEnv REPLACES the
// environment and refuses TF_IN_AUTOMATION, TF_INPUT, TF_CLI_ARGS*,
// TF_VAR_*, TF_WORKSPACE, TF_LOG* and a few more (docs/terraform.md). TF_VAR_*
// are returned apart in vars (key TF_VAR_NAME), for the shim (shim.go); the
// other refused ones are dropped (returned sorted in dropped). TF_DATA_DIR
// is the run's data dir; CHECKPOINT_DISABLE=1 unless the caller set it (no
// version check call per run).
//
// Kilolock's own configuration (ownVariable: KL_*, KLBOT_*) is withheld
// silently: Terraform runs the configuration's code — a pull request's, in
// klbot — and that code can read its environment (file("/proc/self/environ"),
// a provider, a local-exec). KL_STORE may hold the store's password;
// KLBOT_PRIVATE_KEY, KLBOT_WEBHOOK_SECRET and KLBOT_DATABASE_URL are the
// App's key and secrets. Everything else (cloud credentials, proxies) is
// passed: Terraform needs it.
func terraformEnv(base []string, dataDir string) (env, vars map[string]string, dropped []string) {
	env = make(map[string]string, len(base)+2)
	vars = map[string]string{}
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || ownVariable(k) {
			continue
		}
		env[k] = v
	}
	for k, v := range env {
		if strings.HasPrefix(k, varPrefix) {
			vars[k] = v
			delete(env, k)
		}
	}
	dropped = tfexec.ProhibitedEnv(env)
	sort.Strings(dropped)
	env = tfexec.CleanEnv(env)
	env["TF_DATA_DIR"] = dataDir
	if _, ok := env["CHECKPOINT_DISABLE"]; !ok {
		env["CHECKPOINT_DISABLE"] = "1"
	}
	return env, vars, dropped
}
