package report

import (
	"fmt"
	"io"

	"github.com/kilolock/kilolock/internal/engine"
)

// SincePlan renders `kl history --since-plan PLAN` (ADR D3, D8): every
// version committed after the plan's source serial with its class — each
// class with its own mark and words, never one warning — the addresses that
// matter and the producing run and PR; the version the plan's own apply
// committed (engine.SincePlanEntry.OwnApply) is labelled as such, not as a
// conflict; and a one-line verdict of what an apply would do now under the
// default policy: proceed, re-plan, or refused.
func SincePlan(w io.Writer, sp *engine.SincePlan, plan engine.Run, o Options) error {
	if sp == nil {
		return fmt.Errorf("rendering since-plan of %s: no classification", plan.ID)
	}
	return emit(w, o, func() *doc { return sincePlanDoc(sp, plan) }, func() any {
		j := toSincePlan(sp, &plan, true, true)
		return sincePlanDocument{Schema: SchemaSincePlan, State: plan.State, Plan: toRun(&plan), jSincePlan: j}
	})
}

type sincePlanDocument struct {
	Schema string `json:"schema"`
	State  string `json:"state"`
	Plan   *jRun  `json:"plan"`
	*jSincePlan
}

func sincePlanDoc(sp *engine.SincePlan, plan engine.Run) *doc {
	_, v := sincePlanVerdict(sp, plan)
	d := &doc{tone: v.tone, more: "kl history --since-plan " + plan.ID,
		title: words("Since plan ", runSpan(plan.ID), " on ", strong(plan.State),
			fmt.Sprintf(": serial %d → head %d", sp.SourceSerial, sp.HeadSerial))}
	var f fields
	f = f.addField("plan", who(plan.ID, plan.Actor, plan.PR).add(txt(", "+string(plan.Status))))
	if len(sp.Entries) == 0 && plan.Status.Open() {
		// The verdict says "head unchanged since the plan"; once is enough.
		d.summary = append(d.summary, para(v.words), f)
		return d
	}
	f = f.addField("versions", countsWords(sp.Summary(), ""))
	d.summary = append(d.summary, para(v.words), f)
	d.section(words("Versions since plan"), sincePlanTable(sp)...)
	readChangeSections(d, sp)
	return d
}
