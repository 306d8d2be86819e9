package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store/postgres"
)

// TestFenceEndToEnd drives klbot through a crashed apply and its fence
// (ADR 0035), with real Terraform, the throwaway PostgreSQL and a real kl
// process killed with SIGKILL in the middle of its Terraform apply — as a
// replica dying mid-apply leaves it:
//
//  1. PR 1 (app_web replaced, its provisioner sleeping 60 s) and PR 2
//     (app_web updated) are planned on push;
//  2. `kl apply` (lease 3 s) of PR 1's plan — the plan klbot made — is
//     killed once Terraform runs the provisioner and has written a
//     checkpoint; once its lease runs out the sweep fences app_web;
//  3. PR 3, pushed now and reading app_web, is planned over the fence:
//     action_required, naming it;
//  4. /kl apply on PR 2 is refused at once (action_required), the check
//     run and sticky comment naming the dead run, "fences" and both
//     commands;
//  5. /kl unfence by mallory (read) is refused; the fence stands;
//  6. /kl unfence without a reason gets the help naming the reason;
//  7. /kl unfence -- REASON on PR 1 by alice lifts it: the reply holds the
//     run's story, "fence lifted by alice" and the reason; no fence left;
//  8. /kl apply on PR 2 succeeds;
//  9. /kl recover on PR 1: what its reply says is checked against the
//     store, and PR 1's sticky comment no longer sends anyone to recover
//     a run that committed.
func TestFenceEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a real kl apply and waits for its lease (-short)")
	}
	h := setup(t, "KLBOT_PUBLIC_URL="+publicURL)
	if !strings.HasPrefix(h.dsn, "postgres://") && !strings.HasPrefix(h.dsn, "postgresql://") {
		t.Skipf("kl takes a postgres:// URL; the test DSN is %q", h.dsn)
	}
	kl := buildKLBinary(t)
	ctx := context.Background()
	st, err := postgres.Open(ctx, h.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	// --- 1. Two pull requests change app_web; both are planned on push. ---
	app := "infra/app.tf"
	web := "resource \"terraform_data\" \"app_web\" {\n  input = \"app_web-v1\"\n}\n"
	slowWeb := "resource \"terraform_data\" \"app_web\" {\n  input            = \"app_web-v1\"\n  triggers_replace = \"slow\"\n\n" +
		"  provisioner \"local-exec\" {\n    command = \"sleep 60\"\n  }\n}\n"
	p1 := pr{1, sha(1), change(t, [3]string{app, web, slowWeb}), []string{app}}
	p2 := pr{2, sha(2), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}), []string{app}}
	for _, p := range []pr{p1, p2} {
		h.open(t, p)
		h.settle()
		h.one(t, p.head, "kl plan · infra")
	}
	plan1, plan2 := h.planRun(1), h.planRun(2)
	for n, id := range map[int]string{1: plan1, 2: plan2} {
		r, err := st.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind != engine.KindPlan || r.State != repo || r.Status != engine.StatusPlanned || r.PR == nil || r.PR.Number != n ||
			!r.Envelope.Footprint.Write.Contains(engine.Address("terraform_data.app_web")) {
			t.Fatalf("PR %d's plan %s: %s %s of %s, PR %+v, writes %v; want a planned plan of %s writing terraform_data.app_web",
				n, id, r.Kind, r.Status, r.State, r.PR, r.Envelope.Footprint.Write, repo)
		}
	}

	// --- 2. kl apply of PR 1's plan dies mid-apply (SIGKILL). ---
	dead, killedAt := killMidApply(t, h, st, kl, plan1)
	fences := waitFenced(t, st, dead, 30*time.Second)
	t.Logf("apply %s: fenced %s after the kill: %v", dead, time.Since(killedAt).Round(time.Millisecond), fences)
	if !slices.Equal(fences, []string{"terraform_data.app_web"}) {
		t.Fatalf("run %s fences %v; want exactly terraform_data.app_web", dead, fences)
	}
	deadRun, err := st.GetRun(ctx, dead)
	if err != nil {
		t.Fatal(err)
	}
	if deadRun.Status != engine.StatusLeaseExpired || deadRun.PR == nil || deadRun.PR.Number != 1 || deadRun.End == nil || !deadRun.End.Recoverable {
		t.Fatalf("the killed run %s: status %s, PR %+v, end %+v; want lease-expired, of PR 1, recoverable", dead, deadRun.Status, deadRun.PR, deadRun.End)
	}

	cp, err := st.GetArtifact(ctx, dead, engine.ArtifactApplyCheckpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the killed run's checkpoint holds app_web: %v (destroyed before its replacement's provisioner ran)", holdsResource(t, cp, "app_web"))
	t.Logf("PR 1's sticky comment after the crash:\n%s", h.sticky(t, 1))

	// --- 3. A plan that reads the fenced address says so. ---
	p3 := pr{3, sha(3), change(t, [3]string{app, `input = "app_api-v1"`, `input = "app_api-v2:${terraform_data.app_web.id}"`}), []string{app}}
	h.open(t, p3)
	h.settle()
	c3 := h.one(t, p3.head, "kl plan · infra")
	t.Logf("PR 3's plan check run (%s, %q, %d action(s)):\n%s", c3.Conclusion, c3.Title, len(c3.Actions), c3.Summary)
	if c3.Conclusion != "action_required" {
		t.Errorf("PR 3's plan over the fence: conclusion %q, want action_required", c3.Conclusion)
	}
	mustContain(t, "PR 3's plan check run", c3.Title+"\n"+rendered(c3.Summary), dead, "fences", "terraform_data.app_web")

	// --- 4. /kl apply on PR 2: refused at once, naming the fence. ---
	t0 := time.Now()
	h.comment(t, 2, "alice", "/kl apply")
	h.settle()
	took := time.Since(t0)
	c2 := h.one(t, p2.head, "kl apply · infra")
	t.Logf("PR 2's refused apply (%s, %q, %s):\n%s", c2.Conclusion, c2.Title, took.Round(time.Millisecond), c2.Summary)
	if c2.Conclusion != "action_required" {
		t.Errorf("PR 2's apply over the fence: conclusion %q, want action_required", c2.Conclusion)
	}
	if took >= 5*time.Second { // KLBOT_APPLY_WAIT (baseEnv): no wait frees a fence
		t.Errorf("PR 2's apply over the fence took %s: it waited for a dead holder", took)
	}
	mustContain(t, "PR 2's apply check run", c2.Title, "fenced", dead)
	// On GitHub the next steps are klbot's comments, on the PR of the
	// crashed apply (issue 11 §9), never kl's CLI commands.
	mustContain(t, "PR 2's apply check run", rendered(c2.Summary), dead, "fences", "terraform_data.app_web",
		"`/kl recover` on acme/infra#1", "`/kl unfence -- REASON` on acme/infra#1")
	s2 := h.sticky(t, 2)
	t.Logf("PR 2's sticky comment:\n%s", s2)
	mustContain(t, "PR 2's sticky comment", rendered(s2), dead, "fences", "`/kl recover` on acme/infra#1", "`/kl unfence -- REASON` on acme/infra#1")
	mustLack(t, "PR 2's apply check run and sticky comment", rendered(c2.Summary+s2), "kl run recover", "kl run unfence")
	// No wait lifts a fence, and its holder is dead: words for a live
	// holder's conflict would be false here.
	mustLack(t, "PR 2's apply check run and sticky comment", c2.Summary+s2, "reservations conflict", "apply again when it is done", "wait for it")
	refused := lastApply(t, st, plan2)
	if refused.Status != engine.StatusRefused || refused.End == nil || refused.End.Cause != engine.CauseRefusedFenced {
		t.Errorf("PR 2's apply run %s: %s, end %+v; want refused (%s)", refused.ID, refused.Status, refused.End, engine.CauseRefusedFenced)
	}
	if r, err := st.GetRun(ctx, plan2); err != nil || r.Status != engine.StatusPlanned {
		t.Errorf("PR 2's plan after the refusal: %v, %v; want it planned again", r.Status, err)
	}

	// --- 5. A reader may not lift a fence. ---
	_, cid := h.comment(t, 1, "mallory", "/kl unfence -- checked app_web by hand")
	h.settle()
	r5 := h.replyTo(t, 1, cid)
	t.Logf("reply to mallory's /kl unfence:\n%s", r5)
	mustContain(t, "the reply to mallory's /kl unfence", rendered(r5), "`/kl unfence` refused: write permission", "@mallory has read permission")
	if got := fencedBy(t, st, dead); !slices.Equal(got, fences) {
		t.Errorf("after mallory's /kl unfence run %s fences %v, want %v still", dead, got, fences)
	}

	// --- 6. No reason: the help says one is needed. ---
	_, cid = h.comment(t, 1, "alice", "/kl unfence")
	h.settle()
	r6 := h.replyTo(t, 1, cid)
	t.Logf("reply to /kl unfence without a reason:\n%s", r6)
	mustContain(t, "the reply to /kl unfence without a reason", rendered(r6), "needs a reason", "/kl unfence -- WHAT YOU CHECKED")
	if got := fencedBy(t, st, dead); !slices.Equal(got, fences) {
		t.Errorf("after /kl unfence without a reason run %s fences %v, want %v still", dead, got, fences)
	}

	// --- 7. alice lifts the fence with a reason. ---
	_, cid = h.comment(t, 1, "alice", "/kl unfence -- checked app_web by hand")
	h.settle()
	r7 := h.replyTo(t, 1, cid)
	t.Logf("reply to alice's /kl unfence:\n%s", r7)
	mustContain(t, "the reply to alice's /kl unfence", rendered(r7), dead, "fence lifted by alice", "checked app_web by hand")
	if got := fencedBy(t, st, dead); len(got) != 0 {
		t.Errorf("after alice's /kl unfence run %s still fences %v", dead, got)
	}
	ms, err := st.Markers(ctx, dead)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ms, func(m engine.Marker) bool {
		return m.Kind == engine.MarkerFenceLifted && m.Lift == engine.LiftUnfenced && m.By == "alice" && m.Reason == "checked app_web by hand"
	}) {
		t.Errorf("run %s has no fence-lifted marker by alice with the reason: %+v", dead, ms)
	}

	// --- 8. PR 2's apply goes through now. ---
	head, err := st.GetState(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	h.comment(t, 2, "alice", "/kl apply")
	h.settle()
	c2 = h.shown(t, p2.head, "kl apply · infra") // a new one: the refusal's is completed
	if c2.Conclusion != "success" {
		t.Errorf("PR 2's apply after the unfence: conclusion %q, want success:\n%s", c2.Conclusion, c2.Summary)
	}
	applied := lastApply(t, st, plan2)
	if applied.Status != engine.StatusApplied || applied.CommittedSerial != head.HeadSerial+1 {
		t.Errorf("PR 2's apply run %s: %s, committed %d; want applied as version %d", applied.ID, applied.Status, applied.CommittedSerial, head.HeadSerial+1)
	}

	// --- 9. /kl recover on PR 1: its reply against the store. ---
	before, err := st.GetState(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	_, cid = h.comment(t, 1, "alice", "/kl recover")
	h.settle()
	r9 := h.replyTo(t, 1, cid)
	t.Logf("reply to /kl recover:\n%s", r9)
	checkRecoverReply(t, st, dead, before.HeadSerial, r9)
	// The sticky comment of PR 1 must not send anyone to recover a run
	// that committed already.
	s1 := h.sticky(t, 1)
	t.Logf("PR 1's sticky comment at the end:\n%s", s1)
	if r, err := st.GetRun(ctx, dead); err == nil && r.CommittedSerial != 0 {
		mustLack(t, "PR 1's sticky comment after the recovery", rendered(s1), "`kl run recover "+dead+"` commits")
		// The apply check run says what the engine made of the crashed run
		// (ADR 0042), not that recovery is pending.
		c1 := h.one(t, p1.head, "kl apply · infra")
		mustContain(t, "PR 1's apply check run after /kl recover", c1.Title, fmt.Sprintf("Recovered: version %d", r.CommittedSerial))
		mustContain(t, "PR 1's apply check run after /kl recover", rendered(c1.Summary), dead, "recovered")
	}
	if p, err := st.GetRun(ctx, plan1); err != nil || p.End == nil || p.End.Cause != engine.CauseApplyRecovered {
		t.Errorf("PR 1's plan %s after the recovery: %v, end %+v; want its end to name the recovery (%s)", plan1, err, p.End, engine.CauseApplyRecovered)
	}
	h.linksOpen(t, 1, 2) // the recover and unfence replies, the stories (issue 11 §16)
}

// holdsResource reports whether state v4 document doc has a resource
// named name.
func holdsResource(t *testing.T, doc []byte, name string) bool {
	t.Helper()
	var st struct {
		Resources []struct {
			Name string `json:"name"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(doc, &st); err != nil {
		t.Fatalf("parsing a state: %v", err)
	}
	return slices.ContainsFunc(st.Resources, func(r struct {
		Name string `json:"name"`
	}) bool {
		return r.Name == name
	})
}

// mdEscapeRE is a Markdown backslash escape of ASCII punctuation.
var mdEscapeRE = regexp.MustCompile("\\\\([!-/:-@\\[-`{-~])")

// rendered is Markdown md with its backslash escapes undone: the words a
// reader sees.
func rendered(md string) string { return mdEscapeRE.ReplaceAllString(md, "$1") }

func mustLack(t *testing.T, what, body string, subs ...string) {
	t.Helper()
	for _, s := range subs {
		if strings.Contains(body, s) {
			t.Errorf("%s says %q:\n%s", what, s, body)
		}
	}
}

// checkRecoverReply checks the reply to "/kl recover" of run dead against
// the store: a refusal leaves the head at serial before and the run
// uncommitted; a recovery names the version it committed, which is the
// head and the run's CommittedSerial.
func checkRecoverReply(t *testing.T, st *postgres.Store, dead string, before int64, reply string) {
	t.Helper()
	ctx := context.Background()
	after, err := st.GetState(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	run, err := st.GetRun(ctx, dead)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case strings.Contains(reply, "refused"):
		mustContain(t, "the refusal of /kl recover", reply, dead)
		if after.HeadSerial != before || run.CommittedSerial != 0 {
			t.Errorf("/kl recover says refused, but the head went from %d to %d and run %s committed %d", before, after.HeadSerial, dead, run.CommittedSerial)
		}
	default:
		if run.CommittedSerial == 0 || after.HeadSerial != before+1 || run.CommittedSerial != after.HeadSerial {
			t.Fatalf("/kl recover's reply is no refusal, but run %s committed %d (head %d → %d)", dead, run.CommittedSerial, before, after.HeadSerial)
		}
		mustContain(t, "the reply to /kl recover", reply, dead, fmt.Sprintf("version %d", run.CommittedSerial))
		if run.End != nil && run.End.Recoverable {
			t.Errorf("run %s is still recoverable after its recovery", dead)
		}
		v, err := st.GetVersion(ctx, repo, run.CommittedSerial)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("version %d: changed %v, provenance %+v", v.Serial, v.Changed, v.Provenance)
	}
}

// killMidApply starts `kl apply` (KL_LEASE=3s) of plan on the harness's
// store, waits until its apply run holds its reservations with Terraform
// running app_web's provisioner and a checkpoint stored, then kills kl
// with SIGKILL and the process groups below it (the provisioner outlives
// Terraform otherwise). It returns the killed apply run and when it died.
func killMidApply(t *testing.T, h *harness, st *postgres.Store, kl, plan string) (string, time.Time) {
	t.Helper()
	ctx := context.Background()
	cmd := exec.Command(kl, "apply", "--json", plan)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TF_CLI_CONFIG_FILE=/dev/null", "CHECKPOINT_DISABLE=1",
		"KL_STORE=" + h.dsn, "KL_ACTOR=alice", "KL_LEASE=3s", "KL_WORKDIR=" + t.TempDir(), "KL_TERRAFORM=" + h.tfBin,
		"GORACE=atexit_sleep_ms=0",
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var below []osProcess
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		killProcessGroups(below)
	})
	var run string
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case err := <-exited:
			t.Fatalf("kl apply %s exited (%v) before it could be killed\nstdout:\n%s\nstderr:\n%s", plan, err, out.String(), errOut.String())
		default:
		}
		run = applyOf(t, st, plan)
		below = processesBelow(cmd.Process.Pid)
		sleeping := slices.ContainsFunc(below, func(p osProcess) bool { return p.comm == "sleep" })
		if run != "" && sleeping && hasMarker(t, st, run, engine.MarkerApplyStarted) {
			if _, err := st.GetArtifact(ctx, run, engine.ArtifactApplyCheckpoint); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("kl apply %s never ran the provisioner with a checkpoint stored (run %q, below kl: %+v)", plan, run, below)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("kl apply outlived SIGKILL by 30 s")
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("kl apply was not killed by SIGKILL: %v", cmd.ProcessState)
	}
	killProcessGroups(below)
	return run, killedAt
}

