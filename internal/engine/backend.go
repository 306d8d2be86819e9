package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// Terraform's http backend on Kilolock's states (issue 14 §3, §4, §7; ADR
// 0056). A LOCK is a run of its own kind — an apply run without a plan
// whose first marker is "backend-lock", holding Terraform's LockInfo —
// that reserves the whole state ("*": read for OperationTypePlan, write
// otherwise), all or none, never waiting (Terraform retries with
// -lock-timeout). Its lease (Engine.BackendLockTTL) is never renewed:
// Terraform never renews an http lock. Each POST under a write lock is a
// checkpoint of the run (ArtifactApplyCheckpoint, overwritten), not a
// version: Terraform writes state several times in one apply. UNLOCK
// commits the last checkpoint as ONE version, commit mode push. A lock
// that wrote, or whose Terraform applies, carries an "apply-started"
// marker, so that when its lease runs out the lease sweep fences it (ADR
// 0035) and `kl run recover` commits its last checkpoint.

// DefaultBackendLockTTL is a backend lock's lease when
// Engine.BackendLockTTL is zero (issue 14 §3; KL_BACKEND_LOCK_TTL).
const DefaultBackendLockTTL = time.Hour

// Terraform's operations (LockInfo.Operation) the engine tells apart: a
// plan takes a read lock; an apply's Terraform changes real objects, so
// its lock is fenced by its lease's end even before it wrote (ADR 0056).
const (
	OperationTypePlan  = "OperationTypePlan"
	OperationTypeApply = "OperationTypeApply"
)

// Markers of backend locks (ADR 0056).
const (
	// MarkerBackendLock is a backend lock's first marker: By (the
	// token's actor), Extra (LockInfo: "id", "operation", "info", "who",
	// "version", "created", "path"; "mode": read or write).
	MarkerBackendLock MarkerKind = "backend-lock"
	// MarkerBackendWrite is one POST stored as the lock's checkpoint:
	// Serial (the document's serial), Count (its resources),
	// Extra["lineage"] and, when it adopts another lineage (ADR 0056),
	// Extra["adopt"] "true".
	MarkerBackendWrite MarkerKind = "backend-write"
	// MarkerBackendRefused is a POST refused under the lock (Terraform
	// shows only "HTTP error: 409"): By (the POST's actor, when known),
	// Extra["refusal"] (read-lock, lineage, serial, not-state, too-large,
	// content-md5, lock-id), Extra["lock_id"] (the POST's ?ID=, for the
	// last three), Serial (the document's serial),
	// FromSerial (the head's), Extra["lineage"] and Extra["state_lineage"],
	// Reason (the parse error of a document that is not a state).
	MarkerBackendRefused MarkerKind = "backend-refused"
	// MarkerForceUnlockRefused is a `terraform force-unlock` refused
	// because the lock is a fence now (its lease ran out before its
	// Terraform unlocked): By (who asked), Reason (the refusal's words,
	// naming `kl run recover` or `kl run unfence`). Terraform shows only
	// "Unexpected HTTP response code 409".
	MarkerForceUnlockRefused MarkerKind = "force-unlock-refused"
	// MarkerUnlocked is the lock's end: By (who unlocked),
	// Extra["force"] "true" for `terraform force-unlock`.
	MarkerUnlocked MarkerKind = "unlocked"
)

// CauseUnlocked: a backend lock ended with nothing to commit (it wrote
// nothing, or what it wrote is the head); By, when another actor forced
// it (`terraform force-unlock`).
const CauseUnlocked Cause = "unlocked"

// Refusals of a POST (MarkerBackendRefused's Extra["refusal"]).
const (
	RefusalReadLock = "read-lock"
	RefusalLineage  = "lineage"
	RefusalSerial   = "serial"
	RefusalNotState = "not-state"
	// Refused before the engine read the document (RecordBackendRefusal):
	// a body over the server's cap (413), a Content-MD5 mismatch (400);
	// and a POST whose ?ID= names no write lock holding the state (423),
	// recorded on the write lock that does hold it. Reason says why in
	// words; Extra["lock_id"] is the POST's ?ID=.
	RefusalTooLarge   = "too-large"
	RefusalContentMD5 = "content-md5"
	RefusalLockID     = "lock-id"
)

