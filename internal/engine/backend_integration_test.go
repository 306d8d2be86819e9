package engine_test

// The http backend's engine API (issue 14 §3, §4, §7; ADR 0056) on both
// real stores: backend locks as whole-state reservations, POSTs as
// checkpoints, one version at UNLOCK, fences and recovery, force-unlock,
// adoption, and since-plan naming a push. The HTTP layer and real
// Terraform through it are internal/api's tests; kl applies beside a lock
// here run a fake Terraform (the interplay is the engine's, not
// Terraform's).

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/store/sqlite"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// bh is one engine over a real store (SQLite or PostgreSQL) and a fake
// Terraform, with testState adopted at serial 1 holding
// terraform_data.a = "a0" and terraform_data.b = "b0" (lineage fakeLineage).
type bh struct {
	t     *testing.T
	eng   *engine.Engine
	store engine.Store
	tf    *fakeTerraform
}

// eachStore runs fn as a subtest on SQLite and on PostgreSQL.
func eachStore(t *testing.T, fn func(t *testing.T, h *bh)) {
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			fn(t, newBH(t, kind))
		})
	}
}

func openStore(t *testing.T, kind string) engine.Store {
	t.Helper()
	ctx := t.Context()
	var st engine.Store
	var err error
	switch kind {
	case "sqlite":
		st, err = sqlite.Open(ctx, filepath.Join(t.TempDir(), "kl.db"))
	case "postgres":
		st, err = postgres.Open(ctx, pgtest.DSN(t))
	}
	if err != nil {
		t.Fatalf("opening %s store: %v", kind, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newBH(t *testing.T, kind string) *bh {
	t.Helper()
	st := openStore(t, kind)
	tf := &fakeTerraform{}
	log := slog.New(slog.NewTextHandler(newTestLogWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	eng := engine.New(st, tf, log)
	eng.Lease = 3 * time.Second
	eng.Poll = 20 * time.Millisecond
	if _, err := eng.InitState(t.Context(), testState, tfDoc(t, fakeLineage, 1, map[string]string{"a": "a0", "b": "b0"}), "tester"); err != nil {
		t.Fatalf("InitState: %v", err)
	}
	return &bh{t: t, eng: eng, store: st, tf: tf}
}

// lockInfo is Terraform's LockInfo of a lock with id and operation op.
func lockInfo(id, op string) engine.LockInfo {
	return engine.LockInfo{ID: id, Operation: op, Who: "bob@laptop", Version: "1.11.4", Created: time.Date(2026, 12, 2, 10, 2, 0, 0, time.UTC), Path: testState}
}

// lock takes a backend lock for bob, or fails.
func (h *bh) lock(id, op string) *engine.BackendLock {
	h.t.Helper()
	l, err := h.eng.LockBackend(h.t.Context(), engine.BackendLockInput{State: testState, Actor: "bob", Info: lockInfo(id, op), Write: engine.Writes(op)})
	if err != nil {
		h.t.Fatalf("LockBackend %s %s: %v", id, op, err)
	}
	return l
}

// write POSTs doc under lock id.
func (h *bh) write(id string, doc []byte) error {
	return h.eng.WriteBackend(h.t.Context(), engine.BackendWriteInput{State: testState, LockID: id, Actor: "bob", Document: doc})
}

func (h *bh) unlock(id string, force bool) (*engine.BackendUnlockOutcome, error) {
	return h.eng.UnlockBackend(h.t.Context(), engine.BackendUnlockInput{State: testState, Actor: "bob", LockID: id, Force: force})
}

func (h *bh) head() (engine.State, map[string]string) {
	h.t.Helper()
	st, err := h.store.GetState(h.t.Context(), testState)
	if err != nil {
		h.t.Fatal(err)
	}
	doc, err := h.store.Snapshot(h.t.Context(), testState, st.HeadSerial)
	if err != nil {
		h.t.Fatal(err)
	}
	return st, parseHead(h.t, doc).inputs()
}

func (h *bh) markers(id string) []engine.Marker {
	h.t.Helper()
	ms, err := h.store.Markers(h.t.Context(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return ms
}

func (h *bh) reservations() []engine.Reservation {
	h.t.Helper()
	rs, err := h.store.Reservations(h.t.Context(), testState)
	if err != nil {
		h.t.Fatal(err)
	}
	return rs
}

// plan stores a plan of alice updating the named resources at the head.
func (h *bh) plan(write ...string) engine.Run {
	h.t.Helper()
	st, _ := h.head()
	return h.planOn(st, write...)
}

// planOn stores a plan of alice updating the named resources of state st
// at its head.
func (h *bh) planOn(st engine.State, write ...string) engine.Run {
	h.t.Helper()
	in := engine.Intent{Changes: map[string]engine.IntentChange{}}
	for _, w := range write {
		in.Changes["terraform_data."+w] = engine.IntentChange{Actions: []string{"update"}, AfterDigest: "sha256:" + w}
	}
	planFile := []byte(fmt.Sprintf("fake plan of %v at %d", write, st.HeadSerial))
	sum := sha256.Sum256(planFile)
	h.tf.PlanResult = &engine.PlanResult{PlanFile: planFile, Digest: "sha256:" + hex.EncodeToString(sum[:]), Config: []byte("cfg"),
		Footprint: engine.Footprint{Write: addrs(write...)}, Intent: in, Summary: engine.PlanSummary{Change: len(write)},
		Lineage: st.Lineage, Serial: st.HeadSerial, TerraformVersion: "1.11.4"}
	out, err := h.eng.Plan(h.t.Context(), engine.PlanInput{State: st.Name, Dir: h.t.TempDir(), Actor: "alice"})
	if err != nil {
		h.t.Fatalf("Plan: %v", err)
	}
	h.tf.Info = engine.PlanFileInfo{Lineage: st.Lineage, Serial: st.HeadSerial, TerraformVersion: "1.11.4"}
	return out.Run
}

// applyResult makes the fake's apply write values over the head.
func (h *bh) applyResult(values map[string]string) {
	h.t.Helper()
	st, cur := h.head()
	for k, v := range values {
		cur[k] = v
	}
	h.tf.ApplyResult = &engine.ApplyResult{State: tfDoc(h.t, st.Lineage, st.HeadSerial+1, cur), Changed: len(values)}
}

func TestBackendLockUnlockNothingWritten(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, h *bh) {
		l := h.lock("tf-1", engine.OperationTypeApply)
		if len(h.reservations()) != 1 || h.reservations()[0].Address != engine.AllAddresses || h.reservations()[0].Mode != engine.ModeWrite {
			t.Fatalf("reservations = %+v, want * write", h.reservations())
		}
		if l.Run.Backend == nil || l.Run.Backend.ID != "tf-1" || l.Run.Kind != engine.KindApply || l.Run.PlanRun != "" {
			t.Fatalf("lock run = %+v", l.Run)
		}
		out, err := h.unlock("tf-1", false)
		if err != nil {
			t.Fatalf("UnlockBackend: %v", err)
		}
		if out.Version != nil {
			t.Fatalf("unlock committed version %d, want none", out.Version.Serial)
		}
		if out.Run.Status != engine.StatusApplied || !out.Run.End.Is(engine.CauseUnlocked) || out.Run.CommittedSerial != 0 {
			t.Fatalf("run = %s %+v, want applied, unlocked, nothing committed", out.Run.Status, out.Run.End)
		}
		if st, _ := h.head(); st.HeadSerial != 1 {
			t.Fatalf("head = %d, want 1", st.HeadSerial)
		}
		if rs := h.reservations(); len(rs) != 0 {
			t.Fatalf("reservations after unlock = %+v", rs)
		}
		// Unlocking again: no such lock.
		if _, err := h.unlock("tf-1", false); !errors.Is(err, engine.ErrConflict) {
			t.Fatalf("second unlock: %v, want ErrConflict", err)
		}
		// The run reads as a backend lock in `kl runs`.
		var buf strings.Builder
		runs, err := h.eng.Runs(t.Context(), engine.RunQuery{State: testState})
		if err != nil {
			t.Fatal(err)
		}
		if err := report.Runs(&buf, runs, report.RunsPage{}, report.Options{}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), "backend write lock by bob (terraform apply, Terraform 1.11.4); released with no version written") {
			t.Errorf("kl runs does not name the backend lock:\n%s", buf.String())
		}
	})
}

func TestBackendWritesAreOneVersionAtUnlock(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, h *bh) {
		l := h.lock("tf-2", engine.OperationTypeApply)
		for i, v := range []string{"a1", "a2", "a3"} {
			if err := h.write("tf-2", tfDoc(t, fakeLineage, int64(2+i), map[string]string{"a": v, "b": "b0"})); err != nil {
				t.Fatalf("write %d: %v", i, err)
			}
		}
		if st, _ := h.head(); st.HeadSerial != 1 {
			t.Fatalf("a write made version %d before UNLOCK", st.HeadSerial)
		}
		out, err := h.unlock("tf-2", false)
		if err != nil {
			t.Fatalf("UnlockBackend: %v", err)
		}
		v := out.Version
		if v == nil || v.Serial != 2 {
			t.Fatalf("version = %+v, want 2", v)
		}
		if st, head := h.head(); st.HeadSerial != 2 || head["a"] != "a3" || head["b"] != "b0" {
			t.Fatalf("head %d = %v, want 2 with a3, b0", st.HeadSerial, head)
		}
		p := v.Provenance
		if p.Mode != engine.CommitPush || p.Run != l.Run.ID || p.Actor != "bob" || p.Backend == nil ||
			p.Backend.Operation != engine.OperationTypeApply || p.Backend.Who != "bob@laptop" || p.Backend.Version != "1.11.4" || p.Backend.Writes != 3 || p.Partial {
			t.Fatalf("provenance = %+v (backend %+v)", p, p.Backend)
		}
		if !sameSet(v.Changed, addrs("a")) {
			t.Fatalf("changed = %v, want a only", v.Changed)
		}
		if out.Run.Status != engine.StatusApplied || out.Run.CommittedSerial != 2 {
			t.Fatalf("run = %s committed %d", out.Run.Status, out.Run.CommittedSerial)
		}
		if n := len(kindsOf(h.markers(l.Run.ID), engine.MarkerBackendWrite)); n != 3 {
			t.Fatalf("%d backend-write markers, want 3", n)
		}
		if rs := h.reservations(); len(rs) != 0 {
			t.Fatalf("reservations after unlock = %+v", rs)
		}
		var buf strings.Builder
		hist, err := h.eng.History(t.Context(), testState, engine.HistoryQuery{})
		if err != nil {
			t.Fatal(err)
		}
		if err := report.History(&buf, engine.State{Name: testState}, hist, report.Options{}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), "push through the backend: terraform apply") {
			t.Errorf("kl history does not name the push:\n%s", buf.String())
		}
	})
}

func TestBackendWriteRefusals(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, h *bh) {
		doc := tfDoc(t, fakeLineage, 2, map[string]string{"a": "a1", "b": "b0"})
		if err := h.write("", doc); !errors.Is(err, engine.ErrLocked) || !strings.Contains(err.Error(), "not locked") {
			t.Fatalf("write without a lock: %v, want ErrLocked saying it is not locked", err)
		}
		l := h.lock("tf-3", "state-rm")
		if err := h.write("tf-other", doc); !errors.Is(err, engine.ErrLocked) || !strings.Contains(err.Error(), "backend lock run "+l.Run.ID) {
			t.Fatalf("write with a wrong id: %v, want ErrLocked naming the lock", err)
		}
		other := "11111111-2222-3333-4444-555555555555"
		err := h.write("tf-3", tfDoc(t, other, 5, map[string]string{"a": "a1"}))
		if !errors.Is(err, engine.ErrConflict) || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), fakeLineage) {
			t.Fatalf("write of another lineage: %v, want ErrConflict naming both lineages", err)
		}
		if err := h.write("tf-3", tfDoc(t, fakeLineage, 0, map[string]string{"a": "a1"})); !errors.Is(err, engine.ErrConflict) || !strings.Contains(err.Error(), "below the head's 1") {
			t.Fatalf("write of an older serial: %v", err)
		}
		if err := h.write("tf-3", []byte(`{"version":3}`)); !errors.Is(err, engine.ErrConflict) {
			t.Fatalf("write of a non-v4 document: %v, want ErrConflict", err)
		}
		if err := h.write("tf-3", []byte(`not json`)); !errors.Is(err, engine.ErrInvalid) {
			t.Fatalf("write of a non-JSON body: %v, want ErrInvalid", err)
		}
		var refusals []string
		for _, m := range kindsOf(h.markers(l.Run.ID), engine.MarkerBackendRefused) {
			refusals = append(refusals, m.Extra["refusal"])
		}
		if got := strings.Join(refusals, ","); got != "lock-id,lineage,serial,not-state,not-state" { // the wrong id first (R3)
			t.Fatalf("refusal markers = %s", got)
		}
		// kl status says why Terraform got 409.
		st, err := h.eng.Status(t.Context(), testState)
		if err != nil {
			t.Fatal(err)
		}
		var buf strings.Builder
		if err := report.Status(&buf, st, report.Options{}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"backend lock", "lease until", "refused write"} {
			if !strings.Contains(buf.String(), want) {
				t.Errorf("kl status lacks %q:\n%s", want, buf.String())
			}
		}
		if _, err := h.unlock("tf-3", false); err != nil {
			t.Fatal(err)
		}
		// A read lock does not write.
		r := h.lock("tf-4", engine.OperationTypePlan)
		if err := h.write("tf-4", doc); !errors.Is(err, engine.ErrLocked) || !strings.Contains(err.Error(), "read lock") {
			t.Fatalf("write under a read lock: %v", err)
		}
		if got := kindsOf(h.markers(r.Run.ID), engine.MarkerBackendRefused); len(got) != 1 || got[0].Extra["refusal"] != engine.RefusalReadLock {
			t.Fatalf("read-lock refusal markers = %+v", got)
		}
	})
}

