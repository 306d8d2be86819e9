package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// sessionConfig is the root module of the scripted session: three
// terraform_data resources (no provider download). app and db depend on net
// (so a plan that changes them reads net); changing var.app_pause replaces
// app, whose provisioner then sleeps that long — a slow apply that holds its
// reservations while another waits.
const sessionConfig = `variable "greeting" {
  type    = string
  default = "hello"
}

variable "net" {
  type    = string
  default = "net-v1"
}

variable "app_pause" {
  type    = number
  default = 0
}

resource "terraform_data" "net" {
  input = var.net
}

resource "terraform_data" "app" {
  input            = var.greeting
  triggers_replace = var.app_pause
  depends_on       = [terraform_data.net]

  provisioner "local-exec" {
    command = "sleep ${var.app_pause}"
  }
}

resource "terraform_data" "db" {
  input      = "db"
  depends_on = [terraform_data.net]
}

output "app" {
  value = terraform_data.app.output
}
`

// adoptConfig is applied with plain Terraform to make a real state file to
// adopt; adoptConfigV2 is then planned with it for `kl footprint`.
const (
	adoptConfig = `resource "terraform_data" "legacy" {
  input = "v1"
}
`
	adoptConfigV2 = `resource "terraform_data" "legacy" {
  input = "v2"
}

resource "terraform_data" "extra" {
  input = terraform_data.legacy.output
}
`
)

