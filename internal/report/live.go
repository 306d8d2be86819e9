package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// klbot's words while a job runs (ADR 0041, issue 11 §2–4): the
// in-progress check run of a plan or an apply (InProgress), the answer to
// a command that joins a job already running (Joined), and the end of an
// in-progress check run whose job stopped without finishing it
// (NotFinished). Like the other bot notices they are BotNotice values
// holding facts; Notice renders them.

// LivePhase is what a klbot job is doing for one project.
type LivePhase string

// Live phases, in the order a job goes through them.
const (
	// LiveQueued: the job waits for another job of the same pull request
	// (LiveJob) to finish; no worker is held meanwhile.
	LiveQueued LivePhase = "queued"
	// LiveWaiting: the apply waits for other runs' reservations
	// (engine.Blocker), up to KLBOT_APPLY_WAIT from the wait's start.
	LiveWaiting LivePhase = "waiting"
	// LivePlanning: Terraform plans the project.
	LivePlanning LivePhase = "planning"
	// LiveApplying: the apply runs: reservations, since-plan, re-plan,
	// Terraform, commit.
	LiveApplying LivePhase = "applying"
	// LiveJudging: klbot judges a merge group of GitHub's merge queue
	// (ADR 0058).
	LiveJudging LivePhase = "judging"
)

// JobKind is what a klbot job does, for LiveJob's words.
type JobKind string

// Job kinds LiveJob names.
const (
	JobPlan    JobKind = "plan"
	JobApply   JobKind = "apply"
	JobRecover JobKind = "recover"
	JobUnfence JobKind = "unfence"
	JobQueue   JobKind = "merge queue"
)

// JobAsk is how a job was asked for (klbot's job triggers).
type JobAsk string

// Ways a job is asked for.
const (
	AskPush      JobAsk = "push"      // a push to the pull request (opened, synchronize, …)
	AskComment   JobAsk = "comment"   // a "/kl …" comment
	AskRerequest JobAsk = "rerequest" // a Re-run of a plan check run
	AskButton    JobAsk = "button"    // the Apply button of a plan check run
	AskMerge     JobAsk = "merge"     // the pull request was merged
	AskClose     JobAsk = "close"     // the pull request was closed without merging
	AskQueue     JobAsk = "queue"     // GitHub's merge queue asked for the checks of a merge group
)

// LiveJob is what another job of the pull request waits for: a job
// running now (Kind set; Started: since when), or an apply run in
// progress that no job is running right now (Kind "", Run set; Waiting:
// it waits for reservations, parked — or another process applies it).
type LiveJob struct {
	Kind    JobKind
	Ask     JobAsk
	Project string // -p PROJECT, or the project of the apply run; "" for every project
	Actor   string // GitHub login, without "@"
	HeadSHA string // AskPush: the pushed commit
	Started time.Time
	Run     string
	Waiting bool
}

// words names the job: "`/kl apply -p infra` by @alice", "the plan of
// the push of `0123456`", "the apply of `infra` (run `X`), waiting for
// reservations".
func (j LiveJob) words() string {
	if j.Kind == "" {
		by := ""
		if j.Actor != "" {
			by = " by @" + j.Actor
		}
		w := fmt.Sprintf("the apply of `%s`%s (run %s)", j.Project, by, codeSpan(j.Run))
		if j.Waiting {
			w += ", waiting for reservations"
		}
		return w
	}
	p := ""
	if j.Project != "" {
		p = " -p " + j.Project
	}
	by := ""
	if j.Actor != "" {
		by = " by @" + j.Actor
	}
	switch j.Ask {
	case AskPush:
		return fmt.Sprintf("the plan of the push of `%s`", shortSHA(j.HeadSHA))
	case AskRerequest:
		if j.Project != "" {
			return fmt.Sprintf("the Re-run of `kl plan · %s`%s", j.Project, by)
		}
		return "the Re-run of `kl plan`" + by
	case AskButton:
		return fmt.Sprintf("the Apply button of `kl plan · %s`%s", j.Project, by)
	case AskMerge:
		return "the merge-time apply" + by
	case AskClose:
		return "the close of the pull request"
	case AskQueue:
		return "the merge queue, for the merge group of `" + shortSHA(j.HeadSHA) + "`"
	}
	return fmt.Sprintf("`/kl %s%s`%s", j.Kind, p, by)
}

