package terraform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gofrs/flock"
	"github.com/hashicorp/terraform-exec/tfexec"
	"golang.org/x/mod/sumdb/dirhash"
)

// The provider plugin cache (ADR 0061). Terraform's own plugin cache
// (plugin_cache_dir, TF_PLUGIN_CACHE_DIR) is not safe for concurrent
// `init` (runatlantis/atlantis#5364), and every run links its providers to
// the one copy there: a run's code (a local-exec, an external data source)
// runs as the same user and can replace a binary other runs then execute.
// Kilolock's cache is filled in a step of its own, before a run's init:
// one install per provider version at a time (a file lock), its hash
// checked against the configuration's lock file; a run then gets its own
// copy of the verified packages, checked again, as its private
// TF_PLUGIN_CACHE_DIR, and the shared cache is never Terraform's.
//
// Layout of the cache dir, Terraform's unpacked layout plus Kilolock's own:
//
//	HOSTNAME/NAMESPACE/TYPE/VERSION/OS_ARCH/   a verified package (read-only)
//	.locks/HOSTNAME/NAMESPACE/TYPE/VERSION_OS_ARCH.lock
//	.staging/install-*/                        an install in progress
//	.tampered/HOSTNAME/…/OS_ARCH-UNIXNANO/     a package whose hash no longer matched

// pluginPlatform is the platform whose packages are cached: this program's
// (Terraform's own is the same on every machine kl is built for).
const pluginPlatform = runtime.GOOS + "_" + runtime.GOARCH

// lockPoll is how often a wait for a cache file lock retries.
const lockPoll = 50 * time.Millisecond

// pluginCache is the cache dir and its counters.
type pluginCache struct {
	dir string
	// installs counts the packages this process installed into the cache
	// (tests: one per provider version, however many inits at once).
	installs atomic.Int64
}

// newPluginCache creates dir (0700) when missing and returns its cache,
// after removing the staging dirs of installs that a killed process left
// there untouched for staleAfter (removeStaleStaging).
func newPluginCache(dir string, staleAfter time.Duration, log *slog.Logger) (*pluginCache, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("resolving plugin cache dir %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("creating plugin cache dir: %w", err)
	}
	removeStaleStaging(filepath.Join(abs, ".staging"), staleAfter, time.Now(), log)
	return &pluginCache{dir: abs}, nil
}

// removeStaleStaging removes the install-* dirs below staging whose
// modification time is staleAfter or more before now: an install in
// progress takes minutes at most, and a finished one removes its own.
// Best effort: failures are logged.
func removeStaleStaging(staging string, staleAfter time.Duration, now time.Time, log *slog.Logger) {
	ents, err := os.ReadDir(staging)
	if err != nil {
		return // none yet
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "install-") {
			continue
		}
		fi, err := e.Info()
		if err != nil || now.Sub(fi.ModTime()) < staleAfter {
			continue
		}
		if err := os.RemoveAll(filepath.Join(staging, e.Name())); err != nil {
			log.Warn("removing a stale plugin cache staging dir", "dir", e.Name(), "error", err)
		}
	}
}

// pkgDir is where p's package for this platform lives in the cache dir
// below root (Terraform's unpacked layout).
func pkgDir(root string, p lockedProvider) string {
	return filepath.Join(root, filepath.FromSlash(p.path()), pluginPlatform)
}

// lockFor is the file lock of p's package.
func (c *pluginCache) lockFor(p lockedProvider) (*flock.Flock, error) {
	path := filepath.Join(c.dir, ".locks", filepath.FromSlash(p.Source), p.Version+"_"+pluginPlatform+".lock")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating plugin cache lock dir: %w", err)
	}
	return flock.New(path, flock.SetPermissions(0o600)), nil
}

// hashPackage is Terraform's h1: hash of an unpacked package dir
// (dirhash.Hash1 over its files, the form the lock file records).
func hashPackage(dir string) (string, error) {
	return dirhash.HashDir(dir, "", dirhash.Hash1)
}

// installer installs one provider package into a staging dir (the Runner
// runs `terraform init` there: runner_plugins.go).
type installer func(ctx context.Context, p lockedProvider, stagingCache string) error

