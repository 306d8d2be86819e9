package engine_test

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/report"
	"github.com/kilolock/kilolock/internal/store/sqlite"
	"github.com/kilolock/kilolock/internal/terraform"
)

// slowHolder starts, on eng, the apply of a plan that updates x and y,
// then creates z behind a gate, and returns the apply run once Terraform
// has stored a checkpoint holding x's update (and not z) with the
// addresses that checkpoint changed (x, and y when Terraform persisted it
// by then); done and out get Apply's outcome. The test then jumps the store's clock past the lease (skew):
// the sweep fences the run while its holder — this test process — is
// alive, only slow, as a long terraform apply is.
func (h *harness) slowHolder(eng *engine.Engine, skew *atomic.Int64) (run string, checkpoint engine.AddressSet, release func(), done chan error, out **engine.ApplyOutcome) {
	h.t.Helper()
	gate, release := h.gate()
	plan := h.plan(config{"x": {Value: "x1"}, "y": {Value: "y1"}, "z": {Value: "z1", Gate: gate, DependsOn: []string{"x", "y"}}})
	done = make(chan error, 1)
	out = new(*engine.ApplyOutcome)
	go func() {
		o, err := eng.Apply(h.ctx, engine.ApplyInput{PlanRun: plan.ID, Actor: "alice"})
		*out = o
		done <- err
	}()
	waitFor(h.t, 60*time.Second, "the apply's checkpoint holding x", func() bool {
		for _, r := range h.applyRuns(plan.ID) {
			b, err := h.store.GetArtifact(h.ctx, r.ID, engine.ArtifactApplyCheckpoint)
			if err != nil {
				continue
			}
			in := parseHead(h.t, b).inputs()
			if _, z := in["z"]; in["x"] == "x1" && !z {
				run, checkpoint = r.ID, addrs("x")
				if in["y"] == "y1" {
					checkpoint = addrs("x", "y")
				}
				return true
			}
		}
		return false
	})
	skew.Store(int64(time.Minute))
	if _, err := h.eng.Status(h.ctx, testState); err != nil { // the sweep
		h.t.Fatalf("Status: %v", err)
	}
	if r := h.run(run); r.Status != engine.StatusLeaseExpired || len(r.End.Fenced) == 0 || !r.End.Recoverable {
		h.t.Fatalf("the slow apply after the sweep: %s, end %+v; want lease-expired, fenced, recoverable", r.Status, r.End)
	}
	return run, checkpoint, release, done, out
}

