package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCheckOnly(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"", OnlyAll, OnlyConcurrency, OnlyOverhead, OnlyProvider, OnlyCommit, OnlyGrowth, OnlyNative} {
		if err := CheckOnly(ok); err != nil {
			t.Errorf("CheckOnly(%q) = %v", ok, err)
		}
	}
	if err := CheckOnly("speed"); err == nil {
		t.Error(`CheckOnly("speed") accepted`)
	}
}

func TestIndent(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	w := indent(&b)
	fmt.Fprint(w, "a\nb")
	fmt.Fprint(w, "c\n\nd\n")
	if got, want := b.String(), "  a\n  bc\n  \n  d\n"; got != want {
		t.Errorf("indent wrote %q, want %q", got, want)
	}
}

func TestConcurrencyConfig(t *testing.T) {
	t.Parallel()
	golden(t, "concurrency.tf.golden", []byte(concurrencyConfig(2, 2*time.Second)))
	if got := strings.Count(concurrencyConfig(8, time.Second), `resource "terraform_data"`); got != 8 {
		t.Errorf("8 plans: %d resources", got)
	}
}

func TestModuleRoot(t *testing.T) {
	t.Parallel()
	root, err := ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Errorf("ModuleRoot = %s: %v", root, err)
	}
	if _, err := ModuleRoot(t.TempDir()); err == nil {
		t.Error("a temp dir has a module root")
	}
}
