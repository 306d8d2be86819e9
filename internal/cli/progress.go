package cli

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// progressLine shows the phase, elapsed time and resources done of a long
// Terraform step on one rewritten terminal line. It is silent when not
// enabled (not a TTY, or --json).
type progressLine struct {
	mu      sync.Mutex
	w       io.Writer
	enabled bool
	now     func() time.Time
	start   time.Time
	last    time.Time
	width   int // runes on the line now, cleared by the next draw or done
	limit   int // longest line drawn, in runes: it must not wrap
}

// defaultProgressWidth is the longest progress line when the terminal's
// width is unknown.
const defaultProgressWidth = 100

// newProgressLine returns a progress line writing to w. cols is the
// terminal's width (0 if unknown): a line longer than the terminal would
// wrap, and "\r" would then rewrite only its last row.
func newProgressLine(w io.Writer, enabled bool, cols int, now func() time.Time) *progressLine {
	limit := defaultProgressWidth
	if cols > 1 && cols-1 < limit {
		limit = cols - 1 // the cursor stays on the line
	}
	return &progressLine{w: w, enabled: enabled, now: now, start: now(), limit: limit}
}

// update renders p, at most ten times a second.
func (p *progressLine) update(ev engine.Progress) {
	if !p.enabled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// The last event of a phase (all resources done) is always drawn; with
	// an unknown total (0) every event is throttled alike.
	now := p.now()
	final := ev.Total > 0 && ev.Done == ev.Total
	if now.Sub(p.last) < 100*time.Millisecond && !final {
		return
	}
	p.last = now
	line := fmt.Sprintf("%s · %s", ev.Phase, ev.Elapsed.Round(100*time.Millisecond))
	switch {
	case ev.Total == 1:
		line += fmt.Sprintf(" · %d/1 resource", ev.Done)
	case ev.Total > 0:
		line += fmt.Sprintf(" · %d/%d resources", ev.Done, ev.Total)
	case ev.Done == 1:
		line += " · 1 resource"
	case ev.Done > 0:
		line += fmt.Sprintf(" · %d resources", ev.Done)
	}
	if ev.Current != "" {
		line += " · " + ev.Current
	}
	p.draw(line)
}

// waiting shows whom an apply waits on.
func (p *progressLine) waiting(bs []engine.Blocker) {
	if !p.enabled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var parts []string
	for _, b := range bs {
		parts = append(parts, fmt.Sprintf("run %s over %s", b.Run, strings.Join(b.Addresses.Strings(), ", ")))
	}
	p.draw("waiting for " + strings.Join(parts, "; "))
}

// done clears the line.
func (p *progressLine) done() {
	if !p.enabled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.width > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.width))
		p.width = 0
	}
}

func (p *progressLine) draw(line string) {
	r := []rune(line)
	if len(r) > p.limit {
		r = append(r[:p.limit-1], '…')
	}
	pad := ""
	if n := p.width - len(r); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprintf(p.w, "\r%s%s", string(r), pad)
	p.width = len(r)
}
