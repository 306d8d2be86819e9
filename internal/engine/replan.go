package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// replan re-checks a plan whose read set changed since it was made
// (read-changed versions rc): it re-plans the reviewed configuration and
// scope against the head and compares the intent (DESIGN.md apply step 3,
// ADR D4). The re-plan is a check, not what gets applied:
//
//   - same intent on the reviewed write set, and no change to anything the
//     plan reads → proceed, applying the REVIEWED plan to its own snapshot
//     (snapshot-merge keeps the newer versions' changes); marker
//     "replanned: intent unchanged" and an allowed-because fact;
//   - another intent on the write set → stop; the re-plan stays open for
//     review (marker "replanned: intent changed");
//   - the re-plan would also change what the plan reads → stop: the
//     configuration is behind the head there and would revert another run's
//     change, so no comparison can vouch for the plan.
//
// Changes the re-plan shows outside the plan's footprint are not the plan's
// intent (the configuration differs from the head there); they are reported
// and never applied.
func (a *applier) replan(ctx context.Context, rc []SincePlanEntry) error {
	e := a.e
	st, err := e.getState(ctx, a.state.Name)
	if err != nil {
		return a.fail(ctx, StatusPlanned, Failed(StepReadState, err), err)
	}
	snapshot, err := e.Store.Snapshot(ctx, st.Name, st.HeadSerial)
	if err != nil {
		return a.fail(ctx, StatusPlanned, Failed(StepReadHead, err), fmt.Errorf("reading head %d of state %s: %w", st.HeadSerial, st.Name, err))
	}
	now := e.now()
	rp := Run{
		ID: NewRunID(), Kind: KindPlan, State: st.Name, Actor: a.plan.Actor, Holder: e.Holder,
		Status: StatusPlanning, PR: a.plan.PR, CreatedAt: now, UpdatedAt: now, ReplanOf: a.plan.ID,
		LeaseUntil: now.Add(e.lease()),
	}
	if err := e.Store.CreateRun(ctx, rp); err != nil {
		return a.fail(ctx, StatusPlanned, Failed(StepCreateReplan, err), fmt.Errorf("creating re-plan run for %s: %w", a.plan.ID, err))
	}
	// The apply's keep-alive renews the re-plan while it plans.
	if a.ka != nil {
		a.ka.add(ctx, rp.ID)
		defer a.ka.remove(rp.ID)
	}
	env := a.plan.Envelope
	res, err := e.Terraform.Plan(ctx, PlanRequest{
		Run: rp.ID, Config: a.pf.config, Targets: env.Scope.Targets, VarFiles: env.Scope.VarFiles, Replace: env.Scope.Replace,
		Snapshot: snapshot, Progress: a.in.Progress,
	})
	if err != nil {
		e.failRun(ctx, rp.ID, Failed(StepPlan, err))
		return a.fail(ctx, StatusPlanned, Failed(StepReplan, err).withRun(rp.ID), fmt.Errorf("re-planning %s against head %d: %w", a.plan.ID, st.HeadSerial, err))
	}
	if rp, err = e.storePlan(ctx, rp, st, env.Scope, res, env.PR, env.CommitSHA, a.plan.ID); err != nil {
		return a.fail(ctx, StatusPlanned, Failed(StepStoreReplan, err), err)
	}
	cmp := CompareReplan(a.pf.intent, res.Intent, env.Footprint)
	facts := &ReplanFacts{Versions: Serials(rc), Outside: cmp.Outside}
	changed := true
	switch {
	case len(cmp.Read) > 0:
		// One term on stderr and in the reports: "configuration behind the
		// head" (report's ruleBehindHead).
		facts.Addresses = cmp.Read
		end := &End{Cause: CauseBehindHead, Run: rp.ID, Plan: a.plan.ID, Serial: st.HeadSerial, Replan: facts}
		m := Marker{Kind: MarkerReplanned, Other: rp.ID, Serial: st.HeadSerial, IntentChanged: &changed, Class: ClassReadChanged,
			Addresses: instanceAddresses(cmp.Read), End: end, Extra: outsideExtra(cmp.Outside)}
		e.closeReplan(ctx, rp.ID, StatusSuperseded, &End{Cause: CauseReplanReverts, Plan: a.plan.ID})
		sp := a.sp
		a.abortWith(ctx, StatusRefused, end, StatusStale, func(r *Run) { r.SincePlan = &sp }, m)
		return fmt.Errorf("applying run %s: %w: re-plan %s against head %d would also change %s this plan reads (`kl run show %s` names them): applying would revert newer versions there; update the configuration with the head and plan again",
			a.run.ID, ErrBehindHead, rp.ID, st.HeadSerial, instances(len(cmp.Read)), a.run.ID)
	case len(cmp.Write) > 0:
		facts.Addresses = cmp.Write
		end := &End{Cause: CauseIntentChanged, Run: rp.ID, Plan: a.plan.ID, Serial: st.HeadSerial, Replan: facts}
		m := Marker{Kind: MarkerReplanned, Other: rp.ID, Serial: st.HeadSerial, IntentChanged: &changed, Class: ClassWriteChanged,
			Addresses: instanceAddresses(cmp.Write), End: end, Extra: outsideExtra(cmp.Outside)}
		sp := a.sp
		a.abortWith(ctx, StatusRefused, end, StatusSuperseded, func(r *Run) { r.SincePlan = &sp }, m)
		return fmt.Errorf("applying run %s: %w: re-plan %s against head %d plans something else for %s of the write set; review plan %s (`kl run show %s`) and apply it",
			a.run.ID, ErrIntentChanged, rp.ID, st.HeadSerial, instances(len(cmp.Write)), rp.ID, rp.ID)
	}
	e.closeReplan(ctx, rp.ID, StatusSuperseded, &End{Cause: CauseReplanChecked, Run: a.run.ID, Plan: a.plan.ID})
	a.facts = append(a.facts, Fact{Kind: FactReplanUnchanged, Run: rp.ID, Serials: facts.Versions, SourceSerial: env.SourceSerial, HeadSerial: st.HeadSerial})
	unchanged := false
	sum := a.sp.Summary()
	return e.Store.AddMarkers(ctx, a.run.ID,
		Marker{Kind: MarkerReplanned, Other: rp.ID, Serial: st.HeadSerial, IntentChanged: &unchanged, Serials: facts.Versions, Extra: outsideExtra(cmp.Outside)},
		Marker{Kind: MarkerStalenessPassed, SincePlan: &sum})
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
// differs from the reviewed plan's (DESIGN.md "intent").
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
		addr, err := ParseAddress(k)
		switch {
		case err != nil || fp.Write.Contains(addr):
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

// instanceAddresses maps instance addresses to their resource addresses.
func instanceAddresses(keys []string) AddressSet {
	out := make([]Address, 0, len(keys))
	for _, k := range keys {
		if a, err := ParseAddress(k); err == nil {
			out = append(out, a)
		}
	}
	return NewAddressSet(out...)
}
