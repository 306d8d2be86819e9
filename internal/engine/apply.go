package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// ApplyInput is one `kl apply RUN` (or klbot's /kl apply).
type ApplyInput struct {
	PlanRun string
	// State, when set, must be the plan's state (a plan from another state
	// is refused).
	State string
	Actor string
	PR    *PullRequest
	// Strict refuses on read-changed versions too (--strict-since-plan)
	// instead of re-planning.
	Strict bool
	// Wait bounds how long to wait for conflicting reservations; 0 fails at
	// once with the blockers named.
	Wait     time.Duration
	Progress func(Progress)
	// OnWait, if set, is called when the apply starts waiting on blockers.
	OnWait func([]Blocker)
}

// ApplyOutcome is a finished apply run with the version it committed.
type ApplyOutcome struct {
	Run     Run
	Version *Version // nil when nothing was committed
}

// Apply applies a plan run (DESIGN.md "How a run flows", apply):
//
//  1. check the saved plan (digest, lineage, serial) and claim the plan for
//     one new apply run — a plan is applied at most once;
//  2. acquire every reservation of the envelope, all or none, waiting up to
//     in.Wait and recording a "waited" marker naming the holder;
//  3. preflight the since-plan versions (ADR D3): write-changed refuses;
//     read-changed re-plans against the head and proceeds only if the intent
//     is unchanged (strict: refuses); independent proceeds;
//  4. apply the saved plan to the snapshot it was made from;
//  5. compare what changed with the planned write set (exact or drift);
//  6. snapshot-merge the result into the head as version head+1 and release,
//     in one transaction — also when Terraform failed or was interrupted
//     part-way, so that what it wrote is never lost (marked partial).
//
// Every decision is a marker; the allowed-because facts are stored on the
// run (ADR D2, D4). Refusals return typed errors: *StatusError,
// *ConflictError, *StaleError, ErrIntentChanged.
func (e *Engine) Apply(ctx context.Context, in ApplyInput) (*ApplyOutcome, error) {
	plan, err := e.getRun(ctx, in.PlanRun)
	if err != nil {
		return nil, err
	}
	if plan.Kind != KindPlan {
		return nil, fmt.Errorf("%w: run %s is an apply run, not a plan: apply its plan run %s instead", ErrInvalid, plan.ID, plan.PlanRun)
	}
	if in.State != "" && in.State != plan.State {
		return nil, fmt.Errorf("%w: plan %s belongs to state %s, not %s", ErrInvalid, plan.ID, plan.State, in.State)
	}
	if plan.Status != StatusPlanned {
		return nil, &StatusError{Run: plan.ID, Kind: plan.Kind, Status: plan.Status, Want: []RunStatus{StatusPlanned}, By: plan.ApplyRun}
	}
	st, err := e.getState(ctx, plan.State)
	if err != nil {
		return nil, err
	}
	pf, err := e.loadPlan(ctx, plan, st)
	if err != nil {
		return nil, err
	}

	now := e.now()
	run := Run{
		ID: NewRunID(), Kind: KindApply, State: plan.State, Actor: in.Actor, Holder: e.Holder,
		Status: StatusWaiting, PR: in.PR, CreatedAt: now, UpdatedAt: now, PlanRun: plan.ID,
	}
	if run.PR == nil {
		run.PR = plan.PR
	}
	if err := e.Store.CreateRun(ctx, run); err != nil {
		return nil, fmt.Errorf("creating apply run for plan %s: %w", plan.ID, err)
	}
	// Claim: exactly one apply run takes a plan (planned → applying).
	if _, err := e.Store.UpdateRun(ctx, plan.ID, []RunStatus{StatusPlanned}, func(r *Run) error {
		r.Status = StatusApplying
		r.ApplyRun = run.ID
		return nil
	}); err != nil {
		a := &applier{e: e, in: in, run: run, plan: plan, state: st}
		a.abortWith(ctx, StatusRefused, fmt.Sprintf("claiming plan %s: %v", plan.ID, err), "", nil)
		return nil, &RunError{Run: run.ID, Err: fmt.Errorf("claiming plan %s for apply run %s: %w", plan.ID, run.ID, err)}
	}
	a := &applier{e: e, in: in, run: run, plan: plan, state: st, pf: pf}
	out, err := a.do(ctx)
	if err != nil {
		return out, &RunError{Run: run.ID, Err: err}
	}
	return out, nil
}

