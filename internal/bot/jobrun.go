package bot

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/riverqueue/river"

	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/report"
)

// jobState is what a job keeps across its attempts, in its River
// metadata (key "klbot", river.MetadataSet: merged into the job row when
// an attempt ends — by success, error or snooze): when it started, what
// it already did once (the permission check and 👀, the join reply), the
// check runs it made, and the applies it parked while they wait for
// reservations (ADR 0041).
type jobState struct {
	Started    time.Time `json:"started"`
	Authorized bool      `json:"authorized,omitempty"`
	// Head is the pull request's head commit as the first attempt read it.
	Head string `json:"head,omitempty"`
	// Names are the projects a plan job plans, from its first checkout.
	Names []string `json:"names,omitempty"`
	// Checks are the check runs this job made, by checkKey; Done the
	// ones it completed.
	Checks map[string]int64 `json:"checks,omitempty"`
	Done   map[string]bool  `json:"done,omitempty"`
	// Shown is what each in-progress check run last said and when, so
	// that an attempt after a snooze writes only what is due (live.go).
	Shown map[string]shownState `json:"shown,omitempty"`
	// Parked are the applies waiting for reservations, by project.
	Parked map[string]parkedApply `json:"parked,omitempty"`
	// Applied are the projects this job finished (an apply job's targets
	// done before it snoozed for another one).
	Applied []string `json:"applied,omitempty"`
	// Joined are the projects this command joined to another job, and
	// Replied whether the command was answered so.
	Joined  []string `json:"joined,omitempty"`
	Replied bool     `json:"replied,omitempty"`
}

// shownState is the last in-progress write of a check run: what it said
// (liveWhat) and when.
type shownState struct {
	What string    `json:"what"`
	At   time.Time `json:"at"`
}

// parkedApply is an apply run parked by engine.ApplyInput.Park.
type parkedApply struct {
	Run   string    `json:"run"`
	Plan  string    `json:"plan"`
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
}

// metadataKey is the key of jobState in a job's River metadata.
const metadataKey = "klbot"

// readJobState decodes a job's River metadata: its jobState (a fresh one
// started now on the first attempt) and River's own snooze count.
func readJobState(metadata []byte, now time.Time) (*jobState, int, error) {
	var m struct {
		State   *jobState `json:"klbot"`
		Snoozes int       `json:"snoozes"`
	}
	if len(metadata) > 0 {
		if err := json.Unmarshal(metadata, &m); err != nil {
			return nil, 0, fmt.Errorf("decoding the job's metadata: %w", err)
		}
	}
	if m.State == nil {
		m.State = &jobState{Started: now.UTC()}
	}
	return m.State, m.Snoozes, nil
}

// jobRun is one attempt of a job: its River id, its state across
// attempts, its locks and its in-progress check runs.
type jobRun struct {
	b       *Bot
	id      int64
	kind    string
	base    JobBase
	st      *jobState
	snoozes int
	locks   *jobLocks

	mu   sync.Mutex // guards live and st's check-run maps
	live map[string]*liveCheck
	stop context.CancelFunc
	done chan struct{}
}

type jobKey struct{}

// jobOf is the attempt a context belongs to (nil outside a job).
func jobOf(ctx context.Context) *jobRun {
	jr, _ := ctx.Value(jobKey{}).(*jobRun)
	return jr
}

// newJobRun starts an attempt of job id (kind, args base, River metadata)
// and returns it with ctx carrying it; its state is set as the attempt's
// metadata update, so whatever it holds when the attempt ends is kept.
func (b *Bot) newJobRun(ctx context.Context, id int64, kind string, j JobBase, metadata []byte) (context.Context, *jobRun, error) {
	st, snoozes, err := readJobState(metadata, time.Now())
	if err != nil {
		return ctx, nil, err
	}
	if st.Checks == nil {
		st.Checks, st.Done = map[string]int64{}, map[string]bool{}
	}
	if st.Done == nil {
		st.Done = map[string]bool{}
	}
	if st.Parked == nil {
		st.Parked = map[string]parkedApply{}
	}
	if st.Shown == nil {
		st.Shown = map[string]shownState{}
	}
	jr := &jobRun{b: b, id: id, kind: kind, base: j, st: st, snoozes: snoozes, live: map[string]*liveCheck{},
		locks: &jobLocks{pool: b.db.pool, repo: j.Repo, pr: j.PR, job: id}}
	if err := river.MetadataSet(ctx, metadataKey, st); err != nil {
		// Outside a River worker (a test calling a job's work directly):
		// the state lives for this attempt only.
		logOf(ctx).Debug("job state not kept across attempts", "err", err)
	}
	return context.WithValue(ctx, jobKey{}, jr), jr, nil
}

