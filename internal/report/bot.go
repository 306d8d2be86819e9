package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// klbot's own Markdown: what the bot says when it refuses, cannot plan, or
// plans nothing — the check-run summaries, replies and sticky-comment notes
// that are not a run's view. Each is a BotNotice value holding the facts its
// words need; Notice renders one (Markdown whatever Options.Format, its
// heading at Options.HeadingLevel). Names, states, logins and commit SHAs
// are printed as given: klbot passes validated names (kl.yaml's rules,
// GitHub's logins), and the words that are Markdown (BotRefusal.Problem,
// ConfigProblem.Problems) are the bot's or the engine's own.

// BotNotice is one of klbot's messages (BotRefusal, PlanNotAllowed,
// NothingToApply, NoSuchProject, ConfigProblem, ForkNotPlanned,
// NoneTouched, MissingState, PlanFailed).
type BotNotice interface {
	markdown(o Options) string
}

// Notice writes n as GitHub Markdown, its heading at o.HeadingLevel.
func Notice(w io.Writer, n BotNotice, o Options) error {
	if _, err := io.WriteString(w, n.markdown(o)); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	return nil
}

// BotRule is a rule klbot checks before it asks the engine to apply a plan
// (docs/design.md apply step 1); a refusal names it, in these words.
type BotRule string

// klbot's apply rules.
const (
	BotRuleWrite     BotRule = "write permission"          // the actor has write permission (maintain and admin include it)
	BotRuleHead      BotRule = "plan for the current head" // the plan is of the pull request's head (or merge) commit
	BotRuleOpenPlan  BotRule = "an open plan"              // the engine can still apply the plan
	BotRuleTrigger   BotRule = "apply trigger"             // the project's apply_trigger allows this way of asking
	BotRuleOpenPR    BotRule = "open pull request"         // the pull request is open
	BotRuleApproved  BotRule = "approved"                  // kl.yaml apply_requirements: approved
	BotRuleMergeable BotRule = "mergeable"                 // kl.yaml apply_requirements: mergeable
	BotRuleRevert    BotRule = "on_revert: fail"           // kl.yaml on_revert: fail, and the plan would undo an earlier change (ADR 0046)
)

// AskedBy is how an apply was asked for.
type AskedBy string

// Ways of asking for an apply.
const (
	AskedByComment AskedBy = "comment" // a "/kl apply" comment
	AskedByButton  AskedBy = "button"  // the Apply button of the plan check run
	AskedByMerge   AskedBy = "merge"   // the pull request's merge (apply_trigger: merge)
)

// BotRefusal is an apply klbot refused by one of its rules, before the
// engine ran: the rule and the facts its words name. The facts after
// HeadSHA are each read by one rule only.
type BotRefusal struct {
	Rule    BotRule
	AskedBy AskedBy
	Actor   string // GitHub login, without "@"
	Repo    string // "owner/name"
	PR      int
	Project string
	PlanRun string
	PlanSHA string // the commit the plan is of
	HeadSHA string // the pull request's head commit (its merge commit's head on a merge)

	PRState            string   // BotRuleOpenPR: "closed"
	ButtonSHA          string   // BotRuleHead: the commit of the check run whose Apply button was pressed
	Merged             bool     // BotRuleHead: the pull request was merged at HeadSHA
	Permission         string   // BotRuleWrite: GitHub's permission name ("read", "triage"; "" or "none" for none)
	ApprovedBy         []string // BotRuleApproved
	ChangesRequestedBy []string // BotRuleApproved
	Mergeable          *bool    // BotRuleMergeable: GitHub's mergeable (nil: not computed yet)
	Problem            string   // BotRuleOpenPlan: the engine's words (Markdown); BotRuleRevert: RevertRefusedWhy
	PlanClosed         bool     // BotRuleOpenPlan: Problem says the plan is no longer open
}

// verb is how the apply was asked, inside a sentence ("… applied by
// /kl apply").
func (r BotRefusal) verb() string {
	if r.AskedBy == AskedByButton {
		return "the Apply button"
	}
	return "/kl apply"
}

// asked is how the apply was asked, to start a heading or a note.
func (r BotRefusal) asked() string {
	switch r.AskedBy {
	case AskedByButton:
		return "Apply button"
	case AskedByMerge:
		return "merge-time apply"
	}
	return "`/kl apply`"
}

