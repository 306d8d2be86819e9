package terraform

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	version "github.com/hashicorp/go-version"

	"github.com/kilolock/kilolock/internal/engine"
)

// checkpoints records what a checkpointer hands over.
type checkpoints struct {
	mu  sync.Mutex
	got [][]byte
}

func (c *checkpoints) add(b []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, bytes.Clone(b))
}

func (c *checkpoints) all() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

func (c *checkpoints) last() []byte {
	all := c.all()
	if len(all) == 0 {
		return nil
	}
	return all[len(all)-1]
}

// eventually polls cond every 10ms for up to 10s (generous: two shared
// cores under -race).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func stateWithSerial(n int) []byte {
	return fmt.Appendf(nil, `{"version":4,"serial":%d,"lineage":"l","resources":[]}`, n)
}

// TestCheckpointer drives a checkpointer over a state file the test writes
// as Terraform would: it hands over new whole documents only, skips
// unchanged bytes and half-written files, bounds how often it looks however
// many resources complete, and looks once more when finished.
func TestCheckpointer(t *testing.T) {
	t.Parallel()
	const interval, settle = 100 * time.Millisecond, 5 * time.Millisecond
	path := filepath.Join(t.TempDir(), "snapshot.tfstate")
	writeState := func(b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	start := stateWithSerial(1)
	writeState(start)
	var rec checkpoints
	c := startCheckpointer(rec.add, path, start, discard, interval, settle)

	// A kick while the file still holds the start: nothing to hand over.
	c.kick()
	time.Sleep(3 * interval)
	if n := len(rec.all()); n != 0 {
		t.Fatalf("%d checkpoints of the unchanged starting snapshot", n)
	}

	// A resource completed and Terraform wrote: handed over.
	writeState(stateWithSerial(2))
	c.kick()
	eventually(t, "the first checkpoint", func() bool { return bytes.Equal(rec.last(), stateWithSerial(2)) })

	// The state hook writes after the UI event: the second look sees it.
	c.kick()
	time.Sleep(settle)
	writeState(stateWithSerial(3))
	eventually(t, "a write that landed after the kick", func() bool { return bytes.Equal(rec.last(), stateWithSerial(3)) })

	// Caught half written (Terraform truncates and rewrites in place):
	// never handed over; the whole document is.
	writeState([]byte(`{"version":4,"serial":4,"lin`))
	c.kick()
	time.Sleep(interval / 2)
	writeState(stateWithSerial(4))
	eventually(t, "the whole document after a half-written one", func() bool { return bytes.Equal(rec.last(), stateWithSerial(4)) })

	// Many resources completing in a burst: bounded looks. Each write
	// differs, so every look hands over; over ~10 intervals at most ~12.
	before := len(rec.all())
	burst := time.Now()
	for i := 5; time.Since(burst) < 10*interval; i++ {
		writeState(stateWithSerial(i))
		c.kick()
		time.Sleep(time.Millisecond)
	}
	took := time.Since(burst)
	if n, most := len(rec.all())-before, int(took/interval)+3; n > most {
		t.Errorf("%d checkpoints during a %s burst of completions with a %s interval; want at most %d", n, took, interval, most)
	}

	// Finished: the final file is handed over at once, and nothing after.
	writeState(stateWithSerial(1000))
	c.finish()
	if got := rec.last(); !bytes.Equal(got, stateWithSerial(1000)) {
		t.Fatalf("last checkpoint after finish = %s, want the final file", got)
	}
	n := len(rec.all())
	writeState(stateWithSerial(1001))
	c.kick()
	c.finish()
	time.Sleep(3 * interval)
	if len(rec.all()) != n {
		t.Fatalf("a checkpoint after finish")
	}
	for _, b := range rec.all() {
		if !strings.HasSuffix(string(b), `"resources":[]}`) {
			t.Fatalf("a half-written file was handed over: %s", b)
		}
	}
	for i, b := range rec.all()[1:] {
		if bytes.Equal(b, rec.all()[i]) {
			t.Fatalf("the same bytes handed over twice in a row: %s", b)
		}
	}
}

// TestCheckpointerWithoutResources: without a completed resource there is
// nothing to hand over, not even at the end; nil (no Checkpoint) is a no-op.
func TestCheckpointerWithoutResources(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "snapshot.tfstate")
	if err := os.WriteFile(path, stateWithSerial(7), 0o600); err != nil {
		t.Fatal(err)
	}
	var rec checkpoints
	c := startCheckpointer(rec.add, path, stateWithSerial(1), discard, time.Millisecond, time.Millisecond)
	c.finish()
	if n := len(rec.all()); n != 0 {
		t.Fatalf("%d checkpoints without a completed resource", n)
	}
	var none *checkpointer = newCheckpointer(nil, path, nil, discard)
	none.kick()
	none.finish()
}

