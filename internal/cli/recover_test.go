package cli_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"github.com/kilolock/kilolock/internal/store"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	version "github.com/hashicorp/go-version"
)

// killedConfig creates fast, then slow, whose provisioner sleeps a minute:
// an apply killed during the sleep has written fast and not slow.
const killedConfig = `resource "terraform_data" "fast" {
  input = "fast"
}

resource "terraform_data" "slow" {
  input      = "slow"
  depends_on = [terraform_data.fast]

  provisioner "local-exec" {
    command = "sleep 60"
  }
}
`

// recoverDoc is `kl run show --json` (and `kl run recover --json`) with
// what recovery reads.
type recoverDoc struct {
	Verdict string `json:"verdict"`
	Text    string `json:"text"`
	Run     struct {
		ID              string `json:"id"`
		Status          string `json:"status"`
		Reason          string `json:"reason"`
		CommittedSerial int64  `json:"committed_serial"`
	} `json:"run"`
	Plan struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Reason string `json:"reason"`
	} `json:"plan"`
	Markers     []markerDoc `json:"markers"`
	Recoverable *struct {
		Artifact    string   `json:"artifact"`
		Changed     []string `json:"changed"`
		Text        string   `json:"text"`
		NextCommand string   `json:"next_command"`
	} `json:"recoverable"`
	Version *struct {
		Serial     int64    `json:"serial"`
		Changed    []string `json:"changed"`
		Provenance struct {
			Run     string `json:"run"`
			Partial bool   `json:"partial"`
		} `json:"provenance"`
	} `json:"version"`
}

func (d recoverDoc) has(role, kind string) bool {
	return slices.ContainsFunc(d.Markers, func(m markerDoc) bool { return m.Role == role && m.Kind == kind })
}

// checkpointOf reads apply run id's checkpoint artifact from the SQLite
// store (read-only, beside the running kl); nil while there is none.
func (k *kit) checkpointOf(id string) []byte {
	k.t.Helper()
	db, err := sql.Open("sqlite", "file:"+k.store+"?mode=ro")
	if err != nil {
		k.t.Fatalf("opening store: %v", err)
	}
	defer db.Close()
	var data []byte
	if err := db.QueryRow(`SELECT data FROM artifacts WHERE run = ? AND name = 'apply-checkpoint.tfstate'`, id).Scan(&data); err != nil {
		return nil
	}
	data, err = store.DecodeArtifact(nil, id, "apply-checkpoint.tfstate", data) // compressed when that pays
	if err != nil {
		return nil
	}
	return data
}

