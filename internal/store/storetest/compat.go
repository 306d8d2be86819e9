package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
)

// CompatStore is a store the compatibility suite opens: an engine.Store
// that says what this binary may do with it.
type CompatStore interface {
	engine.Store
	Access(ctx context.Context) (store.Access, error)
}

// CompatDB is one database of an adapter, opened by the compatibility
// suite as several binaries in turn (ADR 0048).
type CompatDB struct {
	// Dialect is the adapter's SQL dialect, for the newer binaries' Go
	// migrations.
	Dialect store.Dialect
	// Open opens the database as binary b, with the Go migrations extra on
	// top of the embedded ones, and closes it at cleanup. Every call opens
	// the same database.
	Open func(t *testing.T, b store.Binary, extra ...*goose.Migration) (CompatStore, error)
}

// Binaries of the suite: old is a release with this binary's migrations;
// newer embeds one more expand migration, newest a level raise on top.
var (
	old    = store.Binary{Version: "0.1.0", Level: store.CompatLevel, Schema: store.SchemaVersion()}
	newer  = store.Binary{Version: "0.2.0", Level: store.CompatLevel, Schema: store.SchemaVersion() + 1}
	newest = store.Binary{Version: "0.3.0", Level: store.CompatLevel + 1, Schema: store.SchemaVersion() + 2}
)

// ExpandMigration is a newer binary's expand migration version: a table of
// its own and a nullable column on runs, which older binaries write
// without knowing it.
func ExpandMigration(version int64) *goose.Migration {
	return store.SQLMigration(version,
		[]string{`CREATE TABLE kl_test_expand (id BIGINT NOT NULL PRIMARY KEY, note TEXT)`, `ALTER TABLE runs ADD COLUMN test_note TEXT`},
		[]string{`ALTER TABLE runs DROP COLUMN test_note`, `DROP TABLE kl_test_expand`})
}

// RaiseTo is the level the newest binary's migration sets.
func RaiseTo(readLevel int) store.Level {
	return store.Level{Level: store.CompatLevel + 1, ReadLevel: readLevel, Why: "fence rules changed in a test"}
}

// newerMigrations are newer's extra migrations; with a raise to level,
// newest's.
func newerMigrations(d store.Dialect, raise *store.Level) []*goose.Migration {
	out := []*goose.Migration{ExpandMigration(store.SchemaVersion() + 1)}
	if raise != nil {
		from := store.Level{Level: store.CompatLevel, ReadLevel: store.CompatLevel, Why: "before the test's raise"}
		out = append(out, store.LevelMigration(store.SchemaVersion()+2, d, *raise, from))
	}
	return out
}

// RunCompat runs the compatibility suite (ADR 0048) on fresh databases of
// newDB: a store migrated by a newer binary at the same level is read and
// written by an older one; one whose level a newer binary raised is read
// but not written by it — each write refused with a *store.CompatError
// naming both versions and what to do, also by a store opened before the
// raise — and one whose read level was raised is refused at Open; a raise
// waits for the write transactions under way, which commit by the old
// rules, and those after it are refused.
func RunCompat(t *testing.T, newDB func(t *testing.T) CompatDB) {
	t.Run("SameLevel", func(t *testing.T) { t.Parallel(); testSameLevel(t, newDB(t)) })
	t.Run("HigherLevel", func(t *testing.T) { t.Parallel(); testHigherLevel(t, newDB(t)) })
	t.Run("RaisedWhileOpen", func(t *testing.T) { t.Parallel(); testRaisedWhileOpen(t, newDB(t)) })
	t.Run("HigherReadLevel", func(t *testing.T) { t.Parallel(); testHigherReadLevel(t, newDB(t)) })
	t.Run("RaiseWaitsForWriters", func(t *testing.T) { t.Parallel(); testRaiseWaitsForWriters(t, newDB(t)) })
}

