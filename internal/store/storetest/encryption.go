package storetest

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/seal"
	"github.com/kilolock/kilolock/internal/store"
)

// EncryptedDB is one database of an adapter, opened as often as a test
// asks (RunEncryption).
type EncryptedDB struct {
	// Open opens the database with keyring kr (nil: WithKeyring unset),
	// a store closed at cleanup, or Open's error.
	Open func(t *testing.T, kr *seal.Keyring) (engine.Store, error)
	// Raw returns the database's stored bytes: every artifacts.data and
	// versions.snapshot value as stored, and all the bytes the database
	// keeps at rest (SQLite: the file with its WAL; PostgreSQL: the
	// stored values of those columns and runs.body), for a search.
	Raw func(t *testing.T) (artifacts, snapshots [][]byte, all []byte)
}

// TestKeyring is a keyring of the suite's: ids k1, k2, …, each key 32
// bytes of one value (seed).
func TestKeyring(t *testing.T, variable string, keys ...string) *seal.Keyring {
	t.Helper()
	var entries []string
	for _, k := range keys {
		id, seed, _ := strings.Cut(k, "=")
		if seed == "" {
			seed = id
		}
		entries = append(entries, id+":"+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte(seed[:1]), seal.KeySize)))
	}
	kr, err := seal.Parse(variable, strings.Join(entries, ","))
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// RunEncryption is the contract of encryption at rest (ADR 0066): with a
// keyring every artifact and snapshot is sealed at rest and reads back as
// written; a store that has been sealed is refused, naming the variable,
// by a binary without its key; rows stored before the key still read; a
// re-seal moves every blob to the first key and retires the others.
// newDB returns a fresh database per call.
func RunEncryption(t *testing.T, newDB func(t *testing.T) EncryptedDB) {
	t.Run("SealedAtRest", func(t *testing.T) { testSealedAtRest(t, newDB) })
	t.Run("RefusedWithoutTheKey", func(t *testing.T) { testRefusedWithoutTheKey(t, newDB) })
	t.Run("Mixed", func(t *testing.T) { testMixed(t, newDB) })
	t.Run("ReaderRecordsNoKey", func(t *testing.T) { testReaderRecordsNoKey(t, newDB) })
	t.Run("Reseal", func(t *testing.T) { testReseal(t, newDB) })
}

// ignoreCompacted: whether a re-seal rewrote the file is the adapter's
// (SQLite's TestEncryption checks the bytes).
var ignoreCompacted = cmpopts.IgnoreFields(store.ResealResult{}, "Compacted")

// openOK opens db with kr, failing the test on an error.
func openOK(t *testing.T, db EncryptedDB, kr *seal.Keyring) *fixture {
	t.Helper()
	s, err := db.Open(t, kr)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return &fixture{t: t, ctx: t.Context(), s: s}
}

// writeSecret commits a version of state whose document holds secret
// (creating the state), and stores a plan artifact and a state artifact
// holding it; it returns the apply run and the version.
func (f *fixture) writeSecret(state, secret string) (engine.Run, engine.Version) {
	f.t.Helper()
	r := f.apply(state, nil)
	v, err := f.s.Commit(f.ctx, engine.CommitRequest{State: state, Run: r.ID, Merge: Merge(secret, "aws_db_instance.main")})
	if err != nil {
		f.t.Fatalf("Commit: %v", err)
	}
	for _, name := range []string{"plan.tfplan", "apply-result.tfstate"} {
		if err := f.s.PutArtifact(f.ctx, r.ID, name, []byte(`{"password":"`+secret+`"}`)); err != nil {
			f.t.Fatalf("PutArtifact: %v", err)
		}
	}
	return r, v
}

