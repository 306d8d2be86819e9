package report

import (
	"fmt"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// What Terraform said it did in an apply (engine.ApplyLog, ADR 0047), in
// every apply view: Terraform's totals line (or the counts per outcome when
// it wrote none) in the summary, which Truncate keeps; its diagnostics in
// full, errors and warnings, after how the apply ended; and one line per
// resource instance at the very end of the view, errored ones first, so
// that they are what Truncate cuts — after mdResourceRows in Markdown, with
// a count and the `kl run show RUN` that lists them all.

// mdResourceRows is the most resource lines an apply view's Markdown
// holds (~120 bytes each: a sixth of a check run's 65,535); the rest are
// counted. A sticky comment holds several projects' views.
const mdResourceRows = 100

// outcomeOrder lists resource outcomes as the views order them: what went
// wrong first.
var outcomeOrder = []engine.ResourceOutcome{engine.ResourceErrored, engine.ResourceStarted, engine.ResourceNotStarted, engine.ResourceApplied}

// outcomeWords names a resource outcome in a count ("2 errored").
func outcomeWords(o engine.ResourceOutcome) string {
	switch o {
	case engine.ResourceStarted:
		return "started, no end reported"
	case engine.ResourceNotStarted:
		return "not started"
	}
	return string(o)
}

func outcomeTone(o engine.ResourceOutcome) tone {
	switch o {
	case engine.ResourceApplied:
		return toneGood
	case engine.ResourceErrored:
		return toneBad
	}
	return toneWarn
}

// outcomeCounts is "2 errored, 3 applied": the instances per outcome, in
// outcomeOrder, the empty ones left out.
func outcomeCounts(l *engine.ApplyLog) sentence {
	var parts []sentence
	for _, o := range outcomeOrder {
		if n := l.Count(o); n > 0 {
			parts = append(parts, words(toned(outcomeTone(o), fmt.Sprintf("%d %s", n, outcomeWords(o)))))
		}
	}
	if len(parts) == 0 {
		return words("no resource instance")
	}
	return join(parts, ", ")
}

// applyLogWords is the summary field of an apply log: Terraform's own
// totals line, and the outcomes when not every instance was applied; or,
// when Terraform wrote no totals line (it writes one only when the apply
// completes), the outcomes and that it wrote none.
func applyLogWords(l *engine.ApplyLog) sentence {
	if l == nil {
		return nil
	}
	if l.Totals != nil {
		s := words(l.Totals.Message)
		if len(l.Resources) > l.Count(engine.ResourceApplied) {
			s = words(s, " (", outcomeCounts(l), ")")
		}
		return s
	}
	return words(outcomeCounts(l), toned(toneDim, "; no totals line (Terraform writes one only when the apply completes)"))
}

// diagnosticsTitle: "Terraform's diagnostics: 2 errors, 1 warning".
func diagnosticsTitle(ds []engine.Diagnostic) sentence {
	errs := 0
	for _, d := range ds {
		if d.Severity == "error" {
			errs++
		}
	}
	var parts []string
	if errs > 0 {
		parts = append(parts, plural(errs, "error", "errors"))
	}
	if n := len(ds) - errs; n > 0 {
		parts = append(parts, plural(n, "warning", "warnings"))
	}
	t := toneWarn
	if errs > 0 {
		t = toneBad
	}
	return words(toned(t, "Terraform's diagnostics: "+strings.Join(parts, ", ")))
}

// applyLogDiagnostics adds the log's diagnostics in full, in Terraform's
// order.
func applyLogDiagnostics(d *doc, l *engine.ApplyLog) {
	if l == nil || len(l.Diagnostics) == 0 {
		return
	}
	d.section(diagnosticsTitle(l.Diagnostics), diagList(l.Diagnostics))
}

// applyLogResources adds the log's resource instances, errored ones first;
// more is the command that lists them all (run is the apply run).
func applyLogResources(d *doc, l *engine.ApplyLog, run string) {
	if l == nil || len(l.Resources) == 0 {
		return
	}
	d.section(words(fmt.Sprintf("Terraform's apply, per resource instance (%d): ", len(l.Resources)), outcomeCounts(l)),
		resourceList{rows: orderedResources(l), more: "kl run show " + run})
}

// orderedResources is the log's instances by outcomeOrder, each outcome in
// the log's order (by address).
func orderedResources(l *engine.ApplyLog) []engine.ResourceApply {
	out := make([]engine.ResourceApply, 0, len(l.Resources))
	for _, o := range outcomeOrder {
		for _, r := range l.Resources {
			if r.Outcome == o {
				out = append(out, r)
			}
		}
	}
	for _, r := range l.Resources { // an outcome of a newer kl
		if !knownOutcome(r.Outcome) {
			out = append(out, r)
		}
	}
	return out
}

func knownOutcome(o engine.ResourceOutcome) bool {
	for _, k := range outcomeOrder {
		if o == k {
			return true
		}
	}
	return false
}

// diagList is a list of Terraform diagnostics, each laid out as Terraform
// lays it out: "Error: SUMMARY", where it is, then its detail lines.
type diagList []engine.Diagnostic

// resourceList is an apply's resource instances, one line each; Markdown
// shows mdResourceRows of them and counts the rest, naming more.
type resourceList struct {
	rows []engine.ResourceApply
	more string
}

func (diagList) isBlock()     {}
func (resourceList) isBlock() {}

// diagHead is "Error: SUMMARY" (or "Warning: …").
func diagHead(d engine.Diagnostic) (label string, t tone) {
	switch d.Severity {
	case "error":
		return "Error:", toneBad
	case "warning":
		return "Warning:", toneWarn
	}
	return orWords(d.Severity, "Diagnostic") + ":", toneWarn
}

// diagWhere is where a diagnostic is, in Terraform's words: "with ADDR, on
// FILE line N, in CONTEXT".
func diagWhere(d engine.Diagnostic) sentence {
	var parts []sentence
	if d.Address != "" {
		parts = append(parts, words("with ", code(d.Address)))
	}
	if d.File != "" {
		on := words("on ", code(d.File))
		if d.Line > 0 {
			on = on.add(txt(fmt.Sprintf(" line %d", d.Line)))
		}
		parts = append(parts, on)
	}
	if d.Context != "" {
		parts = append(parts, words("in ", code(d.Context)))
	}
	return join(parts, ", ")
}

// diagDetail is a diagnostic's detail as lines (trailing blank lines
// dropped), or what replaced it when it was withheld.
func diagDetail(d engine.Diagnostic) []string {
	if d.Withheld {
		return []string{"(detail withheld: Kilolock could not read which values are sensitive, so it kept none of Terraform's detail)"}
	}
	det := strings.TrimRight(strings.ReplaceAll(d.Detail, "\r\n", "\n"), "\n \t")
	if det == "" {
		return nil
	}
	return strings.Split(det, "\n")
}

func (p textPainter) diagnostics(line func(string), ds diagList) {
	for i, d := range ds {
		if i > 0 {
			line("")
		}
		label, t := diagHead(d)
		line(p.span(strongT(t, label)) + " " + p.span(txt(d.Summary)))
		if w := diagWhere(d); len(w) > 0 {
			line("  " + p.sentence(w))
		}
		for _, l := range diagDetail(d) {
			line("  " + p.span(txt(l)))
		}
	}
}

func (p mdPainter) diagnostics(b *strings.Builder, ds diagList) {
	for i, d := range ds {
		if i > 0 {
			b.WriteString("\n")
		}
		label, _ := diagHead(d)
		b.WriteString("**" + mdEscaper.Replace(label) + "** " + p.span(txt(d.Summary)))
		if w := diagWhere(d); len(w) > 0 {
			b.WriteString(" — " + p.sentence(w))
		}
		b.WriteString("\n")
		if det := diagDetail(d); len(det) > 0 {
			// Inert lines (no control characters) in a fence longer than
			// any run of backticks they hold.
			lines := make([]string, len(det))
			for j, l := range det {
				lines[j] = inert(l)
			}
			fence := "```"
			for strings.Contains(strings.Join(lines, "\n"), fence) {
				fence += "`"
			}
			b.WriteString("\n" + fence + "text\n" + strings.Join(lines, "\n") + "\n" + fence + "\n")
		}
	}
}

// resourceCells are one instance's cells: outcome, action, address, time,
// id.
func resourceCells(r engine.ResourceApply) []sentence {
	elapsed := "—"
	if r.Outcome != engine.ResourceNotStarted {
		elapsed = durationWords(r.Elapsed)
	}
	var id sentence
	if r.IDValue != "" {
		id = words(code(orWords(r.IDKey, "id") + "=" + r.IDValue))
	}
	return []sentence{words(toned(outcomeTone(r.Outcome), orWords(string(r.Outcome), "?"))), words(orWords(r.Action, "—")),
		words(code(r.Address)), words(elapsed), id}
}

var resourceHead = []string{"outcome", "action", "resource instance", "time", "id"}

func (p textPainter) resources(line func(string), l resourceList) {
	t := table{head: resourceHead}
	for _, r := range l.rows {
		t.rows = append(t.rows, resourceCells(r))
	}
	p.table(line, t)
}

func (p mdPainter) resources(b *strings.Builder, l resourceList) {
	shown := l.rows
	if len(shown) > mdResourceRows {
		shown = shown[:mdResourceRows]
	}
	open := ""
	if len(l.rows) > 0 && l.rows[0].Outcome != engine.ResourceApplied {
		open = " open" // something went wrong: show it
	}
	fmt.Fprintf(b, "<details%s><summary>%s</summary>\n\n", open, plural(len(l.rows), "resource instance", "resource instances"))
	t := table{head: resourceHead}
	for _, r := range shown {
		t.rows = append(t.rows, resourceCells(r))
	}
	p.block(b, t)
	if n := len(l.rows) - len(shown); n > 0 {
		more := "more instances"
		if n == 1 {
			more = "more instance"
		}
		b.WriteString("\n… and " + fmtCount(n) + " " + more + ": " + codeSpan(l.more) + " lists them all\n")
	}
	b.WriteString("\n</details>\n")
}

// JSON.

type jApplyLog struct {
	Text        string         `json:"text"`
	Counts      jOutcomeCounts `json:"counts"`
	Totals      *jTotals       `json:"totals,omitempty"`
	Resources   []jResource    `json:"resources"`
	Diagnostics []jDiagnostic  `json:"diagnostics"`
}

type jOutcomeCounts struct {
	Applied    int `json:"applied"`
	Errored    int `json:"errored"`
	Started    int `json:"started"`
	NotStarted int `json:"not_started"`
}

type jTotals struct {
	Add       int    `json:"add"`
	Change    int    `json:"change"`
	Import    int    `json:"import"`
	Remove    int    `json:"remove"`
	Operation string `json:"operation"`
	Message   string `json:"message"`
}

type jResource struct {
	Address   string `json:"address"`
	Action    string `json:"action"`
	Outcome   string `json:"outcome"`
	ElapsedMS int64  `json:"elapsed_ms"`
	IDKey     string `json:"id_key,omitempty"`
	IDValue   string `json:"id_value,omitempty"`
}

type jDiagnostic struct {
	Severity  string `json:"severity"`
	Summary   string `json:"summary"`
	Detail    string `json:"detail,omitempty"`
	Address   string `json:"address,omitempty"`
	File      string `json:"file,omitempty"`
	Line      int    `json:"line,omitempty"`
	Column    int    `json:"column,omitempty"`
	EndLine   int    `json:"end_line,omitempty"`
	EndColumn int    `json:"end_column,omitempty"`
	Context   string `json:"context,omitempty"`
	Withheld  bool   `json:"withheld,omitempty"`
}

// toApplyLog is the "apply_log" object of the apply and run views (nil:
// none).
func toApplyLog(l *engine.ApplyLog) *jApplyLog {
	if l == nil {
		return nil
	}
	j := &jApplyLog{Text: applyLogWords(l).plain(), Resources: []jResource{}, Diagnostics: []jDiagnostic{},
		Counts: jOutcomeCounts{Applied: l.Count(engine.ResourceApplied), Errored: l.Count(engine.ResourceErrored),
			Started: l.Count(engine.ResourceStarted), NotStarted: l.Count(engine.ResourceNotStarted)}}
	if t := l.Totals; t != nil {
		j.Totals = &jTotals{Add: t.Add, Change: t.Change, Import: t.Import, Remove: t.Remove, Operation: t.Operation, Message: t.Message}
	}
	for _, r := range l.Resources {
		j.Resources = append(j.Resources, jResource{Address: r.Address, Action: r.Action, Outcome: string(r.Outcome),
			ElapsedMS: time.Duration(r.Elapsed).Milliseconds(), IDKey: r.IDKey, IDValue: r.IDValue})
	}
	for _, d := range l.Diagnostics {
		j.Diagnostics = append(j.Diagnostics, jDiagnostic(d))
	}
	return j
}
