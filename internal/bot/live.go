package bot

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/report"
)

// A job's check runs are live (issue 11 §4, ADR 0041): each is created
// in_progress when the job starts on its project — queued, waiting on
// reservations, planning, applying —, updated when that phase or what it
// waits on changes and otherwise at most every ProgressEvery (GitHub's
// rate limits: each update is a write), and completed at the end with the
// run's story: the same check run, by id. GitHub does not let a completed
// check run go back to in progress, so a job that reports on a name
// already completed on that commit (a second apply of one head, a re-run)
// makes a new check run of that name; GitHub shows the newest.

// ProgressEvery is how often at most an in-progress check run is updated
// while its phase stays the same (to show how long it has run).
const ProgressEvery = 30 * time.Second

// liveCheck is one in-progress check run of a job.
type liveCheck struct {
	key    string          // checkKey(sha, name)
	run    github.CheckRun // name, head SHA, external id
	id     int64           // 0 until created
	notice report.InProgress
	shown  string    // what the last write said (phase and what it waits on)
	last   time.Time // when it was last written
}

// checkKey is the key of a check run in jobState.Checks.
func checkKey(sha, name string) string { return sha + " " + name }

// liveFor returns the job's live check run named name on sha (external
// id ext), asked by the job described by asked, making its record if it
// is new to this attempt (its id from the job state if an earlier attempt
// created it).
func (jr *jobRun) liveFor(sha, name, ext, project string, asked report.LiveJob) *liveCheck {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	key := checkKey(sha, name)
	if lc, ok := jr.live[key]; ok {
		return lc
	}
	lc := &liveCheck{key: key, run: github.CheckRun{Name: name, HeadSHA: sha, ExternalID: ext}, id: jr.st.Checks[key],
		notice: report.InProgress{Check: name, Project: project, Asked: asked, Started: jr.st.Started},
		shown:  jr.st.Shown[key].What, last: jr.st.Shown[key].At}
	jr.live[key] = lc
	return lc
}

// liveOf is the job's live check run for a final report of run, if the
// job has one that is not completed yet — made by this attempt or an
// earlier one (the job state's Checks).
func (jr *jobRun) liveOf(run github.CheckRun) *liveCheck {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	key := checkKey(run.HeadSHA, run.Name)
	if jr.st.Done[key] {
		return nil
	}
	if lc := jr.live[key]; lc != nil {
		return lc
	}
	id, ok := jr.st.Checks[key]
	if !ok {
		return nil
	}
	lc := &liveCheck{key: key, run: github.CheckRun{Name: run.Name, HeadSHA: run.HeadSHA, ExternalID: run.ExternalID}, id: id,
		shown: jr.st.Shown[key].What, last: jr.st.Shown[key].At}
	jr.live[key] = lc
	return lc
}

// show writes lc's in-progress state after change (if set) changed its
// notice: always when it has no check run yet or its phase or what it
// waits on changed, else when ProgressEvery passed since the last write.
func (jr *jobRun) show(ctx context.Context, c Client, repo github.Repo, lc *liveCheck, change func(*report.InProgress)) error {
	jr.mu.Lock()
	if change != nil {
		change(&lc.notice)
	}
	n := lc.notice
	n.Now = time.Now().UTC()
	what := liveWhat(n)
	due := lc.id == 0 || what != lc.shown || n.Now.Sub(lc.last) >= ProgressEvery
	done := jr.st.Done[lc.key]
	jr.mu.Unlock()
	if !due || done {
		return nil
	}
	return jr.b.writing(ctx, repo, jr.base.PR, func(ctx context.Context) error {
		run := lc.run
		run.Status, run.StartedAt = "in_progress", n.Started
		run.Title, run.Summary = n.Title(), noticeMarkdown(n, report.CheckRunSummaryLimit)
		if err := jr.writeLive(ctx, c, repo, lc, run); err != nil {
			return err
		}
		jr.mu.Lock()
		lc.shown, lc.last = what, n.Now
		jr.st.Shown[lc.key] = shownState{What: what, At: n.Now}
		jr.mu.Unlock()
		return nil
	})
}

// liveWhat is what an in-progress write says that makes the next one due
// at once when it changes: the phase and what it waits on (not the
// elapsed time, Terraform's progress or the run's id: the ticker shows
// those).
func liveWhat(n report.InProgress) string {
	s := string(n.Phase)
	for _, j := range n.Behind {
		s += "|" + j.Started.String() + j.Run + string(j.Kind) + j.Project
	}
	for _, b := range n.WaitingOn {
		s += "|" + b.Run
	}
	return s
}