// open is db.Open as b that fails the test on error and checks the access.
func open(t *testing.T, db CompatDB, b store.Binary, want store.Access, extra ...*goose.Migration) CompatStore {
	t.Helper()
	s, err := db.Open(t, b, extra...)
	if err != nil {
		t.Fatalf("Open as %s (level %d, schema %d): %v", b.Version, b.Level, b.Schema, err)
	}
	got, _ := s.Access(t.Context())
	if got != want {
		t.Fatalf("Open as %s (level %d, schema %d): access %q, want %q", b.Version, b.Level, b.Schema, got, want)
	}
	return s
}

// writeCycle runs what one plan and apply write on state — a plan run,
// its artifact, an apply run with markers, write reservations, a commit
// that releases them, the lease sweep — and returns the first error.
func writeCycle(ctx context.Context, s engine.Store, state string, addr engine.Address) error {
	ts := now()
	plan := engine.Run{ID: newID(), Kind: engine.KindPlan, State: state, Actor: "alice", Status: engine.StatusPlanned, CreatedAt: ts, UpdatedAt: ts}
	if err := s.CreateRun(ctx, plan); err != nil {
		return fmt.Errorf("CreateRun: %w", err)
	}
	if err := s.PutArtifact(ctx, plan.ID, engine.ArtifactPlanFile, []byte("saved plan")); err != nil {
		return fmt.Errorf("PutArtifact: %w", err)
	}
	apply := engine.Run{ID: newID(), Kind: engine.KindApply, State: state, Actor: "alice", Status: engine.StatusApplying, PlanRun: plan.ID, CreatedAt: ts, UpdatedAt: ts}
	if err := s.CreateRun(ctx, apply); err != nil {
		return fmt.Errorf("CreateRun: %w", err)
	}
	if err := s.AddMarkers(ctx, apply.ID, engine.Marker{Kind: engine.MarkerApplyStarted, At: ts}); err != nil {
		return fmt.Errorf("AddMarkers: %w", err)
	}
	req := engine.AcquireRequest{State: state, Run: apply.ID, Holder: engine.Holder{Host: "h", PID: 1}, Reservations: []engine.Reservation{w(addr)}, Lease: time.Minute}
	if _, err := s.Acquire(ctx, req); err != nil {
		return fmt.Errorf("Acquire: %w", err)
	}
	if _, err := s.Commit(ctx, engine.CommitRequest{State: state, Run: apply.ID, Merge: Merge(apply.ID, addr)}); err != nil {
		return fmt.Errorf("Commit: %w", err)
	}
	if _, err := s.ExpireLeases(ctx); err != nil {
		return fmt.Errorf("ExpireLeases: %w", err)
	}
	return nil
}

// head returns state's head serial, failing the test on error.
func head(t *testing.T, s engine.Store, state string) int64 {
	t.Helper()
	st, err := s.GetState(t.Context(), state)
	if err != nil {
		t.Fatalf("GetState(%s): %v", state, err)
	}
	return st.HeadSerial
}

// testSameLevel: a newer binary of the same level migrates (one expand
// migration); the old binary — open already, and opened again on the newer
// schema — reads and writes, and the newer one reads what it wrote.
func testSameLevel(t *testing.T, db CompatDB) {
	ctx := t.Context()
	o := open(t, db, old, store.ReadWrite)
	if _, err := o.CreateState(ctx, NewState("s")); err != nil {
		t.Fatalf("CreateState: %v", err)
	}
	n := open(t, db, newer, store.ReadWrite, newerMigrations(db.Dialect, nil)...)
	reopened := open(t, db, old, store.ReadWrite)
	for i, s := range []engine.Store{o, reopened, n} {
		if err := writeCycle(ctx, s, "s", engine.Address(fmt.Sprintf("terraform_data.r%d", i))); err != nil {
			t.Fatalf("binary %d writing to a store at a newer schema of its level: %v", i, err)
		}
	}
	if got := head(t, n, "s"); got != 3 {
		t.Fatalf("head serial %d after three commits (two by the old binary), want 3", got)
	}
	hist, err := o.History(ctx, "s", engine.HistoryQuery{})
	if err != nil || len(hist) != 4 {
		t.Fatalf("the old binary's History: %d versions, %v; want 4", len(hist), err)
	}
}