// holdApply starts a kl apply of a plan writing names whose fake Terraform
// waits until release is called; it returns once the apply holds its
// reservations, and done yields its outcome.
func (h *bh) holdApply(names ...string) (run string, release func(), done <-chan error) {
	h.t.Helper()
	p := h.plan(names...)
	vals := map[string]string{}
	for _, n := range names {
		vals[n] = n + "-kl"
	}
	h.applyResult(vals)
	gate := make(chan struct{})
	reserved := make(chan string, 1)
	h.tf.OnApply = func() { <-gate }
	errc := make(chan error, 1)
	go func() {
		_, err := h.eng.Apply(h.t.Context(), engine.ApplyInput{PlanRun: p.ID, Actor: "alice", OnReserved: func(id string) { reserved <- id }})
		errc <- err
	}()
	select {
	case run = <-reserved:
	case err := <-errc:
		h.t.Fatalf("apply ended before it reserved: %v", err)
	case <-time.After(30 * time.Second):
		h.t.Fatal("apply did not reserve")
	}
	var once sync.Once
	return run, func() { once.Do(func() { close(gate) }) }, errc
}

func TestBackendReadLockRefusedWhileKlApplyWrites(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, h *bh) {
		apply, release, done := h.holdApply("a")
		defer release()
		_, err := h.eng.LockBackend(t.Context(), engine.BackendLockInput{State: testState, Actor: "carol", Info: lockInfo("tf-plan", engine.OperationTypePlan)})
		var le *engine.BackendLockedError
		if !errors.As(err, &le) || !errors.Is(err, engine.ErrLocked) {
			t.Fatalf("read lock beside a kl apply: %v, want *BackendLockedError", err)
		}
		if le.Holder.ID != apply || le.Holder.Operation != "apply" || le.Holder.Who != "alice" ||
			!strings.Contains(le.Holder.Info, "kl apply run "+apply+" by alice holds terraform_data.a") {
			t.Fatalf("holder = %+v", le.Holder)
		}
		// A refused LOCK leaves no run behind (Terraform retries it).
		rs, err := h.store.ListRuns(t.Context(), engine.RunQuery{State: testState, Kind: engine.KindApply})
		if err != nil || len(rs) != 1 {
			t.Fatalf("apply runs = %d (%v), want only the kl apply", len(rs), err)
		}
		release()
		if err := <-done; err != nil {
			t.Fatalf("kl apply: %v", err)
		}
		r := h.lock("tf-plan", engine.OperationTypePlan)
		if h.reservations()[0].Mode != engine.ModeRead {
			t.Fatalf("plan lock mode = %s, want read", h.reservations()[0].Mode)
		}
		// A second read lock coexists with it.
		h.lock("tf-plan-2", engine.OperationTypePlan)
		if out, err := h.unlock("tf-plan", false); err != nil || out.Run.ID != r.Run.ID || out.Version != nil {
			t.Fatalf("unlock of the read lock: %+v %v", out, err)
		}
	})
}