// TestSession drives every kl command end to end through cli.Run, with a
// temp SQLite store and real Terraform, and compares each text and JSON
// view with its golden file (testdata/<command>.txt|.json; -update).
//
// The story: prod is planned and applied (P1, A1); four plans are made on
// version 1 — P2 replaces app slowly (reads net), P3 targets net, P4
// replaces db (reads net), P5 replaces app; A2 applies P2 while A3 applies
// P3 with --wait and waits on A2's read reservation of net; then A4 applies
// P4 with --strict-since-plan (refused: A3 changed net, which P4 reads) and
// A5 applies P5 (refused: A2 changed app, which P5 writes).
func TestSession(t *testing.T) {
	t.Parallel()
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), sessionConfig)
	slowVars := filepath.Join(k.dir, "vars", "slow.tfvars")
	write(t, slowVars, "greeting  = \"hi\"\napp_pause = 3\n")
	netVars := filepath.Join(k.dir, "vars", "net-v2.tfvars")
	write(t, netVars, "net = \"net-v2\"\n")

	// A real Terraform state, and a `terraform show -json` plan against it.
	adopt := filepath.Join(k.dir, "adopt")
	write(t, filepath.Join(adopt, "main.tf"), adoptConfig)
	k.terraform(adopt, "init", "-input=false")
	k.terraform(adopt, "apply", "-auto-approve", "-input=false")
	tfstate := filepath.Join(adopt, "terraform.tfstate")
	write(t, filepath.Join(adopt, "main.tf"), adoptConfigV2)
	k.terraform(adopt, "plan", "-input=false", "-out=plan.tfplan")
	showJSON := filepath.Join(adopt, "plan.json")
	write(t, showJSON, string(k.terraform(adopt, "show", "-json", "plan.tfplan")))

	t.Run("state init", func(t *testing.T) {
		k := k.with(t)
		k.golden("state-init.txt", k.ok("state", "init", "prod"))
		k.golden("state-init.json", k.ok("state", "init", "staging", "--json"))
		k.golden("state-init-from.txt", k.ok("state", "init", "adopted", "--from", tfstate))
		doc, err := os.ReadFile(tfstate)
		if err != nil {
			t.Fatal(err)
		}
		// The same Terraform state under a second name would fork it.
		var adopted tfState
		readJSON(t, tfstate, &adopted)
		r := k.runWith(nil, string(doc), "state", "init", "twin", "--from", "-")
		if want := "state adopted already has lineage " + adopted.Lineage + ": adopting the same Terraform state twice would fork it; use adopted"; r.err == nil ||
			!strings.Contains(r.err.Error(), want) || r.out != "" {
			t.Errorf("state init twin --from the adopted file: err %v, stdout %q; want %q, nothing printed", r.err, r.out, want)
		}
		// A copy with a lineage of its own is another state.
		doc = []byte(strings.Replace(string(doc), adopted.Lineage, "6f1d2c3b-4a5e-4f60-8172-93a4b5c6d7e8", 1))
		r = k.runWith(nil, string(doc), "state", "init", "adopted-stdin", "--from", "-", "--json")
		if r.err != nil {
			t.Fatalf("state init --from -: %v", r.err)
		}
		quiet(t, nil, r)
		k.golden("state-init-from.json", r.out)
	})

	t.Run("state list", func(t *testing.T) {
		k := k.with(t)
		k.golden("state-list.txt", k.ok("state", "list"))
		k.golden("state-list.json", k.ok("state", "list", "--json"))
	})

	t.Run("state pull", func(t *testing.T) {
		k := k.with(t)
		var want, got tfState
		readJSON(t, tfstate, &want)
		if err := json.Unmarshal([]byte(k.ok("state", "pull", "adopted")), &got); err != nil {
			t.Fatalf("state pull: not a state: %v", err)
		}
		if got.Version != 4 || got.Lineage != want.Lineage || got.Serial != want.Serial || len(got.Resources) != 1 {
			t.Errorf("state pull adopted: version %d lineage %s serial %d, %d resources; want 4, %s, %d, 1",
				got.Version, got.Lineage, got.Serial, len(got.Resources), want.Lineage, want.Serial)
		}

		out := filepath.Join(k.dir, "pulled", "adopted.tfstate")
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		if s := k.ok("state", "pull", "adopted", "-o", out); s != "" {
			t.Errorf("state pull -o wrote to stdout: %q", s)
		}
		fi, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("state pull -o: mode %v, want 0600 (a state holds secrets)", fi.Mode().Perm())
		}
		var file tfState
		readJSON(t, out, &file)
		if file.Lineage != want.Lineage {
			t.Errorf("state pull -o: lineage %s, want %s", file.Lineage, want.Lineage)
		}

		var empty tfState
		if err := json.Unmarshal([]byte(k.ok("state", "pull", "prod", "--serial", "0")), &empty); err != nil {
			t.Fatal(err)
		}
		if empty.Version != 4 || empty.Serial != 0 || len(empty.Resources) != 0 {
			t.Errorf("state pull prod --serial 0: %+v, want an empty v4 state at serial 0", empty)
		}

		r := k.run("state", "pull", "prod", "--serial", "7")
		if r.err == nil || !strings.Contains(r.err.Error(), "state prod has no version 7 (head is 0)") || r.out != "" {
			t.Errorf("state pull --serial 7: err %v, stdout %q; want \"state prod has no version 7 (head is 0)\", nothing printed", r.err, r.out)
		}
	})

	t.Run("footprint", func(t *testing.T) {
		k := k.with(t)
		k.golden("footprint-show.txt", k.ok("footprint", showJSON))
		k.golden("footprint-show.json", k.ok("footprint", showJSON, "--config-dir", adopt, "--json"))
		fixture := "../terraform/testdata/terraform-json/output_depends_on/plan.json"
		k.golden("footprint-fixture.txt", k.ok("footprint", fixture))
		k.golden("footprint-fixture.json", k.ok("footprint", fixture, "--json"))

		// Plans whose configuration plan JSON does not hold whole (real
		// plans: terraform/testdata/plans/README.md): a dynamic block's
		// trace widens, the root not read makes the read set unverified;
		// a remote module's directory missing from the config dir widens
		// to its prefix.
		k.golden("footprint-dynamic.txt", k.ok("footprint", "../terraform/testdata/plans/dynamic_block_update/plan.json"))
		k.golden("footprint-remote-module.txt", k.ok("footprint", "../terraform/testdata/plans/remote_module/plan.json"))
		k.golden("footprint-remote-module.json", k.ok("footprint", "../terraform/testdata/plans/remote_module/plan.json",
			"--config-dir", "../terraform/testdata/plans/remote_module", "--json"))
		r := k.run("footprint", fixture, "--config-dir", filepath.Join(t.TempDir(), "nope"))
		if r.code() != 1 || r.err == nil || !strings.Contains(r.err.Error(), "reading plan "+fixture+": config dir: stat ") || r.out != "" {
			t.Errorf("footprint --config-dir of a missing dir: exit %d, err %v, stdout %q; want exit 1 naming the config dir", r.code(), r.err, r.out)
		}

		r = k.run("footprint", "../terraform/testdata/terraform-json/invalid/plan.json")
		if r.code() == 0 || !strings.Contains(r.err.Error(), "reading plan ../terraform/testdata/terraform-json/invalid/plan.json: parsing plan JSON: malformed JSON at line 676") || r.out != "" {
			t.Errorf("footprint invalid/plan.json: exit %d, err %v, stdout %q; want a non-zero exit naming the file and the malformed JSON", r.code(), r.err, r.out)
		}
	})

	var p1, p2, p3, p4, p5 string
	t.Run("plan and apply", func(t *testing.T) {
		k := k.with(t)
		// Output to a buffer is not a terminal: the report and nothing else
		// (not even a log line: this plan and apply give no warning).
		plan := k.run("plan", "--state", "prod", "-C", cfg)
		p1 = reULID.FindString(plan.out)
		apply := k.run("apply", p1)
		for _, r := range []result{plan, apply} {
			if r.err != nil || r.errOut != "" {
				t.Fatalf("kl plan/apply: err %v, stderr %q; want success and nothing on stderr", r.err, r.errOut)
			}
		}
		k.golden("plan.txt", plan.out)
		k.golden("apply.txt", apply.out)
	})

	t.Run("plans on version 1", func(t *testing.T) {
		k := k.with(t)
		out := k.ok("plan", "--state", "prod", "-C", cfg, "--var-file", slowVars, "--json")
		k.golden("plan-var-file.json", out)
		p2 = reULID.FindString(out)
		out = k.ok("plan", "--state", "prod", "-C", cfg, "--var-file", netVars, "--target", "terraform_data.net")
		k.golden("plan-target.txt", out)
		p3 = reULID.FindString(out)
		out = k.ok("plan", "--state", "prod", "-C", cfg, "--replace", "terraform_data.db", "--json")
		k.golden("plan-replace.json", out)
		p4 = reULID.FindString(out)
		out = k.ok("plan", "--state", "prod", "-C", cfg, "--replace", "terraform_data.app")
		k.golden("plan-replace.txt", out)
		p5 = reULID.FindString(out)
		// kl plan always reads the configuration: never unverified.
		for _, p := range []string{p2, p3, p4, p5} {
			if out := k.ok("run", "show", p, "--json"); strings.Contains(out, `"unverified"`) {
				t.Errorf("kl run show %s: the plan's footprint is unverified; kl plan always reads the configuration", p)
			}
		}
	})

	t.Run("apply --wait", func(t *testing.T) {
		k := k.with(t)
		var wg sync.WaitGroup
		var a2, a3 result
		wg.Add(1)
		go func() {
			defer wg.Done()
			a2 = k.run("apply", p2, "--json")
		}()
		k.waitStatus(t, func(s statusDoc) bool { return s.has("applying", 2) })
		wg.Add(1)
		go func() {
			defer wg.Done()
			a3 = k.run("apply", p3, "--wait", "1m")
		}()
		// While A2 applies, A3 waits on it: what `kl status` shows.
		active := k.waitStatus(t, statusDoc.waits)
		text := k.ok("status")
		if !strings.Contains(text, "waits on") {
			t.Fatalf("kl status (text) no longer shows the wait the JSON showed; A2 finished too early?\n%s", text)
		}
		k.golden("status-active.json", active)
		k.golden("status-active.txt", text)
		wg.Wait()
		for name, r := range map[string]result{"A2": a2, "A3 --wait": a3} {
			if r.err != nil {
				t.Fatalf("apply %s: %v\nstderr:\n%s", name, r.err, r.errOut)
			}
			quiet(t, []string{"apply", name}, r)
		}
		k.golden("apply.json", a2.out)
		k.golden("apply-wait.txt", a3.out)
	})

	t.Run("apply refused", func(t *testing.T) {
		k := k.with(t)
		k.golden("apply-strict.json", k.refused("plan input or planned target changed (strict since-plan)",
			"apply", p4, "--strict-since-plan", "--json"))
		k.golden("apply-refused.txt", k.refused("is stale: planned target changed", "apply", p5))
	})

	t.Run("history", func(t *testing.T) {
		k := k.with(t)
		k.golden("history-state.txt", k.ok("history", "--state", "prod"))
		k.golden("history-state.json", k.ok("history", "--state", "prod", "--json"))
		k.golden("history-since-plan.txt", k.ok("history", "--since-plan", p4))
		k.golden("history-since-plan.json", k.ok("history", "--since-plan", p4, "--json"))
		// A page below the head still says where the head is, and how to
		// go on.
		page := k.ok("history", "--state", "prod", "--limit", "2", "--before", "3")
		k.golden("history-page.txt", page)
		var doc historyPageDoc
		k.jsonOf(&doc, "history", "--state", "prod", "--limit", "2", "--before", "3")
		if doc.HeadSerial != 3 || len(doc.Entries) != 2 || doc.Entries[0].Version.Serial != 2 || doc.NextBefore != 1 ||
			doc.NextCommand != "kl history --state prod --before 1" {
			t.Errorf("history --limit 2 --before 3 --json: %+v; want head 3, versions 2 and 1, next --before 1", doc)
		}
		doc = historyPageDoc{}
		k.jsonOf(&doc, "history", "--state", "prod", "--before", "2")
		if doc.HeadSerial != 3 || len(doc.Entries) != 2 || doc.NextBefore != 0 || doc.NextCommand != "" {
			t.Errorf("history --before 2 --json: %+v; want head 3, versions 1 and 0, no next page", doc)
		}
	})

	t.Run("runs", func(t *testing.T) {
		k := k.with(t)
		k.golden("runs.txt", k.ok("runs", "--state", "prod"))
		k.golden("runs.json", k.ok("runs", "--state", "prod", "--json"))
		k.golden("runs-page.txt", k.ok("runs", "--state", "prod", "--limit", "3"))
		var all, first, next struct {
			NextBefore  string `json:"next_before"`
			NextCommand string `json:"next_command"`
			Runs        []struct {
				ID string `json:"id"`
			} `json:"runs"`
		}
		k.jsonOf(&all, "runs", "--state", "prod")
		k.jsonOf(&first, "runs", "--state", "prod", "--limit", "3")
		if len(first.Runs) != 3 || first.NextBefore != first.Runs[2].ID || first.NextCommand != "kl runs --state prod --before "+first.Runs[2].ID {
			t.Fatalf("runs --limit 3 --json: %+v; want 3 runs and the next page from the third", first)
		}
		k.jsonOf(&next, strings.Fields(first.NextCommand)[1:]...)
		if len(next.Runs) == 0 || next.Runs[0].ID != all.Runs[3].ID {
			t.Errorf("the next page starts at %+v, want run %s", next.Runs, all.Runs[3].ID)
		}
		if all.NextBefore != "" || all.NextCommand != "" {
			t.Errorf("runs --json with every run shown: next %q %q, want none", all.NextBefore, all.NextCommand)
		}
	})

	t.Run("run show and why", func(t *testing.T) {
		k := k.with(t)
		a3 := k.applyOf(p3)
		a5 := k.applyOf(p5)
		k.golden("run-show.txt", k.ok("run", "show", a3))
		k.golden("run-show.json", k.ok("run", "show", a3, "--json"))
		k.golden("why.txt", k.ok("why", a3))
		k.golden("why.json", k.ok("why", a3, "--json"))
		k.golden("why-refused.txt", k.ok("why", a5))
		k.golden("why-refused.json", k.ok("why", a5, "--json"))
	})

	t.Run("status", func(t *testing.T) {
		k := k.with(t)
		out := k.ok("status", "--json")
		var s statusDoc
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatal(err)
		}
		if len(s.Active) != 0 {
			t.Errorf("status after the session: %d active runs, want none", len(s.Active))
		}
		k.golden("status.json", out)
		k.golden("status.txt", k.ok("status"))
	})
}

