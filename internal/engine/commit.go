package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// applyAndCommit runs Terraform on the snapshot the applied plan was made
// against (the reviewed plan's, or its re-plan's: the head it re-planned
// against — replan.go), compares what changed with that plan, and commits (docs/design.md apply steps 4–6), in three
// steps: run Terraform (runTerraform), record what it applied
// (readResult), commit — or, when the reservations lapsed meanwhile, the
// lease-lost commit (commitOrLeaseLost).
func (a *applier) applyAndCommit(ctx context.Context) (*ApplyOutcome, error) {
	base, baseState, err := a.baseSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	res, applyErr, err := a.runTerraform(ctx, base)
	if err != nil {
		return nil, err
	}
	// What Terraform said it did is kept whatever comes next (a kill, a
	// failure, a commit), with a context a Ctrl-C does not cancel.
	lctx, lcancel := background(ctx)
	a.storeApplyLog(lctx, res)
	lcancel()
	if terraformKilled(applyErr) {
		return a.fenceKilled(ctx, applyErr) // what it wrote is not what it did
	}
	// From here on ctx may be cancelled (Ctrl-C): finish with a context that
	// is not, so that what Terraform wrote is committed and reservations are
	// released exactly once.
	cctx, cancel := background(ctx)
	defer cancel()
	end := terraformEnd(ctx, applyErr)
	if res == nil || res.State == nil {
		// Terraform wrote nothing (it did not start, or failed in init).
		planStatus := StatusPlanned
		if applyErr == nil {
			// Only another engine.Terraform than the adapter can do this:
			// Terraform says it applied, so the plan is not applied again.
			applyErr = errors.New("terraform apply returned neither a state nor an error")
			end, planStatus = Failed(StepReadResult, applyErr), StatusFailed
		}
		return nil, a.fail(ctx, planStatus, end, fmt.Errorf("applying run %s: %w", a.run.ID, applyErr))
	}
	result, spec, err := a.readResult(ctx, cctx, baseState, res.State, end)
	if err != nil {
		return nil, err
	}
	if len(spec.changed) == 0 && applyErr != nil {
		// Nothing was applied: the plan may be applied again.
		return nil, a.fail(ctx, StatusPlanned, end, fmt.Errorf("applying run %s: %w", a.run.ID, applyErr))
	}
	applied := Marker{Kind: MarkerApplied, Count: len(spec.changed), Addresses: spec.changed, End: end}
	if err := a.e.Store.AddMarkers(cctx, a.run.ID, applied); err != nil {
		a.e.log().Error("recording applied marker", "run", a.run.ID, "err", err)
	}
	return a.commitOrLeaseLost(ctx, cctx, baseState, result, res.State, spec, applyErr)
}

// baseSnapshot reads and parses the snapshot the applied plan was made from
// (the one Terraform applies to: a saved plan applies only to the state it
// was made against, docs/terraform.md "Staleness").
func (a *applier) baseSnapshot(ctx context.Context) ([]byte, *tfstate.State, error) {
	serial := a.pf.run.Envelope.SourceSerial
	base, err := a.e.planBase(ctx, a.state.Name, serial, a.pf.run.Envelope)
	if err != nil {
		return nil, nil, a.fail(ctx, StatusPlanned, Failed(StepReadSnapshot, err).withSerial(serial),
			fmt.Errorf("reading snapshot %d of state %s: %w", serial, a.state.Name, err))
	}
	baseState, err := tfstate.Parse(base)
	if err != nil {
		return nil, nil, a.fail(ctx, StatusPlanned, Failed(StepParseSnapshot, err).withSerial(serial),
			fmt.Errorf("parsing snapshot %d of state %s: %w", serial, a.state.Name, err))
	}
	return base, baseState, nil
}