func TestKlApplyBesideABackendLock(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, h *bh) {
		p := h.plan("a")
		h.applyResult(map[string]string{"a": "a-kl"})
		l := h.lock("tf-5", engine.OperationTypeApply)
		_, err := h.eng.Apply(t.Context(), engine.ApplyInput{PlanRun: p.ID, Actor: "alice"})
		var ce *engine.ConflictError
		if !errors.As(err, &ce) || len(ce.Blockers) != 1 || ce.Blockers[0].Run != l.Run.ID || ce.Blockers[0].Backend == nil {
			t.Fatalf("kl apply beside a backend lock: %v, want a conflict naming the lock", err)
		}
		refused, err := h.eng.Run(t.Context(), runErrorID(err))
		if err != nil {
			t.Fatal(err)
		}
		text := report.EndText(refused.ID, refused.End)
		if !strings.Contains(text, "backend lock by bob: terraform apply (OperationTypeApply) since 10:02") {
			t.Fatalf("refusal = %q, want it to name the backend lock", text)
		}
		// A second plan waits for the lock and goes ahead after UNLOCK.
		p2 := h.plan("b")
		h.applyResult(map[string]string{"b": "b-kl"})
		waited := make(chan []engine.Blocker, 1)
		errc := make(chan error, 1)
		go func() {
			_, err := h.eng.Apply(t.Context(), engine.ApplyInput{PlanRun: p2.ID, Actor: "alice", Wait: 30 * time.Second,
				OnWait: func(bs []engine.Blocker) { waited <- bs }})
			errc <- err
		}()
		select {
		case bs := <-waited:
			if len(bs) != 1 || bs[0].Backend == nil || bs[0].Backend.Operation != engine.OperationTypeApply {
				t.Fatalf("waits on %+v", bs)
			}
		case err := <-errc:
			t.Fatalf("apply did not wait: %v", err)
		}
		if err := h.write("tf-5", tfDoc(t, fakeLineage, 2, map[string]string{"a": "a-tf", "b": "b0"})); err != nil {
			t.Fatal(err)
		}
		if _, err := h.unlock("tf-5", false); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("waiting apply: %v", err)
		}
		if st, head := h.head(); st.HeadSerial != 3 || head["a"] != "a-tf" || head["b"] != "b-kl" {
			t.Fatalf("head %d = %v, want 3: a-tf (the push), b-kl (the apply)", st.HeadSerial, head)
		}
		// Its record names the lock's operator and Terraform's operation
		// (issue 14 review F8), not a bare run id.
		p2r, err := h.eng.Run(t.Context(), p2.ID)
		if err != nil {
			t.Fatal(err)
		}
		story, err := h.eng.RunStory(t.Context(), p2r.ApplyRun)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := report.RunStory(&b, story, report.Options{}); err != nil {
			t.Fatal(err)
		}
		want := "backend lock " + l.Run.ID + " by bob (terraform apply (OperationTypeApply), Terraform 1.11.4, on bob@laptop)"
		if strings.Count(b.String(), want) < 2 { // the waited marker and the waited-for fact
			t.Fatalf("the waiting apply's story does not name the backend lock as %q (its waited marker and its waited-for fact):\n%s", want, b.String())
		}
	})
}

