package web

import (
	"context"
	"errors"
	"fmt"
	"html"
	"sort"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// The timeline (issue 18 §3): a picture of a state's runs over time. One
// row per run, newest at the bottom; its phases as bars — planning,
// waiting (for other runs' reservations), applying (Terraform), committing
// — each committed version a diamond with its serial, a refusal a cross,
// a fallback or widening a triangle; and an arrow from each version to
// every apply whose since-plan preflight classified it, coloured by its
// class: independent (green), plan input changed (amber), planned target
// changed (red). It is drawn from stored markers only, deterministically:
// the same store draws the same SVG.

// timelineRuns is the most runs a timeline draws (the newest).
const timelineRuns = 30

// phase kinds, each a CSS class and a legend entry.
const (
	phasePlanning   = "planning"
	phaseWaiting    = "waiting"
	phaseApplying   = "applying"
	phaseCommitting = "committing"
)

// tlBar is one phase of a row.
type tlBar struct {
	kind     string
	from, to time.Time
}

// tlMark is a point on a row: a version ("version", serial), a refusal
// ("refused") or a fallback ("fell-back").
type tlMark struct {
	kind   string
	at     time.Time
	serial int64
	title  string
}

// tlRow is one run.
type tlRow struct {
	id, label string
	bars      []tlBar
	marks     []tlMark
}

// tlArrow joins a version (committed on row from at from) to the apply on
// row to whose preflight at to classified it as class.
type tlArrow struct {
	fromRow, toRow int
	from, to       time.Time
	class          engine.SincePlanClass
	serial         int64
}

// timeline is what the SVG draws.
type timeline struct {
	state      string
	start, end time.Time
	rows       []tlRow
	arrows     []tlArrow
	waits      []tlWait
}

// tlWait joins a waiting run (row waiter, from its "waited" marker at at)
// to the run it waited on (row on).
type tlWait struct {
	waiter, on int
	at         time.Time
}

// buildTimeline lays out the runs of stories (each run once, in id order:
// the order they were created) between from and to (zero: no bound).
func buildTimeline(state string, stories []*engine.RunStory, from, to time.Time) timeline {
	byID := map[string]engine.Run{}
	markers := map[string][]engine.Marker{}
	for _, s := range stories {
		for _, r := range storyRuns(s) {
			byID[r.ID] = r
		}
		for _, m := range s.Markers {
			if !containsMarker(markers[m.Run], m) {
				markers[m.Run] = append(markers[m.Run], m)
			}
		}
	}
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	tl := timeline{state: state}
	rowOf := map[string]int{}
	for _, id := range ids {
		r := byID[id]
		row := runRow(r, markers[id])
		if len(row.bars) == 0 && len(row.marks) == 0 {
			continue
		}
		if !from.IsZero() && rowEnd(row).Before(from) || !to.IsZero() && rowStart(row).After(to) {
			continue
		}
		rowOf[id] = len(tl.rows)
		tl.rows = append(tl.rows, row)
	}
	for _, id := range ids {
		r := byID[id]
		to, ok := rowOf[id]
		if !ok || r.SincePlan == nil {
			continue
		}
		at := preflightAt(markers[id])
		for _, e := range r.SincePlan.Entries {
			if f, ok := rowOf[e.Run]; ok && !at.IsZero() && e.Class != "" {
				tl.arrows = append(tl.arrows, tlArrow{fromRow: f, toRow: to, from: e.CommittedAt, to: at, class: e.Class, serial: e.Serial})
			}
		}
	}
	for _, id := range ids {
		w, ok := rowOf[id]
		if !ok {
			continue
		}
		for _, m := range markers[id] {
			if on, ok := rowOf[m.Other]; ok && m.Kind == engine.MarkerWaited {
				tl.waits = append(tl.waits, tlWait{waiter: w, on: on, at: m.At})
			}
		}
	}
	for _, row := range tl.rows {
		if s := rowStart(row); tl.start.IsZero() || s.Before(tl.start) {
			tl.start = s
		}
		if e := rowEnd(row); e.After(tl.end) {
			tl.end = e
		}
	}
	if !from.IsZero() && from.After(tl.start) {
		tl.start = from
	}
	if !to.IsZero() && to.Before(tl.end) {
		tl.end = to
	}
	return tl
}

func storyRuns(s *engine.RunStory) []engine.Run {
	out := []engine.Run{s.Run}
	if s.Plan != nil {
		out = append(out, *s.Plan)
	}
	if s.Apply != nil {
		out = append(out, *s.Apply)
	}
	return append(out, s.Replans...)
}

func containsMarker(ms []engine.Marker, m engine.Marker) bool {
	for _, x := range ms {
		if x.Seq == m.Seq && x.Kind == m.Kind && x.At.Equal(m.At) {
			return true
		}
	}
	return false
}

// preflightAt is when an apply's since-plan preflight ran.
func preflightAt(ms []engine.Marker) time.Time {
	for _, m := range ms {
		if m.Kind == engine.MarkerPreflight {
			return m.At
		}
	}
	return time.Time{}
}

// runRow draws one run from its markers.
func runRow(r engine.Run, ms []engine.Marker) tlRow {
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].At.Before(ms[j].At) })
	row := tlRow{id: r.ID, label: rowLabel(r)}
	end := r.UpdatedAt
	if r.FinishedAt != nil {
		end = *r.FinishedAt
	}
	at := func(k engine.MarkerKind) time.Time {
		for _, m := range ms {
			if m.Kind == k {
				return m.At
			}
		}
		return time.Time{}
	}
	bar := func(kind string, from, to time.Time) {
		if !from.IsZero() && !to.IsZero() && !to.Before(from) {
			row.bars = append(row.bars, tlBar{kind, from, to})
		}
	}
	switch {
	case r.Kind == engine.KindPlan:
		done := at(engine.MarkerPlanned)
		if done.IsZero() {
			done = end
		}
		bar(phasePlanning, r.CreatedAt, done)
	case r.Backend != nil:
		bar(phaseApplying, r.CreatedAt, end)
	default:
		reserved, started, applied, committed := at(engine.MarkerReserved), at(engine.MarkerApplyStarted), at(engine.MarkerApplied), at(engine.MarkerCommitted)
		if !at(engine.MarkerWaited).IsZero() {
			until := reserved
			if until.IsZero() {
				until = end
			}
			bar(phaseWaiting, r.CreatedAt, until)
		}
		if applied.IsZero() {
			applied = committed
		}
		if applied.IsZero() && !started.IsZero() {
			// Terraform started and the apply never ended "applied" (its
			// holder died mid-apply, it was interrupted or failed): it
			// applied until the run ended.
			applied = end
		}
		bar(phaseApplying, started, applied)
		bar(phaseCommitting, applied, committed)
	}
	for _, m := range ms {
		switch m.Kind {
		case engine.MarkerCommitted, engine.MarkerRecovered:
			row.marks = append(row.marks, tlMark{kind: "version", at: m.At, serial: m.Serial, title: fmt.Sprintf("version %d committed by %s", m.Serial, r.ID)})
		case engine.MarkerFellBack, engine.MarkerWidened:
			row.marks = append(row.marks, tlMark{kind: "fell-back", at: m.At, title: string(m.Kind) + ": " + m.Reason})
		}
	}
	switch r.Status {
	case engine.StatusRefused, engine.StatusFailed, engine.StatusInterrupted, engine.StatusLeaseExpired:
		// A run that stopped without its outcome: a cross, titled with how
		// it ended — and a row even for one that never ran Terraform
		// (a re-plan that failed after it reserved).
		row.marks = append(row.marks, tlMark{kind: "refused", at: end, title: strings.ReplaceAll(string(r.Status), "-", " ")})
	}
	return row
}

