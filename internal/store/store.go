// Package store holds what Kilolock's store adapters (store/sqlite and
// store/postgres) share besides the engine.Store interface: the write
// algorithms themselves (CreateState, Commit, Acquire, Renew, Release,
// the lease sweep of ExpireLeases, UpdateRun, RenewRun, AddMarkers),
// written once over an Executor of primitive statements that each adapter
// implements in its own SQL dialect (exec.go, after River's
// riverdriver.Executor); and the pure rules they use — snapshot
// compression and checks, request validation, the markers the store itself
// writes, and the compatibility rules of a store shared by binaries of
// several versions (compat.go, ADR 0048). Both adapters call these so that
// they behave alike and pass the same storetest contract suite (docs/style.md
// 2). The package does no I/O of its own: only through an Executor.
package store

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/seal"
)

// DefaultLimit is the page size of History and ListRuns when the query's
// Limit is 0 (engine.HistoryQuery, engine.RunQuery).
const DefaultLimit = 50

// Limit returns the page size for a query's limit n: DefaultLimit for 0,
// n otherwise. A negative n is engine.ErrInvalid.
func Limit(n int) (int, error) {
	switch {
	case n < 0:
		return 0, engine.Errorf(engine.ErrInvalid, "page size %d", n)
	case n == 0:
		return DefaultLimit, nil
	}
	return n, nil
}

// CompressSnapshot gzips a Terraform state document (compress/gzip,
// BestSpeed) for storage. State documents are repetitive JSON; BestSpeed
// keeps a commit's time inside the write transaction short.
func CompressSnapshot(doc []byte) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(doc)/4 + 64)
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if err != nil {
		return nil, fmt.Errorf("compressing snapshot: %w", err)
	}
	if _, err := zw.Write(doc); err != nil {
		return nil, fmt.Errorf("compressing snapshot: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compressing snapshot: %w", err)
	}
	return buf.Bytes(), nil
}

// DecompressSnapshot reverses CompressSnapshot. size, the stored
// uncompressed length (engine.Version.Size), sizes the buffer and is checked:
// a mismatch means a corrupted row.
func DecompressSnapshot(z []byte, size int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, fmt.Errorf("decompressing snapshot: %w", err)
	}
	defer zr.Close()
	buf := bytes.NewBuffer(make([]byte, 0, size))
	if _, err := io.Copy(buf, zr); err != nil {
		return nil, fmt.Errorf("decompressing snapshot: %w", err)
	}
	if int64(buf.Len()) != size {
		return nil, fmt.Errorf("decompressing snapshot: got %d bytes, stored size says %d", buf.Len(), size)
	}
	return buf.Bytes(), nil
}

// OpenDoc reverses VersionArgs for the document columns d of version
// serial of state: opens its snapshot (VersionPlace) and header
// (HeaderPlace) with kr — a clear row, stored before a key was configured,
// as it is. A sealed row kr cannot open is an error naming the version and
// the variable (seal.Keyring.Open).
func OpenDoc(kr *seal.Keyring, state string, serial int64, d StoredDoc) (StoredDoc, error) {
	var err error
	if len(d.Snapshot) > 0 {
		if d.Snapshot, err = kr.Open(VersionPlace(state, serial), d.Snapshot); err != nil {
			return StoredDoc{}, err
		}
	}
	if d.Header != nil {
		if d.Header, err = kr.Open(HeaderPlace(state, serial), d.Header); err != nil {
			return StoredDoc{}, err
		}
	}
	return d, nil
}

