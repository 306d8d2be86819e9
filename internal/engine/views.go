package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"
)

// The operator views of ADR D6, assembled from stored facts only (ADR D2:
// never from logs). internal/report renders them for a terminal, Markdown
// and JSON.

// RunStory is the run-centric view (`kl run show`): the envelope, every
// marker of the runs involved in time order, the allowed-because facts,
// the since-plan classification and the provenance of what was committed.
type RunStory struct {
	Run Run `json:"run"`
	// Plan is the reviewed plan: the run itself for a plan run, its plan for
	// an apply run.
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
		pr, err := e.getRun(ctx, run.PlanRun)
		if err != nil {
			return nil, err
		}
		s.Plan = &pr
	}
	if err := e.storyMarkers(ctx, s, apply); err != nil {
		return nil, err
	}
	if s.Plan.Envelope != nil && s.Plan.Status == StatusPlanned {
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
// those of the plan, of apply (nil: none) and of its re-plans, each with
// its run, in time order.
func (e *Engine) storyMarkers(ctx context.Context, s *RunStory, apply *Run) error {
	ids := []string{s.Plan.ID}
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
			s.Markers = append(s.Markers, m)
		}
	}
	sort.SliceStable(s.Markers, func(i, j int) bool { return s.Markers[i].At.Before(s.Markers[j].At) })
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
	if run.Kind == KindApply {
		if run, err = e.getRun(ctx, run.PlanRun); err != nil {
			return nil, err
		}
	}
	if run.Envelope == nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, noEnvelopeWords(run))
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
	return &sp, nil
}

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
	// lease-expired, drift, recovered — and apply-started for an apply
	// that did not commit (Terraform ran: infrastructure may have changed).
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
	for i := range ms {
		m := ms[i]
		m.Run = a.ID
		switch m.Kind {
		case MarkerWaited:
			w.Waited = append(w.Waited, m)
		case MarkerReserved:
			w.Reserved = &m
		case MarkerStalenessFailed, MarkerReplanned, MarkerFailed, MarkerLeaseExpired, MarkerDrift, MarkerRecovered:
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

// ClosedPlan reports whether plan run r, claimed by no apply, failed
// itself: Terraform or Kilolock failed while planning, or its lease ran out
// (its holder died or stalled) before it finished.
func ClosedPlan(r Run) bool {
	return r.Kind == KindPlan && r.ApplyRun == "" && (r.Status == StatusFailed || r.Status == StatusLeaseExpired)
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

// ActiveRun is a run in progress with what it holds and whom it waits on.
type ActiveRun struct {
	Run       Run           `json:"run"`
	Holds     []Reservation `json:"holds"`
	WaitingOn []Blocker     `json:"waiting_on,omitempty"`
	Since     time.Time     `json:"since"`
}

// Status is `kl status`: what is running now, what each run holds, who
// waits on whom, and the open plans an apply could still take (ADR D6
// "what is running now").
type Status struct {
	Active    []ActiveRun `json:"active"`
	OpenPlans []Run       `json:"open_plans"`
	// Expired lists runs whose leases this call found expired.
	Expired []string `json:"expired,omitempty"`
}

// Status reports the runs in progress on state ("" = every state), after
// the lease sweep: a run whose holder stopped renewing is listed in Expired,
// no longer as active. Its open plans are those an apply could still take
// (applicable): planned, and not already made stale by a later version.
func (e *Engine) Status(ctx context.Context, state string) (*Status, error) {
	expired, err := e.Store.ExpireLeases(ctx)
	if err != nil {
		return nil, fmt.Errorf("expiring leases: %w", err)
	}
	res, err := e.Store.Reservations(ctx, state)
	if err != nil {
		return nil, fmt.Errorf("reading reservations: %w", err)
	}
	holds := map[string][]Reservation{}
	for _, r := range res {
		holds[r.Run] = append(holds[r.Run], r)
	}
	active, err := e.Store.ListRuns(ctx, RunQuery{State: state, Statuses: []RunStatus{StatusPlanning, StatusWaiting, StatusApplying}, Limit: 1000})
	if err != nil {
		return nil, fmt.Errorf("listing active runs: %w", err)
	}
	out := &Status{Active: []ActiveRun{}, OpenPlans: []Run{}, Expired: expired}
	for _, r := range active {
		if r.Kind == KindPlan && r.Status == StatusApplying {
			continue // claimed by an apply run, which is listed itself
		}
		ar := ActiveRun{Run: r, Holds: holds[r.ID], Since: r.CreatedAt}
		if r.Status == StatusWaiting {
			ms, err := e.Store.Markers(ctx, r.ID)
			if err != nil {
				return nil, fmt.Errorf("reading markers of run %s: %w", r.ID, err)
			}
			for _, m := range ms {
				if m.Kind == MarkerWaited && len(holds[m.Other]) > 0 {
					b := Blocker{Run: m.Other, PR: m.OtherPR, Addresses: m.Addresses, Held: holds[m.Other]}
					if o, err := e.Store.GetRun(ctx, m.Other); err == nil {
						b.Actor, b.Holder = o.Actor, o.Holder
					}
					ar.WaitingOn = append(ar.WaitingOn, b)
				}
			}
		}
		out.Active = append(out.Active, ar)
	}
	open, err := e.Store.ListRuns(ctx, RunQuery{State: state, Kind: KindPlan, Statuses: []RunStatus{StatusPlanned}, Limit: 1000})
	if err != nil {
		return nil, fmt.Errorf("listing open plans: %w", err)
	}
	if open, err = e.applicable(ctx, open); err != nil {
		return nil, err
	}
	out.OpenPlans = append(out.OpenPlans, open...)
	return out, nil
}

// applicable returns the plans (status planned) that an apply could still
// take: not those a version committed since their source serial already
// made stale — it changed their write set ("planned target changed"), so
// an apply is refused without running (ADR D3). A plan whose plan input
// changed can still apply after a re-plan, and stays. It reads the
// versions of each state once, from the oldest source serial.
func (e *Engine) applicable(ctx context.Context, plans []Run) ([]Run, error) {
	oldest := map[string]int64{}
	for _, p := range plans {
		if p.Envelope == nil {
			continue
		}
		if s, ok := oldest[p.State]; !ok || p.Envelope.SourceSerial < s {
			oldest[p.State] = p.Envelope.SourceSerial
		}
	}
	versions := map[string][]Version{}
	for st, serial := range oldest {
		vs, err := e.Store.VersionsAfter(ctx, st, serial)
		if err != nil {
			return nil, fmt.Errorf("reading versions after %d of state %s: %w", serial, st, err)
		}
		versions[st] = vs
	}
	out := plans[:0:0]
	for _, p := range plans {
		if p.Envelope != nil {
			sp := ClassifySincePlan(p.ID, p.Envelope.SourceSerial, p.Envelope.Footprint, versions[p.State])
			for i := range sp.Entries {
				sp.Entries[i].OwnApply = p.ApplyRun != "" && sp.Entries[i].Run == p.ApplyRun
			}
			if len(sp.Of(ClassWriteChanged)) > 0 {
				continue
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// Runs lists recent runs (`kl runs`), after the lease sweep: a run whose
// holder died reads as lease-expired, as in `kl status`, `kl run show` and
// `kl why`, not as still planning or applying.
func (e *Engine) Runs(ctx context.Context, q RunQuery) ([]Run, error) {
	e.expireLeases(ctx)
	rs, err := e.Store.ListRuns(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	return rs, nil
}

// Run reads one run after the lease sweep (so a run whose holder died reads
// as lease-expired, as in every view). Errors: ErrNotFound (wrapped, naming
// the run and `kl runs`), or the store's.
func (e *Engine) Run(ctx context.Context, id string) (Run, error) {
	e.expireLeases(ctx)
	return e.getRun(ctx, id)
}

func (e *Engine) getRun(ctx context.Context, id string) (Run, error) {
	r, err := e.Store.GetRun(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return Run{}, fmt.Errorf("run %s does not exist (see `kl runs`): %w", id, ErrNotFound)
	}
	if err != nil {
		return Run{}, fmt.Errorf("reading run %s: %w", id, err)
	}
	return r, nil
}
