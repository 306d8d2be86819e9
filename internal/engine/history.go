package engine

import (
	"context"
	"fmt"
)

// The state-centric view (`kl history`, ADR D6).

// HistoryEntry is one version with its producing run's story in brief: the
// why line (allowed-because), the re-plan line and the commit provenance.
type HistoryEntry struct {
	Version Version  `json:"version"`
	Run     *Run     `json:"run,omitempty"` // the apply run; nil for the init version
	Replan  *Marker  `json:"replan,omitempty"`
	Waited  []Marker `json:"waited,omitempty"`
}

// History returns versions of state newest first, each with its producing
// run (`kl history --state`), after the lease sweep (the runs it shows read
// as every other view reads them).
func (e *Engine) History(ctx context.Context, state string, q HistoryQuery) ([]HistoryEntry, error) {
	e.expireLeases(ctx)
	if _, err := e.getState(ctx, state); err != nil {
		return nil, err
	}
	vs, err := e.Store.History(ctx, state, q)
	if err != nil {
		return nil, fmt.Errorf("reading history of state %s: %w", state, err)
	}
	out := make([]HistoryEntry, 0, len(vs))
	for _, v := range vs {
		h := HistoryEntry{Version: v}
		if v.Provenance.Run != "" {
			r, err := e.getRun(ctx, v.Provenance.Run)
			if err != nil {
				return nil, err
			}
			h.Run = &r
			ms, err := e.Store.Markers(ctx, r.ID)
			if err != nil {
				return nil, fmt.Errorf("reading markers of run %s: %w", r.ID, err)
			}
			for i := range ms {
				ms[i].Run = r.ID
				switch ms[i].Kind {
				case MarkerReplanned:
					m := ms[i]
					h.Replan = &m
				case MarkerWaited:
					h.Waited = append(h.Waited, ms[i])
				}
			}
		}
		out = append(out, h)
	}
	return out, nil
}