// checkSecret reads back what writeSecret wrote.
func (f *fixture) checkSecret(r engine.Run, v engine.Version, secret string) {
	f.t.Helper()
	for _, name := range []string{"plan.tfplan", "apply-result.tfstate"} {
		got, err := f.s.GetArtifact(f.ctx, r.ID, name)
		if err != nil || string(got) != `{"password":"`+secret+`"}` {
			f.t.Fatalf("GetArtifact(%s) = %q, %v", name, got, err)
		}
	}
	snap, err := f.s.Snapshot(f.ctx, v.State, v.Serial)
	if err != nil {
		f.t.Fatalf("Snapshot(%s, %d): %v", v.State, v.Serial, err)
	}
	d, err := parseDoc(snap)
	if err != nil || !slices.ContainsFunc(d.Resources, func(r testResource) bool { return r.Value == secret }) {
		f.t.Fatalf("Snapshot(%s, %d) = %s, %v: want %s in it", v.State, v.Serial, snap, err, secret)
	}
}

// keyIDs are the key ids blobs are sealed with ("clear" for a clear one).
func keyIDs(blobs [][]byte) []string {
	out := []string{}
	for _, b := range blobs {
		id, ok := seal.KeyID(b)
		if !ok {
			id = "clear"
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

func testSealedAtRest(t *testing.T, newDB func(t *testing.T) EncryptedDB) {
	t.Parallel()
	const secret = "hunter2-s3cr3t-c0rrect-h0rse"
	// Without a key the secret is there to be found: the search works.
	clear := newDB(t)
	f := openOK(t, clear, nil)
	f.writeSecret("prod", secret)
	if _, _, all := clear.Raw(t); !bytes.Contains(all, []byte(secret)) {
		t.Fatal("without a key the secret is not in the stored bytes: the search finds nothing (a broken Raw)")
	}

	db := newDB(t)
	f = openOK(t, db, TestKeyring(t, "KL_ENCRYPTION_KEY", "k1"))
	r, v := f.writeSecret("prod", secret)
	f.checkSecret(r, v, secret)
	arts, snaps, all := db.Raw(t)
	if bytes.Contains(all, []byte(secret)) {
		t.Fatal("the secret is in the stored bytes in clear")
	}
	if len(arts) == 0 || len(snaps) == 0 {
		t.Fatalf("Raw found %d artifacts and %d snapshots", len(arts), len(snaps))
	}
	// Every artifact and every snapshot, the state's first (serial 0,
	// created by CreateState) included.
	if got := keyIDs(append(arts, snaps...)); !cmp.Equal(got, []string{"k1"}) {
		t.Fatalf("blobs sealed with %v, want [k1]", got)
	}
}

func testRefusedWithoutTheKey(t *testing.T, newDB func(t *testing.T) EncryptedDB) {
	t.Parallel()
	db := newDB(t)
	f := openOK(t, db, TestKeyring(t, "KL_ENCRYPTION_KEY", "k1"))
	f.writeSecret("prod", "s3cr3t")
	for name, tc := range map[string]struct {
		kr   *seal.Keyring
		want string
	}{
		"no keyring":        {nil, "the store is encrypted (sealed with key k1) but KL_ENCRYPTION_KEY is not set"},
		"klbot, no key":     {TestKeyring(t, "KLBOT_ENCRYPTION_KEY"), "but KLBOT_ENCRYPTION_KEY is not set"},
		"another id":        {TestKeyring(t, "KL_ENCRYPTION_KEY", "k2"), "sealed with key k1, and KL_ENCRYPTION_KEY holds none of them (it holds k2)"},
		"another key of k1": {TestKeyring(t, "KL_ENCRYPTION_KEY", "k1=x"), `the key "k1" of KL_ENCRYPTION_KEY is not the key "k1" that sealed the store`},
		"k1 wrong, k2 new":  {TestKeyring(t, "KL_ENCRYPTION_KEY", "k2", "k1=x"), `the key "k1" of KL_ENCRYPTION_KEY is not the key`},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := db.Open(t, tc.kr)
			if err == nil {
				t.Fatalf("Open of an encrypted store with %v: no error (store %T)", tc.kr.IDs(), s)
			}
			if !errors.Is(err, store.ErrEncryption) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open: %v, want errors.Is store.ErrEncryption and …%s…", err, tc.want)
			}
		})
	}
	// The refusals recorded nothing: the right key still opens.
	openOK(t, db, TestKeyring(t, "KL_ENCRYPTION_KEY", "k1"))
}

