package cli_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/kilolock/kilolock/internal/cli"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// kit is one test's kl world: a temp dir, a SQLite store in it and the
// environment kl runs with (real Terraform from PATH, no CLI config).
type kit struct {
	t     *testing.T
	dir   string // temp root; also HOME
	store string // the SQLite file
	env   []string
	norm  normalizer
}

// setup returns a kit with an empty store at <temp>/kl.db. It skips the
// test when no terraform is on PATH.
func setup(t *testing.T) *kit {
	t.Helper()
	if _, err := exec.LookPath("terraform"); err != nil {
		t.Skip("terraform not on PATH (make tools)")
	}
	dir := t.TempDir()
	host, _ := os.Hostname()
	k := &kit{t: t, dir: dir, store: filepath.Join(dir, "kl.db"), norm: normalizer{paths: tempPaths(dir), host: host}}
	k.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + dir,
		"TF_CLI_CONFIG_FILE=/dev/null",
		"CHECKPOINT_DISABLE=1",
		"KL_STORE=" + k.store,
		"KL_ACTOR=alice",
	}
	return k
}

// with returns k reporting to t (a subtest): Fatal must be called from
// the goroutine of the test that fails.
func (k *kit) with(t *testing.T) *kit {
	c := *k
	c.t = t
	return &c
}

// tempPaths returns dir and, when it differs, dir with symlinks resolved.
func tempPaths(dir string) []string {
	out := []string{dir}
	if r, err := filepath.EvalSymlinks(dir); err == nil && r != dir {
		out = append(out, r)
	}
	return out
}

// result is one kl invocation.
type result struct {
	out, errOut string
	err         error
}

// code is the process exit code main would use for r.err.
func (r result) code() int {
	if r.err == nil {
		return 0
	}
	var ee *cli.ExitError
	if errors.As(r.err, &ee) {
		return ee.Code
	}
	return 1
}

// run runs kl with args and stdin in, with env replacing k.env when given.
func (k *kit) runWith(env []string, stdin string, args ...string) result {
	k.t.Helper()
	if env == nil {
		env = k.env
	}
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := cli.Run(ctx, args, env, cli.IO{In: strings.NewReader(stdin), Out: &out, Err: &errOut})
	return result{out: out.String(), errOut: errOut.String(), err: err}
}

// recording returns a kl that runs with env (nil: k.env), fails the test
// when kl fails, and returns stdout — and everything kl printed, stdout and
// stderr of every run, for the tests that a value is printed nowhere.
func (k *kit) recording(env []string) (kl func(args ...string) string, printed *strings.Builder) {
	printed = &strings.Builder{}
	return func(args ...string) string {
		k.t.Helper()
		r := k.runWith(env, "", args...)
		if r.err != nil {
			k.t.Fatalf("kl %s: %v\nstderr:\n%s", strings.Join(args, " "), r.err, r.errOut)
		}
		printed.WriteString(r.out + r.errOut)
		return r.out
	}, printed
}

func (k *kit) run(args ...string) result {
	k.t.Helper()
	return k.runWith(nil, "", args...)
}

// ok runs kl, fails the test unless it succeeds with nothing on stderr
// (no progress, no log: the output is not a terminal), and returns stdout.
func (k *kit) ok(args ...string) string {
	k.t.Helper()
	r := k.run(args...)
	if r.err != nil {
		k.t.Fatalf("kl %s: %v\nstderr:\n%s", strings.Join(args, " "), r.err, r.errOut)
	}
	quiet(k.t, args, r)
	return r.out
}

// quiet checks that a run whose output is not a terminal wrote only its
// report: no carriage return (a progress line) on stdout or stderr, and on
// stderr nothing but log records (Terraform's warnings are logged at warn).
func quiet(t *testing.T, args []string, r result) {
	t.Helper()
	if strings.ContainsRune(r.out, '\r') || strings.ContainsRune(r.errOut, '\r') {
		t.Errorf("kl %s wrote a carriage return (progress) though no output is a terminal", strings.Join(args, " "))
	}
	for _, line := range strings.Split(strings.TrimSuffix(r.errOut, "\n"), "\n") {
		if line != "" && !strings.HasPrefix(line, "time=") {
			t.Errorf("kl %s wrote to stderr something else than a log record: %q", strings.Join(args, " "), line)
		}
	}
}

