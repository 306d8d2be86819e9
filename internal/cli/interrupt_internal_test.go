package cli

import (
	"bytes"
	"context"
	"strings"
	"syscall"
	"testing"
)

// TestInterruptNoteWrittenBeforeStopReturns: once the context is
// cancelled by a signal, stop returns only after the note is written, so
// that nothing writes to the caller's stderr after Run returns (a test
// reading its buffer raced the note before).
func TestInterruptNoteWrittenBeforeStopReturns(t *testing.T) {
	t.Parallel()
	for range 200 {
		ctx, cancel := context.WithCancelCause(context.Background())
		var b bytes.Buffer // unlocked on purpose: the race detector sees a late write
		var ph phaseTracker
		stop := noteOnInterrupt(ctx, &b, &ph)
		cancel(&Interrupted{Signal: syscall.SIGTERM})
		stop()
		if !strings.Contains(b.String(), "kl: interrupted") {
			t.Fatalf("stop returned before the interrupt note was written: %q", b.String())
		}
		stop() // a second stop neither blocks nor writes
	}
}
