package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// statusMax is how many held addresses Status names per mode before it
// counts the rest.
const statusMax = 8

// Status renders `kl status` (ADR D6 "what is running now"): each active
// run with what it holds (write and read counts and the addresses, the
// first statusMax of each named), who waits on whom ("run B waits on run A
// over X"), the open plans, and leases this call found expired.
func Status(w io.Writer, st *engine.Status, o Options) error {
	if st == nil {
		return fmt.Errorf("rendering status: no status")
	}
	return emit(w, o, func() *doc { return statusDoc(st, o) }, func() any { return statusJSON(st) })
}

// holdsOf splits a run's reservations by mode.
func holdsOf(rs []engine.Reservation) (write, read engine.AddressSet) {
	var w, r []engine.Address
	for _, h := range rs {
		if h.Mode == engine.ModeWrite {
			w = append(w, h.Address)
		} else {
			r = append(r, h.Address)
		}
	}
	return engine.NewAddressSet(w...), engine.NewAddressSet(r...)
}

// waitWords: "run B (PR) waits on run A (PR) over X".
func waitWords(a engine.ActiveRun, b engine.Blocker) sentence {
	if b.Backend != nil {
		return words(who(a.Run.ID, "", a.Run.PR), toned(toneWarn, " waits on "), blockerLockText(b), " over ", addrs(b.Addresses))
	}
	return words(who(a.Run.ID, "", a.Run.PR), toned(toneWarn, " waits on "), who(b.Run, b.Actor, b.PR), " over ", addrs(b.Addresses))
}

func statusDoc(st *engine.Status, o Options) *doc {
	title := fmt.Sprintf("Status: %s, %s", plural(len(st.Active), "active run", "active runs"), plural(len(st.OpenPlans), "open plan", "open plans"))
	tn := toneInfo
	if len(st.Fenced) > 0 {
		title = fmt.Sprintf("Status: %s, %s", plural(len(st.Fenced), "fenced run", "fenced runs"), strings.TrimPrefix(title, "Status: "))
		tn = toneBad
	}
	d := &doc{tone: tn, more: "kl status", title: words(title)}
	var waits list
	for _, a := range st.Active {
		for _, b := range a.WaitingOn {
			waits = append(waits, item{s: waitWords(a, b)})
		}
	}
	if len(waits) > 0 {
		d.summary = append(d.summary, waits)
	} else if len(st.Active) > 0 {
		d.summary = append(d.summary, para(words(toned(toneGood, "nobody waits"), ": the active runs' reservations are compatible")))
	}
	if len(st.Fenced) > 0 {
		var l list
		for _, f := range st.Fenced {
			l = append(l, item{s: fencedWords(f)})
		}
		d.summary = append([]block{l}, d.summary...)
	}
	if len(st.Expired) > 0 {
		var l list
		for _, id := range st.Expired {
			if f := fencedRun(st, id); f != nil && backendRun(f.Run) {
				l = append(l, item{s: words(who(id, "", nil), toned(toneBad, " lease ran out without an UNLOCK (fenced)"), ": the backend lock stays a fence (above)")})
				continue
			}
			if fencedIn(st, id) {
				l = append(l, item{s: words(who(id, "", nil), toned(toneBad, " lease expired mid-apply (fenced)"), ": its write set stays fenced (above)")})
				continue
			}
			l = append(l, item{s: words(who(id, "", nil), toned(toneBad, " lease expired"), ": its reservations were dropped")})
		}
		d.summary = append(d.summary, l)
	}
	for _, a := range st.Active {
		d.body = append(d.body, activeSection(a, o))
	}
	if len(st.OpenPlans) > 0 {
		t := table{head: []string{"plan", "state", "actor", "PR", "source serial", "what"}}
		for _, p := range st.OpenPlans {
			pr, serial := sentence{}, sentence{}
			if p.PR != nil {
				pr = words(prWords(p.PR))
			}
			if p.Envelope != nil {
				serial = words(fmt.Sprint(p.Envelope.SourceSerial))
			}
			what := whatWords(p)
			for _, f := range fencesOver(st, p) {
				what = words(what, "; ", toned(toneBad, "fenced"), " by ", runSpan(f.Run.ID),
					": an apply is refused until it is lifted (above)")
			}
			t.rows = append(t.rows, []sentence{{runSpan(p.ID)}, words(p.State), words(p.Actor), pr, serial, what})
		}
		d.section(words(fmt.Sprintf("Open plans (%d)", len(st.OpenPlans))), t)
	}
	return d
}