// refused runs kl, expects a refusal (exit code 3), and returns stdout.
func (k *kit) refused(wantErr string, args ...string) string {
	k.t.Helper()
	r := k.run(args...)
	if r.code() != 3 {
		k.t.Fatalf("kl %s: exit code %d (err %v), want 3 (refused)", strings.Join(args, " "), r.code(), r.err)
	}
	if !strings.Contains(r.err.Error(), wantErr) {
		k.t.Errorf("kl %s: error %q does not say %q", strings.Join(args, " "), r.err, wantErr)
	}
	quiet(k.t, args, r)
	return r.out
}

// jsonOf runs kl --json and decodes stdout into v. --json goes before a
// "--" among args: what follows it is Terraform's (kl plan -- OPTIONS).
func (k *kit) jsonOf(v any, args ...string) {
	k.t.Helper()
	withJSON := append(append([]string(nil), args...), "--json")
	for i, a := range args {
		if a == "--" {
			withJSON = append(append(append([]string(nil), args[:i]...), "--json"), args[i:]...)
			break
		}
	}
	out := k.ok(withJSON...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		k.t.Fatalf("kl %s --json: decoding: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// golden compares got, normalized, with testdata/name (rewritten with
// -update). A .json golden must be a JSON document with a "schema".
func (k *kit) golden(name, got string) {
	k.t.Helper()
	golden(k.t, name, k.norm.normalize(got), got)
}

func golden(t *testing.T, name, got, raw string) {
	t.Helper()
	if strings.HasSuffix(name, ".json") {
		var doc struct {
			Schema string `json:"schema"`
		}
		if err := json.Unmarshal([]byte(raw), &doc); err != nil {
			t.Errorf("%s: not JSON: %v", name, err)
		} else if !strings.HasPrefix(doc.Schema, "kilolock/") || !strings.HasSuffix(doc.Schema, "/v1") && !strings.HasSuffix(doc.Schema, "/v2") && !strings.HasSuffix(doc.Schema, "/v3") {
			t.Errorf(`%s: "schema" is %q, want "kilolock/<view>/v1", v2 or v3`, name, doc.Schema)
		}
	}
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(got, "\n")); diff != "" {
		t.Errorf("%s differs from the golden file (-want +got; -update rewrites it):\n%s", path, diff)
	}
}

// write creates dir/name with content.
func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// terraform runs the terraform binary in dir (outside kl) and returns its
// stdout.
func (k *kit) terraform(dir string, args ...string) []byte {
	k.t.Helper()
	cmd := exec.Command("terraform", args...)
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), k.env...), "TF_IN_AUTOMATION=1", "TF_INPUT=0")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		k.t.Fatalf("terraform %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.Bytes()
}

// dump reads every table of the store, row by row in rowid order, as text
// (blobs as their length and digest), to prove a failed command changed
// nothing.
func (k *kit) dump() string {
	k.t.Helper()
	db, err := sql.Open("sqlite", "file:"+k.store+"?mode=ro")
	if err != nil {
		k.t.Fatalf("opening store to dump it: %v", err)
	}
	defer db.Close()
	tables, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		k.t.Fatalf("listing tables: %v", err)
	}
	var names []string
	for tables.Next() {
		var n string
		if err := tables.Scan(&n); err != nil {
			k.t.Fatal(err)
		}
		names = append(names, n)
	}
	if err := tables.Close(); err != nil {
		k.t.Fatal(err)
	}
	var b strings.Builder
	for _, n := range names {
		rows, err := db.Query(fmt.Sprintf(`SELECT * FROM %q ORDER BY rowid`, n))
		if err != nil {
			k.t.Fatalf("dumping %s: %v", n, err)
		}
		cols, _ := rows.Columns()
		fmt.Fprintf(&b, "table %s %v\n", n, cols)
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				k.t.Fatal(err)
			}
			for i, v := range vals {
				if bs, ok := v.([]byte); ok {
					vals[i] = fmt.Sprintf("blob(%d,%x)", len(bs), sha(bs))
				}
			}
			fmt.Fprintln(&b, vals...)
		}
		if err := rows.Close(); err != nil {
			k.t.Fatal(err)
		}
	}
	return b.String()
}

func sha(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:8]
}
