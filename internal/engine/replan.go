package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// replan decides the apply of a plan whose read set changed since it was
// made (read-changed versions rc): it re-plans the reviewed configuration
// and scope — every option of the reviewed plan: targets, var files (kept
// in the configuration archive), replacements — against the head, compares
// the intent (CompareReplan) and decides (docs/design.md apply step 3, ADR D4).
//
// The reviewed plan's own snapshot is never applied once its inputs
// changed: a planned value that is unknown (computed at apply) hides what
// it depends on, and Terraform would compute it from the old snapshot's
// inputs — a stale read, the very thing the since-plan check exists to
// stop (issue 10 §2). So, in this order:
//
//   - the re-plan would change what the plan reads → stop: the
//     configuration is behind the head there and would revert another
//     run's change (CauseBehindHead); the re-plan is closed;
//   - another intent on the reviewed write set → stop; the re-plan stays
//     open for review (CauseIntentChanged);
//   - a change outside the reviewed footprint → stop; the re-plan stays
//     open for review (CauseOutsideFootprint): applying it would apply
//     that change, which nobody reviewed (no-op entries are not changes);
//   - a reservation the re-plan needs that the apply does not hold (the
//     reviewed plan's, Covers) → stop; open for review
//     (CauseBeyondReservations);
//   - otherwise the RE-PLAN is what Terraform applies, to the head snapshot
//     it was made against, so every value, known or not, comes from
//     current inputs: this apply claims the re-plan (takeReplan), with a
//     "replanned: intent unchanged" marker and an allowed-because fact.
//
// No since-plan check of the re-plan is needed at commit: the apply has
// held the reviewed plan's reservations since before it re-planned, and
// they cover the re-plan's, so no version after the re-plan's head can
// have touched what it writes or reads — the same rule as for any apply
// whose snapshot is older than the head at commit (commit.go merges into
// the head of that moment).
func (a *applier) replan(ctx context.Context, rc []SincePlanEntry) error {
	rp, res, head, err := a.makeReplan(ctx, nil)
	if err != nil {
		return err
	}
	cmp := CompareReplan(a.pf.intent, res.Intent, a.plan.Envelope.Footprint)
	facts := &ReplanFacts{Versions: Serials(rc), Outside: cmp.Outside}
	if err := a.stopForReview(ctx, rp, head, cmp, facts); err != nil {
		return err
	}
	return a.takeReplan(ctx, rp, res, head, facts)
}

// makeReplan plans the reviewed plan's configuration and scope against the
// head as a new plan run (ReplanOf the reviewed plan) and stores it; it
// returns the stored run, the plan and the head serial planned against.
// A failure ends the apply (the reviewed plan is handed back: planned).
// With whole, the archive of a native-lane plan's whole configuration,
// it is that plan's validation re-plan (validate.go): the whole
// configuration (or the merge commit's), in the terraform lane.
func (a *applier) makeReplan(ctx context.Context, whole []byte) (Run, *PlanResult, int64, error) {
	e := a.e
	st, err := e.getState(ctx, a.state.Name)
	if err != nil {
		return Run{}, nil, 0, a.fail(ctx, StatusPlanned, Failed(StepReadState, err), err)
	}
	// A native-lane plan re-plans its slice of the head, with the sliced
	// configuration it archived; a merge commit's configuration is whole,
	// so its re-plan is the terraform lane's.
	env := a.plan.Envelope
	laneOf := env
	if a.in.MergeCommit != nil || whole != nil {
		laneOf = nil
	}
	snapshot, err := e.planBase(ctx, st.Name, st.HeadSerial, laneOf)
	if err != nil {
		return Run{}, nil, 0, a.fail(ctx, StatusPlanned, Failed(StepReadHead, err), fmt.Errorf("reading head %d of state %s: %w", st.HeadSerial, st.Name, err))
	}
	now := e.now()
	rp := Run{
		ID: NewRunID(), Kind: KindPlan, State: st.Name, Actor: a.plan.Actor, Holder: e.Holder,
		Status: StatusPlanning, PR: a.plan.PR, CreatedAt: now, UpdatedAt: now, ReplanOf: a.plan.ID,
		LeaseUntil: now.Add(e.lease()),
	}
	if err := e.Store.CreateRun(ctx, rp); err != nil {
		return Run{}, nil, 0, a.fail(ctx, StatusPlanned, Failed(StepCreateReplan, err), fmt.Errorf("creating re-plan run for %s: %w", a.plan.ID, err))
	}
	// The apply's keep-alive renews the re-plan while it plans.
	if a.ka != nil {
		a.ka.add(ctx, rp.ID)
		defer a.ka.remove(rp.ID)
	}
	req, commit := replanRequest(rp.ID, a.pf, env.Scope, snapshot, a.in.Progress), env.CommitSHA
	if whole != nil {
		req.Config = whole
	}
	if mc := a.in.MergeCommit; mc != nil {
		req.Config, req.Dir, commit = nil, mc.Dir, mc.SHA
	}
	res, err := e.Terraform.Plan(ctx, req)
	if err != nil {
		e.failRun(ctx, rp.ID, Failed(StepPlan, err))
		return Run{}, nil, 0, a.fail(ctx, StatusPlanned, Failed(StepReplan, err).withRun(rp.ID), fmt.Errorf("re-planning %s against head %d: %w", a.plan.ID, st.HeadSerial, err))
	}
	o := replanOrigin(env, laneOf, commit, a.plan.ID)
	if whole != nil {
		o.LaneReason = "validation re-plan of the native-lane plan " + a.plan.ID + ": the whole configuration"
	}
	if rp, err = e.storePlan(ctx, rp, st, env.Scope, res, a.pf.vars, o); err != nil {
		return Run{}, nil, 0, a.fail(ctx, StatusPlanned, Failed(StepStoreReplan, err), err)
	}
	return rp, res, st.HeadSerial, nil
}

