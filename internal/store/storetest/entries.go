package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
	"github.com/kilolock/kilolock/internal/tfstate"
)

// EntriesStore is an engine.Store with per-resource storage (ADR 0068)
// and, for tests, Unconvert: it stores every version of state whole again
// and forgets its manifests, entries and backfill progress — what a store
// written before migration 17 holds.
type EntriesStore interface {
	engine.Store
	StorageStats(ctx context.Context, state string) (store.StorageStats, error)
	Backfill(ctx context.Context, budget int) (store.BackfillResult, error)
	Unconvert(ctx context.Context, state string) error
}

// RunEntries runs the per-resource storage contract (ADR 0068): versions
// as manifests of shared entries, Snapshot byte for byte, Slice, documents
// kept whole, and the backfill of a store written before the manifests.
func RunEntries(t *testing.T, newStore func(t *testing.T) EntriesStore) {
	t.Run("SharedEntries", func(t *testing.T) { t.Parallel(); testSharedEntries(t, newStore(t)) })
	t.Run("Slice", func(t *testing.T) { t.Parallel(); testSlice(t, newStore(t)) })
	t.Run("KeptWhole", func(t *testing.T) { t.Parallel(); testKeptWhole(t, newStore(t)) })
	t.Run("Backfill", func(t *testing.T) { t.Parallel(); testBackfill(t, newStore(t)) })
	t.Run("SliceCommit", func(t *testing.T) { t.Parallel(); testSliceCommit(t, newStore(t), false) })
	t.Run("SliceCommitOnWholeHead", func(t *testing.T) { t.Parallel(); testSliceCommit(t, newStore(t), true) })
}

// testSliceCommit: a commit naming its MergeReads gets the head's slice
// of those resources (every module instance), and the version it writes
// from the merged slice reads back as the snapshot-merge of the whole head
// would have written it — size and resource count included — while only
// the changed entries are stored. On a head stored whole (wholeHead) the
// merge gets the whole head. A merge that writes a resource it did not
// read is refused and writes nothing.
func testSliceCommit(t *testing.T, s EntriesStore, wholeHead bool) {
	ctx := t.Context()
	base := entryState(t, 50, lineageOf("s"), 1)
	createDocState(t, s, "s", marshal(t, base), 1)
	// Another commit since the plan: entry 2 changed, entry 9 dropped.
	head := withChanged(t, base, 2, 9, 2)
	commitDoc(t, s, "s", marshal(t, head))
	if wholeHead {
		if err := s.Unconvert(ctx, "s"); err != nil {
			t.Fatal(err)
		}
	}
	// The run: from base, entries 0, 1 and 3 changed, the module.m00[0]
	// instance of a resource (m) changed while its module.m00[1] instance
	// stays, entry 20 dropped, and a new one.
	m := slices.IndexFunc(base.Resources, func(r tfstate.Resource) bool { return r.Module == "module.m00[0]" })
	result := withChanged(t, base, 3, 20, 0, 1, 3, m)
	res := append([]tfstate.Resource{}, result.Resources...)
	created, err := tfstate.ParseEntries([][]byte{bytes.Replace(base.Resources[5].Raw, []byte(`"name":"`), []byte(`"name":"new_`), 1)})
	if err != nil {
		t.Fatal(err)
	}
	result = tfstate.Assemble(result.Header(), append(res, created[0]))
	written := []string{base.Resources[0].Address(), base.Resources[1].Address(), base.Resources[3].Address(), base.Resources[20].Address(),
		base.Resources[m].EntryAddress(), created[0].Address()}
	slices.Sort(written)
	reads, err := tfstate.MergeReads(base, result, written)
	if err != nil {
		t.Fatal(err)
	}
	want, wrep, err := tfstate.MergeWith(tfstate.MergeInput{Head: head, Base: base, Result: result, Written: written, Serial: 3})
	if err != nil {
		t.Fatal(err)
	}
	wantDoc := marshal(t, want)
	before := stats(t, s, "s")

	var gotHead *tfstate.State
	merge := func(wrongly bool) func(engine.Version, []byte) (engine.CommitResult, error) {
		return func(_ engine.Version, doc []byte) (engine.CommitResult, error) {
			h, err := tfstate.Parse(doc)
			if err != nil {
				return engine.CommitResult{}, err
			}
			gotHead = h
			m, rep, err := tfstate.MergeWith(tfstate.MergeInput{Head: h, Base: base, Result: result, Written: written, Serial: 3})
			if err != nil {
				return engine.CommitResult{}, err
			}
			if wrongly {
				m = tfstate.Assemble(m.Header(), append(slices.Clone(m.Resources), base.Resources[40]))
			}
			b, err := m.Marshal()
			return engine.CommitResult{Snapshot: b, Changed: engine.NewAddressSet(addrs(rep.Changed)...), Resources: m.ResourceCount(),
				Provenance: engine.Provenance{Mode: engine.CommitSnapshotMerge}}, err
		}
	}
	commit := func(wrongly bool) (engine.Version, error) {
		id := newID()
		if err := s.CreateRun(ctx, engine.Run{ID: id, Kind: engine.KindApply, State: "s", Actor: "alice", Status: engine.StatusApplying}); err != nil {
			t.Fatal(err)
		}
		return s.Commit(ctx, engine.CommitRequest{State: "s", Run: id, Merge: merge(wrongly), MergeReads: addrs(reads)})
	}
	if !wholeHead {
		if _, err := commit(true); !isKind(err, engine.ErrInvalid) {
			t.Fatalf("a merge writing a resource it did not read: %v; want ErrInvalid", err)
		}
		if st := stats(t, s, "s"); st != before {
			t.Fatalf("the refused commit wrote: %+v, before %+v", st, before)
		}
	}
	v, err := commit(false)
	if err != nil {
		t.Fatal(err)
	}
	if wholeHead != (len(gotHead.Resources) == len(head.Resources)) {
		t.Fatalf("the merge got %d of the head's %d entries (head stored whole: %v)", len(gotHead.Resources), len(head.Resources), wholeHead)
	}
	checkSnapshots(t, s, "s", map[int64][]byte{3: wantDoc})
	if v.Resources != want.ResourceCount() || v.Size != int64(len(wantDoc)) {
		t.Fatalf("version 3: %d resources, size %d; want %d, %d", v.Resources, v.Size, want.ResourceCount(), len(wantDoc))
	}
	if got, _ := s.GetVersion(ctx, "s", 3); got.Resources != v.Resources || fmt.Sprint(got.Changed) != fmt.Sprint(engine.NewAddressSet(addrs(wrep.Changed)...)) {
		t.Fatalf("version 3 as stored: %+v", got)
	}
	if !wholeHead {
		// Entries 0, 1, 3, m's module.m00[0] instance and the new one
		// stored (5), 20 closed.
		if st := stats(t, s, "s"); st.Entries != before.Entries+5 || st.Intervals != before.Intervals+5 {
			t.Fatalf("after the slice commit: %+v, before %+v; want 5 entries and 5 intervals more", st, before)
		}
	}
}

