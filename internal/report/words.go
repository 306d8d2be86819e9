package report

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// The words of Kilolock's reports, written once. Every fact, marker,
// since-plan entry, overlap and deviation is put into words here; the text and
// Markdown renderers lay the sentences out and the JSON documents carry
// their plain text. Terms are docs/design.md's "Words".

// inlineMax is how many addresses a sentence names before "and N more";
// the full lists are in the footprint sections.
const inlineMax = 8

// fmtTime prints a time as RFC 3339 in UTC; zero prints "-".
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// fmtAge prints how long before now t was ("5m ago"), coarse on purpose.
func fmtAge(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < 0:
		return "in the future"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d/time.Hour))
	}
	return fmt.Sprintf("%dd ago", int(d/(24*time.Hour)))
}

// plural returns "1 version", "2 versions".
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

func serials(ss []int64) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = strconv.FormatInt(s, 10)
	}
	return strings.Join(parts, ", ")
}

// prWords names a pull request, linked when its URL is known.
func prWords(pr *engine.PullRequest) span {
	return linkSpan(pr.String(), pr.URL)
}

// who names a run with its PR and actor: "run 01J… (acme/infra#42, alice)".
func who(id, actor string, pr *engine.PullRequest) sentence {
	s := words("run ", runSpan(id))
	var in []span
	if pr != nil {
		in = append(in, prWords(pr))
	}
	if actor != "" {
		in = append(in, txt(actor))
	}
	if len(in) == 0 {
		return s
	}
	s = s.add(txt(" ("))
	for i, p := range in {
		if i > 0 {
			s = s.add(txt(", "))
		}
		s = s.add(p)
	}
	return s.add(txt(")"))
}

// addrs names up to inlineMax addresses: "`a`, `b` and 3 more".
func addrs(set engine.AddressSet) sentence {
	if len(set) == 0 {
		return words("nothing")
	}
	var s sentence
	n := min(len(set), inlineMax)
	for i, a := range set[:n] {
		if i > 0 {
			s = s.add(txt(", "))
		}
		s = s.add(code(string(a)))
	}
	if rest := len(set) - n; rest > 0 {
		s = s.add(txt(fmt.Sprintf(" and %d more", rest)))
	}
	return s
}

// summaryWords is a plan's change summary, counted per resource instance
// (engine.PlanSummary): "+2 ~1 -0 ±1, 1 moved, 1 imported, 1 forgotten,
// 2 outputs changed". Moves and imports are counted besides their action.
// A plan that destroys anything is flagged: "… — ⚠ 1 to replace" (issue
// 12: destructive changes are flagged in every summary line).
func summaryWords(s engine.PlanSummary) sentence {
	if s.Empty() {
		return words("no changes")
	}
	if s.Refresh > 0 && s.Add+s.Change+s.Destroy+s.Replace+s.Move+s.Read+s.Import+s.Forget == 0 {
		// A refresh-only plan (ADR 0045): its apply changes no object.
		out := words(toned(toneWarn, plural(s.Refresh, "object", "objects")), " changed outside Terraform, to record in the state")
		if s.Outputs > 0 {
			out = out.add(txt(", " + plural(s.Outputs, "output changed", "outputs changed")))
		}
		return out
	}
	out := words(
		toned(toneGood, fmt.Sprintf("+%d", s.Add)), " ",
		toned(toneWarn, fmt.Sprintf("~%d", s.Change)), " ",
		toned(toneBad, fmt.Sprintf("-%d", s.Destroy)), " ",
		toned(toneBad, fmt.Sprintf("±%d", s.Replace)),
	)
	if s.Move > 0 {
		out = out.add(txt(", " + plural(s.Move, "moved", "moved")))
	}
	if s.Read > 0 {
		out = out.add(txt(", " + plural(s.Read, "data read", "data reads")))
	}
	if s.Import > 0 {
		out = out.add(txt(", " + plural(s.Import, "imported", "imported")))
	}
	if s.Forget > 0 {
		out = out.add(txt(", " + plural(s.Forget, "forgotten", "forgotten")))
	}
	if s.Outputs > 0 {
		out = out.add(txt(", " + plural(s.Outputs, "output changed", "outputs changed")))
	}
	if s.Refresh > 0 {
		// A refresh-only plan (ADR 0045): its apply changes no object.
		out = out.add(txt(", " + plural(s.Refresh, "object", "objects") + " changed outside Terraform, to record in the state"))
	}
	if s.Targets {
		out = out.add(txt(" (targeted: not the whole configuration)"))
	}
	if flag := flagWords(s.Destroy, s.Replace); flag != "" {
		out = out.add(txt(" — "), strongT(toneBad, flag))
	}
	return out
}

