package terraform

// Terraform's failures as errors a user can read: the error diagnostics of
// the -json UI stream when there are any, else Terraform's stderr without
// its decoration and warnings.

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-exec/tfexec"

	"github.com/kilolock/kilolock/internal/engine"
)

// Diagnostic is one diagnostic Terraform reported in its machine-readable
// UI stream (`-json`; its "diagnostic" message type), with the fields of
// engine.Diagnostic, which says what each holds.
type Diagnostic struct {
	Severity  string `json:"severity"` // "error" or "warning"
	Summary   string `json:"summary"`
	Detail    string `json:"detail,omitempty"`
	Address   string `json:"address,omitempty"` // the resource instance, when any
	File      string `json:"file,omitempty"`    // relative to the root module
	Line      int    `json:"line,omitempty"`
	Column    int    `json:"column,omitempty"`
	EndLine   int    `json:"end_line,omitempty"`
	EndColumn int    `json:"end_column,omitempty"`
	Context   string `json:"context,omitempty"` // the block, as Terraform names it
	Withheld  bool   `json:"withheld,omitempty"`
}

// String renders "summary: detail (address, file:line)" (engine.Diagnostic).
func (d Diagnostic) String() string { return engine.Diagnostic(d).String() }

func (d Diagnostic) fileLine() string { return fmt.Sprintf("%s:%d", d.File, d.Line) }

// logAttrs returns the diagnostic as log attributes, one each: summary,
// detail, address and file ("main.tf:3"), the empty ones left out.
func (d Diagnostic) logAttrs() []any {
	attrs := []any{"summary", strings.TrimSpace(d.Summary)}
	if det := strings.TrimSpace(d.Detail); det != "" {
		attrs = append(attrs, "detail", det)
	}
	if d.Address != "" {
		attrs = append(attrs, "address", d.Address)
	}
	if d.File != "" {
		attrs = append(attrs, "file", d.fileLine())
	}
	return attrs
}

// CommandError is a failed Terraform command. Diagnostics holds the error
// diagnostics of its -json UI stream (plan with progress, apply). When there
// are none (init, show and plain plan are not run with -json; a crash),
// Stderr holds Terraform's stderr without its box-drawing decoration and
// warning blocks (see cleanStderr). Err is the cause: the command's
// *exec.ExitError, another failure to run it, or the context's error when
// the run was cancelled (errors.Is(err, context.Canceled) holds then).
// Killed is set when Terraform did not exit by itself but was killed with
// SIGKILL — RunnerOptions.InterruptGrace ran out after the interrupt, or
// the system killed it: what it last wrote may not hold what it did.
type CommandError struct {
	Command     string // "init", "plan", "show", "apply"
	Diagnostics []Diagnostic
	Stderr      string
	Err         error
	Killed      bool
}