// testReaderRecordsNoKey: a binary with a key that only reads a clear
// store (kl runs, kl state pull) seals nothing, so it records no key: the
// store stays clear and a binary without a key still opens it (before, the
// reader's key was recorded at open and locked everyone else out). Its
// first write records the key, as a writer's does.
func testReaderRecordsNoKey(t *testing.T, newDB func(t *testing.T) EncryptedDB) {
	t.Parallel()
	db := newDB(t)
	f := openOK(t, db, nil)
	r1, v1 := f.writeSecret("prod", "clear-secret")
	reader := openOK(t, db, TestKeyring(t, "KL_ENCRYPTION_KEY", "k1"))
	reader.checkSecret(r1, v1, "clear-secret")
	if _, err := reader.s.ListStates(reader.ctx); err != nil {
		t.Fatal(err)
	}
	// A write that seals nothing (kl runs and kl status sweep expired
	// leases; a story gains a marker) records no key either.
	if err := reader.s.AddMarkers(reader.ctx, r1.ID, engine.Marker{Kind: engine.MarkerArtifactsDeleted, Reason: "a reader's write"}); err != nil {
		t.Fatal(err)
	}
	openOK(t, db, nil).checkSecret(r1, v1, "clear-secret")
	// A refused write records nothing either.
	if _, err := reader.s.Commit(reader.ctx, engine.CommitRequest{State: "no-such-state", Run: "no-such-run", Merge: Merge("x", "terraform_data.x")}); err == nil {
		t.Fatal("a commit to a state that does not exist succeeded")
	}
	openOK(t, db, nil)
	reader.writeSecret("prod", "sealed-secret")
	if _, err := db.Open(t, nil); !errors.Is(err, store.ErrEncryption) {
		t.Fatalf("Open without a key after the keyed binary wrote: %v, want the store refused as encrypted", err)
	}
}

func testMixed(t *testing.T, newDB func(t *testing.T) EncryptedDB) {
	t.Parallel()
	db := newDB(t)
	f := openOK(t, db, nil)
	r1, v1 := f.writeSecret("prod", "before-the-key")
	// A clear store with a key configured becomes encrypted.
	g := openOK(t, db, TestKeyring(t, "KL_ENCRYPTION_KEY", "k1"))
	r2, v2 := g.writeSecret("prod", "after-the-key")
	g.checkSecret(r1, v1, "before-the-key")
	g.checkSecret(r2, v2, "after-the-key")
	arts, snaps, _ := db.Raw(t)
	if got := keyIDs(append(arts, snaps...)); !cmp.Equal(got, []string{"clear", "k1"}) {
		t.Fatalf("blobs sealed with %v, want [clear k1]", got)
	}
	// The store opened before the key reads the clear rows, and a sealed
	// one is an error naming it and the variable, not garbled bytes.
	f.checkSecret(r1, v1, "before-the-key")
	if got, err := f.s.GetArtifact(f.ctx, r2.ID, "plan.tfplan"); !errors.Is(err, seal.ErrNoKey) ||
		!strings.Contains(err.Error(), "artifact/"+r2.ID+"/plan.tfplan") || !strings.Contains(err.Error(), "KL_ENCRYPTION_KEY") {
		t.Fatalf("GetArtifact of a sealed artifact without a key = %q, %v", got, err)
	}
	if got, err := f.s.Snapshot(f.ctx, "prod", v2.Serial); !errors.Is(err, seal.ErrNoKey) || !strings.Contains(err.Error(), "version/prod/2") {
		t.Fatalf("Snapshot of a sealed version without a key = %q, %v", got, err)
	}
	// A new opener without the key is refused from now on.
	if _, err := db.Open(t, nil); !errors.Is(err, store.ErrEncryption) {
		t.Fatalf("Open without the key of a store that became encrypted: %v", err)
	}
}

