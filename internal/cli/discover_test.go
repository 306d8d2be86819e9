package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/cli"
)

// The tests of this file change the process's working directory
// (t.Chdir): they cannot run in parallel, and go test runs them before
// the package's parallel tests start.

// discoverEnv is kl's environment without KL_STORE: the default store.
// HOME is home (its parent is a ceiling of the search, ADR 0049).
func discoverEnv(home string, extra ...string) []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TF_CLI_CONFIG_FILE=/dev/null",
		"CHECKPOINT_DISABLE=1", "KL_ACTOR=alice",
	}, extra...)
}

// klIn runs kl in-process in dir (t.Chdir) with env.
func klIn(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	t.Chdir(dir)
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := cli.Run(ctx, args, env, cli.IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
	return result{out: out.String(), errOut: errOut.String(), err: err}
}

// klOK is klIn that fails the test unless kl succeeds.
func klOK(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	r := klIn(t, dir, env, args...)
	if r.err != nil {
		t.Fatalf("kl %s in %s: %v\nstderr:\n%s", strings.Join(args, " "), dir, r.err, r.errOut)
	}
	return r
}

// mkdirs creates each dir (and its parents).
func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// noStoreIn fails the test when dir holds a .kl.
func noStoreIn(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, ".kl")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s/.kl exists (stat: %v): kl started a second store", d, err)
		}
	}
}

// stateNames runs kl state list --json in dir and returns the names.
func stateNames(t *testing.T, dir string, env []string) (names []string, stderr string) {
	t.Helper()
	r := klOK(t, dir, env, "state", "list", "--json")
	var doc struct {
		States []struct {
			Name string `json:"name"`
		} `json:"states"`
	}
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		t.Fatalf("kl state list --json in %s: stdout is not one JSON document (%v):\n%s", dir, err, r.out)
	}
	for _, s := range doc.States {
		names = append(names, s.Name)
	}
	return names, r.errOut
}

// TestStoreFoundAbove: the default store is the nearest .kl/ from the
// working directory upward, as git finds .git (issue 13 §6): `cd sub &&
// kl state init x` adds x to the store above instead of starting a second
// store, and says which store it used; in the store's own directory, or
// with KL_STORE, nothing is said.
func TestStoreFoundAbove(t *testing.T) {
	base := t.TempDir()
	repo := filepath.Join(base, "repo")
	deeper := filepath.Join(repo, "sub", "deeper")
	mkdirs(t, deeper)
	env := discoverEnv(base)
	store := filepath.Join(repo, ".kl", "kl.db")

	r := klOK(t, repo, env, "state", "init", "prod")
	if _, err := os.Stat(store); err != nil {
		t.Fatalf("kl state init in %s did not create %s: %v", repo, store, err)
	}
	if want := "kl: created a new store in " + filepath.Join(repo, ".kl") + " (no .kl/ in the working directory or above it)\n"; r.errOut != want {
		t.Errorf("kl state init in a tree without a store: stderr\n%q\nwant\n%q", r.errOut, want)
	}

	r = klOK(t, deeper, env, "state", "init", "staging")
	noStoreIn(t, deeper, filepath.Join(repo, "sub"))
	notice := "kl: using the store in " + filepath.Join(repo, ".kl") + " (the nearest .kl/ above the working directory)\n"
	if r.errOut != notice {
		t.Errorf("kl state init below the store: stderr\n%q\nwant\n%q", r.errOut, notice)
	}

	// --json: stdout is the document alone, the notice is on stderr.
	names, stderr := stateNames(t, deeper, env)
	if !slices.Equal(names, []string{"prod", "staging"}) || stderr != notice {
		t.Errorf("kl state list --json below the store: states %q, stderr %q; want [prod staging] and %q", names, stderr, notice)
	}
	if names, stderr := stateNames(t, repo, env); !slices.Equal(names, []string{"prod", "staging"}) || stderr != "" {
		t.Errorf("kl state list --json in the store's directory: states %q, stderr %q; want [prod staging] and nothing", names, stderr)
	}
	// A store named by KL_STORE is the one the user named: nothing is said.
	if _, stderr := stateNames(t, deeper, append(env, "KL_STORE="+store)); stderr != "" {
		t.Errorf("kl state list with KL_STORE: stderr %q, want nothing", stderr)
	}
	// A relative --store is relative to the working directory, not found above.
	r = klIn(t, deeper, env, "state", "list", "--store", filepath.Join(".kl", "kl.db"))
	if r.err == nil || !strings.Contains(r.err.Error(), "no Kilolock store at .kl/kl.db (--store)") {
		t.Errorf("kl state list --store .kl/kl.db below the store: err %v", r.err)
	}
}

