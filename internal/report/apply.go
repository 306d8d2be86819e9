package report

import (
	"fmt"
	"io"

	"github.com/kilolock/kilolock/internal/engine"
)

// Apply renders an apply run (`kl apply`, klbot's apply check run and
// sticky comment) from the story of the apply run (engine.RunStory of the
// ApplyOutcome's run, or of the refused run): the verdict first; then what
// it reserved and whom it waited for; the since-plan versions by class
// (ADR D3, D8); the allowed-because facts in words (ADR D2); the re-plans
// that re-checked the plan and how each ended, and fallback markers (ADR
// D4); the committed version with its provenance and whether it matched
// the plan (ADR D5) — or, for a refusal, the rule, the version, its
// producing run and PR, and the addresses. A day-2 operation's run (an
// apply run without a plan, ADR 0055) is rendered as its story (RunStory).
func Apply(w io.Writer, s *engine.RunStory, o Options) error {
	if s == nil || s.Run.Kind != engine.KindApply {
		return fmt.Errorf("rendering apply: want the story of an apply run")
	}
	if operationRun(s.Run) {
		return RunStory(w, s, o)
	}
	s = prepared(s)
	return emit(w, o, func() *doc { return applyDoc(s) }, func() any { return applyJSON(s) })
}

// prepared returns a shallow copy of s whose markers carry the classes the
// reviewed plan's footprint and the since-plan decide (annotate).
func prepared(s *engine.RunStory) *engine.RunStory {
	c := *s
	var fp *engine.Footprint
	if s.Plan != nil && s.Plan.Envelope != nil {
		f := s.Plan.Envelope.Footprint
		fp = &f
	}
	c.Markers = annotate(s.Markers, fp, s.SincePlan)
	return &c
}

func applyDoc(s *engine.RunStory) *doc {
	a := s.Run
	v := applyVerdict(a, s.Markers, s.SincePlan, s.Version, s.Replans, s.Plan)
	d := &doc{tone: v.tone, more: "kl run show " + a.ID,
		title: words("Apply ", runSpan(a.ID), " of plan ", runSpan(a.PlanRun), " on ", strong(a.State))}
	d.summary = append(d.summary, para(v.words), applyFields(s, &a))
	applySections(d, s, &a, "")
	if s.Version != nil {
		deviationSections(d, s.Version.Provenance.Deviation)
	}
	applyLogResources(d, s.ApplyLog, a.ID)
	return d
}

// planFieldWords says which plan an apply applied, or for an apply that
// never ran Terraform, which plan it was for and what became of it.
func planFieldWords(s *engine.RunStory, a *engine.Run) sentence {
	taken, serial := replanTaken(s, a)
	noun := reviewedNoun(atMerge(s, a))
	switch {
	case a.CommittedSerial > 0 || a.Status == engine.StatusApplied:
		pl := appliedPlanWords(noun, a.PlanRun, replanCheck(s.Markers, a.ID), taken, serial)
		if p := reviewedPlan(s, a); p != nil && p.Status == engine.StatusFailed {
			pl = pl.add(txt(" (now failed: it cannot be applied again)"))
		}
		return pl
	case a.Status == engine.StatusApplying && taken != "":
		return words(noun, runSpan(a.PlanRun), "; "+replannedHead(replanCheck(s.Markers, a.ID), taken, serial)+", intent unchanged: applying the re-plan ", runSpan(taken))
	case a.Status == engine.StatusApplying:
		pl := words(noun, runSpan(a.PlanRun))
		if c := replanCheck(s.Markers, a.ID); c != nil {
			pl = words(pl, "; re-checked by re-plan ", runSpan(c.Other), fmt.Sprintf(" against head %d: intent unchanged", c.Serial))
		}
		if atMerge(s, a) {
			return pl.add(txt("; applying it"))
		}
		return pl.add(txt("; applying the reviewed plan"))
	}
	pl := words(noun, runSpan(a.PlanRun))
	if p := reviewedPlan(s, a); p != nil && !a.Status.Open() {
		switch p.Status {
		case engine.StatusStale, engine.StatusSuperseded, engine.StatusFailed:
			pl = pl.add(txt(" (now " + string(p.Status) + ")"))
		case engine.StatusPlanned:
			pl = pl.add(txt(" (open again: it can be applied again)"))
		}
	}
	return pl
}