// InProgress is the in-progress check run of a plan or an apply job
// (Check: "kl plan · P", "kl apply · P"): its Phase, what it waits on,
// and how long it has run. Started is when the job began (its first
// attempt, however often it was snoozed since), Now the time of writing.
type InProgress struct {
	Check   string
	Project string
	Asked   LiveJob // the job itself
	Phase   LivePhase
	Started time.Time
	Now     time.Time
	// Behind (LiveQueued): the jobs it waits for.
	Behind []LiveJob
	// Run is the run the job is making (an apply run once it exists, a
	// plan's once stored); PlanRun the plan an apply applies.
	Run     string
	PlanRun string
	// LiveWaiting: the runs holding what the apply needs, since when it
	// waits and when it gives up (WaitSince + KLBOT_APPLY_WAIT).
	WaitingOn []engine.Blocker
	WaitSince time.Time
	WaitUntil time.Time
	// Terraform's progress (engine.Progress): its step ("init", "plan",
	// "show", "apply") and resources done of expected (Total 0: unknown).
	Step        string
	Done, Total int
	// Reply: the notice is a reply to a command (Check is the command),
	// not a check run.
	Reply bool
}

// Title is the check run's title: the phase and what it waits on.
func (n InProgress) Title() string {
	switch n.Phase {
	case LiveQueued:
		if len(n.Behind) == 1 {
			return "Queued behind " + stripCode(n.Behind[0].words())
		}
		return fmt.Sprintf("Queued behind %d jobs of this pull request", len(n.Behind))
	case LiveWaiting:
		if len(n.WaitingOn) == 1 {
			t := "Waiting for reservations held by run " + n.WaitingOn[0].Run
			if pr := n.WaitingOn[0].PR; pr != nil {
				t += " (" + pr.String() + ")"
			}
			return t
		}
		return fmt.Sprintf("Waiting for reservations held by %d runs", len(n.WaitingOn))
	case LivePlanning:
		return "Planning"
	case LiveJudging:
		return "Judging the merge group"
	}
	if n.Step == "plan" {
		return "Applying: re-planning against the head"
	}
	if n.Step == "apply" && n.Total > 0 {
		return fmt.Sprintf("Applying: %d of %s done", n.Done, plural(n.Total, "resource", "resources"))
	}
	return "Applying"
}

func (n InProgress) markdown(o Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s⏳ `%s`: %s\n\n", o.heading(0), n.Check, n.Phase)
	fmt.Fprintf(&b, "- **asked by:** %s\n", n.Asked.words())
	fmt.Fprintf(&b, "- **started:** %s (%s ago)\n", fmtTime(n.Started), fmtDuration(n.Now.Sub(n.Started)))
	if n.PlanRun != "" {
		fmt.Fprintf(&b, "- **plan:** %s\n", codeSpan(n.PlanRun))
	}
	if n.Run != "" {
		fmt.Fprintf(&b, "- **run:** %s\n", codeSpan(n.Run))
	}
	switch n.Phase {
	case LiveQueued:
		b.WriteString(n.behindWords())
	case LiveWaiting:
		b.WriteString(n.waitWords())
	default:
		if n.Step != "" {
			fmt.Fprintf(&b, "- **Terraform:** `%s`%s\n", n.Step, progressWords(n.Done, n.Total))
		}
	}
	if n.Reply {
		b.WriteString("\n_The answer replaces this reply once the command ran._\n")
	} else {
		b.WriteString("\n_This check run follows the job: updated when its phase changes, else about every 30 s, and completed with the run's story._\n")
	}
	return b.String()
}

func (n InProgress) behindWords() string {
	var b strings.Builder
	b.WriteString("- **queued behind:**")
	if len(n.Behind) > 1 {
		b.WriteString("\n")
	}
	for _, j := range n.Behind {
		item := " " + j.words()
		if !j.Started.IsZero() {
			item += fmt.Sprintf(", running since %s (%s)", fmtTime(j.Started), fmtAge(n.Now, j.Started))
		}
		if len(n.Behind) > 1 {
			item = "  -" + item
		}
		b.WriteString(item + "\n")
	}
	that := "that is"
	if len(n.Behind) > 1 {
		that = "those are"
	}
	fmt.Fprintf(&b, "- **next:** it starts once %s done (jobs of one pull request that touch the same project take turns); klbot holds no worker while it waits.\n", that)
	return b.String()
}

