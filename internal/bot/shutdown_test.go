package bot

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
)

// TestPlanShutdown: the parts of a shutdown add up to the timeout, in the
// order ADR 0043 gives, and the record part is capped.
func TestPlanShutdown(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		timeout time.Duration
		want    ShutdownPlan
	}{
		"the least":    {time.Second, ShutdownPlan{Timeout: time.Second, Finish: 333333333, Interrupt: 333333334, Record: 333333333, Close: 83333333}},
		"three":        {3 * time.Second, ShutdownPlan{Timeout: 3 * time.Second, Finish: time.Second, Interrupt: time.Second, Record: time.Second, Close: 250 * time.Millisecond}},
		"Kubernetes'":  {25 * time.Second, ShutdownPlan{Timeout: 25 * time.Second, Finish: 8333333333, Interrupt: 8333333334, Record: 8333333333, Close: 500 * time.Millisecond}},
		"the default":  {5 * time.Minute, ShutdownPlan{Timeout: 5 * time.Minute, Finish: 135 * time.Second, Interrupt: 135 * time.Second, Record: 30 * time.Second, Close: 500 * time.Millisecond}},
		"a long apply": {time.Hour, ShutdownPlan{Timeout: time.Hour, Finish: 1785 * time.Second, Interrupt: 1785 * time.Second, Record: 30 * time.Second, Close: 500 * time.Millisecond}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := PlanShutdown(tc.timeout)
			if got != tc.want {
				t.Errorf("PlanShutdown(%s) = %+v, want %+v", tc.timeout, got, tc.want)
			}
			if got.Finish+got.Interrupt+got.Record != tc.timeout || got.Close >= got.Record {
				t.Errorf("PlanShutdown(%s) = %+v: the parts do not add up, or Close is not within Record", tc.timeout, got)
			}
		})
	}
}

// TestStopper: InterruptOthers cancels every running job but applies, and
// those that start later; InterruptApplies the applies too; the cause is
// ErrShutdown.
func TestStopper(t *testing.T) {
	t.Parallel()
	s := NewStopper()
	type job struct {
		started chan struct{}
		ended   chan error
	}
	run := func(kind string) job {
		j := job{started: make(chan struct{}), ended: make(chan error, 1)}
		go func() {
			j.ended <- s.Work(context.Background(), &rivertype.JobRow{Kind: kind}, func(ctx context.Context) error {
				close(j.started)
				<-ctx.Done()
				return context.Cause(ctx)
			})
		}()
		<-j.started
		return j
	}
	ended := func(j job) error {
		select {
		case err := <-j.ended:
			return err
		case <-time.After(5 * time.Second):
			return errors.New("still running")
		}
	}
	running := func(j job) bool {
		select {
		case err := <-j.ended:
			j.ended <- err
			return false
		case <-time.After(100 * time.Millisecond):
			return true
		}
	}
	plan, reply, apply := run(KindPlan), run(KindReply), run(KindApply)
	if jobs, applies := s.Running(); jobs != 3 || applies != 1 {
		t.Fatalf("Running() = %d jobs, %d applies; want 3, 1", jobs, applies)
	}
	if n := s.InterruptOthers(); n != 2 {
		t.Errorf("InterruptOthers() cancelled %d jobs, want 2 (the plan and the reply)", n)
	}
	for name, j := range map[string]job{"plan": plan, "reply": reply} {
		if err := ended(j); !errors.Is(err, ErrShutdown) {
			t.Errorf("the %s job ended with %v, want ErrShutdown", name, err)
		}
	}
	if !running(apply) {
		t.Fatal("InterruptOthers ended the apply")
	}
	late := run(KindRefresh)
	if err := ended(late); !errors.Is(err, ErrShutdown) {
		t.Errorf("a refresh started after InterruptOthers ended with %v, want ErrShutdown at once", err)
	}
	lateApply := run(KindApply)
	if !running(lateApply) {
		t.Error("an apply started after InterruptOthers was cancelled")
	}
	if n := s.InterruptApplies(); n != 2 {
		t.Errorf("InterruptApplies() cancelled %d jobs, want the 2 applies", n)
	}
	for _, j := range []job{apply, lateApply} {
		if err := ended(j); !errors.Is(err, ErrShutdown) {
			t.Errorf("an apply ended with %v, want ErrShutdown", err)
		}
	}
	if err := ended(run(KindApply)); !errors.Is(err, ErrShutdown) {
		t.Errorf("an apply started after InterruptApplies ended with %v, want ErrShutdown at once", err)
	}
	if jobs, _ := s.Running(); jobs != 0 {
		t.Errorf("Running() = %d after every job ended", jobs)
	}
}
