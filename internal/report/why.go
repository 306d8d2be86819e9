package report

import (
	"fmt"
	"io"

	"github.com/kilolock/kilolock/internal/engine"
)

// Why renders `kl why RUN` (ADR D2, D6): the verdict first, in one line;
// then the allowed-because facts, the waits, the decisive markers
// (staleness failed, re-planned, failed, lease expired, deviation) and the
// since-plan classification, all in words.
func Why(w io.Writer, y *engine.Why, o Options) error {
	if y == nil {
		return fmt.Errorf("rendering why: no answer")
	}
	c := *y
	var fp *engine.Footprint
	if y.Run.Kind == engine.KindPlan && y.Run.Envelope != nil {
		fp = &y.Run.Envelope.Footprint
	}
	c.Decisive = annotate(y.Decisive, fp, y.SincePlan)
	y = &c
	return emit(w, o, func() *doc { return whyDoc(y) }, func() any { return whyJSON(y) })
}

// whyTarget is the run the answer is about: the apply, when a plan was
// asked about and has one.
func whyTarget(y *engine.Why) engine.Run {
	if y.Apply != nil {
		return *y.Apply
	}
	return y.Run
}

// whyMarkers is every marker the answer holds, in time order as given.
func whyMarkers(y *engine.Why) []engine.Marker {
	ms := append([]engine.Marker{}, y.Waited...)
	if y.Reserved != nil {
		ms = append(ms, *y.Reserved)
	}
	return append(ms, y.Decisive...)
}

// whyPlan returns the reviewed plan of the answer: engine.Why.Plan, or the
// run asked about when it is a plan (answers stored before Why carried it).
func whyPlan(y *engine.Why) *engine.Run {
	if y.Plan != nil {
		return y.Plan
	}
	if y.Run.Kind == engine.KindPlan {
		return &y.Run
	}
	return nil
}

// whyReason is the reason line of a `kl why` answer: for a plan not
// applied (or applied by no apply of its own), where the plan stands and
// how its last attempt ended; otherwise how the explained run ended.
func whyReason(y *engine.Why) string {
	run := y.Run
	if run.Kind == engine.KindPlan && (run.ApplyRun == "" || run.Status == engine.StatusPlanned) {
		switch {
		case engine.ClosedPlan(run), run.Status == engine.StatusSuperseded, run.Status == engine.StatusStale:
			return planPendingReason(run)
		case run.ApplyRun != "" && y.Apply != nil:
			return fmt.Sprintf("plan not applied yet; the last attempt, apply run %s, was %s: %s", y.Apply.ID, y.Apply.Status, EndText(y.Apply.ID, y.Apply.End))
		}
		return planPendingReason(run)
	}
	return RunEndText(whyTarget(y))
}

// planPendingReason says where plan r stands: "plan not applied yet",
// "planning never finished: END", "plan is STATUS: END", or a discard's
// "discarded by ACTOR[: WHY]".
func planPendingReason(r engine.Run) string {
	end := EndText(r.ID, r.End)
	switch r.Status {
	case engine.StatusPlanned:
		return "plan not applied yet"
	case engine.StatusInterrupted:
		if r.Envelope == nil && r.ApplyRun == "" {
			return orWords(end, "interrupted while planning")
		}
	case engine.StatusLeaseExpired, engine.StatusFailed:
		if r.Envelope == nil && r.ApplyRun == "" {
			// Planning never finished: say so before the end.
			what := "planning never finished"
			if r.Status == engine.StatusLeaseExpired {
				what = "lease-expired: planning never finished"
			}
			if end != "" {
				return what + ": " + end
			}
			return what
		}
	case engine.StatusStale, engine.StatusSuperseded:
		if r.Discarded() {
			return end
		}
	}
	if end != "" {
		return fmt.Sprintf("plan is %s: %s", r.Status, end)
	}
	return fmt.Sprintf("plan is %s", r.Status)
}