// ErrLocked: the state is held by another run (a backend lock, a kl or
// klbot run, a fence), or a write came without the live write lock it
// needs: the http backend's 423.
var ErrLocked = errors.New("locked")

// LockInfo is Terraform's statemgr.LockInfo as the http backend sends it
// (the JSON body of LOCK and UNLOCK; hashicorp/terraform
// internal/states/statemgr/locker.go).
type LockInfo struct {
	ID        string    `json:"ID"`
	Operation string    `json:"Operation"`
	Info      string    `json:"Info"`
	Who       string    `json:"Who"`
	Version   string    `json:"Version"`
	Created   time.Time `json:"Created"`
	Path      string    `json:"Path"`
}

// BackendLockInput is one LOCK.
type BackendLockInput struct {
	State string
	Actor string   // the token's actor
	Info  LockInfo // as Terraform sent it (ID is Terraform's own lock id)
	// Write is false only for Operation OperationTypePlan (a read lock).
	Write bool
}

// BackendLock is a held backend lock: its run (whose id 423 answers name
// as ID) and Terraform's LockInfo as stored.
type BackendLock struct {
	Run  Run
	Info LockInfo
}

// BackendLockedError is the http backend's 423: State is held. Holder is
// the LockInfo to send back — ID the holding Kilolock run's id (Terraform
// prints only that), Operation, Who and Version Terraform's for a backend
// lock ("apply", the actor and "kilolock" for a kl or klbot run), Info the
// holders in words. Blockers are every live run in the way. It unwraps to
// ErrLocked.
type BackendLockedError struct {
	State    string
	Holder   LockInfo
	Blockers []Blocker
}

func (e *BackendLockedError) Error() string {
	return fmt.Sprintf("state %s is locked: %s", e.State, e.Holder.Info)
}

// Unwrap makes errors.Is(err, ErrLocked) true.
func (e *BackendLockedError) Unwrap() error { return ErrLocked }

// Writes reports whether a lock of Terraform's operation op writes: all
// but OperationTypePlan (issue 14 §3).
func Writes(op string) bool { return op != OperationTypePlan }

func (e *Engine) backendTTL() time.Duration {
	if e.BackendLockTTL > 0 {
		return e.BackendLockTTL
	}
	return DefaultBackendLockTTL
}