// Why says, in Markdown, why the rule refused the apply: one sentence
// without its final period (the check run's summary and the bot's log
// line).
func (r BotRefusal) Why() string {
	switch r.Rule {
	case BotRuleOpenPR:
		return fmt.Sprintf("%s#%d is %s: only an open pull request is applied by %s (on merge, projects with `apply_trigger: merge` apply by themselves)",
			r.Repo, r.PR, r.PRState, r.verb())
	case BotRuleTrigger:
		return fmt.Sprintf("project `%s` applies when the pull request is merged (`apply_trigger: merge` in kl.yaml), not by %s", r.Project, r.verb())
	case BotRuleWrite:
		return PermissionWords(r.Actor, r.Repo, r.Permission, r.verb())
	case BotRuleHead:
		return r.headWhy()
	case BotRuleApproved:
		return fmt.Sprintf("project `%s` requires an approving review and none requesting changes (approved by: %s; changes requested by: %s)",
			r.Project, loginsOrNone(r.ApprovedBy), loginsOrNone(r.ChangesRequestedBy))
	case BotRuleMergeable:
		if r.Mergeable == nil {
			return fmt.Sprintf("project `%s` requires a mergeable pull request and GitHub has not computed mergeability yet: try again in a minute", r.Project)
		}
		return fmt.Sprintf("project `%s` requires a mergeable pull request; GitHub says %s#%d is not mergeable (conflicts)", r.Project, r.Repo, r.PR)
	case BotRuleRevert:
		return r.Problem
	case BotRuleOpenPlan:
		if r.PlanClosed {
			return fmt.Sprintf("plan `%s` cannot be applied: %s", r.PlanRun, r.Problem)
		}
		return r.Problem
	}
	return string(r.Rule)
}

func (r BotRefusal) headWhy() string {
	switch {
	case r.ButtonSHA != "":
		return fmt.Sprintf("the Apply button is on the check run of commit `%s`, but the pull request's head is now `%s`: apply the plan of the current head",
			shortSHA(r.ButtonSHA), shortSHA(r.HeadSHA))
	case r.Merged:
		return fmt.Sprintf("the plan `%s` is for commit `%s`, but the pull request was merged at `%s`", r.PlanRun, shortSHA(r.PlanSHA), shortSHA(r.HeadSHA))
	}
	return fmt.Sprintf("the plan `%s` is for commit `%s`, but the pull request's head is now `%s`: wait for the plan of the new head (or comment `/kl plan -p %s`) and apply that",
		r.PlanRun, shortSHA(r.PlanSHA), shortSHA(r.HeadSHA), r.Project)
}

// markdown is the "kl apply · PROJECT" check run's summary.
func (r BotRefusal) markdown(o Options) string {
	return fmt.Sprintf("%s⛔ %s of `%s` refused: %s\n\n%s.\n\n- **rule:** %s\n- **asked by:** @%s\n- **plan:** `%s` at `%s`\n",
		o.heading(0), r.asked(), r.Project, r.Rule, upperFirst(r.Why()), r.Rule, r.Actor, r.PlanRun, shortSHA(r.PlanSHA))
}

// Note is the refusal's line in the sticky comment's project section.
func (r BotRefusal) Note() string {
	return fmt.Sprintf("⛔ %s by @%s refused: **%s** — %s.", r.asked(), r.Actor, r.Rule, r.Why())
}

// PermissionWords says what actor may do on repo and what verb needs:
// "@stranger has no permission on acme/infra; /kl apply needs write".
// perm is GitHub's permission name; "" and "none" are no permission.
func PermissionWords(actor, repo, perm, verb string) string {
	has := "no permission"
	if perm != "" && perm != "none" {
		has = perm + " permission"
	}
	return fmt.Sprintf("@%s has %s on %s; %s needs write", actor, has, repo, verb)
}

// PlanNotAllowed is a "/kl plan" (or Command: "/kl recover", "/kl
// unfence") by a user without write permission: the reply to the comment.
type PlanNotAllowed struct {
	Actor, Repo string
	Permission  string // GitHub's permission name, as in PermissionWords
	Command     string // "" is "/kl plan"
}

func (n PlanNotAllowed) markdown(o Options) string {
	cmd := orWords(n.Command, "/kl plan")
	return fmt.Sprintf("%s⛔ `%s` refused: write permission\n\n- **rule:** only users with write permission on %s may plan, apply, recover or unfence\n- **why:** %s\n",
		o.heading(0), cmd, n.Repo, PermissionWords(n.Actor, n.Repo, n.Permission, cmd))
}