// Error renders "terraform COMMAND: DIAGNOSTIC; …" (or "terraform COMMAND:
// STDERR"), then ": CAUSE" unless the cause is only Terraform's exit status
// and the diagnostics or stderr already say what failed. An interruption is
// always said.
func (e *CommandError) Error() string {
	var b strings.Builder
	b.WriteString("terraform ")
	b.WriteString(e.Command)
	for i, d := range e.Diagnostics {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(d.String())
	}
	said := len(e.Diagnostics) > 0
	if !said && e.Stderr != "" {
		b.WriteString(": ")
		b.WriteString(e.Stderr)
		said = true
	}
	var exit *exec.ExitError
	if e.Err != nil && !(said && errors.As(e.Err, &exit)) {
		b.WriteString(": ")
		b.WriteString(strings.TrimSpace(e.Err.Error()))
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *CommandError) Unwrap() error { return e.Err }

// TerraformFailure is the failure as a run's end keeps it
// (engine.TerraformFailer): the command, its diagnostics or stderr, and the
// cause's text where Error says it (not the exit status alone).
func (e *CommandError) TerraformFailure() *engine.TerraformFailure {
	f := &engine.TerraformFailure{Command: e.Command, Stderr: e.Stderr, Killed: e.Killed}
	for _, d := range e.Diagnostics {
		f.Diagnostics = append(f.Diagnostics, engine.Diagnostic(d))
	}
	var exit *exec.ExitError
	said := len(e.Diagnostics) > 0 || e.Stderr != ""
	if e.Err != nil && !(said && errors.As(e.Err, &exit)) {
		f.Cause = strings.TrimSpace(e.Err.Error())
	}
	return f
}

var _ engine.TerraformFailer = (*CommandError)(nil)

// runCommand runs one Terraform command through f with its stderr captured
// and turns a failure into a *CommandError (see commandError). After an
// interrupted or killed command, what Terraform left running in its
// process group (providers, provisioner commands) is killed
// (killLeftovers): a provider call that ignores Terraform's stop would go
// on after Terraform, holding Terraform's output open (measured: ADR
// 0043).
func runCommand(ctx context.Context, tf *tfexec.Terraform, command string, stream *uiStream, f func() error) error {
	var stderr tailBuffer
	tf.SetStderr(&stderr)
	err := f()
	tf.SetStderr(nil)
	if err != nil && (ctx.Err() != nil || killedBySIGKILL(err)) {
		killLeftovers(err)
	}
	return commandError(ctx, command, err, stream, stderr.String())
}

// commandError wraps a failed Terraform command in a *CommandError: the
// error diagnostics of its UI stream (nil stream: none); only when there are
// none, its stderr, cleaned. terraform-exec appends the whole stderr to the
// error of a command that exits non-zero — with this machine's warnings about
// the CLI configuration and the box drawing — so Err keeps only the
// *exec.ExitError inside it. After cancellation Err is the context's error:
// terraform-exec's own error for an interrupted command may wrap a nil
// error, and errors.Is(err, context.Canceled) must hold.
func commandError(ctx context.Context, command string, err error, stream *uiStream, stderr string) error {
	if err == nil {
		return nil
	}
	ce := &CommandError{Command: command, Err: err}
	if stream != nil {
		ce.Diagnostics = stream.errorDiagnostics()
	}
	if len(ce.Diagnostics) == 0 {
		ce.Stderr = cleanStderr(stderr)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		ce.Err = exit
	}
	ce.Killed = killedBySIGKILL(err)
	if cerr := ctx.Err(); cerr != nil {
		ce.Err = fmt.Errorf("interrupted: %w", cerr)
	}
	return ce
}

// maxStderrBytes is how much of a command's stderr is kept: the end, where
// Terraform prints its diagnostics.
const maxStderrBytes = 64 << 10

// tailBuffer is an io.Writer keeping the last maxStderrBytes written. Safe
// for concurrent use.
type tailBuffer struct {
	mu        sync.Mutex
	b         []byte
	truncated bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if n := len(t.b) - maxStderrBytes; n > 0 {
		t.b = append(t.b[:0], t.b[n:]...)
		t.truncated = true
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.truncated {
		return "…" + string(t.b)
	}
	return string(t.b)
}

// ansiEscape matches the terminal color sequences Terraform writes without
// -no-color.
var ansiEscape = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

// Kinds of a stderr segment.
const (
	segText = iota
	segError
	segWarning
)

type stderrSegment struct {
	kind  int
	lines []string
}

// cleanStderr returns Terraform's human-readable stderr without what is
// noise in an error message: color escapes, the box drawing around a
// diagnostic ("╷", "│ ", "╵"), warning diagnostics — boxed or plain
// ("Warning: …" up to the next diagnostic) — and a heading line ending in ":"
// that only introduces warnings (Terraform prints "There are some problems
// with the CLI configuration:" before the warnings about a missing
// TF_CLI_CONFIG_FILE on every command) or ends stderr with nothing after it. Error diagnostics and other text
// are kept, with runs of blank lines collapsed.
func cleanStderr(s string) string {
	s = ansiEscape.ReplaceAllString(s, "")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	lines := strings.Split(s, "\n")
	var segs []stderrSegment
	inDiag := false // the last segment is a plain (unboxed) diagnostic: it runs on
	for i := 0; i < len(lines); i++ {
		l := strings.TrimRight(lines[i], " \t")
		switch {
		case strings.HasPrefix(l, "╷"):
			var body []string
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "╵"); i++ {
				body = append(body, strings.TrimRight(strings.TrimPrefix(strings.TrimPrefix(lines[i], "│"), " "), " \t"))
			}
			segs = append(segs, stderrSegment{kind: diagKind(body), lines: body})
			inDiag = false
		case strings.HasPrefix(l, "Error: ") || strings.HasPrefix(l, "Warning: "):
			segs = append(segs, stderrSegment{kind: diagKind([]string{l}), lines: []string{l}})
			inDiag = true
		case inDiag || (len(segs) > 0 && segs[len(segs)-1].kind == segText):
			segs[len(segs)-1].lines = append(segs[len(segs)-1].lines, l)
		default:
			segs = append(segs, stderrSegment{kind: segText, lines: []string{l}})
		}
	}
	var out []string
	for i, seg := range segs {
		if seg.kind == segWarning {
			continue
		}
		text := strings.TrimSpace(strings.Join(seg.lines, "\n"))
		if seg.kind == segText && strings.HasSuffix(text, ":") && (i+1 < len(segs) && segs[i+1].kind == segWarning || i+1 == len(segs) && !strings.Contains(text, "\n")) {
			// The last line is the heading of warnings — or, alone at
			// the end, of what Terraform did not print to stderr: with
			// -json the warnings go to the UI stream, and an
			// interrupted command may stop right after the heading.
			if j := strings.LastIndexByte(text, '\n'); j >= 0 {
				text = strings.TrimSpace(text[:j])
			} else {
				text = ""
			}
		}
		if text != "" {
			out = append(out, text)
		}
	}
	return collapseBlankLines(strings.Join(out, "\n\n"))
}

// diagKind tells an error diagnostic from a warning by its first non-blank
// line ("Error: …", "Warning: …"); anything else is text.
func diagKind(lines []string) int {
	for _, l := range lines {
		switch {
		case strings.TrimSpace(l) == "":
			continue
		case strings.HasPrefix(l, "Error:"):
			return segError
		case strings.HasPrefix(l, "Warning:"):
			return segWarning
		}
		return segText
	}
	return segText
}

// collapseBlankLines replaces runs of blank lines with one.
func collapseBlankLines(s string) string {
	var out []string
	blank := false
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) == "" {
			if !blank {
				out = append(out, "")
			}
			blank = true
			continue
		}
		blank = false
		out = append(out, l)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}
