package terraform

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
)

// noLockFileNote is the run's note when its configuration has no
// dependency lock file and the plugin cache is on (ADR 0061).
const noLockFileNote = "the configuration has no " + lockFileName + ", so its providers were installed from their origin " +
	"for this run alone, not from the plugin cache (Terraform 1.4+ takes a provider from a plugin cache only when the lock file " +
	"records its hash: plugin_cache_may_break_dependency_lock_file); commit the " + lockFileName + " that terraform init writes"

// providers is the plugin cache step of a run, between restoring its
// configuration (and, for an apply, the plan's lock file) into w and its
// `terraform init` (ADR 0061): for each provider the root module's lock
// file pins, the cache is filled (pluginCache.ensure: one install per
// provider version at a time) and the verified package copied into the
// run's own plugin dir (pluginCache.copyTo), which newTF hands Terraform
// as TF_PLUGIN_CACHE_DIR — so Terraform links the run's copy, never the
// shared cache. Without a Runner cache it does nothing.
//
// It returns the notes for the run's story (engine.PlanResult.Notes): a
// cached package moved aside and reinstalled, a provider that could not
// be cached (it is then installed for the run alone, by Terraform, from
// its origin: a provider Terraform cannot install fails the init with
// Terraform's own error). A configuration without a lock file gets none of
// the cache: its providers are installed by Terraform from their origin
// into the run's own, empty, plugin dir, and lockNotes tells it after the
// init. A lock file that cannot be parsed is an error
// (engine.ErrInvalid), as Terraform's init would make it.
func (r *Runner) providers(ctx context.Context, w *workDir, log *slog.Logger) ([]string, error) {
	if r.cache == nil {
		return nil, nil
	}
	w.Plugins = filepath.Join(w.Dir, "plugins")
	if err := os.Mkdir(w.Plugins, 0o700); err != nil {
		return nil, fmt.Errorf("creating the run's plugin dir: %w", err)
	}
	locked, ok, err := readLockFile(filepath.Join(w.Root, lockFileName))
	if err != nil {
		return nil, err
	}
	if !ok {
		w.noLockFile = true // told after init, if Terraform wrote one (lockNotes)
		w.providersCopied = true
		return nil, nil
	}
	install := installWith(r.binary, r.env, log)
	var notes []string
	copied := true
	for _, p := range locked {
		note, err := r.cacheProvider(ctx, p, w.Plugins, install, log)
		if note != "" {
			notes = append(notes, note)
		}
		if err != nil {
			if ctx.Err() != nil {
				return notes, ctx.Err()
			}
			copied = false
			log.Warn("provider not taken from the plugin cache: installed for this run alone", "provider", p.Source, "version", p.Version, "error", err)
			notes = append(notes, fmt.Sprintf("%s %s was installed for this run alone, not from the plugin cache: %v", p.Source, p.Version, err))
		}
	}
	if copied {
		w.providersCopied, w.locked = true, locked
	}
	return notes, nil
}

// linkProviders does for an apply what its `terraform init` would do to
// Terraform's data dir, without running it (issue 16 §5: the second init
// cost 0.36–0.47 s of every apply): it links each provider the plan's lock
// file pins, TF_DATA_DIR/providers/HOSTNAME/NAMESPACE/TYPE/VERSION/OS_ARCH,
// to the run's own verified copy in w.Plugins — the absolute symlink
// Terraform's init makes from a TF_PLUGIN_CACHE_DIR. Nothing else of what
// init writes is read by `apply PLANFILE`: the backend comes from the plan
// file (Meta.BackendForLocalPlan in hashicorp/terraform), and so does the
// configuration with its modules (the plan's tfconfig/ snapshot).
//
// It is safe because Terraform checks the same things again when the apply
// starts (measured with 1.11.4, TestApplyWithoutInit): every linked package
// against the hashes of the root module's lock file ("the cached package …
// does not match any of the checksums recorded in the dependency lock
// file"), and that lock file against the one saved in the plan file
// ("Inconsistent dependency lock file"); the lock file is the plan's
// (writePlanLockFile) and each copy was checked against it by providers.
//
// Only for a w whose providersCopied is set: the apply needs its init
// without a plugin cache (Terraform installs the providers as its CLI
// configuration says) and when a provider could not be taken from it
// (providers noted why; Terraform installs it for the run alone).
func (w workDir) linkProviders() error {
	for _, p := range w.locked {
		link := pkgDir(filepath.Join(w.Data, "providers"), p)
		if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
			return fmt.Errorf("linking provider %s %s into the data dir: %w", p.Source, p.Version, err)
		}
		if err := os.Symlink(pkgDir(w.Plugins, p), link); err != nil {
			return fmt.Errorf("linking provider %s %s into the data dir: %w", p.Source, p.Version, err)
		}
	}
	return nil
}

// lockNotes is the note of a run whose configuration had no lock file
// (noLockFileNote), told after its init only if Terraform wrote one then: a
// configuration of built-in resources alone (terraform_data) has no
// provider to lock, and Terraform writes none.
func (r *Runner) lockNotes(w workDir, log *slog.Logger) []string {
	if !w.noLockFile {
		return nil
	}
	if _, err := os.Stat(filepath.Join(w.Root, lockFileName)); err != nil {
		return nil
	}
	log.Warn("no dependency lock file: providers installed for this run alone, not from the plugin cache", "lock_file", lockFileName)
	return []string{noLockFileNote}
}

// cacheProvider fills the cache with p and copies it into the run's plugin
// dir; on an error the run's copy is removed (Terraform then installs p
// from its origin into the run's dir).
func (r *Runner) cacheProvider(ctx context.Context, p lockedProvider, runPlugins string, install installer, log *slog.Logger) (string, error) {
	note, err := func() (string, error) {
		if err := r.cache.ensure(ctx, p, install, log); err != nil {
			return "", err
		}
		return r.cache.copyTo(ctx, p, runPlugins, install, log)
	}()
	if err != nil {
		_ = os.RemoveAll(pkgDir(runPlugins, p))
	}
	return note, err
}