// CheckSnapshot checks that a snapshot about to be stored as version serial
// of a state with lineage says so itself: Terraform compares exactly these
// two fields when it applies a saved plan (docs/terraform.md "Staleness"), so a
// version whose document disagrees would break every later apply. An empty
// document (a state with no snapshot yet) and a document without the fields
// pass; a document that is not a JSON object, or that disagrees, is
// engine.ErrInvalid. It reads the top-level keys only until it has both
// fields (Terraform writes them first), so a large state costs little.
func CheckSnapshot(doc []byte, lineage string, serial int64) error {
	if len(doc) == 0 {
		return nil
	}
	gotSerial, gotLineage, err := snapshotHead(doc)
	if err != nil {
		return engine.Errorf(engine.ErrInvalid, "checking snapshot of version %d: not a state document: %v", serial, err)
	}
	if gotSerial != nil && *gotSerial != serial {
		return engine.Errorf(engine.ErrInvalid, "checking snapshot of version %d: its serial is %d, want %d", serial, *gotSerial, serial)
	}
	if gotLineage != nil && *gotLineage != lineage {
		return engine.Errorf(engine.ErrInvalid, "checking snapshot of version %d: its lineage is %q, want the state's %q", serial, *gotLineage, lineage)
	}
	return nil
}

// snapshotHead reads the top-level "serial" and "lineage" of a JSON object,
// stopping as soon as it has both.
func snapshotHead(doc []byte) (serial *int64, lineage *string, err error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	if tok, err := dec.Token(); err != nil {
		return nil, nil, err
	} else if tok != json.Delim('{') {
		return nil, nil, fmt.Errorf("want a JSON object, got %v", tok)
	}
	for dec.More() && (serial == nil || lineage == nil) {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		key, _ := tok.(string)
		switch key {
		case "serial":
			var n int64
			if err := dec.Decode(&n); err != nil {
				return nil, nil, fmt.Errorf("serial: %w", err)
			}
			serial = &n
		case "lineage":
			var l string
			if err := dec.Decode(&l); err != nil {
				return nil, nil, fmt.Errorf("lineage: %w", err)
			}
			lineage = &l
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	return serial, lineage, nil
}

// CheckNewState validates a CreateState request: a name, a lineage and a
// non-negative serial, and a snapshot that agrees with them (CheckSnapshot).
// Errors wrap engine.ErrInvalid.
func CheckNewState(init engine.NewState) error {
	switch {
	case init.Name == "":
		return engine.Errorf(engine.ErrInvalid, "state name is empty")
	case init.Lineage == "":
		return engine.Errorf(engine.ErrInvalid, "state %s: lineage is empty", init.Name)
	case init.Serial < 0:
		return engine.Errorf(engine.ErrInvalid, "state %s: serial %d is negative", init.Name, init.Serial)
	}
	return CheckSnapshot(init.Snapshot, init.Lineage, init.Serial)
}

// CheckRun validates a run before CreateRun or after an UpdateRun callback:
// an id, a known kind, a state and a status. Errors wrap engine.ErrInvalid.
func CheckRun(r engine.Run) error {
	switch {
	case r.ID == "":
		return engine.Errorf(engine.ErrInvalid, "run id is empty")
	case r.Kind != engine.KindPlan && r.Kind != engine.KindApply:
		return engine.Errorf(engine.ErrInvalid, "run %s: unknown kind %q", r.ID, r.Kind)
	case r.State == "":
		return engine.Errorf(engine.ErrInvalid, "run %s: state is empty", r.ID)
	case r.Status == "":
		return engine.Errorf(engine.ErrInvalid, "run %s: status is empty", r.ID)
	}
	return nil
}

// NewRun returns r as CreateRun stores it: times in UTC, CreatedAt now when
// zero, UpdatedAt = CreatedAt when zero.
func NewRun(r engine.Run, now time.Time) engine.Run {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = now
	}
	if r.UpdatedAt.IsZero() {
		r.UpdatedAt = r.CreatedAt
	}
	r.CreatedAt, r.UpdatedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC()
	if r.FinishedAt != nil {
		f := r.FinishedAt.UTC()
		r.FinishedAt = &f
	}
	return r
}

// StatusAllowed returns a *engine.StatusError when r's status is not one of
// from (any status passes when from is empty): the check that lets exactly
// one of two concurrent applies claim a plan (engine.Store.UpdateRun).
func StatusAllowed(r engine.Run, from []engine.RunStatus) error {
	if len(from) == 0 {
		return nil
	}
	for _, s := range from {
		if r.Status == s {
			return nil
		}
	}
	return &engine.StatusError{Run: r.ID, Kind: r.Kind, Status: r.Status, Want: from, By: r.ApplyRun}
}

// CheckAcquire validates an Acquire request: state, run, a positive lease,
// and each reservation with an address and mode read or write. Errors wrap
// engine.ErrInvalid.
func CheckAcquire(req engine.AcquireRequest) error {
	switch {
	case req.State == "":
		return engine.Errorf(engine.ErrInvalid, "state is empty")
	case req.Run == "":
		return engine.Errorf(engine.ErrInvalid, "run is empty")
	case req.Lease <= 0:
		return engine.Errorf(engine.ErrInvalid, "lease %s is not positive", req.Lease)
	}
	for _, r := range req.Reservations {
		if r.Address == "" {
			return engine.Errorf(engine.ErrInvalid, "reservation with an empty address")
		}
		if r.Mode != engine.ModeRead && r.Mode != engine.ModeWrite {
			return engine.Errorf(engine.ErrInvalid, "reservation of %s: unknown mode %q", r.Address, r.Mode)
		}
	}
	return nil
}

// Wanted returns the rows an Acquire stores: req's reservations with state,
// run, holder, acquired-at now and expires-at now+lease filled in, one per
// (address, mode).
func Wanted(req engine.AcquireRequest, now time.Time) []engine.Reservation {
	seen := make(map[engine.Reservation]bool, len(req.Reservations))
	out := make([]engine.Reservation, 0, len(req.Reservations))
	for _, r := range req.Reservations {
		key := engine.Reservation{Address: r.Address, Mode: r.Mode}
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, engine.Reservation{
			State:      req.State,
			Address:    r.Address,
			Mode:       r.Mode,
			Run:        req.Run,
			Holder:     req.Holder,
			AcquiredAt: now,
			ExpiresAt:  now.Add(req.Lease),
		})
	}
	return out
}

