package cli_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/cli"
	"github.com/kilolock/kilolock/internal/engine"
)

// TestStoreFileLeftAlone: kl writes to a store file only once it is known
// to be a SQLite database. A file that is not one is refused with its mode
// and content unchanged; an existing empty file is no store for any
// command but kl state init, which initialises it.
func TestStoreFileLeftAlone(t *testing.T) {
	t.Parallel()
	k := setup(t)
	withStore := func(store string) []string {
		return append(append([]string(nil), k.env...), "KL_STORE="+store)
	}
	text := filepath.Join(k.dir, "t2.txt")
	write(t, text, "hi\n")
	if err := os.Chmod(text, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"runs"}, {"state", "list"}, {"state", "init", "prod"}} {
		r := k.runWith(withStore(text), "", args...)
		if r.err == nil || !strings.Contains(r.err.Error(), "opening store "+text+": not a SQLite database") {
			t.Errorf("kl %s on a text file: %v, want not a SQLite database", strings.Join(args, " "), r.err)
		}
		fi, err := os.Stat(text)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o644 || fi.Size() != 3 {
			t.Errorf("kl %s changed the text file: mode %#o, size %d; want 0644, 3", strings.Join(args, " "), fi.Mode().Perm(), fi.Size())
		}
	}

	empty := filepath.Join(k.dir, "empty.db")
	write(t, empty, "")
	for _, args := range [][]string{{"runs"}, {"state", "list"}, {"status"}, {"history", "--state", "prod"}} {
		r := k.runWith(withStore(empty), "", args...)
		want := "no Kilolock store at " + empty + " (KL_STORE): the file is empty: \"kl state init NAME\" creates one"
		if r.err == nil || !strings.Contains(r.err.Error(), want) || r.code() != 1 {
			t.Errorf("kl %s on an empty file: exit %d, %v; want 1, %q", strings.Join(args, " "), r.code(), r.err, want)
		}
		if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
			t.Errorf("kl %s wrote to the empty file (%v)", strings.Join(args, " "), err)
		}
	}
	if r := k.runWith(withStore(empty), "", "state", "init", "prod"); r.err != nil {
		t.Fatalf("kl state init in an empty file: %v", r.err)
	}
	if r := k.runWith(withStore(empty), "", "state", "list"); r.err != nil || !strings.Contains(r.out, "prod") {
		t.Errorf("kl state list after init in the empty file: %v\n%s", r.err, r.out)
	}
}