// TestBackendLockEndsInWords (issue 14 review F1, F2, F7): a plan's read
// lock and a write lock whose every POST was refused end released, not
// allowed or applied, with the facts the views need (mode, refusals); a
// lapsed apply's lock that wrote no checkpoint is refused to others
// naming an unfence, not a recover that has nothing to commit.
func TestBackendLockEndsInWords(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, h *bh) {
		ctx := t.Context()
		rl := h.lock("tf-plan", engine.OperationTypePlan)
		if _, err := h.unlock("tf-plan", false); err != nil {
			t.Fatal(err)
		}
		w, err := h.eng.Why(ctx, rl.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if w.Verdict != engine.VerdictReleased || w.Run.Lock == nil || !w.Run.Lock.Read() || w.Run.Lock.Unlocked == nil {
			t.Fatalf("why of an unlocked read lock: verdict %s, lock %+v; want released, a read lock, unlocked", w.Verdict, w.Run.Lock)
		}
		wl := h.lock("tf-push", "state-push")
		if err := h.write("tf-push", tfDoc(t, "another-lineage", 9, map[string]string{"a": "x"})); !errors.Is(err, engine.ErrConflict) {
			t.Fatalf("write of another lineage: %v, want ErrConflict", err)
		}
		if _, err := h.unlock("tf-push", false); err != nil {
			t.Fatal(err)
		}
		w, err = h.eng.Why(ctx, wl.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if w.Verdict != engine.VerdictReleased || w.Run.Lock == nil || w.Run.Lock.Writes != 0 || len(w.Run.Lock.Refused) != 1 {
			t.Fatalf("why of a write lock whose writes were refused: verdict %s, lock %+v; want released, 0 writes, 1 refused", w.Verdict, w.Run.Lock)
		}
		if text := report.RunEndText(w.Run); !strings.Contains(text, "with no version written: Kilolock refused its write") || !strings.Contains(text, "another-lineage") {
			t.Fatalf("its end = %q, want no version written and the refused write named", text)
		}

		const ttl = time.Second
		h.eng.BackendLockTTL = ttl
		a := h.lock("tf-apply", engine.OperationTypeApply)
		h.expire(ttl)
		_, err = h.eng.LockBackend(ctx, engine.BackendLockInput{State: testState, Actor: "carol", Info: lockInfo("tf-x", engine.OperationTypePlan)})
		var le *engine.BackendLockedError
		if !errors.As(err, &le) || strings.Contains(le.Holder.Info, "kl run recover") || !strings.Contains(le.Holder.Info, "kl run unfence "+a.Run.ID) {
			t.Fatalf("lock beside a fence that wrote no checkpoint: %v; want an unfence, no recover", err)
		}
		st, err := h.eng.Status(ctx, testState)
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Fenced) != 1 || st.Fenced[0].Run.Lock == nil || st.Fenced[0].Run.Lock.Writes != 0 {
			t.Fatalf("status: fenced %+v, want the lock with its facts", st.Fenced)
		}
		var b strings.Builder
		if err := report.Status(&b, st, report.Options{}); err != nil {
			t.Fatal(err)
		}
		if s := b.String(); strings.Contains(s, "kl run recover") || strings.Contains(s, "stopped renewing") || !strings.Contains(s, "KL_BACKEND_LOCK_TTL") {
			t.Fatalf("kl status of the lapsed lock:\n%s", s)
		}
	})
}

func TestConcurrentBackendLocksOneWins(t *testing.T) {
	t.Parallel()
	h := newBH(t, "postgres")
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = h.eng.LockBackend(t.Context(), engine.BackendLockInput{State: testState, Actor: "bob",
				Info: lockInfo(fmt.Sprintf("tf-%d", i), engine.OperationTypeApply), Write: true})
		}()
	}
	wg.Wait()
	won := 0
	for i, err := range errs {
		var le *engine.BackendLockedError
		switch {
		case err == nil:
			won++
		case errors.As(err, &le):
		default:
			t.Errorf("lock %d: %v, want a *BackendLockedError", i, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d locks won, want exactly 1 (%v)", won, errs)
	}
	if rs := h.reservations(); len(rs) != 1 {
		t.Fatalf("reservations = %+v, want one", rs)
	}
}

// expire waits past a backend lock's lease (ttl) and runs the sweep.
func (h *bh) expire(ttl time.Duration) {
	h.t.Helper()
	time.Sleep(ttl + 300*time.Millisecond)
	if _, err := h.store.ExpireLeases(h.t.Context()); err != nil {
		h.t.Fatal(err)
	}
}

func TestBackendLockLeaseLapseFencesAndRecovers(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, h *bh) {
		const ttl = time.Second
		h.eng.BackendLockTTL = ttl
		w := h.lock("tf-6", "state-rm")
		if err := h.write("tf-6", tfDoc(t, fakeLineage, 2, map[string]string{"a": "a0"})); err != nil {
			t.Fatal(err)
		}
		h.expire(ttl)
		run, err := h.eng.Run(t.Context(), w.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if run.Status != engine.StatusLeaseExpired || !run.End.Recoverable || !sameSet(run.End.Fenced, engine.AddressSet{engine.AllAddresses}) {
			t.Fatalf("lapsed lock that wrote = %s %+v, want lease-expired, fenced *, recoverable", run.Status, run.End)
		}
		rs := h.reservations()
		if len(rs) != 1 || !rs[0].Fenced() {
			t.Fatalf("reservations = %+v, want the fence", rs)
		}
		_, err = h.eng.LockBackend(t.Context(), engine.BackendLockInput{State: testState, Actor: "carol", Info: lockInfo("tf-x", engine.OperationTypePlan)})
		var le *engine.BackendLockedError
		if !errors.As(err, &le) || !le.Blockers[0].Fenced || !strings.Contains(le.Holder.Info, "kl run recover "+w.Run.ID) {
			t.Fatalf("lock beside the fence: %v", err)
		}
		p := h.plan("a")
		h.applyResult(map[string]string{"a": "a-kl"})
		var fe *engine.FencedError
		if _, err := h.eng.Apply(t.Context(), engine.ApplyInput{PlanRun: p.ID, Actor: "alice"}); !errors.As(err, &fe) {
			t.Fatalf("kl apply beside the fence: %v, want a *FencedError", err)
		}
		out, err := h.eng.Recover(t.Context(), w.Run.ID)
		if err != nil {
			t.Fatalf("Recover: %v", err)
		}
		if out.Version == nil || out.Version.Serial != 2 || !sameSet(out.Version.Changed, addrs("b")) ||
			out.Version.Provenance.Backend == nil || !out.Version.Provenance.Backend.Recovered || !out.Version.Provenance.Partial {
			t.Fatalf("recovered version = %+v", out.Version)
		}
		if _, head := h.head(); len(head) != 1 || head["a"] != "a0" {
			t.Fatalf("head after recover = %v, want a0 only", head)
		}
		if rs := h.reservations(); len(rs) != 0 {
			t.Fatalf("reservations after recover = %+v", rs)
		}
		if out.Run.CommittedSerial != 2 || out.Run.End.Recoverable || out.Run.End.Lifted != engine.LiftRecovered {
			t.Fatalf("recovered run = %+v", out.Run.End)
		}
		if _, err := h.eng.Recover(t.Context(), w.Run.ID); !errors.Is(err, engine.ErrConflict) {
			t.Fatalf("second recover: %v, want ErrConflict", err)
		}
	})
}

