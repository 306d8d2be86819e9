package main

import (
	"bytes"
	"context"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github/githubfake"
	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/testprovider"
	"github.com/kilolock/kilolock/internal/testprovider/tptest"
)

// The repository of the shutdown tests: one project (infra, state
// acme/infra) of the test provider's objects: base, a data source reading
// it (its delay is what a pull request makes hang) and a terraform_data
// that uses the data source.
const shutdownBase = `terraform {
  required_providers {
    kltest = { source = "kilolock.test/kilolock/kltest" }
  }
}

resource "kltest_object" "base" {
  name = "base"
}

data "kltest_object" "base" {
  id    = kltest_object.base.id
  delay = "0s"
}

resource "terraform_data" "seen" {
  input = data.kltest_object.base.name
}
`

// shutdownNew adds two objects: fast, then slow, whose create takes delay.
func shutdownNew(delay string) string {
	return `resource "kltest_object" "fast" {
  name = "fast"
}

resource "kltest_object" "slow" {
  name       = "slow"
  delay      = "` + delay + `"
  depends_on = [kltest_object.fast]
}
`
}

func shutdownRepo(edits map[string]string) map[string]string {
	files := map[string]string{"kl.yaml": klYAML, "infra/main.tf": shutdownBase}
	for k, v := range edits {
		files[k] = v
	}
	return files
}

// shutdownTimeout is KLBOT_SHUTDOWN_TIMEOUT of the replica the tests stop,
// and shutdownSlack what they allow beyond it for the process to exit
// (the race detector's exit, the OS).
const (
	shutdownTimeout = 3 * time.Second
	shutdownSlack   = time.Second
)

// TestShutdownBounded stops a klbot process with SIGTERM (as an
// orchestrator does in a rolling restart) while its Terraform works, with
// KLBOT_SHUTDOWN_TIMEOUT=3s, and checks that the process exits within the
// timeout (issue 11 §13, ADR 0043), leaving nothing running: no River job
// still "running", no run in progress, no Terraform or provider process
// left. A second replica then takes over, and the pull request goes on as
// it should. The test provider's calls ignore Terraform's stop where a
// case needs Terraform to hang (KLTEST_IGNORE_STOP=1, only in the stopped
// replica).
func TestShutdownBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds klbot and stops it mid-Terraform three times (-short)")
	}
	bin := buildPackage(t, "github.com/kilolock/kilolock/cmd/klbot")
	t.Run("hung plan", func(t *testing.T) { testShutdownHungPlan(t, bin) })
	t.Run("apply interrupted", func(t *testing.T) { testShutdownApply(t, bin, false) })
	t.Run("apply killed", func(t *testing.T) { testShutdownApply(t, bin, true) })
}

// shutdownWorld is a fresh fake, schema and test provider, with the state
// bootstrapped from shutdownRepo.
type shutdownWorld struct {
	fake  *githubfake.Fake
	key   []byte
	dsn   string
	tfBin string
	prov  *tptest.Provider
	env   []string // the test provider's, for every replica
}

func newShutdownWorld(t *testing.T) *shutdownWorld {
	t.Helper()
	w := &shutdownWorld{tfBin: terraformBinary(t), fake: githubfake.New(t), prov: tptest.New(t)}
	w.key = w.fake.NewAppKey(appID)
	w.fake.AddInstallation(1, appID, repo)
	w.fake.SetPermission(repo, "alice", "write")
	w.dsn = pgtest.DSN(t)
	if !strings.HasPrefix(w.dsn, "postgres://") && !strings.HasPrefix(w.dsn, "postgresql://") {
		t.Skipf("the klbot process takes a postgres:// URL; the test DSN is %q", w.dsn)
	}
	w.env = w.prov.Env()
	bootstrap(t, w.dsn, w.tfBin, repo, shutdownRepo(nil), w.env...)
	return w
}

