package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/report"
)

// StickyKey is the key of the one sticky comment per pull request.
const StickyKey = "pr"

// updateSticky composes the sticky comment from the latest plan and apply
// of every project of the pull request (so that one project's update never
// loses another's section) and upserts it (key "pr", edited in place).
//
// It holds the pull request's writer lock from reading the rows to the
// upsert, so that of two jobs of one pull request the later write is
// composed from the later rows (ADR 0041).
func (b *Bot) updateSticky(ctx context.Context, c Client, repo github.Repo, pr int) error {
	return b.writing(ctx, repo, pr, func(ctx context.Context) error {
		rows, err := b.db.projects(ctx, repo.String(), pr)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		body, err := b.composeSticky(ctx, repo.String(), pr, rows)
		if err != nil {
			return err
		}
		_, err = c.UpsertStickyComment(context.WithoutCancel(ctx), repo, pr, StickyKey, body)
		return err
	})
}

// composeSticky reads, for every project of the pull request, its latest
// apply's story (and, when it committed a version, its plan's live
// since-plan) or its latest plan (and, while open, its live since-plan
// and its diff), and renders the comment with report.RenderSticky: a
// summary table, one section per project with the bot's note, fitted to
// report.CommentLimit (less room for the sticky marker) keeping the
// summary, the projects' diffs sharing the room left (ADR 0044).
func (b *Bot) composeSticky(ctx context.Context, repo string, pr int, rows []projectRow) (string, error) {
	s := report.Sticky{Repo: repo, PR: pr}
	for _, r := range rows {
		p, err := b.stickyProject(ctx, r)
		if err != nil {
			return "", err
		}
		s.Projects = append(s.Projects, p)
	}
	footer := b.timelineFooter(rows)
	var md strings.Builder
	opts := report.Options{Format: report.Markdown, MaxMarkdown: report.CommentLimit - 200 - len(footer)}
	if err := report.RenderSticky(&md, s, opts); err != nil {
		return "", err
	}
	return md.String() + footer, nil
}

// timelineFooter links the timeline of each state of rows, once each in
// their order ("" without Options.TimelineLink): the picture of who waited
// on whom and which versions made which plans stale (ADR 0064).
func (b *Bot) timelineFooter(rows []projectRow) string {
	if b.opts.TimelineLink == nil {
		return ""
	}
	var links []string
	seen := map[string]bool{}
	for _, r := range rows {
		if r.State == "" || seen[r.State] {
			continue
		}
		seen[r.State] = true
		links = append(links, "[`"+r.State+"`]("+b.opts.TimelineLink(r.State)+")")
	}
	if len(links) == 0 {
		return ""
	}
	return "\n<sub>Timeline: " + strings.Join(links, " · ") + "</sub>\n"
}

// stickyProject is what the sticky comment shows of one project, read
// from the engine: its apply run's story, else its plan run (and, while
// open, its diff), and the live since-plan the section lists (an open
// plan's, or that of an apply that committed a version).
func (b *Bot) stickyProject(ctx context.Context, r projectRow) (report.StickyProject, error) {
	p := report.StickyProject{Applying: applying(r.Project, r.Config), State: r.State, HeadSHA: r.HeadSHA,
		Note: r.Note.Text, Refused: r.Note.Kind == noteRefused}
	var live string // the plan whose since-plan is shown
	switch {
	case r.ApplyRun != "":
		story, err := b.eng.RunStory(ctx, r.ApplyRun)
		if err != nil {
			return p, err
		}
		p.Apply = story
		if story.Version != nil {
			live = r.PlanRun
		}
	case r.PlanRun != "":
		run, err := b.eng.Run(ctx, r.PlanRun)
		if err != nil {
			return p, err
		}
		p.Plan = &run
		if run.Status == engine.StatusPlanned {
			live = run.ID
			// The open plan's diff (ADR 0044); a plan an older kl made
			// has none.
			if p.Diff, err = b.eng.PlanDiff(ctx, run.ID); err != nil && !errors.Is(err, engine.ErrNotFound) {
				return p, err
			}
		}
	}
	if live == "" {
		return p, nil
	}
	sp, err := b.eng.SincePlan(ctx, live)
	p.SincePlan = sp
	return p, err
}

// refresh is the refresh job (RefreshArgs): remove the Apply buttons of
// plans the commit made stale (retireButtons), re-render the sticky comment.
func (b *Bot) refresh(ctx context.Context, _ *jobRun, a RefreshArgs) (JobResult, error) {
	c, repo, err := b.client(a.JobBase)
	if err != nil {
		return "", err
	}
	rows, err := b.db.projects(ctx, a.Repo, a.PR)
	if err != nil {
		return "", err
	}
	if err := b.retireButtons(ctx, c, repo, rows); err != nil {
		return "", err
	}
	if head := openHead(rows); head != "" { // a stale plan fails the "kl" check run
		if err := b.reportAggregate(ctx, c, repo, a.PR, head, false); err != nil {
			return "", err
		}
	}
	return ResultOK, b.updateSticky(ctx, c, repo, a.PR)
}

// openHead is the head commit the latest saved open row of a pull
// request is of ("" when none is open): the head its last plan job planned.
func openHead(rows []projectRow) string {
	var head string
	var at time.Time
	for _, r := range rows {
		if r.Open && r.UpdatedAt.After(at) {
			head, at = r.HeadSHA, r.UpdatedAt
		}
	}
	return head
}

// refreshOthers enqueues a refresh of the sticky comment of every other
// open pull request with a project on r.State, after version serial was
// committed: their since-plan changed (ADR D3: make the intervening change
// visible before anyone applies).
func (b *Bot) refreshOthers(ctx context.Context, r projectRow, serial int64) error {
	others, err := b.db.openPRsOnState(ctx, r.State, r.Repo, r.PR)
	if err != nil {
		return err
	}
	for _, o := range others {
		args := RefreshArgs{JobBase: JobBase{Delivery: "refresh", Event: "commit", Installation: o.Installation, Repo: o.Repo, PR: o.PR},
			State: r.State, Serial: serial}
		if _, err := b.river.Insert(context.WithoutCancel(ctx), args, nil); err != nil {
			return fmt.Errorf("enqueuing refresh of %s#%d: %w", o.Repo, o.PR, err)
		}
	}
	return nil
}
