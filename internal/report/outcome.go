package report

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// What an apply run's status, markers and stored facts decide: the verdict
// line, the refusal (rule, version, producing run, PR, address) and the
// since-plan verdict under the default policy (docs/design.md apply step 3).

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
	ruleStale       = "stale-plan"                 // a later version changed the write set
	ruleStaleStrict = "stale-plan-strict"          // --strict-since-plan: it changed the read set
	ruleIntent      = "intent-changed"             // the re-plan against the head plans something else
	ruleBehindHead  = "config-behind-head"         // the re-plan would change the read set: revert newer versions
	ruleOutside     = "replan-outside-footprint"   // the re-plan would also change what the plan's footprint leaves out
	ruleBeyond      = "replan-beyond-reservations" // the re-plan needs reservations the apply does not hold
	ruleConflict    = "reservation-conflict"       // another run held overlapping reservations
	ruleFenced      = "fenced"                     // a crashed apply's fence (ADR 0035)
	ruleValidation  = "validation-changed"         // a native-lane plan's validation re-plan plans something else (ADR 0069 §9)
	ruleOther       = "other"
)

// replanRule reports whether rule is one a re-plan decided (it names the
// re-plan, what it went over and where it stands now).
func replanRule(rule string) bool {
	switch rule {
	case ruleIntent, ruleBehindHead, ruleOutside, ruleBeyond:
		return true
	}
	return false
}

// ruleTitle names each rule for a section title.
var ruleTitle = map[string]string{
	ruleStale:       "stale plan (planned target changed)",
	ruleStaleStrict: "stale plan (plan input changed, strict)",
	ruleIntent:      "intent changed on re-plan",
	ruleBehindHead:  "configuration behind the head (the re-plan would change what this plan reads)",
	ruleOutside:     "re-plan changes outside the reviewed footprint",
	ruleBeyond:      "re-plan needs reservations beyond those held",
	ruleConflict:    "reservation conflict",
	ruleFenced:      "fenced by a crashed apply",
	ruleValidation:  "validation changed the native intent",
	ruleOther:       "other",
}

// replanOutcome is how a re-check by re-planning ended (engine apply.go
// replan, engine.CompareReplan).
type replanOutcome int

const (
	// replanUnknown: a marker that does not say (no IntentChanged).
	replanUnknown replanOutcome = iota
	// replanUnchanged: same intent on the reviewed write set, nothing
	// outside the footprint or read would change, the reservations held
	// cover it: the re-plan is applied in place of the reviewed plan (an
	// apply recorded before issue 10 §2 applied the reviewed plan instead:
	// appliedPlanWords tells them apart).
	replanUnchanged
	// replanWrite: another intent on the write set: stop; the re-plan is
	// open for review.
	replanWrite
	// replanRead: the re-plan would change what the plan reads: the
	// configuration is behind the head there; stop.
	replanRead
	// replanDiffers: the intent changed, but the marker does not say where
	// and the view has no footprint to tell (kl why).
	replanDiffers
	// replanOutside: the re-plan would also change something outside the
	// reviewed footprint; stop, the re-plan is open for review.
	replanOutside
	// replanBeyond: the re-plan needs reservations the apply does not
	// hold; stop, the re-plan is open for review.
	replanBeyond
)

// outcomeOf reads a "replanned" marker annotated by annotate.
func outcomeOf(m engine.Marker) replanOutcome {
	switch {
	case m.IntentChanged == nil:
		return replanUnknown
	case !*m.IntentChanged:
		return replanUnchanged
	case m.End.Is(engine.CauseOutsideFootprint):
		return replanOutside
	case m.End.Is(engine.CauseBeyondReservations):
		return replanBeyond
	case m.Class == engine.ClassReadChanged:
		return replanRead
	case m.Class == engine.ClassWriteChanged:
		return replanWrite
	}
	return replanDiffers
}

// annotate returns a copy of ms in which markers the engine stored without
// a class get one from stored facts (never from Reason text):
//
//   - staleness-failed: the class of its version in sp (markers stored
//     before engine.Marker.Class existed);
//   - replanned with a changed intent: where the differences fall on the
//     reviewed footprint fp, as engine.CompareReplan sorted them —
//     read-changed when every address is outside the write set and in the
//     read set (the configuration would revert what the plan reads),
//     write-changed otherwise. Without fp the class stays empty.
func annotate(ms []engine.Marker, fp *engine.Footprint, sp *engine.SincePlan) []engine.Marker {
	if ms == nil {
		return nil
	}
	out := make([]engine.Marker, len(ms))
	copy(out, ms)
	for i := range out {
		m := &out[i]
		if m.Class != "" {
			continue
		}
		switch m.Kind {
		case engine.MarkerStalenessFailed:
			if sp != nil {
				for _, e := range sp.Entries {
					if e.Serial == m.Serial {
						m.Class = e.Class
					}
				}
			}
		case engine.MarkerReplanned:
			if m.IntentChanged == nil || !*m.IntentChanged || fp == nil || outcomeOf(*m) == replanBeyond || outcomeOf(*m) == replanOutside {
				continue
			}
			m.Class = engine.ClassWriteChanged
			if len(m.Addresses) > 0 && len(m.Addresses.Overlapping(fp.Write)) == 0 {
				read := true
				for _, a := range m.Addresses {
					if len(engine.AddressSet{a}.Overlapping(fp.Read)) == 0 {
						read = false
					}
				}
				if read {
					m.Class = engine.ClassReadChanged
				}
			}
		}
	}
	return out
}