// InitVersion is the first version of a new state (Store.CreateState): its
// provenance says commit mode init, exact, and where it began (Origin).
func InitVersion(init engine.NewState, now time.Time) engine.Version {
	return engine.Version{
		State:     init.Name,
		Serial:    init.Serial,
		Lineage:   init.Lineage,
		CreatedAt: now,
		Changed:   engine.NewAddressSet(init.Changed...),
		Provenance: engine.Provenance{
			SourceSerial:    init.Serial,
			CommittedSerial: init.Serial,
			Mode:            engine.CommitInit,
			Exact:           true,
			Actor:           init.Actor,
			Origin:          init.Origin,
		},
		Resources: init.Resources,
		Size:      int64(len(init.Snapshot)),
	}
}

// CommitProvenance returns the provenance a commit of run at serial stores:
// Merge's, with CommittedSerial and Run filled in when Merge left them zero.
// A CommittedSerial other than serial is engine.ErrInvalid: versions grow by
// exactly one (docs/design.md "version").
func CommitProvenance(p engine.Provenance, run string, serial int64) (engine.Provenance, error) {
	if p.CommittedSerial == 0 {
		p.CommittedSerial = serial
	}
	if p.CommittedSerial != serial {
		return p, engine.Errorf(engine.ErrInvalid, "provenance says committed serial %d, but the commit writes %d", p.CommittedSerial, serial)
	}
	if p.Run == "" {
		p.Run = run
	}
	return p, nil
}

// ReleasedMarker is the "released" marker the store appends when it drops
// count reservations of a run (Release, Commit).
func ReleasedMarker(count int, at time.Time) engine.Marker {
	return engine.Marker{Kind: engine.MarkerReleased, At: at, Count: count}
}