// TestStoreStopsAtSharedDirectory: a .kl/ in a directory everyone may
// write to (a temp dir like /tmp: mode 1777) is not picked up from below
// it, whoever owns it — as root, every owner is the same — and kl state
// init below it starts a store in the working directory (ADR 0049).
func TestStoreStopsAtSharedDirectory(t *testing.T) {
	base := t.TempDir()
	shared := filepath.Join(base, "tmp")
	mine := filepath.Join(shared, "mine")
	mkdirs(t, mine)
	env := discoverEnv(base)
	klOK(t, shared, env, "state", "init", "planted")
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	r := klOK(t, mine, env, "state", "init", "prod")
	if _, err := os.Stat(filepath.Join(mine, ".kl", "kl.db")); err != nil {
		t.Errorf("kl state init below a shared directory's store did not start its own (%v); stderr %q", err, r.errOut)
	}
	if names, _ := stateNames(t, mine, env); !slices.Equal(names, []string{"prod"}) {
		t.Errorf("kl state list below a shared directory's store: states %q, want [prod] (not the planted store's)", names)
	}
}

// TestStoreCeilingThroughSymlink: a ceiling named through a symbolic link,
// or a working directory reached through one, stops the search as the
// same path would (paths compare resolved, as git's ceilings do; ADR 0049).
func TestStoreCeilingThroughSymlink(t *testing.T) {
	base := t.TempDir()
	a := filepath.Join(base, "a")
	sub := filepath.Join(a, "b")
	mkdirs(t, sub)
	link := filepath.Join(base, "alink")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	env := discoverEnv(base)
	klOK(t, a, env, "state", "init", "above")
	for _, tc := range []struct{ wd, ceiling string }{{sub, link}, {filepath.Join(link, "b"), a}} {
		r := klIn(t, tc.wd, append(env, "KL_CEILING_DIRECTORIES="+tc.ceiling), "state", "list")
		if r.err == nil || !strings.Contains(r.err.Error(), "no Kilolock store at") ||
			!strings.Contains(r.err.Error(), filepath.Join(a, ".kl")+" is not used: the search does not enter "+a+" (a ceiling") {
			t.Errorf("kl in %s with KL_CEILING_DIRECTORIES=%s: err %v; want no store, naming %s/.kl as not used", tc.wd, tc.ceiling, r.err, a)
		}
	}
}

// otherUID owns the directories that belong to "another user".
const otherUID = 4242