// ensure makes sure the cache holds a verified package of p: under p's
// exclusive file lock, a missing one is installed (install) into a staging
// dir, its h1 checked against p's (a package whose hash is not in the lock
// file is refused), made read-only and moved into place. An entry already
// there is left as it is: copyTo checks what a run gets. Errors: p's lock
// file block has no h1: hash (no package can be checked), the install
// failed, or its hash is not p's; a cancelled ctx while waiting for the
// lock.
func (c *pluginCache) ensure(ctx context.Context, p lockedProvider, install installer, log *slog.Logger) error {
	if _, err := os.Stat(pkgDir(c.dir, p)); err == nil {
		return nil
	}
	if len(p.H1) == 0 {
		return fmt.Errorf("the lock file records no h1: hash of %s %s to check a package against (terraform providers lock -platform=%s adds it)",
			p.Source, p.Version, pluginPlatform)
	}
	lk, err := c.lockFor(p)
	if err != nil {
		return err
	}
	if _, err := lk.TryLockContext(ctx, lockPoll); err != nil {
		return fmt.Errorf("waiting for the plugin cache lock of %s %s: %w", p.Source, p.Version, err)
	}
	defer lk.Unlock()
	return c.installLocked(ctx, p, install, log)
}

// installLocked installs p unless it is there; the caller holds p's
// exclusive lock.
func (c *pluginCache) installLocked(ctx context.Context, p lockedProvider, install installer, log *slog.Logger) error {
	final := pkgDir(c.dir, p)
	if _, err := os.Stat(final); err == nil {
		return nil // installed by another process while this one waited
	}
	staging := filepath.Join(c.dir, ".staging")
	if err := os.MkdirAll(staging, 0o700); err != nil {
		return fmt.Errorf("creating plugin cache staging dir: %w", err)
	}
	tmp, err := os.MkdirTemp(staging, "install-")
	if err != nil {
		return fmt.Errorf("creating plugin cache staging dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	t := time.Now()
	cache := filepath.Join(tmp, "cache")
	if err := install(ctx, p, cache); err != nil {
		return fmt.Errorf("installing %s %s into the plugin cache: %w", p.Source, p.Version, err)
	}
	got := pkgDir(cache, p)
	h, err := hashPackage(got)
	if err != nil {
		return fmt.Errorf("installing %s %s into the plugin cache: hashing the package: %w", p.Source, p.Version, err)
	}
	if !p.hasH1(h) {
		return fmt.Errorf("installing %s %s into the plugin cache: the package's hash %s is not in the lock file's %v", p.Source, p.Version, h, p.H1)
	}
	if err := setReadOnly(got); err != nil {
		return fmt.Errorf("installing %s %s into the plugin cache: %w", p.Source, p.Version, err)
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return fmt.Errorf("installing %s %s into the plugin cache: %w", p.Source, p.Version, err)
	}
	if err := os.Rename(got, final); err != nil {
		return fmt.Errorf("installing %s %s into the plugin cache: %w", p.Source, p.Version, err)
	}
	c.installs.Add(1)
	log.Info("provider installed into the plugin cache", "provider", p.Source, "version", p.Version, "hash", h, "elapsed", time.Since(t))
	return nil
}

// copyTo copies p's cached package into the run's own plugin dir runDir
// (its TF_PLUGIN_CACHE_DIR) and checks the copy's h1 against p's: what the
// run executes is what the lock file names, whatever another run did to
// the cache. A copy whose hash is not p's means the cached package changed
// since it was installed: under p's exclusive lock it is checked again,
// moved aside (.tampered/…) and reinstalled, and copied once more; the
// note returned says so ("" when all was well). Errors: copying, hashing,
// the reinstall (ensure), a second copy that does not match either.
func (c *pluginCache) copyTo(ctx context.Context, p lockedProvider, runDir string, install installer, log *slog.Logger) (note string, err error) {
	lk, err := c.lockFor(p)
	if err != nil {
		return "", err
	}
	if _, err := lk.TryRLockContext(ctx, lockPoll); err != nil {
		return "", fmt.Errorf("waiting for the plugin cache lock of %s %s: %w", p.Source, p.Version, err)
	}
	h, err := copyPackage(pkgDir(c.dir, p), pkgDir(runDir, p))
	_ = lk.Unlock()
	if err == nil && p.hasH1(h) {
		return "", nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("copying %s %s from the plugin cache: %w", p.Source, p.Version, err)
	}
	// Changed (or gone) since it was installed: look again under the
	// exclusive lock (another run may have reinstalled it meanwhile).
	if _, err := lk.TryLockContext(ctx, lockPoll); err != nil {
		return "", fmt.Errorf("waiting for the plugin cache lock of %s %s: %w", p.Source, p.Version, err)
	}
	defer lk.Unlock()
	cached := pkgDir(c.dir, p)
	if ch, err := hashPackage(cached); err == nil && !p.hasH1(ch) {
		aside, err := c.moveAside(p)
		if err != nil {
			return "", err
		}
		note = fmt.Sprintf("provider %s %s: the plugin cache's package had hash %s, not the lock file's: moved aside to %s and reinstalled",
			p.Source, p.Version, ch, aside)
		log.Warn("plugin cache package changed since it was installed: moved aside, reinstalling", "provider", p.Source, "version", p.Version,
			"hash", ch, "want", p.H1, "moved_to", aside)
	}
	if err := c.installLocked(ctx, p, install, log); err != nil {
		return note, err
	}
	if err := os.RemoveAll(pkgDir(runDir, p)); err != nil {
		return note, fmt.Errorf("copying %s %s from the plugin cache: %w", p.Source, p.Version, err)
	}
	if h, err = copyPackage(cached, pkgDir(runDir, p)); err != nil {
		return note, fmt.Errorf("copying %s %s from the plugin cache: %w", p.Source, p.Version, err)
	}
	if !p.hasH1(h) {
		return note, fmt.Errorf("copying %s %s from the plugin cache: the copy's hash %s is not in the lock file's %v", p.Source, p.Version, h, p.H1)
	}
	return note, nil
}

// moveAside moves p's cached package to .tampered/SOURCE/VERSION/OS_ARCH-UNIXNANO
// and returns that path, relative to the cache dir.
func (c *pluginCache) moveAside(p lockedProvider) (string, error) {
	rel := filepath.Join(".tampered", filepath.FromSlash(p.path()), fmt.Sprintf("%s-%d", pluginPlatform, time.Now().UnixNano()))
	dst := filepath.Join(c.dir, rel)
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return "", fmt.Errorf("moving a changed plugin cache package aside: %w", err)
	}
	src := pkgDir(c.dir, p)
	_ = os.Chmod(src, 0o700) // renaming a dir to another parent needs write permission on it
	if err := os.Rename(src, dst); err != nil {
		return "", fmt.Errorf("moving a changed plugin cache package aside: %w", err)
	}
	return rel, nil
}

// copyPackage copies the package dir src to dst (created, 0700; files
// 0700 when executable, else 0600; symlinks refused) and returns the
// copy's h1 hash.
func copyPackage(src, dst string) (string, error) {
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o700)
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			mode := os.FileMode(0o600)
			if fi.Mode()&0o111 != 0 {
				mode = 0o700
			}
			return copyFile(p, target, mode)
		default:
			return fmt.Errorf("%s: not a regular file or directory", p)
		}
	})
	if err != nil {
		return "", err
	}
	return hashPackage(dst)
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// setReadOnly removes the write permissions below dir (files 0444, or 0555
// when executable; dirs 0555). It guards against a slip, not against code
// of the same user, who can chmod: copyTo's hash check is what does.
func setReadOnly(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		mode := os.FileMode(0o444)
		if fi.Mode()&0o111 != 0 {
			mode = 0o555
		}
		return os.Chmod(p, mode)
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- { // children first
		if err := os.Chmod(dirs[i], 0o555); err != nil {
			return err
		}
	}
	return nil
}