func rowLabel(r engine.Run) string {
	kind := string(r.Kind)
	switch {
	case r.Backend != nil:
		kind = "backend lock"
	case r.ReplanOf != "":
		kind = "re-plan"
	}
	l := kind + " " + r.ID[len(r.ID)-6:] + " · " + r.Actor
	if r.PR != nil {
		l += fmt.Sprintf(" · #%d", r.PR.Number)
	}
	return l
}

func rowStart(r tlRow) time.Time {
	var t time.Time
	for _, b := range r.bars {
		if t.IsZero() || b.from.Before(t) {
			t = b.from
		}
	}
	for _, m := range r.marks {
		if t.IsZero() || m.at.Before(t) {
			t = m.at
		}
	}
	return t
}

func rowEnd(r tlRow) time.Time {
	var t time.Time
	for _, b := range r.bars {
		if b.to.After(t) {
			t = b.to
		}
	}
	for _, m := range r.marks {
		if m.at.After(t) {
			t = m.at
		}
	}
	return t
}

// SVG geometry, in user units (px).
const (
	tlLabelW = 220 // the run labels' column
	tlChartW = 900 // the time axis
	tlRowH   = 26
	tlTop    = 44 // the axis and its ticks
	tlLegend = 40 // below the rows
)

// classColour is each since-plan class's arrow colour (ADR D8; the
// report's tones).
var classColour = map[engine.SincePlanClass]string{
	engine.ClassIndependent:  "#1a7f37",
	engine.ClassReadChanged:  "#bf8700",
	engine.ClassWriteChanged: "#cf222e",
}