// runTerraform records the "apply-started" marker, then applies the saved
// plan to base. applyErr is Terraform's failure (what it wrote, if
// anything, is in res); err is the failure to start it at all (the run has
// ended then).
func (a *applier) runTerraform(ctx context.Context, base []byte) (res *ApplyResult, applyErr, err error) {
	// Say that Terraform runs before it does, in the run's own update: a
	// run the lease sweep ended meanwhile does not start Terraform, and
	// every story can tell whether Terraform ran (and a lapsed one may
	// have changed infrastructure: Recover).
	serial := a.pf.run.Envelope.SourceSerial
	if _, err := a.e.Store.UpdateRun(ctx, a.run.ID, []RunStatus{StatusApplying}, func(*Run) error { return nil },
		Marker{Kind: MarkerApplyStarted, Serial: serial, Other: a.replanApplied()}); err != nil {
		err = leaseLost(a.run.ID, err)
		return nil, nil, a.fail(ctx, StatusPlanned, Failed(StepRecordApplyStart, err),
			fmt.Errorf("recording the start of terraform apply for run %s: %w", a.run.ID, err))
	}
	a.started = true
	res, applyErr = a.e.Terraform.Apply(ctx, ApplyRequest{Run: a.run.ID, PlanFile: a.pf.planFile, Config: a.pf.config, Snapshot: base,
		Progress: a.in.Progress, Checkpoint: a.checkpoint(ctx),
		Parallelism: a.pf.run.Envelope.Scope.Options.Parallelism, Vars: a.pf.vars})
	if res != nil && len(res.Notes) > 0 {
		// Recorded whatever Terraform did, also after a cancellation.
		if err := a.e.Store.AddMarkers(context.WithoutCancel(ctx), a.run.ID, providerMarkers(res.Notes)...); err != nil {
			a.e.log().Error("recording providers markers", "run", a.run.ID, "err", err)
		}
	}
	return res, applyErr, nil
}

// terraformEnd is how a Terraform apply that returned applyErr ended the
// run: nil when it succeeded, interrupted when ctx was cancelled, else
// Terraform's failure (Failed).
func terraformEnd(ctx context.Context, applyErr error) *End {
	switch {
	case applyErr == nil:
		return nil
	case errors.Is(applyErr, context.Canceled) || ctx.Err() != nil:
		e := &End{Cause: CauseInterrupted, Phase: PhaseTerraformApply}
		var tf TerraformFailer
		if errors.As(applyErr, &tf) {
			e.Terraform = tf.TerraformFailure() // which command it stopped in
		}
		return e
	}
	return Failed("", applyErr)
}

// readResult keeps the state Terraform wrote as an artifact, parses it and
// compares it with the plan: the commit spec of a normal commit.
func (a *applier) readResult(ctx, cctx context.Context, baseState *tfstate.State, state []byte, end *End) (*tfstate.State, commitSpec, error) {
	// Keep exactly what Terraform wrote before anything else can fail; a
	// failure's end names the artifact only when it was kept.
	kept := ArtifactApplyResult
	if err := a.e.Store.PutArtifact(cctx, a.run.ID, ArtifactApplyResult, state); err != nil {
		a.e.log().Error("storing apply result", "run", a.run.ID, "err", err)
		kept = ""
	}
	result, err := tfstate.Parse(state)
	if err != nil {
		return nil, commitSpec{}, a.fail(ctx, StatusFailed, Failed(StepParseResult, err).withArtifact(kept),
			fmt.Errorf("parsing the state written by run %s: %w", a.run.ID, err))
	}
	// What Terraform only stored anew (a provider's raised schema version)
	// is no change: not applied, not a deviation (ADR 0038).
	planned := a.pf.run.Envelope.Footprint.Write
	upgraded := a.upgradedBase()
	changed, err := changedByRun(baseState, upgraded, result, planned)
	if err != nil {
		return nil, commitSpec{}, a.fail(ctx, StatusFailed, Failed(StepReadChanged, err), fmt.Errorf("reading addresses changed by run %s: %w", a.run.ID, err))
	}
	tainted, err := parseAddresses(result.Tainted())
	if err != nil {
		return nil, commitSpec{}, a.fail(ctx, StatusFailed, Failed(StepReadTainted, err), fmt.Errorf("reading addresses tainted by run %s: %w", a.run.ID, err))
	}
	status := StatusApplied
	if end != nil {
		status = StatusFailed
		if end.Cause == CauseInterrupted {
			status = StatusInterrupted
		}
	}
	return result, commitSpec{
		written: planned, status: status, end: end, partial: end != nil, requireRes: true, changed: changed, kept: kept, upgraded: upgraded,
		deviation: Deviation{Unplanned: changed.Minus(planned), Unchanged: planned.Minus(changed), Tainted: tainted.Overlapping(changed)},
	}, nil
}

