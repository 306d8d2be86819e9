package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
)

// Interrupted is the cause a caller cancels Run's context with when the
// process gets a signal (cmd/kl: SIGINT, SIGTERM, SIGHUP). While a command runs,
// Run then prints on stderr what the command does about it (which depends
// on how far it got), and a command that stops with an error exits
// 128+signal — 130 for SIGINT, 143 for SIGTERM, as a shell reports a
// process a signal ended.
type Interrupted struct {
	Signal syscall.Signal
}

func (i *Interrupted) Error() string { return "interrupted by " + i.Signal.String() }

// Code is the exit status of a command the signal stopped.
func (i *Interrupted) Code() int { return 128 + int(i.Signal) }

// interruptedBy returns the signal ctx was cancelled for, or nil.
func interruptedBy(ctx context.Context) *Interrupted {
	var in *Interrupted
	if ctx.Err() != nil && errors.As(context.Cause(ctx), &in) {
		return in
	}
	return nil
}

// Phases of a command, for the note printed when it is interrupted.
type phase int

const (
	phaseOther          phase = iota // no Terraform, nothing held
	phasePlan                        // kl plan: Terraform plans
	phaseApplyStart                  // kl apply: checking and claiming the plan
	phaseApplyWait                   // kl apply: waiting for reservations
	phaseApplyPrepare                // kl apply: Terraform runs, before it applies (re-plan, init)
	phaseApplyTerraform              // kl apply: Terraform applies
	phaseServe                       // kl serve: serving
)

// phaseTracker is how far the running command got; progress callbacks set
// it from the engine's goroutines, the interrupt note reads it.
type phaseTracker struct {
	mu sync.Mutex
	p  phase
}

func (t *phaseTracker) set(p phase) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.p = p
}

func (t *phaseTracker) get() phase {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.p
}

// terraformPhase records a Terraform progress event of an apply: "apply"
// is Terraform applying; init, plan and show come before it (a re-plan,
// the apply's init).
func (t *phaseTracker) terraformPhase(name string) {
	if name == "apply" {
		t.set(phaseApplyTerraform)
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.p != phaseApplyTerraform {
		t.p = phaseApplyPrepare
	}
}

// interruptNote is what an interrupted command does, in words that fit
// how far it got.
func interruptNote(p phase, sig syscall.Signal) string {
	again := " (Ctrl-C again to exit at once)…"
	if sig != syscall.SIGINT {
		again = " (signal it again to exit at once)…"
	}
	switch p {
	case phasePlan:
		return "kl: interrupted: stopping Terraform's plan; the plan run ends interrupted, nothing was applied" + again
	case phaseApplyStart:
		return "kl: interrupted: stopping before Terraform ran: nothing to commit; any reservation taken is released" + again
	case phaseApplyWait:
		return "kl: interrupted: stopping while waiting for reservations: Terraform has not run, nothing to commit" + again
	case phaseApplyPrepare:
		return "kl: interrupted: stopping Terraform before it applied anything: nothing to commit; releasing the reservations" + again
	case phaseServe:
		return fmt.Sprintf("kl: interrupted: kl serve takes no new connections and lets the requests in flight finish (at most %s)", ShutdownTimeout) + again
	case phaseApplyTerraform:
		return "kl: interrupted: stopping Terraform; an apply commits what Terraform wrote and releases its reservations" + again
	}
	return "kl: interrupted" + again
}

// noteOnInterrupt prints the interrupt note on w once ctx is cancelled by
// a signal (Interrupted). The returned stop ends the watch and, when the
// note has begun, waits until it is written: after Run returns nothing
// writes to the caller's stderr (context.AfterFunc's own stop does not
// wait for a func already started).
func noteOnInterrupt(ctx context.Context, w io.Writer, t *phaseTracker) (stop func()) {
	written := make(chan struct{})
	stopped := context.AfterFunc(ctx, func() {
		defer close(written)
		if in := interruptedBy(ctx); in != nil {
			note := interruptNote(t.get(), in.Signal)
			if in.Signal == syscall.SIGINT {
				note = "\n" + note // the terminal echoed ^C on the line
			}
			fmt.Fprintln(w, note)
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			if !stopped() { // the note began: wait for it
				<-written
			}
		})
	}
}
