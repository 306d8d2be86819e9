package bot

import (
	"context"
	"errors"
	"slices"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/klyaml"
	"github.com/kilolock/kilolock/internal/report"
)

// CheckAggregate is the aggregate check run of a pull request's head and
// of a merge group's head (ADR 0058): GitHub asks the same check names of
// both, so "kl" is the one to require.
const CheckAggregate = "kl"

// reportAggregate puts the "kl" check run on head of pull request pr:
// success when every project head touches has an applicable or applied
// plan, or none is touched; failure otherwise (report.PRCheck). Its
// external id is the pull request's, project "": a re-run plans every
// touched project again, as for "kl plan". planned says a plan job of
// head just saved its rows; otherwise (an apply, a refresh) a head no
// row is of is left alone: it was not planned (yet), and its plan job
// reports it.
func (b *Bot) reportAggregate(ctx context.Context, c Client, repo github.Repo, pr int, head string, planned bool) error {
	rows, err := b.db.projects(ctx, repo.String(), pr)
	if err != nil {
		return err
	}
	if !planned && !slices.ContainsFunc(rows, func(r projectRow) bool { return r.Open && r.HeadSHA == head }) {
		return nil
	}
	chk := report.PRCheck{HeadSHA: head}
	for _, r := range rows {
		if r.HeadSHA != head || !r.Open {
			continue
		}
		p, ok, err := b.aggregateProject(ctx, r)
		if err != nil {
			return err
		}
		if ok {
			chk.Projects = append(chk.Projects, p)
		}
	}
	return b.putAggregate(ctx, c, repo, pr, chk)
}

// putAggregate writes chk as the "kl" check run of pull request pr.
func (b *Bot) putAggregate(ctx context.Context, c Client, repo github.Repo, pr int, chk report.PRCheck) error {
	conclusion := "success"
	if !chk.OK() {
		conclusion = "failure"
	}
	_, err := b.putCheckRun(ctx, c, repo, github.CheckRun{Name: CheckAggregate, HeadSHA: chk.HeadSHA, ExternalID: externalID(pr, ""),
		Conclusion: conclusion, Title: chk.Title(), Summary: noticeMarkdown(chk, report.CheckRunSummaryLimit)})
	return err
}

// aggregateProject is where project row r's plan stands; ok is false for
// a project the head no longer touches (its plan superseded as untouched
// or removed by the push).
func (b *Bot) aggregateProject(ctx context.Context, r projectRow) (report.PRCheckProject, bool, error) {
	p := report.PRCheckProject{Project: r.Project, State: r.State, PlanRun: r.PlanRun, ApplyRun: r.ApplyRun,
		OnMerge: r.Config.ApplyTrigger == klyaml.TriggerMerge}
	if r.PlanRun == "" {
		p.Verdict, p.Note = report.VerdictNoPlan, r.Note.Text
		return p, true, nil
	}
	if r.ApplyRun != "" {
		ap, err := b.eng.Run(ctx, r.ApplyRun)
		if err != nil && !errors.Is(err, engine.ErrNotFound) {
			return p, false, err
		}
		if err == nil && ap.Status == engine.StatusApplied {
			p.Verdict, p.Serial = report.VerdictApplied, ap.CommittedSerial
			return p, true, nil
		}
	}
	run, err := b.eng.Run(ctx, r.PlanRun)
	switch {
	case errors.Is(err, engine.ErrNotFound):
		p.Verdict = report.VerdictNoPlan
		return p, true, nil
	case err != nil:
		return p, false, err
	case run.Status == engine.StatusSuperseded && run.End != nil &&
		(run.End.Superseded == engine.SupersededByUntouched || run.End.Superseded == engine.SupersededByRemoved):
		return p, false, nil
	case run.Status == engine.StatusApplied:
		p.Verdict, p.ApplyRun = report.VerdictApplied, run.ApplyRun
		return p, true, nil
	case run.Status != engine.StatusPlanned:
		p.Verdict, p.Status = report.VerdictNotOpen, run.Status
		if r.ApplyRun != "" {
			p.Verdict = report.VerdictApplyFailed
		}
		return p, true, nil
	}
	stale, fenced, err := b.staleOrFenced(ctx, run)
	switch {
	case err != nil:
		return p, false, err
	case stale != nil:
		p.Verdict, p.Serial, p.By = report.VerdictStale, stale.Serial, stale.PR
	case len(fenced) > 0:
		p.Verdict, p.FencedBy = report.VerdictFenced, fenced
	default:
		p.Verdict = report.VerdictApplicable
	}
	return p, true, nil
}