// tfState is the part of a Terraform state v4 document the tests read.
// historyPageDoc is what the paging tests read of a kilolock/history/v3
// document.
type historyPageDoc struct {
	HeadSerial  int64  `json:"head_serial"`
	NextBefore  int64  `json:"next_before"`
	NextCommand string `json:"next_command"`
	Entries     []struct {
		Version struct {
			Serial int64 `json:"serial"`
		} `json:"version"`
	} `json:"entries"`
}

type tfState struct {
	Version   int               `json:"version"`
	Serial    int64             `json:"serial"`
	Lineage   string            `json:"lineage"`
	Resources []json.RawMessage `json:"resources"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// statusDoc is the part of `kl status --json` the tests read.
type statusDoc struct {
	Active []struct {
		Run struct {
			ID     string `json:"id"`
			Kind   string `json:"kind"`
			Status string `json:"status"`
		} `json:"run"`
		Write     []string          `json:"write"`
		Read      []string          `json:"read"`
		WaitingOn []json.RawMessage `json:"waiting_on"`
	} `json:"active"`
	Fenced []struct {
		Run struct {
			ID string `json:"id"`
		} `json:"run"`
		Fences []string `json:"fences"`
		Text   string   `json:"text"`
	} `json:"fenced"`
}

// fences returns what run id fences in s (nil: it is not fenced).
func (s statusDoc) fences(id string) []string {
	for _, f := range s.Fenced {
		if f.Run.ID == id {
			return f.Fences
		}
	}
	return nil
}

// waits reports whether an active run is waiting on another: its waited
// marker is recorded (a new apply run is "waiting" before its first try).
func (s statusDoc) waits() bool {
	for _, a := range s.Active {
		if a.Run.Status == "waiting" && len(a.WaitingOn) > 0 {
			return true
		}
	}
	return false
}

// has reports whether an active run has status and holds at least holds
// reservations.
func (s statusDoc) has(status string, holds int) bool {
	for _, a := range s.Active {
		if a.Run.Status == status && len(a.Write)+len(a.Read) >= holds {
			return true
		}
	}
	return false
}

// waitStatus polls `kl status --json` until cond holds (at most 30 s) and
// returns that output.
func (k *kit) waitStatus(t *testing.T, cond func(statusDoc) bool) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := k.ok("status", "--json")
		var s statusDoc
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatal(err)
		}
		if cond(s) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("kl status never reached the expected state; last:\n%s", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// applyOf returns the apply run that claimed plan run id.
func (k *kit) applyOf(plan string) string {
	k.t.Helper()
	var doc struct {
		Runs []struct {
			ID      string `json:"id"`
			PlanRun string `json:"plan_run"`
		} `json:"runs"`
	}
	k.jsonOf(&doc, "runs", "--limit", "100")
	for _, r := range doc.Runs {
		if r.PlanRun == plan {
			return r.ID
		}
	}
	k.t.Fatalf("no apply run of plan %s", plan)
	return ""
}