// NothingFenced answers "/kl recover" or "/kl unfence" (Command) on a pull
// request none of whose applies (of Project, "" for any) is fenced or left
// anything to recover (ADR 0035).
type NothingFenced struct {
	Command string
	Project string
}

func (n NothingFenced) markdown(o Options) string {
	what := "No apply of this pull request"
	if n.Project != "" {
		what = "No apply of project `" + n.Project + "` in this pull request"
	}
	if n.Command == "/kl unfence" {
		return fmt.Sprintf("%s%s holds a fence: nothing to lift.\n", o.heading(0), what)
	}
	return fmt.Sprintf("%s%s stopped with something to recover: nothing to do.\n", o.heading(0), what)
}

// FenceRefused is a "/kl recover" or "/kl unfence" (Command) of apply run
// Run of Project that the engine refused; Problem is its words (Markdown).
type FenceRefused struct {
	Command, Project, Run string
	Problem               string
}

func (n FenceRefused) markdown(o Options) string {
	return fmt.Sprintf("%s⛔ `%s` of project `%s` refused\n\n- **run:** `%s`\n- **why:** %s\n",
		o.heading(0), n.Command, n.Project, n.Run, n.Problem)
}

// NothingToApply is a "/kl apply" with no plan to apply: the reply.
type NothingToApply struct {
	Project string   // the project asked for; "" for every project
	Planned []string // the projects of the pull request with a plan
}

func (n NothingToApply) markdown(o Options) string {
	what := "any project"
	if n.Project != "" {
		what = "project `" + n.Project + "`"
	}
	return fmt.Sprintf("%s⛔ `/kl apply`: nothing to apply\n\nThis pull request has no plan of %s (projects with a plan: %s). Push a change to the project or comment `/kl plan -p PROJECT` first.\n",
		o.heading(0), what, codeListOr(n.Planned, "none"))
}

// NoSuchProject is a "/kl plan -p PROJECT" naming no project of kl.yaml:
// the reply.
type NoSuchProject struct {
	Project  string
	Projects []string // kl.yaml's projects, in file order
}

func (n NoSuchProject) markdown(o Options) string {
	return fmt.Sprintf("%s⛔ `/kl plan -p %s`: no such project\n\nkl.yaml has no project %q; its projects are: %s.\n",
		o.heading(0), n.Project, n.Project, codeListOr(n.Projects, ""))
}

// ConfigProblem is a commit klbot did not plan because its checkout or its
// kl.yaml was refused — or loosens a safety key of its base (ADR 0040) —:
// the failing "kl config" check run.
type ConfigProblem struct {
	Title   string // "kl.yaml is invalid", "the repository archive was refused"
	HeadSHA string
	// Problems are kl.yaml's, one a line ("kl.yaml:LINE: what"), listed;
	// Problem, when set instead, is the one problem, said as a sentence.
	Problems []string
	Problem  string
	// OnDefaultBranch: the problems are those of the default branch's
	// kl.yaml, the base of the safety keys (ADR 0040): klbot neither plans
	// nor applies the commit until the default branch is fixed.
	OnDefaultBranch bool
}

func (n ConfigProblem) markdown(o Options) string {
	problems := n.Problem
	if problems == "" {
		problems = "- " + strings.Join(n.Problems, "\n- ")
	}
	if n.OnDefaultBranch {
		return fmt.Sprintf("%s⛔ %s\n\nklbot neither plans nor applies commit `%s`: the rules of an apply (its safety keys, "+
			"docs/kl-yaml.md) come from the default branch's kl.yaml, and klbot cannot read it:\n\n%s\n\n"+
			"Fix kl.yaml on the default branch, then push again or comment `/kl plan`; the format is in docs/kl-yaml.md.\n",
			o.heading(0), n.Title, shortSHA(n.HeadSHA), problems)
	}
	return fmt.Sprintf("%s⛔ %s\n\nklbot did not plan commit `%s`:\n\n%s\n\nFix it and push again; the format is in docs/kl-yaml.md.\n",
		o.heading(0), n.Title, shortSHA(n.HeadSHA), problems)
}

// ForkNotPlanned is a push to a pull request from a fork that klbot did not
// plan (KLBOT_ALLOW_FORK_PRS): the neutral "kl plan" check run.
type ForkNotPlanned struct {
	HeadSHA  string
	HeadRepo string // the fork, "owner/name"
	Repo     string
}