// replanOrigin is the origin of a re-plan of reviewed plan id (envelope
// env) planned in laneOf's lane (nil: the terraform lane, a merge commit's
// whole configuration) at commit.
func replanOrigin(env, laneOf *Envelope, commit, id string) planOrigin {
	o := planOrigin{PR: env.PR, Commit: commit, ReplanOf: id, AtMerge: env.PlannedAtMerge}
	if laneOf != nil && laneOf.Lane == LaneNative && laneOf.Slice != nil {
		o.Lane, o.Slice, o.LaneReason = LaneNative, laneOf.Slice, "re-plan of the native-lane plan "+id+" on its slice of the head"
	} else if env.Lane == LaneNative {
		o.LaneReason = "re-plan of the native-lane plan " + id + " with the merge commit's whole configuration"
	}
	return o
}

// checkMergeCommit checks an apply's merge commit (nil: none) against
// its plan: a commit SHA, a directory, and no absolute var file in the
// plan's scope (it cannot be located in the merge commit's checkout);
// else ErrInvalid naming the problem.
func checkMergeCommit(mc *MergeCommit, plan Run) error {
	if mc == nil {
		return nil
	}
	if !isHex(mc.SHA, 7, 40) {
		return Errorf(ErrInvalid, "merge commit %q: want a commit SHA, 7 to 40 hexadecimal characters", mc.SHA)
	}
	if fi, err := os.Stat(mc.Dir); err != nil || !fi.IsDir() {
		return Errorf(ErrInvalid, "merge commit %s: its configuration directory %s is not a directory", mc.SHA, mc.Dir)
	}
	if plan.Envelope == nil {
		return nil
	}
	for _, f := range plan.Envelope.Scope.VarFiles {
		if filepath.IsAbs(f) {
			return Errorf(ErrInvalid, "merge commit %s: plan %s reads var file %s by an absolute path, which cannot be located in the merge commit's checkout: apply it without the merge commit", mc.SHA, plan.ID, f)
		}
	}
	return nil
}

// replanRequest is the PlanRequest of re-plan run against snapshot: the
// reviewed plan's configuration archive (pf.config, which holds its var
// files), its -var values (pf.vars) and every option of its scope —
// targets, replacements and its Terraform plan options (ADR 0045) — so
// that the re-plan differs from the reviewed plan only in the state it is
// made against.
func replanRequest(run string, pf *planFiles, scope Scope, snapshot []byte, progress func(Progress)) PlanRequest {
	return PlanRequest{
		Run: run, Config: pf.config, Targets: scope.Targets, VarFiles: scope.VarFiles, Replace: scope.Replace,
		Options: scope.Options, Vars: pf.vars, Snapshot: snapshot, Progress: progress,
	}
}

