package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// RunStory renders `kl run show RUN`: the verdict; the envelope of the
// reviewed plan (ADR D1) and its footprint; the re-plans the apply made to
// re-check it, each with its status (open for review, or superseded with
// the reason); every marker of the plan, re-plan and apply runs in time order,
// each with the run it belongs to (ADR D4); and what the apply decided and
// committed — refusal with the offending version, its producing run and
// address, or the allowed-because facts, the since-plan classification
// (stored, or live for an open plan) and the provenance of the committed
// version (ADR D2, D3, D5). With s.Diff, the text and HTML end with the
// plan's diff and the JSON carries it (ADR 0044).
func RunStory(w io.Writer, s *engine.RunStory, o Options) error {
	if s == nil {
		return fmt.Errorf("rendering run story: no story")
	}
	s = prepared(s)
	return emit(w, o, func() *doc {
		d := storyDoc(s)
		if (o.Format == Text || o.Format == HTML) && s.Diff != nil && s.Plan != nil {
			diffSection(d, words("Diff of plan ", runSpan(s.Plan.ID)), s.Diff)
		}
		return d
	}, func() any { return storyJSON(s) })
}

// storyPRFields are run r's pull request field (for an apply, whether it
// ran after the merge: applyPRField) and, for a re-plan of a merge commit,
// the configuration it planned (ADR 0062).
func storyPRFields(s *engine.RunStory, r engine.Run) fields {
	var f fields
	if r.Kind == engine.KindApply {
		f = f.addField("PR", applyPRField(s.Markers, &r))
	} else {
		f = f.addField("PR", prField(r.PR, ""))
	}
	if mc := mergeCommitOf(s.Markers, r.ID); mc != "" {
		head := ""
		if r.PR != nil && r.PR.HeadSHA != "" {
			head = " (the pull request's head is " + shortSHA(r.PR.HeadSHA) + ")"
		}
		f = f.addField("configuration", words("the merge commit ", code(shortSHA(mc)), head,
			": what merged, with the base branch's changes before it (ADR 0062)"))
	}
	return f
}

// storyApply returns the apply run a story is told by, if any: the run
// itself, or the apply of a plan — not the last attempt of a plan open
// again (lastAttempt).
func storyApply(s *engine.RunStory) *engine.Run {
	if s.Run.Kind == engine.KindApply {
		return &s.Run
	}
	if lastAttempt(s.Run, s.Apply) != nil {
		return nil
	}
	return s.Apply
}

// lastAttempt returns apply when it is the last attempt at plan run p that
// did not go through and p is open again (planned): the engine keeps
// naming it in Run.ApplyRun (engine.Why, engine.RunStory).
func lastAttempt(p engine.Run, apply *engine.Run) *engine.Run {
	if p.Kind == engine.KindPlan && p.Status == engine.StatusPlanned && apply != nil {
		return apply
	}
	return nil
}

// pendingWords is the verdict of a plan not applied yet: "not applied yet"
// (and that the last attempt did not go through, when one did not), then
// what an apply would do now.
func pendingWords(p engine.Run, last *engine.Run, sp *engine.SincePlan) (tone, sentence) {
	s := words(strongT(toneInfo, "not applied yet"))
	if last != nil {
		s = s.add(txt(fmt.Sprintf(" (the last attempt was %s; the plan can be applied again)", strings.ReplaceAll(string(last.Status), "-", " "))))
	}
	if sp == nil || p.Envelope == nil {
		return toneInfo, s
	}
	_, v := sincePlanVerdict(sp, p)
	return v.tone, words(s, "; ", v.words)
}

// openPlanNext is the next step for an open plan: apply it, or re-plan
// when an apply now would be refused as stale.
func openPlanNext(p engine.Run, sp *engine.SincePlan) (sentence, string) {
	if sp != nil {
		if action, _ := sincePlanVerdict(sp, p); action == actionRefused {
			return replanNext(engine.Run{State: p.State, PlanRun: p.ID}, nil, &p)
		}
	}
	cmd := "kl apply " + p.ID
	if p.ReplanOf != "" {
		return words("review and apply ", runSpan(p.ID), ": ", cmdSpan(cmd, command{verb: verbApplyReplan})), cmd
	}
	return words(cmdSpan(cmd, command{verb: verbApply})), cmd
}

// lastAttemptWords names the last attempt at a plan and how it ended:
// "run A (PR, alice), refused: reservations conflict: …".
func lastAttemptWords(a engine.Run) sentence {
	return words(who(a.ID, a.Actor, a.PR), ", ", endWordsOf(a.Status, a.ID, a.End, statusTone(a.Status)))
}