// applyPRField is apply run a's pull request field: "acme/infra#42", and
// for a merge-time apply (its "after-merge" marker in ms) ", merged as
// C: applied after the merge" — its head is no longer what the base
// branch has.
func applyPRField(ms []engine.Marker, a *engine.Run) sentence {
	pr := prField(a.PR, "")
	m := afterMergeOf(ms, a.ID)
	if m == nil || len(pr) == 0 {
		return pr
	}
	pr = pr.add(txt(", merged"))
	if m.Commit != "" {
		pr = pr.add(txt(" as "), code(shortSHA(m.Commit)))
	}
	return pr.add(txt(": applied after the merge"))
}

// envelopePRField is a plan envelope's pull request field: "acme/infra#42
// at C", or for a plan made at merge (Envelope.PlannedAtMerge), whose
// commit is one of the base branch after the merge, not the pull
// request's, "acme/infra#42, merged: planned at C of its base branch".
func envelopePRField(env *engine.Envelope) sentence {
	if !env.PlannedAtMerge || env.PR == nil {
		return prField(env.PR, env.CommitSHA)
	}
	s := words(prWords(env.PR), ", merged")
	if env.CommitSHA != "" {
		s = s.add(txt(": planned at "), code(env.CommitSHA), txt(" of its base branch"))
	}
	return s
}

// atMerge reports whether apply a's plan was made at merge, not reviewed
// (Envelope.PlannedAtMerge).
func atMerge(s *engine.RunStory, a *engine.Run) bool {
	p := reviewedPlan(s, a)
	return p != nil && p.Envelope != nil && p.Envelope.PlannedAtMerge
}

// unreviewedWarning is the apply report's loud field for a plan made at
// merge: "applied a plan nobody reviewed" once Terraform applied it.
func unreviewedWarning(s *engine.RunStory, a *engine.Run) sentence {
	if !atMerge(s, a) {
		return nil
	}
	what := "applies a plan nobody reviewed"
	switch {
	case a.CommittedSerial > 0 || a.Status == engine.StatusApplied:
		what = "applied a plan nobody reviewed"
	case !a.Status.Open():
		what = "was to apply a plan nobody reviewed"
	}
	return words(toned(toneWarn, "⚠ this apply "+what), ": plan ", runSpan(a.PlanRun),
		" was planned at merge, when its pull request had no applicable reviewed plan, not in the pull request where it could be reviewed")
}

// reviewedPlan returns the story's plan when it is apply a's reviewed plan.
func reviewedPlan(s *engine.RunStory, a *engine.Run) *engine.Run {
	if p := s.Plan; p != nil && p.ID == a.PlanRun {
		return p
	}
	return nil
}

// applyFields is an apply run in brief: who, which plan, what it reserved,
// the since-plan counts it acted on and, for an apply that stopped
// part-way, how its commit differs from the plan (the verdict names the
// version).
func applyFields(s *engine.RunStory, a *engine.Run) fields {
	var f fields
	f = f.addField("actor", words(a.Actor))
	f = f.addField("PR", applyPRField(s.Markers, a))
	f = f.addField("plan", planFieldWords(s, a))
	if p := reviewedPlan(s, a); p != nil && p.Envelope != nil {
		f = f.addField("lane", laneWords(p.Envelope))
	}
	f = f.addField("UNREVIEWED", unreviewedWarning(s, a))
	if m := lastOf(s.Markers, a.ID, engine.MarkerValidated); m != nil && (m.IntentChanged == nil || !*m.IntentChanged) {
		// A refusal by it is its own section (validationRefusal).
		f = f.addField("validation", words(toned(toneGood, "native intent unchanged"), ": the terraform lane's plan ", runSpan(m.Other),
			fmt.Sprintf(" of the whole configuration against head %d plans the same on the write set", m.Serial)))
	}
	if res := lastOf(s.Markers, a.ID, engine.MarkerReserved); res != nil {
		f = f.addField("reserved", reservedWords(res, ofKind(s.Markers, a.ID, engine.MarkerWaited)))
	}
	if s.SincePlan != nil {
		when := "at preflight"
		switch {
		case s.SincePlanLive:
			when = "now"
		case s.SincePlan.AtCommit:
			when = "at commit" // a version after the preflight changed the footprint (ADR 0072)
		}
		f = f.addField("since plan", countsWords(s.SincePlan.Summary(), when))
	}
	f = f.addField("terraform", applyLogWords(s.ApplyLog))
	if s.Version != nil && a.Status != engine.StatusApplied {
		p := s.Version.Provenance
		if p.Exact {
			f = f.addField("matches plan", words(toned(toneGood, "exact")))
		} else {
			f = f.addField("matches plan", words(toned(deviationTone(p), deviationShort(p.Deviation))))
		}
	}
	if s.Version != nil && overwritten(s.Version.Provenance.Deviation) {
		f = f.addField("WARNING", overwrittenWarning(s.Version.Provenance))
	}
	return f
}

