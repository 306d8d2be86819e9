package terraform

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// fakeClock advances by step on every reading.
type fakeClock struct {
	t    time.Time
	step time.Duration
}

func (c *fakeClock) now() time.Time { c.t = c.t.Add(c.step); return c.t }

// replay feeds a recorded UI stream to a uiStream in 7-byte chunks (lines
// split across writes) and returns the stream and the reports.
func replay(t *testing.T, file, phase string, step time.Duration) (*uiStream, []engine.Progress) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "ui", file))
	if err != nil {
		t.Fatal(err)
	}
	var got []engine.Progress
	rep := newProgressReporter(func(p engine.Progress) { got = append(got, p) })
	clock := &fakeClock{t: time.Unix(1000, 0), step: step}
	rep.now = clock.now
	rep.afterFunc = func(time.Duration, func()) *time.Timer { return time.NewTimer(time.Hour) }
	rep.phase(phase)
	s := newUIStream(phase, rep, discard)
	for len(b) > 0 {
		n := min(7, len(b))
		if _, err := s.Write(b[:n]); err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
	s.close()
	return s, got
}

func TestUIStream(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		file, phase                          string
		planned, refreshed, applied, errored int
		last                                 engine.Progress
		diags                                []string
	}{
		"plan creating": {
			file: "plan-create.jsonl", phase: phasePlan, planned: 4,
			last: engine.Progress{Phase: "plan", Current: "terraform_data.bad"},
		},
		"plan refreshing": {
			file: "plan-refresh.jsonl", phase: phasePlan, planned: 1, refreshed: 4,
			last: engine.Progress{Phase: "plan", Done: 4, Current: "terraform_data.bad"},
		},
		"plan failing": {
			file: "plan-error.jsonl", phase: phasePlan,
			last:  engine.Progress{Phase: "plan"},
			diags: []string{`Reference to undeclared input variable: An input variable with the name "nope" has not been declared. This variable can be declared with a variable "nope" {} block. (main.tf:1)`},
		},
		"apply with one resource failing": {
			file: "apply-errored.jsonl", phase: phaseApply, planned: 4, applied: 3, errored: 1,
			last:  engine.Progress{Phase: "apply", Done: 4, Total: 4, Current: "terraform_data.slow"},
			diags: []string{"local-exec provisioner error: Error running command 'exit 1': exit status 1. Output: (terraform_data.bad, main.tf:23)"},
		},
		"apply replacing": {
			file: "apply-replace.jsonl", phase: phaseApply, planned: 1, applied: 1,
			last: engine.Progress{Phase: "apply", Done: 1, Total: 1, Current: "terraform_data.bad"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, reports := replay(t, tc.file, tc.phase, time.Second)
			if len(s.planned) != tc.planned || len(s.refreshed) != tc.refreshed || len(s.applied) != tc.applied || len(s.errored) != tc.errored {
				t.Errorf("planned/refreshed/applied/errored = %d/%d/%d/%d, want %d/%d/%d/%d",
					len(s.planned), len(s.refreshed), len(s.applied), len(s.errored), tc.planned, tc.refreshed, tc.applied, tc.errored)
			}
			last := reports[len(reports)-1]
			last.Elapsed = 0
			if last != tc.last {
				t.Errorf("last report = %+v, want %+v", last, tc.last)
			}
			var diags []string
			for _, d := range s.errorDiagnostics() {
				diags = append(diags, d.String())
			}
			if strings.Join(diags, "\n") != strings.Join(tc.diags, "\n") {
				t.Errorf("error diagnostics:\n%s\nwant:\n%s", strings.Join(diags, "\n"), strings.Join(tc.diags, "\n"))
			}
		})
	}
}

