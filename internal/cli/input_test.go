package cli_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/cli"
)

// TestStoreCreatedOnlyByStateInit: a SQLite path that does not exist is
// refused by every command but kl state init, which creates the file and
// its directory.
func TestStoreCreatedOnlyByStateInit(t *testing.T) {
	t.Parallel()
	k := setup(t)
	k.store = filepath.Join(k.dir, "new", "dir", "kl.db")
	k.env = envWith(k.env, "KL_STORE="+k.store)
	for _, args := range [][]string{{"state", "list"}, {"runs"}, {"status"}, {"state", "list", "--json"}} {
		r := k.run(args...)
		if r.err == nil || !strings.Contains(r.err.Error(), "no Kilolock store at "+k.store+" (KL_STORE)") {
			t.Errorf("kl %s on a missing store: err %v, want a refusal naming the path", strings.Join(args, " "), r.err)
		}
		if r.code() != 1 {
			t.Errorf("kl %s on a missing store: exit %d, want 1", strings.Join(args, " "), r.code())
		}
	}
	if _, err := os.Stat(filepath.Join(k.dir, "new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the store's directory exists before kl state init (stat: %v)", err)
	}
	k.ok("state", "init", "prod")
	if fi, err := os.Stat(k.store); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("kl state init did not create the store %s: %v", k.store, err)
	}
	if out := k.ok("state", "list"); !strings.Contains(out, "prod") {
		t.Errorf("kl state list after kl state init:\n%s", out)
	}

	// The default store (.kl/kl.db in the current directory, none being
	// above it) names itself.
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	// A .kl/ above the package directory is not searched.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + k.dir, "KL_ACTOR=alice", "KL_CEILING_DIRECTORIES=" + filepath.Dir(wd)}
	if _, err := os.Stat(filepath.Join(".kl", "kl.db")); err == nil {
		t.Skip("a .kl/kl.db exists in the package directory")
	}
	r := k.runWith(env, "", "runs")
	want := "no Kilolock store at " + filepath.Join(wd, ".kl", "kl.db") + " (the default: no .kl/ in the working directory or above it; set KL_STORE or --store to use another)"
	if r.err == nil || !strings.Contains(r.err.Error(), want) {
		t.Errorf("kl runs without a store: err %v", r.err)
	}
	if _, err := os.Stat(".kl"); err == nil {
		t.Error("kl runs created .kl in the current directory")
	}
}

// TestDiscard: who discarded a plan is in its story with the reason, and
// a discarded plan, or a run that is not a plan, is refused (exit 3).
func TestDiscard(t *testing.T) {
	t.Parallel()
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), "resource \"terraform_data\" \"a\" {\n  input = \"a\"\n}\n")
	k.ok("state", "init", "prod")
	plan := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg))
	bare := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg))
	k.ok("run", "discard", plan, "--reason", "obsolete")
	k.ok("run", "discard", bare)

	for id, want := range map[string]string{plan: "discarded by alice: obsolete", bare: "discarded by alice"} {
		var doc recoverDoc
		k.jsonOf(&doc, "run", "show", id)
		if doc.Run.Reason != want {
			t.Errorf("run %s: reason %q, want %q", id, doc.Run.Reason, want)
		}
		found := false
		for _, m := range doc.Markers {
			found = found || strings.HasSuffix(m.Reason, want)
		}
		if !found {
			t.Errorf("run %s: no marker says %q: %+v", id, want, doc.Markers)
		}
	}
	k.refused("plan run "+plan, "apply", plan)
	k.refused("not open", "run", "discard", plan)
}

// TestRunsBefore: --before takes a run id (any case) and pages from it.
func TestRunsBefore(t *testing.T) {
	t.Parallel()
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), "resource \"terraform_data\" \"a\" {\n  input = \"a\"\n}\n")
	k.ok("state", "init", "prod")
	var ids []string
	for range 3 {
		ids = append(ids, reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg)))
	}
	for _, before := range []string{ids[2], strings.ToLower(ids[2])} {
		var doc struct {
			Runs []struct {
				ID string `json:"id"`
			} `json:"runs"`
		}
		k.jsonOf(&doc, "runs", "--before", before)
		if len(doc.Runs) != 2 || doc.Runs[0].ID != ids[1] || doc.Runs[1].ID != ids[0] {
			t.Errorf("kl runs --before %s: %+v, want %s then %s", before, doc.Runs, ids[1], ids[0])
		}
	}
	if out := k.ok("runs", "--state", "prod"); !strings.Contains(out, ids[0]) {
		t.Errorf("kl runs --state prod does not list %s:\n%s", ids[0], out)
	}
	k.ok("status", "--state", "prod")
}

