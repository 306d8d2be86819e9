package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// slowConfig is the kill -9 test's module: slow's provisioner sleeps pause
// seconds when it is created, and a new pause replaces it.
func slowConfig(input string, pause int) string {
	return fmt.Sprintf(`resource "terraform_data" "slow" {
  input            = %q
  triggers_replace = %d

  provisioner "local-exec" {
    command = "sleep %d"
  }
}

resource "terraform_data" "other" {
  input = "other"
}
`, input, pause, pause)
}

// testKilledApplyProcess: `kl apply` with KL_LEASE=3s of a plan replacing
// a slow resource (its provisioner sleeps 30 s) is killed with SIGKILL
// once `kl status` shows it holding its reservations and Terraform runs
// the provisioner. Terraform dies with it (terraform-exec's Pdeathsig);
// its process group (the provisioner) is killed by the test. Then:
//
//   - right away `kl status` still shows the dead holder's reservations
//     (checked when the call starts within half a lease of the kill: the
//     last renewal was at most a third of a lease before it);
//   - once the lease has ended (polled, up to 20 s), the killed run's write
//     set is fenced (ADR 0035): `kl status` lists it, and `kl apply --wait
//     2m` of another plan writing the same resource is refused at once,
//     naming the fence and how to lift it; after `kl run unfence` it
//     succeeds;
//   - `kl run show` of the killed run says lease-expired, with a
//     lease-expired marker naming terraform_data.slow;
//   - no version was produced by the killed run; serials stay contiguous.
func testKilledApplyProcess(t *testing.T, bin string) {
	const (
		state = "killed"
		lease = 3 * time.Second
	)
	k := setupPostgres(t)
	dir := func(name, main string) string {
		d := filepath.Join(k.dir, name)
		write(t, filepath.Join(d, "main.tf"), main)
		return d
	}
	k.ok("state", "init", state)
	var base, slow, next planDoc
	k.jsonOf(&base, "plan", "--state", state, "-C", dir("base", slowConfig("v1", 0)))
	k.ok("apply", base.Run.ID)
	k.jsonOf(&slow, "plan", "--state", state, "-C", dir("slow", slowConfig("v1", 30)))
	k.jsonOf(&next, "plan", "--state", state, "-C", dir("next", slowConfig("v2", 0)))
	source := slow.Envelope.SourceSerial
	if next.Envelope.SourceSerial != source || !slices.Contains(slow.Footprint.Write, "terraform_data.slow") || !slices.Contains(next.Footprint.Write, "terraform_data.slow") {
		t.Fatalf("plans at serials %d and %d writing %v and %v; want both at one serial writing terraform_data.slow",
			source, next.Envelope.SourceSerial, slow.Footprint.Write, next.Footprint.Write)
	}

	env := envWith(k.env, "KL_LEASE="+lease.String(), "KL_WORKDIR="+filepath.Join(k.dir, "work-killed"))
	p := startKL(t, bin, k.dir, env, "apply", "--json", slow.Run.ID)
	var below []osProc // kl's descendants: terraform, its shell and sleep
	t.Cleanup(func() { killGroups(below) })
	var killed string
	ready := poll(2*time.Minute, 200*time.Millisecond, func() bool {
		select {
		case <-p.exited:
			return true
		default:
		}
		var st statusDoc
		k.jsonOf(&st, "status")
		killed = ""
		for _, a := range st.Active {
			if a.Run.Kind == "apply" && a.Run.Status == "applying" && slices.Contains(a.Write, "terraform_data.slow") {
				killed = a.Run.ID
			}
		}
		below = descendants(p.cmd.Process.Pid)
		return killed != "" && slices.ContainsFunc(below, func(q osProc) bool { return q.comm == "sleep" })
	})
	select {
	case <-p.exited:
		res := p.wait(t, time.Second)
		t.Fatalf("kl apply exited (%d) before it could be killed\nstdout:\n%s\nstderr:\n%s", res.code, res.out, res.errOut)
	default:
	}
	if !ready {
		t.Fatalf("kl apply never held its reservations with the provisioner running (run %q, processes below kl: %+v)", killed, below)
	}
	var terraforms []osProc
	for _, q := range below {
		if q.ppid == p.cmd.Process.Pid {
			terraforms = append(terraforms, q)
		}
	}
	t.Logf("apply %s holds terraform_data.slow; below kl (pid %d): %+v", killed, p.cmd.Process.Pid, below)

	killedAt := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res := p.wait(t, 30*time.Second)
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("kl apply was not killed by SIGKILL: exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.out, res.errOut)
	}

	// Right away: the dead holder's reservations are still there.
	asked := time.Since(killedAt)
	var st statusDoc
	k.jsonOf(&st, "status")
	active, write := st.run(killed)
	holds := active && slices.Contains(write, "terraform_data.slow")
	switch {
	case holds:
		t.Logf("%s after the kill, kl status still shows %s holding terraform_data.slow", asked.Round(time.Millisecond), killed)
	case asked < lease/2:
		t.Errorf("kl status %s after the kill (lease %s): the killed run %s no longer holds terraform_data.slow: %+v", asked, lease, killed, st.Active)
	default:
		t.Logf("kl status was asked %s after the kill, too late to expect the %s lease to hold: not checked", asked, lease)
	}

	// Terraform died with kl (Pdeathsig); its provisioner, in Terraform's
	// own process group, did not: kill that group.
	if len(terraforms) == 0 {
		t.Errorf("no Terraform process below kl: %+v", below)
	}
	if !poll(10*time.Second, 50*time.Millisecond, func() bool { return !slices.ContainsFunc(terraforms, alive) }) {
		t.Errorf("Terraform %+v outlived the SIGKILL of kl by 10 s: no Pdeathsig?", terraforms)
	}
	killGroups(below)
	if !poll(10*time.Second, 50*time.Millisecond, func() bool { return !slices.ContainsFunc(below, alive) }) {
		t.Errorf("processes below the killed kl survive SIGKILL of their groups: %+v", below)
	}

	// After the lease: the run is no longer active, and its write set is
	// fenced (kl status sweeps, and lists it first; ADR 0035).
	var fenced statusDoc
	gone := poll(20*time.Second, 250*time.Millisecond, func() bool {
		k.jsonOf(&fenced, "status")
		active, _ := fenced.run(killed)
		return !active
	})
	if !gone {
		t.Fatalf("the killed run %s is still active 20 s after the kill (lease %s)", killed, lease)
	}
	t.Logf("the lease of %s ran out %s after the kill", killed, time.Since(killedAt).Round(time.Millisecond))
	if got := fenced.fences(killed); !slices.Equal(got, []string{"terraform_data.slow"}) {
		t.Fatalf("kl status after the lease: fenced %+v; want %s fencing terraform_data.slow", fenced.Fenced, killed)
	}

	// B is refused — at once, though it would wait 2m for a live holder —
	// naming the fenced run, when its Terraform started, and the commands.
	refused := startKL(t, bin, k.dir, envWith(k.env, "KL_WORKDIR="+filepath.Join(k.dir, "work-next")), "apply", "--json", "--wait", "2m", next.Run.ID).wait(t, time.Minute)
	var ref storyDoc
	if err := json.Unmarshal([]byte(refused.out), &ref); err != nil || refused.code != 3 || ref.Run.Status != "refused" ||
		!strings.Contains(ref.Run.Reason, "run "+killed+" fences terraform_data.slow") || !strings.Contains(ref.Run.Reason, "its Terraform ran (started at ") ||
		!strings.Contains(ref.Run.Reason, "`kl run recover "+killed+"`") || !strings.Contains(ref.Run.Reason, "`kl run unfence "+killed+" --reason TEXT`") {
		t.Fatalf("kl apply of %s over the fence: exit %d, %v, run %+v; want refused (3) naming the fence\nstdout:\n%s\nstderr:\n%s",
			next.Run.ID, refused.code, err, ref.Run, refused.out, refused.errOut)
	}
	// An operator who checked the real objects lifts the fence.
	k.ok("run", "unfence", killed, "--reason", "checked terraform_data.slow by hand")

	after := startKL(t, bin, k.dir, envWith(k.env, "KL_WORKDIR="+filepath.Join(k.dir, "work-next")), "apply", "--json", next.Run.ID).wait(t, 3*time.Minute)
	var applied storyDoc
	if err := json.Unmarshal([]byte(after.out), &applied); err != nil || after.code != 0 || applied.Run.Status != "applied" || applied.Run.CommittedSerial != source+1 {
		t.Fatalf("kl apply of %s after the lease: exit %d, %v, run %+v; want applied as version %d\nstdout:\n%s\nstderr:\n%s",
			next.Run.ID, after.code, err, applied.Run, source+1, after.out, after.errOut)
	}

	var story storyDoc
	k.jsonOf(&story, "run", "show", killed)
	if story.Run.Status != "lease-expired" || story.Run.Reason == "" || story.Run.CommittedSerial != 0 {
		t.Errorf("kl run show %s: status %q, reason %q, committed %d; want lease-expired with a reason, nothing committed",
			killed, story.Run.Status, story.Run.Reason, story.Run.CommittedSerial)
	}
	if !slices.ContainsFunc(story.Markers, func(m markerDoc) bool {
		return m.Kind == "lease-expired" && m.Role == "apply" && slices.Contains(m.Addresses, "terraform_data.slow") &&
			strings.HasPrefix(m.Text, "lease expired mid-apply (fenced)")
	}) {
		t.Errorf("kl run show %s: no lease-expired marker fencing terraform_data.slow: %+v", killed, story.Markers)
	}
	if !slices.ContainsFunc(story.Markers, func(m markerDoc) bool {
		return m.Kind == "fence-lifted" && strings.HasPrefix(m.Text, "fence lifted by ") && strings.Contains(m.Text, "checked terraform_data.slow by hand")
	}) {
		t.Errorf("kl run show %s: no fence-lifted marker naming who and why: %+v", killed, story.Markers)
	}
	for _, m := range story.Markers {
		if m.Role == "apply" && (m.Kind == "applied" || m.Kind == "committed") {
			t.Errorf("kl run show %s: the killed run has a %s marker: %+v", killed, m.Kind, m)
		}
	}
	var why whyDoc
	k.jsonOf(&why, "why", killed)
	if !slices.ContainsFunc(why.Decisive, func(m markerDoc) bool { return m.Kind == "lease-expired" }) {
		t.Errorf("kl why %s: verdict %s, no lease-expired among the decisive markers: %+v", killed, why.Verdict, why.Decisive)
	}
	if story.Plan != nil {
		t.Logf("the killed run's plan %s is left %s: %s", story.Plan.ID, story.Plan.Status, story.Plan.Reason)
	}

	var hist historyDoc
	k.jsonOf(&hist, "history", "--state", state)
	sort.Slice(hist.Entries, func(i, j int) bool { return hist.Entries[i].Version.Serial < hist.Entries[j].Version.Serial })
	for i, e := range hist.Entries {
		if e.Version.Serial != int64(i) {
			t.Errorf("serials not contiguous from 0: version %d at position %d", e.Version.Serial, i)
		}
		if e.Version.Provenance.Run == killed || e.Version.Provenance.PlanRun == slow.Run.ID {
			t.Errorf("version %d was produced by the killed run %s (plan %s)", e.Version.Serial, killed, slow.Run.ID)
		}
	}
	if n := len(hist.Entries); n == 0 || hist.Entries[n-1].Version.Serial != source+1 {
		t.Errorf("history has %d versions, want serials 0..%d", n, source+1)
	}
	_, _, inputs := tfInstances(t, []byte(k.ok("state", "pull", state)))
	if inputs["slow"] != "v2" {
		t.Errorf("head slow = %q, want v2 (the apply after the lease)", inputs["slow"])
	}
}

