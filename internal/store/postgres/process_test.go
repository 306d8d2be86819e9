package postgres_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/store/storetest"
)

// The multi-process tests re-execute this test binary: the children run
// TestMultiProcessChild or TestKilledHolderChild with these variables set.
const (
	envChildDSN    = "KL_PG_TEST_CHILD_DSN"
	envChildWorker = "KL_PG_TEST_CHILD_WORKER"
	envChildOut    = "KL_PG_TEST_CHILD_OUT"
	envChildRun    = "KL_PG_TEST_CHILD_RUN"
	childCommits   = 10
	childProcesses = 4
	childReserves  = 40
)

// sharedAddress is read by every commit and sometimes written by the
// reservers, so committers and reservers of different processes contend.
const sharedAddress engine.Address = "terraform_data.shared"

// reservePool is what the reservers draw from: resources, a module prefix,
// the shared address and, rarely, the whole state.
var reservePool = []engine.Address{
	"terraform_data.a", "terraform_data.b", "module.app.terraform_data.x",
	"module.app.*", sharedAddress, "output.url", "*",
}

// holding is one child's record of a reservation set it certainly held
// from From (Acquire had returned) to To (before Release or Commit was
// called), in Unix nanoseconds of the host clock all children share.
type holding struct {
	Run  string               `json:"run"`
	Res  []engine.Reservation `json:"res"`
	From int64                `json:"from"`
	To   int64                `json:"to"`
}

// TestMultiProcessCommitsAndReservations runs 4 processes on one fresh
// schema: they race on its migration and on creating the state, then each
// commits 10 versions (every commit first reserves its own address and
// reads the shared one, and commits with RequireReservations) while a
// second goroutine acquires and releases random overlapping sets. Serials
// must come out contiguous 1..40 with every change in the head, and no two
// conflicting reservations may ever have been held at once: neither in the
// intervals the children record nor in the parent's samples.
func TestMultiProcessCommitsAndReservations(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	var wg sync.WaitGroup
	outs := make([][]byte, childProcesses)
	errs := make([]error, childProcesses)
	for i := range childProcesses {
		wg.Go(func() {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestMultiProcessChild$", "-test.count=1", "-test.timeout=150s")
			cmd.Env = append(os.Environ(), envChildDSN+"="+dsn, envChildWorker+"="+strconv.Itoa(i),
				envChildOut+"="+filepath.Join(dir, fmt.Sprintf("holdings-%d.jsonl", i)))
			outs[i], errs[i] = cmd.CombinedOutput()
		})
	}
	s, err := postgres.Open(t.Context(), dsn) // races with the children's migrations too
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	done := make(chan struct{})
	var samples atomic.Int64
	var sampler sync.WaitGroup
	sampler.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
			rs, err := s.Reservations(t.Context(), "shared")
			if err != nil {
				t.Errorf("Reservations: %v", err)
				return
			}
			samples.Add(1)
			if a, b, bad := conflictingPair(rs); bad {
				t.Errorf("sample: conflicting reservations held at once: run %s %s %s and run %s %s %s",
					a.Run, a.Mode, a.Address, b.Run, b.Mode, b.Address)
				return
			}
		}
	})
	wg.Wait()
	close(done)
	sampler.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("child %d: %v\n%s", i, err, outs[i])
		}
	}
	storetest.CheckContiguous(t, t.Context(), s, "shared", childProcesses*childCommits, nil)
	runs, err := s.ListRuns(t.Context(), engine.RunQuery{State: "shared", Statuses: []engine.RunStatus{engine.StatusApplied}, Limit: 100})
	if err != nil || len(runs) != childProcesses*childCommits {
		t.Fatalf("applied runs = %d, %v; want %d", len(runs), err, childProcesses*childCommits)
	}
	if rs, err := s.Reservations(t.Context(), ""); err != nil || len(rs) != 0 {
		t.Fatalf("reservations left = %v, %v; want none", rs, err)
	}

	var hs []holding
	for i := range childProcesses {
		f, err := os.Open(filepath.Join(dir, fmt.Sprintf("holdings-%d.jsonl", i)))
		if err != nil {
			t.Fatalf("child %d holdings: %v", i, err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var h holding
			if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
				t.Fatalf("child %d holdings: %v", i, err)
			}
			hs = append(hs, h)
		}
		f.Close()
	}
	pairs := 0
	for i := range hs {
		for j := i + 1; j < len(hs); j++ {
			a, b := hs[i], hs[j]
			if a.Run == b.Run || a.To <= b.From || b.To <= a.From {
				continue
			}
			pairs++
			for _, ra := range a.Res {
				for _, rb := range b.Res {
					if ra.ConflictsWith(rb) {
						t.Fatalf("runs %s and %s held %s %s and %s %s at once (%s overlap)", a.Run, b.Run,
							ra.Mode, ra.Address, rb.Mode, rb.Address, time.Duration(min(a.To, b.To)-max(a.From, b.From)))
					}
				}
			}
		}
	}
	t.Logf("%d holdings recorded, %d overlapping in time (all compatible), %d samples", len(hs), pairs, samples.Load())
	if len(hs) < childProcesses*childCommits || pairs == 0 {
		t.Fatalf("the test did not exercise concurrency: %d holdings, %d overlapping", len(hs), pairs)
	}
}

