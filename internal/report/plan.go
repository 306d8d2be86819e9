package report

import (
	"fmt"
	"io"

	"github.com/kilolock/kilolock/internal/engine"
)

// Plan renders a stored plan run (`kl plan`, klbot's plan check run): its
// envelope in brief (ADR D1) with the scope (targets, forced
// replacements), change summary (per resource instance), write set and
// read set (per resource address) with the widened prefixes and why,
// reservation counts, the open plans it overlaps and how (docs/design.md plan
// step 4), and the command that applies it; with out.Diff, the text and
// JSON carry the plan's diff (ADR 0044) — the text right after the
// envelope, Markdown not at all (DiffMarkdown, within the caller's budget).
func Plan(w io.Writer, out *engine.PlanOutcome, o Options) error {
	if out == nil {
		return fmt.Errorf("rendering plan: no plan outcome")
	}
	return emit(w, o, func() *doc {
		d := planDoc(out, o)
		if o.Format == Text && out.Diff != nil {
			// Right after the envelope in brief, before the address lists
			// (issue 12 §2); Markdown callers place DiffMarkdown themselves.
			rest := d.body
			d.body = nil
			diffSection(d, words("Diff"), out.Diff)
			d.body = append(d.body, rest...)
		}
		return d
	}, func() any { return planJSON(out) })
}

func planDoc(out *engine.PlanOutcome, o Options) *doc {
	r := out.Run
	d := &doc{tone: toneInfo, more: "kl run show " + r.ID,
		title: words("Plan ", runSpan(r.ID), " on ", strong(r.State), ": ", string(r.Status))}
	env := r.Envelope
	if env == nil {
		d.tone = toneBad
		d.summary = append(d.summary, para(words(strongT(toneBad, string(r.Status)), endSuffix(r.ID, r.End))))
		return d
	}
	var f fields
	f = f.addField("source serial", words(fmt.Sprint(env.SourceSerial)))
	f = f.addField("actor", words(r.Actor))
	f = f.addField("PR", envelopePRField(env))
	f = f.addField("review", atMergeWords(env))
	f = f.addField("scope", scopeWords(env.Scope))
	f = f.addField("lane", laneWords(env))
	if sl := env.Slice; sl != nil && len(sl.Checks) > 0 {
		f = f.addField("closure proof", proofWords(sl.Checks))
	}
	f = f.addField("changes", changesWords(env.Summary))
	f = f.addField("write set", writeSetWords(env.Footprint.Write, env.Summary))
	f = f.addField("read set", readSetWords(env.Footprint))
	f = f.addField("reservations", reservationWords(env.Reservations))
	ov := words(toned(toneGood, "none"))
	if n := len(out.Overlaps); n > 0 {
		verb := " share"
		if n == 1 {
			verb = " shares"
		}
		ov = words(toned(toneWarn, plural(n, "open plan", "open plans")), verb+" part of this footprint")
	}
	f = f.addField("overlaps", ov)
	for _, fc := range out.Fences {
		d.tone = toneBad
		f = f.addField("fenced", fenceWords(fc))
	}
	switch {
	case r.Status != engine.StatusPlanned || len(out.Fences) > 0:
	case o.Commands != nil && o.Commands.RevertFail && len(env.RevertsInDoubt()) > 0:
		f = f.addField("next", words("bring the branch up to date with its base and push (", code("on_revert: fail"), ")"))
	default:
		f = f.addField("next", words(code(o.applyCmd(r.ID))))
	}
	d.summary = append(d.summary, f)
	// Each revert line carries its own ⚠; the heading keeps the plan's
	// tone (toneWarn's ⏳ means waiting).
	d.summary = append(d.summary, revertBlocks(env)...)
	if blocks := overlapTable(out.Overlaps); blocks != nil {
		d.section(words(fmt.Sprintf("Overlapping open plans (%d)", len(out.Overlaps))), blocks...)
	}
	footprintSections(d, env.Footprint, nil)
	return d
}

// fenceWords: "run A (PR) fences X: its holder died mid-apply; applying
// this plan is refused until `kl run recover A` … (ADR 0035)".
func fenceWords(f engine.Fence) sentence {
	return words(toned(toneBad, "run "+f.Run), prSuffix(f.PR), " fences ", addrs(f.Addresses),
		": its holder died while its Terraform ran; an apply of this plan is refused until ", liftWords(f.Run, f.PR))
}

// prSuffix is " (owner/repo#N)" for a pull request, nothing without one.
func prSuffix(pr *engine.PullRequest) sentence {
	if pr == nil {
		return nil
	}
	return words(" (", prWords(pr), ")")
}

type planDocument struct {
	Schema    string      `json:"schema"`
	Run       *jRun       `json:"run"`
	Envelope  *jEnvelope  `json:"envelope"`
	Summary   *jSummary   `json:"summary"`
	Footprint *jFootprint `json:"footprint"`
	Overlaps  []jOverlap  `json:"overlaps"`
	Fences    []jFence    `json:"fences"`
	Next      string      `json:"next,omitempty"`
	Diff      *jDiff      `json:"diff,omitempty"`
}

