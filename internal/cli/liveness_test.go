package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/testprovider"
)

// livenessConfig creates fast (100 ms), then slow, whose Create takes 10 s
// at the test provider's fake API.
const livenessConfig = testprovider.RequiredProvidersBlock + `
resource "kltest_object" "fast" {
  name  = "fast"
  delay = "100ms"
}

resource "kltest_object" "slow" {
  name       = "slow"
  delay      = "10s"
  depends_on = [kltest_object.fast]
}
`

// TestRecoverRefusesALiveKL (F4a, ADR 0071): `kl apply` (KL_LEASE=3s) has
// stored a checkpoint holding fast and is only slow — stopped with SIGSTOP
// while its Terraform goes on creating slow — so its lease runs out and
// the sweep fences its run. `kl run recover RUN` on this host is refused
// with exit 3, naming kl's pid and host and what to do (before ADR 0071 it
// committed the checkpoint, fast alone, and removed the work dir the live
// Terraform was writing in). Once kl runs again, its own commit goes
// through the fence: exit 0, both objects in the version, nothing lost.
func TestRecoverRefusesALiveKL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/kl and runs Terraform with the test provider")
	}
	t.Parallel()
	k := setup(t)
	p := withProvider(k)
	bin := buildKL(t, k.dir)
	const state = "liveness"
	dir := filepath.Join(k.dir, "config")
	write(t, filepath.Join(dir, "main.tf"), livenessConfig)
	k.ok("state", "init", state)
	var plan planDoc
	k.jsonOf(&plan, "plan", "--state", state, "-C", dir)

	a := startKL(t, bin, k.dir, envWith(k.env, "KL_LEASE=3s"), "apply", "--json", plan.Run.ID)
	t.Cleanup(func() { _ = a.cmd.Process.Signal(syscall.SIGCONT) })
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
			if r.Kind == "apply" && r.PlanRun == plan.Run.ID {
				apply = r.ID
			}
		}
		if apply == "" {
			return false
		}
		var story recoverDoc
		k.jsonOf(&story, "run", "show", apply)
		return story.has("apply", "apply-started") && checkpointHolds(k.checkpointOf(apply), "fast") && slices.ContainsFunc(descendants(a.cmd.Process.Pid), func(q osProc) bool {
			return strings.HasPrefix(q.comm, "terraform-prov")
		})
	})
	select {
	case <-a.exited:
		res := a.wait(t, time.Second)
		t.Fatalf("kl apply exited (%d) before it could be stopped\nstdout:\n%s\nstderr:\n%s", res.code, res.out, res.errOut)
	default:
	}
	if !ready {
		t.Fatalf("apply %q never stored a checkpoint holding fast with the provider running", apply)
	}
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	var st statusDoc
	if !poll(30*time.Second, 250*time.Millisecond, func() bool {
		k.jsonOf(&st, "status")
		return st.fences(apply) != nil
	}) {
		t.Fatalf("kl status lists no fence of the stopped apply %s 30 s after SIGSTOP (lease 3s): %+v", apply, st.Fenced)
	}

	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	pid := strconv.Itoa(a.cmd.Process.Pid)
	r := k.run("run", "recover", apply)
	t.Logf("kl run recover while kl applies: exit %d: %v", r.code(), r.err)
	if r.code() != 3 || r.err == nil || !strings.Contains(r.err.Error(), "its holder process "+pid+" on host "+host+" is alive") ||
		!strings.Contains(r.err.Error(), "kill "+pid+" on "+host) {
		t.Fatalf("kl run recover while its holder lives: exit %d, %v; want 3 naming process %s on host %s and what to do", r.code(), r.err, pid, host)
	}

	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	res := a.wait(t, 2*time.Minute)
	var done recoverDoc
	if err := json.Unmarshal([]byte(res.out), &done); err != nil || res.code != 0 || done.Run.Status != "applied" || done.Version == nil ||
		!slices.Equal(done.Version.Changed, []string{"kltest_object.fast", "kltest_object.slow"}) {
		t.Fatalf("kl apply after SIGCONT: exit %d (%v), run %+v, version %+v; want applied, fast and slow committed\nstderr:\n%s", res.code, err, done.Run, done.Version, res.errOut)
	}
	if objs := p.Objects(t); len(objs) != 2 {
		t.Errorf("the fake API holds %v; want fast and slow", objs)
	}
	k.jsonOf(&st, "status")
	if len(st.Fenced) != 0 {
		t.Errorf("kl status after the holder's commit: fenced %+v; want none", st.Fenced)
	}
}

// checkpointHolds reports whether the state document cp holds a resource
// named name.
func checkpointHolds(cp []byte, name string) bool {
	var doc struct {
		Resources []struct {
			Name string `json:"name"`
		} `json:"resources"`
	}
	if cp == nil || json.Unmarshal(cp, &doc) != nil {
		return false
	}
	return slices.ContainsFunc(doc.Resources, func(r struct {
		Name string `json:"name"`
	}) bool {
		return r.Name == name
	})
}
