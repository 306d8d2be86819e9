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
	width   int
}

func newProgressLine(w io.Writer, enabled bool, now func() time.Time) *progressLine {
	return &progressLine{w: w, enabled: enabled, now: now, start: now()}
}

// update renders p, at most ten times a second.
func (p *progressLine) update(ev engine.Progress) {
	if !p.enabled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if now.Sub(p.last) < 100*time.Millisecond && ev.Done != ev.Total {
		return
	}
	p.last = now
	line := fmt.Sprintf("%s · %s", ev.Phase, ev.Elapsed.Round(100*time.Millisecond))
	switch {
	case ev.Total > 0:
		line += fmt.Sprintf(" · %d/%d resources", ev.Done, ev.Total)
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
	const max = 100
	r := []rune(line)
	if len(r) > max {
		r = append(r[:max-1], '…')
	}
	pad := ""
	if n := p.width - len(r); n > 0 {
		pad = strings.Repeat(" ", n)
	}
	fmt.Fprintf(p.w, "\r%s%s", string(r), pad)
	p.width = len(r)
}