// changedByRun is what a run changed between its plan's base and its
// result, less Terraform's re-encodings (ADR 0038): resource-level
// addresses, and instances for each resource the write set names at
// instance level (ADR 0065), so that the deviation compares like with like.
// upgraded may be nil.
func changedByRun(base, upgraded, result *tfstate.State, planned AddressSet) (AddressSet, error) {
	ch, err := tfstate.ChangedInstances(base, result, planned.Strings())
	if err != nil {
		return nil, err
	}
	re, err := tfstate.ReencodedInstances(base, upgraded, result, planned.Strings())
	if err != nil {
		return nil, err
	}
	return parseAddresses(withoutStrings(ch, re))
}

// upgradedBase is the plan's base snapshot as Terraform upgraded it to the
// providers' current schemas before refreshing (UpgradedSnapshotReader),
// which tells Terraform's re-encodings from changes. Best effort: nil — every
// difference then counts, as it did before — when the Terraform cannot
// read it, or the plan file has none or a damaged one (logged).
func (a *applier) upgradedBase() *tfstate.State {
	r, ok := a.e.Terraform.(UpgradedSnapshotReader)
	if !ok {
		return nil
	}
	b, err := r.UpgradedSnapshot(a.pf.planFile)
	if err != nil || b == nil {
		if err != nil {
			a.e.log().Warn("reading the upgraded snapshot of the plan (re-encodings count as changes)", "run", a.run.ID, "err", err)
		}
		return nil
	}
	s, err := tfstate.ParsePrevRun(b)
	if err != nil {
		a.e.log().Warn("parsing the upgraded snapshot of the plan (re-encodings count as changes)", "run", a.run.ID, "err", err)
		return nil
	}
	return s
}

// withoutStrings is the sorted list a less the members of b (both sorted).
func withoutStrings(a, b []string) []string {
	out := a[:0:0]
	for _, s := range a {
		if _, found := slices.BinarySearch(b, s); !found {
			out = append(out, s)
		}
	}
	return out
}

// commitOrLeaseLost commits spec; when the run's reservations expired
// before the commit (ErrLeaseLost), it commits again by the lease-lost
// rule: merge only what the head has not changed since the plan and no
// other live run holds, keep the head elsewhere and say so (the version is
// committed even when the head keeps every address: it is the provenance
// of an apply that ran, and its deviation names what no version holds). The
// raw result (state) is kept as an artifact: nothing Terraform wrote is
// dropped silently — also when `kl run recover` committed the run
// meanwhile (recoveredMeanwhile).
func (a *applier) commitOrLeaseLost(ctx, cctx context.Context, baseState, result *tfstate.State, state []byte, spec commitSpec, applyErr error) (*ApplyOutcome, error) {
	e := a.e
	v, err := a.commit(cctx, baseState, result, spec)
	leaseLost := errors.Is(err, ErrLeaseLost)
	if leaseLost {
		spec = spec.afterLeaseLost(applyErr == nil)
		var held []Reservation
		if spec.keep, held, err = a.heldByOthers(cctx, spec.changed); err == nil {
			serial := a.pf.run.Envelope.SourceSerial
			if spec.since, err = e.Store.VersionsAfter(cctx, a.state.Name, serial); err != nil {
				err = fmt.Errorf("reading versions after %d of state %s: %w", serial, a.state.Name, err)
			}
		}
		if err == nil {
			spec.held = held
			v, err = a.commit(cctx, baseState, result, spec)
		}
	}
	if errors.Is(err, ErrConflict) {
		if out, lerr := a.recoveredMeanwhile(cctx, state, applyErr); out != nil {
			return out, lerr // `kl run recover` committed it meanwhile (ADR 0071)
		}
	}
	if err != nil {
		return nil, a.fail(ctx, StatusFailed, Failed(StepCommit, err).withArtifact(spec.kept), fmt.Errorf("committing run %s: %w", a.run.ID, err))
	}
	out := &ApplyOutcome{Version: v}
	if out.Run, err = e.Store.GetRun(cctx, a.run.ID); err != nil {
		return nil, fmt.Errorf("reading run %s: %w", a.run.ID, err)
	}
	if applyErr != nil {
		err = fmt.Errorf("partial result committed as version %d: %w", v.Serial, applyErr)
	}
	if leaseLost {
		// The run failed even when Terraform did not: say so to the caller.
		lost := Errorf(ErrLeaseLost, "the reservations expired before the commit; version %d holds only what the head had not changed since the plan", v.Serial)
		if d := v.Provenance.Deviation; d != nil && len(d.Lost) > 0 {
			lost = fmt.Errorf("%w; the head kept %d of the addresses this apply changed: what it did there is in no version — check the real objects, then import or remove it (`kl run show %s` names them)",
				lost, len(d.Lost), a.run.ID)
		}
		if err != nil {
			lost = fmt.Errorf("%w; %w", lost, err)
		}
		err = lost
	}
	return out, err
}