func TestBackendLockLeaseLapseWithoutWrites(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, h *bh) {
		const ttl = time.Second
		h.eng.BackendLockTTL = ttl
		// A read lock and an unwritten state-rm lock are just released.
		for _, op := range []string{engine.OperationTypePlan, "state-rm"} {
			l := h.lock("tf-"+op, op)
			h.expire(ttl)
			if rs := h.reservations(); len(rs) != 0 {
				t.Fatalf("%s: reservations after the lapse = %+v, want none", op, rs)
			}
			r, err := h.eng.Run(t.Context(), l.Run.ID)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != engine.StatusLeaseExpired || len(r.End.Fenced) > 0 || r.End.Recoverable {
				t.Fatalf("%s: lapsed lock = %s %+v, want lease-expired, no fence", op, r.Status, r.End)
			}
		}
		// An apply's lock is fenced even unwritten: its Terraform may have
		// changed real objects. Recover has nothing; force-unlock is
		// refused (issue 14 §3: it lifts only a live backend lock), naming
		// kl run unfence; unfence lifts it.
		a := h.lock("tf-apply", engine.OperationTypeApply)
		h.expire(ttl)
		if rs := h.reservations(); len(rs) != 1 || !rs[0].Fenced() {
			t.Fatalf("apply lock after the lapse: reservations = %+v, want its fence", rs)
		}
		if _, err := h.eng.Recover(t.Context(), a.Run.ID); !errors.Is(err, engine.ErrNotFound) {
			t.Fatalf("recover of an unwritten lock: %v, want ErrNotFound", err)
		}
		for _, c := range []struct {
			id    string
			force bool
		}{{"", true}, {"tf-apply", true}, {a.Run.ID, true}, {a.Run.ID, false}} { // by its run id: not its own Terraform
			id := c.id
			_, err := h.eng.UnlockBackend(t.Context(), engine.BackendUnlockInput{State: testState, Actor: "ops", LockID: id, Force: c.force})
			for _, want := range []string{"backend lock run " + a.Run.ID + " (terraform apply by bob) is a fence: its lease ran out at",
				"it wrote no checkpoint, so there is nothing to recover: after checking the real objects, `kl run unfence " + a.Run.ID + " --reason TEXT` lifts it",
				"force-unlock lifts only a live backend lock, never a fence"} {
				if !errors.Is(err, engine.ErrConflict) || !strings.Contains(err.Error(), want) {
					t.Errorf("force-unlock (ID %q) of the fenced lock: %v, want ErrConflict saying %q", id, err, want)
				}
			}
		}
		if rs := h.reservations(); len(rs) != 1 || !rs[0].Fenced() {
			t.Fatalf("reservations after the refused force-unlock = %+v, want the fence", rs)
		}
		if m := engine.ForceUnlockRefusalOf(h.markers(a.Run.ID)); m == nil || m.By != "ops" || !strings.Contains(m.Reason, "kl run unfence "+a.Run.ID) {
			t.Fatalf("the fence's story has no refused force-unlock by ops: %+v", m)
		}
		st, err := h.eng.Status(t.Context(), testState)
		if err != nil {
			t.Fatal(err)
		}
		var status, why strings.Builder
		if err := report.Status(&status, st, report.Options{}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(flatWords(status.String()), "terraform force-unlock refused (") ||
			!strings.Contains(flatWords(status.String()), "by ops): force-unlock lifts only a live backend lock, never a fence") {
			t.Errorf("kl status does not say force-unlock was refused:\n%s", status.String())
		}
		y, err := h.eng.Why(t.Context(), a.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := report.Why(&why, y, report.Options{}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(flatWords(why.String()), "force-unlock lifts only a live backend lock, never a fence") {
			t.Errorf("kl why does not say force-unlock was refused:\n%s", why.String())
		}
		if _, err := h.eng.Unfence(t.Context(), engine.UnfenceInput{Run: a.Run.ID, By: "ops", Why: "checked: nothing changed"}); err != nil {
			t.Fatalf("unfence: %v", err)
		}
		if rs := h.reservations(); len(rs) != 0 {
			t.Fatalf("reservations after unfence = %+v", rs)
		}
		// A Terraform alive past its lease still writes under its fence,
		// and its own UNLOCK commits and lifts the fence.
		late := h.lock("tf-late", engine.OperationTypeApply)
		h.expire(ttl)
		if err := h.write("tf-late", tfDoc(t, fakeLineage, 2, map[string]string{"a": "a-late", "b": "b0"})); err != nil {
			t.Fatalf("write under its own fence: %v", err)
		}
		// A force-unlock now names recover: the fence has a checkpoint.
		if _, err := h.eng.UnlockBackend(t.Context(), engine.BackendUnlockInput{State: testState, Actor: "ops", Force: true}); !errors.Is(err, engine.ErrConflict) ||
			!strings.Contains(err.Error(), "`kl run recover "+late.Run.ID+"` commits its checkpoint and lifts it") {
			t.Errorf("force-unlock of a fence that wrote: %v, want ErrConflict naming kl run recover", err)
		}
		out, err := h.unlock("tf-late", false)
		if err != nil || out.Version == nil || out.Version.Serial != 2 {
			t.Fatalf("late unlock: %+v %v", out, err)
		}
		if out.Run.ID != late.Run.ID || out.Run.End.Lifted != engine.LiftCommitted || len(h.reservations()) != 0 {
			t.Fatalf("late unlock run end = %+v, reservations %+v", out.Run.End, h.reservations())
		}
		if _, head := h.head(); head["a"] != "a-late" {
			t.Fatalf("head = %v", head)
		}
		// Its words (issue 14 review F6): the lease ran out at its end
		// time — the marker's time too — and the UNLOCK came after and
		// committed: nothing more is needed.
		lr, err := h.eng.Run(t.Context(), late.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		text := report.RunEndText(lr)
		for _, w := range []string{"ran out at " + lr.End.LeaseEnd.Format(time.RFC3339) + " without an UNLOCK", "its UNLOCK arrived after the lease ran out",
			"committed its last checkpoint as version 2", "nothing more is needed"} {
			if !strings.Contains(text, w) {
				t.Errorf("the late lock's end = %q, want %q", text, w)
			}
		}
		for _, m := range h.markers(late.Run.ID) {
			if m.Kind == engine.MarkerLeaseExpired && !m.At.Truncate(time.Second).Equal(lr.End.LeaseEnd) {
				t.Errorf("lease-expired marker at %v, want the lease's end %v", m.At, lr.End.LeaseEnd)
			}
		}
	})
}

func TestBackendForceUnlock(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, h *bh) {
		apply, release, done := h.holdApply("a")
		_, err := h.eng.UnlockBackend(t.Context(), engine.BackendUnlockInput{State: testState, Actor: "ops", Force: true})
		if !errors.Is(err, engine.ErrConflict) || !strings.Contains(err.Error(), "kl apply run "+apply) || !strings.Contains(err.Error(), "lifts only a backend lock") {
			t.Fatalf("force-unlock of a kl apply: %v, want ErrConflict naming it", err)
		}
		if _, err := h.eng.UnlockBackend(t.Context(), engine.BackendUnlockInput{State: testState, Actor: "ops", LockID: apply, Force: true}); !errors.Is(err, engine.ErrConflict) {
			t.Fatalf("force-unlock naming the kl apply: %v, want ErrConflict", err)
		}
		release()
		if err := <-done; err != nil {
			t.Fatalf("kl apply after the refused force-unlock: %v", err)
		}
		// A lock that wrote, forced: its last checkpoint is committed, partial.
		l := h.lock("tf-9", engine.OperationTypeApply)
		if err := h.write("tf-9", tfDoc(t, fakeLineage, 3, map[string]string{"a": "a-kl", "b": "b9"})); err != nil {
			t.Fatal(err)
		}
		out, err := h.eng.UnlockBackend(t.Context(), engine.BackendUnlockInput{State: testState, Actor: "ops", Force: true})
		if err != nil {
			t.Fatalf("force-unlock: %v", err)
		}
		if out.Run.ID != l.Run.ID || out.Version == nil || !out.Version.Provenance.Partial || out.Version.Provenance.Backend.ForceUnlockedBy != "ops" {
			t.Fatalf("force-unlock outcome = %+v", out)
		}
		u := kindsOf(h.markers(l.Run.ID), engine.MarkerUnlocked)
		if len(u) != 1 || u[0].By != "ops" || !engine.ForceUnlocked(u[0]) {
			t.Fatalf("unlocked markers = %+v", u)
		}
		if _, head := h.head(); head["b"] != "b9" {
			t.Fatalf("head = %v", head)
		}
		// An UNLOCK naming a live lock by its run id (which every 423
		// tells) is not its own Terraform's: it is recorded as forced.
		l2 := h.lock("tf-10", engine.OperationTypeApply)
		if _, err := h.eng.UnlockBackend(t.Context(), engine.BackendUnlockInput{State: testState, Actor: "ops", LockID: l2.Run.ID}); err != nil {
			t.Fatalf("unlock by the run id: %v", err)
		}
		if u := kindsOf(h.markers(l2.Run.ID), engine.MarkerUnlocked); len(u) != 1 || u[0].By != "ops" || !engine.ForceUnlocked(u[0]) {
			t.Fatalf("unlocked markers of an unlock by run id = %+v, want forced by ops", u)
		}
	})
}

