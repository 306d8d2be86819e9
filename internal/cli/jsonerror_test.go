package cli_test

import (
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// errorDoc is the kilolock/error/v1 document.
type errorDoc struct {
	Schema string `json:"schema"`
	Error  string `json:"error"`
	Code   int    `json:"code"`
}

// oneDocument decodes stdout as exactly one JSON object and returns its
// schema; it fails the test on anything else (nothing, two documents,
// text).
func oneDocument(t *testing.T, out string, v any) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(out))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("stdout is not a JSON document: %v\n%s", err, out)
	}
	if err := dec.Decode(&json.RawMessage{}); !errors.Is(err, io.EOF) {
		t.Fatalf("stdout holds more than one JSON document (%v):\n%s", err, out)
	}
	var s struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	if v != nil {
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatal(err)
		}
	}
	return s.Schema
}

// TestJSONErrors: with --json, a command that fails before it has a view
// to print prints a kilolock/error/v1 document on stdout (the error and the
// exit code), whatever the command and wherever it failed — flags,
// environment, engine; a failure that tells a run's story prints that
// story alone; without --json stdout stays empty.
func TestJSONErrors(t *testing.T) {
	t.Parallel()
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), "resource \"terraform_data\" \"a\" {\n  input = \"a\"\n}\n")
	k.ok("state", "init", "prod")
	applied := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg))
	write(t, filepath.Join(cfg, "main.tf"), "resource \"terraform_data\" \"a\" {\n  input = \"b\"\n}\n")
	discarded := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg))
	stale := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg))
	k.ok("apply", applied)
	k.ok("run", "discard", discarded)
	const unknown = "01J0000000000000000000000X"

	for name, tc := range map[string]struct {
		args []string
		env  []string // added to k.env
		want string   // the error says it
		code int
	}{
		"apply of an applied plan": {args: []string{"--json", "apply", applied}, want: "was already applied", code: 3},
		"apply of a discarded plan": {args: []string{"apply", discarded, "--json"},
			want: "plan run " + discarded, code: 3},
		"run show of an unknown run": {args: []string{"run", "show", unknown, "--json"}, want: "run " + unknown + " does not exist", code: 1},
		"unknown flag":               {args: []string{"apply", applied, "--json", "--wiat", "1m"}, want: "unknown flag: --wiat", code: 1},
		"unknown flag before --json": {args: []string{"--wiat", "--json", "runs"}, want: "unknown flag: --wiat", code: 1},
		"bad environment":            {args: []string{"runs", "--json=true"}, env: []string{"KL_LEASE=banana"}, want: "KL_LEASE=banana: not a duration", code: 1},
		"bad flag value":             {args: []string{"history", "--state", "prod", "--limit", "0", "--json"}, want: "--limit 0: want at least 1", code: 1},
	} {
		t.Run(name, func(t *testing.T) {
			k := k.with(t)
			env := append(append([]string(nil), k.env...), tc.env...)
			r := k.runWith(env, "", tc.args...)
			if r.err == nil {
				t.Fatalf("kl %s succeeded; want an error", strings.Join(tc.args, " "))
			}
			if r.code() != tc.code {
				t.Errorf("exit code %d, want %d (%v)", r.code(), tc.code, r.err)
			}
			var doc errorDoc
			if s := oneDocument(t, r.out, &doc); s != "kilolock/error/v1" {
				t.Fatalf("schema %q, want kilolock/error/v1", s)
			}
			if doc.Error != r.err.Error() || !strings.Contains(doc.Error, tc.want) || doc.Code != tc.code {
				t.Errorf("document %+v; want the error %q (saying %q) and code %d", doc, r.err, tc.want, tc.code)
			}
			// The same failure without --json prints nothing on stdout.
			var plain []string
			for _, a := range tc.args {
				if !strings.HasPrefix(a, "--json") {
					plain = append(plain, a)
				}
			}
			if r := k.runWith(env, "", plain...); r.err == nil || r.out != "" {
				t.Errorf("kl %s: err %v, stdout %q; want the error and nothing on stdout", strings.Join(plain, " "), r.err, r.out)
			}
		})
	}

	t.Run("--json=false", func(t *testing.T) {
		k := k.with(t)
		if r := k.run("run", "show", unknown, "--json=false"); r.err == nil || r.out != "" {
			t.Errorf("err %v, stdout %q; want the error and nothing on stdout", r.err, r.out)
		}
	})

	t.Run("a refused apply tells its story alone", func(t *testing.T) {
		k := k.with(t)
		r := k.run("apply", stale, "--json")
		if r.code() != 3 {
			t.Fatalf("apply of a stale plan: exit %d (%v), want 3", r.code(), r.err)
		}
		var doc struct {
			Verdict string `json:"verdict"`
		}
		if s := oneDocument(t, r.out, &doc); s != "kilolock/apply/v3" || doc.Verdict != "refused" {
			t.Errorf("document %s, verdict %q; want the refused apply's kilolock/apply/v3 story", s, doc.Verdict)
		}
	})
}

// TestPlanHelp: kl plan --help says where --var-file paths resolve.
func TestPlanHelp(t *testing.T) {
	t.Parallel()
	k := setup(t)
	out := k.ok("plan", "--help")
	for _, w := range []string{"a relative --var-file path is relative\nto DIR", "relative to -C DIR, as with terraform -chdir", "7-40 hex"} {
		if !strings.Contains(out, w) {
			t.Errorf("kl plan --help does not say %q:\n%s", w, out)
		}
	}
}