// reservationCounts counts a reservation set by mode.
func reservationCounts(rs []engine.Reservation) (write, read int) {
	for _, r := range rs {
		if r.Mode == engine.ModeWrite {
			write++
		} else {
			read++
		}
	}
	return write, read
}

func reservationWords(rs []engine.Reservation) sentence {
	w, r := reservationCounts(rs)
	return words(fmt.Sprintf("%s (%d write, %d read)", plural(len(rs), "reservation", "reservations"), w, r))
}

// The three ways two plans' footprints overlap (engine.Overlap).
const (
	howBothWrite = "both write"
	howYouWrite  = "you write what it reads"
	howItWrites  = "it writes what you read"
)

// overlapConsequence says what one way of overlapping means at apply time
// (docs/design.md apply steps 2–3): a write reservation conflicts with anything
// on an overlapping address, so the two applies never run at once; what
// the second one finds depends on what the first one committed.
func overlapConsequence(how string) sentence {
	switch how {
	case howBothWrite:
		return words(strong(howBothWrite), ": they never apply at once; once one has committed, the other is refused as stale (planned target changed) and must re-plan.")
	case howYouWrite:
		return words(strong(howYouWrite), ": they never apply at once (the second waits for the first's reservations, up to ",
			cmdSpan("kl apply --wait", command{verb: verbWaitBound}), "). If yours commits first, its apply re-plans against the head and applies that re-plan only if its intent is unchanged and it changes nothing more.")
	case howItWrites:
		return words(strong(howItWrites), ": they never apply at once (the second waits for the first's reservations, up to ",
			cmdSpan("kl apply --wait", command{verb: verbWaitBound}), "). If it commits first, your apply re-plans against the head and applies that re-plan only if your intent is unchanged and it changes nothing more.")
	}
	return nil
}

// overlapRows returns one (how, addresses) row per way o overlaps.
func overlapRows(o engine.Overlap) []struct {
	how   string
	addrs engine.AddressSet
} {
	var out []struct {
		how   string
		addrs engine.AddressSet
	}
	for _, r := range []struct {
		how   string
		addrs engine.AddressSet
	}{{howBothWrite, o.WriteWrite}, {howYouWrite, o.WriteRead}, {howItWrites, o.ReadWrite}} {
		if len(r.addrs) > 0 {
			out = append(out, r)
		}
	}
	return out
}

// overlapWords puts one overlap into a sentence: "run X (PR, bob): both
// write: `a`; it writes what you read: `b`".
func overlapWords(o engine.Overlap) sentence {
	s := who(o.Run, o.Actor, o.PR).add(txt(": "))
	for i, r := range overlapRows(o) {
		if i > 0 {
			s = s.add(txt("; "))
		}
		s = append(s.add(txt(r.how+": ")), addrs(r.addrs)...)
	}
	return s
}

// taintedMeaning says what n tainted addresses are (engine.Deviation.Tainted).
func taintedMeaning(n int) string {
	if n == 1 {
		return "created but not finished; the next plan replaces it"
	}
	return "created but not finished; the next plan replaces them"
}