// findRun returns the run with id among rs, if any.
func findRun(rs []engine.Run, id string) *engine.Run {
	for i := range rs {
		if rs[i].ID == id {
			return &rs[i]
		}
	}
	return nil
}

// refusal is why an apply was refused, with the version, its producing
// run and PR and the addresses that decided it (docs/style.md 8).
type refusal struct {
	rule   string
	policy string // the rule in words
	serial int64  // the offending version (stale), or the head re-planned against
	run    string // producing run (stale), re-plan (intent, behind head), holder (conflict)
	plan   string // the refused apply's plan run
	actor  string
	pr     *engine.PullRequest
	addrs  engine.AddressSet
	words  sentence
	// Re-plan refusals: the re-plan run as it is now (nil when the view
	// does not hold it), the read-changed versions re-planned over, the
	// engine's stored reason, and the next step.
	outcome replanOutcome
	replan  *engine.Run
	changed []engine.SincePlanEntry
	reason  string
	// unreserved: the reservations a re-plan needs beyond those held.
	unreserved string
	// holder names a conflict's holding run: a backend lock by its
	// Terraform's lock (ADR 0056); nil: who(run, actor, pr).
	holder sentence
	// intents: a validation refusal's native and terraform-lane intents
	// of the differing instances, one "ADDRESS: ACTIONS DIGEST" a line.
	intents [2]string
	next    sentence
	nextCmd string // the command of next, for JSON
}

// replanStatusWords says where a re-plan stands now: "planned: open for
// review", "superseded: REASON", "applied by apply X".
func replanStatusWords(rp *engine.Run) sentence {
	if rp == nil {
		return nil
	}
	switch rp.Status {
	case engine.StatusPlanned:
		return words(toned(toneInfo, "planned"), ": open for review")
	case engine.StatusApplying, engine.StatusApplied:
		s := words(toned(statusTone(rp.Status), string(rp.Status)))
		if rp.ApplyRun != "" {
			s = words(s, " by apply ", runSpan(rp.ApplyRun))
		}
		return s
	}
	return words(toned(statusTone(rp.Status), string(rp.Status)), endSuffix(rp.ID, rp.End))
}

// changedIn names the read-changed versions a re-plan went over: "version
// 14 by run X (PR, erin)".
func changedIn(es []engine.SincePlanEntry) sentence {
	var parts []sentence
	for _, e := range es {
		parts = append(parts, words(fmt.Sprintf("version %d by ", e.Serial), who(e.Run, e.Actor, e.PR)))
	}
	return join(parts, "; ")
}

// readChangedOver returns the read-changed entries of sp that changed
// addresses in set, or every read-changed entry when none does (the
// re-plan may differ on an address that depends on the changed one).
func readChangedOver(sp *engine.SincePlan, set engine.AddressSet) []engine.SincePlanEntry {
	if sp == nil {
		return nil
	}
	all := sp.Of(engine.ClassReadChanged)
	var hit []engine.SincePlanEntry
	for _, e := range all {
		if len(e.Addresses.Overlapping(set)) > 0 {
			hit = append(hit, e)
		}
	}
	if len(hit) == 0 {
		return all
	}
	return hit
}