// TestForeignDatabaseLeftAlone: another program's SQLite database (a
// table of its own, no Kilolock schema) is no store: kl state list and
// kl state init refuse it (exit 1), and its mode and bytes stay as they
// were — neither a read-only command nor kl state init turns it into a
// Kilolock store.
func TestForeignDatabaseLeftAlone(t *testing.T) {
	t.Parallel()
	k := setup(t)
	foreign := filepath.Join(k.dir, "foreign.db")
	db, err := sql.Open("sqlite", "file:"+foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE users (id INTEGER)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if err := os.Chmod(foreign, 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(foreign)
	if err != nil {
		t.Fatal(err)
	}
	env := append(append([]string(nil), k.env...), "KL_STORE="+foreign)
	for _, args := range [][]string{{"state", "list"}, {"state", "init", "prod"}} {
		r := k.runWith(env, "", args...)
		want := "opening store " + foreign + ": a SQLite database but not a Kilolock store"
		if r.code() != 1 || !strings.Contains(r.err.Error(), want) || !strings.Contains(r.err.Error(), "left unchanged") {
			t.Errorf("kl %s on a foreign database: exit %d, %v\nstdout:\n%s\nwant 1, %q", strings.Join(args, " "), r.code(), r.err, r.out, want)
		}
		fi, err := os.Stat(foreign)
		if err != nil {
			t.Fatal(err)
		}
		after, _ := os.ReadFile(foreign)
		if fi.Mode().Perm() != 0o644 || !bytes.Equal(after, before) {
			t.Errorf("kl %s changed the foreign database: mode %#o, %d bytes (were 0644, %d)",
				strings.Join(args, " "), fi.Mode().Perm(), len(after), len(before))
		}
	}
}

// TestStatusOpenPlans: kl status lists as open only the plans an apply
// could still take — not one a later version already made stale, nor a
// discarded one; a plan the later version left alone stays.
func TestStatusOpenPlans(t *testing.T) {
	t.Parallel()
	k := setup(t)
	cfg := func(x, y string) string {
		dir := filepath.Join(k.dir, x+y)
		write(t, filepath.Join(dir, "main.tf"), fmt.Sprintf(`resource "terraform_data" "x" {
  input = %q
}

resource "terraform_data" "y" {
  input = %q
}

resource "terraform_data" "z" {
  input = terraform_data.y.output
}
`, x, y))
		return dir
	}
	k.ok("state", "init", "prod")
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg("a", "1"))))
	stale := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg("b", "1")))     // writes x
	reads := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg("a", "2")))     // writes y, z: independent of x
	discarded := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg("c", "1"))) // writes x
	k.ok("run", "discard", discarded)
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg("d", "1")))) // changes x
	open := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg("e", "1")))        // writes x, at the new head

	var doc struct {
		OpenPlans []struct {
			ID string `json:"id"`
		} `json:"open_plans"`
	}
	k.jsonOf(&doc, "status")
	var got []string
	for _, p := range doc.OpenPlans {
		got = append(got, p.ID)
	}
	for _, id := range []string{reads, open} {
		if !strings.Contains(strings.Join(got, " "), id) {
			t.Errorf("kl status open plans %v: missing %s, which can still be applied", got, id)
		}
	}
	for name, id := range map[string]string{"stale": stale, "discarded": discarded} {
		if strings.Contains(strings.Join(got, " "), id) {
			t.Errorf("kl status open plans %v: lists the %s plan %s", got, name, id)
		}
	}
	if len(got) != 2 {
		t.Errorf("kl status: %d open plans %v, want 2", len(got), got)
	}
}

// TestMessage: kl prints an error's words; an error of a kind
// (engine.Errorf) keeps the kind for exit codes and errors.Is without a
// label in its text; an interrupt the note explained prints nothing.
func TestMessage(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		err  error
		want string
	}{
		"conflict": {engine.Errorf(engine.ErrConflict, "creating state a: a state of that name exists"),
			"creating state a: a state of that name exists"},
		"not found": {engine.Errorf(engine.ErrNotFound, "run X does not exist"), "run X does not exist"},
		"inner kind": {fmt.Errorf("reading state file f: %w", engine.Errorf(engine.ErrInvalid, "adopting state x: bad")),
			"reading state file f: adopting state x: bad"},
		"wrapped twice": {fmt.Errorf("applying: %w", engine.Errorf(engine.ErrConflict, "run R is applied")), "applying: run R is applied"},
		"label alone":   {engine.ErrNotFound, "not found"},
		"words kept":    {errors.New("disk full: conflict"), "disk full: conflict"},
		"lines kept": {engine.Errorf(engine.ErrInvalid, "terraform said:\nError: not found: invalid input: x"),
			"terraform said:\nError: not found: invalid input: x"},
		"refusal keeps its code": {&cli.ExitError{Code: 3, Err: engine.Errorf(engine.ErrConflict, "plan P is applied")}, "plan P is applied"},
		"nil":                    {nil, ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := cli.Message(tc.err); got != tc.want {
				t.Errorf("Message(%q) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

// TestPlanInputsBeforeRun: a plan whose -C or --var-file does not exist
// is refused before any run is stored: kl runs stays empty.
func TestPlanInputsBeforeRun(t *testing.T) {
	t.Parallel()
	k := setup(t)
	k.ok("state", "init", "prod")
	for _, args := range [][]string{
		{"plan", "--state", "prod", "-C", "/nonexistent"},
		{"plan", "--state", "prod", "-C", k.dir, "--var-file", "missing.tfvars"},
	} {
		if r := k.run(args...); r.code() != 1 {
			t.Errorf("kl %s: exit %d (%v), want 1", strings.Join(args, " "), r.code(), r.err)
		}
	}
	var doc struct {
		Runs []json.RawMessage `json:"runs"`
	}
	k.jsonOf(&doc, "runs")
	if len(doc.Runs) != 0 {
		t.Errorf("kl runs lists %d runs after refused plans, want none", len(doc.Runs))
	}
}