// LockBackend takes a whole-state reservation ("*", write, or read when
// !in.Write) for a new backend-lock run, all or none, never waiting. The
// lease is Engine.BackendLockTTL, never renewed. A lock whose operation is
// OperationTypeApply is marked "apply-started" at once (its Terraform
// changes real objects: a lapsed lease fences it). Errors:
// *BackendLockedError (ErrLocked) when held — by another backend lock, a
// kl or klbot run, or a fence; ErrNotFound for an unknown state;
// ErrInvalid for bad input (no actor, no lock id).
func (e *Engine) LockBackend(ctx context.Context, in BackendLockInput) (*BackendLock, error) {
	if strings.TrimSpace(in.Actor) == "" {
		return nil, Errorf(ErrInvalid, "locking state %s: no actor", in.State)
	}
	if strings.TrimSpace(in.Info.ID) == "" {
		return nil, Errorf(ErrInvalid, "locking state %s: the lock info has no ID", in.State)
	}
	if _, err := e.getState(ctx, in.State); err != nil {
		return nil, err
	}
	mode := ModeWrite
	if !in.Write {
		mode = ModeRead
	}
	want := []Reservation{{Address: AllAddresses, Mode: mode}}
	// Refused without a run while held: Terraform retries LOCK until its
	// -lock-timeout, and each attempt would leave a refused run.
	e.expireLeases(ctx)
	held, err := e.Store.Reservations(ctx, in.State)
	if err != nil {
		return nil, fmt.Errorf("reading reservations of state %s: %w", in.State, err)
	}
	if bs := Conflicts("", want, held); len(bs) > 0 {
		return nil, e.backendLocked(ctx, in.State, bs)
	}
	now := e.now()
	ttl := e.backendTTL()
	run := Run{ID: NewRunID(), Kind: KindApply, State: in.State, Actor: in.Actor, Holder: e.Holder,
		Status: StatusWaiting, CreatedAt: now, UpdatedAt: now, LeaseUntil: now.Add(ttl)}
	if err := e.Store.CreateRun(ctx, run); err != nil {
		return nil, fmt.Errorf("creating the run of a backend lock on state %s: %w", in.State, err)
	}
	if err := e.Store.AddMarkers(ctx, run.ID, lockMarker(in, mode)); err != nil {
		return nil, e.endLock(ctx, run.ID, Failed(StepRecordOperation, err), fmt.Errorf("recording backend lock of run %s: %w", run.ID, err))
	}
	res, err := e.Store.Acquire(ctx, AcquireRequest{State: in.State, Run: run.ID, Holder: e.Holder, Reservations: want, Lease: ttl})
	if err != nil {
		var ce *ConflictError
		if !errors.As(err, &ce) {
			return nil, e.endLock(ctx, run.ID, Failed(StepAcquire, err), fmt.Errorf("acquiring the backend lock of run %s: %w", run.ID, err))
		}
		end := &End{Cause: CauseRefusedConflict, Blockers: ce.Blockers}
		if fenced(ce.Blockers) {
			end.Cause = CauseRefusedFenced
		}
		lerr := e.backendLocked(ctx, in.State, ce.Blockers)
		return nil, e.endLock(ctx, run.ID, end, lerr)
	}
	return e.locked(ctx, run, in, res)
}

// lockMarker is the "backend-lock" marker of in.
func lockMarker(in BackendLockInput, mode ReservationMode) Marker {
	i := in.Info
	x := map[string]string{"id": i.ID, "operation": i.Operation, "info": i.Info, "who": i.Who, "version": i.Version,
		"path": i.Path, "mode": string(mode)}
	if !i.Created.IsZero() {
		x["created"] = i.Created.UTC().Format(time.RFC3339Nano)
	}
	return Marker{Kind: MarkerBackendLock, By: in.Actor, Extra: x}
}

// locked records the lock's reservation (status applying, a "reserved"
// marker; "apply-started" on the head for an apply's lock).
func (e *Engine) locked(ctx context.Context, run Run, in BackendLockInput, res AcquireResult) (*BackendLock, error) {
	ms := []Marker{{Kind: MarkerReserved, Count: len(res.Held), Addresses: reservedAddresses(res.Held)}}
	if in.Write && in.Info.Operation == OperationTypeApply {
		st, err := e.getState(ctx, in.State)
		if err != nil {
			return nil, e.endLock(ctx, run.ID, Failed(StepReadState, err), err)
		}
		ms = append(ms, Marker{Kind: MarkerApplyStarted, Serial: st.HeadSerial, Extra: map[string]string{"backend": "true"}})
	}
	r, err := e.Store.UpdateRun(ctx, run.ID, applyInProgress, func(r *Run) error {
		r.Status, r.End = StatusApplying, nil
		return nil
	}, ms...)
	if err != nil {
		return nil, e.endLock(ctx, run.ID, Failed(StepRecordReservations, err), fmt.Errorf("recording the backend lock of run %s: %w", run.ID, err))
	}
	info := in.Info
	r.Backend = &info
	return &BackendLock{Run: r, Info: info}, nil
}