func TestProgressThrottle(t *testing.T) {
	t.Parallel()
	var got []engine.Progress
	rep := newProgressReporter(func(p engine.Progress) { got = append(got, p) })
	clock := &fakeClock{t: time.Unix(1000, 0)}
	rep.now = clock.now
	var timers []time.Duration
	var fire func()
	rep.afterFunc = func(d time.Duration, f func()) *time.Timer {
		timers, fire = append(timers, d), f
		return time.NewTimer(time.Hour)
	}

	rep.phase(phaseApply) // reported at once
	for i := range 100 {
		clock.t = clock.t.Add(time.Millisecond)
		rep.update(func(p *engine.Progress) { p.Done = i + 1 })
	}
	if len(got) != 1 {
		t.Fatalf("%d reports within 100ms, want only the phase start", len(got))
	}
	if len(timers) != 1 || timers[0] != 199*time.Millisecond {
		t.Fatalf("timers = %v, want one for the rest of the interval (199ms)", timers)
	}
	fire() // the held-back report goes out when the interval has passed
	if len(got) != 2 || got[1].Done != 100 || got[1].Elapsed != 100*time.Millisecond {
		t.Fatalf("timer reported %+v, want Done 100 after 100ms", got[len(got)-1])
	}
	rep.flush() // nothing pending
	clock.t = clock.t.Add(150 * time.Millisecond)
	rep.update(func(p *engine.Progress) { p.Done = 101 })
	if len(got) != 2 {
		t.Fatal("reported less than 200ms after the last report")
	}
	clock.t = clock.t.Add(100 * time.Millisecond)
	rep.update(func(p *engine.Progress) { p.Done = 102 })
	if len(got) != 3 || got[2].Done != 102 {
		t.Fatalf("no report after 250ms: %+v", got)
	}
	// Over a simulated 10s stream of one message per millisecond, at most
	// ~5 reports a second.
	for range 10_000 {
		clock.t = clock.t.Add(time.Millisecond)
		rep.update(func(p *engine.Progress) { p.Done++ })
	}
	if n := len(got) - 3; n > 50 || n < 45 {
		t.Errorf("%d reports in 10s, want about 50", n)
	}
	// stop flushes, then nothing more is reported.
	clock.t = clock.t.Add(time.Millisecond)
	rep.update(func(p *engine.Progress) { p.Done = -1 })
	n := len(got)
	rep.stop()
	if len(got) != n+1 || got[n].Done != -1 {
		t.Fatalf("stop did not flush the held-back report")
	}
	clock.t = clock.t.Add(time.Second)
	rep.update(func(p *engine.Progress) { p.Done = -2 })
	rep.phase(phasePlan)
	fire()
	if len(got) != n+1 {
		t.Errorf("reported after stop: %+v", got[n+1:])
	}
	// A nil callback is fine.
	none := newProgressReporter(nil)
	none.phase(phasePlan)
	none.update(func(*engine.Progress) {})
	none.flush()
	none.stop()
}

// TestApplyDoneCountsFinished replays recorded apply streams line by line:
// Done may count a resource only once it is finished — a replace after its
// second apply_complete (delete then create, or create then delete with
// create_before_destroy), never at an apply_start, never when only its
// delete completed while its create (a 1 s local-exec) still runs.
func TestApplyDoneCountsFinished(t *testing.T) {
	t.Parallel()
	type step struct {
		after string // "TYPE ACTION" of the line just fed
		done  int
	}
	tests := map[string]struct {
		file  string
		total int
		steps []step
	}{
		"replace, Terraform 1.11.4": {file: "apply-replace.jsonl", total: 1, steps: []step{
			{"apply_start delete", 0}, {"apply_complete delete", 0}, {"apply_start create", 0}, {"apply_complete create", 1},
		}},
		"slow replace, Terraform 1.5.7": {file: "apply-replace-slow-1.5.7.jsonl", total: 1, steps: []step{
			{"apply_start delete", 0}, {"apply_complete delete", 0}, {"apply_start create", 0}, {"apply_complete create", 1},
		}},
		"replace with create_before_destroy": {file: "apply-replace-cbd.jsonl", total: 1, steps: []step{
			{"apply_start create", 0}, {"apply_complete create", 0}, {"apply_start delete", 0}, {"apply_complete delete", 1},
		}},
		"creates, one failing": {file: "apply-errored.jsonl", total: 4, steps: []step{
			{"apply_start create", 0}, {"apply_start create", 0}, {"apply_complete create", 1},
			{"apply_start create", 1}, {"apply_complete create", 2}, {"apply_start create", 2},
			{"apply_errored create", 3}, {"apply_complete create", 4},
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(filepath.Join("testdata", "ui", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			var got []engine.Progress
			rep := newProgressReporter(func(p engine.Progress) { got = append(got, p) })
			clock := &fakeClock{t: time.Unix(1000, 0), step: time.Second} // every update is reported
			rep.now = clock.now
			rep.phase(phaseApply)
			s := newUIStream(phaseApply, rep, discard)
			var seen []step
			for _, line := range strings.SplitAfter(string(b), "\n") {
				var m uiMessage
				_ = json.Unmarshal([]byte(line), &m)
				if _, err := s.Write([]byte(line)); err != nil {
					t.Fatal(err)
				}
				if m.Hook == nil || !strings.HasPrefix(m.Type, "apply_") {
					continue
				}
				last := got[len(got)-1]
				if last.Total != tc.total {
					t.Errorf("after %s: Total = %d, want %d", m.Type, last.Total, tc.total)
				}
				seen = append(seen, step{m.Type + " " + m.Hook.Action, last.Done})
			}
			s.close()
			if fmt.Sprint(seen) != fmt.Sprint(tc.steps) {
				t.Errorf("Done after each hook:\n got %v\nwant %v", seen, tc.steps)
			}
		})
	}
}
