package report

import (
	"fmt"
	"io"

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
// version (ADR D2, D3, D5).
func RunStory(w io.Writer, s *engine.RunStory, o Options) error {
	if s == nil {
		return fmt.Errorf("rendering run story: no story")
	}
	s = prepared(s)
	return emit(w, o, func() *doc { return storyDoc(s) }, func() any { return storyJSON(s) })
}

// storyApply returns the apply run of a story, if any.
func storyApply(s *engine.RunStory) *engine.Run {
	if s.Run.Kind == engine.KindApply {
		return &s.Run
	}
	return s.Apply
}

// storyVerdict is the first line of a story: the apply's verdict, or for a
// plan without an apply what an apply would do now.
func storyVerdict(s *engine.RunStory) verdict {
	if a := storyApply(s); a != nil {
		return applyVerdict(*a, s.Markers, s.SincePlan, s.Version, s.Replans)
	}
	r := s.Run
	if !r.Status.Open() || r.Envelope == nil {
		t := toneInfo
		if r.Status == engine.StatusFailed || r.Status == engine.StatusStale || r.Status == engine.StatusInterrupted {
			t = toneBad
		}
		return verdict{string(r.Status), t, words(strongT(t, string(r.Status)), reasonSuffix(r.Reason))}
	}
	_, v := sincePlanVerdict(s.SincePlan, r)
	return verdict{"pending", v.tone, words(strongT(toneInfo, "not applied yet"), "; ", v.words)}
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
	r := s.Run
	v := storyVerdict(s)
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
	f = f.addField("PR", prField(r.PR, ""))
	if a := s.Apply; a != nil && r.Kind == engine.KindPlan {
		f = f.addField("applied by", who(a.ID, a.Actor, a.PR))
	}
	if r.Kind == engine.KindPlan && r.Status == engine.StatusPlanned && r.Envelope != nil {
		next := words(code("kl apply " + r.ID))
		if r.ReplanOf != "" {
			next = words("review and apply ", runSpan(r.ID), ": ", next)
		}
		f = f.addField("next", next)
	}
	if a := storyApply(s); a != nil {
		if res := lastOf(s.Markers, a.ID, engine.MarkerReserved); res != nil {
			f = f.addField("reserved", reservedWords(res, ofKind(s.Markers, a.ID, engine.MarkerWaited)))
		}
	}
	d.summary = append(d.summary, para(v.words), f)

	// What was decided comes first and the long address lists last, so
	// that Truncate cuts the lists before the story.
	if a := storyApply(s); a != nil {
		applySections(d, s, a)
	} else if s.SincePlan != nil {
		title := words(fmt.Sprintf("Since plan: serial %d → head %d", s.SincePlan.SourceSerial, s.SincePlan.HeadSerial))
		if s.SincePlanLive {
			title = words(fmt.Sprintf("Since plan (live, now): serial %d → head %d", s.SincePlan.SourceSerial, s.SincePlan.HeadSerial))
		}
		d.section(title, sincePlanTable(s.SincePlan)...)
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
		if ap := s.AppliedPlan; ap != nil && findRun(s.Replans, ap.ID) == nil {
			d.section(words("Re-plan ", runSpan(ap.ID), " (Terraform applied it instead of the reviewed plan)"), replanRunFields(*ap))
		}
		footprintSections(d, p.Envelope.Footprint, p.Envelope.Reservations)
	}
	if s.Version != nil {
		driftSections(d, s.Version.Provenance.Drift)
	}
	return d
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
	Schema         string      `json:"schema"`
	Verdict        string      `json:"verdict"`
	Text           string      `json:"text"`
	Run            *jRun       `json:"run"`
	Plan           *jRun       `json:"plan,omitempty"`
	AppliedPlan    *jRun       `json:"applied_plan,omitempty"`
	Replans        []*jRun     `json:"replans"`
	Apply          *jRun       `json:"apply,omitempty"`
	Envelope       *jEnvelope  `json:"envelope,omitempty"`
	Summary        *jSummary   `json:"summary,omitempty"`
	Footprint      *jFootprint `json:"footprint,omitempty"`
	Markers        []jMarker   `json:"markers"`
	AllowedBecause []jFact     `json:"allowed_because"`
	Refusals       []jRefusal  `json:"refusals"`
	SincePlan      *jSincePlan `json:"since_plan,omitempty"`
	Version        *jVersion   `json:"version,omitempty"`
	Overlaps       []jOverlap  `json:"overlaps"`
}

func storyJSON(s *engine.RunStory) storyDocument {
	v := storyVerdict(s)
	j := storyDocument{Schema: SchemaRun, Verdict: v.word, Text: v.words.plain(), Run: toRun(&s.Run), Plan: toRun(s.Plan),
		AppliedPlan: toRun(s.AppliedPlan), Replans: toRuns(s.Replans), Apply: toRun(s.Apply), Markers: toMarkers(s.Markers, roles(s)),
		AllowedBecause: []jFact{}, Refusals: []jRefusal{}, Version: toVersion(s.Version), Overlaps: toOverlaps(s.Overlaps)}
	if p := s.Plan; p != nil && p.Envelope != nil {
		sum, fp := toSummary(p.Envelope.Summary), toFootprint(p.Envelope.Footprint, p.Envelope.Reservations)
		j.Envelope, j.Summary, j.Footprint = toEnvelope(p.Envelope), &sum, &fp
	}
	plan := s.Plan
	if a := storyApply(s); a != nil {
		j.AllowedBecause = toFacts(a.AllowedBecause, lastOf(s.Markers, a.ID, engine.MarkerReserved))
		j.Refusals = toRefusals(refusals(*a, s.Markers, s.SincePlan, s.Replans))
	}
	j.SincePlan = toSincePlan(s.SincePlan, plan, s.SincePlanLive, s.SincePlanLive)
	return j
}
