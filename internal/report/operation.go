package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// Day-2 operations (`kl state rollback|push|rm|mv`, ADR 0055) in words:
// the one place their commit modes, markers and provenance become
// English.

// SchemaOperation is the document of a day-2 command (docs/json.md).
const SchemaOperation = "kilolock/operation/v1"

// OperationResult is what a day-2 command did, for Operation: the state
// and the operation asked (Mode); Story is the story of its run — nil when
// it had nothing to do and made no run, Head then being the head serial
// that already holds what it would write.
type OperationResult struct {
	State string
	Mode  engine.CommitMode
	Head  int64
	Story *engine.RunStory
}

// Operation renders the outcome of a day-2 command: what it committed
// (the version, the operation, who, why, what it changed, what it removed
// or moved), why it did not (refused: the runs holding reservations, or a
// fence; failed; interrupted), or that it had nothing to do.
func Operation(w io.Writer, r OperationResult, o Options) error {
	return emit(w, o, func() *doc { return operationDoc(r) }, func() any { return operationJSON(r) })
}

// modeName is an operation's name, as its command says it.
func modeName(m engine.CommitMode) string {
	switch m {
	case engine.CommitStateRm:
		return "state rm"
	case engine.CommitStateMv:
		return "state mv"
	}
	return string(m)
}

// operationProvWords says what a day-2 operation's version is, from its
// provenance: "rollback to version 3", "push of a document at serial 9
// (--force)", "state rm of 2 resource instances", "state mv of
// `terraform_data.a` to `terraform_data.b` (2 resource instances)".
func operationProvWords(p engine.Provenance) sentence {
	switch p.Mode {
	case engine.CommitRollback:
		return words(fmt.Sprintf("rollback to version %d", p.RestoredSerial))
	case engine.CommitPush:
		if p.Backend != nil {
			return backendProvWords(p)
		}
		s := words(fmt.Sprintf("push of a document at serial %d", p.PushedSerial))
		if p.Forced {
			s = s.add(txt(" (--force: not above the head's serial)"))
		}
		return s
	case engine.CommitStateRm:
		return words("state rm of " + plural(len(p.Removed), "resource instance", "resource instances"))
	case engine.CommitStateMv:
		return words("state mv of ", code(p.MovedFrom), " to ", code(p.MovedTo), " ("+plural(p.Moved, "resource instance", "resource instances")+")")
	}
	return words(string(p.Mode))
}

// operationMarkerWords says what an "operation" marker asked: "rollback
// to version 3", "push of a document at serial 9 (--force)", "state rm of
// `a`, `b`", "state mv of `a` to `b`".
func operationMarkerWords(m engine.Marker) sentence {
	switch m.Mode {
	case engine.CommitRollback:
		return words(fmt.Sprintf("rollback to version %d", m.Serial))
	case engine.CommitPush:
		s := words(fmt.Sprintf("push of a document at serial %d", m.Serial))
		if engine.ForcedPush(m) {
			s = s.add(txt(" (--force)"))
		}
		return s
	case engine.CommitStateRm:
		var as []sentence
		for _, a := range engine.OperationAddresses(m) {
			as = append(as, words(code(a)))
		}
		return words("state rm of ", join(as, ", "))
	case engine.CommitStateMv:
		return words("state mv of ", code(m.Extra["from"]), " to ", code(m.Extra["to"]))
	}
	return words(string(m.Mode))
}

// operationMarker returns the "operation" marker of story s's run.
func operationMarker(s *engine.RunStory) *engine.Marker {
	if s == nil {
		return nil
	}
	return engine.OperationOf(s.Markers)
}