// TestUIStreamKicksCheckpoints: every apply_complete and apply_errored of
// a recorded apply stream (Terraform's own) kicks the checkpointer; other
// messages do not.
func TestUIStreamKicksCheckpoints(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]int{"apply-errored.jsonl": 4, "apply-replace.jsonl": 2, "plan-create.jsonl": 0} {
		t.Run(file, func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(filepath.Join("testdata", "ui", file))
			if err != nil {
				t.Fatal(err)
			}
			s := newUIStream(phaseApply, newProgressReporter(nil), discard)
			kicks := 0
			s.wrote = func() { kicks++ }
			if _, err := s.Write(b); err != nil {
				t.Fatal(err)
			}
			s.close()
			if kicks != want {
				t.Fatalf("%d kicks, want %d", kicks, want)
			}
		})
	}
}

// TestApplyCheckpoints applies, with the real Terraform, a plan creating a
// fast resource and then a slow one (its provisioner sleeps): while the
// slow one runs, a checkpoint already holds the fast one — what survives if
// the process dies then — and the last checkpoint is the final state.
func TestApplyCheckpoints(t *testing.T) {
	t.Parallel()
	skipUnlessPerResourceState(t, testBinary(t))
	r, workRoot := setupRunner(t)
	dir := setupConfig(t, map[string]string{"main.tf": `
resource "terraform_data" "fast" {
  input = "fast"
}

resource "terraform_data" "slow" {
  depends_on = [terraform_data.fast]
  input      = "slow"
  provisioner "local-exec" {
    command = "sleep 4"
  }
}
`})
	ctx := context.Background()
	snap := snapshot("lineage-checkpoint", 3)
	plan, err := r.Plan(ctx, engine.PlanRequest{Run: "plan", Dir: dir, Snapshot: snap})
	if err != nil {
		t.Fatal(err)
	}
	var rec checkpoints
	var mu sync.Mutex
	var duringSlow [][]byte // checkpoints taken while Terraform still ran
	running := true
	checkpoint := func(b []byte) {
		rec.add(b)
		mu.Lock()
		defer mu.Unlock()
		if running {
			duringSlow = append(duringSlow, bytes.Clone(b))
		}
	}
	res, err := r.Apply(ctx, engine.ApplyRequest{Run: "apply", PlanFile: plan.PlanFile, Config: plan.Config, Snapshot: snap, Checkpoint: checkpoint})
	mu.Lock()
	running = false
	mu.Unlock()
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	found := false
	for _, b := range duringSlow {
		if got := strings.Join(parseState(t, b).addresses(), ","); got == "terraform_data.fast" {
			found = true
		}
	}
	if !found {
		var seen []string
		for _, b := range rec.all() {
			seen = append(seen, strings.Join(parseState(t, b).addresses(), ","))
		}
		t.Fatalf("no checkpoint held terraform_data.fast alone while the slow resource ran; checkpoints: %q", seen)
	}
	if !bytes.Equal(rec.last(), res.State) {
		t.Errorf("the last checkpoint is not the final state:\n%s\n---\n%s", rec.last(), res.State)
	}
	if got := strings.Join(parseState(t, rec.last()).addresses(), ","); got != "terraform_data.fast,terraform_data.slow" {
		t.Errorf("last checkpoint holds %s", got)
	}
	t.Logf("%d checkpoints", len(rec.all()))
	assertEmptyDir(t, workRoot)
}

// skipUnlessPerResourceState skips a test that needs Terraform to write its
// state file as each resource completes: observed with 1.11; older releases
// persist intermediate state only every 20 s of an apply
// (hashicorp/terraform#32680, Terraform 1.5).
func skipUnlessPerResourceState(t *testing.T, bin string) {
	t.Helper()
	out, err := exec.Command(bin, "version", "-json").Output()
	if err != nil {
		t.Fatalf("terraform version: %v", err)
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("terraform version -json: %v", err)
	}
	have, err := version.NewVersion(v.Version)
	if err != nil {
		t.Fatalf("terraform version %q: %v", v.Version, err)
	}
	if have.LessThan(version.Must(version.NewVersion("1.11.0"))) {
		t.Skipf("Terraform %s persists intermediate state only every 20 s of an apply; per-resource checkpoints are checked with 1.11+", v.Version)
	}
}
