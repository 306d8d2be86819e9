package cli_test

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/testprovider"
)

// fenceConfig is one kltest_object whose every API call takes delay.
func fenceConfig(name, delay string) string {
	return testprovider.RequiredProvidersBlock + `
resource "kltest_object" "x" {
  name  = "` + name + `"
  delay = "` + delay + `"
}
`
}

// TestProviderKilledCreateFences (issue 10 §1, ADR 0035) with the test
// provider's latency, on SQLite: `kl apply` (KL_LEASE=3s) of a plan
// creating kltest_object.x, whose Create takes 30 s, is killed with
// SIGKILL while Terraform applies it: apply-started is stored, the
// provider process runs, and a second later (inside the 30 s Create) the
// fake cloud API holds nothing yet. Once the lease has run out:
//
//   - `kl status --json` lists the run under fenced, fencing
//     kltest_object.x, and it is active no more;
//   - `kl apply --wait 1m` of another plan (made at the same serial)
//     writing kltest_object.x is refused at once (exit 3); its report and
//     its error name the fence of the killed run, when its Terraform
//     started and both commands that lift it, with the run's id (before
//     the fix that came with this test, the error said "run A holds" and
//     "`kl run recover RUN`");
//   - `kl run unfence RUN --reason TEXT` lifts it ("fence lifted by
//     alice: TEXT" in the run's story), and kl status lists no fence;
//   - the other apply then succeeds, and the fake cloud API holds its
//     object alone (the killed Create never finished).
func TestProviderKilledCreateFences(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/kl and runs Terraform with the test provider")
	}
	t.Parallel()
	k := setup(t)
	p := withProvider(k)
	bin := buildKL(t, k.dir)
	const state = "fenced"
	dir := func(name, main string) string {
		d := filepath.Join(k.dir, name)
		write(t, filepath.Join(d, "main.tf"), main)
		return d
	}
	k.ok("state", "init", state)
	var slow, other planDoc
	k.jsonOf(&slow, "plan", "--state", state, "-C", dir("slow", fenceConfig("x-slow", "30s")))
	k.jsonOf(&other, "plan", "--state", state, "-C", dir("other", fenceConfig("x-other", "100ms")))
	if !slices.Equal(slow.Footprint.Write, []string{"kltest_object.x"}) || !slices.Equal(other.Footprint.Write, []string{"kltest_object.x"}) {
		t.Fatalf("write sets %v and %v; want both kltest_object.x", slow.Footprint.Write, other.Footprint.Write)
	}

	a := startKL(t, bin, k.dir, envWith(k.env, "KL_LEASE=3s"), "apply", "--json", slow.Run.ID)
	var below []osProc // kl's descendants: terraform and the provider
	t.Cleanup(func() { killGroups(below) })
	var apply string
	ready := poll(time.Minute, 100*time.Millisecond, func() bool {
		select {
		case <-a.exited:
			return true
		default:
		}
		var runs runsDoc
		k.jsonOf(&runs, "runs", "--state", state)
		for _, r := range runs.Runs {
			if r.Kind == "apply" && r.PlanRun == slow.Run.ID {
				apply = r.ID
			}
		}
		if apply == "" {
			return false
		}
		var story recoverDoc
		k.jsonOf(&story, "run", "show", apply)
		below = descendants(a.cmd.Process.Pid)
		return story.has("apply", "apply-started") && slices.ContainsFunc(below, func(q osProc) bool {
			return strings.HasPrefix(q.comm, "terraform-prov") // comm holds 15 bytes
		})
	})
	select {
	case <-a.exited:
		res := a.wait(t, time.Second)
		t.Fatalf("kl apply exited (%d) before it could be killed\nstdout:\n%s\nstderr:\n%s", res.code, res.out, res.errOut)
	default:
	}
	if !ready {
		t.Fatalf("apply %q never had its Terraform started with the provider running (below kl: %+v)", apply, below)
	}
	time.Sleep(time.Second) // into the 30 s Create
	if objs := p.Objects(t); len(objs) != 0 {
		t.Fatalf("the fake API holds %v before the 30 s Create ended", objs)
	}
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.wait(t, 30*time.Second)
	killGroups(below) // Terraform dies with kl (Pdeathsig); the provider, its child, is killed here
	if !poll(10*time.Second, 50*time.Millisecond, func() bool { return !slices.ContainsFunc(below, alive) }) {
		t.Fatalf("processes below the killed kl survive: %+v", below)
	}

	var st statusDoc
	if !poll(20*time.Second, 250*time.Millisecond, func() bool {
		k.jsonOf(&st, "status")
		return st.fences(apply) != nil
	}) {
		t.Fatalf("kl status 20 s after the kill (lease 3s) lists no fence of %s: %+v", apply, st.Fenced)
	}
	if active, _ := st.run(apply); active || !slices.Equal(st.fences(apply), []string{"kltest_object.x"}) ||
		!strings.Contains(st.Fenced[0].Text, "kl run unfence "+apply) {
		t.Errorf("kl status: %s active %v, fenced %+v; want it inactive, fencing kltest_object.x, naming kl run unfence", apply, active, st.Fenced)
	}

	// The other plan's apply is refused at once, though it would wait a
	// minute for a live holder: the report and kl's error (what it prints
	// after "kl: ") name the fence, when its Terraform started, and both
	// commands with the run's id — never that the dead run "holds" it.
	started := time.Now()
	r := k.run("apply", "--json", "--wait", "1m", other.Run.ID)
	var refused recoverDoc
	if err := json.Unmarshal([]byte(r.out), &refused); err != nil || r.code() != 3 || refused.Run.Status != "refused" ||
		!strings.Contains(refused.Run.Reason, "run "+apply+" fences kltest_object.x") {
		t.Fatalf("kl apply of %s over the fence: exit %d, %v (decoding: %v), run %+v; want refused (3) naming the fence of %s",
			other.Run.ID, r.code(), r.err, err, refused.Run, apply)
	}
	if waited := time.Since(started); waited > 20*time.Second {
		t.Errorf("the refusal took %s: a fence must refuse at once, not wait", waited.Round(time.Second))
	}
	text := k.run("apply", "--wait", "1m", other.Run.ID)
	t.Logf("kl apply over the fence: exit %d\n%s\nkl: %v", text.code(), text.out, text.err)
	msg := text.err.Error()
	for _, want := range []string{
		"run " + apply + " fences kltest_object.x (its holder died while its Terraform ran, started at ",
		"`kl run recover " + apply + "`", "`kl run unfence " + apply + " --reason TEXT`",
	} {
		if text.code() != 3 || !strings.Contains(msg, want) {
			t.Errorf("kl apply over the fence: exit %d, error %q; want 3, saying %q", text.code(), msg, want)
		}
	}
	if strings.Contains(msg, apply+" holds") || strings.Contains(msg, "RUN") {
		t.Errorf("kl apply over the fence: error %q says the dead run holds the address, or names no run in a command", msg)
	}
	if !strings.Contains(text.out, "Refused: fenced by a crashed apply") || !strings.Contains(text.out, "kl run unfence "+apply+" --reason TEXT") {
		t.Errorf("kl apply over the fence: the report does not say it is fenced by %s:\n%s", apply, text.out)
	}

	const reason = "checked the API: no kltest_object.x was created"
	k.ok("run", "unfence", apply, "--reason", reason)
	k.jsonOf(&st, "status")
	if len(st.Fenced) != 0 {
		t.Errorf("kl status after kl run unfence: fenced %+v, want none", st.Fenced)
	}
	var story recoverDoc
	k.jsonOf(&story, "run", "show", apply)
	if !slices.ContainsFunc(story.Markers, func(m markerDoc) bool {
		return m.Kind == "fence-lifted" && strings.HasPrefix(m.Text, "fence lifted by alice") && strings.Contains(m.Text, reason)
	}) || !slices.ContainsFunc(story.Markers, func(m markerDoc) bool {
		return m.Kind == "lease-expired" && strings.HasPrefix(m.Text, "lease expired mid-apply (fenced)")
	}) || story.has("apply", "released") {
		t.Errorf("kl run show %s: markers %+v; want lease-expired mid-apply (fenced), fence lifted by alice with the reason, never released", apply, story.Markers)
	}

	var applied recoverDoc
	k.jsonOf(&applied, "apply", other.Run.ID)
	if applied.Run.Status != "applied" || applied.Version == nil || !slices.Equal(applied.Version.Changed, []string{"kltest_object.x"}) {
		t.Fatalf("kl apply of %s after the unfence: run %+v, version %+v; want applied, changing kltest_object.x", other.Run.ID, applied.Run, applied.Version)
	}
	if o := onlyObject(t, p); o.Name != "x-other" {
		t.Errorf("the fake API's object is named %q, want the other plan's x-other", o.Name)
	}
}