// whyVerdict is the one-line answer.
func whyVerdict(y *engine.Why) verdict {
	t := whyTarget(y)
	if text, ok := lockRunText(t); ok {
		// A backend lock (ADR 0056): released at UNLOCK, or its lease ran
		// out; it applied no plan.
		return verdict{string(y.Verdict), runStatusTone(t), words(strongT(runStatusTone(t), lockStatus(t)), ": "+text)}
	}
	switch y.Verdict {
	case engine.VerdictPending:
		if y.Run.Kind == engine.KindPlan && y.Run.Status == engine.StatusPlanned {
			tn, w := pendingWords(y.Run, lastAttempt(y.Run, y.Apply), y.SincePlan)
			w[0] = strongT(toneInfo, "pending: "+w[0].text)
			return verdict{string(y.Verdict), tn, w}
		}
		return verdict{string(y.Verdict), toneInfo, words(strongT(toneInfo, "pending"), reasonSuffix(whyReason(y)))}
	case engine.VerdictClosed:
		// Superseded, discarded or stale before any apply of its own.
		return verdict{string(y.Verdict), toneWarn, words(strongT(toneWarn, "closed"), reasonSuffix(whyReason(y)))}
	case engine.VerdictAllowed:
		s := words(strongT(toneGood, "allowed"))
		if len(y.Facts) > 0 {
			s = s.add(txt(": " + plural(len(y.Facts), "stored fact says", "stored facts say") + " why it could proceed"))
		}
		if t.CommittedSerial > 0 {
			s = s.add(txt("; committed "), strong(fmt.Sprintf("version %d", t.CommittedSerial)))
		}
		return verdict{string(y.Verdict), toneGood, s}
	case engine.VerdictFailed:
		if t.Kind == engine.KindPlan {
			// A plan that never finished planning: lease-expired (its
			// holder died or stalled) or failed, and the stored reason.
			reason := "planning never finished"
			if e := EndText(t.ID, t.End); e != "" {
				reason += ": " + e
			}
			if t.Status == engine.StatusInterrupted {
				reason = orWords(EndText(t.ID, t.End), "interrupted while planning")
			}
			s := endWords(t.Status, reason, toneBad)
			s[0] = strongT(toneBad, s[0].text)
			return verdict{string(y.Verdict), toneBad, s}
		}
	}
	// Refused, failed, interrupted, waiting: the apply verdict says which
	// rule, version, run and address.
	v := applyVerdict(t, whyMarkers(y), y.SincePlan, nil, nil, whyPlan(y))
	v.word = string(y.Verdict)
	return v
}

// whyTitleWord is the word after "Why run ID: ": the verdict (allowed,
// pending, closed: the answer to "why"), or, where the verdict is a run
// status word (failed, refused, interrupted, waiting, released), the status
// word every other view prints for run y.Run (lockStatus: `kl runs`, `kl run
// show`, `kl status`): one run, one word — a lease-expired run is never
// "failed" here (ADR 0071). The JSON keeps the verdict as a field of its own.
func whyTitleWord(y *engine.Why) string {
	switch y.Verdict {
	case engine.VerdictFailed, engine.VerdictRefused, engine.VerdictInterrupted, engine.VerdictWaiting, engine.VerdictReleased:
		return lockStatus(y.Run)
	}
	return string(y.Verdict)
}

func whyDoc(y *engine.Why) *doc {
	t := whyTarget(y)
	v := whyVerdict(y)
	d := &doc{tone: v.tone, more: "kl run show " + y.Run.ID, title: words("Why run ", runSpan(y.Run.ID), ": ", whyTitleWord(y))}
	d.summary = append(d.summary, para(v.words))
	last := lastAttempt(y.Run, y.Apply)
	switch {
	case last != nil:
		var f fields
		f = f.addField("last attempt", lastAttemptWords(*last))
		next, _ := openPlanNext(y.Run, y.SincePlan)
		d.summary = append(d.summary, f.addField("next", next))
	case y.Apply != nil:
		d.summary = append(d.summary, fields{{"apply", who(t.ID, t.Actor, t.PR).add(txt(", " + string(t.Status)))}})
	case y.Verdict == engine.VerdictPending && y.Run.Status == engine.StatusPlanned && y.Run.Envelope != nil:
		next, _ := openPlanNext(y.Run, y.SincePlan)
		d.summary = append(d.summary, fields{{"next", next}})
	case neverPlanned(y), y.Verdict == engine.VerdictClosed:
		d.summary = append(d.summary, fields{{"next", words("it can never be applied: plan again, ", cmdSpan(replanCommand(y.Run, nil), command{verb: verbReplan}))}})
	}
	// What Terraform wrote that no version holds (t is the apply, or the
	// last attempt of a plan open again).
	if rec := recoverableOf(y.Recoverable, &t); rec != nil {
		d.summary = append(d.summary, fields{{"recover", recoverWords(rec, t.PR)}, {"not committed", addrs(rec.Changed)}})
	}
	rs := refusals(t, whyMarkers(y), y.SincePlan, nil, whyPlan(y))
	for _, r := range rs {
		if last != nil && r.rule == ruleOther {
			continue // the "last attempt" field says it
		}
		title := "Refused: "
		if last != nil {
			title = "Last attempt refused: "
		}
		d.section(words(toned(toneBad, title+ruleTitle[r.rule])), refusalFields(r))
	}
	if len(y.Facts) > 0 {
		var l list
		for _, s := range allowedWords(y.Facts, y.Reserved) {
			l = append(l, item{s: s})
		}
		d.section(words(toned(toneGood, "Allowed because")), l)
	}
	// The waits, unless the verdict line is already about them.
	conflict := len(rs) > 0 && (rs[0].rule == ruleConflict || rs[0].rule == ruleFenced)
	if (len(y.Waited) > 0 || (y.Reserved != nil && y.Reserved.Waited > 0)) && y.Verdict != engine.VerdictWaiting && !conflict {
		var l list
		for _, m := range y.Waited {
			l = append(l, item{s: markerWords(m)})
		}
		if y.Reserved != nil {
			l = append(l, item{s: markerWords(*y.Reserved)})
		}
		d.section(words("Waited"), l)
	}
	var l list
	for _, m := range y.Decisive {
		if m.Kind == engine.MarkerFailed && (t.Status == engine.StatusRefused || sameEnd(m, t)) {
			continue // the engine's record of how the run ended: the verdict told it
		}
		if m.Kind == engine.MarkerLeaseExpired && neverPlanned(y) && sameEnd(m, t) {
			continue // the verdict told it
		}
		l = append(l, item{s: words(fmtTime(m.At)+"  ", markerWordsOf(m, t.Status))})
	}
	if len(l) > 0 {
		d.section(words("Decisive markers"), l)
	}
	sincePlanSection(d, y.SincePlan, y.Verdict == engine.VerdictPending)
	if blocks := overlapTable(y.Overlaps); blocks != nil {
		d.section(words(fmt.Sprintf("Overlapping open plans (%d)", len(y.Overlaps))), blocks...)
	}
	return d
}