// reservedWords: "5 reservations at T, after waiting 4.2s for run X over A".
func reservedWords(res *engine.Marker, waits []engine.Marker) sentence {
	s := words(plural(res.Count, "reservation", "reservations"), " at "+fmtTime(res.At))
	if res.Waited > 0 {
		s = s.add(txt(", after waiting " + durationWords(res.Waited)))
		var parts []sentence
		for _, m := range waits {
			parts = append(parts, words(waitedWho(m.Other, m.OtherPR, m.OtherBackend, m.OtherActor), " over ", addrs(m.Addresses)))
		}
		if len(parts) > 0 {
			s = words(s, " for ", join(parts, " and "))
		}
	}
	return s
}

// replanFields tells a re-check by re-planning that did not stop the apply
// (a stopping one is told by its refusal): what it went over, how it
// ended, what was applied, and where the re-plan run stands now.
func replanFields(s *engine.RunStory, a *engine.Run, m engine.Marker) fields {
	var f fields
	f = f.addField("plan input changed in", changedIn(readChangedOver(s.SincePlan, nil)))
	switch outcomeOf(m) {
	case replanUnchanged:
		if taken, _ := replanTaken(s, a); taken == m.Other {
			return append(f, replanAppliedFields(s, a, m)...)
		}
		// Recorded before issue 10 §2: the reviewed plan was applied.
		f = f.addField("outcome", words(toned(toneGood, "intent unchanged"),
			": the re-plan plans the same for the reviewed write set and changes nothing this plan reads"))
		result := words("the reviewed plan ", runSpan(a.PlanRun), " proceeds")
		if a.CommittedSerial > 0 {
			result = words("applied the reviewed plan ", runSpan(a.PlanRun))
		}
		if p := s.Plan; p != nil && p.Envelope != nil {
			result = result.add(txt(fmt.Sprintf(" to its own snapshot (serial %d); the snapshot-merge commit keeps what the newer versions changed", p.Envelope.SourceSerial)))
		}
		f = f.addField("result", result)
		if rp := findRun(s.Replans, m.Other); rp != nil {
			st := words(toned(statusTone(rp.Status), string(rp.Status)))
			if rp.Status == engine.StatusSuperseded {
				st = st.add(txt(": it was a check, not what was applied"))
			}
			f = f.addField("re-plan status", st)
		}
	default:
		f = f.addField("outcome", markerWords(m))
		f = mergeCommitField(f, s, a, m)
		f = f.addField("re-plan status", replanStatusWords(findRun(s.Replans, m.Other)))
	}
	return f
}

