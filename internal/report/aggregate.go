package report

import (
	"fmt"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// PRCheck is the aggregate `kl` check run of a pull request's head (ADR
// 0058): one line per project the head touches, and whether each plan can
// be applied. GitHub asks the same check names of pull requests and of
// merge groups, so `kl` — not the per-project `kl plan · PROJECT` runs,
// whose names change with the projects touched — is the check to require.
// It passes when every project's plan is applicable or applied, or when
// the head touches no project.
type PRCheck struct {
	HeadSHA  string
	Projects []PRCheckProject
	// Problem, when set, is why nothing could be planned (an invalid
	// kl.yaml, a pull request from a fork not planned on push) and the
	// check run that says more.
	Problem, ProblemCheck string
	// Workflow: kl wrote it in a workflow (kl github check, ADR 0060), not
	// klbot: the hints name workflow steps and kl commands, not /kl
	// comments.
	Workflow bool
}

// PRCheckVerdict is where a project's plan stands, for the `kl` check run.
type PRCheckVerdict string

// PRCheck verdicts: applicable and applied pass; the others fail.
const (
	VerdictApplicable  PRCheckVerdict = "applicable"  // open, not stale, not fenced
	VerdictApplied     PRCheckVerdict = "applied"     // an apply committed it
	VerdictStale       PRCheckVerdict = "stale"       // a version since changed its planned target (Serial, By)
	VerdictFenced      PRCheckVerdict = "fenced"      // a crashed apply's fence meets it (FencedBy)
	VerdictNoPlan      PRCheckVerdict = "no-plan"     // the plan failed, or its state does not exist (Note)
	VerdictNotOpen     PRCheckVerdict = "not-open"    // closed otherwise (Status)
	VerdictApplyFailed PRCheckVerdict = "apply-ended" // its apply ended without committing it (Status: the plan's)
)

// PRCheckProject is one project of a PRCheck.
type PRCheckProject struct {
	Project, State    string
	Verdict           PRCheckVerdict
	PlanRun, ApplyRun string
	OnMerge           bool // apply_trigger: merge
	// Serial and By: for VerdictStale the version that changed the planned
	// target and its pull request (nil: not a pull request's); for
	// VerdictApplied the version committed.
	Serial   int64
	By       *engine.PullRequest
	FencedBy []string
	Status   engine.RunStatus
	Note     string // the sticky comment's note of the project (VerdictNoPlan)
}

// passes reports whether the verdict lets the `kl` check pass.
func (v PRCheckVerdict) passes() bool { return v == VerdictApplicable || v == VerdictApplied }

// OK reports whether the `kl` check passes.
func (c PRCheck) OK() bool {
	if c.Problem != "" {
		return false
	}
	for _, p := range c.Projects {
		if !p.Verdict.passes() {
			return false
		}
	}
	return true
}

// Title is the `kl` check run's title.
func (c PRCheck) Title() string {
	if c.Problem != "" {
		return "Not planned: " + c.Problem
	}
	if len(c.Projects) == 0 {
		return "No project touched"
	}
	var bad []string
	for _, p := range c.Projects {
		if !p.Verdict.passes() {
			bad = append(bad, p.Project)
		}
	}
	if len(bad) > 0 {
		return "Not applicable: " + strings.Join(bad, ", ")
	}
	if len(c.Projects) == 1 {
		return "1 project ready"
	}
	return fmt.Sprintf("%d projects ready", len(c.Projects))
}

func (c PRCheck) markdown(o Options) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s%s\n\n", o.heading(0), c.Title())
	switch {
	case c.Problem != "":
		fmt.Fprintf(&b, "Commit `%s` was not planned: %s.", shortSHA(c.HeadSHA), c.Problem)
		if c.ProblemCheck != "" {
			fmt.Fprintf(&b, " See the `%s` check run.", c.ProblemCheck)
		}
		b.WriteString("\n")
		return b.String()
	case len(c.Projects) == 0:
		fmt.Fprintf(&b, "Commit `%s` touches no project of `kl.yaml`: nothing to plan or apply.\n", shortSHA(c.HeadSHA))
		return b.String()
	}
	fmt.Fprintf(&b, "The plans of commit `%s`, one per project it touches.\n\n| project | state | plan | where it stands |\n| --- | --- | --- | --- |\n", shortSHA(c.HeadSHA))
	for _, p := range c.Projects {
		mark := "✅"
		if !p.Verdict.passes() {
			mark = "⛔"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s %s |\n", p.Project, p.State, codeListOr(oneOrNone(p.PlanRun), "none"), mark, p.words(c.Workflow))
	}
	b.WriteString("\nThis check run (`kl`) is the one to require, in branch protection and in the merge queue: GitHub asks the same check names of pull requests and of merge groups.\n")
	return b.String()
}

// words says where project p's plan stands, for its table row; workflow:
// written by kl github check, whose hints are a workflow's.
func (p PRCheckProject) words(workflow bool) string {
	if w := p.workflowWords(); workflow && w != "" {
		return w
	}
	switch p.Verdict {
	case VerdictApplicable:
		if p.OnMerge {
			return "applicable; applied when the pull request merges"
		}
		return "applicable; `/kl apply -p " + p.Project + "` applies it"
	case VerdictApplied:
		return fmt.Sprintf("applied by run `%s`, version %d", p.ApplyRun, p.Serial)
	case VerdictStale:
		by := ""
		if p.By != nil {
			by = " by " + p.By.String()
		}
		return fmt.Sprintf("stale: version %d%s changed its planned target; comment `/kl plan` to plan again", p.Serial, by)
	case VerdictFenced:
		return "fenced by the crashed apply " + codeListOr(p.FencedBy, "") + "; see `/kl why`"
	case VerdictNoPlan:
		if p.Note != "" {
			return "no plan: " + strings.TrimSpace(strings.TrimLeft(p.Note, "⛔❌ "))
		}
		return "no plan for this commit"
	case VerdictApplyFailed:
		return fmt.Sprintf("the plan is %s: its apply `%s` did not commit it; comment `/kl plan` to plan again", p.Status, p.ApplyRun)
	}
	return fmt.Sprintf("the plan is %s; comment `/kl plan` to plan again", p.Status)
}

func oneOrNone(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// workflowWords says where project p's plan stands, written by kl github
// check, for the verdicts whose klbot words name /kl comments; "" for the
// others, whose words are the same.
func (p PRCheckProject) workflowWords() string {
	switch p.Verdict {
	case VerdictApplicable:
		if p.OnMerge {
			return "applicable; applied when the pull request merges"
		}
		return "applicable; `kl apply " + p.PlanRun + "` applies it"
	case VerdictStale:
		by := ""
		if p.By != nil {
			by = " by " + p.By.String()
		}
		return fmt.Sprintf("stale: version %d%s changed its planned target; plan it again", p.Serial, by)
	case VerdictFenced:
		return "fenced by the crashed apply " + codeListOr(p.FencedBy, "") + "; see `kl why " + p.PlanRun + "`"
	case VerdictApplyFailed:
		return fmt.Sprintf("the plan is %s: its apply `%s` did not commit it; plan it again", p.Status, p.ApplyRun)
	case VerdictNotOpen:
		return fmt.Sprintf("the plan is %s; plan it again", p.Status)
	}
	return ""
}

// Passes reports whether the verdict lets the `kl` check pass
// (applicable or applied).
func (v PRCheckVerdict) Passes() bool { return v.passes() }
