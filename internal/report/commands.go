package report

import (
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// A next step a view names is a command span: its text is kl's CLI
// command (what kl prints and JSON's next_command holds), and on a pull
// request (Options.Commands) the painters write klbot's comment command
// for it instead (issue 11 §9: GitHub text gave CLI commands).

// cmdVerb is what a command does.
type cmdVerb int

const (
	verbApply           cmdVerb = iota + 1 // apply the view's plan: kl apply PLAN
	verbApplyWait                          // apply it, waiting for reservations: kl apply --wait 10m PLAN
	verbWaitBound                          // the bound of an apply's wait: kl apply --wait
	verbReplan                             // re-plan the view's scope: kl plan --state S -C DIR
	verbApplyReplan                        // apply a re-plan that stopped for review: kl apply REPLAN
	verbApplyValidation                    // apply the validation plan that refused a native-lane apply: kl apply VALIDATION
	verbRecover                            // commit what a crashed apply's Terraform wrote: kl run recover RUN
	verbUnfence                            // lift a fence without a commit: kl run unfence RUN --reason TEXT
)

// command is a next step: what it does, and for recover and unfence the
// apply run it acts on and that run's pull request (nil for a run made
// with kl outside any pull request).
type command struct {
	verb cmdVerb
	run  string
	pr   *engine.PullRequest
	self bool // run is the view's own (of its project): `-p PROJECT` names it
	// options are, for verbReplan, the plan options the re-plan repeats
	// (ADR 0045): `/kl plan -p P -- -destroy`.
	options engine.PlanOptions
}

// cmdSpan is the code span of command c, whose CLI form is cli.
func cmdSpan(cli string, c command) span {
	sp := code(cli)
	sp.cmd = &c
	return sp
}

// say is what c reads as on the pull request of cm, false when kl's
// command stays (no comment command reaches the run: it has no pull
// request). A run of another pull request is recovered or unfenced from
// that one: "`/kl recover` on acme/infra#4" (which acts on each of its
// projects, klbot's fence commands).
func (cm *Commands) say(c command) (sentence, bool) {
	s, ok := cm.sayHere(c)
	if ok && cm.Of != nil && c.verb != verbWaitBound && c.verb != verbRecover && c.verb != verbUnfence {
		s = words(s, " on "+cm.Of.String())
	}
	return s, ok
}

// sayHere is say without the pull request the comment is made on.
func (cm *Commands) sayHere(c command) (sentence, bool) {
	project := " -p " + cm.Project
	switch c.verb {
	case verbApply:
		return words(code("/kl apply" + project)), true
	case verbApplyWait:
		return words(code("/kl apply"+project), " (it waits for reservations up to klbot's ", code("KLBOT_APPLY_WAIT"), ")"), true
	case verbWaitBound:
		return words("klbot's ", code("KLBOT_APPLY_WAIT")), true
	case verbReplan:
		if len(c.options.Vars) > 0 {
			return nil, false // no comment carries a -var: kl's command stays
		}
		if f := c.options.Flags(); len(f) > 0 {
			return words(code("/kl plan" + project + " -- " + strings.Join(f, " "))), true
		}
		return words(code("/kl plan" + project)), true
	case verbApplyReplan:
		// klbot applies the project's plan of the pull request's head, not
		// a re-plan: plan the head anew, review it, then apply it.
		return words(code("/kl plan"+project), " (a new plan of the PR's head to review), then ", code("/kl apply"+project)), true
	case verbApplyValidation:
		// The same, but a new native-lane plan may disagree with the whole
		// configuration again: the terraform lane is a tighter kl.yaml
		// value the pull request may set (ADR 0070).
		return words(code("/kl plan"+project), " (a new plan of the PR's head to review), then ", code("/kl apply"+project),
			"; if the native lane disagrees again, set ", code("lane: terraform"), " for the project in the PR's kl.yaml (a tighter value: allowed) to plan it whole"), true
	case verbRecover, verbUnfence:
		if c.pr == nil {
			return nil, false
		}
		other := cm.PR != nil && (c.pr.Repo != cm.PR.Repo || c.pr.Number != cm.PR.Number)
		if other || !c.self {
			project = "" // the comment acts on each project of its pull request
		}
		cmd := "/kl recover" + project
		if c.verb == verbUnfence {
			cmd = "/kl unfence" + project + " -- REASON"
		}
		if other {
			return words(code(cmd), " on "+c.pr.String()), true
		}
		return words(code(cmd)), true
	}
	return nil, false
}

// endRef is the end of run id in a span, written at paint time: with
// klbot's comment commands on a pull request (endText), its first trim
// bytes dropped (endWordsOf: the status word the span follows).
type endRef struct {
	id   string
	end  *engine.End
	trim int
}

// endSpan is the text span of the end of run id: EndText, or on a pull
// request the same sentence with klbot's comment commands.
func endSpan(id string, end *engine.End) span {
	sp := txt(EndText(id, end))
	sp.end = &endRef{id: id, end: end}
	return sp
}

// painted is span s as a painter with Options.Commands cm writes it: a
// command or an end in klbot's words on a pull request; s itself
// otherwise. ok is false when s is to be painted as it is.
func (cm *Commands) painted(s span) (sentence, bool) {
	if cm == nil {
		return nil, false
	}
	if s.cmd != nil {
		return cm.say(*s.cmd)
	}
	if s.end != nil {
		t := endText(s.end.id, s.end.end, cm)
		if s.end.trim > len(t) {
			return nil, false
		}
		c := s
		c.end, c.text = nil, inert(t[s.end.trim:])
		return sentence{c}, true
	}
	return nil, false
}

// endWordsOf is endWords for the end of run id, its reason an endSpan.
func endWordsOf(status engine.RunStatus, id string, end *engine.End, t tone) sentence {
	reason := EndText(id, end)
	word := strings.ReplaceAll(string(status), "-", " ")
	if reason == "" {
		return words(toned(t, word))
	}
	sp := endSpan(id, end)
	if rest, ok := strings.CutPrefix(reason, word); ok && (rest == "" || rest[0] == ' ' || rest[0] == ':') {
		sp.text, sp.end.trim = inert(rest), len(word)
		return words(toned(t, word), sp)
	}
	return words(toned(t, word), ": ", sp)
}

// endSuffix is reasonSuffix for the end of run id: ": REASON", its reason
// an endSpan (nothing for no reason).
func endSuffix(id string, end *engine.End) sentence {
	if EndText(id, end) == "" {
		return nil
	}
	return words(": ", endSpan(id, end))
}

// commandText is c's command as plain text with its code in backticks,
// for the sentences of a run's end (EndText): kl's form when cm is nil or
// has none for c.
func commandText(cli string, c command, cm *Commands) string {
	if cm != nil {
		if s, ok := cm.say(c); ok {
			var out string
			for _, sp := range s {
				if sp.kind == kCode {
					out += "`" + sp.text + "`"
					continue
				}
				out += sp.text
			}
			return out
		}
	}
	return "`" + cli + "`"
}