// TestMultiProcessChild is one child process of
// TestMultiProcessCommitsAndReservations; it skips unless run by it.
func TestMultiProcessChild(t *testing.T) {
	dsn, worker, out := os.Getenv(envChildDSN), os.Getenv(envChildWorker), os.Getenv(envChildOut)
	if dsn == "" || out == "" {
		t.Skip("a child of TestMultiProcessCommitsAndReservations")
	}
	ctx := t.Context()
	s, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("worker %s: Open: %v", worker, err)
	}
	defer s.Close()
	if _, err := s.CreateState(ctx, storetest.NewState("shared")); err != nil && !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("worker %s: CreateState: %v", worker, err)
	}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var mu sync.Mutex
	record := func(run string, res []engine.Reservation, from, to time.Time) {
		b, _ := json.Marshal(holding{Run: run, Res: res, From: from.UnixNano(), To: to.UnixNano()})
		mu.Lock()
		defer mu.Unlock()
		if _, err := f.Write(append(b, '\n')); err != nil {
			t.Errorf("worker %s: recording: %v", worker, err)
		}
	}
	holder := engine.Holder{Host: "child-" + worker, PID: os.Getpid()}
	// acquire retries on conflict until it holds want (bounded).
	acquire := func(run string, want []engine.Reservation) (engine.AcquireResult, error) {
		deadline := time.Now().Add(60 * time.Second)
		for {
			res, err := s.Acquire(ctx, engine.AcquireRequest{State: "shared", Run: run, Holder: holder, Reservations: want, Lease: time.Minute})
			var ce *engine.ConflictError
			if !errors.As(err, &ce) || time.Now().After(deadline) {
				return res, err
			}
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		}
	}

	var wg sync.WaitGroup
	wg.Go(func() { // committer
		for i := range childCommits {
			id := fmt.Sprintf("01CHILD%sCOMMIT%02d", worker, i)
			if err := s.CreateRun(ctx, engine.Run{ID: id, Kind: engine.KindApply, State: "shared", Actor: "worker-" + worker, Status: engine.StatusApplying}); err != nil {
				t.Errorf("worker %s: CreateRun: %v", worker, err)
				return
			}
			addr := engine.Address(fmt.Sprintf("terraform_data.w%s_%02d", worker, i))
			res, err := acquire(id, []engine.Reservation{{Address: addr, Mode: engine.ModeWrite}, {Address: sharedAddress, Mode: engine.ModeRead}})
			if err != nil {
				t.Errorf("worker %s: Acquire for commit %d: %v", worker, i, err)
				return
			}
			from := time.Now()
			time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond) // "terraform apply"
			merge := storetest.Merge(id, addr)
			to := time.Now()
			_, err = s.Commit(ctx, engine.CommitRequest{State: "shared", Run: id, RequireReservations: true,
				Merge: func(head engine.Version, snap []byte) (engine.CommitResult, error) {
					res, err := merge(head, snap)
					res.UpdateRun = func(r *engine.Run) error { r.Status = engine.StatusApplied; return nil }
					return res, err
				}})
			record(id, res.Held, from, to)
			if err != nil {
				t.Errorf("worker %s: Commit %d: %v", worker, i, err)
				return
			}
		}
	})
	wg.Go(func() { // reserver
		id := "01CHILD" + worker + "RESERVER"
		if err := s.CreateRun(ctx, engine.Run{ID: id, Kind: engine.KindApply, State: "shared", Actor: "worker-" + worker, Status: engine.StatusApplying}); err != nil {
			t.Errorf("worker %s: CreateRun: %v", worker, err)
			return
		}
		rng := rand.New(rand.NewPCG(uint64(os.Getpid()), 1))
		for range childReserves {
			var want []engine.Reservation
			for range 1 + rng.IntN(2) {
				a := reservePool[rng.IntN(len(reservePool))]
				if a == engine.AllAddresses && rng.IntN(3) != 0 {
					a = "terraform_data.c"
				}
				mode := engine.ModeRead
				if rng.IntN(2) == 0 {
					mode = engine.ModeWrite
				}
				want = append(want, engine.Reservation{Address: a, Mode: mode})
			}
			res, err := acquire(id, want)
			if err != nil {
				t.Errorf("worker %s: Acquire: %v", worker, err)
				return
			}
			from := time.Now()
			time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
			to := time.Now()
			record(id, res.Held, from, to)
			if err := s.Release(ctx, id); err != nil {
				t.Errorf("worker %s: Release: %v", worker, err)
				return
			}
		}
	})
	wg.Wait()
}