// ForkNotPlannedTitle is ForkNotPlanned's check-run title.
const ForkNotPlannedTitle = "Not planned: a pull request from a fork"

func (n ForkNotPlanned) markdown(o Options) string {
	return fmt.Sprintf("%s"+ForkNotPlannedTitle+"\n\n"+
		"Commit `%s` comes from `%s`. A plan runs the pull request's Terraform code with klbot's cloud credentials, "+
		"so klbot does not plan pull requests from forks on push.\n\n"+
		"A user with write permission on %s who has read the change can plan it: comment `/kl plan`. "+
		"(An operator can set `KLBOT_ALLOW_FORK_PRS=true` to plan every fork's push.)\n",
		o.heading(0), shortSHA(n.HeadSHA), n.HeadRepo, n.Repo)
}

// NoneTouched is a push whose changed files touch no project: the neutral
// "kl plan" check run, listing each project's when_modified.
type NoneTouched struct {
	Files    int // changed files
	HeadSHA  string
	Projects []NoticeProject
}

// NoticeProject is a kl.yaml project as NoneTouched lists it.
type NoticeProject struct {
	Name, Dir    string
	WhenModified []string
}

// NoneTouchedTitle is NoneTouched's check-run title.
const NoneTouchedTitle = "No project touched"

func (n NoneTouched) markdown(o Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s"+NoneTouchedTitle+"\n\nNone of the %d changed files of commit `%s` matches a project's `when_modified`, so nothing was planned.\n\n| project | dir | when_modified |\n| --- | --- | --- |\n",
		o.heading(0), n.Files, shortSHA(n.HeadSHA))
	for _, p := range n.Projects {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", p.Name, p.Dir, codeListOr(p.WhenModified, ""))
	}
	b.WriteString("\nTo plan a project anyway, comment `/kl plan -p PROJECT`.\n")
	return b.String()
}

// MissingState is a project whose state does not exist in Kilolock: klbot
// never creates one (a mistyped name would plan every resource as new).
// The failing "kl plan · PROJECT" check run, and Note for the sticky
// comment.
type MissingState struct {
	State, Project string
}

func (n MissingState) words() string {
	return fmt.Sprintf("State `%s` does not exist in Kilolock, so project `%s` cannot be planned. klbot never creates a state by itself "+
		"(a mistyped name would plan every resource as new). Create it once with `kl state init %s` (empty), or adopt the current "+
		"state file with `kl state init %s --from terraform.tfstate`, then comment `/kl plan`.", n.State, n.Project, n.State, n.State)
}

func (n MissingState) markdown(o Options) string {
	return o.heading(0) + "⛔ State `" + n.State + "` does not exist\n\n" + n.words() + "\n"
}

// Note is MissingState's line in the sticky comment.
func (n MissingState) Note() string { return "⛔ " + n.words() }

// PlanFailed is a plan that failed (Terraform's error, or the engine's):
// the failing "kl plan · PROJECT" check run, and Note for the sticky
// comment.
type PlanFailed struct {
	Project, State string
	Error          string // shown in a code block
	CheckRun       string // the check run holding it ("kl plan · PROJECT")
}

func (n PlanFailed) markdown(o Options) string {
	return fmt.Sprintf("%s❌ Plan of `%s` on **%s** failed\n\n```\n%s\n```\n\nFix the configuration and push again, or comment `/kl plan -p %s`.\n",
		o.heading(0), n.Project, n.State, strings.ReplaceAll(n.Error, "```", "'''"), n.Project)
}

// Note is PlanFailed's line in the sticky comment.
func (n PlanFailed) Note() string {
	return "❌ The plan failed: see the `" + n.CheckRun + "` check run."
}

// codeListOr lists items as code spans, or none when there are none.
func codeListOr(items []string, none string) string {
	if len(items) == 0 {
		return none
	}
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = "`" + s + "`"
	}
	return strings.Join(out, ", ")
}

