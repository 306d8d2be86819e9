package engine

import (
	"context"
	"fmt"
)

// `kl why` (ADR D2, D6): why a run was allowed, waited or was refused.

// Verdict is the one-word answer of `kl why`.
type Verdict string

// Verdicts.
const (
	VerdictAllowed     Verdict = "allowed"     // the apply proceeded (it may have waited first)
	VerdictRefused     Verdict = "refused"     // a rule stopped it; its end and markers say which
	VerdictFailed      Verdict = "failed"      // Terraform or Kilolock failed, or a plan never finished planning (failed, lease-expired)
	VerdictInterrupted Verdict = "interrupted" // cancelled; what Terraform wrote is committed
	VerdictWaiting     Verdict = "waiting"     // blocked now on other runs
	VerdictPending     Verdict = "pending"     // a plan not applied yet
	VerdictClosed      Verdict = "closed"      // a plan that will never be applied: superseded, discarded or stale, with no apply of its own
	// VerdictReleased: a backend lock (ADR 0056) that ended at UNLOCK
	// with no version — a read lock of `terraform plan`, or a write lock
	// that wrote nothing new (all its POSTs refused, or none): it applied
	// nothing, so it is neither "allowed" nor "applied".
	VerdictReleased Verdict = "released"
)

// Why answers "why was this run allowed, why did it wait, why was it
// refused" from stored facts (ADR D2, D6).
type Why struct {
	Run Run `json:"run"`
	// Plan is the reviewed plan: the run itself for a plan run, its plan
	// for an apply run (its scope says how to plan again).
	Plan *Run `json:"plan,omitempty"`
	// Apply is, for a plan run, its apply — or, for a plan open again, the
	// last attempt that did not go through (its markers are in Waited and
	// Decisive).
	Apply   *Run    `json:"apply,omitempty"`
	Verdict Verdict `json:"verdict"`
	// Facts are the stored allowed-because facts.
	Facts []Fact `json:"allowed_because,omitempty"`
	// Waited are the "waited" markers: whom it waited on, over what.
	Waited []Marker `json:"waited,omitempty"`
	// Reserved is the "reserved" marker (with how long it waited), if any.
	Reserved *Marker `json:"reserved,omitempty"`
	// Decisive are the markers that decided a refusal or a re-plan, or
	// tell how an apply ended: staleness-failed, replanned, failed,
	// lease-expired, deviation, recovered, operation (what a day-2
	// operation asked, ADR 0055) — and apply-started for an apply that did
	// not commit (Terraform ran: infrastructure may have changed).
	Decisive  []Marker   `json:"decisive,omitempty"`
	SincePlan *SincePlan `json:"since_plan,omitempty"`
	// Overlaps: for a pending plan, the open plans it would contend with.
	Overlaps []Overlap `json:"overlaps,omitempty"`
	// Recoverable: what the apply's Terraform wrote that no version holds
	// yet (see RunStory.Recoverable).
	Recoverable *Recoverable `json:"recoverable,omitempty"`
}

// Why explains run id. For a plan run it explains the apply that claimed
// it, or, if none, what an apply would face now. It runs the lease sweep
// first: a run whose holder died is explained as lease-expired, not as
// waiting on runs that finished long ago.
func (e *Engine) Why(ctx context.Context, id string) (*Why, error) {
	e.expireLeases(ctx)
	run, err := e.getRun(ctx, id)
	if err != nil {
		return nil, err
	}
	w := &Why{Run: run}
	target := run
	switch {
	case run.Kind == KindPlan && (run.ApplyRun == "" || run.Status == StatusPlanned):
		p := run
		w.Plan = &p
		w.Verdict = VerdictPending
		if run.ApplyRun != "" {
			// An earlier attempt did not go through; the plan is open again.
			last, err := e.getRun(ctx, run.ApplyRun)
			if err != nil {
				return nil, err
			}
			w.Apply = &last
			if err := e.collectWhy(ctx, w, last); err != nil {
				return nil, err
			}
			w.Recoverable = e.recoverableOf(ctx, last, &p)
		}
		if ClosedPlan(run) {
			// It never finished planning, or its holder died while it
			// planned: it can never be applied.
			w.Verdict = VerdictFailed
			if err := e.collectWhy(ctx, w, run); err != nil {
				return nil, err
			}
		}
		if run.Status == StatusSuperseded || run.Status == StatusStale {
			// Closed before any apply of its own: it can never be
			// applied (Supersede, Discard, a refused attempt).
			w.Verdict = VerdictClosed
		}
		if run.Envelope != nil {
			if w.SincePlan, err = e.sincePlan(ctx, run.ID); err != nil {
				return nil, err
			}
			if w.Verdict == VerdictPending {
				if w.Overlaps, err = e.Overlaps(ctx, run); err != nil {
					return nil, err
				}
			}
		}
		return w, nil
	case run.Kind == KindPlan:
		p := run
		w.Plan = &p
		if target, err = e.getRun(ctx, run.ApplyRun); err != nil {
			return nil, err
		}
		w.Apply = &target
	case run.PlanRun == "":
		// A day-2 operation (ADR 0055): no plan; its markers say it all.
	default:
		p, err := e.getRun(ctx, run.PlanRun)
		if err != nil {
			return nil, err
		}
		w.Plan = &p
	}
	if err := e.collectWhy(ctx, w, target); err != nil {
		return nil, err
	}
	w.Recoverable = e.recoverableOf(ctx, target, w.Plan)
	w.Facts = target.AllowedBecause
	w.SincePlan = target.SincePlan
	w.Verdict = ApplyVerdict(target.Status)
	if LockReleased(target) {
		w.Verdict = VerdictReleased
	}
	return w, nil
}

