package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kilolock/kilolock/internal/engine"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2026, 7, 10, 12, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) now() time.Time { return c.t }

func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// progressTo returns an enabled progress line for a terminal cols wide
// (0: unknown), the buffer it writes to and its clock.
func progressTo(cols int) (*progressLine, *bytes.Buffer, *fakeClock) {
	var buf bytes.Buffer
	c := newFakeClock()
	return newProgressLine(&buf, true, cols, c.now), &buf, c
}

func TestProgressLine(t *testing.T) {
	t.Parallel()
	ev := func(phase string, elapsed time.Duration, done, total int, current string) engine.Progress {
		return engine.Progress{Phase: phase, Elapsed: elapsed, Done: done, Total: total, Current: current}
	}
	long, short := "plan · 1s · 1 resource · module.app.terraform_data.web", "show · 2s"
	for name, tc := range map[string]struct {
		cols int
		// steps: an event, then how long the clock moves before the next.
		events []engine.Progress
		gaps   []time.Duration
		want   string
	}{
		"phase and elapsed, rounded to 100ms": {
			events: []engine.Progress{ev("init", 1249*time.Millisecond, 0, 0, "")},
			want:   "\rinit · 1.2s",
		},
		"resources with a total and the one at hand": {
			events: []engine.Progress{ev("apply", 3*time.Second, 2, 5, "terraform_data.web")},
			want:   "\rapply · 3s · 2/5 resources · terraform_data.web",
		},
		"resources without a total": {
			events: []engine.Progress{ev("plan", 0, 7, 0, "")},
			want:   "\rplan · 0s · 7 resources",
		},
		"a shorter line blanks the rest of the longer one": {
			events: []engine.Progress{ev("plan", time.Second, 1, 0, "module.app.terraform_data.web"), ev("show", 2*time.Second, 0, 0, "")},
			gaps:   []time.Duration{time.Second},
			want:   "\r" + long + "\r" + short + strings.Repeat(" ", utf8.RuneCountInString(long)-utf8.RuneCountInString(short)),
		},
		"at most ten lines a second": {
			events: []engine.Progress{ev("plan", 0, 1, 0, ""), ev("plan", 0, 2, 0, ""), ev("plan", 0, 3, 0, "")},
			gaps:   []time.Duration{50 * time.Millisecond, 60 * time.Millisecond},
			want:   "\rplan · 0s · 1 resource" + "\rplan · 0s · 3 resources",
		},
		"the last event of a phase is never dropped": {
			events: []engine.Progress{ev("apply", 0, 1, 2, ""), ev("apply", 0, 2, 2, "")},
			gaps:   []time.Duration{time.Millisecond},
			want:   "\rapply · 0s · 1/2 resources" + "\rapply · 0s · 2/2 resources",
		},
		"an unknown total does not defeat the throttle": {
			events: []engine.Progress{ev("init", 0, 0, 0, ""), ev("init", 0, 0, 0, "")},
			gaps:   []time.Duration{time.Millisecond},
			want:   "\rinit · 0s",
		},
		"cut to the terminal's width": {
			cols:   20,
			events: []engine.Progress{ev("apply", 0, 0, 0, "terraform_data.very_long_name")},
			want:   "\rapply · 0s · terra…", // 19 runes: the cursor stays on the line
		},
		"cut to 100 runes when the width is unknown": {
			events: []engine.Progress{ev("plan", 0, 0, 0, strings.Repeat("x", 200))},
			want:   "\rplan · 0s · " + strings.Repeat("x", 100-12-1) + "…",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p, buf, clock := progressTo(tc.cols)
			for i, e := range tc.events {
				p.update(e)
				if i < len(tc.gaps) {
					clock.advance(tc.gaps[i])
				}
			}
			if got := buf.String(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestProgressLineCutsRunesNotBytes(t *testing.T) {
	t.Parallel()
	p, buf, _ := progressTo(30)
	p.update(engine.Progress{Phase: "apply", Current: `module.äpp.terraform_data.wëb["日本語のキー"]`})
	line := strings.TrimPrefix(buf.String(), "\r")
	if !utf8.ValidString(line) {
		t.Fatalf("cut inside a rune: %q", line)
	}
	if n := utf8.RuneCountInString(line); n != 29 {
		t.Errorf("line has %d runes, want 29 (a 30-column terminal, the cursor on the line): %q", n, line)
	}
	if !strings.HasSuffix(line, "…") {
		t.Errorf("a cut line must end with …: %q", line)
	}
}

func TestProgressLineDone(t *testing.T) {
	t.Parallel()
	p, buf, _ := progressTo(0)
	p.done()
	if buf.Len() != 0 {
		t.Fatalf("done before any line wrote %q", buf.String())
	}
	p.waiting([]engine.Blocker{{Run: "01J2ZP0B0B0000000000APPLY0", Addresses: engine.AddressSet{"terraform_data.a", "terraform_data.b"}}})
	want := "\rwaiting for run 01J2ZP0B0B0000000000APPLY0 over terraform_data.a, terraform_data.b"
	if buf.String() != want {
		t.Fatalf("waiting: got %q, want %q", buf.String(), want)
	}
	buf.Reset()
	p.done()
	n := utf8.RuneCountInString(want) - 1
	if got, wantClear := buf.String(), "\r"+strings.Repeat(" ", n)+"\r"; got != wantClear {
		t.Errorf("done: got %q, want the line blanked and the cursor back at its start %q", got, wantClear)
	}
	buf.Reset()
	p.done()
	if buf.Len() != 0 {
		t.Errorf("a second done wrote %q", buf.String())
	}
}

func TestProgressLineDisabled(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	c := newFakeClock()
	p := newProgressLine(&buf, false, 80, c.now)
	p.update(engine.Progress{Phase: "plan", Done: 1, Total: 1})
	p.waiting([]engine.Blocker{{Run: "r"}})
	p.done()
	if buf.Len() != 0 {
		t.Errorf("a disabled progress line wrote %q", buf.String())
	}
}

// TestProgressOffWithoutTerminal: kl's progress goes to stderr only when
// stderr is a terminal and --json is off.
func TestProgressOffWithoutTerminal(t *testing.T) {
	t.Parallel()
	for name, a := range map[string]*app{
		"buffer":        {io: IO{Err: &bytes.Buffer{}}},
		"buffer --json": {io: IO{Err: &bytes.Buffer{}}, jsonOut: true},
	} {
		if a.progress().enabled {
			t.Errorf("%s: progress enabled", name)
		}
	}
}