func testReseal(t *testing.T, newDB func(t *testing.T) EncryptedDB) {
	t.Parallel()
	db := newDB(t)
	r1, v1 := openOK(t, db, nil).writeSecret("prod", "clear-one")
	underK1 := openOK(t, db, TestKeyring(t, "KL_ENCRYPTION_KEY", "k1"))
	r2, v2 := underK1.writeSecret("prod", "under-k1")
	// Enough artifacts under k1 for more than two batches
	// (store.ResealBatch).
	extra := 2*store.ResealBatch + 10
	for i := range extra {
		if err := underK1.s.PutArtifact(underK1.ctx, r1.ID, fmt.Sprintf("extra-%03d.json", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	// Rotation: the new key first, the old after it.
	f := openOK(t, db, TestKeyring(t, "KL_ENCRYPTION_KEY", "k2", "k1"))
	rs, ok := f.s.(store.Resealer)
	if !ok {
		t.Fatalf("%T is not a store.Resealer", f.s)
	}
	res, err := rs.Reseal(f.ctx)
	if err != nil {
		t.Fatalf("Reseal: %v", err)
	}
	// 2 runs × 2 artifacts and the extra ones; versions 0 (CreateState),
	// 1 and 2, whole (the suite's documents are not as Terraform writes
	// them; RunEntries re-seals manifests).
	want := store.ResealResult{Key: "k2",
		Read:      map[string]int{"artifacts": 4 + extra, "versions": 3, "headers": 0, "entries": 0},
		Resealed:  map[string]int{"artifacts": 4 + extra, "versions": 3, "headers": 0, "entries": 0},
		Unchanged: map[string]int{"artifacts": 0, "versions": 0, "headers": 0, "entries": 0},
		Retired:   []string{"k1"}}
	if d := cmp.Diff(want, res, cmpopts.EquateEmpty(), ignoreCompacted); d != "" {
		t.Fatalf("Reseal (-want +got):\n%s", d)
	}
	arts, snaps, _ := db.Raw(t)
	if got := keyIDs(append(arts, snaps...)); !cmp.Equal(got, []string{"k2"}) {
		t.Fatalf("after Reseal, blobs sealed with %v, want [k2]", got)
	}
	// The old key can go: the new one alone reads everything.
	g := openOK(t, db, TestKeyring(t, "KL_ENCRYPTION_KEY", "k2"))
	g.checkSecret(r1, v1, "clear-one")
	g.checkSecret(r2, v2, "under-k1")
	// The old key alone, or first, is refused: it would read nothing new,
	// or seal with a retired key.
	if _, err := db.Open(t, TestKeyring(t, "KL_ENCRYPTION_KEY", "k1")); !errors.Is(err, store.ErrEncryption) ||
		!strings.Contains(err.Error(), `the first key of KL_ENCRYPTION_KEY, "k1", was retired by kl store reseal on `) ||
		!strings.Contains(err.Error(), "the store is sealed with key k2; put that key first") {
		t.Fatalf("Open with the retired key alone: %v", err)
	}
	if _, err := db.Open(t, TestKeyring(t, "KL_ENCRYPTION_KEY", "k1", "k2")); !errors.Is(err, store.ErrEncryption) ||
		!strings.Contains(err.Error(), `the first key of KL_ENCRYPTION_KEY, "k1", was retired by kl store reseal`) {
		t.Fatalf("Open with the retired key first: %v", err)
	}
	// A second re-seal finds nothing to do.
	res, err = g.s.(store.Resealer).Reseal(g.ctx)
	want = store.ResealResult{Key: "k2",
		Read:      map[string]int{"artifacts": 4 + extra, "versions": 3, "headers": 0, "entries": 0},
		Resealed:  map[string]int{"artifacts": 0, "versions": 0, "headers": 0, "entries": 0},
		Unchanged: map[string]int{"artifacts": 4 + extra, "versions": 3, "headers": 0, "entries": 0}}
	if err != nil || !cmp.Equal(want, res, cmpopts.EquateEmpty(), ignoreCompacted) {
		t.Fatalf("second Reseal = %+v, %v; want %+v", res, err, want)
	}
	// Without a key there is nothing to re-seal with.
	if _, err := openOK(t, newDB(t), nil).s.(store.Resealer).Reseal(t.Context()); !errors.Is(err, seal.ErrNoKey) || !strings.Contains(err.Error(), "set KL_ENCRYPTION_KEY") {
		t.Fatalf("Reseal without a key: %v", err)
	}
}