func loginsOrNone(ls []string) string {
	if len(ls) == 0 {
		return "none"
	}
	return "@" + strings.Join(ls, ", @")
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// shortSHA abbreviates a commit SHA to 7 characters, as GitHub does.
func shortSHA(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// PlanSuperseded is a plan that a push to its pull request dropped: the
// new commit no longer touches its project, or the project left kl.yaml.
// Nothing replaced the plan; it is closed. Note is the sticky comment's
// line, Why the words of a refusal to apply it.
type PlanSuperseded struct {
	Project string
	HeadSHA string // the new commit
	PlanRun string
	PlanSHA string // the commit the plan was made at
	Gone    bool   // the project is not in kl.yaml at HeadSHA any more
}

// Why says why the plan is closed, without a final period: "the push at
// `X` no longer touches project b; its plan made at `Y` is closed".
func (n PlanSuperseded) Why() string {
	if n.Gone {
		return fmt.Sprintf("project %s is not in kl.yaml at `%s` any more; its plan made at `%s` is closed", n.Project, shortSHA(n.HeadSHA), shortSHA(n.PlanSHA))
	}
	return fmt.Sprintf("the push at `%s` no longer touches project %s; its plan made at `%s` is closed", shortSHA(n.HeadSHA), n.Project, shortSHA(n.PlanSHA))
}

// Note is PlanSuperseded's line in the sticky comment.
func (n PlanSuperseded) Note() string {
	return fmt.Sprintf("%s: plan `%s` is not carried forward.", upperFirst(n.Why()), n.PlanRun)
}

// ClosedUnapplied is an open plan of a pull request closed (or merged)
// without applying it: Note is the sticky comment's line.
type ClosedUnapplied struct {
	PlanRun string
	Merged  bool
}

// Note is ClosedUnapplied's line in the sticky comment.
func (n ClosedUnapplied) Note() string {
	how := "closed without merging"
	if n.Merged {
		how = "merged"
	}
	return fmt.Sprintf("The pull request was %s; plan `%s` was never applied and is closed.", how, n.PlanRun)
}

// PlanNotApplicable is a press of a plan check run's Apply button when its
// plan can no longer be applied: the reply to whoever pressed it (the
// button is removed when klbot learns it, but a page loaded before shows
// it still; issue 11 §8). Exactly one of the reasons is set, checked in
// this order. It answers a "/kl apply" of a plan applied already too
// (Comment), leaving the apply's check run as it is.
type PlanNotApplicable struct {
	Comment bool // asked by a "/kl apply" comment, not the Apply button
	Project string
	PlanRun string
	PlanSHA string // the commit the plan (and the pressed check run) is of
	HeadSHA string // the pull request's head now

	Status  engine.RunStatus // the plan's status when it is no longer planned (applied, superseded, …)
	End     *engine.End      // with Status: how the plan ended
	ByApply string           // with Status applied: the apply run
	// Stale is the version, committed since the plan, that changed what it
	// plans to change (its planned target changed: ADR D3).
	Stale *engine.SincePlanEntry
	// FencedBy are the crashed apply runs whose fences meet the plan's
	// footprint (ADR 0035).
	FencedBy []string
}

func (n PlanNotApplicable) why() string {
	switch {
	case n.Status == engine.StatusApplied:
		return fmt.Sprintf("it was applied already, by run `%s`", n.ByApply)
	case n.Status != "":
		w := fmt.Sprintf("it is %s", n.Status)
		if e := EndText(n.PlanRun, n.End); e != "" {
			w += ": " + e
		}
		return w
	case n.HeadSHA != "" && n.HeadSHA != n.PlanSHA:
		return fmt.Sprintf("it is of commit `%s`, and the pull request's head is now `%s`", shortSHA(n.PlanSHA), shortSHA(n.HeadSHA))
	case n.Stale != nil:
		who := "run `" + n.Stale.Run + "`"
		if n.Stale.PR != nil {
			who += " of " + n.Stale.PR.String()
		}
		return fmt.Sprintf("it is stale: version %d (%s) changed what it plans to change", n.Stale.Serial, who)
	case len(n.FencedBy) > 0:
		return fmt.Sprintf("it is fenced: crashed apply run(s) %s fence what it writes or reads", codeListOr(n.FencedBy, ""))
	}
	return "it is no longer open"
}

func (n PlanNotApplicable) markdown(o Options) string {
	next := fmt.Sprintf(" Plan again with `/kl plan -p %s` and apply that plan.", n.Project)
	if n.Status == engine.StatusApplied {
		next = ""
	}
	asked := "Apply button of `" + n.Project + "`"
	if n.Comment {
		asked = "`/kl apply -p " + n.Project + "`"
	}
	return fmt.Sprintf("%s⛔ %s: plan `%s` is no longer applicable\n\nNothing was applied: %s.%s\n",
		o.heading(0), asked, n.PlanRun, n.why(), next)
}