// neverPlanned reports whether the answer is about a plan run that never
// finished planning (engine.Why: failed, no apply, no envelope).
func neverPlanned(y *engine.Why) bool {
	return y.Verdict == engine.VerdictFailed && y.Apply == nil && y.Run.Kind == engine.KindPlan && y.Run.Envelope == nil
}

type whyDocument struct {
	Schema         string        `json:"schema"`
	Verdict        string        `json:"verdict"`
	Text           string        `json:"text"`
	Reason         string        `json:"reason,omitempty"`
	Run            *jRun         `json:"run"`
	Plan           *jRun         `json:"plan,omitempty"`
	Apply          *jRun         `json:"apply,omitempty"`
	AllowedBecause []jFact       `json:"allowed_because"`
	Waited         []jMarker     `json:"waited"`
	Reserved       *jMarker      `json:"reserved,omitempty"`
	Decisive       []jMarker     `json:"decisive"`
	Refusals       []jRefusal    `json:"refusals"`
	SincePlan      *jSincePlan   `json:"since_plan,omitempty"`
	Overlaps       []jOverlap    `json:"overlaps"`
	NextCommand    string        `json:"next_command,omitempty"`
	Recoverable    *jRecoverable `json:"recoverable,omitempty"`
}

func whyJSON(y *engine.Why) whyDocument {
	v := whyVerdict(y)
	t := whyTarget(y)
	j := whyDocument{Schema: SchemaWhy, Verdict: string(y.Verdict), Text: v.words.plain(), Reason: whyReason(y), Run: toRun(&y.Run),
		Plan: toRun(y.Plan), Apply: toRun(y.Apply), AllowedBecause: toFacts(y.Facts, y.Reserved), Waited: toMarkers(y.Waited, nil, nil),
		Decisive: toMarkers(y.Decisive, nil, map[string]engine.RunStatus{t.ID: t.Status, "": t.Status}),
		Refusals: toRefusals(refusals(t, whyMarkers(y), y.SincePlan, nil, whyPlan(y))), Overlaps: toOverlaps(y.Overlaps)}
	if y.Reserved != nil {
		m := toMarker(*y.Reserved, "", "")
		j.Reserved = &m
	}
	j.Recoverable = toRecoverable(recoverableOf(y.Recoverable, &t))
	if y.Verdict == engine.VerdictPending && y.Run.Kind == engine.KindPlan && y.Run.Status == engine.StatusPlanned && y.Run.Envelope != nil {
		_, j.NextCommand = openPlanNext(y.Run, y.SincePlan)
	}
	pending := y.Verdict == engine.VerdictPending
	plan := y.Run
	j.SincePlan = toSincePlan(y.SincePlan, &plan, pending, pending)
	return j
}
