package terraform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/dirhash"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/testprovider"
	"github.com/kilolock/kilolock/internal/testprovider/tptest"
)

// cacheConfig is a configuration of one test provider resource, the
// provider pinned to its version.
const cacheConfig = testprovider.RequiredProvidersBlock + `
resource "kltest_object" "a" {
  name = "a"
}
`

// cacheLockFile is the dependency lock file of cacheConfig: the h1 hash of
// the test provider's package in p's mirror (dirhash of the zip, which is
// Terraform's h1 of the unpacked package).
func cacheLockFile(t testing.TB, p *tptest.Provider) string {
	t.Helper()
	h, err := dirhash.HashZip(filepath.Join(p.Mirror, testprovider.MirrorPackage()), dirhash.Hash1)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("provider %q {\n  version     = %q\n  constraints = %q\n  hashes = [\n    %q,\n  ]\n}\n",
		testprovider.Source, testprovider.Version, testprovider.Version, h)
}

// cacheRunner is a Runner whose Terraform installs the test provider p
// (whose own CLI configuration names a plugin_cache_dir, p.CacheDir, which
// the Runner's cache must replace) with the plugin cache cache.
func cacheRunner(t *testing.T, p *tptest.Provider, cache string, keep bool) *Runner {
	t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r, err := NewRunner(RunnerOptions{WorkRoot: filepath.Join(t.TempDir(), "runs"), Binary: testBinary(t),
		Env: append(os.Environ(), p.Env()...), Logger: log, PluginCacheDir: cache, KeepWorkDirs: keep})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// cachedPackage is the test provider's package dir in the cache dir.
func cachedPackage(cache string) string {
	return filepath.Join(cache, testprovider.Hostname, testprovider.Namespace, testprovider.Type, testprovider.Version, testprovider.Platform)
}

// providerBinary is the provider executable in a package dir.
func providerBinary(pkg string) string {
	return filepath.Join(pkg, "terraform-provider-"+testprovider.Type+"_v"+testprovider.Version)
}

// TestPluginCacheSharedByRuns: two Runners (two kl processes) share one
// plugin cache. The provider is installed into it once, by the first plan;
// every plan and apply of both runs the real provider from a copy of its
// own, in its work dir (Terraform's data dir links there, not to the
// shared cache), and the plugin_cache_dir of the user's CLI configuration
// is never used. The runs tell nothing of their providers: all went as it
// should.
func TestPluginCacheSharedByRuns(t *testing.T) {
	t.Parallel()
	p := tptest.New(t)
	cache := filepath.Join(t.TempDir(), "plugins")
	runners := []*Runner{cacheRunner(t, p, cache, true), cacheRunner(t, p, cache, true)}
	dir := setupConfig(t, map[string]string{"main.tf": cacheConfig, lockFileName: cacheLockFile(t, p)})
	ctx := context.Background()
	for i, r := range runners {
		run := fmt.Sprintf("01RUN%d", i)
		plan, err := r.Plan(ctx, engine.PlanRequest{Run: run + "P", Dir: dir})
		if err != nil {
			t.Fatalf("plan %d: %v", i, err)
		}
		res, err := r.Apply(ctx, engine.ApplyRequest{Run: run + "A", PlanFile: plan.PlanFile, Config: plan.Config})
		if err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
		if len(plan.Notes)+len(res.Notes) > 0 {
			t.Errorf("run %d: notes %q, %q; want none", i, plan.Notes, res.Notes)
		}
		for _, id := range []string{run + "P", run + "A"} {
			w := filepath.Join(r.workRoot, id)
			link := filepath.Join(w, "data", "providers", testprovider.Hostname, testprovider.Namespace, testprovider.Type,
				testprovider.Version, testprovider.Platform)
			target, err := os.Readlink(link)
			if want := cachedPackage(filepath.Join(w, "plugins")); err != nil || target != want {
				t.Errorf("%s: %s links to %q (%v), want the run's own copy %s", id, link, target, err, want)
			}
		}
	}
	if n := runners[0].cache.installs.Load() + runners[1].cache.installs.Load(); n != 1 {
		t.Errorf("%d installs into the plugin cache, want 1", n)
	}
	if _, err := os.Stat(providerBinary(cachedPackage(cache))); err != nil {
		t.Errorf("the plugin cache holds no provider: %v", err)
	}
	if got := p.Cached(t); len(got) != 0 {
		t.Errorf("the CLI configuration's plugin_cache_dir holds %v: Terraform used it, not the run's copy", got)
	}
	if objs := p.Objects(t); len(objs) != 2 {
		t.Errorf("the fake API holds %v, want the 2 objects the applies created", objs)
	}
}

// TestPluginCacheTampered: a run's code (a local-exec, as the same user)
// replaced the cached provider binary with its own program. The next run
// does not execute it: its copy's hash is not the lock file's, so the
// cached package is moved aside to .tampered/ and the provider reinstalled;
// the run's notes say so, and the run plans with the real provider.
func TestPluginCacheTampered(t *testing.T) {
	t.Parallel()
	p := tptest.New(t)
	cache := filepath.Join(t.TempDir(), "plugins")
	r := cacheRunner(t, p, cache, false)
	dir := setupConfig(t, map[string]string{"main.tf": cacheConfig, lockFileName: cacheLockFile(t, p)})
	ctx := context.Background()
	if _, err := r.Plan(ctx, engine.PlanRequest{Run: "01FIRST", Dir: dir}); err != nil {
		t.Fatal(err)
	}
	bin := providerBinary(cachedPackage(cache))
	pwned := filepath.Join(t.TempDir(), "pwned")
	if err := os.Chmod(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\ntouch "+pwned+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	plan, err := r.Plan(ctx, engine.PlanRequest{Run: "01SECOND", Dir: dir})
	if err != nil {
		t.Fatalf("plan after the tampering: %v", err)
	}
	if _, err := os.Stat(pwned); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the tampered binary ran (%s: %v)", pwned, err)
	}
	if plan.Summary.Add != 1 {
		t.Errorf("plan after the tampering: %+v, want the 1 create", plan.Summary)
	}
	if len(plan.Notes) != 1 || !strings.Contains(plan.Notes[0], "moved aside to .tampered/") || !strings.Contains(plan.Notes[0], "reinstalled") {
		t.Errorf("notes %q; want one saying the cached package was moved aside and reinstalled", plan.Notes)
	}
	aside, err := filepath.Glob(filepath.Join(cache, ".tampered", testprovider.Hostname, testprovider.Namespace, testprovider.Type,
		testprovider.Version, testprovider.Platform+"-*"))
	if err != nil || len(aside) != 1 {
		t.Fatalf(".tampered holds %v (%v), want the one package moved aside", aside, err)
	}
	if b, err := os.ReadFile(providerBinary(aside[0])); err != nil || !strings.Contains(string(b), pwned) {
		t.Errorf("the package moved aside is not the tampered one (%v)", err)
	}
	lock, _, err := readLockFile(filepath.Join(dir, lockFileName))
	if err != nil {
		t.Fatal(err)
	}
	if h, err := hashPackage(cachedPackage(cache)); err != nil || !lock[0].hasH1(h) {
		t.Errorf("the reinstalled package's hash %s (%v) is not the lock file's %v", h, err, lock[0].H1)
	}
	if n := r.cache.installs.Load(); n != 2 {
		t.Errorf("%d installs, want 2 (the first and the reinstall)", n)
	}
}

// TestPluginCacheConcurrentInits: four Runners (four processes) plan at
// once on an empty cache: the provider is installed once (the file lock),
// and every plan succeeds with it.
func TestPluginCacheConcurrentInits(t *testing.T) {
	t.Parallel()
	p := tptest.New(t)
	cache := filepath.Join(t.TempDir(), "plugins")
	dir := setupConfig(t, map[string]string{"main.tf": cacheConfig, lockFileName: cacheLockFile(t, p)})
	const n = 4
	runners := make([]*Runner, n)
	for i := range runners {
		runners[i] = cacheRunner(t, p, cache, false)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, r := range runners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = r.Plan(context.Background(), engine.PlanRequest{Run: fmt.Sprintf("01PLAN%d", i), Dir: dir})
		}()
	}
	wg.Wait()
	var installs int64
	for i, r := range runners {
		if errs[i] != nil {
			t.Errorf("plan %d: %v", i, errs[i])
		}
		installs += r.cache.installs.Load()
	}
	if installs != 1 {
		t.Errorf("%d installs into the plugin cache by %d concurrent inits, want 1", installs, n)
	}
	if left, _ := filepath.Glob(filepath.Join(cache, ".staging", "*")); len(left) != 0 {
		t.Errorf("staging dirs left: %v", left)
	}
}