// endLock ends a backend lock's run that never held its lock (refused or
// failed) with end, releases what it may hold, and returns err.
func (e *Engine) endLock(ctx context.Context, id string, end *End, err error) error {
	bctx, cancel := background(ctx)
	defer cancel()
	status := StatusFailed
	if end.Cause == CauseRefusedConflict || end.Cause == CauseRefusedFenced {
		status = StatusRefused
	}
	if _, uerr := e.Store.UpdateRun(bctx, id, inProgress, func(r *Run) error {
		r.Status, r.End = status, end
		t := e.now()
		r.FinishedAt = &t
		return nil
	}, Marker{Kind: MarkerFailed, End: end}); uerr != nil {
		e.log().Error("recording end of backend lock run", "run", id, "err", uerr)
	}
	if rerr := e.Store.Release(bctx, id); rerr != nil {
		e.log().Error("releasing reservations", "run", id, "err", rerr)
	}
	return err
}

// backendLocked is the 423 of state held by bs: the blockers named (their
// backend locks' LockInfo) and the holder's LockInfo for Terraform.
func (e *Engine) backendLocked(ctx context.Context, state string, bs []Blocker) error {
	for i := range bs {
		bs[i].Addresses = reservedAddresses(bs[i].Held)
	}
	e.nameBlockers(ctx, bs)
	return &BackendLockedError{State: state, Holder: HolderInfo(bs), Blockers: bs}
}

// HolderInfo is the LockInfo a 423 answers for blockers bs (at least
// one): the first blocker's run id as ID (Terraform prints only
// "already locked: ID=…"), its Terraform's Operation, Who and Version
// when it is a backend lock, else "apply", its actor and "kilolock"; Info
// names every blocker in words (run, kind, actor, PR, what it holds, or
// that it is a fence and how to lift it).
func HolderInfo(bs []Blocker) LockInfo {
	if len(bs) == 0 {
		return LockInfo{}
	}
	b := bs[0]
	out := LockInfo{ID: b.Run, Operation: "apply", Who: b.Actor, Version: "kilolock"}
	if b.Backend != nil {
		out.Operation, out.Who, out.Version, out.Created, out.Path = b.Backend.Operation, b.Backend.Who, b.Backend.Version, b.Backend.Created, b.Backend.Path
	}
	var parts []string
	for _, b := range bs {
		parts = append(parts, blockerPhrase(b))
	}
	out.Info = strings.Join(parts, "; also ")
	return out
}

// blockerPhrase: "backend lock run X by bob (terraform apply,
// OperationTypeApply, Terraform 1.11.4) holds *", "kl apply run X by
// alice for acme/infra#12 holds A, B", "run X fences A (…)".
func blockerPhrase(b Blocker) string {
	var who string
	switch {
	case b.Backend != nil:
		who = fmt.Sprintf("backend lock run %s by %s (%s)", b.Run, orUnknown(b.Actor), lockWhat(*b.Backend))
	default:
		who = "kl apply run " + b.Run
		if b.Actor != "" {
			who += " by " + b.Actor
		}
		if b.PR != nil {
			who += " for " + b.PR.String()
		}
	}
	addrs := strings.Join(b.Addresses.Strings(), ", ")
	switch {
	case b.Fenced && b.Backend != nil && b.Lock != nil && b.Lock.Writes == 0:
		// A lapsed backend lock with no checkpoint: nothing to recover
		// (ADR 0056 decision 6).
		return fmt.Sprintf("%s fences %s: its lease ran out without an UNLOCK and it wrote no checkpoint, so there is nothing to recover; after checking the real objects, `kl run unfence %s --reason TEXT` lifts it", who, addrs, b.Run)
	case b.Fenced && b.Backend != nil:
		return fmt.Sprintf("%s fences %s: its lease ran out without an UNLOCK; `kl run recover %s` commits its last checkpoint", who, addrs, b.Run)
	case b.Fenced:
		return fmt.Sprintf("%s fences %s: its holder died while its Terraform ran; `kl run recover %s` commits what it last wrote", who, addrs, b.Run)
	}
	return who + " holds " + addrs
}

