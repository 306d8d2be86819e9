package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// Day-2 operations (issue 14 §6, ADR 0055): `kl state rollback`, `kl state
// push`, `kl state rm` and `kl state mv` write a version like any apply —
// under a reservation, with provenance, classified by since-plan — but from
// no plan and without Terraform. Each is an apply run without a plan
// (Run.PlanRun ""), described by its first marker (MarkerOperation), that
// reserves the whole state for write ("*": it conflicts with every run
// holding anything, as an apply of the same addresses would) and commits
// the edited head as version head+1 in the commit transaction. Its
// version's commit mode says what it was; its changed addresses are
// tfstate.Changed of the head and the new content, so an open plan whose
// write set it touched is refused as stale, naming it.

// OperationInput is one day-2 operation.
type OperationInput struct {
	State string
	// Mode is the operation: CommitRollback, CommitPush, CommitStateRm or
	// CommitStateMv.
	Mode CommitMode
	// Actor is who asks (required); Reason their words (required for a
	// rollback, stored when given for the others).
	Actor, Reason string
	// Wait bounds how long to wait for other runs' reservations; 0 refuses
	// at once naming them (as ApplyInput.Wait). A fence is refused at once.
	Wait time.Duration
	// OnWait, if set, is called when the operation starts waiting.
	OnWait func([]Blocker)

	// Serial is the version a rollback restores.
	Serial int64
	// Document is the Terraform state v4 document a push writes; Force
	// takes a serial not above the head's (a lower one, or the head's with
	// other content), as `terraform state push -force`. The lineage must
	// be the state's, forced or not.
	Document []byte
	Force    bool
	// Addresses are a state-rm's addresses, or a state-mv's FROM and TO.
	Addresses []string
}

// OperationOutcome is what an operation did. Run is nil when it had
// nothing to do (a rollback or push whose content the head already holds):
// then no run was made, no version committed, and Head is the head serial.
type OperationOutcome struct {
	Run     *Run     `json:"run,omitempty"`
	Version *Version `json:"version,omitempty"`
	Head    int64    `json:"head_serial"`
}

// Operate runs a day-2 operation (ADR 0055):
//
//  1. check the input and edit the head once, before any run exists: an
//     address that matches nothing, another lineage, a lower serial, a
//     serial that does not exist are refused here (ErrInvalid, ErrNotFound,
//     ErrConflict), and an edit the head already holds ends here (no run);
//  2. create an apply run without a plan, its first marker an "operation"
//     marker naming the operation, the actor and the reason;
//  3. reserve "*" for write, all or none: a conflict refuses at once (or
//     after in.Wait) naming the runs holding reservations (*ConflictError),
//     a fence at once (*FencedError);
//  4. commit in one transaction: edit the locked head again, write version
//     head+1 with its changed addresses and provenance, release.
//
// Errors after step 2 come in a *RunError naming the run.
func (e *Engine) Operate(ctx context.Context, in OperationInput) (*OperationOutcome, error) {
	op, err := e.prepareOperation(ctx, in)
	if err != nil {
		return nil, err
	}
	head, err := e.Store.GetState(ctx, in.State)
	if err != nil {
		return nil, fmt.Errorf("reading state %s: %w", in.State, err)
	}
	v, err := e.Store.GetVersion(ctx, in.State, head.HeadSerial)
	if err != nil {
		return nil, fmt.Errorf("reading head %d of state %s: %w", head.HeadSerial, in.State, err)
	}
	snap, err := e.Store.Snapshot(ctx, in.State, head.HeadSerial)
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %d of state %s: %w", head.HeadSerial, in.State, err)
	}
	if _, err := op.edit(v, snap); err != nil {
		if errors.Is(err, errNothingToDo) {
			return &OperationOutcome{Head: head.HeadSerial}, nil
		}
		return nil, err
	}
	return e.operate(ctx, op)
}

// errNothingToDo: the head already holds what the operation would write.
var errNothingToDo = errors.New("the head already holds it")

// operation is one prepared day-2 operation: its input and how it edits a
// head (pure: it runs inside the commit transaction).
type operation struct {
	in OperationInput
	// change computes the new content from the head (parsed); it returns
	// errNothingToDo when the head holds it already.
	change func(head *tfstate.State, serial int64) (*tfstate.State, error)
	// prov adds the operation's own facts to the provenance.
	prov func(*Provenance)
	// marker is the "operation" marker.
	marker Marker
}