// operationVerdict is the first line of an operation's outcome.
func operationVerdict(r OperationResult) verdict {
	if r.Story == nil {
		return verdict{"nothing-to-do", toneInfo, words(strongT(toneInfo, "nothing to commit"),
			fmt.Sprintf(": the head of %s (version %d) already holds what this %s would write", r.State, r.Head, modeName(r.Mode)))}
	}
	run, v := r.Story.Run, r.Story.Version
	if text, ok := lockRunText(run); ok && v == nil {
		// A backend lock (ADR 0056): released, or its lease ran out.
		word := lockStatus(run)
		return verdict{word, runStatusTone(run), words(strongT(runStatusTone(run), strings.ReplaceAll(word, "-", " ")), ": "+text)}
	}
	switch {
	case v != nil:
		return verdict{"committed", toneGood, words(strongT(toneGood, "committed"), " ", strong(fmt.Sprintf("version %d", v.Serial)),
			" of "+r.State+": ", operationProvWords(v.Provenance))}
	case run.Status == engine.StatusWaiting || run.Status == engine.StatusApplying:
		return verdict{string(run.Status), toneInfo, words(strongT(toneInfo, string(run.Status)), endSuffix(run.ID, run.End))}
	}
	return verdict{string(run.Status), statusTone(run.Status), words(strongT(statusTone(run.Status), strings.ReplaceAll(string(run.Status), "-", " ")),
		endSuffix(run.ID, run.End))}
}

func operationDoc(r OperationResult) *doc {
	v := operationVerdict(r)
	d := &doc{tone: v.tone, title: words(upperFirst(modeName(r.Mode))+" on ", strong(r.State))}
	if r.Story == nil {
		d.summary = append(d.summary, para(v.words))
		return d
	}
	d.more = "kl run show " + r.Story.Run.ID
	d.summary = append(d.summary, para(v.words), operationFields(r.Story))
	if rm := removedList(r.Story.Version); len(rm) > 0 {
		d.section(words(fmt.Sprintf("Removed (%d)", len(rm))), rm)
	}
	return d
}

// operationFields are the facts of an operation's run and version.
func operationFields(s *engine.RunStory) fields {
	run := s.Run
	var f fields
	f = f.addField("run", who(run.ID, run.Actor, run.PR))
	if backendRun(run) {
		f = f.addField("lock", lockWords(run.Actor, *run.Backend, run.Lock))
		if m := lastOf(s.Markers, run.ID, engine.MarkerBackendRefused); m != nil {
			f = f.addField("refused write", words(fmtTime(m.At)+": ", refusedWords(*m)))
		}
		if text, ok := lockRunText(run); ok && s.Version != nil {
			f = f.addField("lease", words(text)) // its UNLOCK came after its lease ran out
		}
	}
	if m := operationMarker(s); m != nil {
		f = f.addField("asked", operationMarkerWords(*m))
		if m.Reason != "" {
			f = f.addField("reason", words(m.Reason))
		}
	}
	if res := lastOf(s.Markers, run.ID, engine.MarkerReserved); res != nil {
		f = f.addField("reserved", reservedWords(res, ofKind(s.Markers, run.ID, engine.MarkerWaited)))
	}
	if v := s.Version; v != nil {
		f = f.addField("head", words(fmt.Sprintf("version %d → %d", v.Provenance.SourceSerial, v.Serial)))
		f = f.addField("changed", changedWords(v.Changed))
	}
	return f
}

// removedList lists a state-rm version's removed instances (nil for
// another version).
func removedList(v *engine.Version) list {
	if v == nil || len(v.Provenance.Removed) == 0 {
		return nil
	}
	var l list
	for _, a := range v.Provenance.Removed {
		l = append(l, item{s: words(code(a))})
	}
	return l
}

