// Package storetest is the contract suite every engine.Store adapter must
// pass (docs/style.md 2, modelled on River's riverdrivertest.Exercise): the
// sqlite package runs it against a temp file, the postgres package against a
// real server. A behaviour one store has and the other lacks is a bug, so a
// new rule of engine.Store gets its test here, not in an adapter.
//
// Times: the suite compares only times it chose itself, truncated to
// microseconds, so an adapter may store timestamps with microsecond
// precision (PostgreSQL timestamptz) or finer.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/oklog/ulid/v2"

	"github.com/kilolock/kilolock/internal/engine"
)

// Run runs the contract suite. newStore must return a fresh, empty, migrated
// store for each call and close it in t.Cleanup; subtests call it in
// parallel.
func Run(t *testing.T, newStore func(t *testing.T) engine.Store) {
	t.Run("States", func(t *testing.T) { testStates(t, newStore) })
	t.Run("Versions", func(t *testing.T) { testVersions(t, newStore) })
	t.Run("Commit", func(t *testing.T) { testCommit(t, newStore) })
	t.Run("Runs", func(t *testing.T) { testRuns(t, newStore) })
	t.Run("Markers", func(t *testing.T) { testMarkers(t, newStore) })
	t.Run("Artifacts", func(t *testing.T) { testArtifacts(t, newStore) })
	t.Run("GC", func(t *testing.T) { testGC(t, newStore) })
	t.Run("Reservations", func(t *testing.T) { testReservations(t, newStore) })
	t.Run("RunLeases", func(t *testing.T) { testRunLeases(t, newStore) })
	t.Run("Fences", func(t *testing.T) { testFences(t, newStore) })
	t.Run("Concurrency", func(t *testing.T) { testConcurrency(t, newStore) })
	t.Run("Errors", func(t *testing.T) { testErrors(t, newStore) })
}

// fixture is one subtest's fresh store with helpers that fail the test on
// any unexpected error.
type fixture struct {
	t   *testing.T
	ctx context.Context
	s   engine.Store
}

// setup returns a fixture over a fresh store.
func setup(t *testing.T, newStore func(t *testing.T) engine.Store) *fixture {
	t.Helper()
	return &fixture{t: t, ctx: t.Context(), s: newStore(t)}
}

// newID returns a new run id: a ULID, so ids made later sort later.
func newID() string { return ulid.Make().String() }

// now is the current time as the suite compares it: UTC, microseconds.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// lineageOf is the lineage the suite gives state name.
func lineageOf(name string) string { return "lineage-" + name }

// testDoc is a minimal Terraform state v4 document: enough for the store's
// serial/lineage check and for merges the suite can verify.
type testDoc struct {
	Version   int            `json:"version"`
	Serial    int64          `json:"serial"`
	Lineage   string         `json:"lineage"`
	Resources []testResource `json:"resources"`
}

type testResource struct {
	Address string `json:"address"`
	Value   string `json:"value,omitempty"`
}

func (d testDoc) bytes(t *testing.T) []byte {
	t.Helper()
	if d.Version == 0 {
		d.Version = 4
	}
	if d.Resources == nil {
		d.Resources = []testResource{}
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatalf("encoding test document: %v", err)
	}
	return b
}

func parseDoc(b []byte) (testDoc, error) {
	var d testDoc
	err := json.Unmarshal(b, &d)
	return d, err
}

// NewState is a state the suite's Merge can commit to: serial 0, an empty
// state document, lineage "lineage-NAME". Adapter tests (several processes
// sharing one database) use it with Merge and CheckContiguous.
func NewState(name string) engine.NewState {
	doc, _ := json.Marshal(testDoc{Version: 4, Lineage: lineageOf(name), Resources: []testResource{}})
	return engine.NewState{Name: name, Lineage: lineageOf(name), Snapshot: doc, Actor: "tester"}
}

// state creates state name at serial 0 with an empty document.
func (f *fixture) state(name string) engine.State {
	f.t.Helper()
	st, err := f.s.CreateState(f.ctx, NewState(name))
	if err != nil {
		f.t.Fatalf("CreateState(%s): %v", name, err)
	}
	return st
}

// run creates a run on state (creating the state first when it does not
// exist); mods adjust the run before it is stored.
func (f *fixture) run(state string, kind engine.RunKind, status engine.RunStatus, mods ...func(*engine.Run)) engine.Run {
	f.t.Helper()
	if _, err := f.s.GetState(f.ctx, state); errors.Is(err, engine.ErrNotFound) {
		// Parallel subtests may race to create it: either wins.
		if _, err := f.s.CreateState(f.ctx, NewState(state)); err != nil && !errors.Is(err, engine.ErrConflict) {
			f.t.Fatalf("CreateState(%s): %v", state, err)
		}
	}
	ts := now()
	r := engine.Run{
		ID:        newID(),
		Kind:      kind,
		State:     state,
		Actor:     "alice",
		Holder:    engine.Holder{Host: "laptop", PID: 4242},
		Status:    status,
		CreatedAt: ts,
		UpdatedAt: ts,
	}
	for _, m := range mods {
		m(&r)
	}
	if err := f.s.CreateRun(f.ctx, r); err != nil {
		f.t.Fatalf("CreateRun: %v", err)
	}
	return r
}