// TestPluginCacheNoLockFile: a configuration without a lock file is planned
// without the cache — Terraform 1.4+ would not take a provider from it
// anyway (plugin_cache_may_break_dependency_lock_file) — its provider
// installed from its origin for the run alone (into the run's own plugin
// dir, not the user's plugin_cache_dir either), and the run's note says
// so (but not a configuration of built-in resources alone, which has no
// provider to lock). The apply of that plan has the plan's lock file (Terraform wrote it
// at the plan's init): it takes the provider from the cache, with no note.
func TestPluginCacheNoLockFile(t *testing.T) {
	t.Parallel()
	p := tptest.New(t)
	cache := filepath.Join(t.TempDir(), "plugins")
	r := cacheRunner(t, p, cache, false)
	dir := setupConfig(t, map[string]string{"main.tf": cacheConfig})
	ctx := context.Background()
	plan, err := r.Plan(ctx, engine.PlanRequest{Run: "01PLAN", Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Notes) != 1 || plan.Notes[0] != noLockFileNote {
		t.Errorf("notes %q, want [%q]", plan.Notes, noLockFileNote)
	}
	if _, err := os.Stat(cachedPackage(cache)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the plugin cache holds the provider after a plan without a lock file (%v)", err)
	}
	if got := p.Cached(t); len(got) != 0 {
		t.Errorf("the CLI configuration's plugin_cache_dir holds %v", got)
	}
	res, err := r.Apply(ctx, engine.ApplyRequest{Run: "01APPLY", PlanFile: plan.PlanFile, Config: plan.Config})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Notes) != 0 {
		t.Errorf("apply notes %q, want none", res.Notes)
	}
	if _, err := os.Stat(providerBinary(cachedPackage(cache))); err != nil {
		t.Errorf("the apply, with the plan's lock file, did not fill the cache: %v", err)
	}
	if objs := p.Objects(t); len(objs) != 1 {
		t.Errorf("the fake API holds %v, want the object the apply created", objs)
	}

	// Built-in resources alone: no provider to lock, Terraform writes no
	// lock file, and there is nothing to tell.
	builtin := setupConfig(t, map[string]string{"main.tf": "resource \"terraform_data\" \"x\" {}\n"})
	if plan, err := r.Plan(ctx, engine.PlanRequest{Run: "01BUILTIN", Dir: builtin}); err != nil || len(plan.Notes) != 0 {
		t.Errorf("plan of terraform_data alone: %v, notes %q; want no note", err, plan.Notes)
	}
}