// replanRefusal is the refusal an intent-changed "replanned" marker m
// decided, told by its outcome.
func replanRefusal(a engine.Run, m engine.Marker, merged *engine.Marker, sp *engine.SincePlan, replans []engine.Run, plan *engine.Run) refusal {
	rp := findRun(replans, m.Other)
	r := refusal{rule: ruleIntent, serial: m.Serial, run: m.Other, plan: a.PlanRun, addrs: m.Addresses, replan: rp,
		changed: readChangedOver(sp, m.Addresses), reason: markerText(m), outcome: outcomeOf(m)}
	head := fmt.Sprintf(" against head %d", m.Serial)
	switch r.outcome {
	case replanRead:
		r.rule = ruleBehindHead
		r.policy = "plan input changed → re-plan against the head; the re-plan would change what the plan reads → stop: the configuration is behind the head there, so no comparison can vouch for the plan"
		replan, cmd := replanNext(a, merged, plan)
		r.nextCmd = cmd
		switch {
		case merged != nil:
			r.next = replan // its branch is merged: nothing to update it with
		case prOf(a, plan) != nil:
			r.next = words("merge the base branch into the PR, then ", replan)
		default:
			r.next = words("update the configuration with the head, then ", replan)
		}
		r.words = words(strongT(toneBad, "configuration behind the head"), ": re-plan ", runSpan(m.Other), head,
			" would also change ", addrs(m.Addresses), ", which this plan reads: applying would revert what ",
			versionsWords(r.changed), " changed there; update the configuration with the head and plan again")
	case replanWrite:
		r.policy = "plan input changed → re-plan against the head; intent changed on the write set → stop for review"
		r.nextCmd = "kl apply " + m.Other
		r.words = words(strongT(toneBad, "intent changed"), ": re-plan ", runSpan(m.Other), head,
			" plans something else for ", addrs(m.Addresses))
		if rp == nil || rp.Status == engine.StatusPlanned {
			r.next = words("review and apply ", runSpan(m.Other), ": ", code("kl run show "+m.Other), ", then ", cmdSpan(r.nextCmd, command{verb: verbApplyReplan}))
			r.words = words(r.words, "; review and apply ", runSpan(m.Other), " (", code(r.nextCmd), ")")
		} else {
			r.nextCmd = ""
			r.next = words("re-plan ", runSpan(m.Other), " is ", replanStatusWords(rp))
			r.words = words(r.words, "; re-plan ", runSpan(m.Other), " is now "+string(rp.Status))
		}
	case replanOutside, replanBeyond:
		reviewReplanRefusal(&r, m, rp, head)
	default:
		// The view cannot tell where the difference falls: say what the
		// engine stored, word for word.
		r.policy = "plan input changed → re-plan against the head; intent changed → stop"
		r.nextCmd = "kl run show " + a.ID
		r.next = words(code(r.nextCmd), " tells whether the re-plan is open for review or the configuration is behind the head")
		r.words = words(strongT(toneBad, "stopped by re-plan"), ": ")
		if t := markerText(m); t != "" {
			r.words = r.words.add(txt(t))
		} else {
			r.words = words(r.words, "re-plan ", runSpan(m.Other), head, " differs from the reviewed plan on ", addrs(m.Addresses))
		}
	}
	return r
}

// reviewReplanRefusal fills r, the refusal of a re-plan (m, now rp, against
// head) that would apply more than was reviewed: a change outside the
// footprint, or a reservation the apply does not hold. The re-plan is open
// for review.
func reviewReplanRefusal(r *refusal, m engine.Marker, rp *engine.Run, head string) {
	r.nextCmd = "kl apply " + m.Other
	if r.outcome == replanOutside {
		r.rule = ruleOutside
		r.policy = "plan input changed → re-plan against the head; the re-plan would also change something outside the reviewed footprint → stop for review: applying it would apply that unreviewed"
		r.words = words(strongT(toneBad, "re-plan changes outside the reviewed footprint"), ": re-plan ", runSpan(m.Other), head,
			" would also change ", addrs(m.Addresses), ", which this plan does not touch")
	} else {
		r.rule = ruleBeyond
		r.unreserved = "(not recorded)"
		if m.End != nil && m.End.Replan != nil {
			r.unreserved = reservationsText(m.End.Replan.Unreserved, 8)
		}
		r.policy = "plan input changed → re-plan against the head; the re-plan needs reservations beyond those held → stop for review"
		r.words = words(strongT(toneBad, "re-plan needs reservations beyond those held"), ": re-plan ", runSpan(m.Other), head,
			" needs "+r.unreserved)
	}
	if rp == nil || rp.Status == engine.StatusPlanned {
		r.next = words("review and apply ", runSpan(m.Other), ": ", code("kl run show "+m.Other), ", then ", cmdSpan(r.nextCmd, command{verb: verbApplyReplan}))
		r.words = words(r.words, "; review and apply ", runSpan(m.Other), " (", code(r.nextCmd), ")")
		return
	}
	r.nextCmd = ""
	r.next = words("re-plan ", runSpan(m.Other), " is ", replanStatusWords(rp))
	r.words = words(r.words, "; re-plan ", runSpan(m.Other), " is now "+string(rp.Status))
}

// versionsWords: "version 14" / "versions 14, 15" ("newer versions" when none).
func versionsWords(es []engine.SincePlanEntry) string {
	if len(es) == 0 {
		return "newer versions"
	}
	return versionWord(len(es)) + " " + serials(engine.Serials(es))
}