// stopForReview ends the apply when re-plan rp (against head) may not be
// applied in place of the reviewed plan (see replan): it records the
// "replanned" marker and the refusal, and returns the error the apply
// returns; nil when rp may be applied.
func (a *applier) stopForReview(ctx context.Context, rp Run, head int64, cmp ReplanComparison, facts *ReplanFacts) error {
	stop := replanStop{planStatus: StatusSuperseded}
	switch {
	case len(cmp.Read) > 0:
		// One term on stderr and in the reports: "configuration behind the
		// head" (report's ruleBehindHead).
		stop = replanStop{cause: CauseBehindHead, class: ClassReadChanged, keys: cmp.Read, planStatus: StatusStale,
			err: fmt.Errorf("applying run %s: %w: re-plan %s against head %d would also change %s this plan reads (`kl run show %s` names them): applying would revert newer versions there; update the configuration with the head and plan again",
				a.run.ID, ErrBehindHead, rp.ID, head, instances(len(cmp.Read)), a.run.ID)}
	case len(cmp.Write) > 0:
		stop.cause, stop.class, stop.keys = CauseIntentChanged, ClassWriteChanged, cmp.Write
		stop.err = fmt.Errorf("applying run %s: %w: re-plan %s against head %d plans something else for %s of the write set; review plan %s (`kl run show %s`) and apply it",
			a.run.ID, ErrIntentChanged, rp.ID, head, instances(len(cmp.Write)), rp.ID, rp.ID)
	case len(cmp.Outside) > 0:
		stop.cause, stop.class, stop.keys = CauseOutsideFootprint, ClassIndependent, cmp.Outside
		stop.err = fmt.Errorf("applying run %s: %w: re-plan %s against head %d would also change %s there (`kl run show %s` names them), which applying it would apply unreviewed; review plan %s (`kl run show %s`) and apply it",
			a.run.ID, ErrOutsideFootprint, rp.ID, head, instances(len(cmp.Outside)), a.run.ID, rp.ID, rp.ID)
	default:
		un := Unreserved(rp.Envelope.Reservations, a.plan.Envelope.Reservations)
		if len(un) == 0 {
			return nil
		}
		facts.Unreserved = un
		stop.cause, stop.keys = CauseBeyondReservations, reservedAddresses(un).Strings()
		stop.err = fmt.Errorf("applying run %s: %w: re-plan %s against head %d needs %d reservations this apply does not hold (`kl run show %s` names them); review plan %s (`kl run show %s`) and apply it",
			a.run.ID, ErrBeyondReservations, rp.ID, head, len(un), a.run.ID, rp.ID, rp.ID)
	}
	facts.Addresses = stop.keys
	changed := true
	end := &End{Cause: stop.cause, Run: rp.ID, Plan: a.plan.ID, Serial: head, Replan: facts}
	m := Marker{Kind: MarkerReplanned, Other: rp.ID, Serial: head, IntentChanged: &changed, Class: stop.class, Commit: a.mergeCommit(),
		Addresses: instanceAddresses(stop.keys), End: end, Extra: outsideExtra(cmp.Outside)}
	if stop.cause == CauseBehindHead {
		a.e.closeReplan(ctx, rp.ID, StatusSuperseded, &End{Cause: CauseReplanReverts, Plan: a.plan.ID})
	}
	sp := a.sp
	a.abortWith(ctx, StatusRefused, end, stop.planStatus, func(r *Run) { r.SincePlan = &sp }, m)
	return stop.err
}

// replanStop is one way a re-plan stops an apply (stopForReview): the end's
// cause, the marker's class and the instance addresses that decided it,
// what becomes of the reviewed plan, and the error. The re-plan stays open
// for review, except behind the head (it would revert newer versions).
type replanStop struct {
	cause      Cause
	class      SincePlanClass
	keys       []string
	planStatus RunStatus
	err        error
}

// takeReplan makes re-plan rp (res, against head) the plan this apply
// applies: it claims rp (planned → applying, ApplyRun this run) and
// records the "replanned: intent unchanged" and "staleness-passed"
// markers and the allowed-because fact.
func (a *applier) takeReplan(ctx context.Context, rp Run, res *PlanResult, head int64, facts *ReplanFacts) error {
	e := a.e
	claimed, err := e.Store.UpdateRun(ctx, rp.ID, []RunStatus{StatusPlanned}, func(r *Run) error {
		r.Status = StatusApplying
		r.ApplyRun = a.run.ID
		return nil
	})
	if err != nil {
		return a.fail(ctx, StatusPlanned, Failed(StepClaimReplan, err).withRun(rp.ID), fmt.Errorf("claiming re-plan %s for apply run %s: %w", rp.ID, a.run.ID, err))
	}
	a.pf = &planFiles{run: claimed, planFile: res.PlanFile, config: res.Config, intent: res.Intent, vars: a.pf.vars}
	a.facts = append(a.facts, Fact{Kind: FactReplanApplied, Run: rp.ID, Serials: facts.Versions, SourceSerial: a.plan.Envelope.SourceSerial, HeadSerial: head, Commit: a.mergeCommit()})
	unchanged := false
	sum := a.sp.Summary()
	if err := e.Store.AddMarkers(ctx, a.run.ID,
		Marker{Kind: MarkerReplanned, Other: rp.ID, Serial: head, IntentChanged: &unchanged, Serials: facts.Versions, Commit: a.mergeCommit()},
		Marker{Kind: MarkerStalenessPassed, SincePlan: &sum}); err != nil {
		return a.fail(ctx, StatusPlanned, Failed(StepRecordPreflight, err), fmt.Errorf("recording the re-plan of run %s: %w", a.run.ID, err))
	}
	return nil
}

