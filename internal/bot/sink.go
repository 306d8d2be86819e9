package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"

	gh "github.com/google/go-github/v62/github"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/kilolock/kilolock/internal/klyaml"
	"github.com/kilolock/kilolock/internal/webhook"
)

var _ webhook.Sink = (*Bot)(nil)

// ApplyActionID is the identifier of the Apply button on a plan check run
// (≤ 20 characters, docs/github.md "Check runs").
const ApplyActionID = "kl-apply"

// Accept records a verified delivery and enqueues its jobs, in ONE
// transaction on the shared pool (webhook.Sink):
//
//  1. INSERT the delivery id into klbot_deliveries; an id already there is a
//     redelivery → Duplicate, nothing enqueued (docs/github.md: de-duplicate
//     on X-GitHub-Delivery).
//  2. Route: pull_request opened/synchronize/reopened/ready_for_review →
//     a plan job, unique on (repo, PR, head SHA, key) with key KeyPush, or
//     KeyDraft when the payload's pull_request.draft is true (GitHub sends
//     synchronize and ready_for_review for one push: the second is
//     Duplicate; but the ready_for_review of a former draft is a new job,
//     so a draft skipped by plan_drafts: false is planned once it is
//     ready — PlanArgs); closed →
//     an apply job of trigger merge (or close); issue_comment created with a
//     "/kl" line → a plan, apply or reply job; check_run requested_action
//     "kl-apply" → an apply job, rerequested → a plan job, both mapped to
//     their PR and project through external_id (forks give empty
//     pull_requests); merge_group checks_requested or destroyed, and a
//     re-run of a merge group's "kl" check run (external id "klq:BASE")
//     → a queue job (ADR 0058); installation created/deleted →
//     recorded/forgotten in klbot_installations, no job.
//  3. Commit: only then is the delivery durable (the handler answers 2xx).
//
// Anything else is recorded and Ignored.
func (b *Bot) Accept(ctx context.Context, d webhook.Delivery) (webhook.Outcome, error) {
	if b.river == nil {
		return 0, errors.New("accepting delivery: the bot has no River client")
	}
	out, err := b.accept(ctx, d)
	if err != nil {
		return 0, err
	}
	b.metrics.delivery(d.Event, out.String())
	return out, nil
}