// planFiles is what an apply needs of a plan run.
type planFiles struct {
	run      Run
	planFile []byte
	config   []byte
	intent   Intent
}

// loadPlan reads and verifies a plan run's artifacts: the saved plan's
// digest must match the envelope (else the saved plan is corrupted), and it
// must be made against the state's lineage at the envelope's source serial.
func (e *Engine) loadPlan(ctx context.Context, plan Run, st State) (*planFiles, error) {
	env := plan.Envelope
	if env == nil {
		return nil, fmt.Errorf("%w: plan run %s has no envelope (status %s)", ErrInvalid, plan.ID, plan.Status)
	}
	if env.Lineage != st.Lineage {
		return nil, fmt.Errorf("%w: plan %s was made against lineage %s, but state %s has lineage %s", ErrInvalid, plan.ID, env.Lineage, st.Name, st.Lineage)
	}
	get := func(name string) ([]byte, error) {
		b, err := e.Store.GetArtifact(ctx, plan.ID, name)
		if err != nil {
			return nil, fmt.Errorf("reading %s of plan %s: %w", name, plan.ID, err)
		}
		return b, nil
	}
	planFile, err := get(ArtifactPlanFile)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(planFile)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != env.PlanDigest {
		return nil, fmt.Errorf("%w: saved plan of run %s is corrupted: its digest is %s, the envelope recorded %s; re-plan", ErrInvalid, plan.ID, got, env.PlanDigest)
	}
	info, err := e.Terraform.InspectPlanFile(planFile)
	if err != nil {
		return nil, fmt.Errorf("%w: saved plan of run %s: %v", ErrInvalid, plan.ID, err)
	}
	if info.Lineage != st.Lineage || info.Serial != env.SourceSerial {
		return nil, fmt.Errorf("%w: saved plan of run %s was made against lineage %s serial %d; state %s has lineage %s and the envelope says serial %d",
			ErrInvalid, plan.ID, info.Lineage, info.Serial, st.Name, st.Lineage, env.SourceSerial)
	}
	config, err := get(ArtifactConfig)
	if err != nil {
		return nil, err
	}
	raw, err := get(ArtifactIntent)
	if err != nil {
		return nil, err
	}
	var intent Intent
	if err := json.Unmarshal(raw, &intent); err != nil {
		return nil, fmt.Errorf("%w: intent of plan %s: %v", ErrInvalid, plan.ID, err)
	}
	return &planFiles{run: plan, planFile: planFile, config: config, intent: intent}, nil
}

// applier carries one apply through its steps.
type applier struct {
	e     *Engine
	in    ApplyInput
	run   Run
	plan  Run // the reviewed plan
	state State
	pf    *planFiles // the plan being applied (the reviewed one, or its re-plan)
	facts []Fact
	sp    SincePlan
}

func (a *applier) do(ctx context.Context) (*ApplyOutcome, error) {
	e := a.e
	held, err := a.reserve(ctx)
	if err != nil {
		return nil, err
	}
	// Renew from the moment the reservations are held.
	renewCtx, stopRenew := context.WithCancel(context.WithoutCancel(ctx))
	renewDone := make(chan struct{})
	go func() {
		defer close(renewDone)
		e.renew(renewCtx, a.run.ID)
	}()
	defer func() {
		stopRenew()
		<-renewDone
	}()
	a.facts = append(a.facts, concurrencyFacts(a.plan.Envelope.Footprint, held.Others, a.runPRs(ctx, held.Others))...)

	if err := a.preflight(ctx); err != nil {
		return nil, err
	}
	if _, err := e.Store.UpdateRun(ctx, a.run.ID, nil, func(r *Run) error {
		r.Status = StatusApplying
		r.AllowedBecause = a.facts
		sp := a.sp
		r.SincePlan = &sp
		return nil
	}); err != nil {
		a.abort(ctx, StatusFailed, fmt.Sprintf("recording allowed-because: %v", err), StatusPlanned)
		return nil, fmt.Errorf("recording allowed-because of run %s: %w", a.run.ID, err)
	}
	return a.applyAndCommit(ctx)
}