// mergeCommit is the merge commit a re-plan of this apply plans
// (ApplyInput.MergeCommit), "" for the reviewed configuration.
func (a *applier) mergeCommit() string {
	if a.in.MergeCommit == nil {
		return ""
	}
	return a.in.MergeCommit.SHA
}

// replanApplied is the re-plan this apply claimed to apply in place of
// the reviewed plan ("" when it applies the reviewed plan).
func (a *applier) replanApplied() string {
	if a.pf == nil || a.pf.run.ID == a.plan.ID {
		return ""
	}
	return a.pf.run.ID
}

// Unreserved returns the reservations of want that held does not cover: a
// write needs a held write on an address covering it (Address.Covers), a
// read any held reservation covering it. The result keeps want's order.
func Unreserved(want, held []Reservation) []Reservation {
	var out []Reservation
	for _, w := range want {
		covered := false
		for _, h := range held {
			if h.Address.Covers(w.Address) && (h.Mode == ModeWrite || w.Mode == ModeRead) {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, Reservation{Address: w.Address, Mode: w.Mode})
		}
	}
	return out
}

// closeReplan sets a re-plan run's final status with its end.
func (e *Engine) closeReplan(ctx context.Context, id string, s RunStatus, end *End) {
	bctx, cancel := background(ctx)
	defer cancel()
	if _, err := e.Store.UpdateRun(bctx, id, []RunStatus{StatusPlanned}, func(r *Run) error {
		r.Status = s
		r.End = end
		return nil
	}); err != nil {
		e.log().Error("closing re-plan", "run", id, "err", err)
	}
}

// ReplanComparison sorts the instance addresses where a re-plan's intent
// differs from the reviewed plan's (docs/design.md "intent").
type ReplanComparison struct {
	// Write: differences on the reviewed write set (the reviewed intent changed).
	Write []string
	// Read: changes the re-plan makes to the reviewed read set, outside its
	// write set (the configuration would revert something the plan reads).
	Read []string
	// Outside: changes outside the reviewed footprint (not the plan's intent).
	Outside []string
}

// CompareReplan compares a re-plan's intent with the reviewed one over the
// reviewed footprint fp. Intent keys are instance addresses or
// "output.NAME"; an unparsable key counts as a write difference.
func CompareReplan(reviewed, replan Intent, fp Footprint) ReplanComparison {
	var out ReplanComparison
	keys := map[string]bool{}
	for k := range reviewed.Changes {
		keys[k] = true
	}
	for k := range replan.Changes {
		keys[k] = true
	}
	for k := range keys {
		a, b := reviewed.Changes[k]
		c, d := replan.Changes[k]
		if b && d && a.equal(c) {
			continue
		}
		addr, err := ParseInstanceAddress(k)
		switch {
		case err != nil || fp.Write.Contains(addr) || coveredBy(addr, fp.Write):
			out.Write = append(out.Write, k)
		case len(AddressSet{addr}.Overlapping(fp.Read)) > 0:
			out.Read = append(out.Read, k)
		default:
			out.Outside = append(out.Outside, k)
		}
	}
	sort.Strings(out.Write)
	sort.Strings(out.Read)
	sort.Strings(out.Outside)
	return out
}

// outsideExtra records a re-plan's changes outside the reviewed footprint
// in a marker's Extra["outside"] (instance addresses, comma-separated).
func outsideExtra(outside []string) map[string]string {
	if len(outside) == 0 {
		return nil
	}
	return map[string]string{"outside": strings.Join(outside, ",")}
}