// svg draws tl. With pageLinks, each run's label links to its page.
func (tl timeline) svg(pageLinks bool) string {
	h := tlTop + len(tl.rows)*tlRowH + tlLegend
	w := tlLabelW + tlChartW + 20
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, "<title>Timeline of %s</title>\n", html.EscapeString(tl.state))
	b.WriteString(`<defs>`)
	for _, c := range []engine.SincePlanClass{engine.ClassIndependent, engine.ClassReadChanged, engine.ClassWriteChanged} {
		fmt.Fprintf(&b, `<marker id="arrow-%s" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="%s"/></marker>`, c, classColour[c])
	}
	b.WriteString(`<marker id="arrow-waited" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#9a6700"/></marker>`)
	b.WriteString("</defs>\n")
	span := tl.end.Sub(tl.start)
	if span <= 0 {
		span = time.Second
	}
	x := func(t time.Time) float64 {
		f := float64(t.Sub(tl.start)) / float64(span)
		return float64(tlLabelW) + min(max(f, 0), 1)*tlChartW
	}
	y := func(row int) int { return tlTop + row*tlRowH }
	// The axis: start, middle and end times.
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#8c959f"/>`+"\n", tlLabelW, tlTop-6, tlLabelW+tlChartW, tlTop-6)
	for i := 0; i <= 4; i++ {
		t := tl.start.Add(span * time.Duration(i) / 4)
		anchor := "middle"
		if i == 0 {
			anchor = "start"
		} else if i == 4 {
			anchor = "end"
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="%s" fill="#57606a">%s</text>`+"\n", x(t), tlTop-12, anchor, t.UTC().Format("15:04:05"))
	}
	fmt.Fprintf(&b, `<text x="0" y="%d" fill="#57606a">%s UTC · %s</text>`+"\n", 14, tl.start.UTC().Format("2006-01-02"), html.EscapeString(span.Round(time.Millisecond).String()))
	for i, row := range tl.rows {
		yy := y(i)
		if i%2 == 1 {
			fmt.Fprintf(&b, `<rect x="0" y="%d" width="%d" height="%d" fill="#f6f8fa"/>`+"\n", yy, w, tlRowH)
		}
		label := html.EscapeString(row.label)
		if pageLinks {
			fmt.Fprintf(&b, `<a href="%s"><text x="4" y="%d" fill="#0969da"><title>%s</title>%s</text></a>`+"\n", html.EscapeString(PagePath(KindRun, row.id)), yy+17, html.EscapeString(row.id), label)
		} else {
			fmt.Fprintf(&b, `<text x="4" y="%d"><title>%s</title>%s</text>`+"\n", yy+17, html.EscapeString(row.id), label)
		}
		for _, bar := range row.bars {
			x1, x2 := x(bar.from), x(bar.to)
			fmt.Fprintf(&b, `<rect class="phase %s" x="%.1f" y="%d" width="%.1f" height="%d" rx="2" fill="%s"><title>%s %s → %s</title></rect>`+"\n",
				bar.kind, x1, yy+7, max(x2-x1, 2), tlRowH-14, phaseColour[bar.kind], bar.kind, bar.from.UTC().Format(time.RFC3339Nano), bar.to.UTC().Format(time.RFC3339Nano))
		}
		for _, m := range row.marks {
			mx, my := x(m.at), float64(yy+tlRowH/2)
			t := html.EscapeString(m.title)
			switch m.kind {
			case "version":
				fmt.Fprintf(&b, `<path class="version" d="M%.1f,%.1f l6,6 l-6,6 l-6,-6 z" fill="#0969da"><title>%s</title></path><text x="%.1f" y="%.1f" font-size="10" fill="#0969da">v%d</text>`+"\n", mx, my-6, t, mx+7, my+4, m.serial)
			case "refused":
				fmt.Fprintf(&b, `<path class="refused" d="M%.1f,%.1f l10,10 m0,-10 l-10,10" stroke="#cf222e" stroke-width="2.5"><title>%s</title></path>`+"\n", mx-5, my-5, t)
			case "fell-back":
				fmt.Fprintf(&b, `<path class="fell-back" d="M%.1f,%.1f l6,10 l-12,0 z" fill="#8250df"><title>%s</title></path>`+"\n", mx, my-5, t)
			}
		}
	}
	for _, a := range tl.arrows {
		x1, y1, x2, y2 := x(a.from), float64(y(a.fromRow)+tlRowH/2), x(a.to), float64(y(a.toRow)+tlRowH/2)
		c := classColour[a.class]
		fmt.Fprintf(&b, `<path class="arrow %s" d="M%.1f,%.1f C%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="none" stroke="%s" stroke-width="1.5" marker-end="url(#arrow-%s)"><title>version %d: %s</title></path>`+"\n",
			a.class, x1, y1, x1+20, y1, x2-20, y2, x2, y2, c, a.class, a.serial, classWords[a.class])
	}
	for _, wt := range tl.waits {
		wx := x(wt.at)
		fmt.Fprintf(&b, `<path class="waited" d="M%.1f,%d L%.1f,%d" stroke="#9a6700" stroke-width="1.5" stroke-dasharray="4 3" marker-end="url(#arrow-waited)"><title>%s waited on %s</title></path>`+"\n",
			wx, y(wt.waiter)+tlRowH/2, wx, y(wt.on)+tlRowH/2, html.EscapeString(tl.rows[wt.waiter].id), html.EscapeString(tl.rows[wt.on].id))
	}
	svgLegend(&b, y(len(tl.rows))+24)
	b.WriteString("\n</svg>\n")
	return b.String()
}