// reserve acquires the reservation set all-or-none, waiting up to in.Wait.
func (a *applier) reserve(ctx context.Context) (AcquireResult, error) {
	e := a.e
	want := a.plan.Envelope.Reservations
	if e.LockMode == LockWholeState {
		want = []Reservation{{Address: AllAddresses, Mode: ModeWrite}}
	}
	started := e.now()
	deadline := started.Add(a.in.Wait)
	firstSeen := map[string]time.Time{}
	waited := false
	for {
		res, err := e.Store.Acquire(ctx, AcquireRequest{State: a.state.Name, Run: a.run.ID, Holder: e.Holder, Reservations: want, Lease: e.lease()})
		if err == nil {
			m := Marker{Kind: MarkerReserved, Count: len(res.Held), Addresses: reservedAddresses(res.Held)}
			if waited {
				now := e.now()
				m.Waited = Duration(now.Sub(started))
				for i := range a.facts {
					if f := &a.facts[i]; f.Kind == FactWaitedFor {
						f.Waited = Duration(now.Sub(firstSeen[f.Run]))
					}
				}
			}
			// It holds its reservations and waits on nobody now: applying
			// (not "waiting", which Status and Why would report through the
			// preflight and re-plan).
			if _, err := e.Store.UpdateRun(ctx, a.run.ID, nil, func(r *Run) error {
				r.Status = StatusApplying
				r.Reason = ""
				return nil
			}, m); err != nil {
				a.abort(ctx, StatusFailed, fmt.Sprintf("recording reservations: %v", err), StatusPlanned)
				return AcquireResult{}, fmt.Errorf("recording reservations of run %s: %w", a.run.ID, err)
			}
			return res, nil
		}
		var ce *ConflictError
		if !errors.As(err, &ce) {
			a.abort(ctx, StatusFailed, fmt.Sprintf("acquiring reservations: %v", err), StatusPlanned)
			return AcquireResult{}, fmt.Errorf("acquiring reservations for run %s: %w", a.run.ID, err)
		}
		// Record each newly seen blocker once: who, which PR, which addresses.
		var fresh []Marker
		for _, b := range ce.Blockers {
			if _, ok := firstSeen[b.Run]; ok {
				continue
			}
			firstSeen[b.Run] = e.now()
			fresh = append(fresh, Marker{Kind: MarkerWaited, Other: b.Run, OtherPR: b.PR, Addresses: b.Addresses})
			a.facts = append(a.facts, Fact{Kind: FactWaitedFor, Run: b.Run, PR: b.PR, Addresses: b.Addresses})
		}
		if a.in.Wait <= 0 || !e.now().Before(deadline) {
			reason := "reservations conflict: " + blockersText(ce.Blockers)
			if waited {
				reason = fmt.Sprintf("waited %s for reservations; %s", e.now().Sub(started).Round(100*time.Millisecond), reason)
			}
			a.abort(ctx, StatusRefused, reason, StatusPlanned, fresh...)
			return AcquireResult{}, fmt.Errorf("run %s: %w", a.run.ID, ce)
		}
		if len(fresh) > 0 {
			if _, err := e.Store.UpdateRun(ctx, a.run.ID, nil, func(r *Run) error {
				r.Status = StatusWaiting
				r.Reason = "waiting: " + blockersText(ce.Blockers)
				return nil
			}, fresh...); err != nil {
				a.abort(ctx, StatusFailed, fmt.Sprintf("recording wait: %v", err), StatusPlanned)
				return AcquireResult{}, fmt.Errorf("recording wait of run %s: %w", a.run.ID, err)
			}
			if a.in.OnWait != nil {
				a.in.OnWait(ce.Blockers)
			}
		}
		waited = true
		t := time.NewTimer(e.poll())
		select {
		case <-ctx.Done():
			t.Stop()
			a.abort(ctx, StatusInterrupted, "interrupted while waiting for reservations", StatusPlanned)
			return AcquireResult{}, fmt.Errorf("run %s waiting for reservations: %w", a.run.ID, ctx.Err())
		case <-t.C:
		}
	}
}

// renew extends the run's lease every lease/3 until ctx ends.
func (e *Engine) renew(ctx context.Context, run string) {
	every := e.lease() / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			err := e.Store.Renew(ctx, run, e.lease())
			switch {
			case err == nil || ctx.Err() != nil:
			case errors.Is(err, ErrLeaseLost):
				// Released by the commit, or expired: the commit's own
				// reservation check decides what that means.
				e.log().Debug("reservations no longer held", "run", run)
				return
			default:
				e.log().Warn("renewing reservations", "run", run, "err", err)
			}
		}
	}
}

