package terraform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// noise is what must never reach a stored failure reason: Terraform's box
// drawing, warnings and the CLI configuration heading.
var noise = []string{"╷", "│", "╵", "Warning", "CLI configuration", "\x1b["}

func assertNoNoise(t *testing.T, s string) {
	t.Helper()
	for _, n := range noise {
		if strings.Contains(s, n) {
			t.Errorf("%q holds %q", s, n)
		}
	}
}

// TestCleanStderr cleans recorded stderr of Terraform 1.11.4 and 1.5.7
// (TF_CLI_CONFIG_FILE naming a missing file, as on this machine): init of
// an unclosed block with and without -no-color, a plain plan on an
// undeclared variable, a failed apply -json (whose stderr holds only the
// warning). The golden files are the cleaned text.
func TestCleanStderr(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(filepath.Join("testdata", "stderr", "*.txt"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no stderr recordings: %v", err)
	}
	for _, path := range paths {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			got := cleanStderr(string(b))
			assertNoNoise(t, got)
			golden := strings.TrimSuffix(path, ".txt") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("reading golden (run with -update to create it): %v", err)
			}
			if got+"\n" != string(want) {
				t.Errorf("cleaned %s differs from %s:\n--- got\n%s\n--- want\n%s", path, golden, got, want)
			}
		})
	}
}

