package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

func testStates(t *testing.T, newStore func(t *testing.T) engine.Store) {
	t.Run("CreateGetList", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		before := time.Now().Add(-time.Second)
		b := f.state("acme/infra/b")
		a := f.state("acme/infra/a")
		if a.Name != "acme/infra/a" || a.Lineage != lineageOf(a.Name) || a.HeadSerial != 0 {
			t.Fatalf("CreateState returned %+v", a)
		}
		if a.CreatedAt.Before(before) || a.CreatedAt.After(time.Now().Add(time.Second)) {
			t.Fatalf("CreatedAt %v is not now", a.CreatedAt)
		}
		got, err := f.s.GetState(f.ctx, a.Name)
		if err != nil {
			t.Fatalf("GetState: %v", err)
		}
		diff(t, "GetState", got.Name+" "+got.Lineage, a.Name+" "+a.Lineage)
		if got.HeadSerial != 0 || got.CreatedAt.Sub(a.CreatedAt).Abs() > time.Microsecond {
			t.Fatalf("GetState CreatedAt %v, CreateState said %v", got.CreatedAt, a.CreatedAt)
		}
		list, err := f.s.ListStates(f.ctx)
		if err != nil {
			t.Fatalf("ListStates: %v", err)
		}
		var names []string
		for _, st := range list {
			names = append(names, st.Name)
		}
		diff(t, "ListStates (by name)", names, []string{a.Name, b.Name})
	})

	t.Run("InitialSerial", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		doc := testDoc{Serial: 12, Lineage: "adopted", Resources: []testResource{{Address: "terraform_data.a"}}}.bytes(t)
		st, err := f.s.CreateState(f.ctx, engine.NewState{
			Name: "adopted", Lineage: "adopted", Serial: 12, Snapshot: doc,
			Changed: engine.NewAddressSet("terraform_data.a"), Resources: 1, Actor: "bob",
		})
		if err != nil {
			t.Fatalf("CreateState: %v", err)
		}
		if st.HeadSerial != 12 {
			t.Fatalf("HeadSerial = %d, want 12", st.HeadSerial)
		}
		v, err := f.s.GetVersion(f.ctx, "adopted", 12)
		if err != nil {
			t.Fatalf("GetVersion: %v", err)
		}
		diff(t, "init version", v.Provenance, engine.Provenance{
			SourceSerial: 12, CommittedSerial: 12, Mode: engine.CommitInit, Exact: true, Actor: "bob",
		})
		diff(t, "init Changed", v.Changed, engine.NewAddressSet("terraform_data.a"))
		if v.Resources != 1 || v.Size != int64(len(doc)) || v.Lineage != "adopted" {
			t.Fatalf("init version = %+v", v)
		}
	})

	t.Run("Duplicate", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("dup")
		_, err := f.s.CreateState(f.ctx, engine.NewState{Name: "dup", Lineage: "other"})
		wantErr(t, "CreateState twice", err, engine.ErrConflict)
	})

	t.Run("Unknown", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		_, err := f.s.GetState(f.ctx, "nope")
		wantErr(t, "GetState", err, engine.ErrNotFound)
		list, err := f.s.ListStates(f.ctx)
		if err != nil || len(list) != 0 {
			t.Fatalf("ListStates on an empty store = %v, %v; want none", list, err)
		}
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		tests := map[string]engine.NewState{
			"empty name":        {Lineage: "l"},
			"empty lineage":     {Name: "s"},
			"negative serial":   {Name: "s", Lineage: "l", Serial: -1},
			"not a document":    {Name: "s", Lineage: "l", Snapshot: []byte("not json")},
			"serial mismatch":   {Name: "s", Lineage: "l", Serial: 3, Snapshot: testDoc{Serial: 4, Lineage: "l"}.bytes(t)},
			"lineage mismatch":  {Name: "s", Lineage: "l", Snapshot: testDoc{Lineage: "x"}.bytes(t)},
			"mismatch adoption": {Name: "s", Lineage: "l", Serial: 0, Snapshot: testDoc{Serial: 9, Lineage: "l"}.bytes(t)},
		}
		for name, init := range tests {
			t.Run(name, func(t *testing.T) {
				_, err := f.s.CreateState(f.ctx, init)
				wantErr(t, "CreateState", err, engine.ErrInvalid)
			})
		}
		if _, err := f.s.GetState(f.ctx, "s"); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("a refused CreateState left state s behind: %v", err)
		}
	})
}

