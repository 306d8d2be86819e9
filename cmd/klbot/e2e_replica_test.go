package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github/githubfake"
	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/terraform"
)

// buildPackage builds the main package pkg into a temporary directory,
// with -race when this test binary has it, and the go build flags given
// (-tags, -ldflags).
func buildPackage(t *testing.T, pkg string, flags ...string) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH to build " + pkg)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	args := []string{"build", "-o", bin}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" && s.Value == "true" {
				args = append(args, "-race")
			}
		}
	}
	args = append(args, flags...)
	out, err := exec.Command(goBin, append(args, pkg)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// replica is a klbot process of its own (a second replica that can be
// killed with SIGKILL), with the harness that talks to it.
type replica struct {
	*harness
	cmd    *exec.Cmd
	exited chan error
	stderr *bytes.Buffer
}

// startReplica starts the klbot binary bin against fake and dsn and
// waits for its /readyz.
func startReplica(t *testing.T, bin string, fake *githubfake.Fake, key []byte, dsn, tfBin string, extra ...string) *replica {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(bin)
	cmd.Env = append(append(baseEnv(t, fake, key, dsn, addr, tfBin), extra...), "GORACE=atexit_sleep_ms=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &replica{harness: &harness{t: t, fake: fake, dsn: dsn, url: "http://" + addr, tfBin: tfBin}, cmd: cmd, exited: make(chan error, 1), stderr: &stderr}
	go func() { r.exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-r.exited:
			t.Fatalf("klbot exited (%v) before it was ready:\n%s", err, stderr.String())
		default:
		}
		if res, err := http.Get(r.url + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("klbot did not become ready within a minute:\n%s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killMidApply waits until the replica applies plan — its apply run holds
// its reservations, Terraform runs app_web's provisioner and a checkpoint
// is stored — then kills it with SIGKILL and the process groups below it.
// It returns the apply run and when it died.
func (r *replica) killMidApply(t *testing.T, st *postgres.Store, plan string) (string, time.Time) {
	t.Helper()
	ctx := context.Background()
	var run string
	var below []osProcess
	t.Cleanup(func() { killProcessGroups(below) })
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case err := <-r.exited:
			t.Fatalf("klbot exited (%v) before it could be killed:\n%s", err, r.stderr.String())
		default:
		}
		run = applyOf(t, st, plan)
		below = processesBelow(r.cmd.Process.Pid)
		sleeping := slices.ContainsFunc(below, func(p osProcess) bool { return p.comm == "sleep" })
		if run != "" && sleeping && hasMarker(t, st, run, engine.MarkerApplyStarted) {
			if _, err := st.GetArtifact(ctx, run, engine.ArtifactApplyCheckpoint); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("klbot never ran the provisioner of plan %s with a checkpoint stored (run %q, below it: %+v)", plan, run, below)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := r.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("klbot outlived SIGKILL by 30 s")
	}
	killProcessGroups(below)
	return run, killedAt
}

// waitCheckRun polls until the one check run named name on head satisfies
// ok, up to timeout, and returns it.
func (h *harness) waitCheckRun(t *testing.T, head, name string, timeout time.Duration, ok func(githubfake.CheckRun) bool) githubfake.CheckRun {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		crs := h.checkRuns(head, name)
		if len(crs) > 1 {
			t.Fatalf("%d check runs %q on %s, want one", len(crs), name, head[:7])
		}
		if len(crs) == 1 && ok(crs[0]) {
			return crs[0]
		}
		if time.Now().After(deadline) {
			got := "none"
			if len(crs) == 1 {
				got = fmt.Sprintf("%s %s %q:\n%s", crs[0].Status, crs[0].Conclusion, crs[0].Title, crs[0].Summary)
			}
			t.Fatalf("check run %q on %s not as wanted after %s; it is %s", name, head[:7], timeout, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestReplicaKilledMidApply (issue 11 defects 5 and 14): replica A applies
// pull request 1's plan and is killed with SIGKILL while its Terraform
// runs, leaving its job running in River (rescued only hours later) and
// its run's work dir on disk. Replica B — A restarted on the same disk,
// KLBOT_LEASE=3s, KLBOT_RECONCILE_INTERVAL=1s — then, without any delivery:
//
//  1. completes the "kl apply · infra" check run from the lease sweep,
//     saying the lease expired mid-apply and what is fenced, and the
//     sticky comment says so too, within a few reconcile intervals (plus
//     River's leader TTL, 15 s: A was the leader);
//  2. removes the dead run's work dir once the run is no longer live,
//     its state stored as the run's checkpoint;
//  3. after `kl run recover` outside klbot (engine.Recover, as the CLI
//     calls it) rewrites the check run and the sticky comment: recovered,
//     the version it committed;
//  4. when River hands A's job back (its rescue, simulated), the retry
//     reports the same run in the same check run and ends.
func TestReplicaKilledMidApply(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a klbot replica mid-apply and waits for its lease (-short)")
	}
	tfBin := terraformBinary(t)
	fake := githubfake.New(t)
	key := fake.NewAppKey(appID)
	fake.AddInstallation(1, appID, repo)
	fake.SetPermission(repo, "alice", "write")
	dsn := pgtest.DSN(t)
	bootstrap(t, dsn, tfBin, repo, baseRepo())
	bin := buildPackage(t, "github.com/kilolock/kilolock/cmd/klbot")
	ctx := context.Background()
	st, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	workDir := t.TempDir()
	extra := []string{"KLBOT_WORKDIR=" + workDir, "KLBOT_LEASE=3s", "KLBOT_RECONCILE_INTERVAL=1s", "KLBOT_PUBLIC_URL=" + publicURL}

	// --- Replica A plans PR 1 and dies applying it. ---
	a := startReplica(t, bin, fake, key, dsn, tfBin, extra...)
	app := "infra/app.tf"
	web := "resource \"terraform_data\" \"app_web\" {\n  input = \"app_web-v1\"\n}\n"
	slowWeb := "resource \"terraform_data\" \"app_web\" {\n  input            = \"app_web-v1\"\n  triggers_replace = \"slow\"\n\n" +
		"  provisioner \"local-exec\" {\n    command = \"sleep 60\"\n  }\n}\n"
	p1 := pr{1, sha(1), change(t, [3]string{app, web, slowWeb}), []string{app}}
	a.open(t, p1)
	a.settle()
	plan1 := a.planRun(1)
	a.comment(t, 1, "alice", "/kl apply")
	dead, killedAt := a.killMidApply(t, st, plan1)
	left := filepath.Join(workDir, "runs", dead)
	if _, err := os.Stat(left); err != nil {
		t.Fatalf("the killed replica left no work dir for run %s (%v): the crash is not reproduced", dead, err)
	}

	// --- 1. Replica B completes the apply check run from the sweep. ---
	b := start(t, fake, key, dsn, tfBin, extra...)
	c := b.waitCheckRun(t, p1.head, "kl apply · infra", 3*time.Minute, func(c githubfake.CheckRun) bool {
		return c.Status == "completed" && strings.Contains(c.Summary, dead)
	})
	t.Logf("the dead replica's apply check run was completed %s after the kill (%s, %q):\n%s",
		time.Since(killedAt).Round(time.Millisecond), c.Conclusion, c.Title, c.Summary)
	if c.Conclusion != "failure" {
		t.Errorf("the dead replica's apply check run concluded %q; want failure", c.Conclusion)
	}
	mustContain(t, "the dead replica's apply check run", c.Title, "lease expired mid-apply (fenced)")
	mustContain(t, "the dead replica's apply check run", rendered(c.Summary), dead, "mid-apply (fenced)", "terraform_data.app_web")
	mustContain(t, "PR 1's sticky comment after the crash", b.stickyOnce(t, 1, dead, "mid-apply (fenced)"), dead, "mid-apply (fenced)")

	// --- 2. Its work dir goes once the run is no longer live. ---
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(left); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dead run's work dir %s is still there 30 s after its check run said it died", left)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := st.GetArtifact(ctx, dead, engine.ArtifactApplyCheckpoint); err != nil {
		t.Fatalf("the dead run's checkpoint after its work dir was removed: %v", err)
	}

	// --- 3. kl run recover, outside klbot: the check run and sticky say so. ---
	eng := engine.New(st, nil, nil)
	eng.WorkDirs = terraform.WorkDirs{Root: t.TempDir()}
	out, err := eng.Recover(ctx, dead)
	if err != nil || out.Version == nil {
		t.Fatalf("Recover %s: %v (outcome %+v)", dead, err, out)
	}
	version := fmt.Sprintf("version %d", out.Version.Serial)
	c = b.waitCheckRun(t, p1.head, "kl apply · infra", 30*time.Second, func(c githubfake.CheckRun) bool {
		return strings.Contains(rendered(c.Summary), version)
	})
	t.Logf("the apply check run after the recovery (%s, %q):\n%s", c.Conclusion, c.Title, c.Summary)
	mustContain(t, "the apply check run after the recovery", rendered(c.Summary), "recovered", version)
	mustContain(t, "the apply check run after the recovery", c.Title, "Recovered: "+version, "lease expired mid-apply (fenced)")
	s1 := b.stickyOnce(t, 1, version)
	t.Logf("PR 1's sticky comment after the recovery:\n%s", s1)
	mustContain(t, "PR 1's sticky comment after the recovery", s1, "recovered", version)
	mustLack(t, "PR 1's sticky comment after the recovery", s1, "`kl run recover "+dead+"` commits")

	// --- 4. River hands A's job back: the retry reports the same run. ---
	conn := b.conn()
	defer conn.Close(ctx)
	tag, err := conn.Exec(ctx, `UPDATE river_job SET state = 'retryable', scheduled_at = now() WHERE state = 'running' AND kind = 'klbot_apply'`)
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("handing the dead replica's apply job back: %v (%d rows); want its one running job", err, tag.RowsAffected())
	}
	b.settle()
	c = b.shown(t, p1.head, "kl apply · infra")
	mustContain(t, "the apply check run after the retry", rendered(c.Summary), dead, "recovered", version)
	if got := b.count(`SELECT count(*) FROM runs WHERE kind = 'apply' AND plan_run = $1`, plan1); got != 1 {
		t.Errorf("plan %s has %d apply runs after the retry; want the dead one only", plan1, got)
	}
	b.linksOpen(t, 1)
}