// operationStoryDoc is `kl run show` of a day-2 operation's run: its
// outcome, then its timeline.
func operationStoryDoc(s *engine.RunStory) *doc {
	r := OperationResult{State: s.Run.State, Story: s}
	if m := operationMarker(s); m != nil {
		r.Mode = m.Mode
	}
	d := operationDoc(r)
	kind := words("day-2 operation")
	switch {
	case backendRun(s.Run):
		r.Mode, kind = engine.CommitPush, words("backend lock") // ADR 0056
	case r.Mode != "":
		kind = words(modeName(r.Mode))
	}
	d.title = words("Run ", runSpan(s.Run.ID), " (", kind, ") on ", strong(s.Run.State), ": ", lockStatus(s.Run))
	d.section(words("Timeline"), timeline(s)...)
	return d
}

// jOperation is what an "operation" marker asked (docs/json.md).
type jOperation struct {
	Mode      string   `json:"commit_mode"`
	By        string   `json:"by"`
	Reason    string   `json:"reason,omitempty"`
	Serial    int64    `json:"serial,omitempty"`
	Addresses []string `json:"addresses,omitempty"`
	From      string   `json:"from,omitempty"`
	To        string   `json:"to,omitempty"`
	Force     bool     `json:"force,omitempty"`
	Text      string   `json:"text"`
}

func toOperation(m *engine.Marker) *jOperation {
	if m == nil {
		return nil
	}
	return &jOperation{Mode: string(m.Mode), By: m.By, Reason: m.Reason, Serial: m.Serial, Addresses: engine.OperationAddresses(*m),
		From: m.Extra["from"], To: m.Extra["to"], Force: engine.ForcedPush(*m), Text: operationMarkerWords(*m).plain()}
}

type operationDocument struct {
	Schema     string      `json:"schema"`
	Verdict    string      `json:"verdict"`
	Text       string      `json:"text"`
	State      string      `json:"state"`
	Mode       string      `json:"commit_mode"`
	HeadSerial int64       `json:"head_serial"`
	Operation  *jOperation `json:"operation,omitempty"`
	Run        *jRun       `json:"run,omitempty"`
	Version    *jVersion   `json:"version,omitempty"`
	Markers    []jMarker   `json:"markers"`
}

func operationJSON(r OperationResult) operationDocument {
	v := operationVerdict(r)
	j := operationDocument{Schema: SchemaOperation, Verdict: v.word, Text: v.words.plain(), State: r.State, Mode: string(r.Mode),
		HeadSerial: r.Head, Markers: []jMarker{}}
	if s := r.Story; s != nil {
		j.Operation, j.Run, j.Version = toOperation(operationMarker(s)), toRun(&s.Run), toVersion(s.Version)
		j.Markers = toMarkers(s.Markers, roles(s), statuses(s))
		if s.Version != nil {
			j.HeadSerial = s.Version.Serial
		}
	}
	return j
}

// operationRun reports whether r is a day-2 operation's run: an apply run
// without a plan (ADR 0055).
func operationRun(r engine.Run) bool {
	return r.Kind == engine.KindApply && r.PlanRun == ""
}

// operationStoryJSON is the kilolock/run/v3 document of a day-2
// operation's run: no plan, envelope, since-plan or allowed-because;
// its operation, markers and version.
func operationStoryJSON(s *engine.RunStory) storyDocument {
	r := OperationResult{State: s.Run.State, Story: s}
	m := operationMarker(s)
	if m != nil {
		r.Mode = m.Mode
	}
	if backendRun(s.Run) {
		r.Mode = engine.CommitPush
	}
	v := operationVerdict(r)
	return storyDocument{Schema: SchemaRun, Verdict: v.word, Text: v.words.plain(), Run: toRun(&s.Run), Replans: []*jRun{},
		Markers: toMarkers(s.Markers, roles(s), statuses(s)), AllowedBecause: []jFact{}, Refusals: []jRefusal{},
		Version: toVersion(s.Version), Overlaps: []jOverlap{}, Operation: toOperation(m)}
}

// modeNote names a day-2 operation's commit mode after a version: " (a
// state rm)"; "" for any other mode.
func modeNote(m engine.CommitMode) string {
	if !m.Operation() {
		return ""
	}
	return " (a " + modeName(m) + ")"
}
