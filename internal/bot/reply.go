package bot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

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
	key := replyKey(j)
	head := ""
	if j.Actor != "" {
		head = "@" + j.Actor + " "
	}
	body = report.Truncate(head+"\n\n"+body, report.CommentLimit-200)
	return b.writing(ctx, repo, j.PR, func(ctx context.Context) error {
		_, err := c.UpsertStickyComment(ctx, repo, j.PR, key, body)
		return err
	})
}

// mayWrite checks that j's actor has write permission for cmd ("/kl
// plan", "/kl apply", "Apply button", "/kl recover", "/kl unfence";
// docs/design.md apply step 1: only writers plan and apply) before anything
// else of the job; otherwise the refusal goes to the commenter only
// (refuseCommenter).
func (b *Bot) mayWrite(ctx context.Context, c Client, repo github.Repo, j JobBase, cmd string) (bool, error) {
	perm, err := c.GetPermission(ctx, repo, j.Actor)
	if err != nil {
		return false, err
	}
	if perm.AtLeast(github.PermissionWrite) {
		return true, nil
	}
	logOf(ctx).Info("refused: no write permission", "actor", j.Actor, "permission", string(perm), "command", cmd)
	body := noticeMarkdown(report.PlanNotAllowed{Actor: j.Actor, Repo: j.Repo, Permission: string(perm), Command: cmd}, 0)
	return false, b.refuseCommenter(ctx, c, repo, j, reactRefused, body)
}

// Reactions to a command klbot refuses because of the commenter
// (refuseCommenter; GitHub's reaction names).
const (
	reactRefused    = "-1"       // no write permission
	reactBadCommand = "confused" // the command does not parse
)

// refuseCommenter answers a refusal about the commenter — no write
// permission, a command that does not parse — to the commenter only
// (issue 11 §1): reaction on the comment, and body as a reply at most once
// per user and pull request within Options.RefusalReplyWindow (a reply
// counts against GitHub's content-creation limit, and anyone can
// comment). It never writes a check run or the sticky comment: a
// drive-by comment defaces no apply story and cannot block a merge.
func (b *Bot) refuseCommenter(ctx context.Context, c Client, repo github.Repo, j JobBase, reaction, body string) error {
	if j.CommentID != 0 {
		if err := c.AddReaction(ctx, repo, j.CommentID, reaction); err != nil {
			logOf(ctx).Warn("reacting to the refused comment", "err", err)
		}
	}
	ok, err := b.db.claimRefusalReply(ctx, j.Repo, j.PR, j.Actor, replyKey(j), b.opts.RefusalReplyWindow)
	if err != nil {
		return err
	}
	if !ok {
		logOf(ctx).Info("refusal answered by a reaction only: replied to this user on this pull request within the window",
			"actor", j.Actor, "window", b.opts.RefusalReplyWindow)
		return nil
	}
	return b.reply(ctx, c, repo, j, body)
}

