package report

import (
	"fmt"
	"io"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// RunsPage places a page of `kl runs` for its paging hint.
type RunsPage struct {
	// State is the --state filter ("" for every state).
	State string
	// More says older runs exist than the last one given (the caller asked
	// for one run more than it shows).
	More bool
}

// next is the command for the page after runs: "kl runs [--state S]
// --before OLDEST", or "" without more.
func (p RunsPage) next(runs []engine.Run) (before, cmd string) {
	if !p.More || len(runs) == 0 {
		return "", ""
	}
	before = runs[len(runs)-1].ID
	cmd = "kl runs"
	if p.State != "" {
		cmd += " --state " + p.State
	}
	return before, cmd + " --before " + before
}

// Runs renders `kl runs`: one row per run, newest first as given — id,
// kind, state, actor, PR, status, created (with its age when Options.Now
// is set) and what it did: a plan's change summary and write-set size (or,
// failed, the gist of its reason), an apply's plan run and committed
// serial — and, when page.More, the command for the next page.
func Runs(w io.Writer, runs []engine.Run, page RunsPage, o Options) error {
	before, next := page.next(runs)
	return emit(w, o, func() *doc { return runsDoc(runs, next, o.Now) }, func() any {
		j := runsDocument{Schema: SchemaRuns, NextBefore: before, NextCommand: next, Runs: []runRow{}}
		for i := range runs {
			j.Runs = append(j.Runs, runRow{jRun: toRun(&runs[i]), What: whatWords(runs[i]).plain()})
		}
		return j
	})
}

type runsDocument struct {
	Schema      string   `json:"schema"`
	NextBefore  string   `json:"next_before,omitempty"`
	NextCommand string   `json:"next_command,omitempty"`
	Runs        []runRow `json:"runs"`
}

type runRow struct {
	*jRun
	What string `json:"what"`
}

// whatWords is what a run did, in brief.
func whatWords(r engine.Run) sentence {
	switch r.Kind {
	case engine.KindPlan:
		if r.Envelope == nil {
			if r.Status == engine.StatusPlanning {
				return words(toned(toneDim, "planning"))
			}
			// Planning failed: the stored reason, shortened, says why.
			return words(toned(toneDim, orWords(endGist(r.ID, r.End, 60), "no envelope")))
		}
		s := words(summaryWords(r.Envelope.Summary), "; writes "+countWords(r.Envelope.Footprint.Write))
		if r.ReplanOf != "" {
			s = words(s, "; re-plan of ", runSpan(r.ReplanOf))
		}
		return s
	case engine.KindApply:
		s := words("plan ", runSpan(r.PlanRun))
		if r.PlanRun == "" {
			s = words("day-2 operation, no plan") // its story says which (ADR 0055)
		}
		if backendRun(r) {
			s = lockWords(r.Actor, *r.Backend, r.Lock) // ADR 0056
		}
		if r.CommittedSerial > 0 {
			s = s.add(txt("; committed "), strong(fmt.Sprintf("version %d", r.CommittedSerial)))
		}
		if c := lockShort(r); c != "" {
			return s.add(txt("; "), toned(runStatusTone(r), c))
		}
		switch r.Status {
		case engine.StatusApplied:
			if r.CommittedSerial == 0 {
				s = s.add(txt("; no changes: nothing committed"))
			}
		case engine.StatusRefused, engine.StatusFailed, engine.StatusInterrupted, engine.StatusLeaseExpired:
			if c := endShort(r.ID, r.End); c != "" {
				s = s.add(txt("; "), toned(statusTone(r.Status), c))
			}
		}
		return s
	}
	return nil
}

// kindWord is a run's kind as the views name it: plan, apply, or backend
// lock (an apply run without a plan holding Terraform's lock, ADR 0056).
func kindWord(r engine.Run) string {
	if backendRun(r) {
		return "backend lock"
	}
	return string(r.Kind)
}

// clip shortens s to at most n runes, marking the cut with "…".
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// statusTone colours a run status.
func statusTone(s engine.RunStatus) tone {
	switch s {
	case engine.StatusApplied:
		return toneGood
	case engine.StatusWaiting, engine.StatusStale, engine.StatusSuperseded:
		return toneWarn
	case engine.StatusRefused, engine.StatusFailed, engine.StatusInterrupted, engine.StatusLeaseExpired:
		return toneBad
	}
	return toneInfo
}

func whenWords(t, now time.Time) sentence {
	if now.IsZero() {
		return words(fmtTime(t))
	}
	return words(fmtTime(t)+" ", toned(toneDim, "("+fmtAge(now, t)+")"))
}

func runsDoc(runs []engine.Run, next string, now time.Time) *doc {
	d := &doc{tone: toneInfo, title: words(fmt.Sprintf("Runs (%d)", len(runs))), more: "kl runs"}
	if len(runs) == 0 {
		d.summary = append(d.summary, para(words("no runs")))
		return d
	}

	t := table{head: []string{"id", "kind", "state", "actor", "PR", "status", "created", "what"}}
	for _, r := range runs {
		pr := sentence{}
		if r.PR != nil {
			pr = words(prWords(r.PR))
		}
		t.rows = append(t.rows, []sentence{{runSpan(r.ID)}, words(kindWord(r)), words(r.State), words(r.Actor), pr,
			{toned(runStatusTone(r), lockStatus(r))}, whenWords(r.CreatedAt, now), whatWords(r)})
	}
	d.summary = append(d.summary, t)
	if next != "" {
		// After the table: the first run id printed is the newest run's.
		d.summary = append(d.summary, para(words("more: ", code(next))))
	}
	return d
}

// States renders `kl state list`: every state with its head serial,
// lineage and creation time.
func States(w io.Writer, states []engine.State, o Options) error {
	return emit(w, o, func() *doc {
		d := &doc{tone: toneInfo, title: words(fmt.Sprintf("States (%d)", len(states)))}
		if len(states) == 0 {
			d.summary = append(d.summary, para(words("no states: create one with ", code("kl state init NAME"))))
			return d
		}
		t := table{head: []string{"state", "head", "lineage", "created"}}
		for _, s := range states {
			t.rows = append(t.rows, []sentence{{strong(s.Name)}, words(fmt.Sprint(s.HeadSerial)), {code(s.Lineage)}, whenWords(s.CreatedAt, o.Now)})
		}
		d.summary = append(d.summary, t)
		return d
	}, func() any {
		j := statesDocument{Schema: SchemaStates, States: []jState{}}
		for _, s := range states {
			j.States = append(j.States, toState(s))
		}
		return j
	})
}

type jState struct {
	Name       string `json:"name"`
	Lineage    string `json:"lineage"`
	HeadSerial int64  `json:"head_serial"`
	CreatedAt  jtime  `json:"created_at"`
}

func toState(s engine.State) jState {
	return jState{Name: s.Name, Lineage: s.Lineage, HeadSerial: s.HeadSerial, CreatedAt: jtime(s.CreatedAt)}
}

type statesDocument struct {
	Schema string   `json:"schema"`
	States []jState `json:"states"`
}

// StateInit renders the one-line result of `kl state init`: the new
// state, adopted from the file from, or empty when from is "". Like every
// view's first line it starts with a capital: "Created state prod: …".
func StateInit(w io.Writer, st engine.State, from string, o Options) error {
	line := words(toned(toneGood, "Created"), " state ", strong(st.Name), ": ")
	source := "empty"
	if from != "" {
		source = "file"
		line = words(line, "adopted from ", code(from))
	} else {
		line = line.add(txt("empty"))
	}
	line = words(line, fmt.Sprintf(", head version %d, lineage ", st.HeadSerial), code(st.Lineage))
	return emit(w, o, func() *doc { return &doc{tone: toneGood, title: line} }, func() any {
		return stateInitDocument{Schema: SchemaStateInit, State: toState(st), Source: source, From: from, Text: line.plain()}
	})
}

type stateInitDocument struct {
	Schema string `json:"schema"`
	State  jState `json:"state"`
	Source string `json:"source"`
	From   string `json:"from,omitempty"`
	Text   string `json:"text"`
}
