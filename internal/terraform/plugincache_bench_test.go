package terraform

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/testprovider"
	"github.com/kilolock/kilolock/internal/testprovider/tptest"
)

// BenchmarkPluginCache (make bench) times a Runner's plan of one test
// provider resource — init, plan, show — by how the provider is installed:
// "none" (no cache: every init unpacks it from the filesystem mirror, the
// floor of a registry download), "terraform" (Terraform's own shared
// plugin_cache_dir, unsafe: ADR 0061) and "kilolock" (Kilolock's cache,
// filled by the first iteration: a copy and a hash per run). The mirror is
// local, so "none" is what a cache saves at best here; a real registry
// download costs more.
func BenchmarkPluginCache(b *testing.B) {
	p := tptest.New(b)
	dir := b.TempDir()
	writeTree(b, dir, map[string]string{"main.tf": cacheConfig, lockFileName: cacheLockFile(b, p)})
	noCache := filepath.Join(b.TempDir(), "none.tfrc")
	if err := os.WriteFile(noCache, []byte(testprovider.CLIConfig(p.Mirror, "")), 0o600); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		env   []string
		cache string
	}{
		{"none", []string{"TF_CLI_CONFIG_FILE=" + noCache}, ""},
		{"terraform", nil, ""},
		{"kilolock", nil, filepath.Join(b.TempDir(), "plugins")},
	} {
		b.Run(c.name, func(b *testing.B) {
			env := append(append(os.Environ(), p.Env()...), c.env...)
			r, err := NewRunner(RunnerOptions{WorkRoot: filepath.Join(b.TempDir(), "runs"), Binary: testBinary(b), Env: env,
				Logger: slog.New(slog.DiscardHandler), PluginCacheDir: c.cache})
			if err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				i++
				if _, err := r.Plan(context.Background(), engine.PlanRequest{Run: fmt.Sprintf("01BENCH%d", i), Dir: dir}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