// preflight classifies the since-plan versions and decides (DESIGN.md apply
// step 3, ADR D3/D4/D8).
func (a *applier) preflight(ctx context.Context) error {
	e := a.e
	env := a.plan.Envelope
	versions, err := e.Store.VersionsAfter(ctx, a.state.Name, env.SourceSerial)
	if err != nil {
		a.abort(ctx, StatusFailed, fmt.Sprintf("reading since-plan versions: %v", err), StatusPlanned)
		return fmt.Errorf("reading versions after %d of state %s: %w", env.SourceSerial, a.state.Name, err)
	}
	a.sp = ClassifySincePlan(a.plan.ID, env.SourceSerial, env.Footprint, versions)
	sum := a.sp.Summary()
	if err := e.Store.AddMarkers(ctx, a.run.ID, Marker{Kind: MarkerPreflight, SincePlan: &sum}); err != nil {
		a.abort(ctx, StatusFailed, fmt.Sprintf("recording preflight: %v", err), StatusPlanned)
		return fmt.Errorf("recording preflight of run %s: %w", a.run.ID, err)
	}
	bad := a.sp.Of(ClassWriteChanged)
	if a.in.Strict {
		bad = append(bad, a.sp.Of(ClassReadChanged)...)
	}
	if len(bad) > 0 {
		serr := &StaleError{Run: a.run.ID, PlanRun: a.plan.ID, Entries: bad, Strict: a.in.Strict}
		var ms []Marker
		for _, v := range bad {
			ms = append(ms, Marker{Kind: MarkerStalenessFailed, Serial: v.Serial, Other: v.Run, OtherPR: v.PR, Class: v.Class, Addresses: v.Addresses, Reason: v.Class.Label()})
		}
		sp := a.sp
		a.abortWith(ctx, StatusRefused, serr.Error(), StatusStale, func(r *Run) { r.SincePlan = &sp }, ms...)
		return fmt.Errorf("applying run %s: %w", a.run.ID, serr)
	}
	independent := a.sp.Of(ClassIndependent)
	a.facts = append(a.facts, Fact{
		Kind: FactStalenessPassed, Serials: Serials(independent),
		SourceSerial: env.SourceSerial, HeadSerial: a.sp.HeadSerial,
	})
	if rc := a.sp.Of(ClassReadChanged); len(rc) > 0 {
		return a.replan(ctx, rc)
	}
	return e.Store.AddMarkers(ctx, a.run.ID, Marker{Kind: MarkerStalenessPassed, SincePlan: &sum})
}

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
		a.abort(ctx, StatusFailed, err.Error(), StatusPlanned)
		return err
	}
	snapshot, err := e.Store.Snapshot(ctx, st.Name, st.HeadSerial)
	if err != nil {
		a.abort(ctx, StatusFailed, fmt.Sprintf("reading head for re-plan: %v", err), StatusPlanned)
		return fmt.Errorf("reading head %d of state %s: %w", st.HeadSerial, st.Name, err)
	}
	now := e.now()
	rp := Run{
		ID: NewRunID(), Kind: KindPlan, State: st.Name, Actor: a.plan.Actor, Holder: e.Holder,
		Status: StatusPlanning, PR: a.plan.PR, CreatedAt: now, UpdatedAt: now, ReplanOf: a.plan.ID,
	}
	if err := e.Store.CreateRun(ctx, rp); err != nil {
		a.abort(ctx, StatusFailed, fmt.Sprintf("creating re-plan run: %v", err), StatusPlanned)
		return fmt.Errorf("creating re-plan run for %s: %w", a.plan.ID, err)
	}
	env := a.plan.Envelope
	res, err := e.Terraform.Plan(ctx, PlanRequest{
		Run: rp.ID, Config: a.pf.config, Targets: env.Scope.Targets, VarFiles: env.Scope.VarFiles, Replace: env.Scope.Replace,
		Snapshot: snapshot, Progress: a.in.Progress,
	})
	if err != nil {
		e.failRun(ctx, rp.ID, nil, fmt.Sprintf("terraform plan: %v", err))
		a.abort(ctx, StatusFailed, fmt.Sprintf("re-plan %s failed: %v", rp.ID, err), StatusPlanned)
		return fmt.Errorf("re-planning %s against head %d: %w", a.plan.ID, st.HeadSerial, err)
	}
	if rp, err = e.storePlan(ctx, rp, st, env.Scope, res, env.PR, env.CommitSHA, a.plan.ID); err != nil {
		a.abort(ctx, StatusFailed, fmt.Sprintf("storing re-plan: %v", err), StatusPlanned)
		return err
	}
	cmp := CompareReplan(a.pf.intent, res.Intent, env.Footprint)
	serials := Serials(rc)
	versions := "version"
	if len(serials) > 1 {
		versions += "s"
	}
	versions += " " + joinSerials(serials)
	outside := ""
	if n := len(cmp.Outside); n > 0 {
		outside = fmt.Sprintf("; it also changes %d instance(s) outside this plan's footprint (%s), where the configuration differs from the head: not applied", n, abbreviate(cmp.Outside, 5))
	}
	changed := true
	switch {
	case len(cmp.Read) > 0:
		reason := fmt.Sprintf("re-plan %s against head %d would also change %s, which this plan reads (changed in %s): the configuration is behind the head there and would revert that change; update it with the head and plan again",
			rp.ID, st.HeadSerial, abbreviate(cmp.Read, 8), versions)
		m := Marker{Kind: MarkerReplanned, Other: rp.ID, Serial: st.HeadSerial, IntentChanged: &changed, Class: ClassReadChanged,
			Addresses: instanceAddresses(cmp.Read), Reason: reason, Extra: outsideExtra(cmp.Outside)}
		e.closeReplan(ctx, rp.ID, StatusSuperseded, "not applicable: it would revert changes of newer versions to what plan "+a.plan.ID+" reads")
		sp := a.sp
		a.abortWith(ctx, StatusRefused, reason, StatusStale, func(r *Run) { r.SincePlan = &sp }, m)
		return fmt.Errorf("applying run %s: %w: %s", a.run.ID, ErrIntentChanged, reason)
	case len(cmp.Write) > 0:
		reason := fmt.Sprintf("re-plan %s against head %d plans something else for %s (plan input changed in %s)%s; review plan %s and apply it",
			rp.ID, st.HeadSerial, abbreviate(cmp.Write, 8), versions, outside, rp.ID)
		m := Marker{Kind: MarkerReplanned, Other: rp.ID, Serial: st.HeadSerial, IntentChanged: &changed, Class: ClassWriteChanged,
			Addresses: instanceAddresses(cmp.Write), Reason: reason, Extra: outsideExtra(cmp.Outside)}
		sp := a.sp
		a.abortWith(ctx, StatusRefused, reason, StatusSuperseded, func(r *Run) { r.SincePlan = &sp }, m)
		return fmt.Errorf("applying run %s: %w: %s", a.run.ID, ErrIntentChanged, reason)
	}
	e.closeReplan(ctx, rp.ID, StatusSuperseded, fmt.Sprintf("re-check for apply run %s: intent unchanged; the reviewed plan %s goes ahead", a.run.ID, a.plan.ID))
	a.facts = append(a.facts, Fact{Kind: FactReplanUnchanged, Run: rp.ID, Serials: serials, SourceSerial: env.SourceSerial, HeadSerial: st.HeadSerial})
	unchanged := false
	sum := a.sp.Summary()
	return e.Store.AddMarkers(ctx, a.run.ID,
		Marker{Kind: MarkerReplanned, Other: rp.ID, Serial: st.HeadSerial, IntentChanged: &unchanged, Extra: outsideExtra(cmp.Outside),
			Reason: fmt.Sprintf("plan input changed in %s; re-plan %s against head %d plans the same for the reviewed write set and changes nothing this plan reads: applying the reviewed plan%s", versions, rp.ID, st.HeadSerial, outside)},
		Marker{Kind: MarkerStalenessPassed, SincePlan: &sum})
}

