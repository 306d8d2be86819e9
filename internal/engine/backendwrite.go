package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// BackendWriteInput is one POST of a state document.
type BackendWriteInput struct {
	// LockID is the POST's ?ID=: Terraform's lock id (or the lock's run id).
	State, LockID, Actor string
	Document             []byte
}

// BackendUnlockInput is one UNLOCK.
type BackendUnlockInput struct {
	State, Actor string
	// LockID is Terraform's lock id from the UNLOCK body (or the lock's
	// run id), "" for an empty body.
	LockID string
	// Force: `terraform force-unlock` (an empty body). An UNLOCK naming
	// a lock by its run id rather than Terraform's own lock id is forced
	// too: only the Terraform that took a lock knows its lock id.
	Force bool
	// ReadOnly: the caller may only read (a read-only token). It may
	// release only a read lock, named by Terraform's own lock id — not the
	// lock's run id, which every 423 tells any reader — and never force
	// one (ErrForbidden otherwise): a `terraform plan` with a read-only
	// token must release the read lock it took, and nothing more.
	ReadOnly bool
}

// BackendUnlockOutcome is what an UNLOCK did: the lock's run, and the
// version it committed (nil: nothing written, or nothing new).
type BackendUnlockOutcome struct {
	Run     Run
	Version *Version
}

// heldLock is a backend lock found on a state: its run and markers, its
// LockInfo and mode, and whether its reservation is a fence now (its lease
// ran out after it wrote, or while its Terraform applied).
type heldLock struct {
	run    Run
	ms     []Marker
	info   LockInfo
	mode   ReservationMode
	fenced bool
}

// has reports whether the lock's run has a marker of kind k.
func (l *heldLock) has(k MarkerKind) bool {
	for _, m := range l.ms {
		if m.Kind == k {
			return true
		}
	}
	return false
}

// writes counts the lock's stored checkpoints.
func (l *heldLock) writes() int {
	n := 0
	for _, m := range l.ms {
		if m.Kind == MarkerBackendWrite {
			n++
		}
	}
	return n
}

// matches reports whether id names the lock: Terraform's id or its run's.
func (l *heldLock) matches(id string) bool { return id != "" && (id == l.info.ID || id == l.run.ID) }

// locksOn returns the backend locks holding live reservations or fences
// on state, and the blockers that are not backend locks (kl or klbot runs).
func (e *Engine) locksOn(ctx context.Context, state string) ([]*heldLock, []Blocker, error) {
	res, err := e.Store.Reservations(ctx, state)
	if err != nil {
		return nil, nil, fmt.Errorf("reading reservations of state %s: %w", state, err)
	}
	all := Conflicts("", []Reservation{{Address: AllAddresses, Mode: ModeWrite}}, res)
	var locks []*heldLock
	var others []Blocker
	for _, b := range all {
		l, err := e.lockOf(ctx, b.Run)
		if err != nil {
			return nil, nil, err
		}
		if l == nil {
			b.Addresses = reservedAddresses(b.Held)
			others = append(others, b)
			continue
		}
		l.fenced = b.Fenced
		locks = append(locks, l)
	}
	e.nameBlockers(ctx, others)
	return locks, others, nil
}

// lockOf reads run id as a backend lock; nil when it is not one.
func (e *Engine) lockOf(ctx context.Context, id string) (*heldLock, error) {
	r, err := e.Store.GetRun(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading run %s: %w", id, err)
	}
	if r.Kind != KindApply || r.PlanRun != "" {
		return nil, nil
	}
	ms, err := e.Store.Markers(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("reading markers of run %s: %w", id, err)
	}
	m := BackendLockOf(ms)
	if m == nil {
		return nil, nil
	}
	info := LockInfoOf(*m)
	r.Backend = &info
	return &heldLock{run: r, ms: ms, info: info, mode: ReservationMode(m.Extra["mode"])}, nil
}

// recentLocks is how many of a state's latest apply runs findLock reads
// for a lock that no longer holds its reservation.
const recentLocks = 50

