package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	// Parsed against the base Terraform applied to: the entries it did not
	// touch are taken from the base, not read again (issue 16's bench).
	result, err := tfstate.ParseWithBase(state, baseState)
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
		deviation: Deviation{Unplanned: changed.Minus(planned), Unchanged: unchangedOf(planned, changed), Tainted: tainted.Overlapping(changed)},
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

// commitOrLeaseLost commits spec (commitChecked). When the run's
// reservations expired before the commit (ErrLeaseLost), it commits by the
// lease-lost rule: merge only what the head has not changed since the plan
// and no other live run holds, keep the head elsewhere and say so (the
// version is committed even when the head keeps every address: it is the
// provenance of an apply that ran, and its deviation names what no version
// holds). When a version committed after the snapshot Terraform applied to
// changed the applied plan's footprint — its lease lapsed and its reads
// were dropped (ADR 0072) — what Terraform did is committed all the same,
// but the run fails with ErrLeaseLost and nothing says exact. The raw
// result (state) is kept as an artifact: nothing Terraform wrote is
// dropped silently — also when `kl run recover` committed the run
// meanwhile (recoveredMeanwhile, ADR 0071).
func (a *applier) commitOrLeaseLost(ctx, cctx context.Context, baseState, result *tfstate.State, state []byte, spec commitSpec, applyErr error) (*ApplyOutcome, error) {
	e := a.e
	v, spec, err := a.commitChecked(cctx, baseState, result, spec, applyErr == nil)
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
	if spec.leaseLost {
		// The run failed even when Terraform did not: say so to the caller.
		lost := a.leaseLostError(v, spec)
		if err != nil {
			lost = fmt.Errorf("%w; %w", lost, err)
		}
		err = lost
	}
	return out, err
}

// unchangedOf is the planned writes the run did not change: those no
// changed address meets. A changed address is at the resource level where
// the state cannot say which module instance changed (module.m.x.y covers
// module.m[0].x.y when count was added to the call), and then none of its
// planned instances is called unchanged.
func unchangedOf(planned, changed AddressSet) AddressSet {
	return planned.Minus(planned.Overlapping(changed))
}

// maxCommitAttempts bounds the commits commitChecked (and a recovery)
// tries when the head moves between its since-plan check and the commit
// (errHeadMoved): each retry means another commit landed meanwhile. Past
// it the commit fails; what Terraform wrote stays an artifact, which `kl
// run recover` commits.
const maxCommitAttempts = 64

// errHeadMoved is a commit's merge finding the head past the one its
// since-plan check read: the check is redone, then the commit.
var errHeadMoved = errors.New("the head moved after the since-plan check of the commit")

// commitChecked commits spec after checking, against every version
// committed after the snapshot Terraform applied to, whether one changed
// the applied plan's footprint (sinceApplied, withInputs); the merge
// refuses a head other than the one checked (errHeadMoved), and the check
// and the commit are then tried again. A commit refused with ErrLeaseLost
// is tried again by the lease-lost rule (afterLeaseLost, with the
// addresses other live runs hold kept at the head). It returns the version
// and the spec it committed with.
func (a *applier) commitChecked(ctx context.Context, baseState, result *tfstate.State, spec0 commitSpec, terraformDone bool) (*Version, commitSpec, error) {
	lapsed := false
	var held []Reservation
	var keep []string
	for attempt := 1; ; attempt++ {
		spec := spec0
		if lapsed {
			spec = spec.afterLeaseLost(terraformDone)
			spec.keep, spec.held = keep, held
		}
		ch, err := a.sinceApplied(ctx)
		if err != nil {
			return nil, spec, err
		}
		spec = spec.withInputs(ch, terraformDone)
		v, err := a.commit(ctx, baseState, result, spec)
		switch {
		case errors.Is(err, errHeadMoved) && attempt < maxCommitAttempts:
			continue
		case errors.Is(err, ErrLeaseLost) && !lapsed:
			lapsed = true
			if keep, held, err = a.heldByOthers(ctx, spec0.changed); err != nil {
				return nil, spec, err
			}
			continue
		}
		return v, spec, err
	}
}

// leaseLostError is the ErrLeaseLost an apply returns after committing v
// by spec when its lease had lapsed: what the version holds, what the head
// kept, and the plan inputs that changed meanwhile.
func (a *applier) leaseLostError(v *Version, spec commitSpec) error {
	lost := Errorf(ErrLeaseLost, "the reservations expired before the commit; version %d holds only what the head had not changed since the plan", v.Serial)
	if spec.requireRes {
		// The write set stayed fenced (ADR 0035): all of it is committed.
		lost = Errorf(ErrLeaseLost, "the lease lapsed while Terraform ran: the write set stayed fenced and version %d holds it, but the read reservations were dropped", v.Serial)
	}
	if d := v.Provenance.Deviation; d != nil && len(d.Lost) > 0 {
		lost = fmt.Errorf("%w; the head kept %d of the addresses this apply changed: what it did there is in no version — check the real objects, then import or remove it (`kl run show %s` names them)",
			lost, len(d.Lost), a.run.ID)
	}
	if ch := spec.deviation.InputsChanged; len(ch) > 0 {
		lost = fmt.Errorf("%w; meanwhile %s: Terraform applied values computed from serial %d, so re-plan to check them (`kl run show %s`)",
			lost, InputsChangedText(ch), a.pf.run.Envelope.SourceSerial, a.run.ID)
	}
	return lost
}