// stagingConfig is the configuration of an install's `terraform init`: the
// one provider, at exactly its locked version.
func stagingConfig(p lockedProvider) string {
	return "# Written by Kilolock: installs one provider into its plugin cache.\n" +
		"terraform {\n  required_providers {\n    p = {\n      source  = \"" + p.Source + "\"\n      version = \"= " + p.Version + "\"\n    }\n  }\n}\n"
}

// installWith returns the installer that runs `terraform init
// -backend=false` with binary in a staging configuration (stagingConfig and
// p's own lock file block, so Terraform checks what it downloads against
// the lock file's hashes itself), with env (terraformEnv's, its own
// TF_DATA_DIR) and TF_PLUGIN_CACHE_DIR the staging cache.
func installWith(binary string, base []string, log *slog.Logger) installer {
	return func(ctx context.Context, p lockedProvider, stagingCache string) error {
		root := filepath.Dir(stagingCache)
		cfg := filepath.Join(root, "cfg")
		for _, d := range []string{cfg, stagingCache} {
			if err := os.MkdirAll(d, 0o700); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(cfg, "main.tf"), []byte(stagingConfig(p)), 0o600); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(cfg, lockFileName), append(append([]byte{}, p.Block...), '\n'), 0o600); err != nil {
			return err
		}
		env, _, _ := terraformEnv(base, filepath.Join(root, "data"))
		env["TF_PLUGIN_CACHE_DIR"] = stagingCache
		tf, err := tfexec.NewTerraform(cfg, binary)
		if err != nil {
			return err
		}
		if err := tf.SetEnv(env); err != nil {
			return err
		}
		tf.SetLogger(slog.NewLogLogger(log.Handler(), slog.LevelDebug))
		if err := tf.Init(ctx, tfexec.Backend(false)); err != nil {
			return fmt.Errorf("terraform init: %w", err) // tfexec's error holds Terraform's stderr
		}
		return nil
	}
}