// closeReplan sets a re-plan run's final status with a reason.
func (e *Engine) closeReplan(ctx context.Context, id string, s RunStatus, reason string) {
	bctx, cancel := background(ctx)
	defer cancel()
	if _, err := e.Store.UpdateRun(bctx, id, []RunStatus{StatusPlanned}, func(r *Run) error {
		r.Status = s
		r.Reason = reason
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

// abbreviate joins up to n items and says how many more there are.
func abbreviate(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:n], ", "), len(items)-n)
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

func joinSerials(s []int64) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, ", ")
}

func blockersText(bs []Blocker) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		who := "run " + b.Run
		if b.PR != nil {
			who += " (" + b.PR.String() + ")"
		}
		parts[i] = fmt.Sprintf("%s holds %s", who, strings.Join(b.Addresses.Strings(), ", "))
	}
	return strings.Join(parts, "; ")
}

func reservedAddresses(rs []Reservation) AddressSet {
	out := make([]Address, len(rs))
	for i, r := range rs {
		out[i] = r.Address
	}
	return NewAddressSet(out...)
}

// runPRs looks up the pull requests of the runs holding reservations.
func (a *applier) runPRs(ctx context.Context, others []Reservation) map[string]*PullRequest {
	out := map[string]*PullRequest{}
	for _, r := range others {
		if _, ok := out[r.Run]; ok {
			continue
		}
		out[r.Run] = nil
		if o, err := a.e.Store.GetRun(ctx, r.Run); err == nil {
			out[r.Run] = o.PR
		}
	}
	return out
}

