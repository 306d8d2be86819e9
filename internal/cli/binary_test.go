package cli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// raceEnabled is set by race_test.go under -race.
var raceEnabled bool

// buildKL builds cmd/kl into dir and returns its path.
func buildKL(t *testing.T, dir string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH to build cmd/kl")
	}
	bin := filepath.Join(dir, "kl")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command(goBin, append(args, "github.com/kilolock/kilolock/cmd/kl")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/kl: %v\n%s", err, out)
	}
	return bin
}

// procEnv is env for a kl process: a race-enabled binary must not sleep
// a second at exit (the race runtime's default atexit_sleep_ms).
func procEnv(env []string) []string {
	return append(append([]string(nil), env...), "GORACE=atexit_sleep_ms=0")
}

// proc is one finished kl process.
type proc struct {
	out, errOut string
	code        int
}

// exec runs the kl binary with args in k's environment.
func (k *kit) exec(bin string, args ...string) proc {
	k.t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env, cmd.Dir = procEnv(k.env), k.dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		k.t.Fatalf("running kl %s: %v", strings.Join(args, " "), err)
	}
	return proc{out: out.String(), errOut: errOut.String(), code: cmd.ProcessState.ExitCode()}
}

// TestBinary builds the real kl and checks what only a process shows:
// exit codes (0 success, 3 refusal, 1 error, 130 for Ctrl-C), --help, and
// Ctrl-C during a slow apply.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/kl and runs Terraform")
	}
	t.Parallel()
	k := setup(t)
	bin := buildKL(t, k.dir)
	fast := filepath.Join(k.dir, "fast")
	write(t, filepath.Join(fast, "main.tf"), "resource \"terraform_data\" \"a\" {\n  input = \"a\"\n}\n")

	t.Run("help", func(t *testing.T) {
		k := k.with(t)
		root := k.exec(bin, "--help")
		if root.code != 0 {
			t.Errorf("kl --help: exit %d", root.code)
		}
		for _, w := range []string{"Usage:", "kl [command]", "state", "plan", "apply", "footprint", "history", "runs", "run", "why", "status", "--store", "--json"} {
			if !strings.Contains(root.out, w) {
				t.Errorf("kl --help does not mention %q:\n%s", w, root.out)
			}
		}
		apply := k.exec(bin, "apply", "--help")
		if apply.code != 0 {
			t.Errorf("kl apply --help: exit %d", apply.code)
		}
		for _, w := range []string{"kl apply RUN", "--wait", "--strict-since-plan", "--state", "Exit status", "3 refused"} {
			if !strings.Contains(apply.out, w) {
				t.Errorf("kl apply --help does not mention %q:\n%s", w, apply.out)
			}
		}
	})

	var plan string
	t.Run("exit codes", func(t *testing.T) {
		k := k.with(t)
		for _, step := range []struct {
			args    []string
			code    int
			errOut  string // stderr contains this
			outHead string // stdout starts with this
		}{
			{args: []string{"state", "init", "s"}, code: 0, outHead: "Created state s"},
			{args: []string{"plan", "--state", "s", "-C", fast}, code: 0, outHead: "Plan "},
			{args: []string{"apply", "PLAN"}, code: 0, outHead: "Apply "},
			{args: []string{"apply", "PLAN"}, code: 3, errOut: "kl: plan run PLAN was already applied by run"},
			{args: []string{"run", "show", "01J0000000000000000000000X"}, code: 1, errOut: "kl: run 01J0000000000000000000000X does not exist (see `kl runs`)\n"},
			{args: []string{"state", "init", "s"}, code: 1, errOut: "kl: creating state s: a state of that name exists (see `kl state list`)\n"},
			{args: []string{"apply", "PLAN", "--state", "t"}, code: 1, errOut: "kl: state \"t\" does not exist (create it with `kl state init t`)\n"},
			{args: []string{"aply"}, code: 1, errOut: `kl: unknown command "aply" for "kl"`},
		} {
			args := append([]string(nil), step.args...)
			for i := range args {
				args[i] = strings.ReplaceAll(args[i], "PLAN", plan)
			}
			p := k.exec(bin, args...)
			if p.code != step.code {
				t.Fatalf("kl %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), p.code, step.code, p.out, p.errOut)
			}
			if !strings.Contains(p.errOut, strings.ReplaceAll(step.errOut, "PLAN", plan)) || (step.errOut == "" && p.errOut != "") {
				t.Errorf("kl %s: stderr %q, want %q", strings.Join(args, " "), p.errOut, step.errOut)
			}
			// The kind of an error is its exit code; its words do not end
			// or start with the sentinel's label.
			for _, label := range []string{": conflict\n", ": not found\n", ": invalid input\n", "invalid input: "} {
				if strings.Contains(p.errOut, label) {
					t.Errorf("kl %s: stderr %q shows the label %q", strings.Join(args, " "), p.errOut, label)
				}
			}
			if !strings.HasPrefix(p.out, step.outHead) {
				t.Errorf("kl %s: stdout %q, want it to start with %q", strings.Join(args, " "), p.out, step.outHead)
			}
			if plan == "" {
				plan = reULID.FindString(p.out)
			}
		}
	})

	// The kl binary is its own TF_VAR shim (internal/terraform's init):
	// TF_VAR_x reaches the plan, and nothing kl prints holds the value.
	t.Run("TF_VAR", func(t *testing.T) {
		k := k.with(t)
		const value = "from-the-environment-8642"
		cfg := filepath.Join(k.dir, "tfvar")
		write(t, filepath.Join(cfg, "main.tf"), "variable \"x\" {\n  type = string\n}\n\noutput \"x\" {\n  value = var.x\n}\n")
		k.env = append(k.env, "TF_VAR_x="+value)
		var printed string
		for _, args := range [][]string{{"state", "init", "tfvar"}, {"plan", "--state", "tfvar", "-C", cfg}, {"apply", "PLAN"}} {
			for i := range args {
				args[i] = strings.ReplaceAll(args[i], "PLAN", reULID.FindString(printed))
			}
			p := k.exec(bin, args...)
			if p.code != 0 {
				t.Fatalf("kl %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), p.code, p.out, p.errOut)
			}
			printed = p.out + p.errOut
			if strings.Contains(printed, value) {
				t.Errorf("kl %s printed TF_VAR_x's value:\n%s", strings.Join(args, " "), printed)
			}
		}
		pulled := k.exec(bin, "state", "pull", "tfvar")
		if !strings.Contains(pulled.out, `"value": "`+value+`"`) {
			t.Errorf("output x of the applied state is not TF_VAR_x's value:\n%s", pulled.out)
		}
	})

	t.Run("interrupt", func(t *testing.T) {
		k := k.with(t)
		slow := filepath.Join(k.dir, "slow")
		write(t, filepath.Join(slow, "main.tf"), `resource "terraform_data" "fast" {
  input = "fast"
}

resource "terraform_data" "slow" {
  input = "slow"

  provisioner "local-exec" {
    command = "sleep 5"
  }
}
`)
		k.ok("state", "init", "sigint")
		plan := reULID.FindString(k.ok("plan", "--state", "sigint", "-C", slow))

		cmd := exec.Command(bin, "apply", plan)
		cmd.Env, cmd.Dir = procEnv(k.env), k.dir
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		cmd.WaitDelay = 5 * time.Second
		started := time.Now()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()

		// Interrupt ~1.5 s in, once the apply holds its reservations and
		// has had a second to start Terraform and the provisioner.
		k.waitStatus(t, func(s statusDoc) bool { return s.has("applying", 2) })
		wait := time.Second
		if d := 1500*time.Millisecond - time.Since(started); d > wait {
			wait = d
		}
		time.Sleep(wait)
		var apply string
		var st statusDoc
		k.jsonOf(&st, "status")
		for _, a := range st.Active {
			if a.Run.Kind == "apply" {
				apply = a.Run.ID
			}
		}
		signalled := time.Now()
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("kl apply did not exit within 20 s of SIGINT\nstdout:\n%s\nstderr:\n%s", out.String(), errOut.String())
		}
		took := time.Since(signalled)
		t.Logf("kl apply exited %s after SIGINT (%s after start)", took.Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
		if took > 4*time.Second {
			t.Errorf("kl apply took %s to exit after SIGINT; the provisioner's sleep 5 was not stopped", took)
		}
		if code := cmd.ProcessState.ExitCode(); code != 130 {
			t.Errorf("kl apply exited %d after SIGINT, want 130 (128+SIGINT)", code)
		}
		if !strings.Contains(errOut.String(), "kl: interrupted: stopping Terraform; an apply commits what Terraform wrote and releases its reservations") {
			t.Errorf("stderr has no interruption note:\n%s", errOut.String())
		}
		t.Logf("stdout of the interrupted apply:\n%s", out.String())
		if !strings.Contains(out.String(), "interrupted") {
			t.Errorf("the apply's story on stdout does not say it was interrupted:\n%s", out.String())
		}

		var story struct {
			Run struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"run"`
		}
		k.jsonOf(&story, "run", "show", apply)
		if story.Run.Status != "interrupted" {
			t.Errorf("kl run show %s: status %q, want interrupted", apply, story.Run.Status)
		}
		var after statusDoc
		k.jsonOf(&after, "status")
		if len(after.Active) != 0 {
			t.Errorf("kl status after the interrupt: %d active runs, want none (reservations released)", len(after.Active))
		}
		var hist struct {
			Entries []struct {
				Version struct {
					Serial     int64 `json:"serial"`
					Provenance struct {
						Run     string `json:"run"`
						Partial bool   `json:"partial"`
					} `json:"provenance"`
				} `json:"version"`
			} `json:"entries"`
		}
		k.jsonOf(&hist, "history", "--state", "sigint")
		var mine int
		for _, e := range hist.Entries {
			if e.Version.Provenance.Run == apply {
				mine++
				if !e.Version.Provenance.Partial {
					t.Errorf("version %d of the interrupted apply is not marked partial", e.Version.Serial)
				}
			}
		}
		if mine > 1 {
			t.Errorf("the interrupted apply committed %d versions, want at most one", mine)
		}
		var raw json.RawMessage
		k.jsonOf(&raw, "why", apply)
	})
}