// TestParseLockFile reads the provider blocks of a lock file as Terraform
// writes them, and refuses what Terraform would.
func TestParseLockFile(t *testing.T) {
	t.Parallel()
	const good = `# This file is maintained automatically by "terraform init".

provider "registry.terraform.io/hashicorp/null" {
  version     = "3.2.1"
  constraints = "~> 3.0"
  hashes = [
    "h1:AAAA=",
    "zh:0000",
    "h1:BBBB=",
  ]
}

provider "kilolock.test/kilolock/kltest" {
  version = "0.1.0"
}
`
	ps, err := parseLockFile([]byte(good), lockFileName)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 2 || ps[0].Source != "registry.terraform.io/hashicorp/null" || ps[0].Version != "3.2.1" ||
		strings.Join(ps[0].H1, " ") != "h1:AAAA= h1:BBBB=" || !strings.HasPrefix(string(ps[0].Block), `provider "registry.terraform.io/hashicorp/null" {`) ||
		!strings.HasSuffix(string(ps[0].Block), "}") || ps[1].Version != "0.1.0" || len(ps[1].H1) != 0 {
		t.Errorf("parseLockFile = %+v", ps)
	}
	for name, src := range map[string]string{
		"syntax":         `provider "a/b/c" {`,
		"no label":       `provider { version = "1" }`,
		"short source":   `provider "b/c" { version = "1" }`,
		"dotdot source":  `provider "a/../c" { version = "1" }`,
		"no version":     `provider "a/b/c" {}`,
		"path version":   `provider "a/b/c" { version = "../1" }`,
		"number version": `provider "a/b/c" { version = 1 }`,
		"hashes string":  "provider \"a/b/c\" {\n  version = \"1\"\n  hashes = \"h1:x\"\n}\n",
		"hashes numbers": "provider \"a/b/c\" {\n  version = \"1\"\n  hashes = [1]\n}\n",
	} {
		if _, err := parseLockFile([]byte(src), lockFileName); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("%s: parseLockFile(%q) = %v, want engine.ErrInvalid", name, src, err)
		}
	}
}

// TestRemoveStaleStaging: an install's staging dir a killed process left
// is removed once untouched for the stale age; a recent one (an install in
// progress) and other entries stay.
func TestRemoveStaleStaging(t *testing.T) {
	t.Parallel()
	staging := t.TempDir()
	now := time.Now()
	for name, age := range map[string]time.Duration{"install-old": 25 * time.Hour, "install-new": time.Minute, "other": 25 * time.Hour} {
		p := filepath.Join(staging, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	removeStaleStaging(staging, DefaultStaleAfter, now, slog.New(slog.DiscardHandler))
	var left []string
	ents, err := os.ReadDir(staging)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if strings.Join(left, " ") != "install-new other" {
		t.Errorf("left %v, want install-new and other", left)
	}
}