// testShutdownHungPlan: a push whose plan hangs in a provider call that
// ignores Terraform's stop. Before ADR 0043 the replica exited after about
// 65 s: Terraform itself exits on SIGINT, but the provider it leaves holds
// Terraform's stdout, and terraform-exec read it until its 60 s WaitDelay.
func testShutdownHungPlan(t *testing.T, bin string) {
	w := newShutdownWorld(t)
	h, p := w.startProcess(t, bin, testprovider.EnvIgnoreStop+"=1")
	hung := pr{1, sha(1), shutdownRepo(map[string]string{"infra/main.tf": strings.Replace(shutdownBase, `"0s"`, `"12s"`, 1)}), []string{"infra/main.tf"}}
	h.open(t, hung)
	p.waitFor(t, "the plan's provider call", func() bool {
		return p.below("terraform-provi") && h.count(`SELECT count(*) FROM runs WHERE kind = 'plan' AND status = 'planning'`) == 1
	})
	time.Sleep(time.Second) // well inside the 12 s read
	left := p.stop(t)

	h.quiet(t)
	var plan engine.Run
	st := openStore(t, w.dsn)
	runs, err := st.ListRuns(context.Background(), engine.RunQuery{State: repo, Kind: engine.KindPlan, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	plan = runs[0]
	if plan.Status != engine.StatusInterrupted || plan.End == nil || plan.End.Cause != engine.CauseInterrupted {
		t.Errorf("the hung plan %s ended %s (%+v), want interrupted", plan.ID, plan.Status, plan.End)
	}
	// The interrupted job is handed back, not failed (issue 11 §14: logs
	// say what becomes of a job).
	logs := p.logs.String()
	mustContain(t, "klbot's log", logs, "job interrupted by the shutdown: River hands it back")
	mustLack(t, "klbot's log", logs, "job failed; River retries it")
	noneAlive(t, left)

	// The rolling restart: the next replica plans the push (River retries
	// the job the stopped replica handed back), its provider honouring
	// Terraform's stop — the read takes its 12 s.
	h2 := start(t, w.fake, w.key, w.dsn, w.tfBin, w.env...)
	h2.delivery.Store(h.delivery.Load()) // new deliveries, not redeliveries
	h2.settle()
	c := h2.one(t, hung.head, "kl plan · infra")
	if c.Conclusion != "success" {
		t.Errorf("the plan after the restart: conclusion %q, want success:\n%s", c.Conclusion, c.Summary)
	}
}

// testShutdownApply: /kl apply creates fast, then slow (a 30 s create);
// the replica gets SIGTERM once fast exists. With the provider honouring
// Terraform's stop (killed false) the interrupt ends the apply: what
// Terraform wrote (fast) is committed as a partial version, and the check
// run says so. With the provider ignoring it (killed true), Terraform is
// still creating slow when the timeout runs out: it is killed, and the
// apply's write set is fenced (ADR 0035), the check run naming /kl
// recover. Either way the replica exits within the timeout, the job is
// done (not handed back to be applied again), and after the restart the
// next replica refuses the old plan, recovers (killed), plans the
// remaining object anew and applies it: the state and the fake cloud
// hold base, fast and slow once each.
func testShutdownApply(t *testing.T, bin string, killed bool) {
	w := newShutdownWorld(t)
	var extra []string
	if killed {
		extra = append(extra, testprovider.EnvIgnoreStop+"=1")
	}
	h, p := w.startProcess(t, bin, extra...)
	p1 := pr{1, sha(1), shutdownRepo(map[string]string{"infra/new.tf": shutdownNew("30s")}), []string{"infra/new.tf"}}
	h.open(t, p1)
	h.settle()
	if c := h.one(t, p1.head, "kl plan · infra"); c.Conclusion != "success" {
		t.Fatalf("PR 1's plan: %s\n%s", c.Conclusion, c.Summary)
	}
	st := openStore(t, w.dsn)
	plan := h.planRun(1)
	h.comment(t, 1, "alice", "/kl apply")
	var apply string
	p.waitFor(t, "fast created and slow being created", func() bool {
		apply = applyOf(t, st, plan)
		return apply != "" && hasMarker(t, st, apply, engine.MarkerApplyStarted) && len(w.prov.Objects(t)) == 2
	})
	time.Sleep(500 * time.Millisecond) // slow's create is under way
	left := p.stop(t)
	h.quiet(t)

	run, err := st.GetRun(context.Background(), apply)
	if err != nil {
		t.Fatal(err)
	}
	c := h.one(t, p1.head, "kl apply · infra")
	t.Logf("the apply check run after the shutdown (%s, %q):\n%s", c.Conclusion, c.Title, c.Summary)
	if killed {
		fences := fencedBy(t, st, apply)
		if run.Status != engine.StatusLeaseExpired || !slices.Contains(fences, "kltest_object.slow") || run.CommittedSerial != 0 {
			t.Errorf("the killed apply %s: %s, committed %d, fences %v; want lease-expired with kltest_object.slow fenced, nothing committed",
				apply, run.Status, run.CommittedSerial, fences)
		}
		mustContain(t, "the killed apply's check run", rendered(c.Title+"\n"+c.Summary), "fenced", "did not stop in time after an interrupt and was killed", "recover")
	} else {
		head, err := st.GetState(context.Background(), repo)
		if err != nil {
			t.Fatal(err)
		}
		if run.Status != engine.StatusInterrupted || run.CommittedSerial != head.HeadSerial {
			t.Errorf("the interrupted apply %s: %s, committed %d (head %d); want interrupted, committed as the head", apply, run.Status, run.CommittedSerial, head.HeadSerial)
		}
		if c.Conclusion != "cancelled" {
			t.Errorf("the interrupted apply's check run: conclusion %q, want cancelled", c.Conclusion)
		}
		mustContain(t, "the interrupted apply's check run", rendered(c.Title+"\n"+c.Summary), "nterrupted", "partial", "re-plan")
	}
	if n := h.count(`SELECT count(*) FROM river_job WHERE kind = 'klbot_apply' AND state <> 'completed'`); n != 0 {
		t.Errorf("%d apply jobs not completed after the shutdown: an interrupted apply is done, not handed back", n)
	}
	noneAlive(t, left)

	// --- The rolling restart: the next replica. ---
	h2 := start(t, w.fake, w.key, w.dsn, w.tfBin, w.env...)
	h2.delivery.Store(h.delivery.Load()) // new deliveries, not redeliveries
	// /kl apply again: the plan is consumed; the answer is the apply's
	// story as it stands, nothing is applied again.
	h2.comment(t, 1, "alice", "/kl apply")
	h2.settle()
	if again := h2.shown(t, p1.head, "kl apply · infra"); again.Conclusion != c.Conclusion || again.Title != c.Title {
		t.Errorf("/kl apply of the consumed plan after the restart: %s %q, want the story as it stands (%s %q)", again.Conclusion, again.Title, c.Conclusion, c.Title)
	}
	if n := h2.count(`SELECT count(*) FROM runs WHERE kind = 'apply' AND plan_run = $1`, plan); n != 1 {
		t.Errorf("plan %s has %d apply runs after /kl apply on the next replica, want 1 (it is not applied again)", plan, n)
	}
	if killed {
		h2.comment(t, 1, "alice", "/kl recover")
		h2.settle()
		if f := fencedBy(t, st, apply); len(f) != 0 {
			t.Fatalf("after /kl recover run %s still fences %v", apply, f)
		}
	}
	p2 := pr{1, sha(2), shutdownRepo(map[string]string{"infra/new.tf": shutdownNew("0s")}), []string{"infra/new.tf"}}
	h2.seed(t, p2, false)
	h2.prEvent(t, "pull_request.synchronize.22", p2, false)
	h2.settle()
	h2.comment(t, 1, "alice", "/kl apply")
	h2.settle()
	if c := h2.one(t, p2.head, "kl apply · infra"); c.Conclusion != "success" {
		t.Errorf("/kl apply of the new head's plan: %s, want success\n%s", c.Conclusion, c.Summary)
	}
	if objs := w.prov.Objects(t); len(objs) != 3 {
		t.Errorf("the fake cloud holds %d objects after the restart and the apply, want 3 (base, fast, slow): %v", len(objs), objs)
	}
	snap := headSnapshot(t, st)
	for _, name := range []string{"base", "fast", "slow"} {
		if !holdsResource(t, snap, name) {
			t.Errorf("the head does not hold kltest_object.%s", name)
		}
	}
}

// klbotProcess is a klbot process of the test.
type klbotProcess struct {
	cmd    *exec.Cmd
	exited chan struct{}
	logs   *lockedBuffer
}

// startProcess starts the klbot binary bin on a free port with the
// world's environment and extra, as it runs in production (its own
// process, SIGTERM to stop), and returns a harness for it once it is
// ready.
func (w *shutdownWorld) startProcess(t *testing.T, bin string, extra ...string) (*harness, *klbotProcess) {
	t.Helper()
	addr := freeAddr(t)
	env := append(baseEnv(t, w.fake, w.key, w.dsn, addr, w.tfBin), w.env...)
	env = append(env, "KLBOT_SHUTDOWN_TIMEOUT="+shutdownTimeout.String(), "KLBOT_LOG_LEVEL=info", "GORACE=atexit_sleep_ms=0")
	env = append(env, extra...)
	p := &klbotProcess{cmd: exec.Command(bin), exited: make(chan struct{}), logs: &lockedBuffer{}}
	p.cmd.Env = env
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("klbot's log:\n%s", p.logs.String())
		}
	})
	h := &harness{t: t, fake: w.fake, dsn: w.dsn, url: "http://" + addr, tfBin: w.tfBin, done: make(chan error, 1)}
	p.waitFor(t, "klbot ready", func() bool {
		res, err := httpGet(h.url + "/readyz")
		return err == nil && res == 200
	})
	return h, p
}