// deviationWords says how a commit differs from its plan. Overwritten comes
// first and loud: planned writes merged over a change the head made after
// the plan mean the reservations lapsed; tainted next: resources Terraform
// created but did not finish (engine.Deviation).
func deviationWords(d *engine.Deviation) sentence {
	if d == nil {
		return words("deviation")
	}
	var parts []sentence
	if len(d.Overwritten) > 0 {
		parts = append(parts, words(strongT(toneBad, "overwritten"), " ", addrs(d.Overwritten),
			toned(toneBad, " (written over a change the head made after the plan: reservations lapsed?)")))
	}
	if len(d.Tainted) > 0 {
		parts = append(parts, words(strongT(toneBad, "tainted"), " ", addrs(d.Tainted), toned(toneBad, " ("+taintedMeaning(len(d.Tainted))+")")))
	}
	if len(d.Unplanned) > 0 {
		parts = append(parts, words("unplanned ", addrs(d.Unplanned)))
	}
	if len(d.Unchanged) > 0 {
		parts = append(parts, words("planned but unchanged ", addrs(d.Unchanged)))
	}
	if len(d.Kept) > 0 {
		parts = append(parts, words("kept at head ", addrs(d.Kept)))
	}
	for _, e := range d.InputsChanged {
		parts = append(parts, inputChangedWords(e))
	}
	if len(parts) == 0 {
		return words("deviation")
	}
	return join(parts, "; ")
}

// deviationShort counts a deviation: "deviation (1 unplanned, 1 planned but unchanged)".
func deviationShort(d *engine.Deviation) string {
	if d == nil {
		return "deviation"
	}
	var parts []string
	if n := len(d.Overwritten); n > 0 {
		parts = append(parts, fmt.Sprintf("%d OVERWRITTEN", n))
	}
	if n := len(d.Tainted); n > 0 {
		parts = append(parts, fmt.Sprintf("%d tainted", n))
	}
	if n := len(d.Unplanned); n > 0 {
		parts = append(parts, fmt.Sprintf("%d unplanned", n))
	}
	if n := len(d.Unchanged); n > 0 {
		parts = append(parts, fmt.Sprintf("%d planned but unchanged", n))
	}
	if n := len(d.Kept); n > 0 {
		parts = append(parts, fmt.Sprintf("%d kept at head", n))
	}
	read, write := 0, 0
	for _, e := range d.InputsChanged {
		if e.Class == engine.ClassWriteChanged {
			write++
		} else {
			read++
		}
	}
	if read > 0 {
		parts = append(parts, fmt.Sprintf("%d %s", read, engine.ClassReadChanged.Label()))
	}
	if write > 0 {
		parts = append(parts, fmt.Sprintf("%d %s", write, engine.ClassWriteChanged.Label()))
	}
	return "deviation (" + strings.Join(parts, ", ") + ")"
}

// inputChangedWords tells one version that changed an apply's footprint
// after the snapshot its Terraform applied to, while its lease had lapsed
// (engine.Deviation.InputsChanged, ADR 0072): "plan input changed in
// version 7 by run X (bob): terraform_data.x — Terraform applied values
// computed from the older head".
func inputChangedWords(e engine.SincePlanEntry) sentence {
	s := words(toned(toneBad, e.Class.Label()), fmt.Sprintf(" in version %d", e.Serial))
	if e.Run != "" {
		s = words(s, " by ", who(e.Run, e.Actor, e.PR))
	}
	return words(s, ": ", addrs(e.Addresses), toned(toneBad, " (committed while this apply's lease had lapsed: Terraform applied values computed from the older head; re-plan to check them)"))
}

// overwritten reports whether a deviation merged planned writes over newer
// head changes: a safety failure, shown as a warning, never as mere deviation.
func overwritten(d *engine.Deviation) bool { return d != nil && len(d.Overwritten) > 0 }

