package report

import (
	"fmt"

	"github.com/kilolock/kilolock/internal/engine"
)

// What an apply run's status, markers and stored facts decide: the verdict
// line, the refusal (rule, version, producing run, PR, address) and the
// since-plan verdict under the default policy (DESIGN.md apply step 3).

// ofKind returns the markers of run (any run if "") of the given kinds.
func ofKind(ms []engine.Marker, run string, kinds ...engine.MarkerKind) []engine.Marker {
	var out []engine.Marker
	for _, m := range ms {
		if run != "" && m.Run != "" && m.Run != run {
			continue
		}
		for _, k := range kinds {
			if m.Kind == k {
				out = append(out, m)
				break
			}
		}
	}
	return out
}

func lastOf(ms []engine.Marker, run string, kind engine.MarkerKind) *engine.Marker {
	found := ofKind(ms, run, kind)
	if len(found) == 0 {
		return nil
	}
	m := found[len(found)-1]
	return &m
}

// Refusal rules, as JSON "rule" values (docs/json.md).
const (
	ruleStale       = "stale-plan"           // a later version changed the write set
	ruleStaleStrict = "stale-plan-strict"    // --strict-since-plan: it changed the read set
	ruleIntent      = "intent-changed"       // the re-plan against the head plans something else
	ruleConflict    = "reservation-conflict" // another run held overlapping reservations
	ruleOther       = "other"
)

// ruleTitle names each rule for a section title.
var ruleTitle = map[string]string{
	ruleStale:       "stale plan (planned target changed)",
	ruleStaleStrict: "stale plan (plan input changed, strict)",
	ruleIntent:      "intent changed on re-plan",
	ruleConflict:    "reservation conflict",
	ruleOther:       "other",
}

// refusal is why an apply was refused, with the version, its producing
// run and PR and the addresses that decided it (STYLE.md 8).
type refusal struct {
	rule   string
	policy string // the rule in words
	serial int64  // the offending version (stale), or the head re-planned against
	run    string // producing run (stale), re-plan (intent), holder (conflict)
	plan   string // the refused apply's plan run
	actor  string
	pr     *engine.PullRequest
	addrs  engine.AddressSet
	words  sentence
}

// refusals reads the refusal of apply run a from its markers; sp supplies
// the producing run's actor.
func refusals(a engine.Run, ms []engine.Marker, sp *engine.SincePlan) []refusal {
	if a.Status != engine.StatusRefused {
		return nil
	}
	var out []refusal
	for _, m := range ofKind(ms, a.ID, engine.MarkerStalenessFailed) {
		r := refusal{rule: ruleStale, serial: m.Serial, run: m.Other, pr: m.OtherPR, addrs: m.Addresses,
			policy: "planned target changed → refuse (stale plan; re-plan needed)"}
		what := "planned target"
		if m.Reason == engine.ClassReadChanged.Label() {
			r.rule, what = ruleStaleStrict, "plan input"
			r.policy = "--strict-since-plan: plan input changed → refuse (re-plan needed)"
		}
		if sp != nil {
			for _, e := range sp.Entries {
				if e.Serial == m.Serial {
					r.actor = e.Actor
				}
			}
		}
		r.words = words(strongT(toneBad, "stale plan"), fmt.Sprintf(": version %d, by ", r.serial), who(r.run, r.actor, r.pr),
			", changed "+what+" ", addrs(r.addrs), "; re-plan with ", code("kl plan"))
		out = append(out, r)
	}
	for _, m := range ofKind(ms, a.ID, engine.MarkerReplanned) {
		if m.IntentChanged == nil || !*m.IntentChanged {
			continue
		}
		out = append(out, refusal{rule: ruleIntent, serial: m.Serial, run: m.Other, addrs: m.Addresses,
			policy: "plan input changed → re-plan against the head; intent changed → stop for review",
			words: words(strongT(toneBad, "intent changed"), ": re-plan ", runSpan(m.Other), fmt.Sprintf(" against head %d plans something else", m.Serial),
				addrsSuffix(" for ", m.Addresses), "; review it and apply it with ", code("kl apply "+m.Other))})
	}
	if len(out) > 0 {
		return out
	}
	if waits := ofKind(ms, a.ID, engine.MarkerWaited); len(waits) > 0 && lastOf(ms, a.ID, engine.MarkerReserved) == nil {
		for _, m := range waits {
			out = append(out, refusal{rule: ruleConflict, run: m.Other, pr: m.OtherPR, addrs: m.Addresses, plan: a.PlanRun,
				policy: "write conflicts with anything on an overlapping address → wait (bounded) or refuse",
				words:  words(strongT(toneBad, "reservations conflict"), ": ", who(m.Other, "", m.OtherPR), " holds ", addrs(m.Addresses))})
		}
		return out
	}
	reason := a.Reason
	if reason == "" {
		reason = "a rule stopped it before Terraform ran"
	}
	return []refusal{{rule: ruleOther, policy: reason, words: words(strongT(toneBad, reason))}}
}

// verdict is a one-line answer with its tone and a machine word.
type verdict struct {
	word  string // JSON "verdict"
	tone  tone
	words sentence
}