// queuedError ends an attempt that must wait — for another job of the
// pull request, or for reservations — by snoozing the job (River's
// JobSnooze, which does not count against MaxAttempts in River 0.51).
type queuedError struct{ why string }

func (e *queuedError) Error() string { return "queued: " + e.why }

// queued returns the error that snoozes the job, saying why.
func queued(format string, args ...any) error { return &queuedError{why: fmt.Sprintf(format, args...)} }

// snoozeFor is how long a queued job sleeps before it looks again: from
// half a second, doubling with each snooze, to at most 5 s — the delay
// between the lock (or the reservations) freeing and the job going on —
// and no later than the first deadline of its parked applies, so that a
// wait that runs out is refused when it does.
func (jr *jobRun) snoozeFor() time.Duration {
	d := 500 * time.Millisecond
	for i := 0; i < jr.snoozes && d < 5*time.Second; i++ {
		d *= 2
	}
	d = min(d, 5*time.Second)
	for _, p := range jr.st.Parked {
		d = min(d, max(time.Until(p.Until), 0))
	}
	return d
}

// lock takes the lock set s by try-lock; when another job holds part of
// it the job is queued: show (if set) is told the jobs it waits for, and
// the returned error snoozes the job.
func (jr *jobRun) lock(ctx context.Context, s lockSet, show func(behind []report.LiveJob) error) error {
	bl, err := jr.tryLock(ctx, s)
	if err != nil || bl == nil {
		return err
	}
	return jr.queue(ctx, bl, show)
}

// queue is the answer to blocked bl: show (if set) is told whom the job
// waits for, and the returned error snoozes the job.
func (jr *jobRun) queue(ctx context.Context, bl *blocked, show func(behind []report.LiveJob) error) error {
	if show != nil && len(bl.behind) > 0 {
		if err := show(bl.behind); err != nil {
			return err
		}
	}
	return queued("behind %d job(s) of the pull request", len(bl.behind))
}

// end finishes the attempt: the progress ticker stops, and the locks and
// their connection are released.
func (jr *jobRun) end() {
	jr.mu.Lock()
	stop, done := jr.stop, jr.done
	jr.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	jr.locks.close()
}

// writing runs fn holding the writer lock of pull request (repo, pr) —
// the job's own when it is that pull request's (re-entrant on fn's
// context), else a connection of its own.
func (b *Bot) writing(ctx context.Context, repo github.Repo, pr int, fn func(ctx context.Context) error) error {
	if jr := jobOf(ctx); jr != nil && jr.base.Repo == repo.String() && jr.base.PR == pr {
		return jr.locks.writing(ctx, fn)
	}
	l := &jobLocks{pool: b.db.pool, repo: repo.String(), pr: pr}
	defer l.close()
	return l.writing(ctx, fn)
}

// abandon completes the in-progress check runs the job leaves behind —
// every one it made, in this attempt or an earlier one, and did not
// complete: as failures saying why when the job failed for good (err),
// else as not reached by this job.
func (jr *jobRun) abandon(ctx context.Context, c Client, repo github.Repo, err error) {
	jr.mu.Lock()
	left := map[string]int64{}
	for key, id := range jr.st.Checks {
		if !jr.st.Done[key] {
			left[key] = id
		}
	}
	jr.mu.Unlock()
	n := report.NotFinished{Reason: report.NotReached}
	conclusion := "neutral"
	if err != nil {
		n.Reason, n.Err, conclusion = report.GaveUp, err.Error(), "failure"
	}
	ctx = context.WithoutCancel(ctx)
	for key, id := range left {
		sha, name, _ := strings.Cut(key, " ")
		n.Check = name
		run := github.CheckRun{Name: name, HeadSHA: sha, Conclusion: conclusion, Title: n.Title(), Summary: noticeMarkdown(n, report.CheckRunSummaryLimit)}
		werr := jr.b.writing(ctx, repo, jr.base.PR, func(ctx context.Context) error {
			_, err := c.UpdateCheckRun(ctx, repo, id, run)
			return err
		})
		if werr != nil {
			logOf(ctx).Warn("completing a check run the job left in progress", "check", name, "err", werr)
			continue
		}
		jr.mu.Lock()
		jr.st.Done[key] = true
		jr.mu.Unlock()
	}
}
