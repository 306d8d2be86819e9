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
// producing run and PR, and the addresses.
func Apply(w io.Writer, s *engine.RunStory, o Options) error {
	if s == nil || s.Run.Kind != engine.KindApply {
		return fmt.Errorf("rendering apply: want the story of an apply run")
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
	v := applyVerdict(a, s.Markers, s.SincePlan, s.Version, s.Replans)
	d := &doc{tone: v.tone, more: "kl run show " + a.ID,
		title: words("Apply ", runSpan(a.ID), " of plan ", runSpan(a.PlanRun), " on ", strong(a.State))}
	d.summary = append(d.summary, para(v.words), applyFields(s, &a))
	applySections(d, s, &a)
	if s.Version != nil {
		driftSections(d, s.Version.Provenance.Drift)
	}
	return d
}

// planFieldWords says which plan an apply applied, or for an apply that
// never ran Terraform, which plan it was for and what became of it.
func planFieldWords(s *engine.RunStory, a *engine.Run) sentence {
	switch {
	case a.CommittedSerial > 0 || a.Status == engine.StatusApplied:
		return appliedPlanWords(a.PlanRun, a.AppliedPlanRun, replanCheck(s.Markers, a.ID))
	case a.Status == engine.StatusApplying:
		pl := words("reviewed ", runSpan(a.PlanRun))
		if c := replanCheck(s.Markers, a.ID); c != nil {
			pl = words(pl, "; re-checked by re-plan ", runSpan(c.Other), fmt.Sprintf(" against head %d: intent unchanged", c.Serial))
		}
		return pl.add(txt("; applying the reviewed plan"))
	}
	pl := words("reviewed ", runSpan(a.PlanRun))
	if p := s.Plan; p != nil && p.ID == a.PlanRun && (p.Status == engine.StatusStale || p.Status == engine.StatusSuperseded) {
		pl = pl.add(txt(" (now " + string(p.Status) + ")"))
	}
	return pl
}

// applyFields is an apply run in brief: who, which plan, what it reserved,
// the since-plan counts and the committed version.
func applyFields(s *engine.RunStory, a *engine.Run) fields {
	var f fields
	f = f.addField("actor", words(a.Actor))
	f = f.addField("PR", prField(a.PR, ""))
	f = f.addField("plan", planFieldWords(s, a))
	if res := lastOf(s.Markers, a.ID, engine.MarkerReserved); res != nil {
		f = f.addField("reserved", reservedWords(res, ofKind(s.Markers, a.ID, engine.MarkerWaited)))
	}
	if s.SincePlan != nil {
		f = f.addField("since plan", countsWords(s.SincePlan.Summary()))
	}
	if s.Version != nil && a.Status != engine.StatusApplied {
		f = f.addField("committed", words(commitWords(s.Version.Provenance), ", ", matchWords(s.Version.Provenance)))
		if s.Version.Provenance.Partial {
			f = f.addField("partial", words(toned(toneBad, "yes"), ": Terraform stopped part-way; what it wrote is committed"))
		}
	}
	if s.Version != nil && overwritten(s.Version.Provenance.Drift) {
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
			parts = append(parts, words(who(m.Other, "", m.OtherPR), " over ", addrs(m.Addresses)))
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
				st = st.add(txt(": it was a check, not what gets applied"))
			}
			f = f.addField("re-plan status", st)
		}
	default:
		f = f.addField("outcome", markerWords(m))
		f = f.addField("re-plan status", replanStatusWords(findRun(s.Replans, m.Other)))
	}
	return f
}