// svgLegend draws the legend on the line at ly: the phases, the since-plan
// classes' arrows, the marks and the wait.
func svgLegend(b *strings.Builder, ly int) {
	lx := 4
	for _, k := range []string{phasePlanning, phaseWaiting, phaseApplying, phaseCommitting} {
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="14" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, ly-9, phaseColour[k], lx+18, ly, k)
		lx += 90
	}
	// Each class's entry as wide as its words: "planned target changed"
	// ran into the next entry at a fixed width.
	width := map[engine.SincePlanClass]int{engine.ClassIndependent: 115, engine.ClassReadChanged: 160, engine.ClassWriteChanged: 185}
	for _, c := range []engine.SincePlanClass{engine.ClassIndependent, engine.ClassReadChanged, engine.ClassWriteChanged} {
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2" marker-end="url(#arrow-%s)"/><text x="%d" y="%d">%s</text>`+"\n", lx, ly-4, lx+18, ly-4, classColour[c], c, lx+24, ly, classWords[c])
		lx += width[c]
	}
	fmt.Fprintf(b, `<path d="M%d,%d l5,5 l-5,5 l-5,-5 z" fill="#0969da"/><text x="%d" y="%d">version</text>`+"\n", lx+5, ly-9, lx+14, ly)
	lx += 70
	fmt.Fprintf(b, `<path d="M%d,%d l10,10 m0,-10 l-10,10" stroke="#cf222e" stroke-width="2.5"/><text x="%d" y="%d">refused or failed</text>`+"\n", lx, ly-9, lx+14, ly)
	lx += 125
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#9a6700" stroke-width="1.5" stroke-dasharray="4 3"/><text x="%d" y="%d">waited on</text>`, lx, ly-4, lx+18, ly-4, lx+24, ly)
}

var phaseColour = map[string]string{
	phasePlanning: "#8c959f", phaseWaiting: "#d4a72c", phaseApplying: "#0969da", phaseCommitting: "#1a7f37",
}

// classWords are the since-plan classes' labels (the report's words).
var classWords = map[engine.SincePlanClass]string{
	engine.ClassIndependent:  "independent",
	engine.ClassReadChanged:  "plan input changed",
	engine.ClassWriteChanged: "planned target changed",
}

// timelineOf reads the newest runs of state and their stories, and
// builds the timeline between from and to; filter, when set, keeps only
// the runs of that run's story and those its preflight classified.
func (h *Handler) timelineOf(ctx context.Context, state, filter string, from, to time.Time) (timeline, error) {
	runs, err := h.o.Views.Runs(ctx, engine.RunQuery{State: state, Limit: timelineRuns})
	if err != nil {
		return timeline{}, err
	}
	if filter != "" {
		s, err := h.o.Views.RunStory(ctx, filter)
		if err != nil {
			return timeline{}, err
		}
		if s.Run.State != state {
			return timeline{}, engine.Errorf(engine.ErrInvalid, "run %s is of state %s, not %s", filter, s.Run.State, state)
		}
		keep := map[string]bool{}
		for _, r := range storyRuns(s) {
			keep[r.ID] = true
			if r.SincePlan != nil {
				for _, e := range r.SincePlan.Entries {
					keep[e.Run] = true
				}
			}
		}
		var out []engine.Run
		for _, r := range runs {
			if keep[r.ID] {
				out = append(out, r)
			}
		}
		runs = out
	}
	seen := map[string]bool{}
	var stories []*engine.RunStory
	for _, r := range runs {
		if seen[r.ID] {
			continue
		}
		s, err := h.o.Views.RunStory(ctx, r.ID)
		if errors.Is(err, engine.ErrNotFound) {
			continue
		}
		if err != nil {
			return timeline{}, err
		}
		for _, x := range storyRuns(s) {
			seen[x.ID] = true
		}
		stories = append(stories, s)
	}
	return buildTimeline(state, stories, from, to), nil
}
