package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// History renders `kl history --state STATE`: a header that places the
// page in the state — its head (st.HeadSerial, whatever the page), the
// serials shown and, when older versions exist, the command for the next
// page — then one block per version, newest first as given: serial, time,
// producing run with its actor and PR, commit mode, "exact" or the deviation,
// partial, what the version changed (its addresses, the first few named),
// the why line (the allowed-because facts compressed), the
// re-plan line and the waited line (ADR D5, D6). The first version says
// how the state began, as its provenance records it
// (engine.Provenance.Origin): "init (adopted from file, N resources)" or
// "init (empty)".
func History(w io.Writer, st engine.State, entries []engine.HistoryEntry, o Options) error {
	return emit(w, o, func() *doc { return historyDoc(entries, st) }, func() any { return historyJSON(entries, st) })
}

// historyPage says where a page of history sits in its state: "head is
// version 9; versions 4–3 shown (newest first); more: kl history --state
// p --before 3". next is the --before of the next page, 0 when the page
// ends at the state's first version (its init version, or serial 0).
func historyPage(entries []engine.HistoryEntry, st engine.State) (line sentence, next int64, nextCmd string) {
	line = words(fmt.Sprintf("head is version %d; ", st.HeadSerial))
	if len(entries) == 0 {
		return line.add(txt("no versions on this page")), 0, ""
	}
	newest, oldest := entries[0].Version, entries[len(entries)-1].Version
	if len(entries) == 1 {
		line = line.add(txt(fmt.Sprintf("version %d shown", newest.Serial)))
	} else {
		line = line.add(txt(fmt.Sprintf("versions %d–%d shown (newest first)", newest.Serial, oldest.Serial)))
	}
	if oldest.Serial > 0 && oldest.Provenance.Mode != engine.CommitInit {
		next = oldest.Serial
		nextCmd = fmt.Sprintf("kl history --state %s --before %d", st.Name, next)
		line = words(line, "; more: ", code(nextCmd))
	}
	return line, next, nextCmd
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
	changed   sentence // the addresses the version changed (not for the init version)
	why       sentence
	replan    sentence
	waited    sentence
	failed    sentence // the reason a partial apply stopped
	failedKey string   // "failed", "interrupted" or "lease expired"
	warning   sentence // overwritten addresses
	tainted   sentence // resources Terraform left tainted
	reason    sentence // a day-2 operation's reason, in the operator's words
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
	if p.Mode.Operation() {
		// A day-2 operation (ADR 0055): no plan to be exact against.
		l.tone = toneInfo
		l.head = words(head, operationProvWords(p))
		l.changed = changedWords(v.Changed)
		l.run = who(p.Run, p.Actor, p.PR)
		l.reason = words(p.Reason)
		return l
	}
	head = head.add(txt(string(p.Mode) + " · "))
	if p.Exact {
		head = head.add(toned(toneGood, "exact"))
	} else {
		l.tone = deviationTone(p)
		head = head.add(toned(deviationTone(p), deviationShort(p.Deviation)))
	}
	if p.Partial {
		l.tone = toneBad
		head = head.add(txt(" · "), toned(toneBad, "partial"))
	}
	l.head = head
	l.changed = changedWords(v.Changed)
	l.run = who(p.Run, p.Actor, p.PR)
	if p.PlanRun != "" {
		l.run = words(l.run, ", plan ", runSpan(p.PlanRun))
	}
	if overwritten(p.Deviation) {
		l.warning = overwrittenWarning(p)
	}
	if tainted(p.Deviation) {
		l.tainted = words(addrs(p.Deviation.Tainted), toned(toneBad, ": "+taintedMeaning(len(p.Deviation.Tainted))))
	}
	if h.Run != nil {
		l.why = whyLine(h.Run.AllowedBecause, h.Replan != nil)
		switch h.Run.Status {
		case engine.StatusFailed, engine.StatusInterrupted, engine.StatusLeaseExpired:
			// The key names the status; the value does not say it again.
			e := endWordsOf(h.Run.Status, h.Run.ID, h.Run.End, toneBad)
			l.failedKey = e[0].text
			l.failed = words(toned(toneBad, strings.TrimPrefix(strings.TrimPrefix(e[1:].plain(), ":"), " ")))
		}
	}
	if h.Replan != nil {
		l.replan = markerWords(*h.Replan)
		if p.AppliedPlanRun != "" && p.AppliedPlanRun == h.Replan.Other {
			l.replan = l.replan.add(txt("; applied the re-plan"))
		}
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

// whyRunsNamed is how many runs a compressed why clause names; one more is
// named rather than counted ("and 1 more").
const whyRunsNamed = 3

// whyLine compresses a version's allowed-because facts to one line for
// history (kl run show and kl why list each in full): the facts of one kind
// about several runs — disjoint writes, read/read, waited for — become one
// clause, where the first of them stood, that counts the runs and names the
// first few ("disjoint writes with 7 concurrent runs (A, B, C and 4
// more)"), so that the line does not grow with the concurrency.
// skipReplan leaves out the re-plan fact, which the re-plan line tells.
func whyLine(facts []engine.Fact, skipReplan bool) sentence {
	type group struct {
		kind engine.FactKind
		runs []string
		one  engine.Fact
	}
	var order []*group
	byKind := map[engine.FactKind]*group{}
	for _, f := range facts {
		if (f.Kind == engine.FactReplanUnchanged || f.Kind == engine.FactReplanApplied) && skipReplan {
			continue
		}
		switch f.Kind {
		case engine.FactDisjointWrites, engine.FactReadRead, engine.FactWaitedFor:
			if g, ok := byKind[f.Kind]; ok {
				g.runs = append(g.runs, f.Run)
				continue
			}
			g := &group{kind: f.Kind, runs: []string{f.Run}, one: f}
			byKind[f.Kind] = g
			order = append(order, g)
		default:
			order = append(order, &group{kind: f.Kind, one: f})
		}
	}
	var parts []sentence
	for _, g := range order {
		if len(g.runs) < 2 {
			parts = append(parts, factShort(g.one))
			continue
		}
		var named sentence
		shown := g.runs
		if len(shown) > whyRunsNamed+1 {
			shown = shown[:whyRunsNamed]
		}
		for i, r := range shown {
			if i > 0 {
				named = named.add(txt(", "))
			}
			named = named.add(runSpan(r))
		}
		if n := len(g.runs) - len(shown); n > 0 {
			named = named.add(txt(fmt.Sprintf(" and %d more", n)))
		}
		var lead string
		switch g.kind {
		case engine.FactDisjointWrites:
			lead = fmt.Sprintf("disjoint writes with %d concurrent runs (", len(g.runs))
		case engine.FactReadRead:
			lead = fmt.Sprintf("read/read with %d concurrent runs (", len(g.runs))
		default:
			lead = fmt.Sprintf("waited for %d runs (", len(g.runs))
		}
		parts = append(parts, words(lead, named, ")"))
	}
	return join(parts, "; ")
}

// changedWords says what a version changed: the addresses (the first few
// named) and how many of each kind, "`a`, `b` (2 resources)"; "nothing"
// for a version that changed no address.
func changedWords(set engine.AddressSet) sentence {
	if len(set) == 0 {
		return words("nothing")
	}
	return words(addrs(set), " ("+countWords(set)+")")
}

func historyDoc(entries []engine.HistoryEntry, st engine.State) *doc {
	d := &doc{tone: toneInfo, more: "kl history --state " + st.Name, title: words("History of ", strong(st.Name))}
	line, _, _ := historyPage(entries, st)
	d.summary = append(d.summary, para(line))
	for _, h := range entries {
		l := historyOf(h)
		var f fields
		f = f.addField("WARNING", l.warning)
		f = f.addField("by", l.run)
		f = f.addField("changed", l.changed)
		f = f.addField("reason", l.reason)
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
	Schema      string         `json:"schema"`
	State       string         `json:"state"`
	HeadSerial  int64          `json:"head_serial"`
	NextBefore  int64          `json:"next_before,omitempty"`
	NextCommand string         `json:"next_command,omitempty"`
	Text        string         `json:"text"`
	Entries     []historyEntry `json:"entries"`
}

type historyEntry struct {
	Version  *jVersion `json:"version"`
	Init     string    `json:"init,omitempty"`
	Run      *jRun     `json:"run,omitempty"`
	Why      string    `json:"why,omitempty"`
	Facts    []jFact   `json:"allowed_because"`
	Replan   *jMarker  `json:"replan,omitempty"`
	Waited   []jMarker `json:"waited"`
	Changed  string    `json:"changed,omitempty"` // what the version changed, in words (its addresses: version.changed)
	Headline string    `json:"text"`
}

func historyJSON(entries []engine.HistoryEntry, st engine.State) historyDocument {
	line, next, nextCmd := historyPage(entries, st)
	j := historyDocument{Schema: SchemaHistory, State: st.Name, HeadSerial: st.HeadSerial, NextBefore: next, NextCommand: nextCmd,
		Text: line.plain(), Entries: []historyEntry{}}
	for _, h := range entries {
		l := historyOf(h)
		e := historyEntry{Version: toVersion(&h.Version), Run: toRun(h.Run), Why: l.why.plain(), Facts: []jFact{},
			Waited: toMarkers(h.Waited, nil, nil), Changed: l.changed.plain(), Headline: l.head.plain()}
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
