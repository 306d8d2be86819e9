package engine

import (
	"context"
	"time"
)

// Store persists states, versions, runs, markers, artifacts and
// reservations. The sqlite and postgres adapters implement it and both pass
// storetest.Run; a behaviour one has and the other lacks is a bug (docs/style.md 2).
//
// Errors: a missing record → ErrNotFound; a uniqueness or status collision →
// ErrConflict (a *ConflictError for reservations, a *StatusError for runs).
// Every method takes ctx first and honours its cancellation.
type Store interface {
	// CreateState stores a new state with its first version (serial
	// init.Serial, CommitInit) and snapshot. ErrConflict if the name exists.
	CreateState(ctx context.Context, init NewState) (State, error)
	// GetState returns the named state with its current head serial.
	GetState(ctx context.Context, name string) (State, error)
	// ListStates returns every state, by name.
	ListStates(ctx context.Context) ([]State, error)

	// GetVersion returns one version (without its snapshot).
	GetVersion(ctx context.Context, state string, serial int64) (Version, error)
	// Snapshot returns the Terraform state v4 document of a version.
	Snapshot(ctx context.Context, state string, serial int64) ([]byte, error)
	// Slice returns the document of version serial of state holding only
	// the resource entries at addresses (a resource's entry, or the entry
	// holding an instance) with the version's serial, lineage and outputs:
	// the native lane's fetch (ADR 0068; issue 17). An address without
	// module instance keys (`module.app.x.y`, as the configuration names
	// it) reads every module instance's entry of the resource; one with
	// keys, that instance's. An address without an entry is left out. ErrNotFound if unknown; ErrInvalid for an address
	// that names no resource.
	Slice(ctx context.Context, state string, serial int64, addresses []Address) ([]byte, error)
	// History returns versions newest first: serial < q.Before (0: from the
	// head), at most q.Limit (0: 50).
	History(ctx context.Context, state string, q HistoryQuery) ([]Version, error)
	// VersionsAfter returns every version with serial > after, oldest first,
	// with its changed addresses: the since-plan input (ADR D3).
	VersionsAfter(ctx context.Context, state string, after int64) ([]Version, error)
	// Commit writes version head+1 in ONE transaction (docs/design.md apply step
	// 6): lock the state head, call req.Merge with the head and its snapshot,
	// insert the returned snapshot as head+1 with its changed addresses and
	// provenance, apply req.Run's update and markers, lift the run's fences
	// (a "fence-lifted" marker, CommitResult.Lift) and release its
	// reservations (a "released" marker). If Merge fails nothing is
	// written. ErrLeaseLost if the run holds neither a live reservation nor
	// a fence on the state and req.RequireReservations is set.
	Commit(ctx context.Context, req CommitRequest) (Version, error)

	// CreateRun stores a new run. ErrConflict if the id exists.
	CreateRun(ctx context.Context, r Run) error
	// GetRun returns a run. ErrNotFound if unknown.
	GetRun(ctx context.Context, id string) (Run, error)
	// ListRuns returns runs newest first, filtered by q.
	ListRuns(ctx context.Context, q RunQuery) ([]Run, error)
	// UpdateRun reads run id under a row lock, checks its status is one of
	// from (any if empty; otherwise a *StatusError), calls fn to change it,
	// writes it back with UpdatedAt set, appends markers, and returns it —
	// all in one transaction. This is how a plan is claimed by exactly one
	// apply.
	UpdateRun(ctx context.Context, id string, from []RunStatus, fn func(*Run) error, markers ...Marker) (Run, error)
	// AddMarkers appends markers to a run; Seq and (if zero) At are set by the store.
	AddMarkers(ctx context.Context, run string, markers ...Marker) error
	// Markers returns a run's markers in Seq order.
	Markers(ctx context.Context, run string) ([]Marker, error)

	// PutArtifact stores a named blob of a run (saved plan, config archive,
	// intent). Artifacts hold secrets: server-side only, never printed.
	PutArtifact(ctx context.Context, run, name string, data []byte) error
	// GetArtifact returns a blob stored by PutArtifact. ErrNotFound if absent.
	GetArtifact(ctx context.Context, run, name string) ([]byte, error)

	// Acquire takes all of req.Reservations for req.Run or none (ADR D2 /
	// docs/design.md apply step 2), in one transaction that first runs the lease
	// sweep (see ExpireLeases). On conflict it returns a *ConflictError
	// naming the blocking runs and addresses. A run that is no longer open
	// (finished, or just expired by the sweep) takes nothing: a *StatusError.
	// On success it returns the reservations held by other runs at that
	// moment, for the allowed-because facts.
	Acquire(ctx context.Context, req AcquireRequest) (AcquireResult, error)
	// Renew extends every reservation of run by lease from now. ErrLeaseLost
	// if the run holds none (they expired and were taken away).
	Renew(ctx context.Context, run string, lease time.Duration) error
	// Release drops every reservation of run held by a lease and writes a
	// "released" marker when it held any. It never drops a fence: a run
	// whose Terraform state is in doubt does not free its write set by
	// failing (ADR 0035). Releasing nothing is not an error.
	Release(ctx context.Context, run string) error
	// LiftFence deletes run's fences without a commit (`kl run unfence`, ADR
	// 0035) and appends a "fence-lifted" marker (LiftUnfenced, by, why),
	// in one transaction under the run's lock. It returns the addresses
	// lifted. ErrNotFound if the run is unknown or holds no fence;
	// ErrInvalid for an empty by or why.
	LiftFence(ctx context.Context, run, by, why string) (AddressSet, error)
	// Reservations lists live reservations, fences included (of one state,
	// or all if "").
	Reservations(ctx context.Context, state string) ([]Reservation, error)
	// RenewRun extends the run's own lease (Run.LeaseUntil) to now+lease, by
	// the store's clock, while the run is in progress (Run.InProgress).
	// ErrLeaseLost if it is not — it finished, or the lease sweep ended it;
	// ErrNotFound if unknown; ErrInvalid for a lease <= 0. It changes
	// nothing else (not UpdatedAt) and writes no marker.
	RenewRun(ctx context.Context, run string, lease time.Duration) error
	// ExpireLeases is the lease sweep, in one transaction: it drops
	// reservations whose lease ended before now and marks their runs
	// lease-expired (status when open, and a marker) — except the write
	// reservations of an apply run whose Terraform started (an
	// "apply-started" marker) and that has not committed: those become
	// fences (Reservation.FencedAt; End.Fenced and the marker's End name
	// them), live until Commit or LiftFence deletes them (ADR 0035); it ends runs in
	// progress whose own lease (Run.LeaseUntil, when set) ended and that
	// hold no live reservation (status, end, marker); and it hands the
	// plan an expired apply run had claimed back — planned when the apply
	// never held its reservations (no "reserved" marker: Terraform never
	// ran), failed otherwise (Terraform may have changed infrastructure);
	// when the apply has an "apply-started" marker, the plan's and the
	// run's ends are recoverable (End.Recoverable: `kl run recover RUN`).
	// It returns the runs it expired, sorted; each is expired, and marked,
	// once, however many sweeps race.
	ExpireLeases(ctx context.Context) ([]string, error)

	// Close releases the store's connections.
	Close() error
}

