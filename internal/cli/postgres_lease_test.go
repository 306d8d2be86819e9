package cli_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// waitConfig is the module of the killed-waiter test: other reads slow's
// input; slow's provisioner sleeps, when slow is created, as many seconds
// as the file pause says (none: 0) — the configuration stays the same
// whether it sleeps or not.
func waitConfig(other, pause string) string {
	return fmt.Sprintf(`resource "terraform_data" "slow" {
  input = "v1"

  provisioner "local-exec" {
    command = "sleep $(cat '%s' 2>/dev/null || echo 0)"
  }
}

resource "terraform_data" "other" {
  input = "%s:${terraform_data.slow.input}"
}
`, pause, other)
}

// killLease is KL_LEASE of the processes the lease tests kill.
const killLease = 3 * time.Second

// testKilledWaitingApply: `kl apply --wait 5m` (KL_LEASE=3s) of a plan
// blocked by another apply's reservations is killed with SIGKILL while it
// waits — it holds no reservation, so only its own lease can end it. Then:
//
//   - once the lease has ended (polled, up to 20 s), `kl status` no longer
//     lists it, and `kl run show` says lease-expired, naming its holder;
//   - its plan is open again: `kl why PLAN` tells the attempt ended
//     lease-expired (not that it waits), and `kl apply PLAN` without
//     --wait is refused by the blocker's reservations — not by the false
//     "being applied right now";
//   - once the blocker has committed, `kl apply PLAN` re-checks by
//     re-planning (the blocker replaced what it reads, with the same
//     configuration) and applies.
//
// The blocker is a forced replacement (--replace) of slow, whose
// provisioner then sleeps 30 s.
func testKilledWaitingApply(t *testing.T, bin string) {
	const state = "killed-waiting"
	k := setupPostgres(t)
	pause := filepath.Join(k.dir, "pause")
	dir := func(name, main string) string {
		d := filepath.Join(k.dir, name)
		write(t, filepath.Join(d, "main.tf"), main)
		return d
	}
	k.ok("state", "init", state)
	var base, block, waiter planDoc
	k.jsonOf(&base, "plan", "--state", state, "-C", dir("base", waitConfig("o0", pause)))
	k.ok("apply", base.Run.ID)
	k.jsonOf(&block, "plan", "--state", state, "--replace", "terraform_data.slow", "-C", dir("block", waitConfig("o0", pause)))
	k.jsonOf(&waiter, "plan", "--state", state, "-C", dir("waiter", waitConfig("o1", pause)))
	write(t, pause, "30")
	if !slices.Equal(block.Footprint.Write, []string{"terraform_data.slow"}) || !slices.Equal(waiter.Footprint.Write, []string{"terraform_data.other"}) ||
		!slices.Contains(waiter.Footprint.Read, "terraform_data.slow") {
		t.Fatalf("blocker writes %v; waiter writes %v, reads %v; want slow, and other reading slow", block.Footprint.Write, waiter.Footprint.Write, waiter.Footprint.Read)
	}

	// The blocker holds terraform_data.slow for about 30 s (normal lease).
	blocker := startKL(t, bin, k.dir, envWith(k.env, "KL_WORKDIR="+filepath.Join(k.dir, "work-block")), "apply", "--json", block.Run.ID)
	if !poll(2*time.Minute, 200*time.Millisecond, func() bool {
		var st statusDoc
		k.jsonOf(&st, "status")
		for _, a := range st.Active {
			if a.Run.Kind == "apply" && a.Run.Status == "applying" && slices.Contains(a.Write, "terraform_data.slow") {
				return true
			}
		}
		return false
	}) {
		res := blocker.wait(t, time.Minute)
		t.Fatalf("the blocker never held terraform_data.slow: exit %d\n%s\n%s", res.code, res.out, res.errOut)
	}

	env := envWith(k.env, "KL_LEASE="+killLease.String(), "KL_WORKDIR="+filepath.Join(k.dir, "work-waiter"))
	p := startKL(t, bin, k.dir, env, "apply", "--wait", "5m", "--json", waiter.Run.ID)
	var killed string
	if !poll(time.Minute, 100*time.Millisecond, func() bool {
		var st statusDoc
		k.jsonOf(&st, "status")
		for _, a := range st.Active {
			if a.Run.Kind == "apply" && a.Run.Status == "waiting" && len(a.WaitingOn) > 0 {
				killed = a.Run.ID
				return true
			}
		}
		return false
	}) {
		t.Fatalf("kl apply --wait never showed as waiting on the blocker (run %q)", killed)
	}
	killedAt := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if res := p.wait(t, 30*time.Second); !signalled(p) {
		t.Fatalf("kl apply --wait was not killed by SIGKILL: exit %d\n%s\n%s", res.code, res.out, res.errOut)
	}
	select {
	case <-blocker.exited:
		t.Fatalf("the blocker exited before the waiter's lease could be checked: raise its pause")
	default:
	}

	if !poll(20*time.Second, 250*time.Millisecond, func() bool {
		var st statusDoc
		k.jsonOf(&st, "status")
		active, _ := st.run(killed)
		return !active
	}) {
		t.Fatalf("the killed waiter %s is still active 20 s after the kill (lease %s)", killed, killLease)
	}
	gone := time.Since(killedAt)
	if gone < killLease-time.Second {
		t.Errorf("the killed waiter left kl status %s after the kill, before its %s lease could end", gone, killLease)
	}
	t.Logf("killed waiter %s no longer active %s after the kill", killed, gone.Round(time.Millisecond))

	var story storyDoc
	k.jsonOf(&story, "run", "show", killed)
	if story.Run.Status != "lease-expired" || !strings.Contains(story.Run.Reason, "waiting for reservations") || story.Run.CommittedSerial != 0 {
		t.Errorf("kl run show %s: status %q, reason %q; want lease-expired while waiting for reservations", killed, story.Run.Status, story.Run.Reason)
	}
	if n := countMarkers(story.Markers, "apply", "lease-expired"); n != 1 {
		t.Errorf("kl run show %s: %d lease-expired markers, want 1: %+v", killed, n, story.Markers)
	}
	if story.Plan == nil || story.Plan.Status != "planned" {
		t.Errorf("kl run show %s: plan %+v; want it planned again", killed, story.Plan)
	}
	var why whyDoc
	k.jsonOf(&why, "why", waiter.Run.ID)
	if why.Verdict != "pending" || !strings.Contains(why.Reason, "lease-expired") {
		t.Errorf("kl why %s: verdict %s, reason %q; want pending, the last attempt lease-expired", waiter.Run.ID, why.Verdict, why.Reason)
	}
	// Open again: an apply without --wait is refused by the blocker's
	// reservations, as any apply would be.
	k.refused("conflict", "apply", waiter.Run.ID)

	if res := blocker.wait(t, 3*time.Minute); res.code != 0 {
		t.Fatalf("the blocker failed: exit %d\n%s\n%s", res.code, res.out, res.errOut)
	}
	var applied storyDoc
	k.jsonOf(&applied, "apply", waiter.Run.ID)
	if applied.Run.Status != "applied" || applied.Run.CommittedSerial != block.Envelope.SourceSerial+2 {
		t.Errorf("kl apply %s after the blocker: %+v; want applied as version %d", waiter.Run.ID, applied.Run, block.Envelope.SourceSerial+2)
	}
	if countMarkers(applied.Markers, "apply", "replanned") != 1 {
		t.Errorf("kl apply %s after the blocker: markers %+v; want one re-plan (read-changed)", waiter.Run.ID, applied.Markers)
	}
	_, _, inputs := tfInstances(t, []byte(k.ok("state", "pull", state)))
	if inputs["other"] != "o1:v1" {
		t.Errorf("head other = %q, want o1:v1", inputs["other"])
	}
}