// tainted reports whether a deviation holds resources Terraform left tainted.
func tainted(d *engine.Deviation) bool { return d != nil && len(d.Tainted) > 0 }

// deviationTone is the tone of a version's match with its plan.
func deviationTone(p engine.Provenance) tone {
	switch {
	case overwritten(p.Deviation), tainted(p.Deviation):
		return toneBad
	case p.Exact:
		return toneGood
	}
	return toneWarn
}

// overwrittenWarning is the warning a version with overwritten addresses
// carries wherever its provenance is shown.
func overwrittenWarning(p engine.Provenance) sentence {
	return words(strongT(toneBad, "planned writes overwrote newer changes"), ": this commit wrote ", addrs(p.Deviation.Overwritten),
		fmt.Sprintf(" over changes the head made to them after serial %d. Reservations and the since-plan check exist to prevent this; they lapsed (was the lease lost?). See what the newer versions wrote with ", p.SourceSerial),
		code(fmt.Sprintf("kl history --since-plan %s", p.PlanRun)), ".")
}

// matchWords says whether a version matched its plan: "exact" or the deviation.
func matchWords(p engine.Provenance) sentence {
	if p.Exact {
		return words(toned(toneGood, "exact"), ": committed exactly the planned write set")
	}
	return words(toned(deviationTone(p), deviationShort(p.Deviation)), ": ", deviationWords(p.Deviation))
}

// classMark returns the mark of a since-plan class.
func classMark(c engine.SincePlanClass) mark {
	switch c {
	case engine.ClassReadChanged:
		return markReadChanged
	case engine.ClassWriteChanged:
		return markWriteChange
	}
	return markIndependent
}

// headUnchanged is the since-plan answer when nothing was committed after
// the plan's source serial.
func headUnchanged(serial int64) string {
	return fmt.Sprintf("head unchanged since the plan (serial %d)", serial)
}

// countsWords is a since-plan summary: "serial 12 → head 15: = 1
// independent, ~ 1 plan input changed, ! 1 planned target changed", and
// "* 1 own apply" when the plan's own apply committed one of them (not
// counted in the classes: engine.SincePlanSummary.OwnApply). when, if set,
// says when the head was read ("at preflight").
func countsWords(s engine.SincePlanSummary, when string) sentence {
	if when != "" {
		when = " " + when
	}
	if s.HeadSerial == s.SourceSerial {
		return words(headUnchanged(s.SourceSerial) + when)
	}
	out := words(fmt.Sprintf("serial %d → head %d%s: ", s.SourceSerial, s.HeadSerial, when),
		markSpan(markIndependent), fmt.Sprintf(" %d independent, ", s.Independent),
		markSpan(markReadChanged), fmt.Sprintf(" %d plan input changed, ", s.ReadChanged),
		markSpan(markWriteChange), fmt.Sprintf(" %d planned target changed", s.WriteChanged))
	if s.OwnApply > 0 {
		out = words(out, ", ", markSpan(markOwnApply), fmt.Sprintf(" %d own apply", s.OwnApply))
	}
	return out
}

// entryMark is the mark of a since-plan entry: its class, or "*" for the
// version the plan's own apply committed (engine.SincePlanEntry.OwnApply).
func entryMark(e engine.SincePlanEntry) mark {
	if e.OwnApply {
		return markOwnApply
	}
	return classMark(e.Class)
}

// commitWords is a committed version in brief: "version 15 (planned at
// serial 12, merged onto head 14)": the serial the reviewed plan was made
// against (engine.Provenance.SourceSerial), the head its re-plan was made
// against when Terraform applied the re-plan ("re-planned at head 14"),
// and the head the commit merged onto (the committed marker's FromSerial;
// see mergedOnto).
func commitWords(p engine.Provenance, onto int64) sentence {
	replanned := ""
	if p.AppliedPlanRun != "" {
		replanned = fmt.Sprintf(", re-planned at head %d", p.AppliedSourceSerial)
	}
	return words(strong(fmt.Sprintf("version %d", p.CommittedSerial)),
		fmt.Sprintf(" (planned at serial %d%s, merged onto head %d)", p.SourceSerial, replanned, onto))
}

