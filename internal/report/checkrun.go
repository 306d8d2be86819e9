package report

import (
	"fmt"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// klbot's check-run words that are not a view: titles (GitHub shows them
// next to the check run's name), the plan check run's header, and its
// Apply button.

// Applying is how a project's plan gets applied, as kl.yaml says: the
// words of PlanHeader and of the open plan in the sticky comment.
type Applying struct {
	Project      string
	OnMerge      bool     // apply_trigger: merge; else a "/kl apply" comment or the Apply button
	Requirements []string // apply_requirements, in kl.yaml's order ("approved", "mergeable")
	PlanCheck    string   // the check run holding the plan's Apply button ("kl plan · PROJECT")
	// RevertFail is kl.yaml's `on_revert: fail` (a safety key, ADR 0040,
	// ADR 0046): a plan that would undo an earlier version's change not
	// shown to be deliberate (engine.Envelope.RevertsInDoubt) cannot be
	// applied, and its views say so in place of how to apply it.
	RevertFail bool
}

// refusesReverts says whether a's project refuses plan out because it
// would undo earlier changes not shown to be deliberate (on_revert: fail,
// ADR 0046).
func (a Applying) refusesReverts(out *engine.PlanOutcome) bool {
	return a.RevertFail && len(out.Run.Envelope.RevertsInDoubt()) > 0
}

// The Apply button of a plan check run (docs/github.md: a check-run
// action's label is at most 20 characters, its description 40).
const (
	ApplyButtonLabel       = "Apply"
	ApplyButtonDescription = "Apply this plan (needs write access)"
)

// PlanTitle is the title of a `kl plan · P` check run: the plan's changes
// ("+1 ~0 -0", "±N" when it replaces, or "no changes"; "⚠ " first when it
// destroys or replaces anything, ADR 0044), the root outputs it changes
// ("3 outputs change"), its reservations
// and the open plans it overlaps — "+1 ~2 -0 ±1, 3 reservations, overlaps
// 2 open plan(s)"; "Planned" without an envelope.
func PlanTitle(out *engine.PlanOutcome) string {
	env := out.Run.Envelope
	if env == nil {
		return "Planned"
	}
	s := env.Summary
	t := fmt.Sprintf("+%d ~%d -%d", s.Add, s.Change, s.Destroy)
	if s.Replace > 0 {
		t += fmt.Sprintf(" ±%d", s.Replace)
	}
	if s.Outputs > 0 {
		t += ", " + plural(s.Outputs, "output changes", "outputs change")
	}
	switch {
	case s.Empty():
		t = "no changes"
	case s.Destroy+s.Replace > 0:
		t = "⚠ " + t // flagged in every summary line (ADR 0044 D3)
	}
	if n := len(env.Reservations); n == 1 {
		t += ", 1 reservation"
	} else {
		t += fmt.Sprintf(", %d reservations", n)
	}
	if n := len(out.Overlaps); n > 0 {
		t += fmt.Sprintf(", overlaps %d open plan(s)", n)
	}
	if n := len(out.Fences); n > 0 {
		t += fmt.Sprintf(", fenced by %d crashed apply run(s)", n)
	}
	if rt := RevertTitle(env); rt != "" {
		t += ", " + rt
	}
	return t
}

// PlanHeader is the quote that opens a `kl plan · P` check run's summary,
// above the plan's view: how the plan gets applied (a merge, or the Apply
// button or a comment, with the project's requirements), or that there is
// nothing to apply.
func PlanHeader(out *engine.PlanOutcome, a Applying) string {
	if out.Run.Envelope != nil && out.Run.Envelope.Summary.Empty() {
		return "> Nothing to apply: the plan changes nothing.\n\n"
	}
	if len(out.Fences) > 0 {
		var runs []string
		for _, f := range out.Fences {
			runs = append(runs, "`"+f.Run+"`"+prText(f.PR))
		}
		return fmt.Sprintf("> ⛔ Fenced: an apply whose holder died while its Terraform ran (%s) fences what this plan writes or reads; "+
			"an apply is refused until it is lifted: `/kl recover` (or `/kl unfence -- REASON`, after checking the real objects) on its pull request.\n\n",
			strings.Join(runs, ", "))
	}
	if a.refusesReverts(out) {
		return "> ⛔ This plan cannot be applied: " + revertRefused(a.Project) + "\n\n"
	}
	if a.OnMerge {
		return fmt.Sprintf("> Project `%s` applies when the pull request is merged (`apply_trigger: merge`).\n\n", a.Project)
	}
	requires := ""
	if len(a.Requirements) > 0 {
		requires = "; requires: " + strings.Join(a.Requirements, ", ")
	}
	return fmt.Sprintf("> Apply with the **Apply** button or a comment `/kl apply -p %s` (needs write access%s).\n\n", a.Project, requires)
}

// Title is the refusal's `kl apply · P` check-run title: "Refused: RULE".
func (r BotRefusal) Title() string { return "Refused: " + string(r.Rule) }

// Title is MissingState's `kl plan · P` check-run title.
func (n MissingState) Title() string { return "State " + n.State + " does not exist" }

// Title is PlanFailed's `kl plan · P` check-run title.
func (n PlanFailed) Title() string { return "Plan failed" }

// prText is " of owner/repo#N" for a pull request, "" without one.
func prText(pr *engine.PullRequest) string {
	if pr == nil {
		return ""
	}
	return " of " + pr.String()
}