func (b *Bot) accept(ctx context.Context, d webhook.Delivery) (webhook.Outcome, error) {
	tx, err := b.db.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("accepting delivery %s: %w", d.ID, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	tag, err := tx.Exec(ctx, `INSERT INTO klbot_deliveries (id, event, action, installation, repo, received_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING`,
		d.ID, d.Event, d.Action, d.Installation, d.Repo, d.Received.UTC().UnixNano())
	if err != nil {
		return 0, fmt.Errorf("recording delivery %s: %w", d.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return webhook.Duplicate, nil
	}
	jobs, err := b.route(ctx, tx, d)
	if err != nil {
		return 0, err
	}
	out := webhook.Ignored
	if len(jobs) > 0 {
		out = webhook.Duplicate
	}
	for _, j := range jobs {
		res, err := b.river.InsertTx(ctx, tx, j, nil)
		if err != nil {
			return 0, fmt.Errorf("enqueuing %s job for delivery %s: %w", j.Kind(), d.ID, err)
		}
		if !res.UniqueSkippedAsDuplicate {
			out = webhook.Enqueued
		}
	}
	if d.Event == "installation" {
		out = webhook.Enqueued // recorded in this transaction
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("committing delivery %s: %w", d.ID, err)
	}
	return out, nil
}

// route decides the jobs of a delivery (and records installations in tx).
func (b *Bot) route(ctx context.Context, tx pgx.Tx, d webhook.Delivery) ([]river.JobArgs, error) {
	base := JobBase{Delivery: d.ID, Event: d.Event, Installation: d.Installation, Repo: d.Repo, PR: d.PR}
	switch e := d.Payload.(type) {
	case *gh.PullRequestEvent:
		base.Actor = e.GetSender().GetLogin()
		switch d.Action {
		case "opened", "synchronize", "reopened", "ready_for_review":
			key := KeyPush
			if e.GetPullRequest().GetDraft() {
				key = KeyDraft
			}
			return []river.JobArgs{PlanArgs{JobBase: base, HeadSHA: d.HeadSHA, Key: key, Trigger: TriggerPush}}, nil
		case "closed":
			trig := TriggerClose
			if e.GetPullRequest().GetMerged() {
				trig = TriggerMerge
				if by := e.GetPullRequest().GetMergedBy().GetLogin(); by != "" {
					base.Actor = by
				}
			}
			return []river.JobArgs{ApplyArgs{JobBase: base, Trigger: trig, HeadSHA: d.HeadSHA}}, nil
		}
	case *gh.IssueCommentEvent:
		if d.Action != "created" || e.GetComment().GetUser().GetType() == "Bot" {
			return nil, nil
		}
		cmd, ok := ParseCommand(e.GetComment().GetBody())
		if !ok {
			return nil, nil
		}
		base.Actor, base.CommentID = e.GetComment().GetUser().GetLogin(), e.GetComment().GetID()
		switch cmd.Name {
		case CmdPlan:
			return []river.JobArgs{PlanArgs{JobBase: base, Key: d.ID, Trigger: TriggerComment, Project: cmd.Project, Options: cmd.Options}}, nil
		case CmdApply:
			return []river.JobArgs{ApplyArgs{JobBase: base, Trigger: TriggerComment, Project: cmd.Project}}, nil
		}
		return []river.JobArgs{ReplyArgs{JobBase: base, Command: cmd}}, nil
	case *gh.MergeGroupEvent:
		g := e.GetMergeGroup()
		base.Actor = e.GetSender().GetLogin()
		return []river.JobArgs{QueueArgs{JobBase: base, Action: d.Action, Reason: d.Reason, HeadSHA: d.HeadSHA,
			HeadRef: g.GetHeadRef(), BaseSHA: g.GetBaseSHA(), BaseRef: g.GetBaseRef()}}, nil
	case *gh.CheckRunEvent:
		if baseRef, ok := parseQueueExternalID(e.GetCheckRun().GetExternalID()); ok {
			if d.Action != "rerequested" {
				return nil, nil
			}
			base.PR, base.Actor = 0, e.GetSender().GetLogin()
			return []river.JobArgs{QueueArgs{JobBase: base, Action: QueueChecksRequested, HeadSHA: d.HeadSHA, BaseRef: "refs/heads/" + baseRef}}, nil
		}
		pr, project, ok := parseExternalID(e.GetCheckRun().GetExternalID())
		if !ok {
			return nil, nil // not one of ours
		}
		base.PR, base.Actor = pr, e.GetSender().GetLogin()
		switch d.Action {
		case "requested_action":
			if e.GetRequestedAction().Identifier != ApplyActionID {
				return nil, nil
			}
			return []river.JobArgs{ApplyArgs{JobBase: base, Trigger: TriggerButton, Project: project, HeadSHA: d.HeadSHA}}, nil
		case "rerequested": // project "": the "kl plan" or "kl config" run, every touched project
			return []river.JobArgs{PlanArgs{JobBase: base, HeadSHA: d.HeadSHA, Key: d.ID, Trigger: TriggerRerequest, Project: project}}, nil
		}
	case *gh.InstallationEvent:
		switch d.Action {
		case "created":
			return nil, b.db.recordInstallation(ctx, tx, d.Installation, e.GetInstallation().GetAccount().GetLogin())
		case "deleted":
			return nil, b.db.forgetInstallation(ctx, tx, d.Installation)
		}
	}
	return nil, nil
}

// externalID maps a check run back to its pull request and project
// ("kl:PR:PROJECT"; PROJECT empty for the "kl plan" and "kl config" runs):
// GitHub gives empty check_run.pull_requests for forks (docs/github.md).
func externalID(pr int, project string) string {
	return fmt.Sprintf("kl:%d:%s", pr, project)
}

func parseExternalID(s string) (pr int, project string, ok bool) {
	rest, found := strings.CutPrefix(s, "kl:")
	if !found {
		return 0, "", false
	}
	num, project, found := strings.Cut(rest, ":")
	if !found {
		return 0, "", false
	}
	if _, err := fmt.Sscanf(num, "%d", &pr); err != nil || pr <= 0 {
		return 0, "", false
	}
	if project != "" && !klyaml.ValidProjectName(project) {
		return 0, "", false
	}
	return pr, project, true
}
