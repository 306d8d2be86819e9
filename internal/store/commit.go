package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/seal"
	"github.com/kilolock/kilolock/internal/tfstate"
)

// CreateState is engine.Store.CreateState over a.DB: it stores a new state
// and its first version (serial init.Serial, commit mode init: InitVersion)
// in one transaction, stamped with the store's clock. ErrConflict if the
// name exists (two processes creating one state: exactly one wins) or
// another state has the lineage (a unique index: one Terraform lineage is
// one Kilolock state);
// ErrInvalid for an empty name or lineage, or a snapshot whose serial or
// lineage disagree (CheckNewState).
func (a Algorithms) CreateState(ctx context.Context, init engine.NewState) (engine.State, error) {
	db := a.DB
	if err := CheckNewState(init); err != nil {
		return engine.State{}, fmt.Errorf("creating state: %w", err)
	}
	var st engine.State
	err := db.InTx(ctx, func(tx Executor) error {
		now, err := tx.Now(ctx)
		if err != nil {
			return err
		}
		st = engine.State{Name: init.Name, Lineage: init.Lineage, HeadSerial: init.Serial, CreatedAt: now}
		if err := tx.InsertState(ctx, st); err != nil {
			return err
		}
		return putVersion(ctx, tx, InitVersion(init, now), init.Snapshot, nil)
	})
	if errors.Is(err, engine.ErrConflict) {
		// The name or the lineage (migrations 00003) is taken: say which.
		if _, gerr := db.LockState(ctx, init.Name); errors.Is(gerr, engine.ErrNotFound) {
			return engine.State{}, fmt.Errorf("creating state %s: another state already has lineage %s: adopting one Terraform state twice would fork it: %w",
				init.Name, init.Lineage, err)
		}
		return engine.State{}, fmt.Errorf("creating state %s: the state exists: %w", init.Name, err)
	}
	if err != nil {
		return engine.State{}, fmt.Errorf("creating state %s: %w", init.Name, err)
	}
	return st, nil
}

// CreateRun is engine.Store.CreateRun over a.DB: it checks r (CheckRun) and
// stores it as NewRun leaves it — CreatedAt defaults to the store's clock,
// UpdatedAt to CreatedAt, times in UTC. ErrConflict if the id exists;
// ErrNotFound if its state does not; ErrInvalid for a run without id,
// kind, state or status.
func (a Algorithms) CreateRun(ctx context.Context, r engine.Run) error {
	db := a.DB
	if err := CheckRun(r); err != nil {
		return fmt.Errorf("creating run: %w", err)
	}
	// A transaction of its own: every write passes the adapter's
	// compatibility check (DB.InTx).
	err := db.InTx(ctx, func(tx Executor) error {
		var now time.Time
		if r.CreatedAt.IsZero() {
			var err error
			if now, err = tx.Now(ctx); err != nil {
				return err
			}
		}
		return tx.InsertRun(ctx, NewRun(r, now))
	})
	if err != nil {
		return fmt.Errorf("creating run %s: %w", r.ID, err)
	}
	return nil
}

// Commit is engine.Store.Commit over a.DB: it writes version head+1 of
// req.State in ONE transaction (docs/design.md apply step 6; ADR D5). It first
// locks the state (Executor.LockState): another commit or acquisition on
// the state — in this process or any other — waits until this one ends,
// and then sees the head it wrote, so serials stay contiguous and no merge
// is lost. In order: lock the state and then the run, read the clock,
// check the run's live reservations on the state when
// req.RequireReservations (ErrLeaseLost when it holds none), load the head
// and its snapshot, call req.Merge, check the result (snapshot serial and
// lineage, provenance serial: CheckSnapshot, CommitProvenance), insert the
// version, its changed addresses and provenance, move the head (a head
// that moved anyway is ErrConflict: history never forks), apply the run
// update (req.Merge's UpdateRun; UpdatedAt = now), drop the run's
// reservations, and append Merge's markers and a "released" marker when it
// held any, and delete the run's state artifacts (engine.GCStateArtifacts:
// what Terraform wrote is in the version now; ADR 0063). Merge runs under the state lock: it must be quick and do no
// I/O, and it may run more than once (DB.InTx). On any error nothing is
// written. ErrNotFound for an unknown state or run; ErrInvalid without a
// Merge, or for a run update that changes the id or empties a required
// field.
func (a Algorithms) Commit(ctx context.Context, req engine.CommitRequest) (engine.Version, error) {
	db := a.DB
	if req.Merge == nil {
		return engine.Version{}, engine.Errorf(engine.ErrInvalid, "committing run %s to state %s: no merge function", req.Run, req.State)
	}
	var out engine.Version
	err := db.InTx(ctx, func(tx Executor) error {
		v, err := commit(ctx, tx, req)
		out = v
		return err
	})
	if err != nil {
		return engine.Version{}, fmt.Errorf("committing run %s to state %s: %w", req.Run, req.State, err)
	}
	return out, nil
}