// TestKilledApplyRecover: `kl apply` (KL_LEASE=3s) is killed with SIGKILL
// while Terraform applies: fast is created, slow's provisioner sleeps.
// Before the kill, the state Terraform wrote with fast in it is stored as a
// checkpoint. Once the lease ran out:
//
//   - `kl run show` says lease-expired, that Terraform had started and
//     written fast, and names `kl run recover RUN`; the plan is failed with
//     the same hint; `kl why` says so too;
//   - `kl run recover RUN` commits a partial version holding fast, marked
//     recovered; `terraform plan` of the configuration against the pulled
//     head then creates slow only (no duplicate fast);
//   - a second recovery is refused (exit 3), as is recovering the plan.
func TestKilledApplyRecover(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cmd/kl and runs Terraform")
	}
	t.Parallel()
	k := setup(t)
	skipUnlessPerResourceState(t)
	bin := buildKL(t, k.dir)
	const state = "killed"
	dir := filepath.Join(k.dir, "config")
	write(t, filepath.Join(dir, "main.tf"), killedConfig)
	k.ok("state", "init", state)
	var plan, other planDoc
	k.jsonOf(&plan, "plan", "--state", state, "-C", dir)
	source := plan.Envelope.SourceSerial
	// B: another plan at the same serial, writing slow too.
	otherDir := filepath.Join(k.dir, "other")
	write(t, filepath.Join(otherDir, "main.tf"), `resource "terraform_data" "slow" {
  input = "other"
}
`)
	k.jsonOf(&other, "plan", "--state", state, "-C", otherDir)

	env := envWith(k.env, "KL_LEASE=3s")
	p := startKL(t, bin, k.dir, env, "apply", "--json", plan.Run.ID)
	var below []osProc // kl's descendants: terraform, its shell and sleep
	t.Cleanup(func() { killGroups(below) })
	var apply string
	var checkpoint []byte
	ready := poll(2*time.Minute, 100*time.Millisecond, func() bool {
		select {
		case <-p.exited:
			return true
		default:
		}
		if apply == "" {
			var runs runsDoc
			k.jsonOf(&runs, "runs", "--state", state)
			for _, r := range runs.Runs {
				if r.Kind == "apply" {
					apply = r.ID
				}
			}
			return false
		}
		below = descendants(p.cmd.Process.Pid)
		checkpoint = k.checkpointOf(apply)
		return checkpoint != nil && slices.ContainsFunc(below, func(q osProc) bool { return q.comm == "sleep" })
	})
	select {
	case <-p.exited:
		res := p.wait(t, time.Second)
		t.Fatalf("kl apply exited (%d) before it could be killed\nstdout:\n%s\nstderr:\n%s", res.code, res.out, res.errOut)
	default:
	}
	if !ready {
		t.Fatalf("no checkpoint of apply %q with the provisioner running (processes below kl: %+v)", apply, below)
	}
	if _, _, inputs := tfInstances(t, checkpoint); inputs["fast"] != "fast" || inputs["slow"] != "" {
		t.Fatalf("checkpoint holds %v; want fast and not slow", inputs)
	}
	var live recoverDoc
	k.jsonOf(&live, "run", "show", apply)
	if live.Run.Status != "applying" || !live.has("apply", "apply-started") || live.Recoverable != nil {
		t.Fatalf("running apply: status %s, apply-started %v, recoverable %+v; want applying, apply-started, nothing to recover yet",
			live.Run.Status, live.has("apply", "apply-started"), live.Recoverable)
	}
	// Recovering a run whose holder may still work is refused.
	if r := k.run("run", "recover", apply); r.code() != 3 || !strings.Contains(r.err.Error(), "wait for the lease") {
		t.Fatalf("kl run recover of a running apply: exit %d, %v; want 3, wait for the lease", r.code(), r.err)
	}

	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t, 30*time.Second)
	killGroups(below) // Terraform dies with kl (Pdeathsig); its provisioner's group does not
	if !poll(10*time.Second, 50*time.Millisecond, func() bool { return !slices.ContainsFunc(below, alive) }) {
		t.Fatalf("processes below the killed kl survive: %+v", below)
	}

	var story recoverDoc
	if !poll(30*time.Second, 250*time.Millisecond, func() bool {
		k.jsonOf(&story, "run", "show", apply)
		return story.Run.Status == "lease-expired"
	}) {
		t.Fatalf("the killed apply %s is %s 30 s after the kill (lease 3s)", apply, story.Run.Status)
	}
	hint := "`kl run recover " + apply + "` commits what it last wrote"
	lift := "`kl run recover " + apply + "` commits what its Terraform last wrote, or, after checking the real objects, `kl run unfence " + apply + " --reason TEXT`"
	if !strings.HasPrefix(story.Run.Reason, "lease expired mid-apply (fenced)") || !strings.Contains(story.Run.Reason, lift) || story.Run.CommittedSerial != 0 {
		t.Errorf("killed run: reason %q, committed %d; want fenced, both ways to lift the fence named, nothing committed", story.Run.Reason, story.Run.CommittedSerial)
	}
	// kl status lists it first, fenced, with the commands (ADR 0035).
	var st statusDoc
	k.jsonOf(&st, "status")
	if got := st.fences(apply); !slices.Equal(got, []string{"terraform_data.fast", "terraform_data.slow"}) || !strings.Contains(st.Fenced[0].Text, strings.ReplaceAll(lift, "`", "")) { // JSON text: code spans plain
		t.Errorf("kl status: fenced %+v; want %s fencing fast and slow, with the commands", st.Fenced, apply)
	}
	// B is refused at once, naming the fence (ADR 0035); a plan made now
	// says it is fenced.
	var refused recoverDoc
	r := k.run("apply", "--json", "--wait", "1m", other.Run.ID)
	if err := json.Unmarshal([]byte(r.out), &refused); err != nil || r.code() != 3 || refused.Run.Status != "refused" ||
		!strings.Contains(refused.Run.Reason, "run "+apply+" fences terraform_data.slow") {
		t.Errorf("kl apply of B over the fence: exit %d, %v, run %+v; want refused (3), naming the fence of %s", r.code(), err, refused.Run, apply)
	}
	var fencedPlan struct {
		Fences []struct {
			Run       string   `json:"run"`
			Addresses []string `json:"addresses"`
		} `json:"fences"`
		Next string `json:"next"`
	}
	k.jsonOf(&fencedPlan, "plan", "--state", state, "-C", otherDir)
	if len(fencedPlan.Fences) != 1 || fencedPlan.Fences[0].Run != apply || !slices.Equal(fencedPlan.Fences[0].Addresses, []string{"terraform_data.slow"}) || fencedPlan.Next != "" {
		t.Errorf("kl plan over the fence: fences %+v, next %q; want the fence of %s on slow, no apply command", fencedPlan.Fences, fencedPlan.Next, apply)
	}
	// Lifting without a reason is refused; the fence stands.
	if r := k.run("run", "unfence", apply); r.code() != 1 || !strings.Contains(r.err.Error(), "--reason is required") {
		t.Errorf("kl run unfence without --reason: exit %d, %v; want 1, --reason is required", r.code(), r.err)
	}
	if story.Plan.Status != "failed" || !strings.Contains(story.Plan.Reason, hint) || !strings.Contains(story.Plan.Reason, "Terraform had started applying") {
		t.Errorf("plan: %s, %q; want failed, naming the recovery", story.Plan.Status, story.Plan.Reason)
	}
	if rec := story.Recoverable; rec == nil || rec.Artifact != "apply-checkpoint.tfstate" || !slices.Equal(rec.Changed, []string{"terraform_data.fast"}) ||
		rec.NextCommand != "kl run recover "+apply {
		t.Fatalf("recoverable = %+v; want fast from the checkpoint", rec)
	}
	text := k.ok("run", "show", apply)
	t.Logf("kl run show of the killed apply:\n%s", text)
	if want := "Terraform had written 1 resource when it stopped: kl run recover " + apply; !strings.Contains(text, want) {
		t.Errorf("kl run show does not say %q:\n%s", want, text)
	}
	var why struct {
		Verdict     string          `json:"verdict"`
		Recoverable json.RawMessage `json:"recoverable"`
		Decisive    []markerDoc     `json:"decisive"`
	}
	k.jsonOf(&why, "why", apply)
	if len(why.Recoverable) == 0 || !slices.ContainsFunc(why.Decisive, func(m markerDoc) bool { return m.Kind == "apply-started" }) {
		t.Errorf("kl why: recoverable %s, decisive %+v; want both the recoverable and apply-started", why.Recoverable, why.Decisive)
	}

	// The killed run left its work dir (its snapshot and plan: secrets);
	// kl run recover, which runs no Terraform, removes it once committed.
	workDir := filepath.Join(k.dir, "runs", apply)
	if _, err := os.Stat(workDir); err != nil {
		t.Fatalf("the killed apply left no work dir %s: %v", workDir, err)
	}
	var rec recoverDoc
	k.jsonOf(&rec, "run", "recover", apply)
	if _, err := os.Stat(workDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("work dir %s after kl run recover: %v; want removed", workDir, err)
	}
	if rec.Run.Status != "lease-expired" || rec.Run.CommittedSerial != source+1 || rec.Version == nil || !rec.Version.Provenance.Partial ||
		rec.Version.Provenance.Run != apply || !slices.Equal(rec.Version.Changed, []string{"terraform_data.fast"}) || !rec.has("apply", "recovered") ||
		rec.Recoverable != nil {
		t.Fatalf("kl run recover: run %+v, version %+v, recovered marker %v, recoverable %+v; want version %d holding fast, partial",
			rec.Run, rec.Version, rec.has("apply", "recovered"), rec.Recoverable, source+1)
	}
	if !strings.Contains(rec.Text, "kl run recover committed what Terraform had written (version") {
		t.Errorf("verdict after recovery: %q", rec.Text)
	}
	// The recovery lifted the fence, and says so (not "released"); the
	// run's end no longer says its addresses stay fenced.
	if strings.Contains(rec.Run.Reason, "stay fenced") || !strings.Contains(rec.Run.Reason, "lifted by its recovery") {
		t.Errorf("the recovered run's reason still says the fence stands: %q", rec.Run.Reason)
	}
	k.jsonOf(&st, "status")
	if len(st.Fenced) != 0 || !rec.has("apply", "fence-lifted") || rec.has("apply", "released") {
		t.Errorf("after kl run recover: fenced %+v, fence-lifted %v, released %v; want no fence, fence-lifted, no released",
			st.Fenced, rec.has("apply", "fence-lifted"), rec.has("apply", "released"))
	}
	if r := k.run("run", "unfence", apply, "--reason", "checked"); r.code() != 3 || !strings.Contains(r.err.Error(), "holds no fence") {
		t.Errorf("kl run unfence after the recovery: exit %d, %v; want 3, holds no fence", r.code(), r.err)
	}
	t.Logf("kl why after recovery:\n%s", k.ok("why", apply))

	// The head holds what Terraform did: planning the configuration
	// against it creates slow only.
	head := []byte(k.ok("state", "pull", state))
	check := filepath.Join(k.dir, "check")
	write(t, filepath.Join(check, "main.tf"), killedConfig)
	write(t, filepath.Join(check, "terraform.tfstate"), string(head))
	k.terraform(check, "init", "-input=false", "-no-color")
	k.terraform(check, "plan", "-input=false", "-no-color", "-lock=false", "-out=check.tfplan")
	var tfPlan struct {
		ResourceChanges []struct {
			Address string `json:"address"`
			Change  struct {
				Actions []string `json:"actions"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal(k.terraform(check, "show", "-json", "check.tfplan"), &tfPlan); err != nil {
		t.Fatal(err)
	}
	var changes []string
	for _, rc := range tfPlan.ResourceChanges {
		if !slices.Equal(rc.Change.Actions, []string{"no-op"}) {
			changes = append(changes, rc.Address+" "+strings.Join(rc.Change.Actions, ","))
		}
	}
	if !slices.Equal(changes, []string{"terraform_data.slow create"}) {
		t.Fatalf("terraform plan against the recovered head: %v; want only terraform_data.slow created", changes)
	}

	// With the fence lifted, B applies: A's slow never got into any state.
	k.ok("apply", other.Run.ID)

	// Exactly once; never a plan.
	if r := k.run("run", "recover", apply); r.code() != 3 || !strings.Contains(r.err.Error(), "committed version") {
		t.Errorf("second kl run recover: exit %d, %v; want 3, committed already", r.code(), r.err)
	}
	if r := k.run("run", "recover", plan.Run.ID); r.code() != 3 || !strings.Contains(r.err.Error(), "plan run") {
		t.Errorf("kl run recover of the plan: exit %d, %v; want 3, a plan run", r.code(), r.err)
	}
}

// TestApplyNoChanges: `kl apply` of a plan without changes exits 0 and
// says nothing was applied or committed; the head stays.
func TestApplyNoChanges(t *testing.T) {
	t.Parallel()
	k := setup(t)
	dir := filepath.Join(k.dir, "config")
	write(t, filepath.Join(dir, "main.tf"), "resource \"terraform_data\" \"a\" {\n  input = \"a\"\n}\n")
	k.ok("state", "init", "s")
	var first planDoc
	k.jsonOf(&first, "plan", "--state", "s", "-C", dir)
	k.ok("apply", first.Run.ID)
	var again planDoc
	k.jsonOf(&again, "plan", "--state", "s", "-C", dir)
	out := k.ok("apply", again.Run.ID)
	if !strings.Contains(out, "applied: the plan has no changes: nothing applied, nothing committed") {
		t.Fatalf("kl apply of a plan without changes:\n%s", out)
	}
	var story recoverDoc
	k.jsonOf(&story, "run", "show", again.Run.ID)
	if story.Plan.Status != "applied" || story.Version != nil || story.has("apply", "apply-started") || story.has("apply", "reserved") {
		t.Fatalf("story: plan %s, version %+v, markers %+v; want applied, nothing committed, nothing reserved or started", story.Plan.Status, story.Version, story.Markers)
	}
	if _, _, inputs := tfInstances(t, []byte(k.ok("state", "pull", "s"))); inputs["a"] != "a" {
		t.Fatalf("head = %v", inputs)
	}
}

// skipUnlessPerResourceState skips a test that needs Terraform (the one on
// PATH) to write its state file as each resource completes: observed with
// 1.11; older releases persist intermediate state only every 20 s of an
// apply (hashicorp/terraform#32680, Terraform 1.5).
func skipUnlessPerResourceState(t *testing.T) {
	t.Helper()
	out, err := exec.Command("terraform", "version", "-json").Output()
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
		t.Skipf("Terraform %s persists intermediate state only every 20 s of an apply; checkpoints of a killed apply are checked with 1.11+", v.Version)
	}
}