// apply creates an applying apply run on state for pr (nil: none).
func (f *fixture) apply(state string, pr *engine.PullRequest) engine.Run {
	f.t.Helper()
	return f.run(state, engine.KindApply, engine.StatusApplying, func(r *engine.Run) { r.PR = pr })
}

// Merge returns a CommitRequest.Merge that writes the changed addresses into
// the head document (a NewState document) with value val and sets its serial
// to head+1, so the head snapshot shows every merge that ever ran: a lost
// update is a missing resource (CheckContiguous).
func Merge(val string, changed ...engine.Address) func(engine.Version, []byte) (engine.CommitResult, error) {
	return func(head engine.Version, snap []byte) (engine.CommitResult, error) {
		d, err := parseDoc(snap)
		if err != nil {
			return engine.CommitResult{}, fmt.Errorf("test merge: %w", err)
		}
		for _, a := range changed {
			found := false
			for i := range d.Resources {
				if d.Resources[i].Address == string(a) {
					d.Resources[i].Value, found = val, true
				}
			}
			if !found {
				d.Resources = append(d.Resources, testResource{Address: string(a), Value: val})
			}
		}
		d.Serial = head.Serial + 1
		b, err := json.Marshal(d)
		if err != nil {
			return engine.CommitResult{}, err
		}
		return engine.CommitResult{
			Snapshot:  b,
			Changed:   engine.NewAddressSet(changed...),
			Resources: len(d.Resources),
			Provenance: engine.Provenance{
				SourceSerial: head.Serial,
				Mode:         engine.CommitSnapshotMerge,
				Exact:        true,
			},
		}, nil
	}
}

// commit commits changed on state for run and returns the new version.
func (f *fixture) commit(state, run string, changed ...engine.Address) engine.Version {
	f.t.Helper()
	v, err := f.s.Commit(f.ctx, engine.CommitRequest{State: state, Run: run, Merge: Merge(run, changed...)})
	if err != nil {
		f.t.Fatalf("Commit(%s, %s): %v", state, run, err)
	}
	return v
}

// acquire asks for rs on state for run with lease.
func (f *fixture) acquire(state, run string, lease time.Duration, rs ...engine.Reservation) (engine.AcquireResult, error) {
	return f.s.Acquire(f.ctx, engine.AcquireRequest{
		State:        state,
		Run:          run,
		Holder:       engine.Holder{Host: "host-" + run, PID: 7},
		Reservations: rs,
		Lease:        lease,
	})
}

// mustAcquire is acquire that fails the test on error.
func (f *fixture) mustAcquire(state, run string, lease time.Duration, rs ...engine.Reservation) engine.AcquireResult {
	f.t.Helper()
	res, err := f.acquire(state, run, lease, rs...)
	if err != nil {
		f.t.Fatalf("Acquire(%s, %s): %v", state, run, err)
	}
	return res
}

func (f *fixture) getRun(id string) engine.Run {
	f.t.Helper()
	r, err := f.s.GetRun(f.ctx, id)
	if err != nil {
		f.t.Fatalf("GetRun(%s): %v", id, err)
	}
	return r
}

func (f *fixture) markers(run string) []engine.Marker {
	f.t.Helper()
	ms, err := f.s.Markers(f.ctx, run)
	if err != nil {
		f.t.Fatalf("Markers(%s): %v", run, err)
	}
	return ms
}

func (f *fixture) reservations(state string) []engine.Reservation {
	f.t.Helper()
	rs, err := f.s.Reservations(f.ctx, state)
	if err != nil {
		f.t.Fatalf("Reservations(%s): %v", state, err)
	}
	return rs
}

// kinds returns the kinds of markers, in order.
func kinds(ms []engine.Marker) []engine.MarkerKind {
	out := make([]engine.MarkerKind, len(ms))
	for i, m := range ms {
		out[i] = m.Kind
	}
	return out
}

// held returns "run mode address" strings of rs, sorted, for comparisons.
func held(rs []engine.Reservation) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%s %s %s", r.Run, r.Mode, r.Address)
	}
	sort.Strings(out)
	return out
}

// w and rd build requested write and read reservations.
func w(a engine.Address) engine.Reservation {
	return engine.Reservation{Address: a, Mode: engine.ModeWrite}
}
func rd(a engine.Address) engine.Reservation {
	return engine.Reservation{Address: a, Mode: engine.ModeRead}
}

// wantErr fails the test unless errors.Is(err, target).
func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want errors.Is %v", what, err, target)
	}
}

// diff fails the test when got and want differ.
func diff(t *testing.T, what string, got, want any, opts ...cmp.Option) {
	t.Helper()
	if d := cmp.Diff(want, got, opts...); d != "" {
		t.Fatalf("%s mismatch (-want +got):\n%s", what, d)
	}
}