// replyKey is the sticky key of the reply to j's comment:
// "reply-COMMENT", or "reply-DELIVERY" without a comment (a button).
func replyKey(j JobBase) string {
	if j.CommentID == 0 {
		return "reply-" + j.Delivery
	}
	return fmt.Sprintf("reply-%d", j.CommentID)
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
// what was wrong). "/kl recover" and "/kl unfence" change the pull
// request's applies: they hold its lock exclusive (ADR 0041), and while
// another job holds it the reply says what they are queued behind.
func (b *Bot) answer(ctx context.Context, jr *jobRun, a ReplyArgs) (JobResult, error) {
	c, repo, err := b.client(a.JobBase)
	if err != nil {
		return "", err
	}
	first := !jr.st.Authorized
	fence := a.Command.Name == CmdRecover || a.Command.Name == CmdUnfence
	switch {
	case a.Command.Err != "":
		return ResultRefused, b.refuseCommenter(ctx, c, repo, a.JobBase, reactBadCommand, noticeMarkdown(report.Help{Problem: a.Command.Err}, 0))
	case fence && first:
		if ok, err := b.mayWrite(ctx, c, repo, a.JobBase, "/kl "+a.Command.Name); err != nil || !ok {
			return ResultRefused, err
		}
	}
	if first {
		if err := b.acknowledge(ctx, c, repo, a.CommentID); err != nil {
			return "", err
		}
		jr.st.Authorized = true
	}
	if fence {
		if err := jr.lock(ctx, lockSet{Exclusive: true}, b.queuedReply(ctx, jr, c, repo, a)); err != nil {
			return "", err
		}
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
		return "", err
	}
	return ResultOK, b.reply(ctx, c, repo, a.JobBase, body)
}

// queuedReply is lock's show for a command answered by a reply: the reply
// says, once, what the command is queued behind (the answer replaces it).
func (b *Bot) queuedReply(ctx context.Context, jr *jobRun, c Client, repo github.Repo, a ReplyArgs) func([]report.LiveJob) error {
	return func(behind []report.LiveJob) error {
		if jr.st.Replied {
			return nil
		}
		n := report.InProgress{Check: "/kl " + a.Command.Name, Project: a.Command.Project, Phase: report.LiveQueued, Behind: behind,
			Asked:   report.LiveJob{Kind: report.JobKind(a.Command.Name), Ask: report.AskComment, Project: a.Command.Project, Actor: a.Actor},
			Started: jr.st.Started, Now: time.Now().UTC(), Reply: true}
		jr.st.Replied = true
		return b.replyNotice(ctx, c, repo, a.JobBase, n)
	}
}

// why renders report.Why for the run asked for — which must belong to
// this repository — or for each project's latest run of this PR.
func (b *Bot) why(ctx context.Context, a ReplyArgs) (string, error) {
	var ids, projects []string
	var other *engine.PullRequest // the pull request of the run asked for, when not this one
	var of []projectRow
	if a.Command.Run != "" {
		r, err := b.eng.Run(ctx, a.Command.Run)
		if errors.Is(err, engine.ErrNotFound) || (err == nil && (r.PR == nil || r.PR.Repo != a.Repo)) {
			return noticeMarkdown(report.NotThisRepo{Run: a.Command.Run, Repo: a.Repo}, 0), nil
		}
		if err != nil {
			return "", err
		}
		ids, projects = []string{r.ID}, []string{""}
		rows, err := b.db.projects(ctx, a.Repo, a.PR)
		if err != nil {
			return "", err
		}
		for _, row := range rows {
			// A run of this PR on a project's state is of that project (an
			// older plan or apply of it too): its next steps are comments here.
			if row.PlanRun == r.ID || row.ApplyRun == r.ID || (r.PlanRun != "" && row.PlanRun == r.PlanRun) ||
				(r.PR != nil && r.PR.Number == a.PR && projects[0] == "" && row.State == r.State) {
				projects[0] = row.Project
			}
		}
		if r.PR != nil && r.PR.Number != a.PR {
			// Another pull request's run: its comments are made there.
			if of, err = b.db.projects(ctx, a.Repo, r.PR.Number); err != nil {
				return "", err
			}
			for _, row := range of {
				if row.State == r.State {
					projects[0], other = row.Project, r.PR
				}
			}
		}
	} else {
		rows, err := b.db.projects(ctx, a.Repo, a.PR)
		if err != nil {
			return "", err
		}
		for _, r := range rows {
			if id := latestRun(r); id != "" {
				ids, projects = append(ids, id), append(projects, r.Project)
			}
		}
	}
	if len(ids) == 0 {
		return noticeMarkdown(report.NoRunYet{}, 0), nil
	}
	var out bytes.Buffer
	for i, id := range ids {
		y, err := b.eng.Why(ctx, id)
		if err != nil {
			return "", err
		}
		opts := report.Options{Format: report.Markdown}
		if projects[i] != "" {
			// A run of one of this PR's projects: its next steps are comments here.
			opts.Commands = commandsOf(a.Repo, a.PR, projects[i])
			opts.Commands.Of = other
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
		if err := report.History(&out, state, h, report.Options{Format: report.Markdown}); err != nil {
			return "", err
		}
		out.WriteString("\n")
	}
	return out.String(), nil
}

// commandsOf says a view is read on pull request repo#pr about project:
// its next steps are klbot's comment commands there (issue 11 §9).
func commandsOf(repo string, pr int, project string) *report.Commands {
	return &report.Commands{PR: &engine.PullRequest{Repo: repo, Number: pr}, Project: project}
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
