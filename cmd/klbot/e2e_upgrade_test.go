package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/github/githubfake"
	"github.com/kilolock/kilolock/internal/store"
	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/store/postgres"
)

// upgrade is a rolling upgrade of klbot replicas (real binaries of three
// releases) on one PostgreSQL database and one GitHub fake.
type upgrade struct {
	t     *testing.T
	fake  *githubfake.Fake
	key   []byte
	dsn   string
	tfBin string
	n     int // replicas started, to number their deliveries apart
}

// Releases of the test, as the store sees them (ADR 0048): 0.1.0 is
// today's source; 0.2.0 embeds one more expand migration (build tag
// kltest_newer); 0.3.0 raises the level one above this build's on top (kltest_raise).
const (
	oldVersion    = "0.1.0"
	newerVersion  = "0.2.0"
	newestVersion = "0.3.0"
)

// buildKlbot builds klbot at version with the build tags.
func buildKlbot(t *testing.T, version string, tags ...string) string {
	t.Helper()
	flags := []string{"-ldflags=-X github.com/kilolock/kilolock/internal/store.BinaryVersion=" + version}
	if len(tags) > 0 {
		flags = append(flags, "-tags="+strings.Join(tags, ","))
	}
	return buildPackage(t, "github.com/kilolock/kilolock/cmd/klbot", flags...)
}

// start starts a replica of bin and waits for its /readyz.
func (u *upgrade) start(bin string) *replica {
	u.t.Helper()
	r := startReplica(u.t, bin, u.fake, u.key, u.dsn, u.tfBin)
	u.n++
	r.delivery.Store(int64(u.n) * 1000)
	return r
}

// stop stops replica r with SIGTERM (a rolling restart) and waits for it
// to exit cleanly.
func (r *replica) stop(t *testing.T) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-r.exited:
		if err != nil {
			t.Fatalf("klbot exited with %v after SIGTERM:\n%s", err, r.stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("klbot did not stop within a minute of SIGTERM")
	}
}