// replanAppliedFields tells a re-plan (marker m) that apply a applies in
// place of its reviewed plan: why that is safe, what was applied to which
// snapshot, and where the re-plan stands now.
func replanAppliedFields(s *engine.RunStory, a *engine.Run, m engine.Marker) fields {
	var f fields
	f = f.addField("outcome", words(toned(toneGood, "intent unchanged"),
		": the re-plan plans the same for the reviewed write set, changes nothing outside this plan's footprint or that it reads, and needs no reservation beyond those held"))
	result := words("applying the re-plan ", runSpan(m.Other))
	if a.CommittedSerial > 0 || a.Status == engine.StatusApplied {
		result = words("applied the re-plan ", runSpan(m.Other))
	} else if !a.Status.Open() {
		result = words("Terraform was given the re-plan ", runSpan(m.Other))
	}
	result = result.add(txt(fmt.Sprintf(" in place of the reviewed plan, to the head it was made against (serial %d): every value Terraform computes comes from current inputs, not from the reviewed plan's snapshot (serial %d)",
		m.Serial, reviewedSource(s, a))))
	f = f.addField("result", result)
	f = mergeCommitField(f, s, a, m)
	if rp := findRun(s.Replans, m.Other); rp != nil {
		f = f.addField("re-plan status", replanStatusWords(rp))
	}
	return f
}

// mergeCommitField adds what re-plan m planned when it planned the pull
// request's merge commit (m.Commit, ADR 0062), not the reviewed
// configuration: that commit, and the reviewed plan's commit it holds.
func mergeCommitField(f fields, s *engine.RunStory, a *engine.Run, m engine.Marker) fields {
	if m.Commit == "" {
		return f
	}
	w := words("the merge commit ", code(shortSHA(m.Commit)),
		": the pull request's change on the base branch as it merged, with what the base gained before it (a pull request merged ahead of it), not the reviewed configuration alone")
	if p := reviewedPlan(s, a); p != nil && p.Envelope != nil && p.Envelope.CommitSHA != "" {
		w = words("the merge commit ", code(shortSHA(m.Commit)), " of the reviewed commit ", code(shortSHA(p.Envelope.CommitSHA)),
			": the pull request's change on the base branch as it merged, with what the base gained before it (a pull request merged ahead of it)")
	}
	return f.addField("configuration re-planned", w)
}

// reviewedSource is the serial apply a's reviewed plan was made against
// (0 when the story does not hold its envelope).
func reviewedSource(s *engine.RunStory, a *engine.Run) int64 {
	if p := reviewedPlan(s, a); p != nil && p.Envelope != nil {
		return p.Envelope.SourceSerial
	}
	return 0
}

// endTitle is the section title of how an apply ended other than applied
// or refused: "Failed", "Interrupted", "Lease expired".
func endTitle(st engine.RunStatus) string {
	switch st {
	case engine.StatusInterrupted:
		return "Interrupted"
	case engine.StatusLeaseExpired:
		return "Lease expired"
	}
	return "Failed"
}

// endFields tells what a failed, interrupted or expired apply left behind
// — the verdict line says why it stopped, once: what Terraform wrote; when
// no version holds it (the holder died mid-apply), what its last state
// changed and the `kl run recover` that commits it, or, when Kilolock saw
// nothing although Terraform had started, that infrastructure may have
// changed; what a recovery committed; the resources it left tainted (the
// next plan replaces them); any other failure; and what to do next.
func endFields(s *engine.RunStory, a *engine.Run) fields {
	var f fields
	rec := recoverableOf(s.Recoverable, a)
	started := lastOf(s.Markers, a.ID, engine.MarkerApplyStarted)
	switch m := lastOf(s.Markers, a.ID, engine.MarkerApplied); {
	case m != nil && len(m.Addresses) > 0:
		f = f.addField("terraform wrote", words(countWords(m.Addresses)+": ", addrs(m.Addresses)))
	case rec != nil:
		it := "it"
		if len(rec.Changed) > 1 {
			it = "them"
		}
		f = f.addField("not committed", words(addrs(rec.Changed), ": Terraform wrote "+it+"; no version holds "+it+" yet"))
	case a.CommittedSerial == 0 && started != nil:
		f = f.addField("committed", words("nothing"))
		f = f.addField("terraform", startedUnseenWords(started))
	case a.CommittedSerial == 0:
		f = f.addField("committed", words("nothing"))
	}
	if rec != nil {
		f = f.addField("recover", recoverWords(rec, a.PR))
	}
	if m := lastOf(s.Markers, a.ID, engine.MarkerRecovered); m != nil {
		f = f.addField("recovered", recoveredWords(*m))
	}
	if v := s.Version; v != nil && tainted(v.Provenance.Deviation) {
		t := v.Provenance.Deviation.Tainted
		f = f.addField("tainted", words(addrs(t), toned(toneBad, ": "+taintedMeaning(len(t)))))
	}
	for _, m := range ofKind(s.Markers, a.ID, engine.MarkerFailed) {
		if !sameEnd(m, *a) {
			f = f.addField("also", markerWords(m))
		}
	}
	f = f.addField("next", endNext(s, a))
	return f
}

