package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/kilolock/kilolock/internal/plandiff"
)

// The run-centric view (`kl run show`, ADR D6) and since-plan now.

// RunStory is the run-centric view (`kl run show`): the envelope, every
// marker of the runs involved in time order, the allowed-because facts,
// the since-plan classification and the provenance of what was committed.
type RunStory struct {
	Run Run `json:"run"`
	// Plan is the reviewed plan: the run itself for a plan run, its plan for
	// an apply run; nil for a day-2 operation (an apply run without a plan,
	// ADR 0055), whose "operation" marker is among Markers (OperationOf).
	Plan *Run `json:"plan,omitempty"`
	// Apply is the apply run that claimed a plan run, if any.
	Apply *Run `json:"apply,omitempty"`
	// Replans are the re-plans the apply made to re-check its plan (named
	// by its "replanned" markers); one may be open for review.
	Replans []Run `json:"replans,omitempty"`
	// Markers of Plan, its Replans and Apply, merged in time order.
	Markers []Marker `json:"markers"`
	// SincePlan: the classification the apply acted on (stored), or for a
	// plan not yet applied the live classification against the head.
	SincePlan *SincePlan `json:"since_plan,omitempty"`
	// SincePlanLive is true when SincePlan was computed now, not stored.
	SincePlanLive bool `json:"since_plan_live"`
	// Version is the committed version (provenance), if any.
	Version *Version `json:"version,omitempty"`
	// Overlaps lists open plans overlapping an open plan.
	Overlaps []Overlap `json:"overlaps,omitempty"`
	// Recoverable is what the apply run's Terraform wrote that no version
	// holds yet (it stopped without committing): `kl run recover` commits
	// it (Engine.Recover).
	Recoverable *Recoverable `json:"recoverable,omitempty"`
	// Diff is the diff of Plan (ADR 0044) when the caller loaded it with
	// Engine.PlanDiff (`kl run show` does); RunStory leaves it nil.
	Diff *plandiff.Diff `json:"-"`
	// ApplyLog is what Terraform said it did in the story's apply run (Run,
	// or Apply of a plan; ADR 0047): nil when there is none, Terraform
	// did not apply, or an older kl ran it.
	ApplyLog *ApplyLog `json:"apply_log,omitempty"`
}

// RunStory assembles the story of run id, after the lease sweep (a run
// whose holder died reads as lease-expired).
func (e *Engine) RunStory(ctx context.Context, id string) (*RunStory, error) {
	e.expireLeases(ctx)
	run, err := e.getRun(ctx, id)
	if err != nil {
		return nil, err
	}
	s := &RunStory{Run: run}
	var apply *Run
	switch run.Kind {
	case KindPlan:
		p := run
		s.Plan = &p
		if run.ApplyRun != "" {
			ar, err := e.getRun(ctx, run.ApplyRun)
			if err != nil {
				return nil, err
			}
			s.Apply, apply = &ar, &ar
		}
	case KindApply:
		a := run
		apply = &a
		if run.PlanRun == "" {
			break // a day-2 operation (ADR 0055): no plan
		}
		pr, err := e.getRun(ctx, run.PlanRun)
		if err != nil {
			return nil, err
		}
		s.Plan = &pr
	}
	if err := e.storyMarkers(ctx, s, apply); err != nil {
		return nil, err
	}
	if s.Plan != nil && s.Plan.Envelope != nil && s.Plan.Status == StatusPlanned {
		// Open (again): what an apply would face now, not what an earlier
		// attempt found.
		sp, err := e.sincePlan(ctx, s.Plan.ID)
		if err != nil {
			return nil, err
		}
		s.SincePlan, s.SincePlanLive = sp, true
		if s.Overlaps, err = e.Overlaps(ctx, *s.Plan); err != nil {
			return nil, err
		}
	} else if apply != nil && apply.SincePlan != nil {
		s.SincePlan = apply.SincePlan
	}
	if apply != nil {
		s.Recoverable = e.recoverableOf(ctx, *apply, s.Plan)
		l, err := e.applyLogOf(ctx, apply.ID)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		s.ApplyLog = l
	}
	if apply != nil && apply.CommittedSerial > 0 {
		v, err := e.Store.GetVersion(ctx, apply.State, apply.CommittedSerial)
		if err != nil {
			return nil, fmt.Errorf("reading version %d of state %s: %w", apply.CommittedSerial, apply.State, err)
		}
		s.Version = &v
	}
	return s, nil
}