func commit(ctx context.Context, tx Executor, req engine.CommitRequest) (engine.Version, error) {
	st, err := tx.LockState(ctx, req.State)
	if err != nil {
		return engine.Version{}, fmt.Errorf("locking state head: %w", err)
	}
	run, err := tx.LockRun(ctx, req.Run)
	if err != nil {
		return engine.Version{}, fmt.Errorf("reading run: %w", err)
	}
	now, err := tx.Now(ctx)
	if err != nil {
		return engine.Version{}, err
	}
	if err := checkLive(ctx, tx, req, now); err != nil {
		return engine.Version{}, err
	}
	head, err := tx.GetVersion(ctx, st.Name, st.HeadSerial)
	if err != nil {
		return engine.Version{}, fmt.Errorf("reading head version %d: %w", st.HeadSerial, err)
	}
	doc, hr, partial, err := headForMerge(ctx, tx, st, req)
	if err != nil {
		return engine.Version{}, fmt.Errorf("reading head snapshot %d: %w", st.HeadSerial, err)
	}
	res, err := req.Merge(head, doc)
	if err != nil {
		return engine.Version{}, fmt.Errorf("merging into version %d: %w", head.Serial, err)
	}
	serial, lineage, err := adopt(ctx, tx, st, head, res.Adopt)
	if err != nil {
		return engine.Version{}, err
	}
	if err := CheckSnapshot(res.Snapshot, lineage, serial); err != nil {
		return engine.Version{}, err
	}
	prov, err := CommitProvenance(res.Provenance, req.Run, serial)
	if err != nil {
		return engine.Version{}, err
	}
	v := engine.Version{
		State:      st.Name,
		Serial:     serial,
		Lineage:    lineage,
		CreatedAt:  now,
		Changed:    engine.NewAddressSet(res.Changed...),
		Provenance: prov,
		Resources:  res.Resources,
		Size:       int64(len(res.Snapshot)),
	}
	if partial {
		err = putSlice(ctx, tx, &v, res.Snapshot, head, req.MergeReads, hr)
	} else {
		err = putVersion(ctx, tx, v, res.Snapshot, manifestOf(hr))
	}
	if err != nil {
		return engine.Version{}, err
	}
	moved, err := tx.MoveHead(ctx, st.Name, head.Serial, serial)
	if err != nil {
		return engine.Version{}, fmt.Errorf("moving head to %d: %w", serial, err)
	}
	if !moved {
		// Cannot happen under the state lock; refuse rather than fork history.
		return engine.Version{}, engine.Errorf(engine.ErrConflict, "moving head to %d: head moved during the commit", serial)
	}
	if err := finishCommit(ctx, tx, req.Run, run, res, now); err != nil {
		return engine.Version{}, err
	}
	// What Terraform wrote is in the version now: the state artifacts a
	// recovery would have committed go with the commit (ADR 0063).
	if _, err := tx.DeleteArtifacts(ctx, req.Run, engine.GCStateArtifacts); err != nil {
		return engine.Version{}, fmt.Errorf("deleting the state artifacts of the committed run: %w", err)
	}
	return v, nil
}

