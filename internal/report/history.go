package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// History renders `kl history --state STATE`: one block per version,
// newest first as given — serial, time, producing run with its actor and
// PR, commit mode, "exact" or the drift, partial, the why line (the
// allowed-because facts compressed), the re-plan line and the waited line
// (ADR D5, D6). The first version says how the state began, as its
// provenance records it (engine.Provenance.Origin): "init (adopted from
// file, N resources)" or "init (empty)".
func History(w io.Writer, state string, entries []engine.HistoryEntry, o Options) error {
	return emit(w, o, func() *doc { return historyDoc(entries, state) }, func() any { return historyJSON(entries, state) })
}

// initWords says how a state began, from the init version's recorded
// origin; a version stored without one says only what it holds.
func initWords(v engine.Version) string {
	switch v.Provenance.Origin {
	case "file":
		return fmt.Sprintf("init (adopted from file, %s)", plural(v.Resources, "resource", "resources"))
	case "empty":
		return "init (empty)"
	}
	return fmt.Sprintf("init (%s)", plural(v.Resources, "resource", "resources"))
}

// historyLine is what one version's block says, shared by text, Markdown
// and JSON.
type historyLine struct {
	head      sentence // "version 15 · T · snapshot-merge · exact"
	tone      tone
	run       sentence
	actor     sentence // who created the state (init version)
	why       sentence
	replan    sentence
	waited    sentence
	failed    sentence // the reason a partial apply stopped
	failedKey string   // "failed", "interrupted" or "lease expired"
	warning   sentence // overwritten addresses
	tainted   sentence // resources Terraform left tainted
}

func historyOf(h engine.HistoryEntry) historyLine {
	v, p := h.Version, h.Version.Provenance
	l := historyLine{tone: toneGood}
	head := words(strong(fmt.Sprintf("version %d", v.Serial)), " · "+fmtTime(v.CreatedAt)+" · ")
	if p.Mode == engine.CommitInit || (h.Run == nil && p.Run == "") {
		l.tone = toneInfo
		l.head = words(head, initWords(v))
		if p.Actor != "" {
			l.actor = words(p.Actor)
		}
		return l
	}
	head = head.add(txt(string(p.Mode) + " · "))
	if p.Exact {
		head = head.add(toned(toneGood, "exact"))
	} else {
		l.tone = driftTone(p)
		head = head.add(toned(driftTone(p), driftShort(p.Drift)))
	}
	if p.Partial {
		l.tone = toneBad
		head = head.add(txt(" · "), toned(toneBad, "partial"))
	}
	l.head = head
	l.run = who(p.Run, p.Actor, p.PR)
	if p.PlanRun != "" {
		l.run = words(l.run, ", plan ", runSpan(p.PlanRun))
	}
	if overwritten(p.Drift) {
		l.warning = overwrittenWarning(p)
	}
	if tainted(p.Drift) {
		l.tainted = words(addrs(p.Drift.Tainted), toned(toneBad, ": "+taintedMeaning(len(p.Drift.Tainted))))
	}
	if h.Run != nil {
		var parts []sentence
		for _, f := range h.Run.AllowedBecause {
			if f.Kind == engine.FactReplanUnchanged && h.Replan != nil {
				continue // the re-plan line tells it
			}
			parts = append(parts, factShort(f))
		}
		l.why = join(parts, "; ")
		switch h.Run.Status {
		case engine.StatusFailed, engine.StatusInterrupted, engine.StatusLeaseExpired:
			// The key names the status; the value does not say it again.
			e := endWords(h.Run.Status, h.Run.Reason, toneBad)
			l.failedKey = e[0].text
			l.failed = words(toned(toneBad, strings.TrimPrefix(strings.TrimPrefix(e[1:].plain(), ":"), " ")))
		}
	}
	if h.Replan != nil {
		l.replan = markerWords(*h.Replan)
	}
	var waits []sentence
	for _, m := range h.Waited {
		wait := words("for ", who(m.Other, "", m.OtherPR), " over ", addrs(m.Addresses))
		if m.Waited > 0 {
			wait = words(durationWords(m.Waited)+" ", wait)
		}
		waits = append(waits, wait)
	}
	l.waited = join(waits, "; ")
	return l
}

func historyDoc(entries []engine.HistoryEntry, state string) *doc {
	d := &doc{tone: toneInfo, more: "kl history --state " + state, title: words("History of ", strong(state))}
	if len(entries) == 0 {
		d.summary = append(d.summary, para(words("no versions")))
		return d
	}
	head := entries[0].Version.Serial
	d.summary = append(d.summary, para(words(fmt.Sprintf("%s, newest first; head is version %d", plural(len(entries), "version", "versions"), head))))
	for _, h := range entries {
		l := historyOf(h)
		var f fields
		f = f.addField("WARNING", l.warning)
		f = f.addField("by", l.run)
		f = f.addField(l.failedKey, l.failed)
		f = f.addField("tainted", l.tainted)
		f = f.addField("actor", l.actor)
		f = f.addField("why", l.why)
		f = f.addField("re-plan", l.replan)
		f = f.addField("waited", l.waited)
		if len(f) == 0 {
			f = fields{{"changed", words(countWords(h.Version.Changed))}}
		}
		d.body = append(d.body, section{title: l.head, blocks: []block{f}})
	}
	return d
}

type historyDocument struct {
	Schema  string         `json:"schema"`
	State   string         `json:"state"`
	Entries []historyEntry `json:"entries"`
}

type historyEntry struct {
	Version  *jVersion `json:"version"`
	Init     string    `json:"init,omitempty"`
	Run      *jRun     `json:"run,omitempty"`
	Why      string    `json:"why,omitempty"`
	Facts    []jFact   `json:"allowed_because"`
	Replan   *jMarker  `json:"replan,omitempty"`
	Waited   []jMarker `json:"waited"`
	Headline string    `json:"text"`
}

func historyJSON(entries []engine.HistoryEntry, state string) historyDocument {
	j := historyDocument{Schema: SchemaHistory, State: state, Entries: []historyEntry{}}
	for _, h := range entries {
		l := historyOf(h)
		e := historyEntry{Version: toVersion(&h.Version), Run: toRun(h.Run), Why: l.why.plain(), Facts: []jFact{},
			Waited: toMarkers(h.Waited, nil, nil), Headline: l.head.plain()}
		if h.Version.Provenance.Mode == engine.CommitInit {
			e.Init = h.Version.Provenance.Origin
		}
		if h.Run != nil {
			e.Facts = toFacts(h.Run.AllowedBecause, nil)
		}
		if h.Replan != nil {
			m := toMarker(*h.Replan, "apply", "")
			e.Replan = &m
		}
		j.Entries = append(j.Entries, e)
	}
	return j
}