// applyVerdict is the verdict line of an apply run.
func applyVerdict(a engine.Run, ms []engine.Marker, sp *engine.SincePlan, v *engine.Version) verdict {
	switch a.Status {
	case engine.StatusApplied:
		s := words(strongT(toneGood, "applied"), ": committed ")
		if v != nil {
			p := v.Provenance
			s = words(s, commitWords(p), ", ")
			if p.Exact {
				return verdict{"allowed", toneGood, s.add(toned(toneGood, "exact"))}
			}
			return verdict{"allowed", toneWarn, s.add(toned(toneWarn, driftShort(p.Drift)))}
		}
		return verdict{"allowed", toneGood, s.add(txt(fmt.Sprintf("version %d", a.CommittedSerial)))}
	case engine.StatusApplying:
		return verdict{"allowed", toneInfo, words(strongT(toneInfo, "applying"), ": reservations held, Terraform is running")}
	case engine.StatusWaiting:
		var parts []sentence
		for _, m := range ofKind(ms, a.ID, engine.MarkerWaited) {
			parts = append(parts, words(who(m.Other, "", m.OtherPR), " over ", addrs(m.Addresses)))
		}
		return verdict{"waiting", toneWarn, words(strongT(toneWarn, "waiting"), " on ", join(parts, "; "))}
	case engine.StatusRefused:
		rs := refusals(a, ms, sp)
		s := words(toned(toneBad, "refused: "), rs[0].words)
		if len(rs) > 1 {
			s = s.add(txt(fmt.Sprintf(" (and %d more)", len(rs)-1)))
		}
		return verdict{"refused", toneBad, s}
	}
	word := "failed"
	if a.Status == engine.StatusInterrupted {
		word = "interrupted"
	}
	s := words(strongT(toneBad, string(a.Status)), reasonSuffix(a.Reason))
	if a.CommittedSerial > 0 {
		s = s.add(txt(fmt.Sprintf("; partial result committed as version %d", a.CommittedSerial)))
	}
	return verdict{word, toneBad, s}
}

// Since-plan verdict actions (JSON "action").
const (
	actionProceed = "proceed"
	actionReplan  = "re-plan"
	actionRefused = "refused"
	actionClosed  = "closed" // the plan can no longer be applied
)

// ownApply reports whether e is the version plan's own apply committed.
func ownApply(e engine.SincePlanEntry, plan engine.Run) bool {
	return plan.ApplyRun != "" && e.Run == plan.ApplyRun
}

// sincePlanVerdict says what an apply of plan would do now under the
// default policy: refuse on a planned target changed, re-plan on a plan
// input changed, proceed otherwise. The plan's own apply is not a conflict.
func sincePlanVerdict(sp *engine.SincePlan, plan engine.Run) (string, verdict) {
	if !plan.Status.Open() {
		s := words(strongT(toneInfo, "closed"), fmt.Sprintf(": plan is %s", plan.Status))
		if plan.ApplyRun != "" {
			s = words(s, " by apply ", runSpan(plan.ApplyRun))
		}
		if sp != nil {
			for _, e := range sp.Entries {
				if ownApply(e, plan) {
					s = s.add(txt(fmt.Sprintf(" (version %d)", e.Serial)))
				}
			}
		}
		return actionClosed, verdict{actionClosed, toneInfo, s.add(txt("; nothing to apply"))}
	}
	if sp == nil {
		return actionProceed, verdict{actionProceed, toneGood, words(strongT(toneGood, "proceed"))}
	}
	var write, read, indep []engine.SincePlanEntry
	for _, e := range sp.Entries {
		switch {
		case ownApply(e, plan):
		case e.Class == engine.ClassWriteChanged:
			write = append(write, e)
		case e.Class == engine.ClassReadChanged:
			read = append(read, e)
		default:
			indep = append(indep, e)
		}
	}
	switch {
	case len(write) > 0:
		e := write[0]
		return actionRefused, verdict{actionRefused, toneBad, words(strongT(toneBad, "refused"),
			fmt.Sprintf(": an apply now is refused as stale: version %d, by ", e.Serial), who(e.Run, e.Actor, e.PR),
			", changed planned target ", addrs(e.Addresses), "; re-plan with ", code("kl plan"))}
	case len(read) > 0:
		return actionReplan, verdict{actionReplan, toneWarn, words(strongT(toneWarn, "re-plan"),
			fmt.Sprintf(": an apply now re-plans against head %d (plan input changed in %s %s) and proceeds only if the intent is unchanged",
				sp.HeadSerial, versionWord(len(read)), serials(engine.Serials(read))))}
	case len(indep) > 0:
		return actionProceed, verdict{actionProceed, toneGood, words(strongT(toneGood, "proceed"),
			fmt.Sprintf(": an apply now proceeds; %s %s, committed since serial %d, changed nothing this plan reads or writes",
				versionWord(len(indep)), serials(engine.Serials(indep)), sp.SourceSerial))}
	}
	return actionProceed, verdict{actionProceed, toneGood, words(strongT(toneGood, "proceed"),
		fmt.Sprintf(": head unchanged since plan (serial %d)", sp.SourceSerial))}
}