// endNext is what to do after an apply that did not commit the plan: apply
// the plan again when the engine handed it back (nothing was written), or
// re-plan when it can no longer be applied.
func endNext(s *engine.RunStory, a *engine.Run) sentence {
	p := reviewedPlan(s, a)
	if rec := recoverableOf(s.Recoverable, a); rec != nil {
		// First commit what Terraform wrote, or the next plan creates it
		// again.
		next, _ := replanNext(*a, afterMergeOf(s.Markers, a.ID), p)
		if h := rec.HolderAlive; h != nil {
			// Recover refuses while it lives (ADR 0071).
			return words(fmt.Sprintf("wait for its holder, process %d on host %s, to finish (its own commit lifts the fence), or stop it (kill %d); then ", h.PID, h.Host, h.PID),
				cmdSpan(recoverCommand(rec.Run), command{verb: verbRecover, run: rec.Run, pr: a.PR, self: true}), " commits what Terraform wrote; then ", next)
		}
		return words("recover first: ", cmdSpan(recoverCommand(rec.Run), command{verb: verbRecover, run: rec.Run, pr: a.PR, self: true}), " commits what Terraform wrote as a partial version (otherwise the next plan creates it again); then ", next)
	}
	if a.End != nil && len(a.End.Fenced) > 0 && a.End.Lifted == "" && a.CommittedSerial == 0 {
		// Fenced, and Kilolock saw nothing Terraform wrote: no recovery
		// lifts the fence, and until it is lifted every apply there —
		// a re-plan's too — is refused (ADR 0035).
		lift := words("check the real objects (Terraform started; Kilolock saw nothing it wrote), then lift the fence: ",
			cmdSpan(unfenceCommand(a.ID), command{verb: verbUnfence, run: a.ID, pr: a.PR, self: true}))
		if next, _ := replanNext(*a, afterMergeOf(s.Markers, a.ID), p); p != nil && p.Status != engine.StatusPlanned {
			return words(lift, "; then ", next)
		}
		return lift
	}
	if p == nil {
		return nil
	}
	switch p.Status {
	case engine.StatusPlanned:
		if s.SincePlanLive && s.SincePlan != nil && len(s.SincePlan.Of(engine.ClassWriteChanged)) > 0 {
			// Open, but a version since changed what it writes: an apply
			// now is refused as stale.
			next, _ := replanNext(*a, afterMergeOf(s.Markers, a.ID), p)
			return next
		}
		return words("apply the plan again: ", cmdSpan("kl apply "+p.ID, command{verb: verbApply}))
	case engine.StatusStale, engine.StatusSuperseded, engine.StatusFailed:
		next, _ := replanNext(*a, afterMergeOf(s.Markers, a.ID), p)
		return next
	}
	return nil
}

// recoverableOf returns rec when it is apply run a's: what a's Terraform
// wrote that no version holds yet.
func recoverableOf(rec *engine.Recoverable, a *engine.Run) *engine.Recoverable {
	if rec == nil || a == nil || rec.Run != a.ID || (a.CommittedSerial != 0 && !engine.LateResult(*a)) {
		return nil
	}
	return rec
}

// recoverCommand is kl's command that recovers apply run run (ADR 0035).
func recoverCommand(run string) string { return "kl run recover " + run }

// unfenceCommand is kl's command that lifts the fence of apply run run
// without a commit (ADR 0035).
func unfenceCommand(run string) string { return "kl run unfence " + run + " --reason TEXT" }