// Fence is what the lease sweep fenced of one run (ADR 0035): the write
// addresses kept as fences, and when the run's Terraform started. Zero when
// it fenced nothing.
type Fence struct {
	Addresses        engine.AddressSet
	TerraformStarted time.Time
}

// FenceLiftedMarker is the "fence-lifted" marker of a run whose fences were
// deleted at at: how (lift), and for an unfence who (by) and why.
func FenceLiftedMarker(fences []engine.Reservation, lift engine.Lift, by, why string, at time.Time) engine.Marker {
	return engine.Marker{Kind: engine.MarkerFenceLifted, At: at, Addresses: reservedAddresses(fences), Lift: lift, By: by, Reason: why}
}

// LeaseExpiredMarker is the "lease-expired" marker the store appends to a run
// whose reservations on addrs lapsed because their lease ended at at (the
// marker's time: when they expired, not when the sweep saw it): dropped,
// or (f) kept as fences, which its End names.
func LeaseExpiredMarker(addrs engine.AddressSet, f Fence, at time.Time) engine.Marker {
	m := engine.Marker{Kind: engine.MarkerLeaseExpired, At: at, Addresses: engine.NewAddressSet(addrs...)}
	if len(f.Addresses) > 0 {
		m.End = &engine.End{Cause: engine.CauseLeaseExpired, Fenced: f.Addresses, TerraformStarted: f.TerraformStarted.UTC()}
	}
	return m
}

// ExpireRun changes r for the lease on its reservations, held by holder,
// that ended at ended (the latest expires_at of the reservations that
// lapsed) and was swept at now, leaving f fenced: an open run becomes
// lease-expired and finished, its end naming the holder, when the lease ran
// out and what stays fenced; a closed run keeps its status. It reports
// whether r changed.
func ExpireRun(r *engine.Run, holder engine.Holder, ended, now time.Time, f Fence) bool {
	if !r.Status.Open() {
		return false
	}
	r.Status = engine.StatusLeaseExpired
	r.End = &engine.End{Cause: engine.CauseLeaseExpired, Holder: holder, LeaseEnd: ended.UTC().Truncate(time.Second)}
	if len(f.Addresses) > 0 {
		r.End.Fenced, r.End.TerraformStarted = f.Addresses, f.TerraformStarted.UTC()
	}
	if r.FinishedAt == nil {
		t := now
		r.FinishedAt = &t
	}
	r.UpdatedAt = now
	return true
}

// RunLeaseLapsed reports whether the lease sweep at now ends r by its own
// lease (engine.Run.LeaseUntil): r is in progress (engine.Run.InProgress),
// its LeaseUntil is set and not after now, and it holds no live reservation
// (holdsLive, read in the sweep's transaction: while it holds some, their
// lease rules, and ExpireRun ends the run when it ends). A zero LeaseUntil —
// a run stored by a kl without run leases — never lapses.
func RunLeaseLapsed(r engine.Run, holdsLive bool, now time.Time) bool {
	return r.InProgress() && !r.LeaseUntil.IsZero() && !r.LeaseUntil.After(now) && !holdsLive
}

// ExpireRunLease ends r, whose own lease lapsed (RunLeaseLapsed), at now:
// status lease-expired, finished, an end naming the holder, what the run
// was doing and when its lease ran out. It returns the "lease-expired"
// marker to append (no addresses: the run held no reservation).
func ExpireRunLease(r *engine.Run, now time.Time) engine.Marker {
	phase := map[engine.RunStatus]engine.Phase{
		engine.StatusPlanning: engine.PhasePlanning,
		engine.StatusWaiting:  engine.PhaseWaiting,
		engine.StatusApplying: engine.PhaseApplying,
	}[r.Status]
	r.Status = engine.StatusLeaseExpired
	r.End = &engine.End{Cause: engine.CauseLeaseExpired, Holder: r.Holder, LeaseEnd: r.LeaseUntil.UTC().Truncate(time.Second), Phase: phase}
	if r.FinishedAt == nil {
		t := now
		r.FinishedAt = &t
	}
	r.UpdatedAt = now
	end := *r.End
	at := now
	if !r.LeaseUntil.IsZero() && r.LeaseUntil.Before(now) {
		at = r.LeaseUntil // when its lease ran out, not when the sweep saw it
	}
	return engine.Marker{Kind: engine.MarkerLeaseExpired, At: at, End: &end}
}