// checkLive refuses a commit that requires its reservations
// (req.RequireReservations) when the run holds none live at now
// (ErrLeaseLost).
func checkLive(ctx context.Context, tx Executor, req engine.CommitRequest, now time.Time) error {
	if !req.RequireReservations {
		return nil
	}
	live, err := tx.HoldsLive(ctx, req.Run, req.State, now)
	if err != nil {
		return err
	}
	if !live {
		return engine.Errorf(engine.ErrLeaseLost, "run holds no live reservation on the state")
	}
	return nil
}

// adopt is the serial and lineage of the version a commit writes onto
// head (locked state st): head+1 and the state's lineage, or, for an
// adoption through the http backend (a, ADR 0056), a's lineage — set on
// the state here — and max(a.Serial, head+1), only while head is the empty
// first version of `kl state init NAME` (ErrConflict otherwise; another
// state with that lineage is ErrConflict too).
func adopt(ctx context.Context, tx Executor, st engine.State, head engine.Version, a *engine.Adoption) (int64, string, error) {
	if a == nil || a.Lineage == st.Lineage {
		return head.Serial + 1, st.Lineage, nil
	}
	if head.Provenance.Mode != engine.CommitInit || head.Provenance.Origin != "empty" {
		return 0, "", engine.Errorf(engine.ErrConflict, "adopting lineage %s: the head (version %d, %s) is not the empty version of `kl state init %s`: a state adopts another lineage only before anything is committed to it",
			a.Lineage, head.Serial, head.Provenance.Mode, st.Name)
	}
	if a.Lineage == "" {
		return 0, "", engine.Errorf(engine.ErrInvalid, "adopting an empty lineage into state %s", st.Name)
	}
	if err := tx.SetLineage(ctx, st.Name, a.Lineage); err != nil {
		if errors.Is(err, engine.ErrConflict) {
			return 0, "", engine.Errorf(engine.ErrConflict, "adopting lineage %s into state %s: another state already has it: adopting one Terraform state twice would fork it: %w", a.Lineage, st.Name, err)
		}
		return 0, "", fmt.Errorf("adopting lineage %s: %w", a.Lineage, err)
	}
	return max(a.Serial, head.Serial+1), a.Lineage, nil
}

// finishCommit ends a commit's transaction for run (as locked): the run
// changed by res.UpdateRun and saved, its fences lifted (what its Terraform
// did is in the version now: "fence-lifted", res.Lift), its reservations
// released, and the commit's markers (and "released") appended, at now.
func finishCommit(ctx context.Context, tx Executor, id string, run engine.Run, res engine.CommitResult, now time.Time) error {
	if res.UpdateRun != nil {
		if err := res.UpdateRun(&run); err != nil {
			return fmt.Errorf("updating run %s: %w", id, err)
		}
	}
	if run.ID != id {
		return engine.Errorf(engine.ErrInvalid, "run update changed the run id to %q", run.ID)
	}
	if err := CheckRun(run); err != nil {
		return err
	}
	run.UpdatedAt = now
	if err := tx.SaveRun(ctx, run); err != nil {
		return err
	}
	markers := append([]engine.Marker{}, res.Markers...)
	fences, err := tx.DeleteFenced(ctx, id)
	if err != nil {
		return err
	}
	if len(fences) > 0 {
		lift := res.Lift
		if lift == "" {
			lift = engine.LiftCommitted
		}
		markers = append(markers, FenceLiftedMarker(fences, lift, "", "", now))
	}
	dropped, err := tx.DeleteReservations(ctx, id)
	if err != nil {
		return err
	}
	if dropped > 0 {
		markers = append(markers, ReleasedMarker(dropped, now))
	}
	return appendMarkers(ctx, tx, id, now, markers)
}