func TestCleanStderrCases(t *testing.T) {
	t.Parallel()
	tests := map[string]struct{ in, want string }{
		"empty":        {"", ""},
		"only heading": {"There are some problems with the CLI configuration:\n", ""},
		"only warning": {"There are some problems with the CLI configuration:\n╷\n│ Warning: W\n│\n│ detail\n╵\n\n", ""},
		"plain warning then error": {
			"Warning: Deprecated\n\nold stuff\n\nError: Broken\n\n  on a.tf line 3:\n   3: x\n\nwhy it broke\n",
			"Error: Broken\n\n  on a.tf line 3:\n   3: x\n\nwhy it broke",
		},
		"boxed error kept, boxed warning dropped": {
			"╷\n│ Warning: W\n╵\n╷\n│ Error: E\n│ \n│ detail\n╵\n",
			"Error: E\n\ndetail",
		},
		"text that is not a diagnostic (a crash) is kept": {
			"panic: runtime error: index out of range\n\ngoroutine 1 [running]:\n",
			"panic: runtime error: index out of range\n\ngoroutine 1 [running]:",
		},
		"a heading of warnings goes, the text before it stays": {
			"Something happened.\nThere are some problems with the CLI configuration:\n╷\n│ Warning: W\n╵\nError: E\n",
			"Something happened.\n\nError: E",
		},
		"color": {"\x1b[31m╷\x1b[0m\n\x1b[31m│\x1b[0m \x1b[1mError: \x1b[0mE\n\x1b[31m╵\x1b[0m\n", "Error: E"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := cleanStderr(tc.in); got != tc.want {
				t.Errorf("cleanStderr() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestCommandError(t *testing.T) {
	t.Parallel()
	s, _ := replay(t, "apply-errored.jsonl", phaseApply, time.Second)
	exitErr := exec.Command("sh", "-c", "exit 1").Run()
	var exit *exec.ExitError
	if !errors.As(exitErr, &exit) {
		t.Fatalf("no *exec.ExitError: %v", exitErr)
	}
	stderr, err := os.ReadFile(filepath.Join("testdata", "stderr", "apply-1.11.4.txt"))
	if err != nil {
		t.Fatal(err)
	}
	initStderr, err := os.ReadFile(filepath.Join("testdata", "stderr", "init-1.11.4.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// terraform-exec's error for a command exiting non-zero: the exit
	// error, a newline, the whole stderr.
	tfexecErr := func(stderr []byte) error { return fmt.Errorf("%w\n%s", exitErr, stderr) }
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := map[string]struct {
		ctx     context.Context
		command string
		err     error
		stream  *uiStream
		stderr  string
		want    string
	}{
		"diagnostics only, no stderr, no exit status": {
			command: "apply", err: tfexecErr(stderr), stream: s, stderr: string(stderr),
			want: "terraform apply: local-exec provisioner error: Error running command 'exit 1': exit status 1. Output: (terraform_data.bad, main.tf:23)",
		},
		"no diagnostics: cleaned stderr": {
			command: "init", err: tfexecErr(initStderr), stderr: string(initStderr),
			want: "terraform init: Error: Terraform encountered problems during initialisation, including problems\nwith the configuration, described below.\n\n" +
				"The Terraform configuration must be valid before initialization so that\nTerraform can determine which modules and providers need to be installed.\n\n" +
				"Error: Unclosed configuration block\n\n  on x.tf line 1, in terraform:\n   1: terraform {\n\n" +
				"There is no closing brace for this block before the end of the file. This may\nbe caused by incorrect brace nesting elsewhere in this file.",
		},
		"a stream without error diagnostics and only warnings on stderr: the exit status": {
			command: "apply", err: tfexecErr(stderr), stream: newUIStream(phaseApply, nil, discard), stderr: string(stderr),
			want: "terraform apply: exit status 1",
		},
		"not an exit: the error as is": {
			command: "plan", err: errors.New("fork/exec /nope: no such file or directory"),
			want: "terraform plan: fork/exec /nope: no such file or directory",
		},
		"cancelled: said even with diagnostics": {
			ctx: cancelled, command: "apply", err: tfexecErr(stderr), stream: s, stderr: string(stderr),
			want: "terraform apply: local-exec provisioner error: Error running command 'exit 1': exit status 1. Output: (terraform_data.bad, main.tf:23): interrupted: context canceled",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			err := commandError(ctx, tc.command, tc.err, tc.stream, tc.stderr)
			if err.Error() != tc.want {
				t.Errorf("Error() = %q\nwant      %q", err.Error(), tc.want)
			}
			assertNoNoise(t, err.Error())
			var ce *CommandError
			if !errors.As(err, &ce) {
				t.Fatalf("%T is not a *CommandError", err)
			}
			if tc.ctx != nil {
				if !errors.Is(err, context.Canceled) {
					t.Error("a cancelled command's error is not context.Canceled")
				}
			} else if errors.As(tc.err, &exit) && !errors.As(err, &exit) {
				t.Error("CommandError does not unwrap to the *exec.ExitError")
			}
		})
	}
	if commandError(context.Background(), "plan", nil, s, "noise") != nil {
		t.Error("commandError(nil) is not nil")
	}
}

// recordHandler keeps the log records it handles.
type recordHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

// attrs returns the records with the given message as attribute maps.
func (h *recordHandler) attrs(msg string) []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, r := range h.records {
		if r.Message != msg {
			continue
		}
		m := map[string]string{"level": r.Level.String()}
		r.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
		out = append(out, m)
	}
	return out
}

// TestUIStreamLogsWarnings: each warning of a recorded plan stream
// (Terraform 1.11.4, -target and a redundant ignore_changes) is one WARN
// record with summary, detail and file as their own attributes, logged by
// logWarnings once the command is done (ADR 0047: after masking).
func TestUIStreamLogsWarnings(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("testdata", "ui", "plan-warnings.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	h := &recordHandler{}
	s := newUIStream(phasePlan, newProgressReporter(nil), slog.New(h))
	if _, err := s.Write(b); err != nil {
		t.Fatal(err)
	}
	s.close()
	if got := h.attrs("terraform warning"); len(got) != 0 {
		t.Fatalf("warnings logged while the stream is read, before it can be masked: %v", got)
	}
	s.logWarnings()
	got := h.attrs("terraform warning")
	if len(got) != 2 {
		t.Fatalf("%d warning records, want 2: %v", len(got), got)
	}
	want := []map[string]string{
		{"level": "WARN", "phase": "plan", "summary": "Redundant ignore_changes element", "file": "main.tf:1"},
		{"level": "WARN", "phase": "plan", "summary": "Resource targeting is in effect"},
	}
	for i, w := range want {
		g := got[i]
		for k, v := range w {
			if g[k] != v {
				t.Errorf("record %d: %s = %q, want %q (record %v)", i, k, g[k], v, g)
			}
		}
		if _, ok := g["file"]; !ok && w["file"] == "" {
			// no range: no file attribute
		} else if w["file"] == "" {
			t.Errorf("record %d has a file attribute: %v", i, g)
		}
		if !strings.HasPrefix(g["detail"], "Adding an attribute name") && !strings.HasPrefix(g["detail"], "You are creating a plan with the -target option") {
			t.Errorf("record %d: detail = %q", i, g["detail"])
		}
		if _, ok := g["diagnostic"]; ok {
			t.Errorf("record %d still has the one-line diagnostic attribute", i)
		}
		if strings.Contains(g["summary"], "\n") {
			t.Errorf("record %d: summary %q has a newline", i, g["summary"])
		}
	}
	if len(s.errorDiagnostics()) != 0 {
		t.Errorf("warnings counted as errors: %v", s.errorDiagnostics())
	}
}