// afterLeaseLost is spec for the lease-lost commit: nothing merged
// unconditionally, no reservations required, the run failed with a
// lease-lost end (terraformDone: Terraform itself finished) that keeps how
// Terraform ended.
func (spec commitSpec) afterLeaseLost(terraformDone bool) commitSpec {
	spec.written, spec.requireRes, spec.status = nil, false, StatusFailed
	spec.leaseLost = true
	spec.end = &End{Cause: CauseLeaseLost, TerraformDone: terraformDone, Then: spec.end}
	return spec
}

// checkpoint returns the ApplyRequest.Checkpoint of the run: it stores the
// state Terraform has written so far as ArtifactApplyCheckpoint,
// overwriting the last one. Best effort: a failure is logged and the apply
// goes on (the result is stored and committed when Terraform returns; the
// checkpoint only matters if this process dies first). It stores also
// after ctx is cancelled: an interrupted Terraform still writes.
func (a *applier) checkpoint(ctx context.Context) func([]byte) {
	return func(state []byte) {
		bctx, cancel := background(ctx)
		defer cancel()
		if err := a.e.Store.PutArtifact(bctx, a.run.ID, ArtifactApplyCheckpoint, state); err != nil {
			a.e.log().Warn("storing apply checkpoint (the apply goes on)", "run", a.run.ID, "bytes", len(state), "err", err)
		}
	}
}

// heldByOthers returns the addresses of changed that another run holds a
// live reservation on (any mode, prefixes included), and those
// reservations.
func (a *applier) heldByOthers(ctx context.Context, changed AddressSet) ([]string, []Reservation, error) {
	res, err := a.e.Store.Reservations(ctx, a.state.Name)
	if err != nil {
		return nil, nil, fmt.Errorf("reading reservations of state %s: %w", a.state.Name, err)
	}
	var out []string
	var held []Reservation
	for _, c := range changed {
		for _, r := range res {
			if r.Run != a.run.ID && c.Overlaps(r.Address) {
				out = append(out, string(c))
				held = append(held, r)
				break
			}
		}
	}
	return out, held, nil
}

// lostWrites says, for each address the head kept (kept) in a commit after
// the run's lease lapsed, why: the last version since the plan that changed
// it (among since, with its run), or else the run holding it (held).
func lostWrites(kept AddressSet, since []Version, held []Reservation) []LostWrite {
	var out []LostWrite
	for _, k := range kept {
		l := LostWrite{Address: k}
		for i := len(since) - 1; i >= 0; i-- {
			v := since[i]
			if len(v.Changed.Overlapping(AddressSet{k})) > 0 {
				l.Serial, l.Run, l.Actor, l.PR = v.Serial, v.Provenance.Run, v.Provenance.Actor, v.Provenance.PR
				break
			}
		}
		if l.Serial == 0 {
			for _, r := range held {
				if k.Overlaps(r.Address) {
					l.Run, l.Held = r.Run, true
					break
				}
			}
		}
		out = append(out, l)
	}
	return out
}