// prepareOperation checks in (the actor, the reason, the state, the mode's
// own input) and builds its operation. Errors: ErrInvalid for bad input,
// UnknownState's for a missing state.
func (e *Engine) prepareOperation(ctx context.Context, in OperationInput) (*operation, error) {
	if strings.TrimSpace(in.Actor) == "" {
		return nil, Errorf(ErrInvalid, "%s on state %s: no actor (set KL_ACTOR)", in.Mode, in.State)
	}
	if in.Wait < 0 {
		return nil, Errorf(ErrInvalid, "%s on state %s: negative wait %s", in.Mode, in.State, in.Wait)
	}
	st, err := e.getState(ctx, in.State)
	if err != nil {
		return nil, err
	}
	op := &operation{in: in, prov: func(*Provenance) {}, marker: Marker{Kind: MarkerOperation, Mode: in.Mode, By: in.Actor, Reason: in.Reason}}
	switch in.Mode {
	case CommitRollback:
		err = e.prepareRollback(ctx, st, op)
	case CommitPush:
		err = preparePush(st, op)
	case CommitStateRm:
		err = prepareRemove(op)
	case CommitStateMv:
		err = prepareMove(op)
	default:
		err = Errorf(ErrInvalid, "unknown operation %q: want rollback, push, state-rm or state-mv", in.Mode)
	}
	if err != nil {
		return nil, err
	}
	return op, nil
}

// prepareRollback: the version to restore must exist and not be the head;
// the reason is required (an operator undoing versions says why).
func (e *Engine) prepareRollback(ctx context.Context, st State, op *operation) error {
	in := op.in
	if strings.TrimSpace(in.Reason) == "" {
		return Errorf(ErrInvalid, "rolling back state %s: --reason is required: say why the versions after %d are undone", st.Name, in.Serial)
	}
	if in.Serial < 0 || in.Serial >= st.HeadSerial {
		return Errorf(ErrInvalid, "rolling back state %s to version %d: want an earlier version than the head (%d)", st.Name, in.Serial, st.HeadSerial)
	}
	vs, err := e.Store.VersionsAfter(ctx, st.Name, -1)
	if err != nil {
		return fmt.Errorf("reading the versions of state %s: %w", st.Name, err)
	}
	var to *Version
	for i := range vs {
		if vs[i].Serial == in.Serial {
			to = &vs[i]
		}
	}
	if to == nil {
		return Errorf(ErrNotFound, "rolling back state %s: it has no version %d (head is %d): %s", st.Name, in.Serial, st.HeadSerial, rollbackTargets(st, vs))
	}
	if to.Lineage != st.Lineage {
		return Errorf(ErrInvalid, "rolling back state %s to version %d: %s; rolling back to it would make the state another Terraform state; %s",
			st.Name, in.Serial, otherLineage(st, *to, vs), rollbackTargets(st, vs))
	}
	doc, err := e.Store.Snapshot(ctx, st.Name, in.Serial)
	if err != nil {
		return fmt.Errorf("reading snapshot %d of state %s: %w", in.Serial, st.Name, err)
	}
	old, err := tfstate.Parse(doc)
	if err != nil {
		return fmt.Errorf("parsing snapshot %d of state %s: %w", in.Serial, st.Name, err)
	}
	op.marker.Serial = in.Serial
	op.prov = func(p *Provenance) { p.RestoredSerial = in.Serial }
	op.change = func(head *tfstate.State, serial int64) (*tfstate.State, error) {
		if tfstate.Equivalent(head, old) {
			return nil, errNothingToDo
		}
		out := *old
		out.Serial = serial
		return &out, nil
	}
	return nil
}

// otherLineage says why version v of state st is of another lineage than
// the state's: the empty version of `kl state init` (or a version) before
// the state adopted its lineage (ADR 0056 decision 8), naming the
// adoption's version from vs (all of st's versions, oldest first).
func otherLineage(st State, v Version, vs []Version) string {
	what := fmt.Sprintf("version %d is of lineage %s, not the state's %s", v.Serial, v.Lineage, st.Lineage)
	if v.Provenance.Mode == CommitInit && v.Provenance.Origin == "empty" {
		what = fmt.Sprintf("version %d is the empty version of `kl state init`, of lineage %s", v.Serial, v.Lineage)
	}
	for _, a := range vs {
		if a.Serial > v.Serial && a.Provenance.Adopted && a.Lineage == st.Lineage {
			return fmt.Sprintf("%s, made before the state adopted lineage %s (version %d, an adoption)", what, st.Lineage, a.Serial)
		}
	}
	return what
}