// applyOf is the apply run of plan (its ApplyRun once it claimed it), "".
func applyOf(t *testing.T, st *postgres.Store, plan string) string {
	t.Helper()
	r, err := st.GetRun(context.Background(), plan)
	if err != nil {
		t.Fatal(err)
	}
	return r.ApplyRun
}

// lastApply is the newest apply run of plan.
func lastApply(t *testing.T, st *postgres.Store, plan string) engine.Run {
	t.Helper()
	runs, err := st.ListRuns(context.Background(), engine.RunQuery{State: repo, Kind: engine.KindApply, Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs { // newest first
		if r.PlanRun == plan {
			return r
		}
	}
	t.Fatalf("no apply run of plan %s", plan)
	return engine.Run{}
}

func hasMarker(t *testing.T, st *postgres.Store, run string, kind engine.MarkerKind) bool {
	t.Helper()
	ms, err := st.Markers(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(ms, func(m engine.Marker) bool { return m.Kind == kind })
}

// fencedBy runs the lease sweep (as any view does) and returns the
// addresses run fences on the test's state, sorted.
func fencedBy(t *testing.T, st *postgres.Store, run string) []string {
	t.Helper()
	ctx := context.Background()
	if _, err := st.ExpireLeases(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := st.Reservations(ctx, repo)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range res {
		if r.Run == run && r.Fenced() {
			out = append(out, string(r.Address))
		}
	}
	slices.Sort(out)
	return out
}

// waitFenced polls fencedBy until run fences something, up to timeout.
func waitFenced(t *testing.T, st *postgres.Store, run string, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if f := fencedBy(t, st, run); len(f) > 0 {
			return f
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s fences nothing %s after its kill", run, timeout)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// replyTo is klbot's reply to command comment id on pull request n (the
// sticky comment of key "reply-ID").
func (h *harness) replyTo(t *testing.T, n int, id int64) string {
	t.Helper()
	marker := fmt.Sprintf("kilolock:sticky:reply-%d -->", id)
	var out []string
	for _, c := range h.fake.Comments(repo, n) {
		if strings.Contains(c.Body, marker) {
			out = append(out, c.Body)
		}
	}
	if len(out) != 1 {
		t.Fatalf("want exactly one reply to comment %d on #%d, got %d", id, n, len(out))
	}
	return out[0]
}

// buildKLBinary builds cmd/kl into a temporary directory, with -race when
// this test binary has it.
func buildKLBinary(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH to build cmd/kl")
	}
	bin := filepath.Join(t.TempDir(), "kl")
	args := []string{"build", "-o", bin}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" && s.Value == "true" {
				args = append(args, "-race")
			}
		}
	}
	out, err := exec.Command(goBin, append(args, "github.com/kilolock/kilolock/cmd/kl")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/kl: %v\n%s", err, out)
	}
	return bin
}

// osProcess is one process as /proc/PID/stat shows it.
type osProcess struct {
	pid, ppid, pgid int
	state           byte
	comm            string
}

func procStatOf(pid int) (osProcess, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return osProcess{}, false
	}
	s := string(b) // "PID (COMM) STATE PPID PGRP …": COMM may hold spaces
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return osProcess{}, false
	}
	f := strings.Fields(s[closing+1:])
	if len(f) < 3 {
		return osProcess{}, false
	}
	p := osProcess{pid: pid, state: f[0][0], comm: s[open+1 : closing]}
	p.ppid, _ = strconv.Atoi(f[1])
	p.pgid, _ = strconv.Atoi(f[2])
	return p, true
}

// processesBelow returns the live processes below pid.
func processesBelow(pid int) []osProcess {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]osProcess{}
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			if p, ok := procStatOf(n); ok && p.state != 'Z' {
				children[p.ppid] = append(children[p.ppid], p)
			}
		}
	}
	var out []osProcess
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// killProcessGroups sends SIGKILL to the process groups of ps (never the
// test's own) and to each of ps still alive as the same command.
func killProcessGroups(ps []osProcess) {
	own := syscall.Getpgrp()
	done := map[int]bool{}
	for _, p := range ps {
		if p.pgid > 1 && p.pgid != own && !done[p.pgid] {
			done[p.pgid] = true
			_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		}
	}
	for _, p := range ps {
		if q, ok := procStatOf(p.pid); ok && q.state != 'Z' && q.comm == p.comm {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
}