// refusals reads the refusal of apply run a from its markers (annotated);
// sp supplies the producing run's actor and the read-changed versions,
// replans the re-plans as they are now, plan (nil when the view does not
// hold it) the reviewed plan's scope for the re-plan command.
func refusals(a engine.Run, ms []engine.Marker, sp *engine.SincePlan, replans []engine.Run, plan *engine.Run) []refusal {
	if a.Status != engine.StatusRefused {
		return nil
	}
	var out []refusal
	for _, m := range ofKind(ms, a.ID, engine.MarkerStalenessFailed) {
		r := refusal{rule: ruleStale, serial: m.Serial, run: m.Other, pr: m.OtherPR, addrs: m.Addresses, plan: a.PlanRun,
			policy: "planned target changed → refuse (stale plan; re-plan needed)"}
		what := "planned target"
		if m.Class == engine.ClassReadChanged {
			r.rule, what = ruleStaleStrict, "plan input"
			r.policy = "--strict-since-plan: plan input changed → refuse (re-plan needed)"
		}
		r.next, r.nextCmd = replanNext(a, afterMergeOf(ms, a.ID), plan)
		var note string
		if sp != nil {
			for _, e := range sp.Entries {
				if e.Serial == m.Serial {
					r.actor, note = e.Actor, pushNote(e)
				}
			}
		}
		r.words = words(strongT(toneBad, "stale plan"), fmt.Sprintf(": version %d%s, by ", r.serial, note), who(r.run, r.actor, r.pr),
			", changed "+what+" ", addrs(r.addrs), "; re-plan")
		out = append(out, r)
	}
	for _, m := range ofKind(ms, a.ID, engine.MarkerReplanned) {
		if m.IntentChanged == nil || !*m.IntentChanged {
			continue
		}
		out = append(out, replanRefusal(a, m, afterMergeOf(ms, a.ID), sp, replans, plan))
	}
	for _, m := range ofKind(ms, a.ID, engine.MarkerValidated) {
		if m.IntentChanged != nil && *m.IntentChanged {
			out = append(out, validationRefusal(a, m, replans))
		}
	}
	if len(out) > 0 {
		return out
	}
	if a.End.Is(engine.CauseRefusedFenced) {
		return fenceRefusals(a)
	}
	if waits := ofKind(ms, a.ID, engine.MarkerWaited); len(waits) > 0 && lastOf(ms, a.ID, engine.MarkerReserved) == nil {
		for _, m := range waits {
			cmd := "kl apply --wait 10m " + a.PlanRun
			h := holderOf(a.End, m.Other, who(m.Other, "", m.OtherPR))
			out = append(out, refusal{rule: ruleConflict, run: m.Other, pr: m.OtherPR, addrs: m.Addresses, plan: a.PlanRun, holder: h,
				policy:  "write conflicts with anything on an overlapping address → wait (bounded) or refuse",
				words:   words(strongT(toneBad, conflictWords(a.End)), ": ", h, " holds ", addrs(m.Addresses)),
				next:    words("apply again when it is done, or wait for it: ", cmdSpan(cmd, command{verb: verbApplyWait})),
				nextCmd: cmd})
		}
		return out
	}
	reason := EndText(a.ID, a.End)
	if reason == "" {
		reason = "a rule stopped it before Terraform ran"
	}
	return []refusal{{rule: ruleOther, policy: reason, words: words(strongT(toneBad, reason))}}
}

// validationRefusal is apply a's refusal by its validation re-plan (a
// "validated" marker m whose intent changed; ADR 0069 §9): the terraform
// lane's plan m.Other of the whole configuration against head m.Serial
// plans something else for m.Addresses than the native-lane plan; both
// intents are the marker's (Extra "native", "terraform"). The validation
// plan stays open for review.
func validationRefusal(a engine.Run, m engine.Marker, replans []engine.Run) refusal {
	r := refusal{rule: ruleValidation, serial: m.Serial, run: m.Other, plan: a.PlanRun, addrs: m.Addresses, replan: findRun(replans, m.Other),
		reason: markerText(m), intents: [2]string{m.Extra["native"], m.Extra["terraform"]},
		policy: "validate the native lane: the terraform lane's plan of the whole configuration against the head must plan the same on the write set → otherwise refuse before Terraform runs; the validation plan is left open for review"}
	r.words = words(strongT(toneBad, "validation changed the native intent"), ": the terraform lane's plan ", runSpan(m.Other),
		fmt.Sprintf(" of the whole configuration against head %d plans something else for ", m.Serial), addrs(m.Addresses))
	if r.replan == nil || r.replan.Status == engine.StatusPlanned {
		r.nextCmd = "kl apply " + m.Other
		r.next = words("review and apply ", runSpan(m.Other), ": ", code("kl run show "+m.Other), ", then ", cmdSpan(r.nextCmd, command{verb: verbApplyValidation}))
	} else {
		r.next = words("validation plan ", runSpan(m.Other), " is ", replanStatusWords(r.replan))
	}
	return r
}