// testHigherLevel: the newest binary raises the level (read level
// unchanged); the old binary opens read-only, reads, and every write is
// refused — with a *store.CompatError that errors.Is engine.ErrReadOnly and
// names both binaries' versions and levels, who raised it and what to do —
// and writes nothing; the newest writes.
func testHigherLevel(t *testing.T, db CompatDB) {
	ctx := t.Context()
	o := open(t, db, old, store.ReadWrite)
	if _, err := o.CreateState(ctx, NewState("s")); err != nil {
		t.Fatalf("CreateState: %v", err)
	}
	if err := writeCycle(ctx, o, "s", "terraform_data.a"); err != nil {
		t.Fatal(err)
	}
	raise := RaiseTo(store.CompatLevel)
	n := open(t, db, newest, store.ReadWrite, newerMigrations(db.Dialect, &raise)...)
	ro := open(t, db, old, store.ReadOnly)
	if _, err := ro.History(ctx, "s", engine.HistoryQuery{}); err != nil {
		t.Fatalf("History by a binary below the store's level (reads are allowed): %v", err)
	}
	runs, err := ro.ListRuns(ctx, engine.RunQuery{State: "s"})
	if err != nil || len(runs) != 2 {
		t.Fatalf("ListRuns by a binary below the store's level: %d runs, %v; want 2", len(runs), err)
	}
	err = writeCycle(ctx, ro, "s", "terraform_data.b")
	checkRefused(t, err, true)
	for name, write := range map[string]func() error{
		"CreateState":  func() error { _, err := ro.CreateState(ctx, NewState("t")); return err },
		"PutArtifact":  func() error { return ro.PutArtifact(ctx, runs[0].ID, "x", []byte("x")) },
		"ExpireLeases": func() error { _, err := ro.ExpireLeases(ctx); return err },
		"UpdateRun": func() error {
			_, err := ro.UpdateRun(ctx, runs[0].ID, nil, func(*engine.Run) error { return nil })
			return err
		},
	} {
		if err := write(); !errors.Is(err, engine.ErrReadOnly) {
			t.Errorf("%s by a binary below the store's level: %v; want it refused (engine.ErrReadOnly)", name, err)
		}
	}
	if got := head(t, n, "s"); got != 1 {
		t.Fatalf("head serial %d: the refused binary wrote a version", got)
	}
	if runs, err := n.ListRuns(ctx, engine.RunQuery{State: "s"}); err != nil || len(runs) != 2 {
		t.Fatalf("runs after the refused writes: %d, %v; want the 2 from before", len(runs), err)
	}
	if err := writeCycle(ctx, n, "s", "terraform_data.c"); err != nil {
		t.Fatalf("the binary that raised the level writing: %v", err)
	}
}

// checkRefused fails the test unless err is the *store.CompatError of the
// old binary against the newest's level (write: its writes; else: Open).
func checkRefused(t *testing.T, err error, write bool) {
	t.Helper()
	var ce *store.CompatError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v; want a *store.CompatError", err)
	}
	if write != errors.Is(err, engine.ErrReadOnly) {
		t.Errorf("errors.Is(%v, engine.ErrReadOnly) = %v, want %v", err, !write, write)
	}
	msg := err.Error()
	want := []string{fmt.Sprintf("(version 0.1.0, compatibility level %d)", store.CompatLevel), fmt.Sprintf("compatibility level is %d", store.CompatLevel+1), "raised by version 0.3.0 on ",
		"(fence rules changed in a test)", "upgrade to version 0.3.0 or later"}
	if write {
		want = append(want, "must not write to this store", "reading still works")
	} else {
		want = append(want, "cannot read this store", fmt.Sprintf("readers need level %d", store.CompatLevel+1))
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("refusal %q does not say %q", msg, w)
		}
	}
}