// commitSpec says how a commit merges and ends the run.
type commitSpec struct {
	// written are merged unconditionally (the write set we hold
	// reservations on); every other change is merged only where the head
	// still equals the plan's base and it is not in keep.
	written AddressSet
	keep    []string
	// changed are the addresses Terraform changed against the base
	// (re-encodings are not changes).
	changed AddressSet
	// upgraded is the base as Terraform upgraded it (applier.upgradedBase),
	// or nil: the merge's tfstate.MergeInput.Upgraded.
	upgraded *tfstate.State
	// kept names the artifact holding what Terraform wrote ("" when
	// storing it failed).
	kept string
	// deviation is what the apply changed against the plan; Kept and
	// Overwritten are added by the merge.
	deviation  Deviation
	status     RunStatus
	end        *End // how the run ends (nil: applied)
	partial    bool // Terraform failed or was interrupted part-way
	requireRes bool // fail with ErrLeaseLost unless the run still holds reservations
	// leaseLost marks the commit after the run's reservations expired:
	// the deviation's Lost says why the head kept each address, from since
	// (the versions after the plan's source serial) and held (other runs'
	// reservations on changed addresses). A recovery fills Lost the same
	// way.
	leaseLost bool
	since     []Version
	held      []Reservation
	// recovered makes the commit a recovery (Engine.Recover) of a run that
	// ended without committing: the run keeps its status, end and finish
	// time and gains only CommittedSerial; this marker (Serial and Count set
	// here) is appended instead of a "failed" one; the plan is left to the
	// caller.
	recovered *Marker
	// lateAfter, in a recovery, is the version an earlier recovery of the
	// run committed: this one commits the run's late result (LateResult,
	// ADR 0071) — a second commit of the run, allowed only while the run
	// still names that version — else 0.
	lateAfter int64
}

// commit writes version head+1: the snapshot-merge of result into the head
// (docs/terraform.md "Snapshot-merge"), with provenance, markers and the run's
// final status, in one store transaction (mergeCommit decides it).
func (a *applier) commit(ctx context.Context, base, result *tfstate.State, spec commitSpec) (*Version, error) {
	e := a.e
	planStatus := StatusApplied
	if spec.status != StatusApplied {
		planStatus = StatusFailed
	}
	m := mergeInput{run: a.run, plan: a.plan.ID, reviewed: a.plan.Envelope, applied: a.replanApplied(), env: a.pf.run.Envelope,
		base: base, result: result, spec: spec, now: e.now}
	v, err := e.Store.Commit(ctx, CommitRequest{
		State: a.state.Name, Run: a.run.ID, RequireReservations: spec.requireRes,
		Merge: m.merge, MergeReads: mergeReads(base, result, spec.written),
	})
	if err != nil {
		return nil, err
	}
	if spec.recovered == nil {
		e.finishPlans(ctx, a, planStatus, v.Serial, spec.partial)
	}
	return &v, nil
}

// mergeReads is the CommitRequest.MergeReads of a snapshot-merge of
// result over base with written: nil (the whole head) when the merge would
// refuse written, which the merge then says.
func mergeReads(base, result *tfstate.State, written AddressSet) []Address {
	reads, err := tfstate.MergeReads(base, result, written.Strings())
	if err != nil {
		return nil
	}
	out := make([]Address, len(reads))
	for i, r := range reads {
		out[i] = Address(r)
	}
	return out
}

// mergeInput is what a commit merges: the apply run, its reviewed plan
// (id, envelope), the re-plan Terraform applied in its place ("" for the
// reviewed plan itself) and the envelope of the plan Terraform applied,
// the snapshot Terraform applied to (base) and what it wrote (result), the
// spec, and the clock for the run's end time.
type mergeInput struct {
	run      Run
	plan     string
	reviewed *Envelope
	applied  string
	env      *Envelope
	base     *tfstate.State
	result   *tfstate.State
	spec     commitSpec
	now      func() time.Time
}

// mode is the commit mode of what the applied plan (env) produced: delta
// for a native-lane plan, which applied to its slice and commits its
// changed entries only (ADR 0033 D5), snapshot-merge otherwise.
func (m mergeInput) mode() CommitMode {
	if m.env != nil && m.env.Lane == LaneNative {
		return CommitDelta
	}
	return CommitSnapshotMerge
}

