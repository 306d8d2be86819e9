package terraform

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"sync"
	"time"
)

// Checkpoint timing (engine.ApplyRequest.Checkpoint).
const (
	// checkpointInterval is the least time between two looks at the state
	// file: a big state (1.25 MB for 2000 resources — docs/terraform.md) is read,
	// hashed and, when changed, handed over at most this often.
	checkpointInterval = 2 * time.Second
	// checkpointSettle is how long after a resource completed the first look
	// waits: Terraform emits apply_complete just before it writes the state
	// (its UI hook runs before its state hook), so a look at once would
	// mostly find the old file.
	checkpointSettle = 150 * time.Millisecond
	// checkpointRetries bounds the quick re-looks at a file caught half
	// written (Terraform's local backend truncates and rewrites it in place).
	checkpointRetries = 5
)

// checkpointer hands the run's state file to fn while Terraform applies
// (engine.ApplyRequest.Checkpoint), from its own goroutine: the UI stream
// only kicks it (a non-blocking send), so neither a slow fn nor reading a
// big file ever holds up the goroutine that drains Terraform's output.
//
// After a kick (a resource completed or failed) it looks at the file twice
// — once checkpointSettle later, and once more a checkpointInterval after
// that, for a write that landed after the first look — with looks at least
// checkpointInterval apart, however many kicks come. It hands over only
// bytes that are a whole JSON document and differ from the last ones handed
// over (or the snapshot Terraform started from): a file caught half
// written, or missing, is looked at again shortly (a few times). finish
// stops the goroutine and, if any resource completed, looks a last time at
// the final file. A nil *checkpointer (no fn) does nothing.
type checkpointer struct {
	fn       func([]byte)
	path     string
	log      *slog.Logger
	interval time.Duration
	settle   time.Duration

	kicks chan struct{} // capacity 1: a pending kick
	quit  chan struct{}
	done  chan struct{}
	once  sync.Once

	// Owned by the loop goroutine, then by finish.
	last     [sha256.Size]byte // of the last bytes handed over (or the starting snapshot)
	lastLook time.Time
	kicked   bool // a resource completed: the file may differ from the start
}

// newCheckpointer starts a checkpointer of the state file path, which
// holds start now; nil when fn is nil.
func newCheckpointer(fn func([]byte), path string, start []byte, log *slog.Logger) *checkpointer {
	return startCheckpointer(fn, path, start, log, checkpointInterval, checkpointSettle)
}

// startCheckpointer is newCheckpointer with its timings.
func startCheckpointer(fn func([]byte), path string, start []byte, log *slog.Logger, interval, settle time.Duration) *checkpointer {
	if fn == nil {
		return nil
	}
	c := &checkpointer{fn: fn, path: path, log: log, interval: interval, settle: settle,
		kicks: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
		last: sha256.Sum256(start)}
	go c.loop()
	return c
}

// kick says a resource completed or failed: the state file may change.
// It never blocks.
func (c *checkpointer) kick() {
	if c == nil {
		return
	}
	select {
	case c.kicks <- struct{}{}:
	default:
	}
}

// finish stops the goroutine and, if a resource completed since the last
// look, looks once more (Terraform has finished: the file is final). It
// returns after fn did. Safe to call more than once.
func (c *checkpointer) finish() {
	if c == nil {
		return
	}
	c.once.Do(func() {
		close(c.quit)
		<-c.done
		select {
		case <-c.kicks:
			c.kicked = true
		default:
		}
		if c.kicked {
			c.look()
		}
	})
}

func (c *checkpointer) loop() {
	defer close(c.done)
	var (
		looks   int // looks still due since the last kick
		retries int // quick re-looks left for a file caught half written
		timer   *time.Timer
		due     <-chan time.Time // timer.C while a look is scheduled
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	// schedule the next look after at least after, and at least
	// c.interval after the last look.
	schedule := func(after time.Duration) {
		if wait := c.interval - time.Since(c.lastLook); wait > after {
			after = wait
		}
		timer = time.NewTimer(after)
		due = timer.C
	}
	for {
		select {
		case <-c.quit:
			return
		case <-c.kicks:
			c.kicked = true
			looks = 2 // the next look, and one more for a write that lands after it
			if due == nil {
				retries = checkpointRetries
				schedule(c.settle)
			}
		case <-due:
			timer, due = nil, nil
			if !c.look() && retries > 0 {
				// Missing or half written: look again soon.
				retries--
				c.lastLook = time.Time{}
				schedule(c.settle)
				continue
			}
			if looks--; looks > 0 {
				schedule(0)
			}
		}
	}
}

// look reads the state file and hands it to fn when it is a whole JSON
// document that differs from the last bytes handed over. It reports false
// when the file could not be read whole (missing, or half written).
func (c *checkpointer) look() bool {
	c.lastLook = time.Now()
	b, err := os.ReadFile(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		c.log.Warn("reading the state file for a checkpoint", "file", c.path, "error", err)
		return false
	}
	if len(bytes.TrimSpace(b)) == 0 || !json.Valid(b) {
		return false
	}
	sum := sha256.Sum256(b)
	if sum == c.last {
		return true
	}
	c.last = sum
	c.fn(b)
	return true
}
