package terraform

import (
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
)

// TestNewRunnerRemovesStaleWorkDirs: NewRunner removes the work dirs killed
// runs left behind — run-id-named dirs in which nothing was modified for
// StaleAfter — and nothing else; KeepWorkDirs or a negative StaleAfter
// turn it off. Ages are set with os.Chtimes.
func TestNewRunnerRemovesStaleWorkDirs(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "terraform")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	day := 24 * time.Hour
	now := time.Now()
	runID := func(age time.Duration) string {
		return ulid.MustNew(ulid.Timestamp(now.Add(-age)), ulid.DefaultEntropy()).String()
	}
	// entry is one thing under the work root: a work dir laid out like a
	// run's (snapshot, plan, data/), aged age, with fresh (if set) touched
	// just now; or a plain file (file).
	type entry struct {
		age   time.Duration
		fresh string // a path inside the dir modified now
		file  bool
	}
	tests := map[string]struct {
		opts    RunnerOptions
		entries map[string]entry // name → entry; "" names get a run id
		kept    []string
	}{
		"default threshold": {
			entries: map[string]entry{
				"old":          {age: 2 * day},
				"recent":       {age: time.Hour},
				"old-but-busy": {age: 2 * day, fresh: "data/terraform.tfstate"},
				"notes":        {age: 3 * day}, // not a run id
				"file":         {age: 3 * day, file: true},
			},
			kept: []string{"file", "notes", "old-but-busy", "recent"},
		},
		"shorter threshold": {
			opts:    RunnerOptions{StaleAfter: time.Hour},
			entries: map[string]entry{"old": {age: 2 * time.Hour}, "recent": {age: time.Minute}},
			kept:    []string{"recent"},
		},
		"kept work dirs": {
			opts:    RunnerOptions{KeepWorkDirs: true},
			entries: map[string]entry{"old": {age: 2 * day}},
			kept:    []string{"old"},
		},
		"disabled": {
			opts:    RunnerOptions{StaleAfter: -1},
			entries: map[string]entry{"old": {age: 2 * day}},
			kept:    []string{"old"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			names := map[string]string{} // on-disk name → entry name
			for ename, e := range tc.entries {
				disk := ename
				if ename != "notes" {
					disk = runID(e.age)
				}
				names[disk] = ename
				p := filepath.Join(root, disk)
				if e.file {
					writeFile(t, p, "x")
				} else {
					writeFile(t, filepath.Join(p, "snapshot.tfstate"), "{}")
					writeFile(t, filepath.Join(p, "plan.tfplan"), "plan")
					writeFile(t, filepath.Join(p, "data", "terraform.tfstate"), "{}")
				}
				ageTree(t, p, now.Add(-e.age))
				if e.fresh != "" {
					if err := os.Chtimes(filepath.Join(p, e.fresh), now, now); err != nil {
						t.Fatal(err)
					}
				}
			}
			opts := tc.opts
			opts.WorkRoot, opts.Binary = root, bin
			opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
			if _, err := NewRunner(opts); err != nil {
				t.Fatalf("NewRunner: %v", err)
			}
			ents, err := os.ReadDir(root)
			if err != nil {
				t.Fatal(err)
			}
			var kept []string
			for _, e := range ents {
				kept = append(kept, names[e.Name()])
			}
			sort.Strings(kept)
			want := append([]string(nil), tc.kept...)
			sort.Strings(want)
			if len(kept) != len(want) {
				t.Fatalf("kept %v, want %v", kept, want)
			}
			for i := range kept {
				if kept[i] != want[i] {
					t.Fatalf("kept %v, want %v", kept, want)
				}
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// ageTree sets the modification time of path and everything below it to at,
// children first (creating a child touches its directory).
func ageTree(t *testing.T, path string, at time.Time) {
	t.Helper()
	var paths []string
	if err := filepath.WalkDir(path, func(p string, _ fs.DirEntry, err error) error {
		paths = append(paths, p)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for i := len(paths) - 1; i >= 0; i-- {
		if err := os.Chtimes(paths[i], at, at); err != nil {
			t.Fatal(err)
		}
	}
}