// applySections adds what an apply decided and committed: refusal,
// since-plan, allowed-because, re-plans and fallbacks, provenance and
// failure. a is the apply run of the story. The full drift lists are left
// to the caller, to come last.
func applySections(d *doc, s *engine.RunStory, a *engine.Run) {
	rs := refusals(*a, s.Markers, s.SincePlan, s.Replans)
	told := map[string]bool{}
	for _, r := range rs {
		d.section(words(toned(toneBad, "Refused: "+ruleTitle[r.rule])), refusalFields(r))
		if r.rule == ruleIntent || r.rule == ruleBehindHead {
			told[r.run] = true
		}
	}
	if s.SincePlan != nil {
		title := "Since plan"
		if s.SincePlanLive {
			title = "Since plan (live, now)"
		}
		d.section(words(title, fmt.Sprintf(": serial %d → head %d", s.SincePlan.SourceSerial, s.SincePlan.HeadSerial)),
			sincePlanTable(s.SincePlan)...)
	}
	if len(a.AllowedBecause) > 0 {
		var l list
		for _, sen := range allowedWords(a.AllowedBecause, lastOf(s.Markers, a.ID, engine.MarkerReserved)) {
			l = append(l, item{s: sen})
		}
		d.section(words(toned(toneGood, "Allowed because")), l)
	}
	for _, m := range ofKind(s.Markers, a.ID, engine.MarkerReplanned) {
		if told[m.Other] {
			continue
		}
		d.section(words("Re-plan ", runSpan(m.Other), fmt.Sprintf(" against head %d (a re-check)", m.Serial)), replanFields(s, a, m))
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
		title := fmt.Sprintf("Committed version %d", v.Serial)
		if v.Provenance.Partial {
			title += " (partial)"
		}
		d.section(words(title), provenanceFields(v, replanCheck(s.Markers, a.ID)))
	}
	// The engine records a refusal as a "failed" marker too; the refusal
	// sections above already tell it.
	if fails := ofKind(s.Markers, a.ID, engine.MarkerFailed); len(fails) > 0 && a.Status != engine.StatusRefused {
		var l list
		for _, m := range fails {
			l = append(l, item{s: markerWords(m)})
		}
		d.section(words(toned(toneBad, "Failure")), l)
	}
}

type applyDocument struct {
	Schema         string      `json:"schema"`
	Verdict        string      `json:"verdict"`
	Text           string      `json:"text"`
	Run            *jRun       `json:"run"`
	Plan           *jRun       `json:"plan,omitempty"`
	AppliedPlan    *jRun       `json:"applied_plan,omitempty"`
	Replans        []*jRun     `json:"replans"`
	Footprint      *jFootprint `json:"footprint,omitempty"`
	Reserved       *jMarker    `json:"reserved,omitempty"`
	Waited         []jMarker   `json:"waited"`
	SincePlan      *jSincePlan `json:"since_plan,omitempty"`
	AllowedBecause []jFact     `json:"allowed_because"`
	Refusals       []jRefusal  `json:"refusals"`
	Markers        []jMarker   `json:"markers"`
	Version        *jVersion   `json:"version,omitempty"`
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
	v := applyVerdict(a, s.Markers, s.SincePlan, s.Version, s.Replans)
	rl := roles(s)
	res := lastOf(s.Markers, a.ID, engine.MarkerReserved)
	j := applyDocument{Schema: SchemaApply, Verdict: v.word, Text: v.words.plain(), Run: toRun(&a), Plan: toRun(s.Plan),
		AppliedPlan: toRun(s.AppliedPlan), Replans: toRuns(s.Replans), Waited: toMarkers(ofKind(s.Markers, a.ID, engine.MarkerWaited), rl),
		SincePlan: toSincePlan(s.SincePlan, s.Plan, s.SincePlanLive, s.SincePlanLive), AllowedBecause: toFacts(a.AllowedBecause, res),
		Refusals: toRefusals(refusals(a, s.Markers, s.SincePlan, s.Replans)), Markers: toMarkers(s.Markers, rl), Version: toVersion(s.Version)}
	if res != nil {
		m := toMarker(*res, rl[res.Run])
		j.Reserved = &m
	}
	if p := s.Plan; p != nil && p.Envelope != nil {
		fp := toFootprint(p.Envelope.Footprint, p.Envelope.Reservations)
		j.Footprint = &fp
	}
	return j
}