func TestBackendAdoptsIntoAnEmptyState(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, h *bh) {
		ctx := t.Context()
		empty, err := h.eng.InitState(ctx, "acme/new", nil, "tester")
		if err != nil {
			t.Fatal(err)
		}
		const old = "99999999-0000-4000-8000-000000000007"
		if _, err := h.eng.LockBackend(ctx, engine.BackendLockInput{State: "acme/new", Actor: "bob", Info: lockInfo("tf-m", "migration destination state"), Write: true}); err != nil {
			t.Fatal(err)
		}
		if err := h.eng.WriteBackend(ctx, engine.BackendWriteInput{State: "acme/new", LockID: "tf-m", Actor: "bob", Document: tfDoc(t, old, 7, map[string]string{"x": "x7"})}); err != nil {
			t.Fatalf("adopting write: %v", err)
		}
		out, err := h.eng.UnlockBackend(ctx, engine.BackendUnlockInput{State: "acme/new", Actor: "bob", LockID: "tf-m"})
		if err != nil {
			t.Fatalf("unlock: %v", err)
		}
		v := out.Version
		if v == nil || v.Serial != 7 || v.Lineage != old || !v.Provenance.Adopted || v.Provenance.PriorLineage != empty.Lineage || v.Provenance.Mode != engine.CommitPush {
			t.Fatalf("adopted version = %+v", v)
		}
		st, err := h.store.GetState(ctx, "acme/new")
		if err != nil || st.Lineage != old || st.HeadSerial != 7 {
			t.Fatalf("state after adoption = %+v %v", st, err)
		}
		doc, _, err := h.eng.BackendHead(ctx, "acme/new")
		if err != nil || !strings.Contains(string(doc), old) || !strings.Contains(string(doc), `"serial": 7`) && !strings.Contains(string(doc), `"serial":7`) {
			t.Fatalf("head document = %s %v", doc, err)
		}
		// Not once a plan was made against the empty state.
		planned, err := h.eng.InitState(ctx, "acme/planned", nil, "tester")
		if err != nil {
			t.Fatal(err)
		}
		h.planOn(planned, "x")
		if _, err := h.eng.LockBackend(ctx, engine.BackendLockInput{State: "acme/planned", Actor: "bob", Info: lockInfo("tf-p", "migration destination state"), Write: true}); err != nil {
			t.Fatal(err)
		}
		err = h.eng.WriteBackend(ctx, engine.BackendWriteInput{State: "acme/planned", LockID: "tf-p", Actor: "bob", Document: tfDoc(t, "99999999-0000-4000-8000-000000000008", 3, nil)})
		if !errors.Is(err, engine.ErrConflict) {
			t.Fatalf("adoption after a plan: %v, want ErrConflict", err)
		}
	})
}