// findLock returns the backend lock id names on state: one holding its
// reservation (or a fence), else — when lapsed — one of the state's
// recent backend locks whose lease ran out. Nil when there is none.
func (e *Engine) findLock(ctx context.Context, state, id string, lapsed bool) (*heldLock, error) {
	locks, _, err := e.locksOn(ctx, state)
	if err != nil {
		return nil, err
	}
	for _, l := range locks {
		if l.matches(id) {
			return l, nil
		}
	}
	if !lapsed || id == "" {
		return nil, nil
	}
	rs, err := e.Store.ListRuns(ctx, RunQuery{State: state, Kind: KindApply, Statuses: []RunStatus{StatusLeaseExpired}, Limit: recentLocks})
	if err != nil {
		return nil, fmt.Errorf("listing runs of state %s: %w", state, err)
	}
	for _, r := range rs {
		if r.PlanRun != "" {
			continue
		}
		l, err := e.lockOf(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		if l != nil && l.matches(id) {
			return l, nil
		}
	}
	return nil, nil
}

// notLocked is the refusal of a write or unlock with lock id on state,
// which no backend lock of that id holds: what holds the state instead
// (Terraform's lock ids too when ids: not to a read-only caller).
func (e *Engine) notLocked(ctx context.Context, kind error, state, id, doing string, ids bool) error {
	locks, others, err := e.locksOn(ctx, state)
	if err != nil {
		return err
	}
	var held []string
	for _, l := range locks {
		held = append(held, heldLockWords(l, ids))
	}
	for _, b := range others {
		held = append(held, blockerPhrase(b))
	}
	now := "it is not locked"
	if len(held) > 0 {
		now = "it is held by " + strings.Join(held, "; ")
	}
	if id == "" {
		return Errorf(kind, "%s state %s without a lock ID: nothing writes a state without its lock; %s", doing, state, now)
	}
	return Errorf(kind, "%s state %s: no backend lock with ID %s holds it; %s", doing, state, id, now)
}

// WriteBackend stores in.Document as the checkpoint of the backend lock
// in.LockID (ArtifactApplyCheckpoint, overwritten: the last one is what
// UNLOCK commits), marking the run "apply-started" at its first write so
// that its lapsed lease fences it. Errors, each but the first also a
// "backend-refused" marker in the lock's story:
//   - ErrLocked — no write lock with that id holds the state, or a read lock;
//   - ErrInvalid — the body is not JSON;
//   - ErrConflict — not a state v4 document, another lineage (naming both),
//     a serial below the head's.
//
// Adoption (issue 14 §7): while the head is the empty version of `kl
// state init NAME` and no plan was made on the state, a document of
// another lineage is taken; UNLOCK commits it with its lineage and serial.
func (e *Engine) WriteBackend(ctx context.Context, in BackendWriteInput) error {
	st, err := e.getState(ctx, in.State)
	if err != nil {
		return err
	}
	e.expireLeases(ctx)
	l, err := e.findLock(ctx, in.State, in.LockID, true)
	if err != nil {
		return err
	}
	if l == nil || (!l.fenced && !l.run.InProgress()) || l.run.CommittedSerial != 0 {
		err := e.notLocked(ctx, ErrLocked, in.State, in.LockID, "writing", true)
		e.recordRefusal(ctx, in.State, in.LockID, Marker{By: in.Actor, Reason: err.Error(),
			Extra: map[string]string{"refusal": RefusalLockID, "lock_id": in.LockID}})
		return err
	}
	if l.mode != ModeWrite {
		return e.refuseWrite(ctx, l, Marker{Extra: map[string]string{"refusal": RefusalReadLock}},
			Errorf(ErrLocked, "writing state %s: lock %s is a read lock (%s): it does not write", in.State, in.LockID, TerraformCommand(l.info.Operation)))
	}
	doc, why, err := docHead(in.State, in.Document)
	if err != nil {
		return e.refuseWrite(ctx, l, Marker{Reason: why, Extra: map[string]string{"refusal": RefusalNotState}}, err)
	}
	adopt, err := e.checkWrite(ctx, st, l, doc)
	if err != nil {
		return err
	}
	if err := e.startWrite(ctx, l, st.HeadSerial); err != nil {
		return err
	}
	if err := e.Store.PutArtifact(ctx, l.run.ID, ArtifactApplyCheckpoint, in.Document); err != nil {
		return fmt.Errorf("storing the checkpoint of backend lock run %s: %w", l.run.ID, err)
	}
	m := Marker{Kind: MarkerBackendWrite, Serial: doc.Serial, Count: doc.ResourceCount(), Extra: map[string]string{"lineage": doc.Lineage}}
	if adopt {
		m.Extra["adopt"] = "true"
	}
	if err := e.Store.AddMarkers(ctx, l.run.ID, m); err != nil {
		return fmt.Errorf("recording the write of backend lock run %s: %w", l.run.ID, err)
	}
	return nil
}

// checkWrite checks document doc against the head of state st: the
// state's lineage, or another one while the state may adopt it
// (adoptable: it reports true); a serial not below the head's.
func (e *Engine) checkWrite(ctx context.Context, st State, l *heldLock, doc *tfstate.State) (bool, error) {
	if doc.Lineage != st.Lineage {
		ok, err := e.adoptable(ctx, st)
		if err != nil || ok {
			return ok, err
		}
		m := Marker{Serial: doc.Serial, FromSerial: st.HeadSerial, Extra: map[string]string{"refusal": RefusalLineage, "lineage": doc.Lineage, "state_lineage": st.Lineage}}
		return false, e.refuseWrite(ctx, l, m, Errorf(ErrConflict,
			"writing state %s: the document has lineage %s, the state has lineage %s: a lineage is one Terraform state, and this is another one (a state adopts another lineage only while it is the empty version of `kl state init`)",
			st.Name, doc.Lineage, st.Lineage))
	}
	if doc.Serial < st.HeadSerial {
		m := Marker{Serial: doc.Serial, FromSerial: st.HeadSerial, Extra: map[string]string{"refusal": RefusalSerial}}
		return false, e.refuseWrite(ctx, l, m, Errorf(ErrConflict,
			"writing state %s: the document's serial %d is below the head's %d: it is an older copy, and writing it would undo the versions since",
			st.Name, doc.Serial, st.HeadSerial))
	}
	return false, nil
}

// adoptable reports whether state st may adopt another lineage (issue 14
// §7): its head is the empty version of `kl state init NAME` and no plan
// was made against it (a plan relies on the lineage; a backend lock that
// wrote nothing does not).
func (e *Engine) adoptable(ctx context.Context, st State) (bool, error) {
	v, err := e.Store.GetVersion(ctx, st.Name, st.HeadSerial)
	if err != nil {
		return false, fmt.Errorf("reading head %d of state %s: %w", st.HeadSerial, st.Name, err)
	}
	if v.Provenance.Mode != CommitInit || v.Provenance.Origin != "empty" {
		return false, nil
	}
	plans, err := e.Store.ListRuns(ctx, RunQuery{State: st.Name, Kind: KindPlan, Limit: 1})
	if err != nil {
		return false, fmt.Errorf("listing plans of state %s: %w", st.Name, err)
	}
	return len(plans) == 0, nil
}

// BackendRefusal is a POST the HTTP layer refused before the engine read
// its document (a body over the cap, a Content-MD5 mismatch): Terraform
// shows only the status, so the reason goes to the lock's story too.
type BackendRefusal struct {
	State  string
	LockID string // the POST's ?ID= ("" for none)
	Actor  string // the token's actor
	// Refusal is RefusalTooLarge or RefusalContentMD5; Reason the words
	// the POST was answered with.
	Refusal, Reason string
}

// RecordBackendRefusal records in as a "backend-refused" marker in the
// story of the backend lock its ?ID= names, if any, and of each live
// write lock on the state (what `kl status` and `kl run show` show of
// it), and returns the runs it was recorded on (none when no backend
// lock holds the state: the request log alone has it). ErrNotFound for
// an unknown state; ErrInvalid for a refusal of no kind.
func (e *Engine) RecordBackendRefusal(ctx context.Context, in BackendRefusal) ([]string, error) {
	if strings.TrimSpace(in.Refusal) == "" {
		return nil, Errorf(ErrInvalid, "recording a refused write of state %s: no refusal", in.State)
	}
	if _, err := e.getState(ctx, in.State); err != nil {
		return nil, err
	}
	m := Marker{By: in.Actor, Reason: in.Reason, Extra: map[string]string{"refusal": in.Refusal, "lock_id": in.LockID}}
	return e.recordRefusal(ctx, in.State, in.LockID, m), nil
}

// recordRefusal records m (a refused POST; best effort) on the backend
// lock id names on state, if any (even one whose lease ran out: its
// Terraform's late POST), and on each write lock holding the state, and
// returns their runs.
func (e *Engine) recordRefusal(ctx context.Context, state, id string, m Marker) []string {
	var on []*heldLock
	if id != "" {
		l, err := e.findLock(ctx, state, id, true)
		if err != nil {
			e.log().Error("finding the backend lock of a refused write", "state", state, "err", err)
			return nil
		}
		if l != nil {
			on = append(on, l)
		}
	}
	locks, _, err := e.locksOn(ctx, state)
	if err != nil {
		e.log().Error("finding the backend locks of a refused write", "state", state, "err", err)
		return nil
	}
	for _, l := range locks {
		if l.mode == ModeWrite && (len(on) == 0 || on[0].run.ID != l.run.ID) {
			on = append(on, l)
		}
	}
	var runs []string
	for _, l := range on {
		_ = e.refuseWrite(ctx, l, m, nil)
		runs = append(runs, l.run.ID)
	}
	return runs
}

// refuseWrite records a refused POST in the lock's story (m with its kind
// set; best effort) and returns err.
func (e *Engine) refuseWrite(ctx context.Context, l *heldLock, m Marker, err error) error {
	m.Kind = MarkerBackendRefused
	if aerr := e.Store.AddMarkers(ctx, l.run.ID, m); aerr != nil {
		e.log().Error("recording a refused write of a backend lock", "run", l.run.ID, "err", aerr)
	}
	return err
}

// startWrite marks lock l "apply-started" on head serial head before its
// first checkpoint (unless it is already: an apply's lock, a fence), so
// that its lapsed lease fences it; a run that is no longer applying is
// ErrLocked.
func (e *Engine) startWrite(ctx context.Context, l *heldLock, head int64) error {
	if l.has(MarkerApplyStarted) {
		return nil
	}
	_, err := e.Store.UpdateRun(ctx, l.run.ID, []RunStatus{StatusApplying}, nil,
		Marker{Kind: MarkerApplyStarted, Serial: head, Extra: map[string]string{"backend": "true"}})
	var se *StatusError
	if errors.As(err, &se) {
		return Errorf(ErrLocked, "writing state %s: backend lock run %s is %s: %w", l.run.State, l.run.ID, se.Status, err)
	}
	if err != nil {
		return fmt.Errorf("recording the first write of backend lock run %s: %w", l.run.ID, err)
	}
	return nil
}

// UnlockBackend ends backend lock in.LockID: it commits the lock's last
// checkpoint as ONE version (commit mode push; provenance: the lock's
// actor, Terraform's operation, who and version, the lock's run) and
// releases the reservation; a lock that wrote nothing, or only what the
// head holds, ends "unlocked" with no version. The lock's own Terraform
// unlocking after its lease ran out still commits (lifting the fence).
//
// Force (`terraform force-unlock`, ADR 0056) lifts only live backend
// locks — the one in.LockID names, or every live backend lock on the
// state for an empty body — never a kl or klbot run's reservations, nor a
// fence, a backend lock's included (ErrConflict naming them and the `kl`
// command that lifts a fence; a fence's refusal is a
// "force-unlock-refused" marker in its story). A forced lock that wrote commits its last checkpoint,
// marked partial (its Terraform may have done more than it wrote); the
// "unlocked" marker names who forced it. Errors: ErrConflict when no such
// lock holds the state (naming what does); ErrNotFound for an unknown
// state.
func (e *Engine) UnlockBackend(ctx context.Context, in BackendUnlockInput) (*BackendUnlockOutcome, error) {
	if strings.TrimSpace(in.Actor) == "" {
		return nil, Errorf(ErrInvalid, "unlocking state %s: no actor", in.State)
	}
	if _, err := e.getState(ctx, in.State); err != nil {
		return nil, err
	}
	e.expireLeases(ctx)
	if in.ReadOnly && in.Force {
		return nil, e.readOnlyForce(ctx, in.State)
	}
	if !in.Force {
		l, err := e.findLock(ctx, in.State, in.LockID, true)
		if err != nil {
			return nil, err
		}
		if l == nil {
			return nil, e.notLocked(ctx, ErrConflict, in.State, in.LockID, "unlocking", !in.ReadOnly)
		}
		if in.ReadOnly && (l.mode != ModeRead || in.LockID != l.info.ID) {
			return nil, Errorf(ErrForbidden, "unlocking state %s: %s; the lock ID %s names %s, %s: %s",
				in.State, readOnlyRule, in.LockID, heldLockWords(l, false), lockWords(l), readOnlyWayOut(in.State, l))
		}
		if in.LockID != l.info.ID {
			// Named by its run id, which every 423 tells: not its own
			// Terraform (which sends its own lock id) but a force-unlock
			// by id — refused for a fence, recorded as forced otherwise.
			if l.fenced {
				return nil, e.refuseFenceUnlock(ctx, in, []*heldLock{l})
			}
			return e.unlock(ctx, l, in.Actor, true)
		}
		return e.unlock(ctx, l, in.Actor, false)
	}
	return e.forceUnlock(ctx, in)
}

// readOnlyRule is what a read-only caller may unlock (ADR 0059 decision
// 2), for its refusals.
const readOnlyRule = "a read-only token may release only the read lock its own `terraform plan` took, named by the ID of the lock info Terraform sends back in the UNLOCK body"

// readOnlyForce is the refusal of a read-only caller's UNLOCK without a
// lock ID (an empty body: all `terraform force-unlock` sends), naming
// what holds state — its backend locks by run id, operation and actor
// (never by Terraform's lock id, the one secret that releases a read
// lock), its kl and klbot runs — and what would unlock it.
func (e *Engine) readOnlyForce(ctx context.Context, state string) error {
	locks, others, err := e.locksOn(ctx, state)
	if err != nil {
		return err
	}
	var held []string
	for _, l := range locks {
		held = append(held, heldLockWords(l, false)+", "+lockWords(l))
	}
	for _, b := range others {
		held = append(held, blockerPhrase(b))
	}
	now := "no backend lock holds it"
	if len(held) > 0 {
		now = "it is held by " + strings.Join(held, "; ")
	}
	return Errorf(ErrForbidden, "unlocking state %s without a lock ID (an empty UNLOCK, which is all `terraform force-unlock` sends): %s; %s; "+
		"`terraform force-unlock` needs a token that may write state %s (kl token create without --read-only)", state, readOnlyRule, now, state)
}

// heldLockWords names backend lock l for a refusal: "backend lock run X
// (terraform apply by bob)", with Terraform's lock id ("ID tf-1") only
// when ids: a read-only caller must not learn the id that releases a
// read lock.
func heldLockWords(l *heldLock, ids bool) string {
	in := TerraformCommand(l.info.Operation) + " by " + orUnknown(l.run.Actor)
	if ids {
		in = "ID " + l.info.ID + ", " + in
	}
	s := fmt.Sprintf("backend lock run %s (%s)", l.run.ID, in)
	if l.fenced {
		s += ", a fence now: its lease ran out"
	}
	return s
}

// readOnlyWayOut says what unlocks lock l when a read-only caller may
// not: its own Terraform, or a force-unlock with a write token.
func readOnlyWayOut(state string, l *heldLock) string {
	if l.mode == ModeRead {
		return "the `terraform plan` that took it releases it (its UNLOCK sends Terraform's own lock ID, not the run id every 423 names), or its lease ends at " +
			l.run.LeaseUntil.UTC().Format("15:04:05 UTC")
	}
	return "its own Terraform releases it, or `terraform force-unlock` with a token that may write state " + state
}

// forceUnlock is UnlockBackend's Force: the backend locks in.LockID
// names (all, when ""), each unlocked; the outcome of the write lock's, or
// else the first's.
func (e *Engine) forceUnlock(ctx context.Context, in BackendUnlockInput) (*BackendUnlockOutcome, error) {
	locks, others, err := e.locksOn(ctx, in.State)
	if err != nil {
		return nil, err
	}
	var pick, fences []*heldLock
	for _, l := range locks {
		switch {
		case in.LockID != "" && !l.matches(in.LockID):
		case l.fenced:
			fences = append(fences, l)
		default:
			pick = append(pick, l)
		}
	}
	if len(pick) == 0 && len(fences) > 0 {
		return nil, e.refuseFenceUnlock(ctx, in, fences)
	}
	if len(pick) == 0 {
		if len(others) > 0 && (in.LockID == "" || held(others, in.LockID)) {
			var parts []string
			for _, b := range others {
				parts = append(parts, blockerPhrase(b))
			}
			return nil, Errorf(ErrConflict, "force-unlocking state %s: %s; force-unlock lifts only a backend lock (a kl or klbot run ends by itself; a fence by `kl run recover` or `kl run unfence`)",
				in.State, strings.Join(parts, "; "))
		}
		return nil, e.notLocked(ctx, ErrConflict, in.State, in.LockID, "force-unlocking", true)
	}
	var out *BackendUnlockOutcome
	for _, l := range pick {
		o, err := e.unlock(ctx, l, in.Actor, true)
		if err != nil {
			return nil, err
		}
		if out == nil || l.mode == ModeWrite {
			out = o
		}
	}
	return out, nil
}

// refuseFenceUnlock is the refusal of a force-unlock that finds only
// fences (issue 14 §3): a backend lock whose lease ran out before its
// Terraform unlocked is a fence — its Terraform may have changed real
// objects — which only `kl run recover` (it wrote a checkpoint) or `kl
// run unfence` (after checking the real objects) lifts. Each fence's
// story records it ("force-unlock-refused", by in.Actor): Terraform shows
// only the status. ErrConflict (the http backend's 409).
func (e *Engine) refuseFenceUnlock(ctx context.Context, in BackendUnlockInput, fences []*heldLock) error {
	var parts []string
	for _, l := range fences {
		how := fmt.Sprintf("it wrote no checkpoint, so there is nothing to recover: after checking the real objects, `kl run unfence %s --reason TEXT` lifts it", l.run.ID)
		if n := l.writes(); n > 0 {
			what := "its checkpoint"
			if n > 1 {
				what = fmt.Sprintf("the last of its %d checkpoints", n)
			}
			how = fmt.Sprintf("`kl run recover %s` commits %s and lifts it (or, after checking the real objects, `kl run unfence %s --reason TEXT`)", l.run.ID, what, l.run.ID)
		}
		parts = append(parts, fmt.Sprintf("backend lock run %s (%s by %s) is a fence: its lease ran out at %s before its Terraform unlocked, and its Terraform may have changed real objects; %s",
			l.run.ID, TerraformCommand(l.info.Operation), orUnknown(l.run.Actor), l.run.LeaseUntil.UTC().Format("2006-01-02T15:04:05Z"), how))
	}
	err := Errorf(ErrConflict, "force-unlocking state %s: %s; force-unlock lifts only a live backend lock, never a fence", in.State, strings.Join(parts, "; "))
	for _, l := range fences {
		m := Marker{Kind: MarkerForceUnlockRefused, By: in.Actor, Reason: err.Error()}
		if aerr := e.Store.AddMarkers(ctx, l.run.ID, m); aerr != nil {
			e.log().Error("recording a refused force-unlock of a fence", "run", l.run.ID, "err", aerr)
		}
	}
	return err
}

// held reports whether id names one of bs's runs.
func held(bs []Blocker, id string) bool {
	for _, b := range bs {
		if b.Run == id {
			return true
		}
	}
	return false
}

// unlock ends lock l for actor (force: `terraform force-unlock`): its
// last checkpoint committed, or — none, or nothing new — the lock
// released with no version.
func (e *Engine) unlock(ctx context.Context, l *heldLock, actor string, force bool) (*BackendUnlockOutcome, error) {
	if l.run.CommittedSerial != 0 {
		return nil, Errorf(ErrConflict, "unlocking state %s: backend lock run %s committed version %d already", l.run.State, l.run.ID, l.run.CommittedSerial)
	}
	how := lockEnd{by: actor, force: force}
	v, err := e.commitLock(ctx, l, how)
	if errors.Is(err, errNothingToDo) {
		return e.releaseLock(ctx, l, how)
	}
	if err != nil {
		return nil, err
	}
	r, err := e.getRun(ctx, l.run.ID)
	if err != nil {
		return nil, err
	}
	return &BackendUnlockOutcome{Run: r, Version: v}, nil
}

// lockEnd is how a backend lock ends: by whom, forced, or recovered
// (`kl run recover` of a lock whose lease ran out).
type lockEnd struct {
	by        string
	force     bool
	recovered bool
}

// marker is the lock's "unlocked" marker (none for a recovery: the
// "recovered" marker says it).
func (h lockEnd) markers() []Marker {
	if h.recovered {
		return nil
	}
	m := Marker{Kind: MarkerUnlocked, By: h.by}
	if h.force {
		m.Extra = map[string]string{"force": "true"}
	}
	return []Marker{m}
}

// releaseLock ends lock l without a version (it wrote nothing, or only
// what the head holds): a lock in progress ends applied with cause
// unlocked; a fence is lifted (by h.by, "terraform force-unlock" or
// "terraform unlock"); its reservations are released.
func (e *Engine) releaseLock(ctx context.Context, l *heldLock, h lockEnd) (*BackendUnlockOutcome, error) {
	if l.fenced {
		why := "terraform unlock: nothing written beyond the head"
		if h.force {
			why = "terraform force-unlock: nothing written beyond the head"
		}
		if _, err := e.Store.LiftFence(ctx, l.run.ID, h.by, why); err != nil && !errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("lifting the fence of backend lock run %s: %w", l.run.ID, err)
		}
	}
	r, err := e.Store.UpdateRun(ctx, l.run.ID, nil, func(r *Run) error {
		if !r.InProgress() {
			return nil // its lease ran out: it keeps that end
		}
		end := &End{Cause: CauseUnlocked}
		if h.force {
			end.By = h.by
		}
		r.Status, r.End = StatusApplied, end
		t := e.now()
		r.FinishedAt = &t
		return nil
	}, h.markers()...)
	if err != nil {
		return nil, fmt.Errorf("ending backend lock run %s: %w", l.run.ID, err)
	}
	if err := e.Store.Release(ctx, l.run.ID); err != nil {
		return nil, fmt.Errorf("releasing backend lock run %s: %w", l.run.ID, err)
	}
	r.Backend = &l.info
	return &BackendUnlockOutcome{Run: r}, nil
}