// NewState is the first version of a state.
type NewState struct {
	Name     string
	Lineage  string
	Serial   int64
	Snapshot []byte
	// Changed is the first version's changed set: every address in the snapshot.
	Changed   AddressSet
	Resources int
	Actor     string
	// Origin is "empty" or "file" (Provenance.Origin of the init version).
	Origin string
}

// HistoryQuery pages through versions newest first.
type HistoryQuery struct {
	Before int64 // only serials < Before; 0 = from the head
	Limit  int   // 0 = 50
}

// RunQuery filters ListRuns.
type RunQuery struct {
	State    string      // "" = all states
	Kind     RunKind     // "" = both kinds
	Statuses []RunStatus // empty = any
	Before   string      // only ids < Before (paging); "" = newest
	Limit    int         // 0 = 50
}

// CommitRequest is one commit (see Store.Commit).
type CommitRequest struct {
	State string
	Run   string
	// RequireReservations makes the commit fail with ErrLeaseLost when the
	// run's reservations have expired (another run may have taken them).
	RequireReservations bool
	// Merge computes the new version from the head inside the transaction.
	Merge func(head Version, snapshot []byte) (CommitResult, error)
	// MergeReads, when not nil, names the resources (resource-level
	// addresses, tfstate.MergeReads) the merge reads from the head. A store
	// whose head is a manifest of entries (ADR 0068) may then give Merge a
	// snapshot holding the head's header and only those resources' entries
	// (every module instance of each); Merge's CommitResult.Snapshot is
	// then the merged slice, and the store writes its entries in place of
	// the head's entries of those resources, keeping every other entry, and
	// counts Resources itself. Nil: Merge gets and returns whole documents.
	MergeReads []Address
}

// CommitResult is what Merge returns: the new snapshot (serial head+1
// already set in it), its changed addresses, its provenance, the update to
// the committing run and the markers to append to it.
type CommitResult struct {
	Snapshot   []byte
	Changed    AddressSet
	Resources  int
	Provenance Provenance
	UpdateRun  func(*Run) error
	Markers    []Marker
	// Lift is how the commit lifts the run's fences, if it holds any (ADR
	// 0035): LiftRecovered for a recovery; "" is LiftCommitted.
	Lift Lift
	// Adopt, when set, makes the commit an adoption through the http
	// backend (ADR 0056): the state takes Lineage, and the version serial
	// max(Serial, head+1) instead of head+1 — allowed only while the head
	// is the empty first version of `kl state init NAME` (commit mode init,
	// origin "empty"), else ErrConflict; another state with Lineage is
	// ErrConflict too (one lineage, one state). Snapshot must carry both.
	Adopt *Adoption
}

// Adoption is the lineage and serial a commit adopts (CommitResult.Adopt).
type Adoption struct {
	Lineage string
	Serial  int64
}

// AcquireRequest asks for a run's whole reservation set.
type AcquireRequest struct {
	State        string
	Run          string
	Holder       Holder
	Reservations []Reservation // Address and Mode; the rest is filled in
	Lease        time.Duration
}

// AcquireResult is a successful acquisition.
type AcquireResult struct {
	Held   []Reservation // this run's reservations, as stored
	Others []Reservation // other runs' live reservations on the state at that moment
}