// storyVerdict is the first line of a story: the apply's verdict, or for a
// plan without an apply (or open again) what an apply would do now.
func storyVerdict(s *engine.RunStory) verdict {
	if a := storyApply(s); a != nil {
		return applyVerdict(*a, s.Markers, s.SincePlan, s.Version, s.Replans, s.Plan)
	}
	r := s.Run
	if !r.Status.Open() || r.Envelope == nil {
		t := toneInfo
		if r.Status == engine.StatusFailed || r.Status == engine.StatusStale || r.Status == engine.StatusInterrupted {
			t = toneBad
		}
		return verdict{string(r.Status), t, words(strongT(t, string(r.Status)), endSuffix(r.ID, r.End))}
	}
	t, w := pendingWords(r, lastAttempt(r, s.Apply), s.SincePlan)
	return verdict{"pending", t, w}
}

func storyKind(r engine.Run) sentence {
	switch {
	case r.Kind == engine.KindApply:
		return words("apply of plan ", runSpan(r.PlanRun))
	case r.ReplanOf != "":
		return words("re-plan of ", runSpan(r.ReplanOf))
	}
	return words("plan")
}

func storyDoc(s *engine.RunStory) *doc {
	if operationRun(s.Run) {
		return operationStoryDoc(s)
	}
	r := s.Run
	v := storyVerdict(s)
	last := lastAttempt(r, s.Apply)
	d := &doc{tone: v.tone, more: "kl run show " + r.ID,
		title: words("Run ", runSpan(r.ID), " (", storyKind(r), ") on ", strong(r.State), ": ", string(r.Status))}
	var f fields
	f = f.addField("actor", words(r.Actor))
	f = f.addField("holder", words(r.Holder.String()))
	times := fmtTime(r.CreatedAt) + " → "
	if r.FinishedAt != nil {
		times += fmtTime(*r.FinishedAt)
	} else {
		times += "running"
	}
	f = f.addField("time", words(times))
	f = append(f, storyPRFields(s, r)...)
	switch {
	case last != nil:
		f = f.addField("last attempt", lastAttemptWords(*last))
	case s.Apply != nil && r.Kind == engine.KindPlan:
		f = f.addField("applied by", who(s.Apply.ID, s.Apply.Actor, s.Apply.PR))
	}
	if r.Kind == engine.KindPlan && r.Status == engine.StatusPlanned && r.Envelope != nil {
		next, _ := openPlanNext(r, s.SincePlan)
		f = f.addField("next", next)
	}
	if a := storyApply(s); a != nil {
		if res := lastOf(s.Markers, a.ID, engine.MarkerReserved); res != nil {
			f = f.addField("reserved", reservedWords(res, ofKind(s.Markers, a.ID, engine.MarkerWaited)))
		}
	}
	f = f.addField("terraform", applyLogWords(s.ApplyLog))
	d.summary = append(d.summary, para(v.words), f)

	// What was decided comes first and the long address lists last, so
	// that Truncate cuts the lists before the story.
	switch a := storyApply(s); {
	case a != nil:
		applySections(d, s, a, "")
	case last != nil:
		lastAttemptSections(d, s, last)
		sincePlanSection(d, s.SincePlan, s.SincePlanLive)
	default:
		sincePlanSection(d, s.SincePlan, s.SincePlanLive)
	}
	if blocks := overlapTable(s.Overlaps); blocks != nil {
		d.section(words(fmt.Sprintf("Overlapping open plans (%d)", len(s.Overlaps))), blocks...)
	}
	d.section(words("Timeline"), timeline(s)...)
	if p := s.Plan; p != nil && p.Envelope != nil {
		d.section(words("Envelope of plan ", runSpan(p.ID)), envelopeFields(*p, p.Envelope))
		for _, rp := range s.Replans {
			d.section(words("Re-plan ", runSpan(rp.ID), " (a re-check of the reviewed plan)"), replanRunFields(rp))
		}
		footprintSections(d, p.Envelope.Footprint, p.Envelope.Reservations)
	}
	if s.Version != nil {
		deviationSections(d, s.Version.Provenance.Deviation)
	}
	if a := storyApplyOrLast(s); a != nil {
		applyLogResources(d, s.ApplyLog, a.ID)
	}
	return d
}

// storyApplyOrLast is the apply run whose apply log a story holds
// (engine.RunStory.ApplyLog): the story's apply, or the last attempt at a
// plan open again.
func storyApplyOrLast(s *engine.RunStory) *engine.Run {
	if a := storyApply(s); a != nil {
		return a
	}
	return lastAttempt(s.Run, s.Apply)
}

// lastAttemptSections tells why the last attempt at an open plan did not go
// through: its refusal (rule, holder or version, addresses, next step) or
// how it ended, from its markers in the story.
func lastAttemptSections(d *doc, s *engine.RunStory, last *engine.Run) {
	for _, r := range refusals(*last, s.Markers, nil, s.Replans, s.Plan) {
		if r.rule == ruleOther {
			continue // the "last attempt" field says it
		}
		d.section(words(toned(toneBad, "Last attempt refused: "+ruleTitle[r.rule])), refusalFields(r))
	}
	switch last.Status {
	case engine.StatusFailed, engine.StatusInterrupted, engine.StatusLeaseExpired:
		d.section(words(toned(toneBad, "Last attempt: "+strings.ToLower(endTitle(last.Status)))), endFields(s, last))
	}
	applyLogDiagnostics(d, s.ApplyLog)
}