// chownAll gives path and everything under it to uid. It skips the test
// when kl's tests do not run as root (only root may give a file away):
// TestDiscoveryOwners tests the same rule with injected owners.
func chownAll(t *testing.T, path string, uid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot give a directory to another uid (TestDiscoveryOwners covers the rule)")
	}
	err := filepath.WalkDir(path, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStoreStopsAtOwnerChange: the search does not enter a parent owned
// by another user (a store in a shared directory such as /tmp is not
// picked up: git's CVE-2022-24765), and refuses a .kl/ another user owns
// in a parent that is the user's own; run as root, on real directories
// given to another uid.
func TestStoreStopsAtOwnerChange(t *testing.T) {
	base := t.TempDir()
	env := discoverEnv(base)

	// shared/ belongs to another user, who put a store in it; mine/ in it is ours.
	shared := filepath.Join(base, "shared")
	mine := filepath.Join(shared, "mine")
	mkdirs(t, shared)
	klOK(t, base, append(env, "KL_STORE="+filepath.Join(shared, ".kl", "kl.db")), "state", "init", "planted")
	chownAll(t, shared, otherUID)
	mkdirs(t, mine) // root's
	r := klIn(t, mine, env, "state", "list")
	if want := "no Kilolock store at " + filepath.Join(mine, ".kl", "kl.db") + " (the default: no .kl/ in the working directory or above it;"; r.err == nil || !strings.Contains(r.err.Error(), want) {
		t.Errorf("kl state list below a store in another user's directory: err %v, want it to say %q", r.err, want)
	}
	r = klOK(t, mine, env, "state", "init", "prod")
	if want := "kl: created a new store in " + filepath.Join(mine, ".kl") + " (no .kl/ in the working directory or above it; " +
		filepath.Join(shared, ".kl") + " is not used: the search does not enter " + shared + " (owned by uid 4242, not by the working directory's owner))\n"; r.errOut != want {
		t.Errorf("kl state init below another user's store: stderr %q, want %q", r.errOut, want)
	}
	if names, _ := stateNames(t, mine, env); !slices.Equal(names, []string{"prod"}) {
		t.Errorf("the store in %s holds %q, want [prod] (not the planted store)", mine, names)
	}

	// team/ is ours, but its .kl/ belongs to another user: refused, by name.
	team := filepath.Join(base, "team")
	me := filepath.Join(team, "me")
	mkdirs(t, me)
	klOK(t, base, append(env, "KL_STORE="+filepath.Join(team, ".kl", "kl.db")), "state", "init", "planted")
	chownAll(t, filepath.Join(team, ".kl"), otherUID)
	for _, args := range [][]string{{"state", "list"}, {"state", "init", "x"}} {
		r := klIn(t, me, env, args...)
		want := "not using the store in " + filepath.Join(team, ".kl") + ": it belongs to uid 4242, neither to you (uid 0) " +
			"nor to the owner of the working directory (uid 0)"
		if r.err == nil || !strings.Contains(r.err.Error(), want) || !strings.Contains(r.err.Error(), "KL_STORE="+filepath.Join(team, ".kl", "kl.db")) {
			t.Errorf("kl %s below another user's .kl/: err %v, want it to say %q and how to use it anyway", strings.Join(args, " "), r.err, want)
		}
	}
	noStoreIn(t, me)

	// Our own .kl/ in our working directory that another user owns (a CI
	// checkout owned by the runner's uid, kl run as root) is ours to use.
	chownAll(t, me, otherUID)
	klOK(t, me, env, "state", "init", "ci")
	if names, stderr := stateNames(t, me, env); !slices.Equal(names, []string{"ci"}) || stderr != "" {
		t.Errorf("kl state list in a directory another uid owns, with root's .kl/: %q, stderr %q; want [ci] and nothing", names, stderr)
	}
}

// TestStoreCeilings: the search does not enter a KL_CEILING_DIRECTORIES
// entry nor the parent of $HOME; a relative entry is refused by name.
func TestStoreCeilings(t *testing.T) {
	base := t.TempDir()
	repo := filepath.Join(base, "repo")
	sub := filepath.Join(repo, "sub")
	mkdirs(t, sub)
	klOK(t, repo, discoverEnv(base), "state", "init", "prod")

	for name, env := range map[string][]string{
		"KL_CEILING_DIRECTORIES": discoverEnv(base, "KL_CEILING_DIRECTORIES=/nowhere::"+repo),
		"HOME's parent":          discoverEnv(sub),
	} {
		r := klIn(t, sub, env, "state", "list")
		if r.err == nil || !strings.Contains(r.err.Error(), "no Kilolock store at "+filepath.Join(sub, ".kl", "kl.db")+" (the default: no .kl/") {
			t.Errorf("%s: kl state list below the ceiling: err %v, want no store found", name, r.err)
		}
	}
	// A ceiling is not entered from below; the working directory itself is searched.
	if names, _ := stateNames(t, repo, discoverEnv(base, "KL_CEILING_DIRECTORIES="+repo)); !slices.Equal(names, []string{"prod"}) {
		t.Errorf("kl state list in a ceiling directory: %q, want [prod]", names)
	}

	r := klIn(t, sub, discoverEnv(base, "KL_CEILING_DIRECTORIES=/srv:repo"), "state", "list")
	if want := `KL_CEILING_DIRECTORIES=/srv:repo: "repo" is not an absolute path: each entry must be one`; r.err == nil || r.err.Error() != want {
		t.Errorf("a relative KL_CEILING_DIRECTORIES entry: err %v, want %q", r.err, want)
	}
}