// TestRecoverRefusesALiveHolder (F4a): the sweep fenced an apply whose
// holder is alive on this host, only slow (Terraform still applies z).
// `kl run recover` is refused — a conflict (exit 3) naming the holder's
// pid and host and what to do — and nothing is committed; when Terraform
// finishes, the holder's own commit goes through the fence exactly, with
// z in the head: nothing Terraform did is lost.
func TestRecoverRefusesALiveHolder(t *testing.T) {
	t.Parallel()
	var skew atomic.Int64
	h := setup(t, sqlite.WithClock(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }))
	h.base(config{"x": {Value: "x0"}, "y": {Value: "y0"}})
	source := h.headSerial()
	run, _, release, done, out := h.slowHolder(h.eng, &skew)
	if r := h.run(run); r.Holder.PID != os.Getpid() || r.Holder.Host != h.eng.Holder.Host {
		t.Fatalf("the apply's holder is %s; want this process, %s", r.Holder, h.eng.Holder)
	}

	// Another kl on this host: same host, another process.
	log := slog.New(slog.NewTextHandler(newTestLogWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	other := engine.New(h.store, h.eng.Terraform, log)
	other.Lease, other.Poll = h.eng.Lease, h.eng.Poll
	other.Holder.PID = os.Getpid() + 100000
	_, err := other.Recover(h.ctx, run)
	var re *engine.RecoverError
	pid := strconv.Itoa(os.Getpid())
	if !errors.As(err, &re) || !errors.Is(err, engine.ErrConflict) || !strings.Contains(err.Error(), "process "+pid+" on host "+h.eng.Holder.Host+" is alive") ||
		!strings.Contains(err.Error(), "kill "+pid) {
		t.Fatalf("Recover while the holder lives = %v; want a conflict naming process %s on host %s and what to do", err, pid, h.eng.Holder.Host)
	}
	t.Logf("refusal: %v", err)
	// kl run show says the same: not "recover now".
	if text := h.storyText(other, run); !strings.Contains(text, "its holder process "+pid+" on host "+h.eng.Holder.Host+" is still alive: wait for it to finish, or stop it (kill "+pid+"), then kl run recover "+run) {
		t.Errorf("kl run show of the fenced run whose holder lives does not say so:\n%s", text)
	}
	if got := h.headSerial(); got != source {
		t.Fatalf("the refused recovery moved the head to %d", got)
	}
	// The holder's own process is refused too (the run is live in it).
	if _, err := h.eng.Recover(h.ctx, run); !errors.Is(err, engine.ErrConflict) || !strings.Contains(err.Error(), "is alive") {
		t.Fatalf("Recover in the holder's own process = %v; want the same conflict", err)
	}

	release()
	if err := <-done; err != nil {
		t.Fatalf("the slow holder's Apply: %v", err)
	}
	v := (*out).Version
	if v == nil || v.Serial != source+1 || !sameSet(v.Changed, addrs("x", "y", "z")) || !v.Provenance.Exact {
		t.Fatalf("the holder committed %+v; want version %d with x, y and z, exact", v, source+1)
	}
	hs, _ := h.head()
	if in := hs.inputs(); in["x"] != "x1" || in["y"] != "y1" || in["z"] != "z1" {
		t.Fatalf("head = %v; want x1, y1, z1", in)
	}
}

// TestLateHolderAfterRecovery (F4b): the holder is on another host, so
// Recover cannot check it and recovers by the lease rule (the lease ran
// out), saying so; it commits the checkpoint (x, maybe y). Then the holder's
// Terraform finishes (z too): its commit is refused — the run committed
// meanwhile — and its report says so truthfully: not committed, because
// the run was recovered as that version, and where Terraform's final state
// is (artifact apply-result.tfstate, recoverable). Its run says the same,
// and `kl run recover` then commits what the final state adds (z, and y
// when the checkpoint lacked it), once.
func TestLateHolderAfterRecovery(t *testing.T) {
	t.Parallel()
	var skew atomic.Int64
	h := setup(t, sqlite.WithClock(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }))
	h.base(config{"x": {Value: "x0"}, "y": {Value: "y0"}})
	source := h.headSerial()
	log := slog.New(slog.NewTextHandler(newTestLogWriter(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	// Another host: its own Terraform work dirs, which a recovery here
	// cannot touch.
	farRunner, err := terraform.NewRunner(terraform.RunnerOptions{
		WorkRoot: filepath.Join(h.dir, "far-host-runs"), Binary: h.bin, Logger: log,
		Env: append(os.Environ(), "TF_CLI_CONFIG_FILE=/dev/null"),
	})
	if err != nil {
		t.Fatal(err)
	}
	far := engine.New(h.store, farRunner, log)
	far.Lease, far.Poll, far.Holder = h.eng.Lease, h.eng.Poll, engine.Holder{Host: "far-host", PID: 4242}
	run, cp, release, done, out := h.slowHolder(far, &skew)

	rec, err := h.eng.Recover(h.ctx, run)
	if err != nil {
		t.Fatalf("Recover of a run whose holder is on another host: %v", err)
	}
	if rec.Version == nil || rec.Version.Serial != source+1 || !sameSet(rec.Version.Changed, cp) {
		t.Fatalf("the recovery committed %+v; want version %d with the checkpoint's %v", rec.Version, source+1, cp)
	}
	rest := addrs("x", "y", "z").Minus(cp)
	if m := h.marker(run, engine.MarkerRecovered); m.Extra[engine.ExtraUncheckedHolder] != "far-host:4242" {
		t.Errorf("recovered marker %+v; want it to say holder far-host:4242 could not be checked", m)
	}

	release()
	err = <-done
	if err == nil || !errors.Is(err, engine.ErrConflict) {
		t.Fatalf("the late holder's Apply = %v; want a conflict: the run was recovered meanwhile", err)
	}
	for _, want := range []string{"not committed", "recovered meanwhile", "version " + strconv.FormatInt(source+1, 10), engine.ArtifactApplyResult, "kl run recover " + run} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the late holder's error does not say %q: %v", want, err)
		}
	}
	if o := *out; o == nil || o.Version != nil || o.Run.ID != run {
		t.Errorf("late outcome %+v; want the run, no version", o)
	}
	r := h.run(run)
	if r.End == nil || !r.End.Is(engine.CauseRecoveredMeanwhile) || !r.End.Recoverable || r.End.Serial != source+1 ||
		r.End.Artifact != engine.ArtifactApplyResult || !r.End.TerraformDone || r.CommittedSerial != source+1 {
		t.Fatalf("the run after the late holder: end %+v, committed %d; want recovered-meanwhile, recoverable, naming version %d and the artifact", r.End, r.CommittedSerial, source+1)
	}
	text := report.EndText(run, r.End)
	t.Logf("the late run's end: %s", text)
	for _, want := range []string{"not committed", "kl run recover " + run, engine.ArtifactApplyResult} {
		if !strings.Contains(text, want) {
			t.Errorf("the run's end %q does not say %q", text, want)
		}
	}
	// kl gc keeps it: it is a committed run's, but it waits for its recovery.
	if _, err := h.eng.GC(h.ctx, engine.GCRequest{Retention: time.Nanosecond}); err != nil {
		t.Fatalf("GC: %v", err)
	}
	final, err := h.store.GetArtifact(h.ctx, run, engine.ArtifactApplyResult)
	if err != nil {
		t.Fatalf("Terraform's final state is not kept: %v", err)
	}
	if in := parseHead(t, final).inputs(); in["x"] != "x1" || in["y"] != "y1" || in["z"] != "z1" {
		t.Fatalf("the kept final state holds %v; want x1, y1, z1", in)
	}
	story, err := h.eng.RunStory(h.ctx, run)
	if err != nil || story.Recoverable == nil || !sameSet(story.Recoverable.Changed, rest) {
		t.Fatalf("story: %v, recoverable %+v; want %v recoverable", err, story.Recoverable, rest)
	}
	if text := h.storyText(h.eng, run); !strings.Contains(text, fmt.Sprintf("Terraform's final state, kept after version %d was recovered, changes %d resource", source+1, len(rest))) ||
		!strings.Contains(text, "kl run recover "+run) || !strings.Contains(text, "result not committed") {
		t.Errorf("kl run show of the late run does not say its final state waits for kl run recover:\n%s", text)
	}
	if hs, _ := h.head(); hs.inputs()["z"] != "" {
		t.Fatalf("head holds z before the second recovery: %v", hs.inputs())
	}

	// The final state is recovered: z joins the head, x and y stay.
	again, err := h.eng.Recover(h.ctx, run)
	if err != nil {
		t.Fatalf("Recover of the final state: %v", err)
	}
	if v := again.Version; v == nil || v.Serial != source+2 || !sameSet(v.Changed, rest) {
		t.Fatalf("second recovery committed %+v; want version %d with %v", again.Version, source+2, rest)
	}
	hs, _ := h.head()
	if in := hs.inputs(); in["x"] != "x1" || in["y"] != "y1" || in["z"] != "z1" {
		t.Fatalf("head = %v; want x1, y1, z1", in)
	}
	if r := h.run(run); r.CommittedSerial != source+2 || r.End.Recoverable {
		t.Errorf("run after the final recovery: committed %d, end %+v; want %d, no longer recoverable", r.CommittedSerial, r.End, source+2)
	}
	if text := report.EndText(run, h.run(run).End); !strings.Contains(text, fmt.Sprintf("was committed by a second `kl run recover` as version %d", source+2)) {
		t.Errorf("the run's end after the final recovery: %q; want it to name version %d", text, source+2)
	}
	if text := h.storyText(h.eng, run); strings.Contains(text, "was recovered, changes") || !strings.Contains(text, "committed by a second `kl run recover`") {
		t.Errorf("kl run show after the final recovery still offers the late result:\n%s", text)
	}
	if _, err := h.eng.Recover(h.ctx, run); !errors.Is(err, engine.ErrConflict) || !strings.Contains(err.Error(), "committed version") {
		t.Errorf("third Recover = %v; want refused: committed", err)
	}
}

// storyText is `kl run show RUN` as eng reads it, in plain text.
func (h *harness) storyText(eng *engine.Engine, run string) string {
	h.t.Helper()
	story, err := eng.RunStory(h.ctx, run)
	if err != nil {
		h.t.Fatalf("RunStory: %v", err)
	}
	var b strings.Builder
	if err := report.RunStory(&b, story, report.Options{Format: report.Text}); err != nil {
		h.t.Fatalf("rendering the story: %v", err)
	}
	return b.String()
}