// UpdateRun is engine.Store.UpdateRun over a.DB: in one transaction it reads
// run id under its lock (Executor.LockRun: a concurrent UpdateRun of the
// same run waits, then reads what this one wrote), checks its status is
// one of from (StatusAllowed: any if empty, else a *engine.StatusError
// naming the run's ApplyRun as By), calls fn, sets UpdatedAt to now, writes
// it back and appends markers. This is how exactly one of two concurrent
// applies — in any processes — claims a plan. fn may run more than once
// (DB.InTx). An error from fn aborts the update and is returned wrapped.
// ErrNotFound if the run is unknown; ErrInvalid if fn changes the id or
// empties a required field (CheckRun).
func (a Algorithms) UpdateRun(ctx context.Context, id string, from []engine.RunStatus, fn func(*engine.Run) error, markers ...engine.Marker) (engine.Run, error) {
	db := a.DB
	var out engine.Run
	err := db.InTx(ctx, func(tx Executor) error {
		r, err := tx.LockRun(ctx, id)
		if err != nil {
			return err
		}
		if err := StatusAllowed(r, from); err != nil {
			return err
		}
		if fn != nil {
			if err := fn(&r); err != nil {
				return err
			}
		}
		if r.ID != id {
			return engine.Errorf(engine.ErrInvalid, "the update changed the run id to %q", r.ID)
		}
		if err := CheckRun(r); err != nil {
			return err
		}
		now, err := tx.Now(ctx)
		if err != nil {
			return err
		}
		r.UpdatedAt = now
		if err := tx.SaveRun(ctx, r); err != nil {
			return err
		}
		if err := appendMarkers(ctx, tx, id, now, markers); err != nil {
			return err
		}
		out = r
		return nil
	})
	if err != nil {
		return engine.Run{}, fmt.Errorf("updating run %s: %w", id, err)
	}
	return out, nil
}

// RenewRun is engine.Store.RenewRun over a.DB: it extends the run's own lease
// (engine.Run.LeaseUntil) to now+lease in one transaction, under the run's
// lock, while the run is in progress (RenewRunLease). ErrLeaseLost when it
// is not (finished, or ended by the lease sweep — which takes the same
// lock, so the two never interleave); ErrNotFound for an unknown run;
// ErrInvalid for a lease <= 0 (CheckLease). UpdatedAt is left alone and no
// marker is written.
func (a Algorithms) RenewRun(ctx context.Context, run string, lease time.Duration) error {
	db := a.DB
	if err := CheckLease(lease); err != nil {
		return fmt.Errorf("renewing the lease of run %s: %w", run, err)
	}
	err := db.InTx(ctx, func(tx Executor) error {
		r, err := tx.LockRun(ctx, run)
		if err != nil {
			return err
		}
		now, err := tx.Now(ctx)
		if err != nil {
			return err
		}
		if err := RenewRunLease(&r, lease, now); err != nil {
			return err
		}
		return tx.SaveRun(ctx, r)
	})
	if err != nil {
		return fmt.Errorf("renewing the lease of run %s: %w", run, err)
	}
	return nil
}

// AddMarkers is engine.Store.AddMarkers over a.DB: it appends markers to run
// in one transaction under the run's lock, numbering them after the run's
// last marker (Seq 1, 2, 3…) and stamping At with now when it is zero.
// ErrNotFound if the run is unknown; ErrInvalid for a marker without a
// kind.
func (a Algorithms) AddMarkers(ctx context.Context, run string, markers ...engine.Marker) error {
	db := a.DB
	err := db.InTx(ctx, func(tx Executor) error {
		if _, err := tx.LockRun(ctx, run); err != nil {
			return err
		}
		if len(markers) == 0 {
			return nil
		}
		now, err := tx.Now(ctx)
		if err != nil {
			return err
		}
		return appendMarkers(ctx, tx, run, now, markers)
	})
	if err != nil {
		return fmt.Errorf("adding markers to run %s: %w", run, err)
	}
	return nil
}

// appendMarkers stores markers of run after its last Seq, each with At in
// UTC (now when zero). The caller holds the run's lock (LockRun, LockRuns),
// so no other transaction can take the Seqs it numbers. A marker without a
// kind is ErrInvalid.
func appendMarkers(ctx context.Context, tx Executor, run string, now time.Time, markers []engine.Marker) error {
	if len(markers) == 0 {
		return nil
	}
	last, err := tx.LastMarkerSeq(ctx, run)
	if err != nil {
		return fmt.Errorf("numbering markers: %w", err)
	}
	out := make([]engine.Marker, len(markers))
	for i, m := range markers {
		last++
		m.Seq = last
		if m.At.IsZero() {
			m.At = now
		}
		m.At = m.At.UTC()
		if m.Kind == "" {
			return engine.Errorf(engine.ErrInvalid, "marker %d has no kind", m.Seq)
		}
		out[i] = m
	}
	return tx.InsertMarkers(ctx, run, out)
}