// commitLock commits lock l's last checkpoint onto the head in one
// transaction (Store.Commit): version head+1 (an adoption: the document's
// lineage and serial, ADR 0056) of the checkpoint's content, its changed
// addresses tfstate.Changed of the head and it, commit mode push; the run
// applied (or, when its lease had run out, keeping its end, no longer
// recoverable), its fence lifted, its reservation released. errNothingToDo
// when it has no checkpoint or the head already holds it.
func (e *Engine) commitLock(ctx context.Context, l *heldLock, h lockEnd) (*Version, error) {
	raw, err := e.Store.GetArtifact(ctx, l.run.ID, ArtifactApplyCheckpoint)
	if errors.Is(err, ErrNotFound) {
		return nil, errNothingToDo
	}
	if err != nil {
		return nil, fmt.Errorf("reading the checkpoint of backend lock run %s: %w", l.run.ID, err)
	}
	cp, err := tfstate.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("parsing the checkpoint of backend lock run %s: %w", l.run.ID, err)
	}
	lift := LiftCommitted
	if h.recovered || h.force {
		lift = LiftRecovered
	}
	cctx, cancel := background(ctx) // a client gone now does not stop the commit
	defer cancel()
	v, err := e.Store.Commit(cctx, CommitRequest{State: l.run.State, Run: l.run.ID, RequireReservations: true,
		Merge: func(head Version, snapshot []byte) (CommitResult, error) {
			res, err := e.lockResult(l, h, head, snapshot, cp)
			res.Lift = lift
			return res, err
		}})
	if errors.Is(err, errNothingToDo) {
		return nil, errNothingToDo
	}
	if err != nil {
		return nil, fmt.Errorf("committing backend lock run %s: %w", l.run.ID, err)
	}
	return &v, nil
}