// recoverWords: "Terraform had written 2 resources when it stopped: `kl run
// recover RUN`"; pr is the apply's pull request (on it: `/kl recover -p P`).
//
// A late result (ADR 0071): "Terraform's final state, kept after version 5
// was recovered, changes 1 resource more: …". A holder alive on this host:
// "Terraform has written 2 resources so far; its holder process 42 on host
// h is still alive: wait for it to finish, or stop it (kill 42), then …".
func recoverWords(rec *engine.Recoverable, pr *engine.PullRequest) sentence {
	cmd := cmdSpan(recoverCommand(rec.Run), command{verb: verbRecover, run: rec.Run, pr: pr, self: true})
	switch {
	case rec.HolderAlive != nil:
		h := rec.HolderAlive
		return words(toned(toneBad, "Terraform has written "+countWords(rec.Changed)+" so far"),
			fmt.Sprintf("; its holder process %d on host %s is still alive: wait for it to finish, or stop it (kill %d), then ", h.PID, h.Host, h.PID), cmd)
	case rec.LateAfter != 0:
		return words(toned(toneBad, fmt.Sprintf("Terraform's final state, kept after version %d was recovered, changes %s more", rec.LateAfter, countWords(rec.Changed))), ": ", cmd)
	}
	return words(toned(toneBad, "Terraform had written "+countWords(rec.Changed)+" when it stopped"), ": ", cmd)
}

// startedUnseenWords: Terraform ran for an apply that committed nothing,
// and Kilolock saw nothing it wrote.
func startedUnseenWords(m *engine.Marker) sentence {
	return words(toned(toneBad, "started"), fmt.Sprintf(" at %s on serial %d, and Kilolock saw nothing it wrote: infrastructure may have changed all the same; check it before you plan again",
		fmtTime(m.At), m.Serial))
}

// recoveredWords tells a "recovered" marker in a run's end fields.
func recoveredWords(m engine.Marker) sentence {
	s := words(code("kl run recover"), " committed ", strong(fmt.Sprintf("version %d", m.Serial)), " at "+fmtTime(m.At)+" "+recoveredFrom(m.Extra["artifact"]))
	if len(m.Addresses) > 0 {
		s = words(s, "; kept at the head: ", addrs(m.Addresses))
	}
	return words(s, uncheckedHolderWords(m))
}

// applySections adds what an apply decided and committed: refusal or how
// it ended, since-plan, allowed-because, re-plans and fallbacks, and
// provenance. a is the apply run of the story; prefix titles its first
// sections ("Last attempt " for the apply of a plan open again). Every fact
// the apply was allowed by is listed, "head unchanged" too, in every view
// (kl and GitHub alike). The full deviation lists
// are left to the caller, to come last.
func applySections(d *doc, s *engine.RunStory, a *engine.Run, prefix string) {
	rs := refusals(*a, s.Markers, s.SincePlan, s.Replans, s.Plan)
	told := map[string]bool{}
	for _, r := range rs {
		d.section(words(toned(toneBad, prefix+"Refused: "+ruleTitle[r.rule])), refusalFields(r))
		if replanRule(r.rule) {
			told[r.run] = true
		}
	}
	switch a.Status {
	case engine.StatusFailed, engine.StatusInterrupted, engine.StatusLeaseExpired:
		d.section(words(toned(toneBad, prefix+endTitle(a.Status))), endFields(s, a))
	}
	applyLogDiagnostics(d, s.ApplyLog)
	sincePlanSection(d, s.SincePlan, s.SincePlanLive)
	if facts := a.AllowedBecause; len(facts) > 0 {
		var l list
		for _, sen := range allowedWords(facts, lastOf(s.Markers, a.ID, engine.MarkerReserved)) {
			l = append(l, item{s: sen})
		}
		d.section(words(toned(toneGood, "Allowed because")), l)
	}
	for _, m := range ofKind(s.Markers, a.ID, engine.MarkerReplanned) {
		if told[m.Other] {
			continue
		}
		what := " (a re-check)"
		if taken, _ := replanTaken(s, a); taken == m.Other {
			what = " (applied in place of the reviewed plan)"
		}
		d.section(words("Re-plan ", runSpan(m.Other), fmt.Sprintf(" against head %d", m.Serial), what), replanFields(s, a, m))
	}
	var fb list
	for _, m := range s.Markers {
		switch {
		case m.Kind == engine.MarkerFellBack,
			m.Kind == engine.MarkerWidened && (m.Run == a.ID || m.Run == ""):
			fb = append(fb, item{s: markerWords(m)})
		}
	}
	if len(fb) > 0 {
		d.section(words("Fallback"), fb)
	}
	if v := s.Version; v != nil {
		d.section(words(fmt.Sprintf("Committed version %d", v.Serial)), provenanceFields(v, s.Markers))
	}
}