// holderOf names blocking run id of end: its backend lock (ADR 0056) when
// end's blockers say it is one, else def.
func holderOf(end *engine.End, id string, def sentence) sentence {
	if end == nil {
		return def
	}
	for _, b := range end.Blockers {
		if b.Run == id && b.Backend != nil {
			return words(blockerLockText(b))
		}
	}
	return def
}

// fenceRefusals are the refusals of apply a over fences (ADR 0035): one
// per fenced blocker — no wait lifts it, only a recovery or an unfence —
// then the live blockers as conflicts.
func fenceRefusals(a engine.Run) []refusal {
	var out []refusal
	for _, b := range a.End.Blockers {
		if !b.Fenced {
			cmd := "kl apply --wait 10m " + a.PlanRun
			h := holderOf(a.End, b.Run, who(b.Run, b.Actor, b.PR))
			out = append(out, refusal{rule: ruleConflict, run: b.Run, pr: b.PR, addrs: b.Addresses, plan: a.PlanRun, holder: h,
				policy:  "write conflicts with anything on an overlapping address → wait (bounded) or refuse",
				words:   words(strongT(toneBad, "reservations conflict"), ": ", h, " holds ", addrs(b.Addresses)),
				next:    words("apply again when it is done, or wait for it: ", cmdSpan(cmd, command{verb: verbApplyWait})),
				nextCmd: cmd})
			continue
		}
		started := "earlier"
		if !b.TerraformStarted.IsZero() {
			started = "at " + leaseTime(b.TerraformStarted)
		}
		out = append(out, refusal{rule: ruleFenced, run: b.Run, pr: b.PR, addrs: b.Addresses, plan: a.PlanRun,
			policy: "an apply whose holder died while its Terraform ran fences its write set → refuse at once: no wait lifts a fence, only its recovery or an unfence",
			words: words(strongT(toneBad, "fenced"), ": ", who(b.Run, b.Actor, b.PR), " fences ", addrs(b.Addresses),
				": its holder died while its Terraform ran (started "+started+"), so what the real objects are is unknown"),
			next: words("recover it: ", cmdSpan(recoverCommand(b.Run), command{verb: verbRecover, run: b.Run, pr: b.PR}),
				" commits what its Terraform last wrote; or, after checking the real objects, ",
				cmdSpan(unfenceCommand(b.Run), command{verb: verbUnfence, run: b.Run, pr: b.PR}), "; then apply again"),
			nextCmd: "kl run recover " + b.Run})
	}
	return out
}

// conflictWords heads a reservation conflict: "reservations conflict", and
// how long the run waited first when it did ("… after waiting 3s").
func conflictWords(end *engine.End) string {
	if end != nil && end.Waited > 0 {
		return "reservations conflict after waiting " + durationWords(end.Waited)
	}
	return "reservations conflict"
}

// prOf is the pull request of an apply, or of its plan.
func prOf(a engine.Run, plan *engine.Run) *engine.PullRequest {
	if a.PR != nil {
		return a.PR
	}
	if plan != nil {
		return plan.PR
	}
	return nil
}

// replanCommand is the `kl plan` that re-plans the reviewed plan's scope
// (engine.Scope: dir, -target, -var-file, -replace, a native-lane plan's
// --lane native and its changed files with --base-dir BASE, and after "--" its
// Terraform plan options: -destroy, -refresh-only, -refresh=false,
// -parallelism=N, and -var NAME=VALUE for each -var name, whose value no
// view holds: ADR 0045) against the head of its state. Without the plan's
// envelope the directory is left as DIR.
func replanCommand(a engine.Run, plan *engine.Run) string {
	state := a.State
	if plan != nil && plan.State != "" {
		state = plan.State
	}
	args := []string{"kl", "plan", "--state", shellWord(state)}
	if plan == nil || plan.Envelope == nil {
		return strings.Join(append(args, "-C", "DIR"), " ")
	}
	sc := plan.Envelope.Scope
	args = append(args, "-C", shellWord(sc.Dir))
	for _, flag := range []struct {
		name string
		vals []string
	}{{"--target", sc.Targets}, {"--var-file", sc.VarFiles}, {"--replace", sc.Replace}} {
		for _, v := range flag.vals {
			args = append(args, flag.name, shellWord(v))
		}
	}
	if sl := plan.Envelope.Slice; plan.Envelope.Lane == engine.LaneNative && sl != nil {
		// The native lane again, with its scope; the base's directory
		// is not kept, so it is a placeholder (ADR 0069).
		args = append(args, "--lane", "native")
		if sl.Scoped == "changed-files" {
			for _, f := range sc.ChangedFiles {
				args = append(args, "--changed-file", shellWord(f))
			}
			args = append(args, "--base-dir", "BASE")
		}
	}
	if o := sc.Options; !o.IsZero() {
		args = append(args, "--")
		args = append(args, o.Flags()...)
		for _, n := range o.Vars {
			args = append(args, "-var", n+"=VALUE")
		}
	}
	return strings.Join(args, " ")
}

