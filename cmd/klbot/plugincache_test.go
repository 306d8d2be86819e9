package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// TestPluginCacheDir: klbot's plugin cache (ADR 0061) is plugins/ in
// KLBOT_WORKDIR by default, KLBOT_PLUGIN_CACHE_DIR when set, and none when
// that is "off" (the Runner creates the cache dir when it starts).
func TestPluginCacheDir(t *testing.T) {
	t.Parallel()
	tfBin := terraformBinary(t)
	for name, tc := range map[string]struct {
		setting string
		want    func(workDir string) string // "" none
	}{
		"default": {"", func(w string) string { return filepath.Join(w, "plugins") }},
		"set":     {"SET", func(w string) string { return filepath.Join(w, "elsewhere") }},
		"off":     {"off", func(string) string { return "" }},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			workDir := t.TempDir()
			cfg := config{Terraform: tfBin, PluginCacheDir: tc.setting}
			if tc.setting == "SET" {
				cfg.PluginCacheDir = filepath.Join(workDir, "elsewhere")
			}
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
			if _, _, err := newRunner(context.Background(), cfg, env, filepath.Join(workDir, "runs"), 0, slog.New(slog.DiscardHandler)); err != nil {
				t.Fatal(err)
			}
			entries, err := os.ReadDir(workDir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				if e.Name() != "runs" {
					got = append(got, filepath.Join(workDir, e.Name()))
				}
			}
			want := tc.want(workDir)
			if (want == "" && len(got) != 0) || (want != "" && (len(got) != 1 || got[0] != want)) {
				t.Errorf("KLBOT_PLUGIN_CACHE_DIR=%q: klbot made %v in KLBOT_WORKDIR, want the plugin cache %q", tc.setting, got, want)
			}
		})
	}
}