func TestSincePlanRefusesNamingABackendPush(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, h *bh) {
		p := h.plan("b")
		l := h.lock("tf-rm", "state-rm")
		if err := h.write("tf-rm", tfDoc(t, fakeLineage, 2, map[string]string{"a": "a0"})); err != nil {
			t.Fatal(err)
		}
		if out, err := h.unlock("tf-rm", false); err != nil || out.Version == nil || !sameSet(out.Version.Changed, addrs("b")) {
			t.Fatalf("unlock: %+v %v", out, err)
		}
		h.applyResult(map[string]string{"b": "b-kl"})
		_, err := h.eng.Apply(t.Context(), engine.ApplyInput{PlanRun: p.ID, Actor: "alice"})
		var se *engine.StaleError
		if !errors.As(err, &se) {
			t.Fatalf("apply after the push: %v, want a *StaleError", err)
		}
		want := "version 2 (a push through the backend: terraform state rm, run " + l.Run.ID + ")"
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("stale refusal = %q, want %q", err, want)
		}
		story, err := h.eng.RunStory(t.Context(), runErrorID(err))
		if err != nil {
			t.Fatal(err)
		}
		var buf strings.Builder
		if err := report.Apply(&buf, story, report.Options{}); err != nil {
			t.Fatal(err)
		}
		want = "version 2 (a push through the backend: terraform state rm), by run " + l.Run.ID + " (bob)"
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("kl apply's refusal lacks %q:\n%s", want, buf.String())
		}
	})
}

// TestBackendReadOnlyUnlock: a read-only caller (a read-only token) may
// release its own plan's read lock, named by Terraform's lock id — and
// nothing else: not a write lock, not a read lock named by its run id
// (which every 423 tells any reader), not by force. Each refusal is
// ErrForbidden (the http backend's 403) and leaves the lock held.
func TestBackendReadOnlyUnlock(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, h *bh) {
		ro := func(id string, force bool) error {
			_, err := h.eng.UnlockBackend(t.Context(), engine.BackendUnlockInput{State: testState, Actor: "reader", LockID: id, Force: force, ReadOnly: true})
			return err
		}
		w := h.lock("tf-w", engine.OperationTypeApply)
		for _, id := range []string{"tf-w", w.Run.ID} {
			if err := ro(id, false); !errors.Is(err, engine.ErrForbidden) {
				t.Errorf("a read-only unlock of the write lock by %s: %v, want ErrForbidden", id, err)
			}
		}
		// The refusal of an empty UNLOCK (terraform force-unlock) says
		// which lock holds the state, what a read-only token may release,
		// and what to use — never Terraform's lock id, which would
		// release a read lock.
		err := ro("", true)
		for _, want := range []string{
			"unlocking state " + testState + " without a lock ID (an empty UNLOCK, which is all `terraform force-unlock` sends)",
			"a read-only token may release only the read lock its own `terraform plan` took",
			"it is held by backend lock run " + w.Run.ID + " (terraform apply by bob), a write lock",
			"`terraform force-unlock` needs a token that may write state " + testState,
		} {
			if !errors.Is(err, engine.ErrForbidden) || !strings.Contains(err.Error(), want) {
				t.Errorf("a read-only force-unlock: %v, want ErrForbidden saying %q", err, want)
			}
		}
		if err != nil && strings.Contains(err.Error(), "tf-w") {
			t.Errorf("a read-only force-unlock's refusal names Terraform's lock id: %v", err)
		}
		if len(h.reservations()) != 1 {
			t.Fatalf("after the refused unlocks: reservations %+v, want the write lock's", h.reservations())
		}
		if _, err := h.unlock("tf-w", false); err != nil {
			t.Fatal(err)
		}
		r := h.lock("tf-r", engine.OperationTypePlan)
		if err := ro(r.Run.ID, false); !errors.Is(err, engine.ErrForbidden) ||
			!strings.Contains(err.Error(), "the lock ID "+r.Run.ID+" names backend lock run "+r.Run.ID+" (terraform plan by bob), a read lock named by its run id: the `terraform plan` that took it releases it") ||
			strings.Contains(err.Error(), "tf-r") {
			t.Errorf("a read-only unlock of a read lock by its run id: %v, want ErrForbidden naming the lock and who releases it", err)
		}
		if err := ro("tf-r", false); err != nil {
			t.Errorf("a read-only unlock of its own plan's read lock: %v, want it released", err)
		}
		if rs := h.reservations(); len(rs) != 0 {
			t.Errorf("after the plan's own unlock: reservations %+v, want none", rs)
		}
	})
}