// jFence is a fence a plan was made over (engine.Fence).
type jFence struct {
	Run       string   `json:"run"`
	PR        *jPR     `json:"pr,omitempty"`
	Addresses []string `json:"addresses"`
	Text      string   `json:"text"`
}

func planJSON(out *engine.PlanOutcome) planDocument {
	j := planDocument{Schema: SchemaPlan, Run: toRun(&out.Run), Envelope: toEnvelope(out.Run.Envelope), Overlaps: toOverlaps(out.Overlaps), Diff: toDiff(out.Diff)}
	if env := out.Run.Envelope; env != nil {
		s := toSummary(env.Summary)
		fp := toFootprint(env.Footprint, env.Reservations)
		j.Summary, j.Footprint = &s, &fp
	}
	j.Fences = []jFence{}
	for _, f := range out.Fences {
		j.Fences = append(j.Fences, jFence{Run: f.Run, PR: toPR(f.PR), Addresses: strs(f.Addresses), Text: fenceWords(f).plain()})
	}
	if out.Run.Status == engine.StatusPlanned && len(out.Fences) == 0 {
		j.Next = "kl apply " + out.Run.ID
	}
	return j
}

// Footprint renders `kl footprint PLAN.json`: the change summary, write
// set, read set, the widened prefixes with their reasons, whether the read
// set is unverified and why (the configuration was not read), and the
// reservation set an apply would take (docs/design.md "footprint",
// "reservation"). source names the plan JSON file as given.
func Footprint(w io.Writer, source string, fp engine.Footprint, sum engine.PlanSummary, o Options) error {
	rs := fp.Reservations()
	return emit(w, o, func() *doc { return footprintDoc(source, fp, sum, rs) }, func() any {
		res := make([]jReservation, len(rs))
		for i, r := range rs {
			res[i] = jReservation{Address: string(r.Address), Mode: string(r.Mode)}
		}
		return footprintDocument{Schema: SchemaFootprint, Source: source, Summary: toSummary(sum),
			Footprint: toFootprint(fp, rs), Reservations: res}
	})
}

type jReservation struct {
	Address string `json:"address"`
	Mode    string `json:"mode"`
}

type footprintDocument struct {
	Schema       string         `json:"schema"`
	Source       string         `json:"source"`
	Summary      jSummary       `json:"summary"`
	Footprint    jFootprint     `json:"footprint"`
	Reservations []jReservation `json:"reservations"`
}

func footprintDoc(source string, fp engine.Footprint, sum engine.PlanSummary, rs []engine.Reservation) *doc {
	d := &doc{tone: toneInfo, title: words("Footprint of ", code(source))}
	var f fields
	f = f.addField("changes", changesWords(sum))
	f = f.addField("write set", writeSetWords(fp.Write, sum))
	read := words(countWords(fp.Read))
	if fp.Unverified != "" {
		read = words(read, ", ", toned(toneWarn, "unverified"), ": configuration not read (", code("--config-dir"), " with the plan's root module directory reads it)")
	}
	f = f.addField("read set", read)
	f = f.addField("widened", words(plural(len(fp.Widened), "prefix", "prefixes")))
	f = f.addField("reservations", reservationWords(rs))
	d.summary = append(d.summary, f)
	footprintSections(d, fp, nil)
	if len(fp.Widened) > 0 {
		t := table{head: []string{"prefix", "from", "reason"}}
		for _, w := range fp.Widened {
			t.rows = append(t.rows, []sentence{{code(string(w.Address))}, words(w.From), words(w.Reason)})
		}
		d.section(words(fmt.Sprintf("Widened (%d)", len(fp.Widened))), t,
			para(words(toned(toneDim, "a widened prefix covers every resource below it: never narrower than the truth"))))
	}
	rows := make([]addrRow, len(rs))
	for i, r := range rs {
		rows[i] = addrRow{addr: string(r.Address), note: words(toned(modeTone(r.Mode), string(r.Mode)))}
	}
	d.section(words("Reservation set: ", reservationWords(rs)), nonEmpty(addrList{rows: rows}, words("nothing to reserve")))
	return d
}

func modeTone(m engine.ReservationMode) tone {
	if m == engine.ModeWrite {
		return toneWarn
	}
	return toneDim
}

// atMergeWords says that a plan was made at merge (Envelope.PlannedAtMerge)
// and so reviewed by nobody; nil for any other plan, of which the report
// claims nothing.
func atMergeWords(env *engine.Envelope) sentence {
	if !env.PlannedAtMerge {
		return nil
	}
	return words(toned(toneWarn, "⚠ planned at merge, not reviewed"), ": the pull request had no applicable reviewed plan when it merged, so this plan was made then and nobody reviewed it")
}