// rollbackTargets names the versions of state st a rollback may restore:
// those of the state's lineage below the head, from vs (all of st's
// versions, oldest first) — "versions 7 and 8 can be rolled back to",
// "versions 7, 8, … 40 (34 versions; kl history --state NAME lists them)".
func rollbackTargets(st State, vs []Version) string {
	var ok []string
	for _, v := range vs {
		if v.Serial < st.HeadSerial && v.Lineage == st.Lineage {
			ok = append(ok, strconv.FormatInt(v.Serial, 10))
		}
	}
	switch {
	case len(ok) == 0:
		return fmt.Sprintf("no version before the head (%d) has the state's lineage: there is nothing to roll back to", st.HeadSerial)
	case len(ok) == 1:
		return "version " + ok[0] + " can be rolled back to"
	case len(ok) <= 8:
		return "versions " + strings.Join(ok[:len(ok)-1], ", ") + " and " + ok[len(ok)-1] + " can be rolled back to"
	}
	return fmt.Sprintf("versions %s, %s, … %s can be rolled back to (%d versions; `kl history --state %s` lists them)",
		ok[0], ok[1], ok[len(ok)-1], len(ok), ShellQuote(st.Name))
}

// preparePush: the document must be a state v4 document of the state's
// lineage (whatever --force says: a lineage is one state); a serial below
// the head's, or the head's with other content, needs in.Force — the rules
// of `terraform state push`.
func preparePush(st State, op *operation) error {
	in := op.in
	doc, err := tfstate.Parse(in.Document)
	if err != nil {
		return Errorf(ErrInvalid, "pushing to state %s: %v", st.Name, err)
	}
	if doc.Lineage != st.Lineage {
		return Errorf(ErrInvalid, "pushing to state %s: the document has lineage %s, the state has lineage %s: a lineage is one Terraform state, and this is another one (to adopt it, `kl state init NAME --from FILE` under a new name)",
			st.Name, doc.Lineage, st.Lineage)
	}
	op.marker.Serial = doc.Serial
	if in.Force {
		op.marker.Extra = map[string]string{"force": "true"}
	}
	forced := false
	op.prov = func(p *Provenance) { p.PushedSerial, p.Forced = doc.Serial, forced }
	op.change = func(head *tfstate.State, serial int64) (*tfstate.State, error) {
		same := tfstate.Equivalent(head, doc)
		switch {
		case same:
			return nil, errNothingToDo
		case doc.Serial < head.Serial && !in.Force:
			return nil, Errorf(ErrConflict, "pushing to state %s: the document's serial %d is below the head's %d: it is an older copy, and pushing it would undo the versions since (add --force if that is what you want)",
				st.Name, doc.Serial, head.Serial)
		case doc.Serial == head.Serial && !in.Force:
			return nil, Errorf(ErrConflict, "pushing to state %s: the document has the head's serial %d with other content: two copies diverged from one version (add --force to take this one)",
				st.Name, doc.Serial)
		}
		forced = doc.Serial <= head.Serial
		out := *doc
		out.Serial = serial
		return &out, nil
	}
	return nil
}

// prepareRemove parses a state-rm's addresses (at least one).
func prepareRemove(op *operation) error {
	in := op.in
	if len(in.Addresses) == 0 {
		return Errorf(ErrInvalid, "removing from state %s: name at least one address", in.State)
	}
	targets, err := parseTargets(in.Addresses)
	if err != nil {
		return Errorf(ErrInvalid, "removing from state %s: %v", in.State, err)
	}
	var canon []string
	for _, t := range targets {
		canon = append(canon, t.String())
	}
	op.marker.Extra = map[string]string{"addresses": strings.Join(canon, "\n")}
	var removed []string
	op.prov = func(p *Provenance) { p.Removed = removed }
	op.change = func(head *tfstate.State, serial int64) (*tfstate.State, error) {
		out, gone, err := head.Remove(targets, serial)
		if err != nil {
			return nil, editError("removing from state "+in.State, in.State, err)
		}
		removed = gone
		return out, nil
	}
	return nil
}

