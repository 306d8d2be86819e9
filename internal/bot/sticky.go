package bot

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/klyaml"
	"github.com/kilolock/kilolock/internal/report"
)

// StickyKey is the key of the one sticky comment per pull request.
const StickyKey = "pr"

// Markers report.Truncate reads (internal/report/markdown.go): the command
// named in its "omitted" note, and the end of the summary it always keeps.
const (
	mdMore       = "<!-- kilolock:more "
	mdSummaryEnd = "<!-- kilolock:summary-end -->"
)

// updateSticky composes the sticky comment from the latest plan and apply
// of every project of the pull request (so that one project's update never
// loses another's section) and upserts it (key "pr", edited in place).
func (b *Bot) updateSticky(ctx context.Context, c Client, repo github.Repo, pr int) error {
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
}

// composeSticky renders the comment: a summary table (one line per
// project: state, status, committed version, run), then one section per
// project holding — for an apply — report.Apply of its story (what changed
// since plan by class with each version's run and PR, why the run was
// allowed, re-plan and fallback markers, the committed version with serial
// from → to, commit mode and exact or deviation), and for an open plan the
// live since-plan; then the versions committed since (live), the bot's
// note (a refusal by a bot rule, a superseded plan) and a
// "kl run show RUN" line. Cut to report.CommentLimit keeping the summary.
func (b *Bot) composeSticky(ctx context.Context, repo string, pr int, rows []projectRow) (string, error) {
	var head, body strings.Builder
	opts := report.Options{Format: report.Markdown, RunURL: b.runURL, HeadingLevel: 5}
	head.WriteString(mdMore + "the kl apply · PROJECT check runs, or kl run show RUN -->\n")
	fmt.Fprintf(&head, "### Kilolock · %s#%d\n\n| project | state | status | version | run |\n| --- | --- | --- | --- | --- |\n", repo, pr)
	for _, r := range rows {
		s, err := b.projectSection(ctx, r, opts)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&head, "| `%s` | %s | %s | %s | %s |\n", r.Project, r.State, s.status, s.version, s.run)
		fmt.Fprintf(&body, "\n#### %s `%s` on %s\n\n%s", s.icon, r.Project, r.State, s.text)
	}
	head.WriteString("\n" + mdSummaryEnd + "\n")
	return report.Truncate(head.String()+body.String(), report.CommentLimit-200), nil
}

type section struct {
	icon, status, version, run, text string
}

// projectSection renders one project of the sticky comment: its latest
// apply (applySection) or plan (planSection), the bot's note, and the
// command that shows its latest run.
func (b *Bot) projectSection(ctx context.Context, r projectRow, opts report.Options) (section, error) {
	s := section{icon: "📝", status: "no plan", version: "—", run: "—"}
	var t strings.Builder
	id := latestRun(r)
	if id != "" {
		s.run = b.runLink(id)
	}
	var err error
	switch {
	case r.ApplyRun != "":
		err = b.applySection(ctx, r, opts, &s, &t)
	case r.PlanRun != "":
		err = b.planSection(ctx, r, opts, &s, &t)
	}
	if err != nil {
		return s, err
	}
	if r.Note.Text != "" {
		if r.Note.Kind == noteRefused {
			s.icon = "⛔"
			if id == "" || r.ApplyRun == "" {
				s.status = "⛔ refused"
			}
		}
		t.WriteString("\n> " + r.Note.Text + "\n")
	}
	if id != "" {
		fmt.Fprintf(&t, "\n`kl run show %s`", id)
		if u := b.runURL(id); u != "" {
			fmt.Fprintf(&t, " · [details](%s)", u)
		}
		t.WriteString("\n")
	}
	s.text = t.String()
	return s, nil
}

// applySection is a project's section after an apply: its status and
// committed version for the summary table, report.Apply of its story, and
// the versions committed since (live).
func (b *Bot) applySection(ctx context.Context, r projectRow, opts report.Options, s *section, t *strings.Builder) error {
	story, err := b.eng.RunStory(ctx, r.ApplyRun)
	if err != nil {
		return err
	}
	s.status, s.icon = applyStatus(story.Run.Status)
	if v := story.Version; v != nil {
		p := v.Provenance
		match := "exact"
		if !p.Exact {
			match = "deviation"
		}
		s.version = fmt.Sprintf("serial %d → %d (%s, %s)", p.SourceSerial, p.CommittedSerial, p.Mode, match)
	}
	var md bytes.Buffer
	if err := report.Apply(&md, story, opts); err != nil {
		return err
	}
	t.WriteString(withoutMarkers(md.String()))
	if story.Version == nil {
		return nil
	}
	later, err := b.since(ctx, r.PlanRun, story.Version.Serial)
	if err != nil {
		return err
	}
	t.WriteString(later)
	return nil
}