func (n InProgress) waitWords() string {
	var b strings.Builder
	b.WriteString("- **waiting on:**")
	if len(n.WaitingOn) > 1 {
		b.WriteString("\n")
	}
	for _, bl := range n.WaitingOn {
		item := " " + mdPainter{o: Options{Format: Markdown}}.sentence(who(bl.Run, bl.Actor, bl.PR)) + " over " +
			mdPainter{o: Options{Format: Markdown}}.sentence(addrs(bl.Addresses))
		if len(n.WaitingOn) > 1 {
			item = "  -" + item
		}
		b.WriteString(item + "\n")
	}
	fmt.Fprintf(&b, "- **since:** %s (%s); it gives up at %s (`KLBOT_APPLY_WAIT`) and is then refused, naming them\n",
		fmtTime(n.WaitSince), fmtDuration(n.Now.Sub(n.WaitSince)), fmtTime(n.WaitUntil))
	b.WriteString("- **next:** klbot tries again every few seconds, holding no worker meanwhile; the wait is a `waited` marker of the run (`/kl why`).\n")
	return b.String()
}

func progressWords(done, total int) string {
	switch {
	case total > 0:
		return fmt.Sprintf(", %d of %d done", done, total)
	case done > 0:
		return fmt.Sprintf(", %d done", done)
	}
	return ""
}

// stripCode drops the backticks of words meant for Markdown, for a title
// (plain text on GitHub).
func stripCode(s string) string { return strings.ReplaceAll(s, "`", "") }

// JoinedProject is one project a command joined: the job already doing
// it (Job), the apply run when it exists, the check run that follows it.
type JoinedProject struct {
	Project string
	Job     LiveJob
	Run     string
	Check   string
}

// Joined answers a command that asked for what a job of the pull request
// is already doing — a second "/kl apply" while one runs or waits
// (Command: "/kl apply", "the Apply button") — so that it is not absorbed
// silently: Joined lists what it joined, Rest the projects the command
// itself goes on with (none when it joined everything).
type Joined struct {
	Command string
	Joined  []JoinedProject
	Rest    []string
}

func (n Joined) markdown(o Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s👀 %s joins what is already running:\n\n", o.heading(0), upperFirst(orWords(n.Command, "`/kl apply`")))
	for _, j := range n.Joined {
		run := ""
		if j.Run != "" && j.Job.Kind != "" { // a job's words do not name the run
			run = " (run " + codeSpan(j.Run) + ")"
		}
		fmt.Fprintf(&b, "- `%s`: %s%s; `%s` follows it and will hold its story\n", j.Project, j.Job.words(), run, j.Check)
	}
	if len(n.Rest) == 0 {
		b.WriteString("\nNothing new was started for this command.\n")
		return b.String()
	}
	fmt.Fprintf(&b, "\nThis command goes on with %s.\n", codeListOr(n.Rest, "nothing"))
	return b.String()
}

// NotFinishedReason is why a job stopped without completing one of its
// in-progress check runs.
type NotFinishedReason string

// Reasons a job left an in-progress check run.
const (
	// NotReached: the job ended without coming to this project, e.g. its
	// plan was superseded while the job was queued.
	NotReached NotFinishedReason = "not-reached"
	// GaveUp: the job failed for good (River cancelled it, or its last
	// attempt failed): Err says why.
	GaveUp NotFinishedReason = "gave-up"
)

// NotFinished completes an in-progress check run (Check) whose job stopped
// without finishing it.
type NotFinished struct {
	Check  string
	Reason NotFinishedReason
	Err    string
}

// Title is the check run's title.
func (n NotFinished) Title() string {
	if n.Reason == GaveUp {
		return "klbot gave up on this job"
	}
	return "Not run: the job ended before it came to this project"
}

func (n NotFinished) markdown(o Options) string {
	if n.Reason == GaveUp {
		return fmt.Sprintf("%s❌ `%s`: klbot gave up on this job\n\n```\n%s\n```\n\nAsk again (a comment command, or push) once the cause is fixed; `/kl why` says what the runs did.\n",
			o.heading(0), n.Check, strings.ReplaceAll(n.Err, "```", "'''"))
	}
	return fmt.Sprintf("%s`%s`: not run by this job\n\nWhat it was queued for no longer applied when its turn came (its plan was superseded meanwhile, or the pull request moved on); the sticky comment says where the pull request stands.\n",
		o.heading(0), n.Check)
}