// merge is the CommitRequest.Merge of a commit: a pure function of m and
// the head (no I/O) that snapshot-merges the result into head as version
// head+1 and says what the store writes with it — provenance, markers, the
// run's end.
func (m mergeInput) merge(head Version, snapshot []byte) (CommitResult, error) {
	spec := m.spec
	headState, err := tfstate.Parse(snapshot)
	if err != nil {
		return CommitResult{}, fmt.Errorf("parsing head %d: %w", head.Serial, err)
	}
	serial := head.Serial + 1
	merged, rep, err := tfstate.MergeWith(tfstate.MergeInput{Head: headState, Base: m.base, Upgraded: spec.upgraded, Result: m.result,
		Written: spec.written.Strings(), Keep: spec.keep, Serial: serial})
	if err != nil {
		return CommitResult{}, fmt.Errorf("merging into head %d: %w", head.Serial, err)
	}
	doc, err := merged.Marshal()
	if err != nil {
		return CommitResult{}, fmt.Errorf("encoding version %d: %w", serial, err)
	}
	changed, err := parseAddresses(rep.Changed)
	if err != nil {
		return CommitResult{}, err
	}
	reencoded, err := parseAddresses(rep.Reencoded)
	if err != nil {
		return CommitResult{}, err
	}
	d := spec.deviation
	if d.Kept, err = parseAddresses(rep.Kept); err != nil {
		return CommitResult{}, err
	}
	if d.Overwritten, err = parseAddresses(rep.Overwritten); err != nil {
		return CommitResult{}, err
	}
	if spec.leaseLost || spec.recovered != nil {
		// Both merge only what the head has not changed since the
		// snapshot Terraform applied to: say why each kept address was
		// kept, and that this apply's change to it is in no version.
		d.Lost = lostWrites(d.Kept, spec.since, spec.held)
	}
	end := committedEnd(spec.end, serial)
	if spec.leaseLost {
		e := *end
		e.Serial, e.Lost, e.NoChange = serial, d.Lost, len(changed) == 0
		end = &e
	}
	prov := Provenance{
		Run: m.run.ID, PlanRun: m.plan,
		SourceSerial: m.reviewed.SourceSerial, CommittedSerial: serial,
		PlanDigest: m.reviewed.PlanDigest, PlannedAtMerge: m.reviewed.PlannedAtMerge, Mode: m.mode(),
		Exact: d.empty(), Partial: spec.partial, Actor: m.run.Actor, PR: m.run.PR, Reencoded: reencoded,
	}
	if m.applied != "" {
		prov.AppliedPlanRun, prov.AppliedPlanDigest, prov.AppliedSourceSerial = m.applied, m.env.PlanDigest, m.env.SourceSerial
	}
	lift := LiftCommitted
	if spec.recovered != nil {
		lift = LiftRecovered
	}
	return CommitResult{
		Snapshot: doc, Changed: changed, Resources: merged.ResourceCount(), Provenance: prov.withDeviation(d),
		UpdateRun: m.updateRun(serial, end),
		Markers:   m.markers(head.Serial, serial, len(changed), d, end),
		Lift:      lift,
	}, nil
}

// committedEnd is end as a commit of version serial stores it: an
// interruption (alone, or what ended Terraform in a lease-lost commit)
// names the version that holds what Terraform wrote, so that its words
// can say it was committed — and an interruption without one says it was
// not.
func committedEnd(end *End, serial int64) *End {
	if end == nil {
		return nil
	}
	e := *end
	if e.Cause == CauseInterrupted {
		e.Serial = serial
	}
	e.Then = committedEnd(e.Then, serial)
	return &e
}

// withDeviation sets the provenance's deviation when the commit was not exact.
func (p Provenance) withDeviation(d Deviation) Provenance {
	if !p.Exact {
		p.Deviation = &d
	}
	return p
}

