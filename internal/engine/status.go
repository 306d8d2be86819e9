package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"
)

// `kl status` and `kl runs` (ADR D6 "what is running now").

// ActiveRun is a run in progress with what it holds and whom it waits on.
type ActiveRun struct {
	Run       Run           `json:"run"`
	Holds     []Reservation `json:"holds"`
	WaitingOn []Blocker     `json:"waiting_on,omitempty"`
	Since     time.Time     `json:"since"`
	// Operation is the "operation" marker of a day-2 operation (an apply
	// run without a plan, ADR 0055): what it does.
	Operation *Marker `json:"operation,omitempty"`
	// A backend lock's (Run.Backend set, ADR 0056): its lease end (the
	// lock's TTL, never renewed), how many documents it wrote, and the
	// last POST refused under it (a "backend-refused" marker), which
	// Terraform shows only as "HTTP error: 409".
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	Writes     int       `json:"writes,omitempty"`
	Refused    *Marker   `json:"refused,omitempty"`
}

// FencedRun is an apply whose holder died while its Terraform ran: its
// write set stays fenced until it is recovered or unfenced (ADR 0035).
type FencedRun struct {
	Run    Run           `json:"run"`
	Fences []Reservation `json:"fences"`
	// TerraformStarted is when its Terraform started (End.TerraformStarted).
	TerraformStarted time.Time `json:"terraform_started,omitzero"`
	// ForceUnlockRefused is the last `terraform force-unlock` refused on
	// this fence (a backend lock's, ADR 0056): who asked, when and why.
	ForceUnlockRefused *Marker `json:"force_unlock_refused,omitempty"`
}

// Status is `kl status`: the fenced runs first (nothing else can take what
// they fence until someone acts), what is running now, what each run holds,
// who waits on whom, and the open plans an apply could still take (ADR D6
// "what is running now").
type Status struct {
	Fenced    []FencedRun `json:"fenced"`
	Active    []ActiveRun `json:"active"`
	OpenPlans []Run       `json:"open_plans"`
	// Expired lists runs whose leases this call found expired.
	Expired []string `json:"expired,omitempty"`
}

// Status reports the runs in progress on state ("" = every state), after
// the lease sweep: a run whose holder stopped renewing is listed in Expired,
// no longer as active. A store that refuses this binary's writes
// (ErrReadOnly: a newer binary raised its level) is read without the
// sweep, which a binary at the store's level does. Its open plans are those an apply could still take
// (applicable): planned, and not already made stale by a later version.
func (e *Engine) Status(ctx context.Context, state string) (*Status, error) {
	expired, err := e.Store.ExpireLeases(ctx)
	switch {
	case errors.Is(err, ErrReadOnly):
		// A newer binary raised the store's level (ADR 0048): this one
		// reads what is stored and leaves the sweep to binaries that
		// follow the store's rules.
		e.log().Warn("expiring leases", "err", err)
	case err != nil:
		return nil, fmt.Errorf("expiring leases: %w", err)
	}
	res, err := e.Store.Reservations(ctx, state)
	if err != nil {
		return nil, fmt.Errorf("reading reservations: %w", err)
	}
	holds := map[string][]Reservation{}
	fences := map[string][]Reservation{}
	var fencedRuns []string
	for _, r := range res {
		if r.Fenced() {
			if len(fences[r.Run]) == 0 {
				fencedRuns = append(fencedRuns, r.Run)
			}
			fences[r.Run] = append(fences[r.Run], r)
			continue
		}
		holds[r.Run] = append(holds[r.Run], r)
	}
	active, err := e.Store.ListRuns(ctx, RunQuery{State: state, Statuses: []RunStatus{StatusPlanning, StatusWaiting, StatusApplying}, Limit: 1000})
	if err != nil {
		return nil, fmt.Errorf("listing active runs: %w", err)
	}
	out := &Status{Fenced: []FencedRun{}, Active: []ActiveRun{}, OpenPlans: []Run{}, Expired: expired}
	sort.Strings(fencedRuns)
	for _, id := range fencedRuns {
		r, err := e.Store.GetRun(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("reading fenced run %s: %w", id, err)
		}
		e.annotate(ctx, &r)
		f := FencedRun{Run: r, Fences: fences[id]}
		if r.End != nil {
			f.TerraformStarted = r.End.TerraformStarted
		}
		if r.Backend != nil {
			ms, err := e.Store.Markers(ctx, id)
			if err != nil {
				return nil, fmt.Errorf("reading markers of fenced run %s: %w", id, err)
			}
			f.ForceUnlockRefused = ForceUnlockRefusalOf(ms)
		}
		out.Fenced = append(out.Fenced, f)
	}
	for _, r := range active {
		if r.Kind == KindPlan && r.Status == StatusApplying {
			continue // claimed by an apply run, which is listed itself
		}
		ar, err := e.activeRun(ctx, r, holds)
		if err != nil {
			return nil, err
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

// activeRun is run r in progress with what it holds (holds, by run), whom
// it waits on (its "waited" markers whose runs still hold something) and,
// for a day-2 operation, its "operation" marker.
func (e *Engine) activeRun(ctx context.Context, r Run, holds map[string][]Reservation) (ActiveRun, error) {
	ar := ActiveRun{Run: r, Holds: holds[r.ID], Since: r.CreatedAt}
	if r.Status == StatusWaiting || (r.Kind == KindApply && r.PlanRun == "") {
		ms, err := e.Store.Markers(ctx, r.ID)
		if err != nil {
			return ActiveRun{}, fmt.Errorf("reading markers of run %s: %w", r.ID, err)
		}
		if r.Kind == KindApply && r.PlanRun == "" {
			ar.Operation = OperationOf(ms)
			backendActive(&ar, ms)
		}
		for _, m := range ms {
			if r.Status == StatusWaiting && m.Kind == MarkerWaited && len(holds[m.Other]) > 0 {
				b := Blocker{Run: m.Other, PR: m.OtherPR, Addresses: m.Addresses, Held: holds[m.Other]}
				if o, err := e.Store.GetRun(ctx, m.Other); err == nil {
					b.Actor, b.Holder = o.Actor, o.Holder
				}
				ar.WaitingOn = append(ar.WaitingOn, b)
			}
		}
		e.nameBlockers(ctx, ar.WaitingOn)
	}
	return ar, nil
}

// backendActive adds to active run ar what its markers ms say of it as a
// backend lock, if it is one (ADR 0056).
func backendActive(ar *ActiveRun, ms []Marker) {
	m := BackendLockOf(ms)
	if m == nil {
		return
	}
	info := LockInfoOf(*m)
	ar.Run.Backend, ar.Run.Lock, ar.LeaseUntil = &info, lockFacts(ms), ar.Run.LeaseUntil
	for i := range ms {
		switch ms[i].Kind {
		case MarkerBackendWrite:
			ar.Writes++
		case MarkerBackendRefused:
			ar.Refused = &ms[i]
		}
	}
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
	for i := range rs {
		e.annotate(ctx, &rs[i])
	}
	return rs, nil
}