// storyMarkers fills s.Replans (the re-plans apply made) and s.Markers:
// those of the plan (if any: a day-2 operation has none), of apply (nil:
// none) and of its re-plans, each with its run, in time order.
func (e *Engine) storyMarkers(ctx context.Context, s *RunStory, apply *Run) error {
	var ids []string
	if s.Plan != nil {
		ids = append(ids, s.Plan.ID)
	}
	if apply != nil {
		ids = append(ids, apply.ID)
		ms, err := e.Store.Markers(ctx, apply.ID)
		if err != nil {
			return fmt.Errorf("reading markers of run %s: %w", apply.ID, err)
		}
		for _, m := range ms {
			if m.Kind == MarkerReplanned && m.Other != "" {
				rp, err := e.getRun(ctx, m.Other)
				if err != nil {
					return err
				}
				s.Replans = append(s.Replans, rp)
				ids = append(ids, rp.ID)
			}
		}
	}
	for _, rid := range ids {
		ms, err := e.Store.Markers(ctx, rid)
		if err != nil {
			return fmt.Errorf("reading markers of run %s: %w", rid, err)
		}
		for _, m := range ms {
			m.Run = rid
			if apply != nil && rid == apply.ID {
				m.Lock = apply.Backend // a backend lock's (ADR 0056), else nil
			}
			s.Markers = append(s.Markers, m)
		}
	}
	sort.SliceStable(s.Markers, func(i, j int) bool { return s.Markers[i].At.Before(s.Markers[j].At) })
	e.annotateMarkers(ctx, s.Run.State, s.Markers)
	return nil
}

// SincePlan classifies, now, every version committed after the source
// serial of plan run id (or of an apply run's plan) against its footprint
// (`kl history --since-plan`, ADR D3/D8). It runs the lease sweep first, as
// every view does: a plan whose holder died while planning is refused as
// lease-expired, not as "planning". A plan without an envelope (it never
// finished planning) is refused with ErrInvalid, saying why.
func (e *Engine) SincePlan(ctx context.Context, id string) (*SincePlan, error) {
	e.expireLeases(ctx)
	return e.sincePlan(ctx, id)
}

// sincePlan is SincePlan without the sweep, for views that ran it already.
func (e *Engine) sincePlan(ctx context.Context, id string) (*SincePlan, error) {
	run, err := e.getRun(ctx, id)
	if err != nil {
		return nil, err
	}
	if run.Kind == KindApply && run.PlanRun == "" {
		return nil, Errorf(ErrInvalid, "run %s is a day-2 operation (`kl state …`): it has no plan to classify versions against", run.ID)
	}
	if run.Kind == KindApply {
		if run, err = e.getRun(ctx, run.PlanRun); err != nil {
			return nil, err
		}
	}
	if run.Envelope == nil {
		return nil, Errorf(ErrInvalid, "%s", noEnvelopeWords(run))
	}
	env := run.Envelope
	versions, err := e.Store.VersionsAfter(ctx, run.State, env.SourceSerial)
	if err != nil {
		return nil, fmt.Errorf("reading versions after %d of state %s: %w", env.SourceSerial, run.State, err)
	}
	sp := ClassifySincePlan(run.ID, env.SourceSerial, env.Footprint, versions)
	if run.ApplyRun != "" {
		for i := range sp.Entries {
			sp.Entries[i].OwnApply = sp.Entries[i].Run == run.ApplyRun
		}
	}
	if err := e.readChanges(ctx, run.State, &sp); err != nil {
		return nil, err
	}
	return &sp, nil
}