// readyz returns the status and body of r's /readyz.
func (r *replica) readyz(t *testing.T) (int, string) {
	t.Helper()
	res, err := http.Get(r.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// schema returns the database's goose version and compatibility level.
func (u *upgrade) schema(h *harness) (int64, int) {
	u.t.Helper()
	var v int64
	var level int
	h.scan(&v, `SELECT max(version_id) FROM goose_db_version`)
	h.scan(&level, `SELECT level FROM kl_compat`)
	return v, level
}

// runsBy counts the runs (plans and applies) each klbot process made,
// by its pid (engine.Run.Holder).
func runsBy(h *harness, pids ...int) map[int]int {
	h.t.Helper()
	out := map[int]int{}
	for _, pid := range pids {
		out[pid] = h.count(`SELECT count(*) FROM runs WHERE (body::jsonb)->'holder'->>'pid' = $1`, fmt.Sprint(pid))
	}
	return out
}

// upgradePRs are seven pull requests, each changing a resource of its
// own: disjoint write sets, so every plan applies.
func upgradePRs(t *testing.T) []pr {
	edit := func(file, res string) [3]string { return [3]string{file, `"` + res + `-v1"`, `"` + res + `-v2"`} }
	edits := [][3]string{edit("infra/app.tf", "app_api"), edit("infra/app.tf", "app_worker"), edit("infra/db.tf", "db_backup"),
		edit("infra/db.tf", "db_users"), edit("infra/dns.tf", "dns_b"), edit("infra/net.tf", "net_subnet_a"), edit("infra/dns.tf", "dns_c")}
	var prs []pr
	for i, e := range edits {
		prs = append(prs, pr{i + 1, sha(i + 1), change(t, e), []string{e[0]}})
	}
	// Pull request 7 is opened after 1–6 are applied: its branch holds
	// their changes, so its plan sets none of them back (ADR 0046).
	last := len(prs) - 1
	prs[last].files = change(t, edits...)
	return prs
}

// succeeded fails the test unless the check run name of p concluded
// success.
func succeeded(t *testing.T, h *harness, p pr, name string) {
	t.Helper()
	if c := h.shown(t, p.head, name); c.Conclusion != "success" {
		t.Errorf("PR %d's %s: %s %q, want success:\n%s", p.n, name, c.Conclusion, c.Title, c.Summary)
	}
}

// TestRollingUpgrade (issue 13 §3, ADR 0048) upgrades klbot one replica
// at a time on one PostgreSQL database, with real klbot binaries of three
// releases (buildKlbot) and real Terraform:
//
//  1. replica A1 (0.1.0) plans pull request 1;
//  2. B1 (0.2.0) starts and migrates the schema one expand migration
//     further; A1, still running, stays ready and plans pull request 2;
//  3. A1 is stopped and A2 (0.1.0) started: an old binary opens the newer
//     schema; during the overlap A2 and B1 both plan and apply (pull
//     requests 1–6, every delivery alternating between them) — every
//     check run succeeds, the state gets one version per apply, runs are
//     held by both processes, and no job fails an attempt;
//  4. C (0.3.0) starts and raises the compatibility level by one, then
//     stops: A2 and B1 answer /readyz 503 naming their version and level
//     and the store's level and who raised it; a new 0.1.0 replica refuses
//     to start, saying the same; pull request 7's plan job, taken by A2 or
//     B1, is handed back (snoozed, logged with that refusal): no run, no
//     check run;
//  5. A2 and B1 are stopped and C2 (0.3.0) started: it plans and applies
//     pull request 7.
func TestRollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("builds three klbot binaries and runs them (-short)")
	}
	u := &upgrade{t: t, tfBin: terraformBinary(t), fake: githubfake.New(t), dsn: pgtest.DSN(t)}
	u.key = u.fake.NewAppKey(appID)
	u.fake.AddInstallation(1, appID, repo)
	u.fake.SetPermission(repo, "alice", "write")
	bootstrap(t, u.dsn, u.tfBin, repo, baseRepo())
	oldBin := buildKlbot(t, oldVersion)
	newerBin := buildKlbot(t, newerVersion, "kltest_newer")
	newestBin := buildKlbot(t, newestVersion, "kltest_newer", "kltest_raise")
	prs := upgradePRs(t)
	base := store.SchemaVersion()

	// --- 1 and 2: A1 plans; B1 migrates while A1 runs. ---
	a1 := u.start(oldBin)
	a1.open(t, prs[0])
	a1.settle()
	b1 := u.start(newerBin)
	if v, level := u.schema(b1.harness); v != base+1 || level != store.CompatLevel {
		t.Fatalf("after the 0.2.0 replica started: schema %d, level %d; want %d (one expand migration more), %d", v, level, base+1, store.CompatLevel)
	}
	if code, body := a1.readyz(t); code != http.StatusOK {
		t.Fatalf("the 0.1.0 replica after the schema moved on: /readyz %d %q; want 200", code, body)
	}
	a1.open(t, prs[1])
	a1.settle()

	// --- 3: A2, an old binary opening the newer schema, beside B1. ---
	a1.stop(t)
	a2 := u.start(oldBin)
	overlap := []*replica{a2, b1}
	for i, p := range prs[2:6] {
		overlap[i%2].open(t, p)
	}
	a2.settle()
	for i, p := range prs[:6] {
		overlap[i%2].comment(t, p.n, "alice", "/kl apply")
	}
	a2.settle()
	for _, p := range prs[:6] {
		succeeded(t, a2.harness, p, "kl plan · infra")
		succeeded(t, a2.harness, p, "kl apply · infra")
	}
	var head int64
	a2.scan(&head, `SELECT max(serial) FROM versions`)
	if head != 7 {
		t.Errorf("the state's head is serial %d, want 7 (the bootstrap's and one per apply)", head)
	}
	by := runsBy(a2.harness, a2.cmd.Process.Pid, b1.cmd.Process.Pid)
	t.Logf("runs held by the 0.1.0 replica (pid %d) and the 0.2.0 replica (pid %d) during the overlap: %v", a2.cmd.Process.Pid, b1.cmd.Process.Pid, by)
	for pid, n := range by {
		if n == 0 {
			t.Errorf("replica pid %d held no run during the overlap; want both replicas to plan or apply (%v)", pid, by)
		}
	}
	for _, e := range a2.jobErrors(t) {
		t.Errorf("a job failed an attempt during the overlap: %s", e)
	}

	// --- 4: C raises the level; the older replicas stop writing. ---
	c := u.start(newestBin)
	if v, level := u.schema(c.harness); v != base+2 || level != store.CompatLevel+1 {
		t.Fatalf("after the 0.3.0 replica started: schema %d, level %d; want %d, %d", v, level, base+2, store.CompatLevel+1)
	}
	c.stop(t)
	lockedOut(t, a2, oldVersion)
	lockedOut(t, b1, newerVersion)
	refusedStart(t, u, oldBin)
	before, checks := a2.count(`SELECT count(*) FROM runs`), len(u.fake.CheckRuns(repo))
	a2.open(t, prs[6])
	waitUntil(t, 30*time.Second, "an older replica to hand pull request 7's plan job back", func() bool {
		return a2.count(`SELECT coalesce(max((metadata->>'snoozes')::int), 0) FROM river_job WHERE kind = 'klbot_plan' AND (args->>'pr')::int = 7`) >= 2
	})
	if n := a2.count(`SELECT count(*) FROM runs`); n != before {
		t.Errorf("%d runs after the older replicas handed the job back, %d before: they wrote", n, before)
	}
	if n := len(u.fake.CheckRuns(repo)); n != checks {
		t.Errorf("%d check runs after the older replicas handed the job back, %d before: they reported", n, checks)
	}
	st, err := postgres.Open(context.Background(), u.dsn)
	if err != nil {
		t.Fatalf("this test's store (level %d) opening the level-%d store to read: %v", store.CompatLevel, store.CompatLevel+1, err)
	}
	defer st.Close()
	if acc, _ := st.Access(context.Background()); acc != store.ReadOnly {
		t.Errorf("a level-%d store on the level-%d database: access %q, want read-only", store.CompatLevel, store.CompatLevel+1, acc)
	}

	// --- 5: the rest of the upgrade: C2 plans and applies PR 7. ---
	a2.stop(t)
	b1.stop(t)
	said := a2.stderr.String() + b1.stderr.String()
	mustContain(t, "the older replicas' logs", said, "job handed back: this replica may not write to the store",
		"must not write to this store: its compatibility level is "+levelNext+", raised by version "+newestVersion)
	c2 := u.start(newestBin)
	c2.settle()
	succeeded(t, c2.harness, prs[6], "kl plan · infra")
	c2.comment(t, 7, "alice", "/kl apply")
	c2.settle()
	succeeded(t, c2.harness, prs[6], "kl apply · infra")
	if n := runsBy(c2.harness, c2.cmd.Process.Pid)[c2.cmd.Process.Pid]; n != 2 {
		t.Errorf("the 0.3.0 replica held %d runs, want pull request 7's plan and apply", n)
	}
}