// lockResult is the commit of checkpoint cp onto head (snapshot): the
// document, changed addresses, provenance, the run's update and markers.
func (e *Engine) lockResult(l *heldLock, h lockEnd, head Version, snapshot []byte, cp *tfstate.State) (CommitResult, error) {
	hs, err := tfstate.Parse(snapshot)
	if err != nil {
		return CommitResult{}, fmt.Errorf("parsing head %d: %w", head.Serial, err)
	}
	serial := head.Serial + 1
	var adopt *Adoption
	if cp.Lineage != hs.Lineage {
		adopt = &Adoption{Lineage: cp.Lineage, Serial: cp.Serial}
		serial = max(cp.Serial, serial)
	} else if tfstate.Equivalent(hs, cp) {
		return CommitResult{}, errNothingToDo
	}
	out := *cp
	out.Serial = serial
	doc, err := out.Marshal()
	if err != nil {
		return CommitResult{}, fmt.Errorf("encoding version %d: %w", serial, err)
	}
	changed, err := parseAddresses(tfstate.Changed(hs, &out))
	if err != nil {
		return CommitResult{}, err
	}
	return CommitResult{Snapshot: doc, Changed: changed, Resources: out.ResourceCount(), Adopt: adopt,
		Provenance: lockProvenance(l, h, head, serial, cp, adopt),
		UpdateRun:  e.lockUpdate(serial, h),
		Markers:    lockMarkers(h, head, serial, len(changed)),
	}, nil
}

