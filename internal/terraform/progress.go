package terraform

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// progressInterval is the least time between two progress reports of one
// phase (at most ~5 a second: a terminal cannot show more).
const progressInterval = 200 * time.Millisecond

// Progress phases (engine.Progress.Phase).
const (
	phaseInit  = "init"
	phasePlan  = "plan"
	phaseShow  = "show"
	phaseApply = "apply"
)

// progressReporter throttles progress reports of a run to one per
// progressInterval: a phase change is reported at once; an update within
// progressInterval of the last report is held back and sent when the
// interval has passed (a timer), so the latest state is never more than
// progressInterval late; flush sends a held-back report at once and stop
// ends all reporting (no callback runs after it returns). A nil fn reports
// nothing. Reports are sent one at a time, in order. Safe for concurrent use.
type progressReporter struct {
	fn        func(engine.Progress)
	now       func() time.Time
	afterFunc func(time.Duration, func()) *time.Timer

	mu      sync.Mutex // held while fn runs: reports are serialized
	cur     engine.Progress
	start   time.Time
	last    time.Time
	pending bool
	timer   *time.Timer
	stopped bool
}

func newProgressReporter(fn func(engine.Progress)) *progressReporter {
	return &progressReporter{fn: fn, now: time.Now, afterFunc: time.AfterFunc}
}

// phase starts a new phase and reports it at once.
func (p *progressReporter) phase(name string) {
	if p == nil || p.fn == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	now := p.now()
	p.cur = engine.Progress{Phase: name}
	p.start = now
	p.emitLocked(now)
}

// update changes the current report and sends it, or holds it back until
// progressInterval has passed since the last report.
func (p *progressReporter) update(change func(*engine.Progress)) {
	if p == nil || p.fn == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	change(&p.cur)
	now := p.now()
	if wait := progressInterval - now.Sub(p.last); wait > 0 {
		p.pending = true
		if p.timer == nil {
			p.timer = p.afterFunc(wait, p.flush)
		}
		return
	}
	p.emitLocked(now)
}

// flush sends the current report if one was held back.
func (p *progressReporter) flush() {
	if p == nil || p.fn == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending && !p.stopped {
		p.emitLocked(p.now())
	}
}

// stop flushes and ends reporting.
func (p *progressReporter) stop() {
	if p == nil || p.fn == nil {
		return
	}
	p.flush()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
}

// emitLocked sends the current report; p.mu is held.
func (p *progressReporter) emitLocked(now time.Time) {
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.cur.Elapsed = now.Sub(p.start)
	p.last, p.pending = now, false
	p.fn(p.cur)
}

// uiMessage is the part of one line of Terraform's machine-readable UI
// stream that Kilolock reads (https://developer.hashicorp.com/terraform/internals/machine-readable-ui).
type uiMessage struct {
	Level     string `json:"@level"`
	Message   string `json:"@message"`
	Timestamp string `json:"@timestamp"`
	Type      string `json:"type"`
	Hook      *struct {
		Resource       uiResource `json:"resource"`
		Action         string     `json:"action"`
		IDKey          string     `json:"id_key"`
		IDValue        string     `json:"id_value"`
		ElapsedSeconds float64    `json:"elapsed_seconds"`
	} `json:"hook"`
	Change *struct {
		Resource uiResource `json:"resource"`
		Action   string     `json:"action"`
	} `json:"change"`
	Changes *struct {
		Add       int    `json:"add"`
		Change    int    `json:"change"`
		Import    int    `json:"import"`
		Remove    int    `json:"remove"`
		Operation string `json:"operation"`
	} `json:"changes"`
	Diagnostic *struct {
		Severity string `json:"severity"`
		Summary  string `json:"summary"`
		Detail   string `json:"detail"`
		Address  string `json:"address"`
		Range    *struct {
			Filename string  `json:"filename"`
			Start    uiPlace `json:"start"`
			End      uiPlace `json:"end"`
		} `json:"range"`
		Snippet *struct {
			Context string `json:"context"`
		} `json:"snippet"`
	} `json:"diagnostic"`
}

// uiPlace is a position in a diagnostic's range (1-based).
type uiPlace struct {
	Line   int `json:"line"`
	Column int `json:"column"`
}

type uiResource struct {
	Addr string `json:"addr"`
}

// uiStream is an io.Writer for Terraform's -json UI stream (plan, apply):
// it splits lines, keeps the diagnostics (logWarnings logs the warnings),
// collects the resource instances planned, refreshed, applied and errored
// and what became of each (record), and reports progress. Lines that are not JSON are logged and skipped.
// terraform-exec writes from one goroutine and finishes before the command
// returns, so reading the counters after the command is safe.
type uiStream struct {
	phase string
	rep   *progressReporter
	log   *slog.Logger

	buf   []byte
	diags []Diagnostic
	// record is what the stream says of each resource instance, and
	// Terraform's totals line (applylog.go).
	record applyRecord
	// Resource instance addresses seen per kind of message. A replace is
	// one planned_change but two apply_start/apply_complete pairs (delete
	// then create, or create then delete with create_before_destroy): it
	// is finished at its second apply_complete only.
	planned   map[string]int  // planned_change other than no-op and move: apply_complete messages it takes
	completed map[string]int  // apply_complete messages seen
	refreshed map[string]bool // refresh_complete
	applied   map[string]bool // at least one apply_complete: the state changed
	errored   map[string]bool // apply_errored

	// wrote, if set, is called (it must not block) on apply_complete and
	// apply_errored: Terraform is about to write the state file.
	wrote func()
}