func testVersions(t *testing.T, newStore func(t *testing.T) engine.Store) {
	t.Run("InitVersion", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		v, err := f.s.GetVersion(f.ctx, "s", 0)
		if err != nil {
			t.Fatalf("GetVersion: %v", err)
		}
		if v.State != "s" || v.Serial != 0 || v.Lineage != lineageOf("s") || v.Provenance.Mode != engine.CommitInit {
			t.Fatalf("init version = %+v", v)
		}
		if v.CreatedAt.IsZero() || v.CreatedAt.Location() != time.UTC {
			t.Fatalf("CreatedAt = %v, want a UTC time", v.CreatedAt)
		}
		doc, err := f.s.Snapshot(f.ctx, "s", 0)
		if err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		diff(t, "init snapshot", string(doc), string(testDoc{Lineage: lineageOf("s")}.bytes(t)))
		if v.Size != int64(len(doc)) {
			t.Fatalf("Size = %d, want %d (uncompressed)", v.Size, len(doc))
		}
	})

	t.Run("SnapshotRoundTrip1MB", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		doc := bigDoc(t, "big", 0, 1<<20)
		if _, err := f.s.CreateState(f.ctx, engine.NewState{Name: "big", Lineage: "big", Snapshot: doc, Resources: 1}); err != nil {
			t.Fatalf("CreateState: %v", err)
		}
		got, err := f.s.Snapshot(f.ctx, "big", 0)
		if err != nil {
			t.Fatalf("Snapshot: %v", err)
		}
		if !bytes.Equal(got, doc) {
			t.Fatalf("Snapshot returned %d bytes that differ from the %d stored", len(got), len(doc))
		}
		v, err := f.s.GetVersion(f.ctx, "big", 0)
		if err != nil {
			t.Fatalf("GetVersion: %v", err)
		}
		if v.Size != int64(len(doc)) {
			t.Fatalf("Size = %d, want the uncompressed %d", v.Size, len(doc))
		}
		// And through a commit.
		r := f.apply("big", nil)
		big2 := bigDoc(t, "big", 1, 1<<20)
		if _, err := f.s.Commit(f.ctx, engine.CommitRequest{State: "big", Run: r.ID,
			Merge: func(head engine.Version, snap []byte) (engine.CommitResult, error) {
				if !bytes.Equal(snap, doc) {
					return engine.CommitResult{}, fmt.Errorf("merge got a different head snapshot")
				}
				return engine.CommitResult{Snapshot: big2, Changed: engine.NewAddressSet("terraform_data.blob")}, nil
			}}); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		got, err = f.s.Snapshot(f.ctx, "big", 1)
		if err != nil || !bytes.Equal(got, big2) {
			t.Fatalf("Snapshot after commit: %d bytes, %v; want the committed %d", len(got), err, len(big2))
		}
	})

	t.Run("GetVersionUnknown", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		_, err := f.s.GetVersion(f.ctx, "s", 1)
		wantErr(t, "GetVersion(s, 1)", err, engine.ErrNotFound)
		_, err = f.s.GetVersion(f.ctx, "nope", 0)
		wantErr(t, "GetVersion(nope, 0)", err, engine.ErrNotFound)
		_, err = f.s.Snapshot(f.ctx, "s", 1)
		wantErr(t, "Snapshot(s, 1)", err, engine.ErrNotFound)
	})

	t.Run("HistoryPaging", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		r := f.apply("s", nil)
		for i := 1; i <= 7; i++ {
			f.commit("s", r.ID, engine.Address(fmt.Sprintf("terraform_data.v%d", i)))
		}
		tests := map[string]struct {
			q    engine.HistoryQuery
			want []int64
		}{
			"default":           {engine.HistoryQuery{}, []int64{7, 6, 5, 4, 3, 2, 1, 0}},
			"first page":        {engine.HistoryQuery{Limit: 3}, []int64{7, 6, 5}},
			"second page":       {engine.HistoryQuery{Before: 5, Limit: 3}, []int64{4, 3, 2}},
			"last page":         {engine.HistoryQuery{Before: 2, Limit: 3}, []int64{1, 0}},
			"before serial 1":   {engine.HistoryQuery{Before: 1, Limit: 3}, []int64{0}},
			"before the head+1": {engine.HistoryQuery{Before: 8, Limit: 2}, []int64{7, 6}},
		}
		for name, tc := range tests {
			t.Run(name, func(t *testing.T) {
				vs, err := f.s.History(f.ctx, "s", tc.q)
				if err != nil {
					t.Fatalf("History: %v", err)
				}
				var got []int64
				for _, v := range vs {
					got = append(got, v.Serial)
					if v.Serial > 0 {
						diff(t, fmt.Sprintf("Changed of %d", v.Serial), v.Changed,
							engine.NewAddressSet(engine.Address(fmt.Sprintf("terraform_data.v%d", v.Serial))))
						if v.Provenance.Run != r.ID || v.Provenance.CommittedSerial != v.Serial {
							t.Fatalf("provenance of %d = %+v", v.Serial, v.Provenance)
						}
					}
				}
				diff(t, "serials", got, tc.want)
			})
		}
		_, err := f.s.History(f.ctx, "nope", engine.HistoryQuery{})
		wantErr(t, "History of an unknown state", err, engine.ErrNotFound)
		_, err = f.s.History(f.ctx, "s", engine.HistoryQuery{Limit: -1})
		wantErr(t, "History with a negative limit", err, engine.ErrInvalid)
	})

	t.Run("HistoryDefaultLimit", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		r := f.apply("s", nil)
		for i := 1; i <= 55; i++ {
			f.commit("s", r.ID, "terraform_data.x")
		}
		vs, err := f.s.History(f.ctx, "s", engine.HistoryQuery{})
		if err != nil {
			t.Fatalf("History: %v", err)
		}
		if len(vs) != 50 || vs[0].Serial != 55 || vs[49].Serial != 6 {
			t.Fatalf("History default page: %d versions from %d; want 50 from 55", len(vs), vs[0].Serial)
		}
	})

	t.Run("VersionsAfter", func(t *testing.T) {
		t.Parallel()
		f := setup(t, newStore)
		f.state("s")
		r := f.apply("s", nil)
		changes := []engine.AddressSet{
			engine.NewAddressSet("terraform_data.a"),
			engine.NewAddressSet("terraform_data.b", "module.app.terraform_data.c"),
			engine.NewAddressSet("output.url"),
			engine.NewAddressSet("terraform_data.a", "terraform_data.d"),
		}
		for _, c := range changes {
			f.commit("s", r.ID, c...)
		}
		vs, err := f.s.VersionsAfter(f.ctx, "s", 1)
		if err != nil {
			t.Fatalf("VersionsAfter: %v", err)
		}
		var got []engine.AddressSet
		for i, v := range vs {
			if v.Serial != int64(i+2) {
				t.Fatalf("VersionsAfter(1)[%d].Serial = %d, want %d (oldest first)", i, v.Serial, i+2)
			}
			got = append(got, v.Changed)
		}
		diff(t, "VersionsAfter(1) changed", got, changes[1:])
		vs, err = f.s.VersionsAfter(f.ctx, "s", 4)
		if err != nil || len(vs) != 0 {
			t.Fatalf("VersionsAfter(head) = %v, %v; want none", vs, err)
		}
		_, err = f.s.VersionsAfter(f.ctx, "nope", 0)
		wantErr(t, "VersionsAfter of an unknown state", err, engine.ErrNotFound)
		v, err := f.s.GetVersion(f.ctx, "s", 2)
		if err != nil {
			t.Fatalf("GetVersion: %v", err)
		}
		diff(t, "GetVersion(2).Changed", v.Changed, changes[1])
	})
}

// bigDoc returns a state document of about size bytes for state lineage at
// serial, with poorly compressible attribute values.
func bigDoc(t *testing.T, lineage string, serial int64, size int) []byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(serial), 7))
	d := testDoc{Serial: serial, Lineage: lineage}
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	n := 0
	for i := 0; n < size; i++ {
		v := make([]byte, 200)
		for j := range v {
			v[j] = alphabet[rng.IntN(len(alphabet))]
		}
		r := testResource{Address: fmt.Sprintf("module.m%d.terraform_data.r%d", i%50, i), Value: string(v)}
		n += len(r.Address) + len(r.Value) + 30
		d.Resources = append(d.Resources, r)
	}
	return d.bytes(t)
}
