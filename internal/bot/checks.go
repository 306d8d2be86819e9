package bot

import (
	"context"
	"fmt"

	"github.com/kilolock/kilolock/internal/github"
)

// Check run names (docs/github.md: ≤ 1000 runs of one name per suite).
const (
	CheckConfig = "kl config" // kl.yaml is invalid
	CheckPlan   = "kl plan"   // no project touched by the push
)

// PlanCheckName is the plan check run of a project: "kl plan · NAME".
func PlanCheckName(project string) string { return "kl plan · " + project }

// ApplyCheckName is the apply check run of a project: "kl apply · NAME".
func ApplyCheckName(project string) string { return "kl apply · " + project }

// putCheckRun creates the check run (repo, run.HeadSHA, run.Name) or, when
// klbot already made one — recorded in klbot_check_runs, or found on
// GitHub with the same external id after a crash between create and
// record — updates it: a retried job never makes a second check run.
//
// A check run the job shows in progress (live.go) is completed instead:
// the same check run, by id. Either way the write holds the pull
// request's writer lock.
func (b *Bot) putCheckRun(ctx context.Context, c Client, repo github.Repo, run github.CheckRun) (github.CheckRunInfo, error) {
	if jr := jobOf(ctx); jr != nil && jr.base.Repo == repo.String() {
		if lc := jr.liveOf(run); lc != nil {
			return jr.complete(ctx, c, repo, lc, run)
		}
	}
	pr, _, _ := parseExternalID(run.ExternalID)
	var info github.CheckRunInfo
	err := b.writing(ctx, repo, pr, func(ctx context.Context) error {
		var err error
		info, err = b.putCheckRunLocked(ctx, c, repo, run)
		return err
	})
	return info, err
}

// putCheckRunLocked is putCheckRun's create-or-update, the writer lock
// held.
func (b *Bot) putCheckRunLocked(ctx context.Context, c Client, repo github.Repo, run github.CheckRun) (github.CheckRunInfo, error) {
	full := repo.String()
	id, ok, err := b.db.checkRunID(ctx, full, run.HeadSHA, run.Name)
	if err != nil {
		return github.CheckRunInfo{}, err
	}
	if !ok {
		if found, exists, err := findOwn(ctx, c, repo, run); err != nil {
			return github.CheckRunInfo{}, err
		} else if exists {
			id, ok = found, true
			if err := b.db.saveCheckRunID(ctx, full, run.HeadSHA, run.Name, id); err != nil {
				return github.CheckRunInfo{}, err
			}
		}
	}
	if ok {
		info, err := c.UpdateCheckRun(ctx, repo, id, run)
		if err != nil {
			return github.CheckRunInfo{}, fmt.Errorf("reporting %q: %w", run.Name, err)
		}
		return info, nil
	}
	info, err := c.CreateCheckRun(ctx, repo, run)
	if err != nil {
		return github.CheckRunInfo{}, fmt.Errorf("reporting %q: %w", run.Name, err)
	}
	if err := b.db.saveCheckRunID(ctx, full, run.HeadSHA, run.Name, info.ID); err != nil {
		return github.CheckRunInfo{}, err
	}
	return info, nil
}

func findOwn(ctx context.Context, c Client, repo github.Repo, run github.CheckRun) (int64, bool, error) {
	info, found, err := c.FindCheckRun(ctx, repo, run.HeadSHA, run.Name)
	if err != nil {
		return 0, false, fmt.Errorf("reporting %q: %w", run.Name, err)
	}
	if !found || info.ExternalID != run.ExternalID {
		return 0, false, nil
	}
	return info.ID, true, nil
}