// waitFor polls cond every 50 ms for up to a minute; the process must not
// exit meanwhile.
func (p *klbotProcess) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		select {
		case <-p.exited:
			t.Fatalf("klbot exited while waiting for %s:\n%s", what, p.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// below reports whether a process named comm runs below klbot.
func (p *klbotProcess) below(comm string) bool {
	return slices.ContainsFunc(processesBelow(p.cmd.Process.Pid), func(q osProcess) bool { return q.comm == comm })
}

// stop sends SIGTERM, waits for the exit (up to 90 s), checks it came
// within the shutdown timeout and with status 0, and returns the
// processes that ran below klbot when it was signalled.
func (p *klbotProcess) stop(t *testing.T) []osProcess {
	t.Helper()
	below := processesBelow(p.cmd.Process.Pid)
	t.Cleanup(func() { killProcessGroups(below) })
	t0 := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(90 * time.Second):
		t.Fatalf("klbot did not exit within 90 s of SIGTERM (KLBOT_SHUTDOWN_TIMEOUT=%s)", shutdownTimeout)
	}
	took := time.Since(t0)
	t.Logf("klbot exited %s after SIGTERM (KLBOT_SHUTDOWN_TIMEOUT=%s)", took.Round(time.Millisecond), shutdownTimeout)
	if took > shutdownTimeout+shutdownSlack {
		t.Errorf("klbot exited %s after SIGTERM: more than KLBOT_SHUTDOWN_TIMEOUT=%s (+%s slack)", took.Round(time.Millisecond), shutdownTimeout, shutdownSlack)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("klbot exited with status %d after SIGTERM, want 0", code)
	}
	return below
}

// quiet checks that the stopped replica left no River job running and no
// run in progress.
func (h *harness) quiet(t *testing.T) {
	t.Helper()
	if n := h.count(`SELECT count(*) FROM river_job WHERE state = 'running'`); n != 0 {
		t.Errorf("%d River jobs still running after klbot exited: River rescues them only hours later", n)
	}
	if n := h.count(`SELECT count(*) FROM runs WHERE status IN ('planning', 'waiting', 'applying')`); n != 0 {
		t.Errorf("%d runs still in progress after klbot exited", n)
	}
}

// noneAlive fails the test for each of ps still alive (Terraform, its
// providers, provisioner commands).
func noneAlive(t *testing.T, ps []osProcess) {
	t.Helper()
	for _, q := range ps {
		if now, ok := procStatOf(q.pid); ok && now.state != 'Z' && now.comm == q.comm {
			t.Errorf("%s (pid %d) outlived klbot's shutdown", q.comm, q.pid)
		}
	}
}

func openStore(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// headSnapshot is the state document of the test state's head.
func headSnapshot(t *testing.T, st *postgres.Store) []byte {
	t.Helper()
	ctx := context.Background()
	s, err := st.GetState(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.Snapshot(ctx, repo, s.HeadSerial)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func httpGet(url string) (int, error) {
	res, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}

// lockedBuffer is a bytes.Buffer safe for a process's writes and the
// test's reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