// conflictingPair returns two reservations of different runs that conflict.
func conflictingPair(rs []engine.Reservation) (engine.Reservation, engine.Reservation, bool) {
	for i := range rs {
		for j := i + 1; j < len(rs); j++ {
			if rs[i].Run != rs[j].Run && rs[i].ConflictsWith(rs[j]) {
				return rs[i], rs[j], true
			}
		}
	}
	return engine.Reservation{}, engine.Reservation{}, false
}

// TestKilledHolder kills (SIGKILL) a process that holds reservations with a
// 1 s lease while it is inside its commit transaction — after the version
// row is written and the head moved, before COMMIT. PostgreSQL rolls that
// transaction back when the connection drops: no version, no head move.
// Until the lease ends the reservations still block; after it, another run
// acquires the same addresses, and the killed run is lease-expired with a
// lease-expired marker naming its addresses.
func TestKilledHolder(t *testing.T) {
	t.Parallel()
	s, dsn := setup(t)
	ctx := t.Context()
	if _, err := s.CreateState(ctx, storetest.NewState("s")); err != nil {
		t.Fatal(err)
	}
	victim := engine.Run{ID: "01VICTIM", Kind: engine.KindApply, State: "s", Actor: "victim", Status: engine.StatusApplying,
		PR: &engine.PullRequest{Repo: "acme/infra", Number: 9}}
	next := engine.Run{ID: "01NEXT", Kind: engine.KindApply, State: "s", Actor: "next", Status: engine.StatusApplying}
	for _, r := range []engine.Run{victim, next} {
		if err := s.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestKilledHolderChild$", "-test.count=1", "-test.timeout=60s", "-test.v")
	cmd.Env = append(os.Environ(), envChildDSN+"="+dsn, envChildRun+"="+victim.ID)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acquiredAt time.Time
	sc := bufio.NewScanner(stdout)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), "KL-ACQUIRED") {
			acquiredAt = time.Now()
		}
		if strings.Contains(sc.Text(), "KL-IN-COMMIT") {
			break
		}
	}
	if acquiredAt.IsZero() {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the child did not reach its commit:\n%s\n%s", strings.Join(lines, "\n"), stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = bufio.NewReader(stdout).WriteTo(discard{}) }()
	if err := cmd.Wait(); err == nil {
		t.Fatal("the child exited cleanly; want it killed")
	}
	killedAt := time.Now()

	want := []engine.Reservation{{Address: "terraform_data.a", Mode: engine.ModeWrite}}
	_, err = s.Acquire(ctx, engine.AcquireRequest{State: "s", Run: next.ID, Lease: time.Minute, Reservations: want})
	if time.Since(acquiredAt) < 900*time.Millisecond { // the lease still runs: the dead holder still blocks
		var ce *engine.ConflictError
		if !errors.As(err, &ce) || ce.Blockers[0].Run != victim.ID || ce.Blockers[0].PR == nil {
			t.Fatalf("Acquire while the killed holder's lease runs: %v; want a conflict naming %s and its PR", err, victim.ID)
		}
	} else {
		t.Logf("the machine was slow (%v since acquiring): skipping the during-lease check", time.Since(acquiredAt))
	}
	time.Sleep(time.Until(acquiredAt.Add(1200 * time.Millisecond)))
	res, err := s.Acquire(ctx, engine.AcquireRequest{State: "s", Run: next.ID, Lease: time.Minute, Reservations: want})
	if err != nil {
		t.Fatalf("Acquire after the killed holder's lease: %v", err)
	}
	if len(res.Others) != 0 {
		t.Fatalf("Others = %+v; want the killed holder's reservations gone", res.Others)
	}
	t.Logf("killed %v after acquiring; the addresses were free again %v after the kill", killedAt.Sub(acquiredAt), time.Since(killedAt))

	if st, err := s.GetState(ctx, "s"); err != nil || st.HeadSerial != 0 {
		t.Fatalf("head after the killed commit = %+v, %v; want 0", st, err)
	}
	if _, err := s.GetVersion(ctx, "s", 1); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("GetVersion(1) after the killed commit: %v; want ErrNotFound", err)
	}
	if vs, err := s.VersionsAfter(ctx, "s", 0); err != nil || len(vs) != 0 {
		t.Fatalf("VersionsAfter(0) = %v, %v; want none", vs, err)
	}
	got, err := s.GetRun(ctx, victim.ID)
	if err != nil || got.Status != engine.StatusLeaseExpired || got.FinishedAt == nil || got.CommittedSerial != 0 {
		t.Fatalf("killed run = %+v, %v; want lease-expired, finished, nothing committed", got, err)
	}
	ms, err := s.Markers(ctx, victim.ID)
	if err != nil || len(ms) != 1 || ms[0].Kind != engine.MarkerLeaseExpired {
		t.Fatalf("killed run markers = %+v, %v; want one lease-expired", ms, err)
	}
	if strings.Join(ms[0].Addresses.Strings(), " ") != "module.app.* terraform_data.a" {
		t.Fatalf("lease-expired marker addresses = %v", ms[0].Addresses)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestKilledHolderChild is the process TestKilledHolder kills: it reserves
// with a 1 s lease, starts a commit and stops inside it; it skips unless
// run by TestKilledHolder.
func TestKilledHolderChild(t *testing.T) {
	dsn, run := os.Getenv(envChildDSN), os.Getenv(envChildRun)
	if dsn == "" || run == "" {
		t.Skip("a child of TestKilledHolder")
	}
	ctx := t.Context()
	s, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, engine.AcquireRequest{State: "s", Run: run, Lease: time.Second,
		Holder: engine.Holder{Host: "doomed", PID: os.Getpid()},
		Reservations: []engine.Reservation{
			{Address: "terraform_data.a", Mode: engine.ModeWrite},
			{Address: "module.app.*", Mode: engine.ModeRead},
		}}); err != nil {
		t.Fatal(err)
	}
	fmt.Println("KL-ACQUIRED")
	_, err = s.Commit(ctx, engine.CommitRequest{State: "s", Run: run, RequireReservations: true,
		Merge: func(head engine.Version, snap []byte) (engine.CommitResult, error) {
			res, err := storetest.Merge(run, "terraform_data.a")(head, snap)
			res.UpdateRun = func(*engine.Run) error {
				// Version head+1 is inserted and the head moved, uncommitted.
				fmt.Println("KL-IN-COMMIT")
				time.Sleep(time.Minute) // killed here
				return nil
			}
			return res, err
		}})
	t.Fatalf("the commit returned (%v); the parent should have killed this process", err)
}