// testRaisedWhileOpen: a store the old binary opened before the raise
// refuses its next write (each write transaction reads the level).
func testRaisedWhileOpen(t *testing.T, db CompatDB) {
	ctx := t.Context()
	o := open(t, db, old, store.ReadWrite)
	if _, err := o.CreateState(ctx, NewState("s")); err != nil {
		t.Fatalf("CreateState: %v", err)
	}
	raise := RaiseTo(store.CompatLevel)
	open(t, db, newest, store.ReadWrite, newerMigrations(db.Dialect, &raise)...)
	if got, _ := o.Access(ctx); got != store.ReadOnly {
		t.Errorf("Access of the store opened before the raise: %q, want read-only", got)
	}
	checkRefused(t, writeCycle(ctx, o, "s", "terraform_data.a"), true)
	if got := head(t, o, "s"); got != 0 {
		t.Fatalf("head serial %d: the binary the raise locked out committed", got)
	}
}

// testHigherReadLevel: when the raise also raises the read level, the old
// binary's Open is refused, naming both sides.
func testHigherReadLevel(t *testing.T, db CompatDB) {
	open(t, db, old, store.ReadWrite)
	raise := RaiseTo(store.CompatLevel + 1)
	open(t, db, newest, store.ReadWrite, newerMigrations(db.Dialect, &raise)...)
	_, err := db.Open(t, old)
	checkRefused(t, err, false)
}

// testRaiseWaitsForWriters: a commit of the old binary is inside its
// transaction (its Merge runs) when the newest binary opens and raises the
// level: the raise waits until that commit is done, the commit succeeds,
// and the old binary's next write is refused.
func testRaiseWaitsForWriters(t *testing.T, db CompatDB) {
	ctx := t.Context()
	o := open(t, db, old, store.ReadWrite)
	if _, err := o.CreateState(ctx, NewState("s")); err != nil {
		t.Fatalf("CreateState: %v", err)
	}
	ts := now()
	apply := engine.Run{ID: newID(), Kind: engine.KindApply, State: "s", Actor: "alice", Status: engine.StatusApplying, CreatedAt: ts, UpdatedAt: ts}
	if err := o.CreateRun(ctx, apply); err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	inTx, release := make(chan struct{}), make(chan struct{})
	merge := Merge(apply.ID, "terraform_data.a")
	committed := make(chan error, 1)
	go func() {
		_, err := o.Commit(ctx, engine.CommitRequest{State: "s", Run: apply.ID, Merge: func(h engine.Version, snap []byte) (engine.CommitResult, error) {
			close(inTx)
			<-release
			return merge(h, snap)
		}})
		committed <- err
	}()
	<-inTx
	raise := RaiseTo(store.CompatLevel)
	onlyRaise := newest
	onlyRaise.Schema = store.SchemaVersion() + 1
	from := store.Level{Level: store.CompatLevel, ReadLevel: store.CompatLevel, Why: "before the test's raise"}
	raised := make(chan error, 1)
	go func() {
		_, err := db.Open(t, onlyRaise, store.LevelMigration(onlyRaise.Schema, db.Dialect, raise, from))
		raised <- err
	}()
	select {
	case err := <-raised:
		close(release)
		t.Fatalf("the raise (Open: %v) did not wait for the commit under way", err)
	case <-time.After(500 * time.Millisecond):
	}
	close(release)
	if err := <-committed; err != nil {
		t.Fatalf("the commit admitted before the raise: %v; want it to commit", err)
	}
	if err := <-raised; err != nil {
		t.Fatalf("Open of the raising binary after the commit: %v", err)
	}
	if got := head(t, o, "s"); got != 1 {
		t.Fatalf("head serial %d, want the commit made before the raise", got)
	}
	checkRefused(t, writeCycle(ctx, o, "s", "terraform_data.b"), true)
}
