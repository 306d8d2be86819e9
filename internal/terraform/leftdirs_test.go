package terraform

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// TestLeftWorkDirs: WorkDirRuns lists the dirs named like a run id below
// the work root, nothing else kept there; LastState reads what Terraform
// last wrote in a run's dir — errored.tfstate in the root module copy
// before the snapshot file, as an apply's own result is read — nil for a
// dir without either, and refuses a run id that is not a plain name.
func TestLeftWorkDirs(t *testing.T) {
	t.Parallel()
	root := filepath.Join(t.TempDir(), "runs")
	r := &Runner{workRoot: root}
	if ids, err := r.WorkDirRuns(); err != nil || len(ids) != 0 {
		t.Fatalf("WorkDirRuns of a missing root = %v, %v; want none", ids, err)
	}
	a, b := engine.NewRunID(), engine.NewRunID()
	wa, err := newWorkDir(root, a)
	if err != nil {
		t.Fatal(err)
	}
	wb, err := newWorkDir(root, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{"not-a-run", "cache"} {
		if err := os.Mkdir(filepath.Join(root, other), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, engine.NewRunID()), nil, 0o600); err != nil { // a file, not a dir
		t.Fatal(err)
	}
	want := []string{a, b}
	slices.Sort(want)
	if ids, err := r.WorkDirRuns(); err != nil || !slices.Equal(ids, want) {
		t.Errorf("WorkDirRuns = %v, %v; want %v", ids, err, want)
	}

	if st, err := r.LastState(a); err != nil || st != nil {
		t.Errorf("LastState of a dir without state = %q, %v; want nil", st, err)
	}
	if err := wa.writeSnapshot([]byte(`{"serial": 3}`)); err != nil {
		t.Fatal(err)
	}
	if st, err := r.LastState(a); err != nil || string(st) != `{"serial": 3}` {
		t.Errorf("LastState = %q, %v; want the snapshot file", st, err)
	}
	rootModule := filepath.Join(wa.Cfg, "infra")
	if err := os.MkdirAll(rootModule, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootModule, "errored.tfstate"), []byte(`{"serial": 4}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if st, err := r.LastState(a); err != nil || string(st) != `{"serial": 4}` {
		t.Errorf("LastState with errored.tfstate = %q, %v; want errored.tfstate (Terraform could not persist the snapshot)", st, err)
	}
	if err := os.RemoveAll(wb.Dir); err != nil {
		t.Fatal(err)
	}
	if st, err := r.LastState(b); err != nil || st != nil {
		t.Errorf("LastState of a missing dir = %q, %v; want nil", st, err)
	}
	for _, bad := range []string{"", ".", "..", "a/b", `a\b`, "../x"} {
		if _, err := r.LastState(bad); !errors.Is(err, engine.ErrInvalid) {
			t.Errorf("LastState(%q) = %v; want ErrInvalid", bad, err)
		}
	}
}