// isNotFound reports whether err is engine.ErrNotFound.
func isNotFound(err error) bool { return errors.Is(err, engine.ErrNotFound) }

// GetVersion is engine.Store.GetVersion over a.DB: one version with its
// changed addresses, without its snapshot. ErrNotFound if the state or
// serial is unknown.
func (a Algorithms) GetVersion(ctx context.Context, state string, serial int64) (engine.Version, error) {
	v, err := a.DB.GetVersion(ctx, state, serial)
	if err != nil {
		return engine.Version{}, fmt.Errorf("getting version %d of state %s: %w", serial, state, err)
	}
	return v, nil
}

// Snapshot is engine.Store.Snapshot over a.DB: the Terraform state v4
// document of a version, decompressed. ErrNotFound if the state or serial
// is unknown.
func (a Algorithms) Snapshot(ctx context.Context, state string, serial int64) ([]byte, error) {
	doc, err := readDoc(ctx, a.DB, state, serial, ManifestQuery{})
	if err != nil {
		return nil, fmt.Errorf("reading snapshot of version %d of state %s: %w", serial, state, err)
	}
	return doc, nil
}

// Slice is engine.Store.Slice over a.DB: the document of version serial of
// state holding only the resource entries at addresses, with the version's
// header (serial, lineage, outputs) — read from the entries asked for alone
// when the version is a manifest (ADR 0068), cut from its snapshot
// otherwise. An address with module instance keys
// (`module.app[0].x.y`, or an instance of it) reads that entry; one
// without (`module.app.x.y`, as the configuration names a resource) reads
// every module instance's entry of the resource — a module called with
// count or for_each holds one entry per instance, and the native lane's
// closure names resources as the configuration does. An address the
// version has no entry at is left out. ErrNotFound if the state or serial
// is unknown; ErrInvalid for an address that is not a resource's.
func (a Algorithms) Slice(ctx context.Context, state string, serial int64, addresses []engine.Address) ([]byte, error) {
	resources := make([]string, 0, len(addresses))
	keyed := map[string]bool{} // entry addresses asked for with module instance keys
	every := map[string]bool{} // resources asked for without
	for _, addr := range addresses {
		t, err := tfstate.ParseTarget(string(addr))
		if err == nil && t.Resource == nil {
			err = fmt.Errorf("address %q is a module instance, not a resource: it names no one resource entry", addr)
		}
		if err != nil {
			return nil, engine.Errorf(engine.ErrInvalid, "reading a slice of version %d of state %s: %v", serial, state, err)
		}
		ea, _ := tfstate.EntryAddress(string(addr))
		res := tfstate.ResourceAddress(tfstate.ModulePath(t.Module), t.Resource.Mode, t.Resource.Type, t.Resource.Name)
		if ea == res {
			every[res] = true
		} else {
			keyed[ea] = true
		}
		resources = append(resources, res)
	}
	slices.Sort(resources)
	doc, err := readDoc(ctx, a.DB, state, serial, ManifestQuery{Resources: slices.Compact(resources)})
	if err == nil && len(keyed) > 0 {
		doc, err = keepEntries(doc, func(r *tfstate.Resource) bool { return every[r.Address()] || keyed[r.EntryAddress()] })
	}
	if err != nil {
		return nil, fmt.Errorf("reading a slice of version %d of state %s: %w", serial, state, err)
	}
	return doc, nil
}