// fencedWords: "run A (PR) is fenced: lease expired mid-apply (Terraform
// started T); it fences X — `kl run recover A` …" (ADR 0035).
func fencedWords(f engine.FencedRun) sentence {
	w, _ := holdsOf(f.Fences)
	var s sentence
	if backendRun(f.Run) {
		s = fencedLockWords(f, w)
	} else {
		s = words(who(f.Run.ID, f.Run.Actor, f.Run.PR), " ", toned(toneBad, "is fenced"), ": lease expired mid-apply")
		if !f.TerraformStarted.IsZero() {
			s = s.add(txt(" (its Terraform started " + leaseTime(f.TerraformStarted) + ")"))
		}
		s = words(s, "; it fences ", heldWords(w), " — ", liftWords(f.Run.ID, f.Run.PR))
	}
	// A backend lock's fence above all: Terraform showed only "409".
	if m := f.ForceUnlockRefused; m != nil {
		s = words(s, "; ", toned(toneBad, "terraform force-unlock refused"), " ("+fmtTime(m.At)+", by "+orWords(m.By, "an unknown actor")+
			"): force-unlock lifts only a live backend lock, never a fence")
	}
	return s
}

// fencesOver is the fenced runs of st whose fences meet what open plan p
// reserves (its write or read set): an apply of p is refused at once
// until each is lifted (ADR 0035), so kl status must not list p as
// simply applicable.
func fencesOver(st *engine.Status, p engine.Run) []engine.FencedRun {
	if p.Envelope == nil {
		return nil
	}
	var reserved engine.AddressSet
	for _, r := range p.Envelope.Reservations {
		reserved = append(reserved, r.Address)
	}
	var out []engine.FencedRun
	for _, f := range st.Fenced {
		if f.Run.State != p.State {
			continue
		}
		var fenced engine.AddressSet
		for _, r := range f.Fences {
			fenced = append(fenced, r.Address)
		}
		if len(reserved.Overlapping(fenced)) > 0 {
			out = append(out, f)
		}
	}
	return out
}

// fencedRun is run id among st's fenced runs, or nil.
func fencedRun(st *engine.Status, id string) *engine.FencedRun {
	for i := range st.Fenced {
		if st.Fenced[i].Run.ID == id {
			return &st.Fenced[i]
		}
	}
	return nil
}

// fencedIn reports whether run id is among st's fenced runs.
func fencedIn(st *engine.Status, id string) bool {
	for _, f := range st.Fenced {
		if f.Run.ID == id {
			return true
		}
	}
	return false
}

// heldWords names up to statusMax addresses and counts the rest.
func heldWords(set engine.AddressSet) sentence {
	if len(set) == 0 {
		return nil
	}
	var s sentence
	n := min(len(set), statusMax)
	for i, a := range set[:n] {
		if i > 0 {
			s = s.add(txt(", "))
		}
		s = s.add(code(string(a)))
	}
	if rest := len(set) - n; rest > 0 {
		s = s.add(toned(toneDim, fmt.Sprintf(" and %d more", rest)))
	}
	return s
}

type statusDocument struct {
	Schema    string       `json:"schema"`
	Fenced    []jFenced    `json:"fenced"`
	Active    []jActiveRun `json:"active"`
	Waits     []jWait      `json:"waits"`
	OpenPlans []runRow     `json:"open_plans"`
	Expired   []string     `json:"expired"`
}

type jActiveRun struct {
	Run       *jRun    `json:"run"`
	Since     jtime    `json:"since"`
	Write     []string `json:"write"`
	Read      []string `json:"read"`
	WaitingOn []jWait  `json:"waiting_on"`
	// Operation: what a day-2 operation's run does (ADR 0055).
	Operation *jOperation `json:"operation,omitempty"`
	// A backend lock's (ADR 0056): its lease end, its writes, its last
	// refused write in words.
	LeaseUntil *jtime `json:"lease_until,omitempty"`
	Writes     int    `json:"writes,omitempty"`
	Refused    string `json:"refused_write,omitempty"`
}