// lockedOut checks that replica r, of version, answers /readyz 503 with
// the refusal naming its version and level and the store's.
func lockedOut(t *testing.T, r *replica, version string) {
	t.Helper()
	code, body := r.readyz(t)
	t.Logf("the %s replica's /readyz after the raise: %d %s", version, code, body)
	if code != http.StatusServiceUnavailable {
		t.Errorf("the %s replica's /readyz after the raise: %d, want 503", version, code)
	}
	mustContain(t, "the "+version+" replica's /readyz after the raise", body,
		"this klbot (version "+version+", compatibility level "+levelNow+") must not write to this store",
		"its compatibility level is "+levelNext+", raised by version "+newestVersion, "upgrade to version "+newestVersion+" or later")
}

// refusedStart checks that a new replica of bin refuses to start: it exits
// with status 1, naming both versions and levels.
func refusedStart(t *testing.T, u *upgrade, bin string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = baseEnv(t, u.fake, u.key, u.dsn, freeAddr(t), u.tfBin)
	out, err := cmd.CombinedOutput()
	t.Logf("a new %s replica after the raise: %v\n%s", oldVersion, err, out)
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("a new %s replica after the raise: %v, want exit status 1", oldVersion, err)
	}
	mustContain(t, "a new "+oldVersion+" replica's refusal", string(out),
		"klbot: KLBOT_DATABASE_URL: this klbot (version "+oldVersion+", compatibility level "+levelNow+") must not write to this store: its compatibility level is "+levelNext+", raised by version "+newestVersion)
}

// levelNow and levelNext are this build's compatibility level and the
// raised build's (kltest_raise: one above), as the refusals print them.
var levelNow, levelNext = strconv.Itoa(store.CompatLevel), strconv.Itoa(store.CompatLevel + 1)