// writeLive creates lc's check run (in progress) or updates it, and
// records its id as the check run of (sha, name) and as this job's. A
// new plan check run takes the place of an older one on the same commit:
// that one's Apply button is removed (its plan is being replaced).
func (jr *jobRun) writeLive(ctx context.Context, c Client, repo github.Repo, lc *liveCheck, run github.CheckRun) error {
	jr.mu.Lock()
	id := lc.id
	jr.mu.Unlock()
	if id != 0 {
		if _, err := c.UpdateCheckRun(ctx, repo, id, run); err != nil {
			return fmt.Errorf("reporting %q: %w", run.Name, err)
		}
		return nil
	}
	old, hadOld, err := jr.b.db.checkRunID(ctx, repo.String(), run.HeadSHA, run.Name)
	if err != nil {
		return err
	}
	info, err := c.CreateCheckRun(ctx, repo, run)
	if err != nil {
		return fmt.Errorf("reporting %q: %w", run.Name, err)
	}
	jr.mu.Lock()
	lc.id = info.ID
	jr.st.Checks[lc.key] = info.ID
	jr.mu.Unlock()
	if err := jr.b.db.saveCheckRunID(ctx, repo.String(), run.HeadSHA, run.Name, info.ID); err != nil {
		return err
	}
	if hadOld && old != info.ID && lc.notice.Asked.Kind == report.JobPlan {
		if err := c.RemoveCheckRunActions(context.WithoutCancel(ctx), repo, old, run.Name); err != nil {
			logOf(ctx).Warn("removing the Apply button of a plan check run being replaced", "check", run.Name, "err", err)
		}
	}
	jr.ensureTicker(ctx, c, repo)
	return nil
}

// complete writes lc's final state, run (a conclusion set): an update of
// the job's check run, or its creation if the job never showed it.
func (jr *jobRun) complete(ctx context.Context, c Client, repo github.Repo, lc *liveCheck, run github.CheckRun) (github.CheckRunInfo, error) {
	var info github.CheckRunInfo
	err := jr.b.writing(ctx, repo, jr.base.PR, func(ctx context.Context) error {
		jr.mu.Lock()
		id := lc.id
		jr.mu.Unlock()
		var err error
		if id == 0 {
			if err = jr.writeLive(ctx, c, repo, lc, run); err != nil {
				return err
			}
			info = github.CheckRunInfo{ID: lc.id, Name: run.Name, HeadSHA: run.HeadSHA}
		} else if info, err = c.UpdateCheckRun(ctx, repo, id, run); err != nil {
			return fmt.Errorf("reporting %q: %w", run.Name, err)
		}
		jr.mu.Lock()
		jr.st.Done[lc.key] = true
		jr.mu.Unlock()
		return nil
	})
	return info, err
}

// ensureTicker starts, once per attempt, the goroutine that refreshes the
// job's in-progress check runs every ProgressEvery (elapsed time,
// Terraform's progress) until the attempt ends.
func (jr *jobRun) ensureTicker(ctx context.Context, c Client, repo github.Repo) {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	if jr.stop != nil {
		return
	}
	tctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	jr.stop, jr.done = stop, make(chan struct{})
	go func() {
		defer close(jr.done)
		t := time.NewTicker(ProgressEvery)
		defer t.Stop()
		for {
			select {
			case <-tctx.Done():
				return
			case <-t.C:
			}
			for _, lc := range jr.openLive() {
				if err := jr.show(tctx, c, repo, lc, nil); err != nil && tctx.Err() == nil {
					logOf(ctx).Warn("updating an in-progress check run", "check", lc.run.Name, "err", err)
				}
			}
		}
	}()
}

// openLive lists the live check runs created and not completed.
func (jr *jobRun) openLive() []*liveCheck {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	var out []*liveCheck
	for _, lc := range jr.live {
		if lc.id != 0 && !jr.st.Done[lc.key] {
			out = append(out, lc)
		}
	}
	return out
}

// progress is an engine Progress callback updating lc's notice (the
// ticker writes it).
func (jr *jobRun) progress(lc *liveCheck) func(engine.Progress) {
	return func(p engine.Progress) {
		jr.mu.Lock()
		defer jr.mu.Unlock()
		lc.notice.Step, lc.notice.Done, lc.notice.Total = p.Phase, p.Done, p.Total
	}
}

// queuedShow is lock's show for live check runs lcs: each says the job is
// queued behind the running jobs.
func (jr *jobRun) queuedShow(ctx context.Context, c Client, repo github.Repo, lcs []*liveCheck) func([]report.LiveJob) error {
	return func(behind []report.LiveJob) error {
		for _, lc := range lcs {
			if err := jr.show(ctx, c, repo, lc, func(n *report.InProgress) {
				n.Phase, n.Behind = report.LiveQueued, slices.Clone(behind)
			}); err != nil {
				return err
			}
		}
		return nil
	}
}