// versionBrief is a committed version in one phrase for titles and
// tables: "version 13 (planned at serial 12, head was 12; snapshot-merge,
// exact)" — the serial the plan was made against, the head the commit
// merged onto (mergedOnto) and how it was committed. Never "serial 12 →
// 13", which reads as two versions committed (issue 11).
func versionBrief(v *engine.Version, ms []engine.Marker) string {
	p := v.Provenance
	return fmt.Sprintf("version %d (planned at serial %d, head was %d; %s, %s)", v.Serial, p.SourceSerial, mergedOnto(v, ms), p.Mode, matchWord(p))
}

// mergedOnto returns the head version v was merged onto: the FromSerial of
// its committed marker among ms, or else the serial before it (a commit
// writes head+1: engine.Version).
func mergedOnto(v *engine.Version, ms []engine.Marker) int64 {
	for _, m := range ms {
		if m.Kind == engine.MarkerCommitted && m.Serial == v.Serial && (v.Provenance.Run == "" || m.Run == "" || m.Run == v.Provenance.Run) {
			return m.FromSerial
		}
	}
	return v.Serial - 1
}

// reencodedWords says, once, how many resources Terraform only stored anew
// (engine.Provenance.Reencoded): "; re-encoded by Terraform: 4 (…)", or
// nothing when none were.
func reencodedWords(set engine.AddressSet) string {
	if len(set) == 0 {
		return ""
	}
	return fmt.Sprintf("; re-encoded by Terraform: %d (a provider's schema upgrade rewrote them: no change, no deviation)", len(set))
}

// countWords counts an address set by what its addresses name — the one
// phrasing of every count of addresses: "3 resources, 1 output", "2
// resources", "1 output", "2 resources, 1 prefix" (a widened prefix such as
// `module.shared.*`), "2 instances of 1 resource". Resources are counted at
// resource level (docs/design.md "address"); where the set names instances
// (ADR 0065: `x.y["a"]`), the instances are counted apart, each resource
// named whole counting as one.
func countWords(set engine.AddressSet) string {
	var outs, prefixes, insts int
	resources := map[engine.Address]bool{}
	keyed := false
	for _, a := range set {
		switch {
		case a.IsOutput():
			outs++
		case a.IsPrefix():
			prefixes++
		default:
			resources[a.Resource()] = true
			insts++
			keyed = keyed || a.IsInstance()
		}
	}
	var parts []string
	if res := len(resources); res > 0 {
		p := plural(res, "resource", "resources")
		if keyed && insts != res {
			p = plural(insts, "instance", "instances") + " of " + p
		}
		parts = append(parts, p)
	}
	if outs > 0 {
		parts = append(parts, plural(outs, "output", "outputs"))
	}
	if prefixes > 0 {
		parts = append(parts, plural(prefixes, "prefix", "prefixes"))
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// durationWords prints a duration rounded to what a reader needs:
// "350ms", "4.8s", "1m12s", "2h5m"; under a millisecond "<1ms".
func durationWords(d engine.Duration) string { return fmtDuration(time.Duration(d)) }

func fmtDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Millisecond:
		return "<1ms"
	case d < time.Second:
		d = d.Round(time.Millisecond)
	case d < time.Minute:
		d = d.Round(100 * time.Millisecond)
	case d < time.Hour:
		d = d.Round(time.Second)
	default:
		d = d.Round(time.Minute)
	}
	s := d.String()
	if d >= time.Minute {
		s = strings.TrimSuffix(s, "0s")
		if d >= time.Hour {
			s = strings.TrimSuffix(s, "0m")
		}
	}
	return s
}
