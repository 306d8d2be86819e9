package closure_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kilolock/kilolock/internal/closure"
	"github.com/kilolock/kilolock/internal/tfstate"
)

// BenchmarkSlice5001 is the closure's own cost on the configuration of
// docs/terraform.md "What a narrow plan costs" (5,001 terraform_data
// resources): Load, TargetScope, Compute and WriteSlice of one resource,
// and FileScope of a changed root file (which walks the whole graph).
func BenchmarkSlice5001(b *testing.B) {
	dir := b.TempDir()
	for f, s := range tfstate.SynthesizeTerraformDataConfig(5001, 0) {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, s, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("targets", func(b *testing.B) {
		for b.Loop() {
			cfg, err := closure.Load(dir)
			if err != nil {
				b.Fatal(err)
			}
			s, err := closure.TargetScope(cfg, []string{"terraform_data.r02500"})
			if err != nil {
				b.Fatal(err)
			}
			c, err := closure.Compute(cfg, s)
			if err != nil {
				b.Fatal(err)
			}
			if err := c.WriteSlice(b.TempDir()); err != nil {
				b.Fatal(err)
			}
		}
	})
}