// concurrencyFacts explains why this run may hold its reservations beside
// every other run holding some on the state at acquisition time (ADR D2):
// disjoint write sets, and the read/read addresses they share.
func concurrencyFacts(fp Footprint, others []Reservation, prs map[string]*PullRequest) []Fact {
	byRun := map[string][]Reservation{}
	var order []string
	for _, r := range others {
		if _, ok := byRun[r.Run]; !ok {
			order = append(order, r.Run)
		}
		byRun[r.Run] = append(byRun[r.Run], r)
	}
	ownRead := fp.Read.Minus(fp.Write)
	var out []Fact
	for _, id := range order {
		var w, r []Address
		for _, res := range byRun[id] {
			if res.Mode == ModeWrite {
				w = append(w, res.Address)
			} else {
				r = append(r, res.Address)
			}
		}
		otherWrite := NewAddressSet(w...)
		out = append(out, Fact{Kind: FactDisjointWrites, Run: id, PR: prs[id], OwnWrite: fp.Write, OtherWrite: otherWrite})
		if shared := ownRead.Overlapping(NewAddressSet(r...)); len(shared) > 0 {
			out = append(out, Fact{Kind: FactReadRead, Run: id, PR: prs[id], Addresses: shared})
		}
	}
	return out
}

// abort ends the apply run before Terraform ran: status and reason with
// markers on the run, the plan returned to planStatus (planned: it may be
// retried; stale/superseded: it may not), reservations released.
func (a *applier) abort(ctx context.Context, status RunStatus, reason string, planStatus RunStatus, markers ...Marker) {
	a.abortWith(ctx, status, reason, planStatus, nil, markers...)
}

func (a *applier) abortWith(ctx context.Context, status RunStatus, reason string, planStatus RunStatus, update func(*Run), markers ...Marker) {
	e := a.e
	bctx, cancel := background(ctx)
	defer cancel()
	if ctx.Err() != nil && status != StatusRefused {
		status = StatusInterrupted
	}
	markers = append(markers, Marker{Kind: MarkerFailed, Reason: reason})
	if _, err := e.Store.UpdateRun(bctx, a.run.ID, nil, func(r *Run) error {
		r.Status = status
		r.Reason = reason
		r.AllowedBecause = nil
		t := e.now()
		r.FinishedAt = &t
		if update != nil {
			update(r)
		}
		return nil
	}, markers...); err != nil {
		e.log().Error("recording end of apply run", "run", a.run.ID, "err", err)
	}
	e.releasePlans(bctx, a, planStatus, reason)
	if err := e.Store.Release(bctx, a.run.ID); err != nil {
		e.log().Error("releasing reservations", "run", a.run.ID, "err", err)
	}
}

// releasePlans hands the reviewed plan back in status s: planned (it may
// be applied again), or stale, superseded or failed (it may not: the plan's
// Reason then says which apply run found what).
func (e *Engine) releasePlans(ctx context.Context, a *applier, s RunStatus, reason string) {
	if s == "" {
		return // the plan was never claimed by this run
	}
	// ApplyRun keeps naming the last attempt, so `kl why PLAN` can say why
	// it did not go through; the status says whether it may be retried.
	if _, err := e.Store.UpdateRun(ctx, a.plan.ID, []RunStatus{StatusApplying}, func(r *Run) error {
		r.Status = s
		if s != StatusPlanned {
			r.Reason = fmt.Sprintf("apply run %s: %s", a.run.ID, reason)
		}
		return nil
	}); err != nil {
		e.log().Error("returning plan", "run", a.plan.ID, "status", s, "err", err)
	}
}