// replanRunFields is a re-plan run in brief: where it stands now, what it
// planned against, and its changes.
func replanRunFields(rp engine.Run) fields {
	var f fields
	f = f.addField("status", replanStatusWords(&rp))
	if e := rp.Envelope; e != nil {
		f = f.addField("source serial", words(fmt.Sprint(e.SourceSerial)))
		f = f.addField("planned", words(fmtTime(e.StartedAt)+" → "+fmtTime(e.FinishedAt)))
		f = f.addField("plan digest", words(code(e.PlanDigest)))
		f = f.addField("changes", changesWords(e.Summary))
		f = f.addField("write set", writeSetWords(e.Footprint.Write, e.Summary))
	}
	return f
}

type storyDocument struct {
	Schema         string        `json:"schema"`
	Verdict        string        `json:"verdict"`
	Text           string        `json:"text"`
	Run            *jRun         `json:"run"`
	Plan           *jRun         `json:"plan,omitempty"`
	Replans        []*jRun       `json:"replans"`
	Apply          *jRun         `json:"apply,omitempty"`
	Envelope       *jEnvelope    `json:"envelope,omitempty"`
	Summary        *jSummary     `json:"summary,omitempty"`
	Footprint      *jFootprint   `json:"footprint,omitempty"`
	Markers        []jMarker     `json:"markers"`
	AllowedBecause []jFact       `json:"allowed_because"`
	Refusals       []jRefusal    `json:"refusals"`
	SincePlan      *jSincePlan   `json:"since_plan,omitempty"`
	Version        *jVersion     `json:"version,omitempty"`
	Overlaps       []jOverlap    `json:"overlaps"`
	NextCommand    string        `json:"next_command,omitempty"`
	Recoverable    *jRecoverable `json:"recoverable,omitempty"`
	Diff           *jDiff        `json:"diff,omitempty"`
	ApplyLog       *jApplyLog    `json:"apply_log,omitempty"`
	// Operation is what a day-2 operation's run asked (ADR 0055).
	Operation *jOperation `json:"operation,omitempty"`
}

func storyJSON(s *engine.RunStory) storyDocument {
	if operationRun(s.Run) {
		return operationStoryJSON(s)
	}
	v := storyVerdict(s)
	j := storyDocument{Schema: SchemaRun, Verdict: v.word, Text: v.words.plain(), Run: toRun(&s.Run), Plan: toRun(s.Plan),
		Replans: toRuns(s.Replans), Apply: toRun(s.Apply), Markers: toMarkers(s.Markers, roles(s), statuses(s)),
		AllowedBecause: []jFact{}, Refusals: []jRefusal{}, Version: toVersion(s.Version), Overlaps: toOverlaps(s.Overlaps)}
	if p := s.Plan; p != nil && p.Envelope != nil {
		sum, fp := toSummary(p.Envelope.Summary), toFootprint(p.Envelope.Footprint, p.Envelope.Reservations)
		j.Envelope, j.Summary, j.Footprint = toEnvelope(p.Envelope), &sum, &fp
	}
	plan := s.Plan
	if a := storyApply(s); a != nil {
		j.AllowedBecause = toFacts(a.AllowedBecause, lastOf(s.Markers, a.ID, engine.MarkerReserved))
		j.Refusals = toRefusals(refusals(*a, s.Markers, s.SincePlan, s.Replans, s.Plan))
		j.Recoverable = toRecoverable(recoverableOf(s.Recoverable, a))
	} else if last := lastAttempt(s.Run, s.Apply); last != nil {
		j.Refusals = toRefusals(refusals(*last, s.Markers, nil, s.Replans, s.Plan))
		j.Recoverable = toRecoverable(recoverableOf(s.Recoverable, last))
	}
	if r := s.Run; r.Kind == engine.KindPlan && r.Status == engine.StatusPlanned && r.Envelope != nil {
		_, j.NextCommand = openPlanNext(r, s.SincePlan)
	}
	j.SincePlan = toSincePlan(s.SincePlan, plan, s.SincePlanLive, s.SincePlanLive)
	j.Diff = toDiff(s.Diff)
	if storyApplyOrLast(s) != nil {
		j.ApplyLog = toApplyLog(s.ApplyLog)
	}
	return j
}

// mergeCommitOf is the merge commit re-plan id planned (the "replanned"
// marker of its apply naming it, Marker.Commit, ADR 0062), "" for any
// other run.
func mergeCommitOf(ms []engine.Marker, id string) string {
	for _, m := range ms {
		if m.Kind == engine.MarkerReplanned && m.Other == id && m.Commit != "" {
			return m.Commit
		}
	}
	return ""
}