// TestBackendRefusalsInTheLocksStory: a POST under an ?ID= that no write
// lock of the state has, and the refusals the HTTP layer makes before the
// engine reads a document (a body over the cap, a Content-MD5 mismatch:
// RecordBackendRefusal), are "backend-refused" markers of the write lock
// that holds the state, so that kl status, kl run show and kl why say
// what Terraform showed only as a status.
func TestBackendRefusalsInTheLocksStory(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, h *bh) {
		l := h.lock("tf-1", engine.OperationTypeApply)
		err := h.eng.WriteBackend(t.Context(), engine.BackendWriteInput{State: testState, LockID: "tf-other", Actor: "carol",
			Document: tfDoc(t, fakeLineage, 2, map[string]string{"a": "a1", "b": "b0"})})
		if !errors.Is(err, engine.ErrLocked) {
			t.Fatalf("a write under another lock id: %v, want ErrLocked", err)
		}
		runs, err := h.eng.RecordBackendRefusal(t.Context(), engine.BackendRefusal{State: testState, LockID: "tf-1", Actor: "bob",
			Refusal: engine.RefusalTooLarge, Reason: "HTTP 413 to a POST by bob: request body too large: the limit is 1 MiB (1048576 bytes)"})
		if err != nil || len(runs) != 1 || runs[0] != l.Run.ID {
			t.Fatalf("RecordBackendRefusal = %v %v, want the lock's run %s", runs, err, l.Run.ID)
		}
		if _, err := h.eng.RecordBackendRefusal(t.Context(), engine.BackendRefusal{State: "acme/nope", Refusal: engine.RefusalTooLarge}); !errors.Is(err, engine.ErrNotFound) {
			t.Errorf("RecordBackendRefusal of an unknown state: %v, want ErrNotFound", err)
		}
		ms := kindsOf(h.markers(l.Run.ID), engine.MarkerBackendRefused)
		if len(ms) != 2 || ms[0].Extra["refusal"] != engine.RefusalLockID || ms[0].Extra["lock_id"] != "tf-other" || ms[0].By != "carol" ||
			!strings.Contains(ms[0].Reason, "no backend lock with ID tf-other holds it; it is held by backend lock run "+l.Run.ID) ||
			ms[1].Extra["refusal"] != engine.RefusalTooLarge || ms[1].By != "bob" {
			t.Fatalf("refusal markers = %+v", ms)
		}
		// kl status (the last refusal), kl run show and kl why (each) say why.
		st, err := h.eng.Status(t.Context(), testState)
		if err != nil {
			t.Fatal(err)
		}
		var status, show, why strings.Builder
		if err := report.Status(&status, st, report.Options{}); err != nil {
			t.Fatal(err)
		}
		story, err := h.eng.RunStory(t.Context(), l.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := report.RunStory(&show, story, report.Options{}); err != nil {
			t.Fatal(err)
		}
		y, err := h.eng.Why(t.Context(), l.Run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := report.Why(&why, y, report.Options{}); err != nil {
			t.Fatal(err)
		}
		tooLarge := "request body too large: the limit is 1 MiB"
		for name, c := range map[string]struct {
			out  string
			want []string
		}{
			"kl status":   {status.String(), []string{tooLarge}},
			"kl run show": {show.String(), []string{tooLarge, "no backend lock with ID tf-other holds it"}},
			"kl why":      {why.String(), []string{tooLarge, "no backend lock with ID tf-other holds it"}},
		} {
			for _, w := range c.want {
				if !strings.Contains(flatWords(c.out), w) {
					t.Errorf("%s lacks %q:\n%s", name, w, c.out)
				}
			}
		}
	})
}

// flatWords is s with its runs of white space one space (wrapped text).
func flatWords(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestRollbackOfAnAdoptedState: a state adopted through the backend has
// versions of two lineages — 0, the empty version of `kl state init`
// (its own lineage), and the adopted document's (at its serial). A
// rollback to 0, or to a serial the adoption skipped, is refused before
// any run exists, saying why and which serials can be rolled back to.
func TestRollbackOfAnAdoptedState(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, h *bh) {
		ctx := t.Context()
		const name, old = "acme/adopted", "99999999-0000-4000-8000-000000000008"
		if _, err := h.eng.InitState(ctx, name, nil, "tester"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.eng.LockBackend(ctx, engine.BackendLockInput{State: name, Actor: "bob", Info: lockInfo("tf-m", "migration destination state"), Write: true}); err != nil {
			t.Fatal(err)
		}
		if err := h.eng.WriteBackend(ctx, engine.BackendWriteInput{State: name, LockID: "tf-m", Actor: "bob", Document: tfDoc(t, old, 7, map[string]string{"x": "x7"})}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.eng.UnlockBackend(ctx, engine.BackendUnlockInput{State: name, Actor: "bob", LockID: "tf-m"}); err != nil {
			t.Fatal(err)
		}
		runs := func() int {
			rs, err := h.store.ListRuns(ctx, engine.RunQuery{State: name, Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			return len(rs)
		}
		before := runs()
		rollback := func(to int64) error {
			_, err := h.eng.Operate(ctx, engine.OperationInput{Mode: engine.CommitRollback, State: name, Serial: to, Actor: "ops", Reason: "undo"})
			return err
		}
		// Only the adopted version: nothing earlier of its lineage.
		err := rollback(0)
		for _, want := range []string{
			"rolling back state acme/adopted to version 0: version 0 is the empty version of `kl state init`, of lineage",
			"before the state adopted lineage " + old + " (version 7, an adoption)",
			"no version before the head (7) has the state's lineage: there is nothing to roll back to",
		} {
			if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), want) {
				t.Errorf("rollback --to 0 with only the adopted version: %v, want ErrInvalid saying %q", err, want)
			}
		}
		// Two more versions of the adopted lineage.
		for i, v := range []string{"x8", "x9"} {
			if _, err := h.eng.Operate(ctx, engine.OperationInput{Mode: engine.CommitPush, State: name, Actor: "ops", Reason: "edit",
				Document: tfDoc(t, old, int64(8+i), map[string]string{"x": v})}); err != nil {
				t.Fatal(err)
			}
		}
		before = runs()
		err = rollback(0)
		if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), "versions 7 and 8 can be rolled back to") {
			t.Errorf("rollback --to 0: %v, want ErrInvalid naming versions 7 and 8", err)
		}
		err = rollback(3)
		if !errors.Is(err, engine.ErrNotFound) || !strings.Contains(err.Error(), "it has no version 3 (head is 9): versions 7 and 8 can be rolled back to") {
			t.Errorf("rollback --to 3 (skipped by the adoption): %v, want ErrNotFound naming versions 7 and 8", err)
		}
		if n := runs(); n != before {
			t.Errorf("the refused rollbacks made %d runs", n-before)
		}
		if _, err := h.eng.Operate(ctx, engine.OperationInput{Mode: engine.CommitRollback, State: name, Serial: 7, Actor: "ops", Reason: "undo"}); err != nil {
			t.Errorf("rollback --to 7 (the adopted version): %v", err)
		}
	})
}