// entryState is a state of n terraform_data resources over two module
// calls, at serial, as Terraform writes it, with the module calls given
// instance keys: module.m00 count (each of its entries in [0] and [1]),
// module.m01 for_each (["eu"]) — so that entries of one resource in two
// module instances are stored apart.
func entryState(t *testing.T, n int, lineage string, serial int64) *tfstate.State {
	t.Helper()
	s := tfstate.SynthesizeTerraformData(n, 2, lineage, serial)
	var raws [][]byte
	for _, r := range s.Resources {
		switch r.Module {
		case "module.m00":
			for _, k := range []string{"[0]", "[1]"} {
				raws = append(raws, bytes.Replace(r.Raw, []byte(`"module":"module.m00"`), []byte(`"module":"module.m00`+k+`"`), 1))
			}
		case "module.m01":
			raws = append(raws, bytes.Replace(r.Raw, []byte(`"module":"module.m01"`), []byte(`"module":"module.m01[\"eu\"]"`), 1))
		default:
			raws = append(raws, r.Raw)
		}
	}
	es, err := tfstate.ParseEntries(raws)
	if err != nil {
		t.Fatal(err)
	}
	return tfstate.Assemble(s.Header(), es)
}

func marshal(t *testing.T, s *tfstate.State) []byte {
	t.Helper()
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withChanged is s at serial with the entries at indexes idx given a new
// output, and without the entry at drop (−1: none).
func withChanged(t *testing.T, s *tfstate.State, serial int64, drop int, idx ...int) *tfstate.State {
	t.Helper()
	out := *s
	out.Serial = serial
	out.Resources = nil
	for i, r := range s.Resources {
		if i == drop {
			continue
		}
		for _, j := range idx {
			if i == j {
				raw := bytes.Replace(r.Raw, []byte(`"output":{"value":"`), []byte(`"output":{"value":"changed-`), 1)
				es, err := tfstate.ParseEntries([][]byte{raw})
				if err != nil {
					t.Fatal(err)
				}
				r = es[0]
			}
		}
		out.Resources = append(out.Resources, r)
	}
	return &out
}

// commitDoc commits doc as the next version of state through a run of its
// own and returns the version.
func commitDoc(t *testing.T, s engine.Store, state string, doc []byte, changed ...string) engine.Version {
	t.Helper()
	ctx := t.Context()
	id := newID()
	if err := s.CreateRun(ctx, engine.Run{ID: id, Kind: engine.KindApply, State: state, Actor: "alice", Status: engine.StatusApplying}); err != nil {
		t.Fatal(err)
	}
	var count int
	if p, err := tfstate.Parse(doc); err == nil {
		count = p.ResourceCount()
	}
	v, err := s.Commit(ctx, engine.CommitRequest{State: state, Run: id, Merge: func(engine.Version, []byte) (engine.CommitResult, error) {
		return engine.CommitResult{Snapshot: doc, Changed: engine.NewAddressSet(addrs(changed)...), Resources: count,
			Provenance: engine.Provenance{Mode: engine.CommitSnapshotMerge}}, nil
	}})
	if err != nil {
		t.Fatalf("committing version: %v", err)
	}
	return v
}

func addrs(ss []string) []engine.Address {
	out := make([]engine.Address, len(ss))
	for i, s := range ss {
		out[i] = engine.Address(s)
	}
	return out
}

// createDocState creates state name with doc as its first version.
func createDocState(t *testing.T, s engine.Store, name string, doc []byte, serial int64) {
	t.Helper()
	if _, err := s.CreateState(t.Context(), engine.NewState{Name: name, Lineage: lineageOf(name), Serial: serial, Snapshot: doc, Actor: "alice", Origin: "test"}); err != nil {
		t.Fatalf("creating state %s: %v", name, err)
	}
}

// checkSnapshots fails unless every version in want reads back byte for
// byte.
func checkSnapshots(t *testing.T, s engine.Store, state string, want map[int64][]byte) {
	t.Helper()
	for serial, doc := range want {
		got, err := s.Snapshot(t.Context(), state, serial)
		if err != nil {
			t.Fatalf("Snapshot(%s, %d): %v", state, serial, err)
		}
		if !bytes.Equal(got, doc) {
			t.Fatalf("Snapshot(%s, %d): %d bytes differ from the %d committed", state, serial, len(got), len(doc))
		}
		v, err := s.GetVersion(t.Context(), state, serial)
		if err != nil {
			t.Fatal(err)
		}
		if v.Size != int64(len(doc)) {
			t.Fatalf("version %d: Size %d, want %d", serial, v.Size, len(doc))
		}
	}
}

func stats(t *testing.T, s EntriesStore, state string) store.StorageStats {
	t.Helper()
	st, err := s.StorageStats(t.Context(), state)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func testSharedEntries(t *testing.T, s EntriesStore) {
	base := entryState(t, 60, lineageOf("s"), 1)
	n := len(base.Resources)
	docs := map[int64][]byte{1: marshal(t, base)}
	createDocState(t, s, "s", docs[1], 1)
	if st := stats(t, s, "s"); st.Manifests != 1 || st.Whole != 0 || st.Entries != n || st.Intervals != n || st.SnapshotBytes != 0 {
		t.Fatalf("after the first version: %+v; want one manifest of %d entries and no snapshot bytes", st, n)
	}
	// Version 2 changes one entry, version 3 another and drops a third,
	// version 4 changes the first back (its old entry is shared again).
	v2 := withChanged(t, base, 2, -1, 5)
	docs[2] = marshal(t, v2)
	commitDoc(t, s, "s", docs[2], base.Resources[5].EntryAddress())
	v3 := withChanged(t, v2, 3, 7, 9)
	docs[3] = marshal(t, v3)
	commitDoc(t, s, "s", docs[3])
	v4 := *v3
	v4.Serial = 4
	v4.Resources = append([]tfstate.Resource{}, v3.Resources...)
	for i, r := range v4.Resources {
		if r.EntryAddress() == base.Resources[5].EntryAddress() {
			v4.Resources[i] = base.Resources[5]
		}
	}
	docs[4] = marshal(t, &v4)
	commitDoc(t, s, "s", docs[4])
	st := stats(t, s, "s")
	// Entries: n, then one per changed entry (5 and 9); 5 changed back is
	// shared. Intervals: n, +1 (5), +1 (9), +1 (5 again); the dropped one
	// closes, adds none.
	if st.Manifests != 4 || st.Entries != n+2 || st.Intervals != n+3 {
		t.Fatalf("after three commits: %+v; want 4 manifests, %d entries, %d intervals", st, n+2, n+3)
	}
	checkSnapshots(t, s, "s", docs)
	if v, _ := s.GetVersion(t.Context(), "s", 3); v.Resources != n-1 {
		t.Fatalf("version 3 counts %d resources; want %d", v.Resources, n-1)
	}
}

func testSlice(t *testing.T, s EntriesStore) {
	ctx := t.Context()
	base := entryState(t, 30, lineageOf("s"), 1)
	createDocState(t, s, "s", marshal(t, base), 1)
	v2 := withChanged(t, base, 2, -1, 4)
	commitDoc(t, s, "s", marshal(t, v2))
	a, b := base.Resources[4], base.Resources[10]
	for _, tc := range []struct {
		serial int64
		ask    []engine.Address
		want   []tfstate.Resource
	}{
		{1, []engine.Address{engine.Address(a.EntryAddress()), engine.Address(b.EntryAddress())}, []tfstate.Resource{a, b}},
		{2, []engine.Address{engine.Address(a.EntryAddress()), engine.Address(b.EntryAddress())}, []tfstate.Resource{v2.Resources[4], b}},
		// An instance address reads its resource's entry; an address with no
		// entry is left out; asking twice gives it once.
		{2, []engine.Address{engine.Address(b.EntryAddress() + `[0]`), engine.Address(b.EntryAddress()), "terraform_data.nowhere"}, []tfstate.Resource{b}},
		{2, nil, nil},
	} {
		got, err := s.Slice(ctx, "s", tc.serial, tc.ask)
		if err != nil {
			t.Fatalf("Slice(%d, %v): %v", tc.serial, tc.ask, err)
		}
		want := marshal(t, tfstate.Assemble(withSerial(base, tc.serial).Header(), tc.want))
		if !bytes.Equal(got, want) {
			t.Fatalf("Slice(%d, %v):\n%s\nwant\n%s", tc.serial, tc.ask, got, want)
		}
	}
	// A resource of a module called with count or for_each: its address
	// without module instance keys (as the configuration names it) reads
	// every module instance's entry; with keys, that instance's alone.
	var m0, m1 []tfstate.Resource
	for _, r := range v2.Resources {
		switch r.Module {
		case "module.m00[0]":
			m0 = append(m0, r)
		case "module.m00[1]":
			m1 = append(m1, r)
		}
	}
	if len(m0) == 0 || len(m1) == 0 {
		t.Fatal("the fixture has no resources in module.m00[0] and module.m00[1]")
	}
	for _, tc := range []struct {
		ask  engine.Address
		want []tfstate.Resource
	}{
		{engine.Address(m0[0].Address()), []tfstate.Resource{m0[0], m1[0]}},
		{engine.Address(m1[0].EntryAddress()), []tfstate.Resource{m1[0]}},
	} {
		got, err := s.Slice(ctx, "s", 2, []engine.Address{tc.ask})
		if err != nil {
			t.Fatalf("Slice(2, %s): %v", tc.ask, err)
		}
		if want := marshal(t, tfstate.Assemble(withSerial(base, 2).Header(), tc.want)); !bytes.Equal(got, want) {
			t.Fatalf("Slice(2, %s):\n%s\nwant\n%s", tc.ask, got, want)
		}
	}
	if _, err := s.Slice(ctx, "s", 2, []engine.Address{"module.m00"}); !isKind(err, engine.ErrInvalid) {
		t.Fatalf("Slice of a module instance: %v; want ErrInvalid", err)
	}
	if _, err := s.Slice(ctx, "s", 9, nil); !isKind(err, engine.ErrNotFound) {
		t.Fatalf("Slice of an unknown version: %v; want ErrNotFound", err)
	}
}

func withSerial(s *tfstate.State, serial int64) *tfstate.State {
	out := *s
	out.Serial = serial
	return &out
}

func isKind(err, kind error) bool { return errors.Is(err, kind) }

// testKeptWhole: a document not as Terraform writes it (indented with
// tabs; resources out of Terraform's order) is stored whole and read back byte for byte, between
// manifests, and a later manifest does not inherit stale intervals.
func testKeptWhole(t *testing.T, s EntriesStore) {
	base := entryState(t, 12, lineageOf("s"), 1)
	docs := map[int64][]byte{1: marshal(t, base)}
	createDocState(t, s, "s", docs[1], 1)
	var buf bytes.Buffer
	if err := json.Indent(&buf, mustCompact(t, marshal(t, withChanged(t, base, 2, -1, 1))), "", "\t"); err != nil {
		t.Fatal(err)
	}
	docs[2] = buf.Bytes()
	commitDoc(t, s, "s", docs[2])
	docs[3] = marshal(t, withChanged(t, base, 3, 2, 1, 3))
	commitDoc(t, s, "s", docs[3])
	// Written as Terraform writes a document but with its resources out of
	// Terraform's order (a state edited by hand or by another tool): a
	// manifest would give them back sorted, so it is kept whole.
	reversed := withChanged(t, base, 4, 3, 1, 3)
	reversed.Resources = slices.Clone(reversed.Resources)
	slices.Reverse(reversed.Resources)
	docs[4] = marshal(t, reversed)
	commitDoc(t, s, "s", docs[4])
	st := stats(t, s, "s")
	if st.Whole != 2 || st.Manifests != 2 {
		t.Fatalf("%+v; want versions 2 and 4 whole, 1 and 3 manifests", st)
	}
	checkSnapshots(t, s, "s", docs)
	got, err := s.Slice(t.Context(), "s", 2, []engine.Address{engine.Address(base.Resources[0].EntryAddress())})
	if err != nil {
		t.Fatal(err)
	}
	if sl, err := tfstate.Parse(got); err != nil || len(sl.Resources) != 1 || sl.Serial != 2 {
		t.Fatalf("Slice of the whole version: %v, %s", err, got)
	}
}

func mustCompact(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// testBackfill: a state written before the manifests (Unconvert) reads
// right at every step of the backfill, including a commit between two of
// its calls, and ends with every version a manifest sharing entries.
func testBackfill(t *testing.T, s EntriesStore) {
	ctx := t.Context()
	base := entryState(t, 40, lineageOf("s"), 1)
	n := len(base.Resources)
	docs := map[int64][]byte{1: marshal(t, base)}
	createDocState(t, s, "s", docs[1], 1)
	cur := base
	for serial := int64(2); serial <= 45; serial++ {
		cur = withChanged(t, cur, serial, -1, int(serial)%n)
		docs[serial] = marshal(t, cur)
		commitDoc(t, s, "s", docs[serial])
	}
	createDocState(t, s, "other", marshal(t, entryState(t, 3, lineageOf("other"), 7)), 7)
	for _, st := range []string{"s", "other"} {
		if err := s.Unconvert(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	if st := stats(t, s, "s"); st.Whole != 45 || st.Entries != 0 {
		t.Fatalf("after Unconvert: %+v", st)
	}
	checkSnapshots(t, s, "s", docs)
	res, err := s.Backfill(ctx, 25)
	if err != nil {
		t.Fatal(err)
	}
	if res.Converted != 25 || fmt.Sprint(res.Finished, res.Remaining) != "[other] [s]" {
		t.Fatalf("Backfill(25): %+v; want 25 converted (other's version, 24 of s), other finished, s remaining", res)
	}
	checkSnapshots(t, s, "s", docs)
	// A commit between two backfill calls, onto a head converted already.
	cur = withChanged(t, cur, 46, 3, 0)
	docs[46] = marshal(t, cur)
	commitDoc(t, s, "s", docs[46])
	res, err = s.Backfill(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Converted != 21 || fmt.Sprint(res.Finished) != "[other s]" {
		t.Fatalf("Backfill(0): %+v; want the other 21 versions of s converted, both finished", res)
	}
	checkSnapshots(t, s, "s", docs)
	st := stats(t, s, "s")
	// 44 commits and the one between backfills changed one entry each.
	if st.Whole != 0 || st.Manifests != 46 || st.Entries != n+45 || st.SnapshotBytes != 0 {
		t.Fatalf("after the backfill: %+v; want 46 manifests, %d entries, no snapshot bytes", st, n+45)
	}
	// Backfilled intervals are joined: one per entry at an address, as if
	// every version had been committed as a manifest.
	if st.Intervals != n+45 {
		t.Fatalf("after the backfill: %d intervals; want %d", st.Intervals, n+45)
	}
	if res, err := s.Backfill(ctx, 0); err != nil || res.Converted != 0 || len(res.Finished) != 2 {
		t.Fatalf("a finished backfill again: %+v, %v", res, err)
	}
	if d := cmp.Diff(docs[46], mustSnapshot(t, s, "s", 46)); d != "" {
		t.Fatal(d)
	}
}

func mustSnapshot(t *testing.T, s engine.Store, state string, serial int64) []byte {
	t.Helper()
	b, err := s.Snapshot(t.Context(), state, serial)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