func newUIStream(phase string, rep *progressReporter, log *slog.Logger) *uiStream {
	return &uiStream{phase: phase, rep: rep, log: log,
		planned: map[string]int{}, completed: map[string]int{},
		refreshed: map[string]bool{}, applied: map[string]bool{}, errored: map[string]bool{},
		record: applyRecord{resources: map[string]*resourceRecord{}}}
}

// finished counts the resource instances done: every apply_complete their
// planned change takes seen (one, two for a replace), or an apply_errored.
// A replace half done (its delete complete, its create running) is not.
func (s *uiStream) finished() int {
	n := 0
	for a := range s.applied {
		if !s.errored[a] && s.completed[a] >= max(s.planned[a], 1) {
			n++
		}
	}
	return n + len(s.errored)
}

// Write implements io.Writer.
func (s *uiStream) Write(p []byte) (int, error) {
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			break
		}
		s.line(s.buf[:i])
		s.buf = s.buf[i+1:]
	}
	return len(p), nil
}

// close handles a last line without a newline and sends a held-back
// progress report.
func (s *uiStream) close() {
	if len(bytes.TrimSpace(s.buf)) > 0 {
		s.line(s.buf)
	}
	s.buf = nil
	s.rep.flush()
}

// errorDiagnostics returns the diagnostics of severity "error", each once
// (an interrupted apply repeats "execution halted" per graph walk).
func (s *uiStream) errorDiagnostics() []Diagnostic {
	var out []Diagnostic
	seen := map[Diagnostic]bool{}
	for _, d := range s.diags {
		if d.Severity == "error" && !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

func (s *uiStream) line(b []byte) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return
	}
	var m uiMessage
	if err := json.Unmarshal(b, &m); err != nil {
		s.log.Debug("terraform output is not a UI message", "line", string(b))
		return
	}
	at := parseUITime(m.Timestamp)
	switch m.Type {
	case "diagnostic":
		if m.Diagnostic != nil {
			s.diags = append(s.diags, diagnosticOf(&m))
		}
	case "planned_change":
		if m.Change == nil || m.Change.Action == "noop" || m.Change.Action == "move" {
			return
		}
		s.record.planned(m.Change.Resource.Addr, m.Change.Action)
		steps := 1
		if m.Change.Action == "replace" {
			steps = 2
		}
		s.planned[m.Change.Resource.Addr] = steps
		s.progress(m.Change.Resource.Addr)
	case "refresh_start", "apply_start", "apply_progress", "refresh_complete", "apply_complete", "apply_errored":
		if m.Hook == nil {
			return
		}
		addr := m.Hook.Resource.Addr
		s.record.hook(&m, at)
		switch m.Type {
		case "refresh_complete":
			s.refreshed[addr] = true
		case "apply_complete":
			s.applied[addr] = true
			s.completed[addr]++
		case "apply_errored":
			s.errored[addr] = true
		}
		if s.wrote != nil && (m.Type == "apply_complete" || m.Type == "apply_errored") {
			s.wrote()
		}
		s.progress(addr)
	case "change_summary":
		if c := m.Changes; c != nil {
			s.record.totals = &engine.ChangeTotals{Add: c.Add, Change: c.Change, Import: c.Import, Remove: c.Remove,
				Operation: c.Operation, Message: m.Message}
			s.log.Debug("terraform change summary", "phase", s.phase, "message", m.Message)
		}
	}
}

// diagnosticOf is the Diagnostic of a "diagnostic" message: its range's
// file, start and end, and its snippet's context (never the snippet's code
// or values).
func diagnosticOf(m *uiMessage) Diagnostic {
	md := m.Diagnostic
	d := Diagnostic{Severity: md.Severity, Summary: md.Summary, Detail: md.Detail, Address: md.Address}
	if r := md.Range; r != nil {
		d.File, d.Line, d.Column, d.EndLine, d.EndColumn = r.Filename, r.Start.Line, r.Start.Column, r.End.Line, r.End.Column
	}
	if sn := md.Snippet; sn != nil {
		d.Context = sn.Context
	}
	return d
}

// logWarnings logs each warning diagnostic of the stream once, at warn:
// after the command, once what the stream holds is masked (ADR 0047). A
// nil stream (a plan run without -json) logs nothing.
func (s *uiStream) logWarnings() {
	if s == nil {
		return
	}
	seen := map[Diagnostic]bool{}
	for _, d := range s.diags {
		if d.Severity == "warning" && !seen[d] {
			seen[d] = true
			s.log.Warn("terraform warning", append([]any{"phase", s.phase}, d.logAttrs()...)...)
		}
	}
}

// progress reports the counters: in the apply phase Done counts finished
// resources (completed or errored, see finished; never one only started) of
// Total planned changes (the apply stream lists the planned changes before
// applying them); in the plan phase Done counts refreshed resources and
// Total is unknown.
func (s *uiStream) progress(current string) {
	s.rep.update(func(p *engine.Progress) {
		p.Current = current
		switch s.phase {
		case phaseApply:
			p.Done, p.Total = s.finished(), len(s.planned)
		default:
			p.Done, p.Total = len(s.refreshed), 0
		}
	})
}
