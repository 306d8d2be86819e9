package store

import (
	"context"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// Executor is what a store adapter gives the shared algorithms (Commit,
// Acquire, the lease sweep…): the primitive statements they are made of, in
// the adapter's SQL dialect, on its driver, with its locking and its error
// mapping (modelled on River's riverdriver.Executor). An adapter implements
// it twice over one type: on a transaction (DB.InTx), and on its connection
// pool, where each statement runs on its own.
//
// Errors: every method maps its driver's errors in the adapter's one mapping
// function (docs/style.md 7) — a missing row is engine.ErrNotFound, a uniqueness
// collision engine.ErrConflict, a missing referenced state or run
// engine.ErrNotFound, a violated CHECK engine.ErrInvalid. Times go in and
// come out in UTC; an adapter may store them with microsecond precision.
//
// Locks: the Lock methods take the adapter's write locks in the one order
// every algorithm keeps — the state row, then run rows by id, then
// reservation rows — so that writers queue instead of deadlocking. An
// adapter whose transactions hold a database-wide write lock from their
// first statement (SQLite's BEGIN IMMEDIATE) needs no row locks: its Lock
// methods are plain reads.
type Executor interface {
	// Now is the store's clock in UTC. Inside a transaction it is read after
	// the locks taken so far: the postgres adapter's is the database's
	// clock, so processes on hosts whose clocks disagree still agree on
	// which leases have ended.
	Now(ctx context.Context) (time.Time, error)

	// InsertState stores a new state row (no version). ErrConflict if the
	// name exists.
	InsertState(ctx context.Context, st engine.State) error
	// LockState returns the named state with its head serial and locks it
	// against every other LockState until the transaction ends: this lock
	// serializes commits and acquisitions on one state (docs/design.md apply
	// step 6). ErrNotFound if unknown.
	LockState(ctx context.Context, name string) (engine.State, error)
	// ReadState returns the named state without locking it. ErrNotFound if
	// unknown.
	ReadState(ctx context.Context, name string) (engine.State, error)
	// VersionsBefore returns versions of state with serials below before
	// (0: from the head), newest first, at most limit, without their
	// changed addresses (Changes).
	VersionsBefore(ctx context.Context, state string, before int64, limit int) ([]engine.Version, error)
	// VersionsFrom returns every version of state with a serial above
	// after, oldest first, without their changed addresses.
	VersionsFrom(ctx context.Context, state string, after int64) ([]engine.Version, error)
	// Changes returns the changed addresses of the versions of state with
	// serials in [from, to], by serial, each set sorted (byte order, as
	// engine.AddressSet sorts).
	Changes(ctx context.Context, state string, from, to int64) (map[int64]engine.AddressSet, error)
	// GetVersion returns one version with its changed addresses, without its
	// snapshot. ErrNotFound if the state or serial is unknown.
	GetVersion(ctx context.Context, state string, serial int64) (engine.Version, error)
	// VersionDoc returns how a version holds its document (StoredDoc:
	// the compressed snapshot, or the compressed header of a version stored
	// as a manifest), as stored. ErrNotFound if unknown.
	VersionDoc(ctx context.Context, state string, serial int64) (StoredDoc, error)
	// InsertVersion stores v, its changed addresses and doc (Snapshot or
	// Header, compressed; v.Size is the whole document's length). It does
	// not move the state's head (MoveHead) nor write a manifest.
	InsertVersion(ctx context.Context, v engine.Version, doc StoredDoc) error

	// HasManifest reports whether version serial of state is stored as a
	// header and manifest (versions.header set). ErrNotFound if unknown.
	HasManifest(ctx context.Context, state string, serial int64) (bool, error)
	// Manifest returns the manifest of version serial of state sorted by
	// address, the entries q selects, with their compressed bodies when
	// q.Bodies. It reads intervals only: a version stored whole has none of
	// its own.
	Manifest(ctx context.Context, state string, serial int64, q ManifestQuery) ([]ManifestEntry, error)
	// EntryHash is the hash that names a resource entry of compact JSON
	// raw: SHA-256, or HMAC-SHA256 under the store's key (ADR 0066) so
	// that equal secrets cannot be confirmed by hash. 32 bytes.
	EntryHash(raw []byte) []byte
	// InsertEntries stores es in state's entries at now; an entry whose
	// hash the state has already is left as it is (content-addressed).
	InsertEntries(ctx context.Context, state string, es []Entry, now time.Time) error
	// OpenEntries opens the intervals of rows (Address, Hash) at serial:
	// from version serial on, until closed.
	OpenEntries(ctx context.Context, state string, serial int64, rows []ManifestEntry) error
	// CloseEntries closes at serial the open intervals at addresses (every
	// open interval of state when addresses is nil): version serial and
	// later no longer hold them.
	CloseEntries(ctx context.Context, state string, serial int64, addresses []string) error
	// ExtendEntries gives version from, stored whole until now and followed
	// by version to (0: from is the head), the manifest rows (Address,
	// Hash): an interval of to that starts at to with the same entry now
	// starts at from; any other row gets an interval of its own, [from,
	// to) (open when to is 0). The backfill's step (Backfill).
	ExtendEntries(ctx context.Context, state string, from, to int64, rows []ManifestEntry) error
	// ConvertVersion sets a version's header (compressed) and empties its
	// snapshot: from now on it is read from its manifest.
	ConvertVersion(ctx context.Context, state string, serial int64, header []byte) error
	// WholeVersions returns up to limit serials of state's versions stored
	// whole with serials below below, newest first.
	WholeVersions(ctx context.Context, state string, below int64, limit int) ([]int64, error)
	// NextSerial returns the smallest serial of state above serial, and
	// false when serial is the newest.
	NextSerial(ctx context.Context, state string, serial int64) (int64, bool, error)
	// BackfillProgress returns state's kl_backfill row: the serial the
	// backfill continues below (0 and false when it has not started) and
	// whether it finished.
	BackfillProgress(ctx context.Context, state string) (below int64, started, finished bool, err error)
	// SetBackfillProgress writes state's kl_backfill row; finished (non-nil)
	// marks it done at that time.
	SetBackfillProgress(ctx context.Context, state string, below int64, finished *time.Time) error
	// StorageStats counts how state's versions are stored (StorageStats).
	StorageStats(ctx context.Context, state string) (StorageStats, error)
	// MoveHead sets the state's head serial to to if it is still from, and
	// reports whether it was.
	MoveHead(ctx context.Context, state string, from, to int64) (bool, error)
	// SetLineage sets the lineage of state (an adoption through the http
	// backend, ADR 0056). ErrConflict if another state has it (the unique
	// index of migration 3).
	SetLineage(ctx context.Context, state, lineage string) error

	// InsertRun stores a new run as given. ErrConflict if the id exists;
	// ErrNotFound if its state does not.
	InsertRun(ctx context.Context, r engine.Run) error
	// GetRun reads a run without locking it: a run the transaction has
	// locked already, or one it only describes (a blocker). ErrNotFound if
	// unknown.
	GetRun(ctx context.Context, id string) (engine.Run, error)
	// LockRun reads a run under its row lock: writers of one run take turns
	// and each sees the run as the previous one left it. ErrNotFound if
	// unknown.
	LockRun(ctx context.Context, id string) (engine.Run, error)
	// LockRuns locks, in ONE statement and in id order, the runs ids and the
	// plans (Run.PlanRun) claimed by the runs plansOf: the lease sweep's
	// locks. Unknown ids are skipped.
	LockRuns(ctx context.Context, ids, plansOf []string) error
	// SaveRun writes every field of run r back. ErrNotFound if unknown.
	SaveRun(ctx context.Context, r engine.Run) error
	// InProgressRuns returns, without locks, the runs that may be in
	// progress (engine.Run.InProgress): plans planning, applies waiting or
	// applying. The lease sweep checks their own leases.
	InProgressRuns(ctx context.Context) ([]engine.Run, error)

	// LastMarkerSeq returns the Seq of run's last marker, 0 if it has none.
	// The caller holds the run's lock (LockRun, LockRuns), so no other
	// transaction can take the next Seq.
	LastMarkerSeq(ctx context.Context, run string) (int64, error)
	// InsertMarkers stores markers of run as given (Seq, At and Kind set).
	InsertMarkers(ctx context.Context, run string, markers []engine.Marker) error
	// HasMarker reports whether run has a marker of kind.
	HasMarker(ctx context.Context, run string, kind engine.MarkerKind) (bool, error)
	// FirstMarkerAt returns the At of run's first marker of kind, and
	// whether it has one.
	FirstMarkerAt(ctx context.Context, run string, kind engine.MarkerKind) (time.Time, bool, error)

	// LiveReservations returns the reservations live at now (ExpiresAt
	// after now, or a fence: FencedAt set) of state, or of every state if
	// state is "", ordered by state, address, mode and run.
	LiveReservations(ctx context.Context, state string, now time.Time) ([]engine.Reservation, error)
	// HoldsLive reports whether run holds a reservation live at now, or a
	// fence, on state, or on any state if state is "".
	HoldsLive(ctx context.Context, run, state string, now time.Time) (bool, error)
	// InsertReservations stores rs, the rows of one Wanted call (one state,
	// run, holder and lease). A row whose (run, address, mode) exists
	// replaces it: a run re-acquiring gets a fresh lease.
	InsertReservations(ctx context.Context, rs []engine.Reservation) error
	// RenewReservations sets ExpiresAt to until on run's reservations still
	// live at now by their lease (not fences), and returns how many it
	// renewed: it never brings back a reservation an Acquire may already
	// have treated as lapsed.
	RenewReservations(ctx context.Context, run string, now, until time.Time) (int, error)
	// DeleteReservations deletes every reservation of run held by a lease,
	// live or lapsed — never a fence (DeleteFenced) — and returns how many
	// there were.
	DeleteReservations(ctx context.Context, run string) (int, error)
	// LapsedRuns returns, without locks, the runs holding reservations
	// whose lease lapsed at now (ExpiresAt not after now; not fences),
	// sorted.
	LapsedRuns(ctx context.Context, now time.Time) ([]string, error)
	// DeleteLapsed deletes the lease-held reservations of runs that lapsed
	// at now (not fences) and returns them (State, Address, Mode, Run,
	// Holder, AcquiredAt, ExpiresAt), in any order. A row another
	// transaction deleted first is not returned.
	DeleteLapsed(ctx context.Context, now time.Time, runs []string) ([]engine.Reservation, error)
	// FenceLapsed sets FencedAt = now on run's write reservations whose
	// lease lapsed at now and are not fences yet, and returns them (ADR
	// 0035). Read reservations are left to DeleteLapsed.
	FenceLapsed(ctx context.Context, run string, now time.Time) ([]engine.Reservation, error)
	// DeleteFenced deletes run's fences and returns them.
	DeleteFenced(ctx context.Context, run string) ([]engine.Reservation, error)

	// ArtifactSizes returns the artifacts named one of names, of every
	// run, without their data (ArtifactSize), by run and name.
	ArtifactSizes(ctx context.Context, names []string) ([]ArtifactSize, error)
	// DeleteArtifacts deletes run's artifacts named one of names and
	// returns those it deleted with their sizes, in any order; a name the
	// run has none of is skipped (ADR 0063).
	DeleteArtifacts(ctx context.Context, run string, names []string) ([]ArtifactSize, error)
}

// DB is a store adapter's database as the shared algorithms see it: an
// Executor on its connection pool (each statement on its own, for reads and
// single writes) that can also run a transaction.
type DB interface {
	Executor
	// InTx runs fn in one write transaction and commits it when fn returns
	// nil; when fn fails, or panics, nothing it wrote stays. The adapter
	// decides the isolation (postgres: READ COMMITTED and row locks;
	// sqlite: BEGIN IMMEDIATE, the database's write lock) and may run fn
	// again from the start after a deadlock or serialization failure — so fn
	// and the callbacks it calls (Merge, UpdateRun's fn) must depend only on
	// their arguments and set their results afresh on every run. Before fn
	// it reads the store's compatibility level inside the transaction, so
	// that no raise commits between the read and the transaction's commit
	// (postgres: the kl_compat row FOR SHARE), and returns the
	// *CompatError of Binary.CheckWrite instead of running fn when this
	// binary may not write (ADR 0048): every write of a store is an InTx.
	InTx(ctx context.Context, fn func(tx Executor) error) error
}

// Algorithms are the engine.Store methods whose logic is the same on every
// database — CreateState, CreateRun, Commit, UpdateRun, RenewRun,
// AddMarkers, Acquire, Reservations, Renew, Release, ExpireLeases, and the
// GetState, GetVersion, Snapshot, History and VersionsAfter reads whose SQL
// is the executor's — written
// once over an adapter's DB. An adapter embeds Algorithms in its Store (set
// when it opens) and implements the rest of engine.Store, its reads, in its
// own dialect.
type Algorithms struct {
	DB DB
}