// TestInterruptWhileWaiting: an apply interrupted while it waits for
// reservations says Terraform never ran (not that it commits what
// Terraform wrote), exits 128+signal, and leaves its plan open.
func TestInterruptWhileWaiting(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform with a slow provisioner")
	}
	t.Parallel()
	k := setup(t)
	slow := filepath.Join(k.dir, "slow")
	write(t, filepath.Join(slow, "main.tf"), `resource "terraform_data" "a" {
  input = "a"

  provisioner "local-exec" {
    command = "sleep 4"
  }
}
`)
	k.ok("state", "init", "prod")
	first := reULID.FindString(k.ok("plan", "--state", "prod", "-C", slow))
	second := reULID.FindString(k.ok("plan", "--state", "prod", "-C", slow))

	holder := make(chan result, 1)
	go func() { holder <- k.run("apply", first) }()
	k.waitStatus(t, func(s statusDoc) bool { return s.has("applying", 1) })

	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var out, errOut bytes.Buffer
	waiter := make(chan error, 1)
	go func() {
		waiter <- cli.Run(ctx, []string{"apply", second, "--wait", "5m"}, k.env, cli.IO{In: strings.NewReader(""), Out: &out, Err: &errOut})
	}()
	k.waitStatus(t, func(s statusDoc) bool { return s.waits() })
	cancel(&cli.Interrupted{Signal: syscall.SIGTERM})
	var err error
	select {
	case err = <-waiter:
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting apply did not stop within 30 s of its interrupt")
	}
	if code := cli.ExitCode(err); code != 143 {
		t.Errorf("interrupted waiting apply: exit %d (%v), want 143 (128+SIGTERM)", code, err)
	}
	note := errOut.String()
	if !strings.Contains(note, "kl: interrupted: stopping while waiting for reservations: Terraform has not run, nothing to commit") {
		t.Errorf("stderr has no note fitting a wait:\n%s", note)
	}
	if strings.Contains(note, "commits what Terraform wrote") {
		t.Errorf("stderr says Terraform wrote something, though it never ran:\n%s", note)
	}
	// SIGTERM is not Ctrl-C: no blank line for an echoed ^C, and the
	// note does not talk of Ctrl-C.
	if strings.HasPrefix(note, "\n") || strings.Contains(note, "Ctrl-C") || !strings.Contains(note, "(signal it again to exit at once)") {
		t.Errorf("the SIGTERM note should not talk of Ctrl-C or start with a blank line:\n%q", note)
	}
	// One message: the note said it all; main prints no raw
	// "…waiting for reservations: context canceled" after it.
	if msg := cli.Message(err); msg != "" {
		t.Errorf("main would print %q after the interrupt note; want nothing more", msg)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("interrupted waiting apply: %v, want it to wrap context.Canceled", err)
	}
	if r := <-holder; r.err != nil {
		t.Fatalf("the holding apply: %v", r.err)
	}
	// The interrupted apply handed its plan back: it is open again.
	var doc recoverDoc
	k.jsonOf(&doc, "run", "show", second)
	if doc.Run.Status != "planned" {
		t.Errorf("plan %s after its apply was interrupted while waiting: status %q, want planned", second, doc.Run.Status)
	}
}

// TestInterruptedCode: the shell's convention, 128+signal.
func TestInterruptedCode(t *testing.T) {
	t.Parallel()
	for sig, want := range map[syscall.Signal]int{syscall.SIGINT: 130, syscall.SIGTERM: 143} {
		if got := (&cli.Interrupted{Signal: sig}).Code(); got != want {
			t.Errorf("%v: code %d, want %d", sig, got, want)
		}
	}
}

// TestUnboundedInput: a document read from a file or stdin is bounded. A
// device of endless bytes (/dev/zero) is refused at its first byte, naming
// the input, and an interrupt stops a read that waits on stdin (fresh-eyes
// F5: both read forever).
func TestUnboundedInput(t *testing.T) {
	t.Parallel()
	k := setup(t)
	done := make(chan result, 1)
	go func() { done <- k.run("state", "init", "zero", "--from", "/dev/zero") }()
	select {
	case r := <-done:
		if r.err == nil || !strings.Contains(r.err.Error(), "reading state file /dev/zero") || !strings.Contains(r.err.Error(), "not a Terraform state: invalid character") || r.code() != 1 {
			t.Errorf("kl state init --from /dev/zero: exit %d, err %v; want exit 1 naming /dev/zero as not a Terraform state", r.code(), r.err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("kl state init --from /dev/zero still reads after 20 s")
	}
	if out := k.ok("state", "list"); strings.Contains(out, "zero") {
		t.Errorf("a state was created from /dev/zero:\n%s", out)
	}

	// An empty file (what a failed `terraform state pull > FILE` leaves)
	// is not adopted as a new empty state.
	for _, from := range []string{"/dev/null", "-"} {
		r := k.runWith(k.env, "", "state", "init", "void", "--from", from)
		if r.err == nil || !strings.Contains(r.err.Error(), "it is empty, not a Terraform state") || r.code() != 1 {
			t.Errorf("kl state init --from %s (empty): exit %d, err %v; want exit 1 saying it is empty", from, r.code(), r.err)
		}
	}
	if out := k.ok("state", "list"); strings.Contains(out, "void") {
		t.Errorf("a state was created from an empty file:\n%s", out)
	}

	// stdin that never ends nor sends: an interrupt stops the read.
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var out, errOut bytes.Buffer
	waiter := make(chan error, 1)
	go func() {
		waiter <- cli.Run(ctx, []string{"state", "init", "piped", "--from", "-"}, k.env, cli.IO{In: pr, Out: &out, Err: &errOut})
	}()
	if _, err := pw.Write([]byte(`{"version": 4, `)); err != nil {
		t.Fatal(err)
	}
	cancel(&cli.Interrupted{Signal: syscall.SIGTERM})
	select {
	case err := <-waiter:
		if code := cli.ExitCode(err); code != 143 {
			t.Errorf("interrupted read of stdin: exit %d (%v), want 143", code, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("an interrupt did not stop kl state init reading stdin within 20 s")
	}
}
