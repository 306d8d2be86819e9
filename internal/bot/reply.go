package bot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/report"
)

// acknowledge reacts 👀 to the command comment (a failure is logged, not
// fatal: the reply says the rest), except a refused installation token
// (github.ErrInstallationRefused): returned, since nothing else the job
// does can succeed.
func (b *Bot) acknowledge(ctx context.Context, c Client, repo github.Repo, commentID int64) error {
	if commentID == 0 {
		return nil
	}
	err := c.AddReaction(ctx, repo, commentID, "eyes")
	if errors.Is(err, github.ErrInstallationRefused) {
		return err // final: the job is cancelled, and says why once
	}
	if err != nil {
		logOf(ctx).Warn("reacting to the command comment", "err", err)
	}
	return nil
}

// reply posts (or, on a retry, edits) the answer to the command comment
// j.CommentID: a comment of its own, sticky on key "reply-COMMENT".
func (b *Bot) reply(ctx context.Context, c Client, repo github.Repo, j JobBase, body string) error {
	key := fmt.Sprintf("reply-%d", j.CommentID)
	if j.CommentID == 0 {
		key = "reply-" + j.Delivery
	}
	head := ""
	if j.Actor != "" {
		head = "@" + j.Actor + " "
	}
	body = report.Truncate(head+"\n\n"+body, report.CommentLimit-200)
	_, err := c.UpsertStickyComment(ctx, repo, j.PR, key, body)
	return err
}

// mayWrite checks that the commenter has write permission (DESIGN.md apply
// step 1: only writers plan and apply); otherwise it replies with the rule.
func (b *Bot) mayWrite(ctx context.Context, c Client, repo github.Repo, a PlanArgs) (bool, error) {
	perm, err := c.GetPermission(ctx, repo, a.Actor)
	if err != nil {
		return false, err
	}
	if perm.AtLeast(github.PermissionWrite) {
		return true, nil
	}
	return false, b.replyNotice(ctx, c, repo, a.JobBase, report.PlanNotAllowed{Actor: a.Actor, Repo: a.Repo, Permission: string(perm)})
}

// replyNotice replies with one of the bot's notices (reply).
func (b *Bot) replyNotice(ctx context.Context, c Client, repo github.Repo, j JobBase, n report.BotNotice) error {
	return b.reply(ctx, c, repo, j, noticeMarkdown(n, 0))
}

// noticeMarkdown renders a notice of the bot's (report.Notice), cut to
// limit bytes by report.Truncate when limit > 0.
func noticeMarkdown(n report.BotNotice, limit int) string {
	var md strings.Builder
	report.Notice(&md, n, report.Options{Format: report.Markdown}) //nolint:errcheck // a strings.Builder does not fail
	if limit > 0 {
		return report.Truncate(md.String(), limit)
	}
	return md.String()
}

// answer is the reply job: "/kl why", "/kl history", "/kl recover", "/kl
// unfence", "/kl help" and commands that do not parse (the help text with
// what was wrong).
func (b *Bot) answer(ctx context.Context, a ReplyArgs) error {
	c, repo, err := b.client(a.JobBase)
	if err != nil {
		return err
	}
	if err := b.acknowledge(ctx, c, repo, a.CommentID); err != nil {
		return err
	}
	var body string
	switch a.Command.Name {
	case CmdWhy:
		body, err = b.why(ctx, a)
	case CmdHistory:
		body, err = b.history(ctx, a)
	case CmdRecover, CmdUnfence:
		body, err = b.fenceCommand(ctx, c, repo, a)
	default:
		body = noticeMarkdown(report.Help{Problem: a.Command.Err}, 0)
	}
	if err != nil {
		return err
	}
	return b.reply(ctx, c, repo, a.JobBase, body)
}

// why renders report.Why for the run asked for — which must belong to
// this repository — or for each project's latest run of this PR.
func (b *Bot) why(ctx context.Context, a ReplyArgs) (string, error) {
	opts := report.Options{Format: report.Markdown, RunURL: b.runURL}
	var ids []string
	if a.Command.Run != "" {
		r, err := b.eng.Run(ctx, a.Command.Run)
		if errors.Is(err, engine.ErrNotFound) || (err == nil && (r.PR == nil || r.PR.Repo != a.Repo)) {
			return noticeMarkdown(report.NotThisRepo{Run: a.Command.Run, Repo: a.Repo}, 0), nil
		}
		if err != nil {
			return "", err
		}
		ids = []string{r.ID}
	} else {
		rows, err := b.db.projects(ctx, a.Repo, a.PR)
		if err != nil {
			return "", err
		}
		for _, r := range rows {
			if id := latestRun(r); id != "" {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		return noticeMarkdown(report.NoRunYet{}, 0), nil
	}
	var out bytes.Buffer
	for _, id := range ids {
		y, err := b.eng.Why(ctx, id)
		if err != nil {
			return "", err
		}
		if err := report.Why(&out, y, opts); err != nil {
			return "", err
		}
		out.WriteString("\n")
	}
	return out.String(), nil
}

// history renders report.History of the project's state (-p), or of every
// project of this PR.
func (b *Bot) history(ctx context.Context, a ReplyArgs) (string, error) {
	rows, err := b.db.projects(ctx, a.Repo, a.PR)
	if err != nil {
		return "", err
	}
	var states []string
	for _, r := range rows {
		if a.Command.Project == "" || r.Project == a.Command.Project {
			states = append(states, r.State)
		}
	}
	if len(states) == 0 {
		return noticeMarkdown(report.NoProjectHere{Project: a.Command.Project, Projects: projectNames(rows)}, 0), nil
	}
	var out bytes.Buffer
	for _, st := range states {
		h, err := b.eng.History(ctx, st, engine.HistoryQuery{Limit: 10})
		if err != nil {
			return "", err
		}
		state, err := b.eng.State(ctx, st)
		if err != nil {
			return "", err
		}
		if err := report.History(&out, state, h, report.Options{Format: report.Markdown, RunURL: b.runURL}); err != nil {
			return "", err
		}
		out.WriteString("\n")
	}
	return out.String(), nil
}

func latestRun(r projectRow) string {
	if r.ApplyRun != "" {
		return r.ApplyRun
	}
	return r.PlanRun
}

func projectNames(rows []projectRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Project
	}
	return out
}