// run reports whether run id is active in s, and the addresses it holds
// for write.
func (s statusDoc) run(id string) (active bool, write []string) {
	for _, a := range s.Active {
		if a.Run.ID == id {
			return true, a.Write
		}
	}
	return false, nil
}

// osProc is one process as /proc/PID/stat shows it.
type osProc struct {
	pid, ppid, pgid int
	state           byte // R, S, D, Z (zombie), …
	comm            string
}

// procStat reads /proc/PID/stat; false when the process is gone.
func procStat(pid int) (osProc, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return osProc{}, false
	}
	// "PID (COMM) STATE PPID PGRP …": COMM may hold spaces and parentheses.
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return osProc{}, false
	}
	f := strings.Fields(s[closing+1:])
	if len(f) < 3 {
		return osProc{}, false
	}
	p := osProc{pid: pid, state: f[0][0], comm: s[open+1 : closing]}
	p.ppid, _ = strconv.Atoi(f[1])
	p.pgid, _ = strconv.Atoi(f[2])
	return p, true
}

// descendants returns the live processes below pid (children first).
func descendants(pid int) []osProc {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]osProc{}
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := procStat(n); ok && p.state != 'Z' {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var out []osProc
	queue := []int{pid}
	for len(queue) > 0 {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
		queue = queue[1:]
	}
	return out
}

// alive reports whether p still runs (not gone, not a zombie, and the pid
// not reused by another command).
func alive(p osProc) bool {
	q, ok := procStat(p.pid)
	return ok && q.state != 'Z' && q.comm == p.comm
}

// killGroups sends SIGKILL to the process groups of ps (never the test's
// own group) and to each of ps still alive.
func killGroups(ps []osProc) {
	own := syscall.Getpgrp()
	done := map[int]bool{}
	for _, p := range ps {
		if p.pgid > 1 && p.pgid != own && !done[p.pgid] {
			done[p.pgid] = true
			_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
		}
	}
	for _, p := range ps {
		if alive(p) {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
}