// lockProvenance is the provenance of lock l's version serial onto head.
func lockProvenance(l *heldLock, h lockEnd, head Version, serial int64, cp *tfstate.State, adopt *Adoption) Provenance {
	bp := &BackendPush{Operation: l.info.Operation, Who: l.info.Who, Version: l.info.Version, LockID: l.info.ID, Writes: l.writes(), Recovered: h.recovered}
	if h.force {
		bp.ForceUnlockedBy = h.by
	}
	p := Provenance{Run: l.run.ID, SourceSerial: head.Serial, CommittedSerial: serial, Mode: CommitPush, Exact: true,
		Actor: l.run.Actor, PushedSerial: cp.Serial, Partial: h.force || h.recovered, Backend: bp}
	if adopt != nil {
		p.Adopted, p.PriorLineage = true, head.Lineage
	}
	return p
}

// lockUpdate is the commit's change to the lock's run: committed once; in
// progress, it ends applied; lease-expired (a fence recovered or
// committed late), it keeps its status and end, no longer recoverable.
func (e *Engine) lockUpdate(serial int64, h lockEnd) func(*Run) error {
	lift := LiftCommitted // its own Terraform unlocked after the lease ran out
	if h.recovered || h.force {
		lift = LiftRecovered
	}
	return func(r *Run) error {
		if r.CommittedSerial != 0 {
			return Errorf(ErrConflict, "run %s already committed version %d", r.ID, r.CommittedSerial)
		}
		r.CommittedSerial = serial
		if !r.InProgress() {
			if r.End != nil {
				end := *r.End
				end.Recoverable = false
				if len(end.Fenced) > 0 && end.Lifted == "" {
					end.Lifted = lift
				}
				r.End = &end
			}
			return nil
		}
		r.Status, r.End = StatusApplied, &End{Cause: CauseApplied}
		t := e.now()
		r.FinishedAt = &t
		return nil
	}
}