// keepEntries is doc with only the entries keep keeps.
func keepEntries(doc []byte, keep func(*tfstate.Resource) bool) ([]byte, error) {
	s, err := tfstate.Parse(doc)
	if err != nil {
		return nil, err
	}
	var kept []tfstate.Resource
	for i := range s.Resources {
		if keep(&s.Resources[i]) {
			kept = append(kept, s.Resources[i])
		}
	}
	return tfstate.Assemble(s.Header(), kept).Marshal()
}

// VersionArgs are the values of a versions row for v and its document as
// stored, in the order state, serial, lineage, created_at, provenance,
// resources, size, snapshot, header: created_at in Unix nanoseconds,
// provenance as JSON, size v.Size (the whole document's length), snapshot
// the compressed document sealed by kr for VersionPlace, or empty for a
// version stored as a manifest, header its compressed header sealed by kr
// for HeaderPlace, or nil (NULL) for a version stored whole (clear without
// a key; ADR 0066, ADR 0068). ErrInvalid unless exactly one of
// doc.Snapshot and doc.Header is set.
func VersionArgs(v engine.Version, doc StoredDoc, kr *seal.Keyring) ([]any, error) {
	if (doc.Snapshot == nil) == (doc.Header == nil) {
		return nil, engine.Errorf(engine.ErrInvalid, "storing version %d: want either a snapshot or a header", v.Serial)
	}
	prov, err := json.Marshal(v.Provenance)
	if err != nil {
		return nil, fmt.Errorf("encoding provenance: %w", err)
	}
	snapshot, header := []byte{}, doc.Header
	if doc.Snapshot != nil {
		if snapshot, err = kr.Seal(VersionPlace(v.State, v.Serial), doc.Snapshot); err != nil {
			return nil, err
		}
	}
	if header != nil {
		if header, err = kr.Seal(HeaderPlace(v.State, v.Serial), header); err != nil {
			return nil, err
		}
	}
	return []any{v.State, v.Serial, v.Lineage, v.CreatedAt.UnixNano(), string(prov), v.Resources, v.Size, snapshot, header}, nil
}

// VersionColumns are the versions columns ScanVersion reads, in order.
const VersionColumns = `state, serial, lineage, created_at, provenance, resources, size`

// ScanVersion reads one row of VersionColumns (created_at in Unix
// nanoseconds, provenance as JSON) from either driver's row.
func ScanVersion(row interface{ Scan(dest ...any) error }) (engine.Version, error) {
	var v engine.Version
	var created int64
	var prov string
	if err := row.Scan(&v.State, &v.Serial, &v.Lineage, &created, &prov, &v.Resources, &v.Size); err != nil {
		return engine.Version{}, err
	}
	v.CreatedAt = time.Unix(0, created).UTC()
	p, err := DecodeProvenance(prov)
	if err != nil {
		return engine.Version{}, fmt.Errorf("decoding provenance of version %d: %w", v.Serial, err)
	}
	v.Provenance = p
	return v, nil
}

// RunArgs are the values of a runs row for r, in the order kind, state,
// actor, status, created_at, updated_at, finished_at, plan_run, apply_run,
// replan_of, committed_serial, pr, body, id: times in Unix nanoseconds, an
// absent reference, end, serial or pull request as a nil pointer (NULL on
// either driver), body the run's row encoding (EncodeRun, row.go).
func RunArgs(r engine.Run) ([]any, error) {
	body, err := EncodeRun(r)
	if err != nil {
		return nil, err
	}
	var pr *string
	if r.PR != nil {
		b, err := json.Marshal(r.PR)
		if err != nil {
			return nil, fmt.Errorf("encoding pull request: %w", err)
		}
		s := string(b)
		pr = &s
	}
	var finished, committed *int64
	if r.FinishedAt != nil {
		n := r.FinishedAt.UnixNano()
		finished = &n
	}
	if r.CommittedSerial != 0 {
		committed = &r.CommittedSerial
	}
	ref := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return []any{
		string(r.Kind), r.State, r.Actor, string(r.Status),
		r.CreatedAt.UnixNano(), r.UpdatedAt.UnixNano(), finished,
		ref(r.PlanRun), ref(r.ApplyRun), ref(r.ReplanOf), committed,
		pr, body, r.ID,
	}, nil
}