// instances counts instances in an error: "1 instance", "3 instances".
func instances(n int) string {
	if n == 1 {
		return "1 instance"
	}
	return fmt.Sprintf("%d instances", n)
}

// coveredBy reports whether an address of set covers a (Address.Covers):
// an instance is in a write set that names it or its resource (a write set
// stored before ADR 0065).
func coveredBy(a Address, set AddressSet) bool {
	for _, s := range set {
		if s.Covers(a) {
			return true
		}
	}
	return false
}

// instanceAddresses parses intent keys as instance addresses (ADR 0065),
// dropping any that do not parse.
func instanceAddresses(keys []string) AddressSet {
	out := make([]Address, 0, len(keys))
	for _, k := range keys {
		if a, err := ParseInstanceAddress(k); err == nil {
			out = append(out, a)
		}
	}
	return NewAddressSet(out...)
}

// settleReplans closes the re-plans that an apply run claimed (takeReplan)
// and that it left claimed when it ended: its holder died, and the lease
// sweep (Store.ExpireLeases) hands back only the apply's reviewed plan. Each
// such re-plan ends as its reviewed plan did (settledReplan). It runs with
// every lease sweep of the engine (expireLeases); a failure is logged.
func (e *Engine) settleReplans(ctx context.Context) {
	claimed, err := e.Store.ListRuns(ctx, RunQuery{Kind: KindPlan, Statuses: []RunStatus{StatusApplying}, Limit: 1000})
	if err != nil {
		if ctx.Err() == nil {
			e.log().Warn("listing claimed plans to settle re-plans", "err", err)
		}
		return
	}
	for _, rp := range claimed {
		if rp.ReplanOf == "" || rp.ApplyRun == "" {
			continue
		}
		apply, err := e.Store.GetRun(ctx, rp.ApplyRun)
		if err != nil || apply.InProgress() {
			continue
		}
		reviewed, err := e.Store.GetRun(ctx, rp.ReplanOf)
		if err != nil {
			continue
		}
		s, end, ok := settledReplan(rp, reviewed, apply)
		if !ok {
			continue
		}
		if _, err := e.Store.UpdateRun(ctx, rp.ID, []RunStatus{StatusApplying}, func(r *Run) error {
			if err := claimedBy(r, apply.ID); err != nil {
				return err
			}
			r.Status, r.End = s, end
			return nil
		}); err != nil {
			e.log().Warn("settling re-plan of an ended apply", "run", rp.ID, "apply", apply.ID, "err", err)
		}
	}
}

// settledReplan is how re-plan rp, claimed by apply run apply, ends once
// that apply has ended: as its reviewed plan (status and end) when the
// apply has handed it back; applied with CauseReplanApplied when the apply
// committed; superseded (the apply's end) when the reviewed plan is open
// again or another apply claimed it since. ok is false while the reviewed
// plan is still claimed by apply (its apply is about to close both).
func settledReplan(rp, reviewed, apply Run) (RunStatus, *End, bool) {
	switch {
	case reviewed.ApplyRun == apply.ID && reviewed.Status == StatusApplying:
		return "", nil, false
	case apply.CommittedSerial != 0 && reviewed.ApplyRun == apply.ID && reviewed.Status == StatusApplied:
		return StatusApplied, &End{Cause: CauseReplanApplied, Run: apply.ID, Plan: reviewed.ID, Serial: apply.CommittedSerial}, true
	case reviewed.ApplyRun == apply.ID && reviewed.Status != StatusPlanned:
		return reviewed.Status, reviewed.End, true
	}
	return StatusSuperseded, &End{Cause: CauseApplyEnded, Run: apply.ID, Then: apply.End}, true
}

// appliedPlan is the plan apply run run's Terraform applied: the re-plan
// its "apply-started" marker names, else its reviewed plan. A re-plan that
// cannot be read is logged and the reviewed plan returned.
func (e *Engine) appliedPlan(ctx context.Context, run, reviewed Run) Run {
	ms, err := e.Store.Markers(ctx, run.ID)
	if err != nil {
		e.log().Warn("reading markers for the plan Terraform applied", "run", run.ID, "err", err)
		return reviewed
	}
	for _, m := range ms {
		if m.Kind == MarkerApplyStarted && m.Other != "" {
			rp, err := e.Store.GetRun(ctx, m.Other)
			if err != nil || rp.Envelope == nil {
				e.log().Warn("reading the re-plan Terraform applied", "run", run.ID, "replan", m.Other, "err", err)
				return reviewed
			}
			return rp
		}
	}
	return reviewed
}