// RenewRunLease is RenewRun's change to r at now: LeaseUntil = now+lease
// while r is in progress, else engine.ErrLeaseLost.
func RenewRunLease(r *engine.Run, lease time.Duration, now time.Time) error {
	if !r.InProgress() {
		return engine.Errorf(engine.ErrLeaseLost, "%s run %s is %s, no longer in progress", r.Kind, r.ID, r.Status)
	}
	r.LeaseUntil = now.Add(lease)
	return nil
}

// CheckLease validates the lease of Renew and RenewRun: positive, else
// engine.ErrInvalid.
func CheckLease(lease time.Duration) error {
	if lease <= 0 {
		return engine.Errorf(engine.ErrInvalid, "lease %s is not positive", lease)
	}
	return nil
}

// AcquireAllowed checks that run r may take reservations: it is open (a
// finished run, or one the lease sweep just ended, takes nothing), else a
// *engine.StatusError.
func AcquireAllowed(r engine.Run) error {
	if r.Status.Open() {
		return nil
	}
	return &engine.StatusError{Run: r.ID, Kind: r.Kind, Status: r.Status, Want: []engine.RunStatus{engine.StatusWaiting, engine.StatusApplying}, By: r.ApplyRun}
}

// ReleaseExpiredPlan hands back plan, claimed by apply run a which the
// lease sweep has just expired (ExpireRun, ExpireRunLease) at now; ended is
// when a's lease ran out. Only a plan still applying and claimed by a
// (ApplyRun) changes. If a never held its reservations (reserved is false:
// it has no "reserved" marker, so Terraform never ran) the plan goes back to
// planned and may be applied again — ApplyRun keeps naming the attempt, as
// the engine's own refusals do; otherwise Terraform may have changed
// infrastructure, and the plan fails with an end saying so — and, when
// Terraform had started (started: a has an "apply-started" marker), how to
// commit what it wrote (End.Recoverable). It reports whether plan
// changed.
func ReleaseExpiredPlan(plan *engine.Run, a engine.Run, reserved, started bool, ended, now time.Time) bool {
	if plan.Kind != engine.KindPlan || plan.Status != engine.StatusApplying || plan.ApplyRun != a.ID {
		return false
	}
	switch {
	case started, reserved:
		plan.Status = engine.StatusFailed
		plan.End = &engine.End{Cause: engine.CauseApplyLeaseExpired, Run: a.ID, Holder: a.Holder, LeaseEnd: ended.UTC().Truncate(time.Second), Recoverable: started}
		if a.End != nil {
			plan.End.Fenced = a.End.Fenced
		}
	default:
		plan.Status = engine.StatusPlanned
	}
	plan.UpdatedAt = now
	return true
}

// NoteApplyStarted marks the end of apply run a, which the lease sweep has
// just expired (ExpireRun, ExpireRunLease) after Terraform had started (an
// "apply-started" marker) and before it committed, recoverable: `kl run
// recover` commits what Terraform wrote (End.Recoverable). A run that
// committed, or is marked already, is left alone. It reports whether a
// changed.
func NoteApplyStarted(a *engine.Run) bool {
	if a.Kind != engine.KindApply || a.Status != engine.StatusLeaseExpired || a.CommittedSerial != 0 || (a.End != nil && a.End.Recoverable) {
		return false
	}
	if a.End == nil {
		a.End = &engine.End{Cause: engine.CauseLeaseExpired}
	}
	a.End.Recoverable = true
	return true
}