// markers are the markers a commit of version serial onto head from
// appends: deviation (when not exact), committed, and recovered or failed.
func (m mergeInput) markers(from, serial int64, changed int, d Deviation, end *End) []Marker {
	out := []Marker{}
	if !d.empty() {
		out = append(out, Marker{Kind: MarkerDeviation, Deviation: &d})
	}
	out = append(out, Marker{Kind: MarkerCommitted, Serial: serial, FromSerial: from, Mode: m.mode(), Count: changed})
	switch {
	case m.spec.recovered != nil:
		r := *m.spec.recovered
		r.Serial, r.Count, r.Addresses = serial, changed, d.Kept
		out = append(out, r)
	case m.spec.status != StatusApplied:
		out = append(out, Marker{Kind: MarkerFailed, End: end})
	}
	return out
}

// updateRun is the commit's change to the run: committed once; a
// recovery only gains CommittedSerial, any other commit also ends the run
// with the spec's status and end.
func (m mergeInput) updateRun(serial int64, end *End) func(*Run) error {
	return func(r *Run) error {
		if r.CommittedSerial != 0 && (m.spec.lateAfter == 0 || r.CommittedSerial != m.spec.lateAfter || !LateResult(*r)) {
			// A run commits once (a retried commit, or a second recovery,
			// must not write twice) — but for the recovery of its late
			// result, which follows the version it still names (ADR 0071).
			return Errorf(ErrConflict, "run %s already committed version %d", r.ID, r.CommittedSerial)
		}
		if m.spec.recovered != nil {
			if r.InProgress() {
				return Errorf(ErrConflict, "run %s is %s again", r.ID, r.Status)
			}
			r.CommittedSerial = serial
			if r.End != nil && (r.End.Recoverable || len(r.End.Fenced) > 0) {
				// Recovered: `kl run recover` is no longer the next step,
				// and the fence this commit lifts is gone.
				e := *r.End
				e.Recoverable = false
				if m.spec.lateAfter != 0 {
					e.LateSerial = serial
				}
				if len(e.Fenced) > 0 && e.Lifted == "" {
					e.Lifted = LiftRecovered
				}
				r.End = &e
			}
			return nil
		}
		r.Status = m.spec.status
		r.End = end
		if end == nil {
			r.End = &End{Cause: CauseApplied}
		}
		r.CommittedSerial = serial
		t := m.now()
		r.FinishedAt = &t
		return nil
	}
}

// finishPlans marks the reviewed plan consumed: applied, or failed when the
// apply failed part-way (its partial result is version serial) — and so
// the re-plan applied in its place, if any (its end, when applied, names
// the reviewed plan: CauseReplanApplied). A plan the lease sweep already
// failed for this run (its reservations lapsed before the lease-lost
// commit) gets the precise end; a plan another apply claimed since is left
// alone.
func (e *Engine) finishPlans(ctx context.Context, a *applier, s RunStatus, serial int64, partial bool) {
	var end *End // applied: the reviewed plan keeps its end
	switch {
	case s == StatusApplied:
	case partial:
		end = &End{Cause: CauseApplyPartial, Run: a.run.ID, Serial: serial}
	default:
		end = &End{Cause: CauseApplyLeaseLost, Run: a.run.ID, Serial: serial}
	}
	e.finishPlan(ctx, a.plan.ID, a.run.ID, s, end)
	if rp := a.replanApplied(); rp != "" {
		if s == StatusApplied {
			end = &End{Cause: CauseReplanApplied, Run: a.run.ID, Plan: a.plan.ID, Serial: serial}
		}
		e.finishPlan(ctx, rp, a.run.ID, s, end)
	}
}

// finishPlan closes plan id, claimed by apply run apply, in status s with
// end (nil: the plan keeps its end). A plan the lease sweep failed already
// (applying or failed before) is closed too; a plan another apply claimed
// since is left alone. Failures are logged: the commit has happened.
func (e *Engine) finishPlan(ctx context.Context, id, apply string, s RunStatus, end *End) {
	if _, err := e.Store.UpdateRun(ctx, id, []RunStatus{StatusApplying, StatusFailed}, func(r *Run) error {
		if err := claimedBy(r, apply); err != nil {
			return err
		}
		r.Status = s
		if end != nil {
			r.End = end
		}
		return nil
	}); err != nil {
		e.log().Error("finishing plan", "run", id, "status", s, "err", err)
	}
}
