package engine

import (
	"time"

	"github.com/kilolock/kilolock/internal/plandiff"
)

// SincePlanClass classifies one version committed after a plan's source
// serial against the plan's footprint (ADR D3, D8: three cases, shown
// differently, never collapsed into one warning).
type SincePlanClass string

// Since-plan classes.
const (
	// ClassIndependent: the version changed nothing in the footprint.
	ClassIndependent SincePlanClass = "independent"
	// ClassReadChanged: "plan input changed" — it changed the read set but
	// not the write set.
	ClassReadChanged SincePlanClass = "read-changed"
	// ClassWriteChanged: "planned target changed" — it changed the write set.
	ClassWriteChanged SincePlanClass = "write-changed"
)

// Label is the operator's wording of the class (ADR D3).
func (c SincePlanClass) Label() string {
	switch c {
	case ClassIndependent:
		return "independent"
	case ClassReadChanged:
		return "plan input changed"
	case ClassWriteChanged:
		return "planned target changed"
	}
	return string(c)
}

// SincePlanEntry is one later version with its class and its producing run.
// Addresses holds the version's changed addresses that fall in the write set
// (write-changed) or the read set (read-changed); empty when independent.
type SincePlanEntry struct {
	Serial      int64          `json:"serial"`
	Class       SincePlanClass `json:"class"`
	Addresses   AddressSet     `json:"addresses,omitempty"`
	Changed     AddressSet     `json:"changed"`
	Run         string         `json:"run,omitempty"`
	PlanRun     string         `json:"plan_run,omitempty"`
	Actor       string         `json:"actor,omitempty"`
	PR          *PullRequest   `json:"pr,omitempty"`
	CommittedAt time.Time      `json:"committed_at"`
	Mode        CommitMode     `json:"commit_mode"`
	// Backend is, for a push through Terraform's http backend, Terraform's
	// operation ("state-rm", "OperationTypeApply"; ADR 0056), from the
	// version's provenance when the entry is classified or read (never
	// stored with a run).
	Backend string `json:"-"`
	// OwnApply marks the version committed by the plan's own apply: not a
	// conflict, and not counted in the three classes.
	OwnApply bool `json:"own_apply,omitempty"`
	// ReadChanges, for a read-changed entry, are the attributes of the
	// read resources (Addresses) that differ between the version before
	// this one and this version — this version's own change —, sensitive
	// values masked (issue 12 §4, ADR 0046 decision 2); set by the views that read the snapshots (Engine.SincePlan,
	// the apply's preflight). Nil when not read.
	ReadChanges []plandiff.Resource `json:"read_changes,omitempty"`
}

// SincePlan is the classification of every version after a plan's source
// serial up to HeadSerial.
type SincePlan struct {
	PlanRun      string           `json:"plan_run"`
	SourceSerial int64            `json:"source_serial"`
	HeadSerial   int64            `json:"head_serial"`
	Entries      []SincePlanEntry `json:"entries"`
	// AtCommit marks the classification an apply's commit made (ADR
	// 0072): stored on the run in place of the preflight's when a version
	// committed after the preflight changed the footprint (the run's lease
	// had lapsed), so that no view shows the preflight's as the last word.
	AtCommit bool `json:"at_commit,omitempty"`
}

// SincePlanSummary counts a SincePlan's entries by class.
type SincePlanSummary struct {
	SourceSerial int64 `json:"source_serial"`
	HeadSerial   int64 `json:"head_serial"`
	Independent  int   `json:"independent"`
	ReadChanged  int   `json:"read_changed"`
	WriteChanged int   `json:"write_changed"`
	OwnApply     int   `json:"own_apply,omitempty"`
}

// Summary counts the entries by class.
func (s SincePlan) Summary() SincePlanSummary {
	out := SincePlanSummary{SourceSerial: s.SourceSerial, HeadSerial: s.HeadSerial}
	for _, e := range s.Entries {
		if e.OwnApply {
			out.OwnApply++
			continue
		}
		switch e.Class {
		case ClassIndependent:
			out.Independent++
		case ClassReadChanged:
			out.ReadChanged++
		case ClassWriteChanged:
			out.WriteChanged++
		}
	}
	return out
}

// Of returns the entries of class c.
func (s SincePlan) Of(c SincePlanClass) []SincePlanEntry {
	var out []SincePlanEntry
	for _, e := range s.Entries {
		if e.Class == c && !e.OwnApply {
			out = append(out, e)
		}
	}
	return out
}

// Serials returns the serials of entries.
func Serials(entries []SincePlanEntry) []int64 {
	out := make([]int64, len(entries))
	for i, e := range entries {
		out[i] = e.Serial
	}
	return out
}

// ClassifySincePlan classifies versions (serial order, all after the plan's
// source serial) against footprint fp (ADR D3): a version that changed an
// address overlapping the write set is write-changed; else one overlapping
// the read set is read-changed; else independent. Producing-run details are
// copied from each version's provenance.
func ClassifySincePlan(planRun string, source int64, fp Footprint, versions []Version) SincePlan {
	out := SincePlan{PlanRun: planRun, SourceSerial: source, HeadSerial: source, Entries: []SincePlanEntry{}}
	for _, v := range versions {
		if v.Serial <= source {
			continue
		}
		e := SincePlanEntry{
			Serial:      v.Serial,
			Changed:     v.Changed,
			Run:         v.Provenance.Run,
			PlanRun:     v.Provenance.PlanRun,
			Actor:       v.Provenance.Actor,
			PR:          v.Provenance.PR,
			CommittedAt: v.CreatedAt,
			Mode:        v.Provenance.Mode,
		}
		if v.Provenance.Backend != nil {
			e.Backend = v.Provenance.Backend.Operation
		}
		if w := v.Changed.Overlapping(fp.Write); len(w) > 0 {
			e.Class, e.Addresses = ClassWriteChanged, w
		} else if r := v.Changed.Overlapping(fp.Read); len(r) > 0 {
			e.Class, e.Addresses = ClassReadChanged, r
		} else {
			e.Class = ClassIndependent
		}
		out.Entries = append(out.Entries, e)
		if v.Serial > out.HeadSerial {
			out.HeadSerial = v.Serial
		}
	}
	return out
}