// manyConfig has n terraform_data instances: planning it takes Terraform
// seconds (about 7 s for 3000 on a loaded 2-core machine), and kl stays in
// status planning all that time.
func manyConfig(n int) string {
	return fmt.Sprintf(`resource "terraform_data" "many" {
  count = %d
  input = "v${count.index}"
}
`, n)
}

// testKilledPlanProcess: `kl plan` (KL_LEASE=3s) of a large module is
// killed with SIGKILL while its plan run is planning (Terraform plans);
// once its lease has ended the run is no longer active and `kl run show`
// says lease-expired; no reservation and no version came of it.
func testKilledPlanProcess(t *testing.T, bin string) {
	const state = "killed-plan"
	k := setupPostgres(t)
	d := filepath.Join(k.dir, "many")
	write(t, filepath.Join(d, "main.tf"), manyConfig(3000))
	k.ok("state", "init", state)
	env := envWith(k.env, "KL_LEASE="+killLease.String(), "KL_WORKDIR="+filepath.Join(k.dir, "work-plan"))
	p := startKL(t, bin, k.dir, env, "plan", "--json", "--state", state, "-C", d)
	var below []osProc
	t.Cleanup(func() { killGroups(below) })
	var killed string
	if !poll(time.Minute, 100*time.Millisecond, func() bool {
		select {
		case <-p.exited:
			return true
		default:
		}
		var st statusDoc
		k.jsonOf(&st, "status")
		for _, a := range st.Active {
			if a.Run.Kind == "plan" && a.Run.Status == "planning" {
				killed = a.Run.ID
			}
		}
		below = descendants(p.cmd.Process.Pid)
		return killed != "" && slices.ContainsFunc(below, func(q osProc) bool { return strings.Contains(q.comm, "terraform") })
	}) || killed == "" {
		t.Fatalf("kl plan never showed as planning with Terraform running (run %q, below %+v)", killed, below)
	}
	select {
	case <-p.exited:
		res := p.wait(t, time.Second)
		t.Fatalf("kl plan finished (exit %d) before it could be killed: make the module larger\n%s", res.code, res.errOut)
	default:
	}
	killedAt := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if res := p.wait(t, 30*time.Second); !signalled(p) {
		t.Fatalf("kl plan was not killed by SIGKILL: exit %d\n%s\n%s", res.code, res.out, res.errOut)
	}
	killGroups(below)

	if !poll(20*time.Second, 250*time.Millisecond, func() bool {
		var st statusDoc
		k.jsonOf(&st, "status")
		active, _ := st.run(killed)
		return !active
	}) {
		t.Fatalf("the killed plan %s is still active 20 s after the kill (lease %s)", killed, killLease)
	}
	t.Logf("killed plan %s no longer active %s after the kill", killed, time.Since(killedAt).Round(time.Millisecond))
	var story storyDoc
	k.jsonOf(&story, "run", "show", killed)
	if story.Run.Status != "lease-expired" || !strings.Contains(story.Run.Reason, "while planning") {
		t.Errorf("kl run show %s: status %q, reason %q; want lease-expired while planning", killed, story.Run.Status, story.Run.Reason)
	}
	if n := countMarkers(story.Markers, "", "lease-expired"); n != 1 {
		t.Errorf("kl run show %s: %d lease-expired markers, want 1: %+v", killed, n, story.Markers)
	}
	var runs runsDoc
	k.jsonOf(&runs, "runs", "--state", state)
	for _, r := range runs.Runs {
		if r.ID != killed && (r.Status == "planning" || r.Status == "planned") {
			t.Errorf("another open run %+v", r)
		}
	}
}

// signalled reports whether p was ended by SIGKILL.
func signalled(p *bgProc) bool {
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// countMarkers counts the markers of kind (of role, unless "").
func countMarkers(ms []markerDoc, role, kind string) int {
	n := 0
	for _, m := range ms {
		if m.Kind == kind && (role == "" || m.Role == role) {
			n++
		}
	}
	return n
}
