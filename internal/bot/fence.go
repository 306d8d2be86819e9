package bot

import (
	"bytes"
	"context"
	"errors"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/report"
)

// fenceCommand answers "/kl recover" and "/kl unfence -- REASON" (ADR
// 0035): on each project of the pull request (or -p's), the apply of this
// pull request whose holder died mid-apply — recoverable (recover) or
// holding a fence (unfence) — is recovered or unfenced by the commenter,
// who needs write permission (as for plan and apply; checked before, by
// Bot.answer with Bot.mayWrite). The reply is each
// run's story after it, or why it was refused; the project's "kl apply ·
// PROJECT" check run and the sticky comment are rewritten from the run as
// the engine left it (reportApplyRun, ADR 0042).
func (b *Bot) fenceCommand(ctx context.Context, c Client, repo github.Repo, a ReplyArgs) (string, error) {
	cmd := "/kl " + a.Command.Name
	rows, err := b.db.projects(ctx, a.Repo, a.PR)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	found := false
	for _, r := range rows {
		if a.Command.Project != "" && r.Project != a.Command.Project {
			continue
		}
		id, err := b.crashedApply(ctx, r, a)
		if err != nil {
			return "", err
		}
		if id == "" {
			continue
		}
		found = true
		if a.Command.Name == CmdRecover {
			_, err = b.eng.Recover(ctx, id)
		} else {
			_, err = b.eng.Unfence(ctx, engine.UnfenceInput{Run: id, By: a.Actor, Why: a.Command.Reason})
		}
		var re *engine.RecoverError
		switch {
		case errors.As(err, &re) || errors.Is(err, engine.ErrNotFound):
			out.WriteString(noticeMarkdown(report.FenceRefused{Command: cmd, Project: r.Project, Run: id, Problem: err.Error()}, 0))
			continue
		case err != nil:
			return "", err
		}
		// The apply check run said the run crashed: it says now what the
		// engine made of it (recovered: the version; unfenced: by whom).
		if err := b.reportApplyRun(ctx, c, repo, r, id); err != nil {
			return "", err
		}
		s, err := b.eng.RunStory(context.WithoutCancel(ctx), id)
		if err != nil {
			return "", err
		}
		opts := report.Options{Format: report.Markdown, Commands: commandsOf(a.Repo, a.PR, r.Project)}
		if err := report.RunStory(&out, s, opts); err != nil {
			return "", err
		}
		out.WriteString("\n")
	}
	if !found {
		return noticeMarkdown(report.NothingFenced{Command: cmd, Project: a.Command.Project}, 0), nil
	}
	// The sticky comment told of the crashed apply: it says what became of it now.
	if err := b.updateSticky(ctx, c, repo, a.PR); err != nil {
		return "", err
	}
	return out.String(), nil
}

// crashedApply is the newest apply run of project row r from this pull
// request that a's command acts on: one holding a fence (unfence), or one
// whose end is recoverable (recover) — "" when there is none.
func (b *Bot) crashedApply(ctx context.Context, r projectRow, a ReplyArgs) (string, error) {
	if a.Command.Name == CmdUnfence {
		st, err := b.eng.Status(ctx, r.State)
		if err != nil {
			return "", err
		}
		for _, f := range st.Fenced {
			if ofPR(f.Run, a) {
				return f.Run.ID, nil
			}
		}
		return "", nil
	}
	runs, err := b.eng.Runs(ctx, engine.RunQuery{State: r.State, Kind: engine.KindApply, Limit: 200})
	if err != nil {
		return "", err
	}
	for _, run := range runs {
		if ofPR(run, a) && run.CommittedSerial == 0 && run.End != nil && run.End.Recoverable {
			return run.ID, nil
		}
	}
	return "", nil
}

// ofPR reports whether run belongs to a's pull request.
func ofPR(run engine.Run, a ReplyArgs) bool {
	return run.PR != nil && run.PR.Repo == a.Repo && run.PR.Number == a.PR
}
