package version_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/store"
	"github.com/kilolock/kilolock/internal/version"
)

const pkg = "github.com/kilolock/kilolock/internal/version"

// TestBinaries builds the real kl and klbot — as a release does (the
// version facts set at link time, as .goreleaser.yaml sets them), as a
// developer does in a git checkout (Go's VCS stamping), and with a bad
// version — and checks what `version`, `--version` and `version --json`
// print, and that a bad version is refused naming it.
func TestBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kl and klbot")
	}
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git on PATH")
	}
	src := gitCopy(t, filepath.Join("..", ".."))
	rev := strings.TrimSpace(git(t, src, "rev-parse", "HEAD"))
	schema, err := version.Schema()
	if err != nil {
		t.Fatal(err)
	}
	goVersion := strings.TrimSpace(run(t, src, goBin, "env", "GOVERSION"))
	tail := fmt.Sprintf("  go         %s %s/%s\n  store      schema version %d, compatibility level %d\n", goVersion, runtime.GOOS, runtime.GOARCH, schema, store.CompatLevel)

	t.Run("release", func(t *testing.T) {
		t.Parallel()
		bins := build(t, goBin, src, "-X "+pkg+".Version=1.2.3 -X "+pkg+".Commit="+rev+" -X "+pkg+".Date=2026-12-02T04:06:00+01:00 -X "+pkg+".Dirty=false")
		for _, prog := range []string{"kl", "klbot"} {
			want := prog + " 1.2.3\n  commit     " + rev + "\n  committed  2026-12-02T03:06:00Z\n" + tail
			for _, args := range [][]string{{"version"}, {"--version"}} {
				if got := exe(t, bins[prog], args...); got.out != want || got.code != 0 || got.err != "" {
					t.Errorf("%s %s: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", prog, args[0], got.code, got.err, got.out, want)
				}
			}
			got := exe(t, bins[prog], "version", "--json")
			var doc map[string]any
			if err := json.Unmarshal([]byte(got.out), &doc); err != nil || got.code != 0 {
				t.Fatalf("%s version --json: exit %d, %v:\n%s", prog, got.code, err, got.out)
			}
			wantDoc := map[string]any{"schema": "kilolock/version/v1", "program": prog, "version": "1.2.3", "commit": rev,
				"commit_time": "2026-12-02T03:06:00Z", "go": goVersion, "platform": runtime.GOOS + "/" + runtime.GOARCH,
				"store": map[string]any{"schema_version": float64(schema), "compat_level": float64(store.CompatLevel)}}
			if a, b := fmt.Sprint(doc), fmt.Sprint(wantDoc); a != b {
				t.Errorf("%s version --json:\n%s\nwant:\n%s", prog, a, b)
			}
		}
	})

	t.Run("development build in a git checkout", func(t *testing.T) {
		bins := build(t, goBin, src, "")
		want := "kl " + version.Next + "-dev\n  commit     " + rev + "\n  committed  2026-11-29T12:00:00Z\n" + tail
		if got := exe(t, bins["kl"], "version"); got.out != want || got.code != 0 {
			t.Errorf("kl version: exit %d, stdout:\n%s\nwant:\n%s", got.code, got.out, want)
		}
		// A tracked file changed: Go records vcs.modified.
		appendFile(t, filepath.Join(src, "README.md"), "\nchanged\n")
		bins = build(t, goBin, src, "")
		want = "klbot " + version.Next + "-dev\n  commit     " + rev + " (modified)\n  committed  2026-11-29T12:00:00Z\n" + tail
		if got := exe(t, bins["klbot"], "--version"); got.out != want || got.code != 0 {
			t.Errorf("klbot --version: exit %d, stdout:\n%s\nwant:\n%s", got.code, got.out, want)
		}
	})

	t.Run("bad version", func(t *testing.T) {
		t.Parallel()
		// What `git describe --always --dirty` gives: not a semantic version.
		bins := build(t, goBin, src, "-X "+pkg+".Version=dfc09e9-dirty")
		msg := `this binary was built with version "dfc09e9-dirty" (-X ` + pkg + `.Version): not a semantic version`
		for _, c := range []struct{ prog, arg string }{{"kl", "version"}, {"kl", "--version"}, {"klbot", "version"}, {"klbot", "--version"}} {
			got := exe(t, bins[c.prog], c.arg)
			if got.code != 1 || !strings.HasPrefix(got.err, c.prog+": "+msg) || got.out != "" {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.prog, c.arg, got.code, got.out, got.err, msg)
			}
		}
	})
}

// gitCopy copies the source tree at root (without .git — a directory in
// a clone, a file in a git worktree — bin, dist and the like) into a new
// git repository with one commit, made 2026-11-29 12:00:00 UTC, so that Go
// stamps it as it stamps a clone. Every git command names the new
// repository (GIT_DIR, GIT_WORK_TREE): none can reach the checkout the
// test runs in.
func gitCopy(t *testing.T, root string) string {
	t.Helper()
	dst := t.TempDir()
	skip := map[string]bool{".git": true, "bin": true, "dist": true, ".kl": true, ".tools": true, ".terraform": true}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		if skip[d.Name()] && rel != "." {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		fi, err := d.Info()
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, fi.Mode().Perm())
	})
	if err != nil {
		t.Fatalf("copying the source tree: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dst, ".git")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the copy holds a .git (%v): its git commands could reach another repository", err)
	}
	git(t, dst, "init", "-q")
	git(t, dst, "add", "-A")
	git(t, dst, "-c", "user.name=kl test", "-c", "user.email=kl@test.invalid", "-c", "commit.gpgsign=false",
		"commit", "-q", "-m", "copy", "--date=2026-11-29T12:00:00Z")
	return dst
}

// git runs git on the repository of the work tree dir only.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return run(t, dir, "git", append([]string{"--git-dir=" + filepath.Join(dir, ".git"), "--work-tree=" + dir}, args...)...)
}

// build builds kl and klbot from src as a release does (CGO off,
// -trimpath), with VCS stamping on and ldflags (may be "").
func build(t *testing.T, goBin, src, ldflags string) map[string]string {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command(goBin, "build", "-trimpath", "-buildvcs=true", "-ldflags", ldflags, "-o", out+string(filepath.Separator), "./cmd/kl", "./cmd/klbot")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GIT_COMMITTER_DATE=2026-11-29T12:00:00Z")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", ldflags, err, b)
	}
	return map[string]string{"kl": filepath.Join(out, "kl"), "klbot": filepath.Join(out, "klbot")}
}

type result struct {
	out, err string
	code     int
}

// exe runs bin with args in an empty directory and an environment that
// holds no KL_* or KLBOT_* variable.
func exe(t *testing.T, bin string, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("running %s %v: %v", bin, args, err)
	}
	return result{out: out.String(), err: errOut.String(), code: cmd.ProcessState.ExitCode()}
}

func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_COMMITTER_DATE=2026-11-29T12:00:00Z")
	b, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("%s %v: %v\n%s", name, args, err, ee.Stderr)
		}
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return string(b)
}

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}
