package webhook

import (
	"fmt"

	"github.com/google/go-github/v62/github"
)

// supportedActions lists the events klbot handles and, for each, the
// actions it acts on; a nil set takes every action (ping has none). Any
// other event or action is answered 202 "ignored".
var supportedActions = map[string]map[string]bool{
	// A push (opened, synchronize, reopened, ready_for_review) plans; closed
	// (merged or not) applies on merge or releases reservations.
	"pull_request": set("opened", "synchronize", "reopened", "ready_for_review", "closed"),
	// "/kl …" commands, on pull requests only.
	"issue_comment": set("created"),
	// requested_action is the Apply button; rerequested re-plans.
	"check_run": set("requested_action", "rerequested"),
	// GitHub's merge queue: checks_requested judges a merge group,
	// destroyed (merged, dequeued, invalidated) ends its check (ADR 0058).
	"merge_group":  set("checks_requested", "destroyed"),
	"installation": set("created", "deleted"),
	"ping":         nil,
}

func set(actions ...string) map[string]bool {
	m := make(map[string]bool, len(actions))
	for _, a := range actions {
		m[a] = true
	}
	return m
}

// route fills a Delivery (without ID, Event, Received) from a parsed
// payload of a supported event. note is set when klbot has nothing to do
// with it (a comment on a plain issue); missing names the first field
// routing needs that the payload lacks.
func route(payload any) (d Delivery, note, missing string) {
	d.Payload = payload
	switch e := payload.(type) {
	case *github.PullRequestEvent:
		d.Action = e.GetAction()
		d.Repo = e.GetRepo().GetFullName()
		d.Installation = e.GetInstallation().GetID()
		d.PR = e.GetNumber()
		if d.PR == 0 {
			d.PR = e.GetPullRequest().GetNumber()
		}
		d.HeadSHA = e.GetPullRequest().GetHead().GetSHA()
		missing = firstMissing(
			need{d.Repo == "", "repository.full_name"},
			need{d.Installation == 0, "installation.id"},
			need{e.PullRequest == nil, "pull_request"},
			need{d.PR == 0, "pull_request.number"},
			need{d.HeadSHA == "", "pull_request.head.sha"},
		)
	case *github.IssueCommentEvent:
		d.Action = e.GetAction()
		d.Repo = e.GetRepo().GetFullName()
		d.Installation = e.GetInstallation().GetID()
		d.PR = e.GetIssue().GetNumber()
		if e.Issue != nil && !e.Issue.IsPullRequest() {
			return d, fmt.Sprintf("comment on issue #%d, not on a pull request", d.PR), ""
		}
		missing = firstMissing(
			need{d.Repo == "", "repository.full_name"},
			need{d.Installation == 0, "installation.id"},
			need{e.Issue == nil, "issue"},
			need{d.PR == 0, "issue.number"},
			need{e.Comment == nil, "comment"},
		)
	case *github.CheckRunEvent:
		d.Action = e.GetAction()
		d.Repo = e.GetRepo().GetFullName()
		d.Installation = e.GetInstallation().GetID()
		d.HeadSHA = e.GetCheckRun().GetHeadSHA()
		// Several PRs may share a head; a fork's push lists none. Either
		// way the bot maps the check run through external_id.
		if cr := e.GetCheckRun(); cr != nil && len(cr.PullRequests) == 1 {
			d.PR = cr.PullRequests[0].GetNumber()
		}
		missing = firstMissing(
			need{d.Repo == "", "repository.full_name"},
			need{d.Installation == 0, "installation.id"},
			need{e.CheckRun == nil, "check_run"},
			need{e.GetCheckRun().GetID() == 0, "check_run.id"},
			need{d.HeadSHA == "", "check_run.head_sha"},
			need{d.Action == "requested_action" && (e.RequestedAction == nil || e.RequestedAction.Identifier == ""),
				"requested_action.identifier"},
		)
	case *github.MergeGroupEvent:
		d.Action = e.GetAction()
		d.Repo = e.GetRepo().GetFullName()
		d.Installation = e.GetInstallation().GetID()
		d.HeadSHA = e.GetMergeGroup().GetHeadSHA()
		missing = firstMissing(
			need{d.Repo == "", "repository.full_name"},
			need{d.Installation == 0, "installation.id"},
			need{e.MergeGroup == nil, "merge_group"},
			need{d.HeadSHA == "", "merge_group.head_sha"},
			need{e.GetMergeGroup().GetBaseRef() == "", "merge_group.base_ref"},
		)
	case *github.InstallationEvent:
		d.Action = e.GetAction()
		d.Installation = e.GetInstallation().GetID()
		missing = firstMissing(need{d.Installation == 0, "installation.id"})
	case *github.PingEvent:
		d.Repo = e.GetRepo().GetFullName()
		d.Installation = e.GetInstallation().GetID()
	default:
		// supportedActions and this switch disagree: a bug, said plainly.
		missing = fmt.Sprintf("route for %T", payload)
	}
	return d, "", missing
}

// need is a field routing needs: its name and whether it is absent.
type need struct {
	absent bool
	field  string
}

// firstMissing returns the first absent field's name, or "".
func firstMissing(needs ...need) string {
	for _, n := range needs {
		if n.absent {
			return n.field
		}
	}
	return ""
}