// shellWord quotes s for a POSIX shell when it holds anything but plain
// path and address characters (an instance key such as ["a"] does).
func shellWord(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./:@%+=,$", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// replanNext is the next step after a plan turned stale: re-plan its scope
// — on the PR's current head when the run has a PR — with the `kl plan`
// command of its scope, which it also returns ("" when the view does not
// hold the plan's envelope and the command has a placeholder). merged is
// apply a's "after-merge" marker (nil: none): its pull request has merged,
// so its branch can no longer be re-planned, and the step is
// mergedReplanNext's.
func replanNext(a engine.Run, merged *engine.Marker, plan *engine.Run) (sentence, string) {
	if merged != nil && prOf(a, plan) != nil {
		return mergedReplanNext(a, plan)
	}
	cmd := replanCommand(a, plan)
	c := command{verb: verbReplan}
	if plan != nil && plan.Envelope != nil {
		c.options = plan.Envelope.Scope.Options
	}
	s := words("re-plan: ", cmdSpan(cmd, c))
	if prOf(a, plan) != nil {
		s = words("re-plan on the PR's current head: ", cmdSpan(cmd, c))
	}
	if plan == nil || plan.Envelope == nil {
		// The directory is a placeholder: no command to hand a machine.
		return words(s, " (the plan's scope: ", code("kl run show "+a.PlanRun), ")"), ""
	}
	if len(plan.Envelope.Scope.Options.Vars) > 0 {
		// VALUE is a placeholder: the -var values are the plan's secrets.
		return words(s, " (with the values of its -var options)"), ""
	}
	return s, cmd
}

// mergedReplanNext is the next step after the apply of a pull request that
// has merged was refused (issue 15): its change is on the base branch but
// not applied, and its branch can no longer be re-planned — nor, by klbot,
// planned at all (it plans open pull requests only). So: plan the base
// branch's newest commit, which holds the change, at merge (kl plan
// --at-merge: its reports say "planned at merge, not reviewed"), review
// what it changes, and apply it. The newest commit, not the pull
// request's merge commit: that one lacks what merged after it, which a
// plan of it against a head that holds those changes would revert. The
// kl command stays kl's in every view: no /kl comment plans a merged pull
// request. It is returned for machines unless it holds a placeholder (the
// scope not in the view, -var values).
func mergedReplanNext(a engine.Run, plan *engine.Run) (sentence, string) {
	pr := prOf(a, plan)
	cmd := replanCommand(a, plan)
	cmd = strings.Replace(cmd, " -C ", " --pr "+shellWord(pr.String())+` --commit "$(git rev-parse HEAD)" --at-merge -C `, 1)
	state := "its pull request has merged, and its change is not applied"
	if a.Status != engine.StatusRefused {
		// Failed, interrupted or lost its lease: Terraform may have
		// applied part of it (a partial version, or one to recover).
		state = "its pull request has merged, and its change is not fully applied"
	}
	s := words(strongT(toneBad, state),
		": its branch can no longer be re-planned. In a checkout of the base branch's newest commit, which holds the change, plan it at merge: ",
		code(cmd), "; review what that plan changes, then ", code("kl apply RUN"), " (its reports say: planned at merge, not reviewed)")
	switch {
	case plan == nil || plan.Envelope == nil:
		return words(s, " (the plan's scope: ", code("kl run show "+a.PlanRun), ")"), ""
	case len(plan.Envelope.Scope.Options.Vars) > 0:
		return words(s, " (with the values of its -var options)"), ""
	}
	return s, cmd
}

// afterMergeOf is run id's "after-merge" marker in ms, nil when it has
// none (an apply of an open pull request, or of none).
func afterMergeOf(ms []engine.Marker, id string) *engine.Marker {
	return lastOf(ms, id, engine.MarkerAfterMerge)
}

// verdict is a one-line answer with its tone and a machine word.
type verdict struct {
	word  string // JSON "verdict"
	tone  tone
	words sentence
}

// applyVerdict is the verdict line of an apply run; ms are its story's
// markers (annotated), replans its re-plans as they are now, plan the
// reviewed plan when the view holds it.
func applyVerdict(a engine.Run, ms []engine.Marker, sp *engine.SincePlan, v *engine.Version, replans []engine.Run, plan *engine.Run) verdict {
	word := string(engine.ApplyVerdict(a.Status))
	switch a.Status {
	case engine.StatusApplied:
		s := words(strongT(toneGood, "applied"), ": committed ")
		if v != nil {
			p := v.Provenance
			s = words(s, commitWords(p, mergedOnto(v, ms)), ", ")
			if p.Exact {
				return verdict{word, toneGood, s.add(toned(toneGood, "exact"))}
			}
			return verdict{word, deviationTone(p), s.add(toned(deviationTone(p), deviationShort(p.Deviation)))}
		}
		if a.CommittedSerial == 0 {
			// A plan without changes: nothing to apply or commit.
			return verdict{word, toneGood, words(strongT(toneGood, "applied"), ": "+orWords(EndText(a.ID, a.End), "nothing committed"))}
		}
		return verdict{word, toneGood, s.add(txt(fmt.Sprintf("version %d", a.CommittedSerial)))}
	case engine.StatusApplying:
		return verdict{word, toneInfo, words(strongT(toneInfo, "applying"), ": reservations held, Terraform is running")}
	case engine.StatusWaiting:
		var parts []sentence
		for _, m := range ofKind(ms, a.ID, engine.MarkerWaited) {
			parts = append(parts, words(who(m.Other, "", m.OtherPR), " over ", addrs(m.Addresses)))
		}
		return verdict{word, toneWarn, words(strongT(toneWarn, "waiting"), " on ", join(parts, "; "))}
	case engine.StatusRefused:
		rs := refusals(a, ms, sp, replans, plan)
		s := words(toned(toneBad, "refused: "), rs[0].words)
		if len(rs) > 1 {
			s = s.add(txt(fmt.Sprintf(" (and %d more)", len(rs)-1)))
		}
		return verdict{word, toneBad, s}
	}
	return verdict{word, toneBad, endVerdictWords(a, v, lastOf(ms, a.ID, engine.MarkerRecovered))}
}

func orWords(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// endVerdictWords says how a failed, interrupted or expired apply ended,
// once: "interrupted during terraform apply: committed what Terraform
// wrote (version 13, partial)", "failed: terraform apply: …; committed what
// Terraform wrote (version 13, partial)"; for a run recovered since
// (recovered, its "recovered" marker), "…; `kl run recover` committed what
// Terraform had written (version 13, partial)".
func endVerdictWords(a engine.Run, v *engine.Version, recovered *engine.Marker) sentence {
	var end engine.End
	if a.End != nil {
		end = *a.End
	}
	if recovered != nil && !engine.LateResult(a) {
		// Done: the end's "kl run recover" hint is not news (but for a
		// late result that waits for its own recovery, ADR 0071).
		end.Recoverable = false
	}
	lost := 0
	if v != nil && v.Provenance.Deviation != nil {
		lost = len(v.Provenance.Deviation.Lost)
	}
	if lost > 0 {
		// The provenance names each address the head kept.
		end.Lost, end.NoChange = nil, false
	}
	s := endWordsOf(a.Status, a.ID, &end, toneBad)
	s[0] = strongT(toneBad, s[0].text)
	if a.CommittedSerial == 0 {
		return s
	}
	what := fmt.Sprintf("version %d", a.CommittedSerial)
	if lost > 0 {
		// The lease lapsed before the commit: the head kept what others
		// changed meanwhile.
		return words(s, "; committed ", strong(what),
			toned(toneBad, fmt.Sprintf(" without %s the head kept: what this apply did there is in no version", plural(lost, "address", "addresses"))))
	}
	if v == nil || v.Provenance.Partial {
		what += ", partial"
	}
	if recovered != nil {
		s = words(s, "; ", code("kl run recover"), " committed what Terraform had written ("+what+")")
		if v != nil && v.Provenance.Deviation != nil && len(v.Provenance.Deviation.InputsChanged) > 0 {
			// The run keeps its end, which cannot say it (ADR 0072).
			s = s.add(toned(toneBad, "; "+inputsChangedText(v.Provenance.Deviation.InputsChanged)))
		}
		return s
	}
	if saysCommitted(a.End) {
		return s.add(txt(" (" + what + ")"))
	}
	return s.add(txt("; committed what Terraform wrote (" + what + ")"))
}

// saysCommitted reports whether an end's words close with "committed what
// Terraform wrote": an interruption during terraform apply, alone or as
// the last words of a lease-lost commit.
func saysCommitted(end *engine.End) bool {
	switch {
	case end == nil:
		return false
	case end.Cause == engine.CauseInterrupted:
		return end.Serial > 0
	case end.Cause == engine.CauseLeaseLost:
		return len(end.Lost) == 0 && !end.NoChange && saysCommitted(end.Then)
	}
	return false
}

// sameEnd reports whether marker m records the end run r has.
func sameEnd(m engine.Marker, r engine.Run) bool {
	if m.End != nil && r.End != nil {
		return reflect.DeepEqual(*m.End, *r.End)
	}
	return markerText(m) == EndText(r.ID, r.End) // stored before ends were typed

}

// Since-plan verdict actions (JSON "action").
const (
	actionProceed = "proceed"
	actionReplan  = "re-plan"
	actionRefused = "refused"
	actionClosed  = "closed" // the plan can no longer be applied
)

// sincePlanVerdict says what an apply of plan would do now under the
// default policy: refuse on a planned target changed, re-plan on a plan
// input changed, proceed otherwise. The plan's own apply
// (engine.SincePlanEntry.OwnApply) is not a conflict. A plan that can no
// longer be applied is closed, with what closed it.
func sincePlanVerdict(sp *engine.SincePlan, plan engine.Run) (string, verdict) {
	if !plan.Status.Open() {
		return actionClosed, verdict{actionClosed, toneInfo, words(strongT(toneInfo, "closed"), ": ", closedWords(sp, plan))}
	}
	if plan.Status == engine.StatusApplying {
		s := words(strongT(toneInfo, "applying"), ": being applied now")
		if plan.ApplyRun != "" {
			s = words(strongT(toneInfo, "applying"), ": being applied now by apply ", runSpan(plan.ApplyRun))
		}
		return actionClosed, verdict{actionClosed, toneInfo, s}
	}
	if sp == nil {
		return actionProceed, verdict{actionProceed, toneGood, words(strongT(toneGood, "proceed"))}
	}
	var write, read, indep []engine.SincePlanEntry
	for _, e := range sp.Entries {
		switch {
		case e.OwnApply:
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
		next, _ := replanNext(engine.Run{State: plan.State, PlanRun: plan.ID}, nil, &plan)
		return actionRefused, verdict{actionRefused, toneBad, words(strongT(toneBad, "refused"),
			fmt.Sprintf(": an apply now is refused as stale: version %d, by ", e.Serial), who(e.Run, e.Actor, e.PR),
			", changed planned target ", addrs(e.Addresses), "; ", next)}
	case len(read) > 0:
		return actionReplan, verdict{actionReplan, toneWarn, words(strongT(toneWarn, "re-plan"),
			fmt.Sprintf(": an apply now re-plans against head %d (plan input changed in %s %s) and applies that re-plan only if its intent is unchanged, it changes nothing outside this plan's footprint or that this plan reads, and it needs no reservation beyond this plan's; otherwise it stops for review",
				sp.HeadSerial, versionWord(len(read)), serials(engine.Serials(read))))}
	case len(indep) > 0:
		return actionProceed, verdict{actionProceed, toneGood, words(strongT(toneGood, "proceed"),
			fmt.Sprintf(": an apply now proceeds; %s %s, committed since serial %d, changed nothing this plan reads or writes",
				versionWord(len(indep)), serials(engine.Serials(indep)), sp.SourceSerial))}
	}
	return actionProceed, verdict{actionProceed, toneGood, words(strongT(toneGood, "proceed"), ": "+headUnchanged(sp.SourceSerial))}
}

// closedWords says what closed a plan: "applied by apply X (version 15);
// nothing to apply", "apply X found this plan stale; it cannot be
// applied: re-plan", "superseded: REASON; …".
func closedWords(sp *engine.SincePlan, plan engine.Run) sentence {
	by := plan.ApplyRun
	switch plan.Status {
	case engine.StatusApplied:
		s := words("applied")
		if by != "" {
			s = words(s, " by apply ", runSpan(by))
		}
		if sp != nil {
			for _, e := range sp.Entries {
				if e.OwnApply {
					s = s.add(txt(fmt.Sprintf(" (version %d)", e.Serial)))
				}
			}
		}
		return s.add(txt("; nothing to apply"))
	case engine.StatusStale:
		s := words("this plan is stale")
		if by != "" {
			s = words("apply ", runSpan(by), " found this plan stale")
		}
		return s.add(txt("; it cannot be applied: re-plan"))
	case engine.StatusSuperseded, engine.StatusFailed:
		s := words(string(plan.Status))
		switch {
		case plan.End != nil:
			return s.add(txt(": " + EndText(plan.ID, plan.End)))
		case by != "" && plan.Status == engine.StatusSuperseded:
			s = words(s, " by the re-plan of apply ", runSpan(by))
		case by != "":
			s = words(s, " in apply ", runSpan(by))
		}
		return s.add(txt("; it cannot be applied: re-plan"))
	}
	return words("plan is " + string(plan.Status) + "; it cannot be applied")
}