// planSection is a project's section with a plan and no apply: a plan that
// is no longer open says how it ended (closedPlan); an open one says how
// to apply it and what was committed since (live since-plan).
func (b *Bot) planSection(ctx context.Context, r projectRow, opts report.Options, s *section, t *strings.Builder) error {
	run, err := b.eng.Run(ctx, r.PlanRun)
	if err != nil {
		return err
	}
	s.status = string(run.Status)
	if run.Status != engine.StatusPlanned {
		s.icon = "⏹️"
		t.WriteString(b.closedPlan(r, run))
		return nil
	}
	env := run.Envelope
	fmt.Fprintf(t, "Plan %s at `%s` against serial %d: %s. ", b.runLink(run.ID), short(r.HeadSHA),
		env.SourceSerial, planTitle(&engine.PlanOutcome{Run: run}))
	if r.Config.ApplyTrigger == klyaml.TriggerMerge {
		t.WriteString("It applies when the pull request is merged.\n")
	} else {
		fmt.Fprintf(t, "Apply it with `/kl apply -p %s` or the **Apply** button of `%s`.\n", r.Project, PlanCheckName(r.Project))
	}
	sp, err := b.eng.SincePlan(ctx, run.ID)
	if err != nil {
		return err
	}
	if len(sp.Entries) == 0 {
		fmt.Fprintf(t, "\nNo version committed since this plan (serial %d is still the head).\n", env.SourceSerial)
		return nil
	}
	var md bytes.Buffer
	if err := report.SincePlan(&md, sp, run, opts); err != nil {
		return err
	}
	t.WriteString("\n" + withoutMarkers(md.String()))
	return nil
}

// closedPlan is the line of a plan that is no longer open: its status and
// how it ended (report.EndText).
func (b *Bot) closedPlan(r projectRow, run engine.Run) string {
	line := fmt.Sprintf("Plan %s at `%s` is **%s**", b.runLink(run.ID), short(r.HeadSHA), run.Status)
	if e := report.EndText(run.ID, run.End); e != "" {
		line += ": " + e
	}
	return line + ".\n"
}

// since lists, live, the versions committed after serial, classified
// against the plan's footprint (ADR D3, D8: shown by class, never one
// warning).
func (b *Bot) since(ctx context.Context, planRun string, serial int64) (string, error) {
	sp, err := b.eng.SincePlan(ctx, planRun)
	if err != nil {
		return "", err
	}
	var lines []string
	for _, e := range sp.Entries {
		if e.Serial <= serial || e.OwnApply {
			continue
		}
		who := "run " + b.runLink(e.Run)
		if e.PR != nil {
			who += " (" + prLink(e.PR) + ")"
		}
		l := fmt.Sprintf("- `%s` version %d by %s: %s", classSymbol(e.Class), e.Serial, who, e.Class.Label())
		if len(e.Addresses) > 0 {
			l += " — " + codeList(e.Addresses.Strings())
		}
		lines = append(lines, l)
	}
	if len(lines) == 0 {
		return "", nil
	}
	return fmt.Sprintf("\n###### Committed since this apply (live, serial %d → head %d)\n\n%s\n", serial, sp.HeadSerial, strings.Join(lines, "\n")), nil
}

func classSymbol(c engine.SincePlanClass) string {
	switch c {
	case engine.ClassIndependent:
		return "="
	case engine.ClassReadChanged:
		return "~"
	}
	return "!"
}

func prLink(p *engine.PullRequest) string {
	if p.URL != "" {
		return fmt.Sprintf("[%s](%s)", p.String(), p.URL)
	}
	return p.String()
}

func (b *Bot) runLink(id string) string {
	if u := b.runURL(id); u != "" {
		return fmt.Sprintf("[`%s`](%s)", id, u)
	}
	return "`" + id + "`"
}

func applyStatus(s engine.RunStatus) (status, icon string) {
	switch s {
	case engine.StatusApplied:
		return "✅ applied", "✅"
	case engine.StatusRefused:
		return "⛔ refused", "⛔"
	case engine.StatusWaiting, engine.StatusApplying:
		return "⏳ " + string(s), "⏳"
	}
	return "❌ " + string(s), "❌"
}

// withoutMarkers drops a report's layout markers (report.Truncate's): a
// report nested under a project's heading (rendered at HeadingLevel 5)
// leaves them to the comment, which has its own.
func withoutMarkers(md string) string {
	var out strings.Builder
	for _, l := range strings.SplitAfter(md, "\n") {
		if !strings.HasPrefix(l, "<!-- kilolock:") {
			out.WriteString(l)
		}
	}
	return out.String()
}

// refresh is the refresh job (RefreshArgs): re-render the sticky comment.
func (b *Bot) refresh(ctx context.Context, a RefreshArgs) (JobResult, error) {
	c, repo, err := b.client(a.JobBase)
	if err != nil {
		return "", err
	}
	return ResultOK, b.updateSticky(ctx, c, repo, a.PR)
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