// sincePlanSection adds the versions committed since the plan, titled
// with the range and when they were classified: "at preflight" for the
// classification an apply acted on (the head then, not now), "live, now"
// for one computed now. With no version since the plan it adds nothing:
// the view says "head unchanged since the plan" once, elsewhere.
func sincePlanSection(d *doc, sp *engine.SincePlan, live bool) {
	if sp == nil || len(sp.Entries) == 0 {
		return
	}
	when := "at preflight"
	switch {
	case live:
		when = "live, now"
	case sp.AtCommit:
		when = "at commit" // a version after the preflight changed the footprint (ADR 0072)
	}
	d.section(words(fmt.Sprintf("Since plan (%s): serial %d → head %d", when, sp.SourceSerial, sp.HeadSerial)), sincePlanTable(sp)...)
	readChangeSections(d, sp)
}

type applyDocument struct {
	Schema         string        `json:"schema"`
	Verdict        string        `json:"verdict"`
	Text           string        `json:"text"`
	Run            *jRun         `json:"run"`
	Plan           *jRun         `json:"plan,omitempty"`
	Replans        []*jRun       `json:"replans"`
	Footprint      *jFootprint   `json:"footprint,omitempty"`
	Reserved       *jMarker      `json:"reserved,omitempty"`
	Waited         []jMarker     `json:"waited"`
	SincePlan      *jSincePlan   `json:"since_plan,omitempty"`
	AllowedBecause []jFact       `json:"allowed_because"`
	Refusals       []jRefusal    `json:"refusals"`
	Markers        []jMarker     `json:"markers"`
	Version        *jVersion     `json:"version,omitempty"`
	Recoverable    *jRecoverable `json:"recoverable,omitempty"`
	ApplyLog       *jApplyLog    `json:"apply_log,omitempty"`
}

func toRuns(rs []engine.Run) []*jRun {
	out := []*jRun{}
	for i := range rs {
		out = append(out, toRun(&rs[i]))
	}
	return out
}

func applyJSON(s *engine.RunStory) applyDocument {
	a := s.Run
	v := applyVerdict(a, s.Markers, s.SincePlan, s.Version, s.Replans, s.Plan)
	rl := roles(s)
	res := lastOf(s.Markers, a.ID, engine.MarkerReserved)
	j := applyDocument{Schema: SchemaApply, Verdict: v.word, Text: v.words.plain(), Run: toRun(&a), Plan: toRun(s.Plan),
		Replans: toRuns(s.Replans), Waited: toMarkers(ofKind(s.Markers, a.ID, engine.MarkerWaited), rl, nil),
		SincePlan: toSincePlan(s.SincePlan, s.Plan, s.SincePlanLive, s.SincePlanLive), AllowedBecause: toFacts(a.AllowedBecause, res),
		Refusals: toRefusals(refusals(a, s.Markers, s.SincePlan, s.Replans, s.Plan)), Markers: toMarkers(s.Markers, rl, statuses(s)), Version: toVersion(s.Version),
		Recoverable: toRecoverable(recoverableOf(s.Recoverable, &a)), ApplyLog: toApplyLog(s.ApplyLog)}
	if res != nil {
		m := toMarker(*res, rl[res.Run], a.Status)
		j.Reserved = &m
	}
	if p := s.Plan; p != nil && p.Envelope != nil {
		fp := toFootprint(p.Envelope.Footprint, p.Envelope.Reservations)
		j.Footprint = &fp
	}
	return j
}