type jFenced struct {
	Run              *jRun    `json:"run"`
	TerraformStarted *jtime   `json:"terraform_started,omitempty"`
	Fences           []string `json:"fences"`
	Text             string   `json:"text"`
}

type jWait struct {
	Run       string   `json:"run"`
	On        string   `json:"on"`
	OnPR      *jPR     `json:"on_pr,omitempty"`
	Addresses []string `json:"addresses"`
	Text      string   `json:"text"`
}

func statusJSON(st *engine.Status) statusDocument {
	j := statusDocument{Schema: SchemaStatus, Fenced: []jFenced{}, Active: []jActiveRun{}, Waits: []jWait{}, OpenPlans: []runRow{}, Expired: orEmpty(st.Expired)}
	for i := range st.Fenced {
		f := st.Fenced[i]
		w, _ := holdsOf(f.Fences)
		jf := jFenced{Run: toRun(&f.Run), Fences: strs(w), Text: fencedWords(f).plain()}
		if !f.TerraformStarted.IsZero() {
			t := jtime(f.TerraformStarted)
			jf.TerraformStarted = &t
		}
		j.Fenced = append(j.Fenced, jf)
	}
	for i := range st.Active {
		a := st.Active[i]
		w, r := holdsOf(a.Holds)
		ja := jActiveRun{Run: toRun(&a.Run), Since: jtime(a.Since), Write: strs(w), Read: strs(r), WaitingOn: []jWait{}, Operation: toOperation(a.Operation)}
		if backendRun(a.Run) {
			lu := jtime(a.LeaseUntil)
			ja.LeaseUntil, ja.Writes = &lu, a.Writes
			if a.Refused != nil {
				ja.Refused = refusedWords(*a.Refused).plain()
			}
		}
		for _, b := range a.WaitingOn {
			jw := jWait{Run: a.Run.ID, On: b.Run, OnPR: toPR(b.PR), Addresses: strs(b.Addresses), Text: waitWords(a, b).plain()}
			ja.WaitingOn = append(ja.WaitingOn, jw)
			j.Waits = append(j.Waits, jw)
		}
		j.Active = append(j.Active, ja)
	}
	for i := range st.OpenPlans {
		j.OpenPlans = append(j.OpenPlans, runRow{jRun: toRun(&st.OpenPlans[i]), What: whatWords(st.OpenPlans[i]).plain()})
	}
	return j
}

// activeSection is one active run of `kl status`: kind, actor, PR, status
// and since when; its plan or, for a day-2 operation, what it does; what it
// holds and whom it waits on.
func activeSection(a engine.ActiveRun, o Options) section {
	r := a.Run
	kind := string(r.Kind)
	switch {
	case backendRun(r):
		kind = "backend lock" // ADR 0056
	case operationRun(r):
		kind = "operation" // a day-2 operation (ADR 0055)
	}
	title := words(kind+" ", runSpan(r.ID), " · "+r.Actor)
	if r.PR != nil {
		title = words(title, " · ", prWords(r.PR))
	}
	status := words(toned(statusTone(r.Status), string(r.Status)))
	if backendRun(r) && r.Lock.Read() {
		// A read reservation (ADR 0056): it applies nothing.
		status = words(toned(toneInfo, "reading"), " (", engine.TerraformCommand(r.Backend.Operation), " through the backend)")
	}
	title = words(title, " · ", status, " since ", whenWords(a.Since, o.Now))
	w, rd := holdsOf(a.Holds)
	var f fields
	switch {
	case backendRun(r):
		f = lockFields(f, a, o)
	case a.Operation != nil:
		f = f.addField("operation", operationMarkerWords(*a.Operation))
	case r.Kind == engine.KindApply && r.PlanRun != "":
		f = f.addField("plan", words(runSpan(r.PlanRun)))
	}
	f = f.addField("holds", words(fmt.Sprintf("%d write, %d read", len(w), len(rd))))
	f = f.addField("write", heldWords(w))
	f = f.addField("read", heldWords(rd))
	for _, b := range a.WaitingOn {
		f = f.addField("waits on", words(who(b.Run, b.Actor, b.PR), " over ", addrs(b.Addresses)))
	}
	return section{title: title, blocks: []block{f}}
}