// ApplyVerdict is the verdict of an apply run in status s — the one
// mapping from an apply's status to `kl why`'s answer, used by the views,
// the reports and klbot: applied or applying → allowed; waiting; refused;
// interrupted; anything else (failed, lease-expired) → failed (facts, if
// any, say it was allowed first).
func ApplyVerdict(s RunStatus) Verdict {
	switch s {
	case StatusApplied, StatusApplying:
		return VerdictAllowed
	case StatusWaiting:
		return VerdictWaiting
	case StatusRefused:
		return VerdictRefused
	case StatusInterrupted:
		return VerdictInterrupted
	}
	return VerdictFailed
}

// collectWhy sorts the markers of apply run a into w: waits, the
// reservation, and the decisive markers.
func (e *Engine) collectWhy(ctx context.Context, w *Why, a Run) error {
	ms, err := e.Store.Markers(ctx, a.ID)
	if err != nil {
		return fmt.Errorf("reading markers of run %s: %w", a.ID, err)
	}
	e.annotateMarkers(ctx, a.State, ms)
	for i := range ms {
		m := ms[i]
		m.Run, m.Lock = a.ID, a.Backend
		switch m.Kind {
		case MarkerWaited:
			w.Waited = append(w.Waited, m)
		case MarkerReserved:
			w.Reserved = &m
		case MarkerStalenessFailed, MarkerReplanned, MarkerFailed, MarkerLeaseExpired, MarkerDeviation, MarkerRecovered, MarkerOperation,
			MarkerBackendLock, MarkerBackendRefused, MarkerUnlocked, MarkerForceUnlockRefused: // a backend lock says what it was and how it ended (ADR 0056)
			w.Decisive = append(w.Decisive, m)
		case MarkerApplyStarted:
			// Decisive where the apply stopped before its own commit:
			// Terraform ran, so infrastructure may have changed.
			if a.Status != StatusApplied && a.Status != StatusApplying {
				w.Decisive = append(w.Decisive, m)
			}
		}
	}
	return nil
}

// LockReleased reports whether run r is a backend lock (Run.Backend set
// by the views) that ended at UNLOCK with no version (End cause
// CauseUnlocked): released, not applied (ADR 0056).
func LockReleased(r Run) bool {
	return r.Backend != nil && r.CommittedSerial == 0 && r.End.Is(CauseUnlocked)
}

// ClosedPlan reports whether plan run r, claimed by no apply, failed
// itself: Terraform or Kilolock failed while planning, or its lease ran out
// (its holder died or stalled) before it finished.
func ClosedPlan(r Run) bool {
	return r.Kind == KindPlan && r.ApplyRun == "" && (r.Status == StatusFailed || r.Status == StatusLeaseExpired || r.Status == StatusInterrupted)
}

// noEnvelopeWords says why plan run r has no envelope: "plan run X never
// finished planning: its lease expired (REASON)", "… is still planning".
func noEnvelopeWords(r Run) string {
	switch {
	case r.Status == StatusPlanning:
		return fmt.Sprintf("plan run %s has no envelope yet: it is still planning (see `kl run show %s`)", r.ID, r.ID)
	case r.End.Is(CauseLeaseExpired) && r.End.Holder != (Holder{}):
		return fmt.Sprintf("plan run %s has no envelope: it never finished planning (%s: its holder %s stopped renewing; `kl why %s` says why)", r.ID, r.Status, r.End.Holder, r.ID)
	case r.End != nil:
		return fmt.Sprintf("plan run %s has no envelope: it never finished planning (%s; `kl why %s` says why)", r.ID, r.Status, r.ID)
	}
	return fmt.Sprintf("plan run %s has no envelope: it never finished planning (%s)", r.ID, r.Status)
}
