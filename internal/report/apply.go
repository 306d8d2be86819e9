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
// (ADR D3, D8); the allowed-because facts in words (ADR D2); re-plan and
// fallback markers (ADR D4); the committed version with its provenance and
// whether it matched the plan (ADR D5) — or, for a refusal, the rule, the
// version, its producing run and PR, and the addresses.
func Apply(w io.Writer, s *engine.RunStory, o Options) error {
	if s == nil || s.Run.Kind != engine.KindApply {
		return fmt.Errorf("rendering apply: want the story of an apply run")
	}
	return emit(w, o, func() *doc { return applyDoc(s) }, func() any { return applyJSON(s) })
}

func applyDoc(s *engine.RunStory) *doc {
	a := s.Run
	v := applyVerdict(a, s.Markers, s.SincePlan, s.Version)
	d := &doc{tone: v.tone, more: "kl run show " + a.ID,
		title: words("Apply ", runSpan(a.ID), " of plan ", runSpan(a.PlanRun), " on ", strong(a.State))}
	d.summary = append(d.summary, para(v.words), applyFields(s, &a))
	applySections(d, s, &a)
	if s.Version != nil {
		driftSections(d, s.Version.Provenance.Drift)
	}
	return d
}

// applyFields is an apply run in brief: who, which plan, what it reserved,
// the since-plan counts and the committed version.
func applyFields(s *engine.RunStory, a *engine.Run) fields {
	var f fields
	f = f.addField("actor", words(a.Actor))
	f = f.addField("PR", prField(a.PR, ""))
	pl := words("reviewed ", runSpan(a.PlanRun))
	if a.AppliedPlanRun != "" && a.AppliedPlanRun != a.PlanRun {
		pl = words(pl, "; applied its re-plan ", runSpan(a.AppliedPlanRun))
	}
	f = f.addField("plan", pl)
	if res := lastOf(s.Markers, a.ID, engine.MarkerReserved); res != nil {
		f = f.addField("reserved", reservedWords(res, ofKind(s.Markers, a.ID, engine.MarkerWaited)))
	}
	if s.SincePlan != nil {
		f = f.addField("since plan", countsWords(sinceCounts(s.SincePlan, s.Plan)))
	}
	if s.Version != nil && a.Status != engine.StatusApplied {
		f = f.addField("committed", words(commitWords(s.Version.Provenance), ", ", matchWords(s.Version.Provenance)))
		if s.Version.Provenance.Partial {
			f = f.addField("partial", words(toned(toneBad, "yes"), ": Terraform stopped part-way; what it wrote is committed"))
		}
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

// applySections adds what an apply decided and committed: refusal,
// since-plan, allowed-because, re-plan and fallback markers,
// provenance and failure. a is the apply run of the story. The full drift
// lists are left to the caller, to come last.
func applySections(d *doc, s *engine.RunStory, a *engine.Run) {
	for _, r := range refusals(*a, s.Markers, s.SincePlan) {
		d.section(words(toned(toneBad, "Refused: "+ruleTitle[r.rule])), refusalFields(r))
	}
	if s.SincePlan != nil {
		title := "Since plan"
		if s.SincePlanLive {
			title = "Since plan (live, now)"
		}
		d.section(words(title, fmt.Sprintf(": serial %d → head %d", s.SincePlan.SourceSerial, s.SincePlan.HeadSerial)),
			sincePlanTable(s.SincePlan, s.Plan)...)
	}
	if len(a.AllowedBecause) > 0 {
		var l list
		for _, sen := range allowedWords(a.AllowedBecause, lastOf(s.Markers, a.ID, engine.MarkerReserved)) {
			l = append(l, item{s: sen})
		}
		d.section(words(toned(toneGood, "Allowed because")), l)
	}
	var rp list
	for _, m := range s.Markers {
		switch {
		case m.Kind == engine.MarkerReplanned, m.Kind == engine.MarkerFellBack,
			m.Kind == engine.MarkerWidened && (m.Run == a.ID || m.Run == ""):
			rp = append(rp, item{s: markerWords(m)})
		}
	}
	if len(rp) > 0 {
		d.section(words("Re-plan and fallback"), rp)
	}
	if v := s.Version; v != nil {
		title := fmt.Sprintf("Committed version %d", v.Serial)
		if v.Provenance.Partial {
			title += " (partial)"
		}
		d.section(words(title), provenanceFields(v))
	}
	if fails := ofKind(s.Markers, a.ID, engine.MarkerFailed); len(fails) > 0 {
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
	Footprint      *jFootprint `json:"footprint,omitempty"`
	Reserved       *jMarker    `json:"reserved,omitempty"`
	Waited         []jMarker   `json:"waited"`
	SincePlan      *jSincePlan `json:"since_plan,omitempty"`
	AllowedBecause []jFact     `json:"allowed_because"`
	Refusals       []jRefusal  `json:"refusals"`
	Markers        []jMarker   `json:"markers"`
	Version        *jVersion   `json:"version,omitempty"`
}

func applyJSON(s *engine.RunStory) applyDocument {
	a := s.Run
	v := applyVerdict(a, s.Markers, s.SincePlan, s.Version)
	rl := roles(s)
	res := lastOf(s.Markers, a.ID, engine.MarkerReserved)
	j := applyDocument{Schema: SchemaApply, Verdict: v.word, Text: v.words.plain(), Run: toRun(&a), Plan: toRun(s.Plan),
		AppliedPlan: toRun(s.AppliedPlan), Waited: toMarkers(ofKind(s.Markers, a.ID, engine.MarkerWaited), rl),
		SincePlan: toSincePlan(s.SincePlan, s.Plan, s.SincePlanLive, s.SincePlanLive), AllowedBecause: toFacts(a.AllowedBecause, res),
		Refusals: toRefusals(refusals(a, s.Markers, s.SincePlan)), Markers: toMarkers(s.Markers, rl), Version: toVersion(s.Version)}
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