// lockMarkers are the commit's markers: "committed" (push), then
// "unlocked" — or "recovered" for a recovery.
func lockMarkers(h lockEnd, head Version, serial int64, changed int) []Marker {
	ms := []Marker{{Kind: MarkerCommitted, Serial: serial, FromSerial: head.Serial, Mode: CommitPush, Count: changed}}
	if h.recovered {
		ms = append(ms, Marker{Kind: MarkerRecovered, Serial: serial, Count: changed,
			Extra: map[string]string{extraArtifact: ArtifactApplyCheckpoint}})
	}
	return append(ms, h.markers()...)
}

// recoverLock is Recover of a backend lock's run (ADR 0056): its lease ran
// out after it wrote (or while its Terraform applied) and it is fenced;
// its last checkpoint is committed as for UNLOCK, the fence lifted
// (recovered). Refused (RecoverError) when it committed, is still held,
// or wrote nothing.
func (e *Engine) recoverLock(ctx context.Context, l *heldLock) (*ApplyOutcome, error) {
	refuse := func(err error, format string, args ...any) error {
		return &RecoverError{Run: l.run.ID, Err: err, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case l.run.CommittedSerial != 0:
		return nil, refuse(ErrConflict, "it committed version %d already", l.run.CommittedSerial)
	case l.run.InProgress():
		return nil, refuse(ErrConflict, "it is a backend lock held by %s until %s (or Terraform's UNLOCK): `terraform force-unlock %s` ends it",
			orUnknown(l.run.Actor), l.run.LeaseUntil.UTC().Format("2006-01-02T15:04:05Z"), l.run.ID)
	}
	v, err := e.commitLock(ctx, l, lockEnd{recovered: true})
	if err != nil {
		// Another recovery committed it meanwhile, and its commit deleted
		// the checkpoint (ADR 0063): say that, not "wrote nothing".
		if ce := e.committedMeanwhile(ctx, l.run.ID); ce != nil {
			return nil, ce
		}
	}
	if errors.Is(err, errNothingToDo) {
		return nil, refuse(ErrNotFound, "backend lock run %s wrote nothing the head does not hold (%d writes): nothing to recover; `kl run unfence %s --reason TEXT` lifts its fence after checking the real objects",
			l.run.ID, l.writes(), l.run.ID)
	}
	if err != nil {
		return nil, err
	}
	r, err := e.getRun(ctx, l.run.ID)
	if err != nil {
		return nil, err
	}
	return &ApplyOutcome{Run: r, Version: v}, nil
}

// ForceUnlocked reports whether an "unlocked" marker is a force-unlock.
func ForceUnlocked(m Marker) bool {
	b, _ := strconv.ParseBool(m.Extra["force"])
	return b
}

// lockWords says what kind of backend lock l is, for a refusal.
func lockWords(l *heldLock) string {
	if l.mode == ModeRead {
		return "a read lock named by its run id"
	}
	return "a write lock"
}