// prepareMove parses a state-mv's FROM and TO.
func prepareMove(op *operation) error {
	in := op.in
	if len(in.Addresses) != 2 {
		return Errorf(ErrInvalid, "moving in state %s: want FROM and TO, got %d addresses", in.State, len(in.Addresses))
	}
	ts, err := parseTargets(in.Addresses)
	if err != nil {
		return Errorf(ErrInvalid, "moving in state %s: %v", in.State, err)
	}
	from, to := ts[0], ts[1]
	op.marker.Extra = map[string]string{"from": from.String(), "to": to.String()}
	moved := 0
	op.prov = func(p *Provenance) { p.MovedFrom, p.MovedTo, p.Moved = from.String(), to.String(), moved }
	op.change = func(head *tfstate.State, serial int64) (*tfstate.State, error) {
		out, n, err := head.Move(from, to, serial)
		if err != nil {
			return nil, editError("moving in state "+in.State, in.State, err)
		}
		moved = n
		return out, nil
	}
	return nil
}

func parseTargets(addrs []string) ([]tfstate.Target, error) {
	out := make([]tfstate.Target, 0, len(addrs))
	for _, a := range addrs {
		t, err := tfstate.ParseTarget(a)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// editError is a state edit's refusal as the engine's kinds: an address
// that matches nothing is ErrNotFound (with `kl state pull` to look), a
// move Terraform refuses too ErrInvalid.
func editError(doing, state string, err error) error {
	switch {
	case errors.Is(err, tfstate.ErrNoMatch):
		return Errorf(ErrNotFound, "%s: %v (`kl state pull %s > FILE`, then `terraform state list -state=FILE`, lists the head's instances)", doing, err, ShellQuote(state))
	case errors.Is(err, tfstate.ErrBadMove):
		return Errorf(ErrInvalid, "%s: %v", doing, err)
	}
	return fmt.Errorf("%s: %w", doing, err)
}

// edit is the operation on head version v with its snapshot: the new
// document as version v.Serial+1, its changed addresses and resource
// count.
func (op *operation) edit(v Version, snapshot []byte) (editResult, error) {
	head, err := tfstate.Parse(snapshot)
	if err != nil {
		return editResult{}, fmt.Errorf("parsing head %d: %w", v.Serial, err)
	}
	out, err := op.change(head, v.Serial+1)
	if err != nil {
		return editResult{}, err
	}
	doc, err := out.Marshal()
	if err != nil {
		return editResult{}, fmt.Errorf("encoding version %d: %w", v.Serial+1, err)
	}
	changed, err := parseAddresses(tfstate.Changed(head, out))
	if err != nil {
		return editResult{}, err
	}
	return editResult{doc: doc, changed: changed, resources: out.ResourceCount()}, nil
}

// editResult is one edit of a head.
type editResult struct {
	doc       []byte
	changed   AddressSet
	resources int
}

// operate runs steps 2–4 of Operate.
func (e *Engine) operate(ctx context.Context, op *operation) (*OperationOutcome, error) {
	now := e.now()
	run := Run{ID: NewRunID(), Kind: KindApply, State: op.in.State, Actor: op.in.Actor, Holder: e.Holder,
		Status: StatusWaiting, CreatedAt: now, UpdatedAt: now, LeaseUntil: now.Add(e.lease())}
	if err := e.Store.CreateRun(ctx, run); err != nil {
		return nil, fmt.Errorf("creating the run of %s on state %s: %w", op.in.Mode, op.in.State, err)
	}
	ka := e.keepAlive(ctx, run.ID)
	defer ka.Stop()
	o := &operator{e: e, op: op, run: run, ka: ka}
	if err := e.Store.AddMarkers(ctx, run.ID, op.marker); err != nil {
		return nil, o.fail(ctx, Failed(StepRecordOperation, err), fmt.Errorf("recording operation of run %s: %w", run.ID, err))
	}
	if err := o.reserve(ctx); err != nil {
		return nil, &RunError{Run: run.ID, Err: err}
	}
	v, err := o.commit(ctx)
	if err != nil {
		return nil, &RunError{Run: run.ID, Err: err}
	}
	out := &OperationOutcome{Version: v, Head: v.Serial}
	r, err := e.Store.GetRun(ctx, run.ID)
	if err != nil {
		return nil, fmt.Errorf("reading run %s: %w", run.ID, err)
	}
	out.Run = &r
	return out, nil
}

// operator carries one operation's run through its reservation and
// commit.
type operator struct {
	e   *Engine
	op  *operation
	run Run
	ka  *keepAlive
}

// reserve takes "*" for write, all or none, waiting up to the input's
// Wait: each run found blocking gets a "waited" marker once; a fence
// refuses at once; a conflict at the deadline refuses naming the blockers.
func (o *operator) reserve(ctx context.Context) error {
	e, in := o.e, o.op.in
	want := []Reservation{{Address: AllAddresses, Mode: ModeWrite}}
	start := e.now()
	seen := map[string]bool{}
	waited := false
	for {
		res, err := e.Store.Acquire(ctx, AcquireRequest{State: in.State, Run: o.run.ID, Holder: e.Holder, Reservations: want, Lease: e.lease()})
		if err == nil {
			return o.reserved(ctx, res, waited, start)
		}
		var ce *ConflictError
		if !errors.As(err, &ce) {
			err = leaseLost(o.run.ID, err)
			return o.fail(ctx, Failed(StepAcquire, err), fmt.Errorf("acquiring reservations for run %s: %w", o.run.ID, err))
		}
		for i := range ce.Blockers {
			// What blocks "*" is whatever the run holds: name that, not
			// "*" (Blocker.Addresses is the part of the request blocked).
			ce.Blockers[i].Addresses = reservedAddresses(ce.Blockers[i].Held)
		}
		e.nameBlockers(ctx, ce.Blockers)
		var fresh []Marker
		for _, b := range ce.Blockers {
			if !seen[b.Run] {
				seen[b.Run] = true
				fresh = append(fresh, Marker{Kind: MarkerWaited, Other: b.Run, OtherPR: b.PR, Addresses: b.Addresses})
			}
		}
		if fenced(ce.Blockers) {
			return o.fail(ctx, &End{Cause: CauseRefusedFenced, Blockers: ce.Blockers}, fmt.Errorf("run %s: %w", o.run.ID, &FencedError{ce}), fresh...)
		}
		if in.Wait <= 0 || !e.now().Before(start.Add(in.Wait)) {
			end := &End{Cause: CauseRefusedConflict, Blockers: ce.Blockers}
			if waited {
				end.Waited = Duration(e.now().Sub(start).Round(100 * time.Millisecond))
			}
			return o.fail(ctx, end, fmt.Errorf("run %s: %w", o.run.ID, ce), fresh...)
		}
		if err := o.recordWait(ctx, ce, fresh); err != nil {
			return err
		}
		waited = true
		t := time.NewTimer(e.poll())
		select {
		case <-ctx.Done():
			t.Stop()
			return o.fail(ctx, &End{Cause: CauseInterrupted, Phase: PhaseWaiting}, fmt.Errorf("run %s waiting for reservations: %w", o.run.ID, ctx.Err()))
		case <-t.C:
		}
	}
}

// reserved records the whole-state reservation: the run applying, a
// "reserved" marker (with how long it waited).
func (o *operator) reserved(ctx context.Context, res AcquireResult, waited bool, start time.Time) error {
	o.ka.reservations(o.run.ID)
	m := Marker{Kind: MarkerReserved, Count: len(res.Held), Addresses: reservedAddresses(res.Held)}
	if waited {
		m.Waited = Duration(o.e.now().Sub(start))
	}
	if _, err := o.e.Store.UpdateRun(ctx, o.run.ID, applyInProgress, func(r *Run) error {
		r.Status, r.End = StatusApplying, nil
		return nil
	}, m); err != nil {
		err = leaseLost(o.run.ID, err)
		return o.fail(ctx, Failed(StepRecordReservations, err), fmt.Errorf("recording reservations of run %s: %w", o.run.ID, err))
	}
	return nil
}

// recordWait stores that the run waits on ce's blockers when some are new,
// and tells the caller (OnWait).
func (o *operator) recordWait(ctx context.Context, ce *ConflictError, fresh []Marker) error {
	if len(fresh) == 0 {
		return nil
	}
	if _, err := o.e.Store.UpdateRun(ctx, o.run.ID, applyInProgress, func(r *Run) error {
		r.Status, r.End = StatusWaiting, &End{Cause: CauseWaiting, Blockers: ce.Blockers}
		return nil
	}, fresh...); err != nil {
		err = leaseLost(o.run.ID, err)
		return o.fail(ctx, Failed(StepRecordWait, err), fmt.Errorf("recording wait of run %s: %w", o.run.ID, err))
	}
	if o.op.in.OnWait != nil {
		o.op.in.OnWait(ce.Blockers)
	}
	return nil
}

// commit writes version head+1 (the edit of the locked head) and ends the
// run applied, releasing its reservation, in one transaction.
func (o *operator) commit(ctx context.Context) (*Version, error) {
	e, in := o.e, o.op.in
	cctx, cancel := background(ctx) // a Ctrl-C now does not stop the commit
	defer cancel()
	v, err := e.Store.Commit(cctx, CommitRequest{State: in.State, Run: o.run.ID, RequireReservations: true,
		Merge: func(head Version, snapshot []byte) (CommitResult, error) {
			res, err := o.op.edit(head, snapshot)
			if errors.Is(err, errNothingToDo) {
				err = Errorf(ErrConflict, "version %d, committed since the operation was checked, already holds what it would write", head.Serial)
			}
			if err != nil {
				return CommitResult{}, err
			}
			return o.result(head, res), nil
		}})
	if err != nil {
		return nil, o.fail(ctx, Failed(StepCommit, err), fmt.Errorf("committing run %s: %w", o.run.ID, err))
	}
	return &v, nil
}

// result is the commit of edit res onto head: provenance, the run's end
// (applied, version head+1), the "committed" marker.
func (o *operator) result(head Version, res editResult) CommitResult {
	in := o.op.in
	serial := head.Serial + 1
	prov := Provenance{Run: o.run.ID, SourceSerial: head.Serial, CommittedSerial: serial, Mode: in.Mode, Exact: true,
		Actor: in.Actor, Reason: in.Reason}
	o.op.prov(&prov)
	return CommitResult{
		Snapshot: res.doc, Changed: res.changed, Resources: res.resources, Provenance: prov,
		UpdateRun: func(r *Run) error {
			if r.CommittedSerial != 0 {
				return Errorf(ErrConflict, "run %s already committed version %d", r.ID, r.CommittedSerial)
			}
			r.Status, r.End, r.CommittedSerial = StatusApplied, &End{Cause: CauseApplied}, serial
			t := o.e.now()
			r.FinishedAt = &t
			return nil
		},
		Markers: []Marker{{Kind: MarkerCommitted, Serial: serial, FromSerial: head.Serial, Mode: in.Mode, Count: len(res.changed), Reason: in.Reason}},
	}
}

// fail ends the operation's run before it committed — refused for a
// conflict or a fence, interrupted when ctx was cancelled, failed
// otherwise — with end and markers, releases its reservations, and returns
// err for the caller to return.
func (o *operator) fail(ctx context.Context, end *End, err error, markers ...Marker) error {
	e := o.e
	bctx, cancel := background(ctx)
	defer cancel()
	status := StatusFailed
	switch {
	case end.Cause == CauseRefusedConflict || end.Cause == CauseRefusedFenced:
		status = StatusRefused
	case end.Cause == CauseInterrupted || ctx.Err() != nil:
		status, end = StatusInterrupted, interruptedEnd(end, PhaseApplying)
	}
	markers = append(markers, Marker{Kind: MarkerFailed, End: end})
	if _, uerr := e.Store.UpdateRun(bctx, o.run.ID, inProgress, func(r *Run) error {
		r.Status, r.End = status, end
		t := e.now()
		r.FinishedAt = &t
		return nil
	}, markers...); uerr != nil {
		e.log().Error("recording end of operation run", "run", o.run.ID, "err", uerr)
	}
	if rerr := e.Store.Release(bctx, o.run.ID); rerr != nil {
		e.log().Error("releasing reservations", "run", o.run.ID, "err", rerr)
	}
	return err
}

// OperationOf returns the "operation" marker among ms (a run's markers),
// or nil: the run is not a day-2 operation (ADR 0055).
func OperationOf(ms []Marker) *Marker {
	for i := range ms {
		if ms[i].Kind == MarkerOperation {
			return &ms[i]
		}
	}
	return nil
}

// OperationAddresses are the addresses a state-rm operation marker names.
func OperationAddresses(m Marker) []string {
	if m.Extra["addresses"] == "" {
		return nil
	}
	return strings.Split(m.Extra["addresses"], "\n")
}

// ForcedPush reports whether a push operation marker asked --force.
func ForcedPush(m Marker) bool {
	b, _ := strconv.ParseBool(m.Extra["force"])
	return b
}