// InputsChangedText says which versions changed which part of a plan's
// footprint (ADR D3 words): "version 7 (run X) changed terraform_data.x,
// a plan input" — "a planned target" for a write-changed one.
func InputsChangedText(entries []SincePlanEntry) string {
	parts := make([]string, 0, len(entries))
	for _, en := range entries {
		by := ""
		if en.Run != "" {
			by = " (run " + en.Run + ")"
		}
		what := "a plan input"
		if en.Class == ClassWriteChanged {
			what = "a planned target"
		}
		parts = append(parts, fmt.Sprintf("version %d%s changed %s, %s", en.Serial, by, strings.Join(en.Addresses.Strings(), ", "), what))
	}
	return strings.Join(parts, "; ")
}

// sinceCheck is a commit's since-plan check (applier.sinceApplied): the
// versions after the snapshot Terraform applied to, the head they reach,
// those that changed the applied plan's footprint, and the reviewed plan's
// since-plan as it stands at commit.
type sinceCheck struct {
	versions []Version
	head     int64
	changed  []SincePlanEntry
	atCommit SincePlan
}

// sinceApplied reads every version committed after the reviewed plan's
// source serial and classifies those after the snapshot Terraform applied
// to (the applied plan's source serial) against the applied plan's
// footprint (ADR D3): a version other than independent can only have been
// committed while this run's lease had lapsed (ADR 0072).
func (a *applier) sinceApplied(ctx context.Context) (sinceCheck, error) {
	env, reviewed := a.pf.run.Envelope, a.plan.Envelope
	from := min(env.SourceSerial, reviewed.SourceSerial)
	vs, err := a.e.Store.VersionsAfter(ctx, a.state.Name, from)
	if err != nil {
		return sinceCheck{}, fmt.Errorf("reading versions after %d of state %s: %w", from, a.state.Name, err)
	}
	ch := sinceCheck{atCommit: ClassifySincePlan(a.plan.ID, reviewed.SourceSerial, reviewed.Footprint, vs)}
	applied := ClassifySincePlan(a.pf.run.ID, env.SourceSerial, env.Footprint, vs)
	ch.head = max(applied.HeadSerial, ch.atCommit.HeadSerial)
	for _, v := range vs {
		if v.Serial > env.SourceSerial {
			ch.versions = append(ch.versions, v)
		}
	}
	for _, en := range applied.Entries {
		if en.Class != ClassIndependent && en.Run != a.run.ID {
			en.Changed = nil // the version's own list; Addresses say what matters
			ch.changed = append(ch.changed, en)
		}
	}
	return ch, nil
}

// withInputs is spec after the since-plan check ch: the merge refuses any
// head but ch's, the lost writes are told from ch's versions, and, when a
// version changed the applied plan's footprint, the deviation and the end
// name it (ADR 0072) — the run fails by its lapsed lease (terraformDone:
// Terraform itself finished), and its since-plan is the one at commit.
func (spec commitSpec) withInputs(ch sinceCheck, terraformDone bool) commitSpec {
	spec.checkedHead, spec.since = ch.head, ch.versions
	if len(ch.changed) == 0 {
		return spec
	}
	spec.deviation.InputsChanged = ch.changed
	sp := ch.atCommit
	sp.AtCommit = true
	spec.atCommit = &sp
	if spec.recovered != nil {
		return spec // a recovery keeps the run's end
	}
	if !spec.leaseLost {
		spec.status, spec.leaseLost = StatusFailed, true
		spec.end = &End{Cause: CauseLeaseLost, TerraformDone: terraformDone, Then: spec.end}
	}
	end := *spec.end
	end.InputsChanged = ch.changed
	spec.end = &end
	return spec
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
	// checkedHead is the head the commit's since-plan check read
	// (withInputs): the merge refuses another (errHeadMoved). 0: no check.
	checkedHead int64
	// atCommit, when set, is the reviewed plan's since-plan at commit,
	// stored on the run in place of the preflight's (a version after
	// the preflight changed the footprint: ADR 0072).
	atCommit *SincePlan
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
	if spec.checkedHead != 0 && head.Serial != spec.checkedHead {
		return CommitResult{}, fmt.Errorf("head %d, checked %d: %w", head.Serial, spec.checkedHead, errHeadMoved)
	}
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
		m.spec.sincePlanAtCommit(r)
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

// sincePlanAtCommit stores on r the since-plan at commit, when the
// commit made one (a version after the preflight changed the footprint:
// ADR 0072), in place of the preflight's, and drops the preflight's
// staleness-passed fact, which no longer holds: "head unchanged" or
// "independent versions only" was true when the apply was allowed, not
// when it committed.
func (spec commitSpec) sincePlanAtCommit(r *Run) {
	if spec.atCommit == nil {
		return
	}
	sp := *spec.atCommit
	r.SincePlan = &sp
	r.AllowedBecause = slices.DeleteFunc(slices.Clone(r.AllowedBecause), func(f Fact) bool { return f.Kind == FactStalenessPassed })
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
