package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// A replica's shutdown (ADR 0043). On SIGTERM a replica has
// KLBOT_SHUTDOWN_TIMEOUT to end, and ends within it: an orchestrator kills
// it once its own grace period is over, and a job still running then stays
// "running" in River until River's rescue, hours later. River's own stop
// is all or nothing (Stop lets every job finish, StopAndCancel cancels them
// all), so the bot's Stopper cancels jobs by kind, and Shutdown spends the
// timeout in the order of ShutdownPlan.

// ErrShutdown is the cause (context.Cause) of a job context the Stopper
// cancelled: the replica is shutting down.
var ErrShutdown = errors.New("klbot is shutting down")

// ShutdownPlan is how a replica spends its shutdown timeout after SIGTERM
// (ADR 0043), as durations from SIGTERM's arrival:
//
//	[0, Finish)                   applies run on (they may finish); every other job is interrupted at once
//	[Finish, Finish+Interrupt)    applies are interrupted: Terraform gets SIGINT, persists what it did and stops
//	Finish+Interrupt              a Terraform still running is killed (terraform.RunnerOptions.InterruptGrace = Interrupt)
//	[Finish+Interrupt, Timeout)   Record: committing what Terraform wrote (or fencing a killed apply), reporting
//	Timeout-Close                 Shutdown returns; Close is left for closing the database connections
//
// Plans lose nothing by an interrupt — the next replica plans again — while
// an interrupted apply leaves a partial version and a re-plan to do, so
// applies get the first part of the timeout to finish.
type ShutdownPlan struct {
	Timeout, Finish, Interrupt, Record, Close time.Duration
}

// MinShutdownTimeout is the least KLBOT_SHUTDOWN_TIMEOUT: each part of a
// ShutdownPlan needs some time.
const MinShutdownTimeout = time.Second

// PlanShutdown splits timeout (at least MinShutdownTimeout): Record is a
// third of it, at most 30 s — a commit and a few GitHub requests — of
// which Close is the last twelfth of the timeout, at most 500 ms; the rest
// is halved between Finish and Interrupt. KLBOT_SHUTDOWN_TIMEOUT=3s gives
// 1 s each (Close 250 ms); the default 5m gives 135 s, 135 s and 30 s.
func PlanShutdown(timeout time.Duration) ShutdownPlan {
	record := min(timeout/3, 30*time.Second)
	finish := (timeout - record) / 2
	return ShutdownPlan{Timeout: timeout, Finish: finish, Interrupt: timeout - record - finish, Record: record,
		Close: min(timeout/12, 500*time.Millisecond)}
}

// Stopper is River worker middleware (river.Config.Middleware) that gives
// each job a context it cancels, with cause ErrShutdown, when the replica
// shuts down: InterruptOthers cancels every job but applies (KindApply),
// InterruptApplies the applies too; a job that starts after its kind was
// interrupted starts cancelled. Cancelling a job's context is what stops
// its Terraform (terraform-exec sends SIGINT).
type Stopper struct {
	river.MiddlewareDefaults

	mu      sync.Mutex
	running map[*stoppable]struct{}
	others  bool // InterruptOthers was called
	applies bool // InterruptApplies was called
}

var _ rivertype.WorkerMiddleware = (*Stopper)(nil)

type stoppable struct {
	apply  bool
	cancel context.CancelCauseFunc
}

// NewStopper returns a Stopper that has interrupted nothing yet.
func NewStopper() *Stopper { return &Stopper{running: map[*stoppable]struct{}{}} }

// Work runs the job with a context the Stopper can cancel.
func (s *Stopper) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	j := &stoppable{apply: job.Kind == KindApply, cancel: cancel}
	s.mu.Lock()
	if s.applies || (s.others && !j.apply) {
		cancel(ErrShutdown)
	}
	s.running[j] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.running, j)
		s.mu.Unlock()
	}()
	return doInner(ctx)
}

// InterruptOthers cancels every running job that is not an apply, and
// every job that starts from now on except applies. It returns how many
// jobs it cancelled.
func (s *Stopper) InterruptOthers() int { return s.interrupt(false) }

// InterruptApplies cancels every running job, applies included, and every
// job that starts from now on. It returns how many jobs it cancelled.
func (s *Stopper) InterruptApplies() int { return s.interrupt(true) }

func (s *Stopper) interrupt(applies bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.others = true
	s.applies = s.applies || applies
	n := 0
	for j := range s.running {
		if applies || !j.apply {
			j.cancel(ErrShutdown)
			n++
		}
	}
	return n
}

// Running returns how many jobs run, and how many of them are applies.
func (s *Stopper) Running() (jobs, applies int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for j := range s.running {
		jobs++
		if j.apply {
			applies++
		}
	}
	return jobs, applies
}

// Shutdown stops the job queue rc within plan.Timeout of start (SIGTERM's
// arrival; ADR 0043): River stops fetching jobs at once; s interrupts
// every job but applies at once, and the applies at plan.Finish if they
// still run; their Terraform is killed plan.Interrupt later by the Runner
// (terraform.RunnerOptions.InterruptGrace, which the caller set to
// plan.Interrupt); the jobs then record and report what their Terraform
// did. Shutdown returns once every job has returned and River has stopped,
// or at start+plan.Timeout-plan.Close with an error naming the jobs still
// running
// (what their runs did is then left to the lease sweep: a started apply is
// fenced, ADR 0035; River rescues the jobs later).
func Shutdown(start time.Time, rc *river.Client[pgx.Tx], s *Stopper, plan ShutdownPlan, log *slog.Logger) error {
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(plan.Timeout-plan.Close))
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- rc.Stop(ctx) }()
	if n := s.InterruptOthers(); n > 0 {
		log.Info("shutdown: interrupted the running jobs that are not applies; River hands them back to the queue", "jobs", n)
	}
	if _, applies := s.Running(); applies > 0 {
		log.Info("shutdown: letting running applies finish", "applies", applies, "for", plan.Finish.Round(time.Millisecond))
	}
	finish := time.NewTimer(time.Until(start.Add(plan.Finish)))
	defer finish.Stop()
	select {
	case err := <-stopped:
		return stopErr(err, s)
	case <-finish.C:
	}
	if n := s.InterruptApplies(); n > 0 {
		log.Warn("shutdown: interrupting the applies still running: Terraform stops and what it did is committed as a partial version; one still running is killed and its write set fenced",
			"applies", n, "kill_after", plan.Interrupt.Round(time.Millisecond))
	}
	return stopErr(<-stopped, s)
}

// stopErr is Shutdown's error for River's stop error err.
func stopErr(err error, s *Stopper) error {
	if err == nil {
		return nil
	}
	jobs, applies := s.Running()
	return fmt.Errorf("stopping the job queue: %d jobs (%d applies) still running at the shutdown timeout: "+
		"their runs end when their leases run out (a started apply is fenced) and River rescues the jobs later: %w", jobs, applies, err)
}