// lockWhat: "terraform apply, OperationTypeApply, Terraform 1.11.4".
func lockWhat(i LockInfo) string {
	parts := []string{TerraformCommand(i.Operation)}
	if parts[0] != i.Operation && i.Operation != "" {
		parts = append(parts, i.Operation)
	}
	if i.Version != "" {
		parts = append(parts, "Terraform "+i.Version)
	}
	return strings.Join(parts, ", ")
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown actor"
	}
	return s
}

// TerraformCommand is the Terraform command that locks a state with
// operation op (hashicorp/terraform: backend.OperationType names, the
// reasons of command/clistate's locker): "terraform apply" for
// OperationTypeApply, "terraform state rm" for "state-rm", …; op itself
// when it is none of them.
func TerraformCommand(op string) string {
	switch op {
	case OperationTypeApply:
		return "terraform apply"
	case OperationTypePlan:
		return "terraform plan"
	case "OperationTypeRefresh":
		return "terraform refresh"
	case "OperationTypeInvalid":
		return "terraform import (or console, state show)"
	case "state-rm", "state-mv", "state-push", "state-replace-provider":
		return "terraform state " + strings.TrimPrefix(op, "state-")
	case "taint", "untaint":
		return "terraform " + op
	case "migration destination state":
		return "terraform init -migrate-state"
	case "workspace-new":
		return "terraform workspace new"
	case "":
		return "an unnamed operation"
	}
	return op
}

// BackendLockOf returns the "backend-lock" marker among ms (a run's
// markers), or nil: the run is not a backend lock (ADR 0056).
func BackendLockOf(ms []Marker) *Marker {
	for i := range ms {
		if ms[i].Kind == MarkerBackendLock {
			return &ms[i]
		}
	}
	return nil
}

// ForceUnlockRefusalOf returns the last "force-unlock-refused" marker
// among ms (a fenced backend lock's markers), or nil.
func ForceUnlockRefusalOf(ms []Marker) *Marker {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].Kind == MarkerForceUnlockRefused {
			return &ms[i]
		}
	}
	return nil
}

// LockInfoOf is the LockInfo a "backend-lock" marker stored.
func LockInfoOf(m Marker) LockInfo {
	x := m.Extra
	i := LockInfo{ID: x["id"], Operation: x["operation"], Info: x["info"], Who: x["who"], Version: x["version"], Path: x["path"]}
	if t, err := time.Parse(time.RFC3339Nano, x["created"]); err == nil {
		i.Created = t
	}
	return i
}

// BackendHead is the head's document of state (the bytes Terraform GETs:
// always a document with a lineage, even the empty version of `kl state
// init NAME`) and its serial. ErrNotFound for an unknown state.
func (e *Engine) BackendHead(ctx context.Context, state string) ([]byte, int64, error) {
	st, err := e.getState(ctx, state)
	if err != nil {
		return nil, 0, err
	}
	doc, err := e.Store.Snapshot(ctx, state, st.HeadSerial)
	if err != nil {
		return nil, 0, fmt.Errorf("reading snapshot %d of state %s: %w", st.HeadSerial, state, err)
	}
	return doc, st.HeadSerial, nil
}

// docHead reads a POSTed document: ErrInvalid when it is not JSON,
// ErrConflict when it is JSON but not a state v4 document; why is what
// was wrong with it, for the refusal's marker.
func docHead(state string, doc []byte) (st *tfstate.State, why string, err error) {
	if !json.Valid(doc) {
		return nil, "the body is not JSON", Errorf(ErrInvalid, "writing state %s: the body is not JSON", state)
	}
	st, err = tfstate.Parse(doc)
	if err != nil {
		return nil, err.Error(), Errorf(ErrConflict, "writing state %s: not a Terraform state v4 document: %v", state, err)
	}
	return st, "", nil
}
