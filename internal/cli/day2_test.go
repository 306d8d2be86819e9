package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// day2Config has what the day-2 commands touch: a counted resource, a
// for_each resource, a counted module, and outputs of every shape
// `terraform output` prints differently — one sensitive.
const day2Config = `resource "terraform_data" "a" {
  count = 2
  input = "a${count.index}"
}

resource "terraform_data" "b" {
  for_each = toset(["x", "y"])
  input    = each.key
}

module "app" {
  source = "./mod"
  count  = 2
}

output "plain" {
  value = terraform_data.a[0].output
}

output "number" {
  value = 12345678901234567890
}

output "multi" {
  value = "line1\nline2"
}

output "list" {
  value = tolist(["q", "p"])
}

output "set" {
  value = toset(["q", "p"])
}

output "map" {
  value = tomap({ x = 1, y = 2 })
}

output "object" {
  value = { k = "v\"q", n = [1, true], nested = "x\ny", empty = {} }
}

output "secret" {
  value     = "s3cr3t-value"
  sensitive = true
}
`

// day2Setup is a kit whose state prod holds day2Config applied (version
// 1), and the configuration's directory.
func day2Setup(t *testing.T) (*kit, string) {
	t.Helper()
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), day2Config)
	write(t, filepath.Join(cfg, "mod", "main.tf"), "resource \"terraform_data\" \"c\" {\n  input = \"c\"\n}\n")
	k.ok("state", "init", "prod")
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg)))
	return k, cfg
}

// terraformOutput runs `terraform output ARGS` on doc (a state file in a
// directory of its own) and returns stdout.
func (k *kit) terraformOutput(doc string, args ...string) string {
	k.t.Helper()
	dir := k.t.TempDir()
	write(k.t, filepath.Join(dir, "terraform.tfstate"), doc)
	return string(k.terraform(dir, append([]string{"output", "-no-color"}, args...)...))
}

// TestStateOutput: kl state output prints what terraform output prints
// for the same state — all outputs, one output, -raw, -json's object —
// except that a sensitive value is printed only with --raw of that output
// (terraform output NAME and -json print it); bad input names the
// problem.
func TestStateOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	k, _ := day2Setup(t)
	kl, printed := k.recording(nil)
	doc := kl("state", "pull", "prod")
	printed.Reset()

	if got, want := kl("state", "output", "prod"), k.terraformOutput(doc); got != want {
		t.Errorf("kl state output prod:\n%s\nwant terraform output's:\n%s", got, want)
	}
	for _, name := range []string{"plain", "number", "multi", "list", "set", "map", "object"} {
		if got, want := kl("state", "output", "prod", name), k.terraformOutput(doc, name); got != want {
			t.Errorf("kl state output prod %s:\n%s\nwant terraform output's:\n%s", name, got, want)
		}
	}
	for _, name := range []string{"plain", "number", "multi"} {
		if got, want := kl("state", "output", "prod", name, "--raw"), k.terraformOutput(doc, "-raw", name); got != want {
			t.Errorf("kl state output prod %s --raw = %q, want terraform output -raw's %q", name, got, want)
		}
	}
	if got := kl("state", "output", "prod", "secret"); got != "<sensitive>\n" {
		t.Errorf("kl state output prod secret = %q, want <sensitive> (masked without --raw)", got)
	}

	// --json: the document's "outputs" is terraform output -json's object,
	// the sensitive output without its value.
	var got struct {
		Schema  string                    `json:"schema"`
		Serial  int64                     `json:"serial"`
		Outputs map[string]map[string]any `json:"outputs"`
	}
	k.jsonOf(&got, "state", "output", "prod")
	var want map[string]map[string]any
	if err := json.Unmarshal([]byte(k.terraformOutput(doc, "-json")), &want); err != nil {
		t.Fatal(err)
	}
	delete(want["secret"], "value")
	if got.Schema != "kilolock/state-output/v1" || got.Serial != 1 || !reflect.DeepEqual(got.Outputs, want) {
		t.Errorf("kl state output --json: schema %s serial %d outputs %v\nwant kilolock/state-output/v1, 1, %v", got.Schema, got.Serial, got.Outputs, want)
	}
	if strings.Contains(printed.String(), "s3cr3t-value") {
		t.Errorf("a sensitive value was printed without --raw:\n%s", printed)
	}
	if got := kl("state", "output", "prod", "secret", "--raw"); got != "s3cr3t-value" {
		t.Errorf("kl state output prod secret --raw = %q, want the value", got)
	}
	k.golden("state-output.txt", kl("state", "output", "prod", "--serial", "1"))

	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"an unknown output":   {[]string{"prod", "nope"}, `version 1 of state prod has no output "nope" (its outputs: list, map, multi, number, object, plain, secret, set)`},
		"--raw of no output":  {[]string{"prod", "--raw"}, "--raw prints one output: name it"},
		"--raw and --json":    {[]string{"prod", "plain", "--raw", "--json"}, "--raw and --json: choose one"},
		"--raw of an object":  {[]string{"prod", "object", "--raw"}, `output "object" is an object: --raw prints strings, numbers and bools only; use --json`},
		"an unknown version":  {[]string{"prod", "--serial", "9"}, "state prod has no version 9 (head is 1)"},
		"an unknown state":    {[]string{"nope"}, `state "nope" does not exist`},
		"too many arguments":  {[]string{"prod", "a", "b"}, "accepts between 1 and 2 arg(s)"},
		"no state":            {nil, "accepts between 1 and 2 arg(s)"},
		"a bad serial number": {[]string{"prod", "--serial", "x"}, `invalid argument "x" for "--serial"`},
	} {
		r := k.run(append([]string{"state", "output"}, tc.args...)...)
		if strings.Contains(name, "--json") && r.out != "" {
			r.out = "" // the kilolock/error/v1 document (TestJSONErrorDocument)
		}
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) || r.out != "" {
			t.Errorf("%s: err %v, stdout %q; want an error saying %q and nothing printed", name, r.err, r.out, tc.want)
		}
	}
}

// TestDay2Operations is issue 14 §6 through kl with real Terraform: state
// rm, state mv, rollback and push each commit a version with the actor,
// the operation and the reason in kl history; an open plan whose write
// set a state rm changed is refused as stale naming it; what they write is
// a state Terraform reads (terraform state list, and no changes planned
// after the rollback); bad input is refused naming the problem, and
// changes nothing.
func TestDay2Operations(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	k, cfg := day2Setup(t)
	v1 := k.ok("state", "pull", "prod")
	// An open plan at version 1 that changes terraform_data.a.
	changed := filepath.Join(k.dir, "changed")
	write(t, filepath.Join(changed, "main.tf"), strings.Replace(day2Config, `"a${count.index}"`, `"A${count.index}"`, 1))
	write(t, filepath.Join(changed, "mod", "main.tf"), "resource \"terraform_data\" \"c\" {\n  input = \"c\"\n}\n")
	open := reULID.FindString(k.ok("plan", "--state", "prod", "-C", changed))

	rm := k.runWith(append(append([]string(nil), k.env...), "KL_ACTOR=bob"), "", "state", "rm", "prod", "terraform_data.a[1]", "--reason", "deleted by hand")
	if rm.err != nil {
		t.Fatalf("kl state rm: %v\n%s", rm.err, rm.errOut)
	}
	k.golden("state-rm.txt", rm.out)
	rmRun := reULID.FindString(rm.out)
	if got := stateList(t, k, "prod"); got != `terraform_data.a[0] terraform_data.b["x"] terraform_data.b["y"] module.app[0].terraform_data.c module.app[1].terraform_data.c` {
		t.Errorf("terraform state list after kl state rm: %s", got)
	}

	t.Run("an open plan the state rm made stale is refused naming it", func(t *testing.T) {
		k := k.with(t)
		out := k.refused("version 2 (run "+rmRun+") changed terraform_data.a", "apply", open)
		if want := "stale plan: version 2 (a state rm), by run " + rmRun + " (bob), changed planned target terraform_data.a"; !strings.Contains(out, want) {
			t.Errorf("kl apply of the stale plan does not say %q:\n%s", want, out)
		}
		sp := k.ok("history", "--since-plan", open)
		if !strings.Contains(sp, "run "+rmRun+" (bob), a state rm") {
			t.Errorf("kl history --since-plan does not name the state rm:\n%s", sp)
		}
	})

	mv := k.ok("state", "mv", "prod", "module.app[0]", "module.solo", "--json")
	k.golden("state-mv.json", mv)
	if got := stateList(t, k, "prod"); !strings.Contains(got, "module.solo.terraform_data.c") || strings.Contains(got, "module.app[0]") {
		t.Errorf("terraform state list after kl state mv: %s", got)
	}

	rb := k.ok("state", "rollback", "prod", "--to", "1", "--reason", "undo the edits")
	if !strings.Contains(rb, "committed version 4 of prod: rollback to version 1") {
		t.Errorf("kl state rollback says:\n%s", rb)
	}
	var head tfState
	if err := json.Unmarshal([]byte(k.ok("state", "pull", "prod")), &head); err != nil {
		t.Fatal(err)
	}
	var first tfState
	if err := json.Unmarshal([]byte(v1), &first); err != nil {
		t.Fatal(err)
	}
	if head.Serial != 4 || head.Lineage != first.Lineage || !reflect.DeepEqual(head.Resources, first.Resources) {
		t.Errorf("after the rollback: serial %d lineage %s; want serial 4, lineage %s and version 1's resources", head.Serial, head.Lineage, first.Lineage)
	}
	if out, code := planOn(t, k, cfg, k.ok("state", "pull", "prod")); code != 0 {
		t.Errorf("terraform plan of the applied configuration against the rolled-back head: exit %d, want 0 (no changes)\n%s", code, out)
	}

	t.Run("push", func(t *testing.T) {
		k := k.with(t)
		v2 := filepath.Join(k.dir, "v2.tfstate")
		write(t, v2, k.ok("state", "pull", "prod", "--serial", "2"))
		k.refused("the document's serial 2 is below the head's 4", "state", "push", "prod", v2)
		out := k.ok("state", "push", "prod", v2, "--force", "--reason", "the state before the move")
		if !strings.Contains(out, "committed version 5 of prod: push of a document at serial 2 (--force: not above the head's serial)") {
			t.Errorf("kl state push --force says:\n%s", out)
		}
		same := filepath.Join(k.dir, "head.tfstate")
		write(t, same, k.ok("state", "pull", "prod"))
		if out := k.ok("state", "push", "prod", same); !strings.Contains(out, "nothing to commit: the head of prod (version 5) already holds what this push would write") {
			t.Errorf("kl state push of the head says:\n%s", out)
		}
	})

	hist := k.ok("history", "--state", "prod", "--json")
	k.golden("history-day2.json", hist)
	text := k.ok("history", "--state", "prod")
	for _, want := range []string{
		"version 5 · TIME · push of a document at serial 2 (--force: not above the head's serial)",
		"version 4 · TIME · rollback to version 1",
		"version 3 · TIME · state mv of module.app[0] to module.solo (1 resource instance)",
		"version 2 · TIME · state rm of 1 resource instance",
	} {
		if !strings.Contains(k.norm.normalize(text), want) {
			t.Errorf("kl history does not say %q:\n%s", want, text)
		}
	}
	if !strings.Contains(text, "by       run "+rmRun+" (bob)\n  changed  terraform_data.a (1 resource)\n  reason   deleted by hand\n") {
		t.Errorf("kl history does not give version 2's actor and reason:\n%s", text)
	}
	if why := k.ok("why", rmRun); !strings.Contains(why, "asked state rm of terraform_data.a[1] by bob: deleted by hand") {
		t.Errorf("kl why of the state rm's run does not say what it asked:\n%s", why)
	}
	k.golden("run-show-state-rm.txt", k.ok("run", "show", rmRun))
	k.golden("run-show-state-rm.json", k.ok("run", "show", rmRun, "--json"))
}

// TestDay2BadInput: each day-2 command refuses bad input with an error
// naming the problem, prints nothing and changes nothing in the store.
func TestDay2BadInput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	k, _ := day2Setup(t)
	other := filepath.Join(k.dir, "other.tfstate")
	write(t, other, strings.Replace(k.ok("state", "pull", "prod"), `"lineage": "`, `"lineage": "x`, 1))
	notState := filepath.Join(k.dir, "not.json")
	write(t, notState, `{"hello": 1}`)
	before := k.dump()
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"rm of an address not in the state": {[]string{"rm", "prod", "terraform_data.a[0]", "terraform_data.nope", `module.app["k"]`},
			`removing from state prod: terraform_data.nope, module.app["k"] match nothing in the state`},
		"rm of a malformed address":  {[]string{"rm", "prod", "bad address!"}, `parsing address "bad address!": Invalid character`},
		"rm without an address":      {[]string{"rm", "prod"}, "requires at least 2 arg(s)"},
		"mv onto a taken address":    {[]string{"mv", "prod", "terraform_data.a[0]", "terraform_data.a[1]"}, "cannot move terraform_data.a[0] to terraform_data.a[1]: there is already a resource instance at that address in the state"},
		"mv of an address not there": {[]string{"mv", "prod", "module.nope", "module.other"}, "moving in state prod: module.nope matches nothing in the state"},
		"mv to another type":         {[]string{"mv", "prod", "terraform_data.a", "null_resource.a"}, "resource types don't match"},
		"rollback without --reason":  {[]string{"rollback", "prod", "--to", "0"}, "--reason is required"},
		"rollback without --to":      {[]string{"rollback", "prod", "--reason", "x"}, "--to SERIAL is required"},
		"rollback to the head":       {[]string{"rollback", "prod", "--to", "1", "--reason", "x"}, "rolling back state prod to version 1: want an earlier version than the head (1)"},
		"rollback to a future":       {[]string{"rollback", "prod", "--to", "9", "--reason", "x"}, "want an earlier version than the head (1)"},
		"push of another lineage":    {[]string{"push", "prod", other}, "the document has lineage x"},
		"push of no state":           {[]string{"push", "prod", notState}, `pushing to state prod: parsing Terraform state: not a Terraform state: no "version" field`},
		"push of a missing file":     {[]string{"push", "prod", filepath.Join(k.dir, "missing")}, "no such file or directory"},
		"an unknown state":           {[]string{"rm", "nope", "terraform_data.a"}, `state "nope" does not exist`},
		"a negative wait":            {[]string{"rm", "prod", "terraform_data.a", "--wait", "-1s"}, "--wait -1s: negative"},
		"a reason with a newline":    {[]string{"rm", "prod", "terraform_data.a", "--reason", "a\nb"}, "--reason"},
	} {
		r := k.run(append([]string{"state"}, tc.args...)...)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) || r.out != "" {
			t.Errorf("%s: err %v, stdout %q; want an error saying %q and nothing printed", name, r.err, r.out, tc.want)
		}
		if r.code() != 1 {
			t.Errorf("%s: exit %d, want 1 (bad input)", name, r.code())
		}
	}
	if after := k.dump(); after != before {
		t.Errorf("bad input changed the store")
	}
}

// stateList is `terraform state list` of the head of state, one line.
func stateList(t *testing.T, k *kit, state string) string {
	t.Helper()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "terraform.tfstate"), k.ok("state", "pull", state))
	return strings.Join(strings.Fields(string(k.terraform(dir, "state", "list"))), " ")
}

// planOn runs `terraform plan -detailed-exitcode` of cfg against doc (in
// a copy of cfg with doc as its local state) and returns its output and
// exit code.
func planOn(t *testing.T, k *kit, cfg, doc string) (string, int) {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"main.tf", "mod/main.tf"} {
		b, err := os.ReadFile(filepath.Join(cfg, f))
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(dir, f), string(b))
	}
	write(t, filepath.Join(dir, "terraform.tfstate"), doc)
	k.terraform(dir, "init", "-input=false", "-no-color")
	cmd := exec.Command("terraform", "plan", "-detailed-exitcode", "-input=false", "-no-color", "-lock=false")
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), k.env...), "TF_IN_AUTOMATION=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), 0
}

// day2SlowConfig replaces terraform_data.slow, whose provisioner then sleeps
// var.pause seconds, when var.pause changes: an apply that holds its
// reservations for that long. terraform_data.other is independent.
const day2SlowConfig = `variable "pause" {
  type    = number
  default = 0
}

resource "terraform_data" "slow" {
  triggers_replace = var.pause

  provisioner "local-exec" {
    command = "sleep ${var.pause}"
  }
}

resource "terraform_data" "other" {
  input = "o"
}
`

// TestDay2ConflictsWithRunningApply: a day-2 operation reserves the whole
// state, so while an apply holds reservations — even on addresses the
// operation does not touch — it is refused at once (exit 3) naming the
// apply run and what it holds, as an apply on those addresses would be;
// with --wait it waits on the apply (kl status shows the operation and
// whom it waits on) and commits after it, on the apply's version. On
// SQLite and PostgreSQL.
func TestDay2ConflictsWithRunningApply(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	for name, setup := range map[string]func(*testing.T) *kit{"sqlite": setup, "postgres": setupPostgres} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			day2Conflicts(t, setup(t))
		})
	}
}

func day2Conflicts(t *testing.T, k *kit) {
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), day2SlowConfig)
	slow := filepath.Join(k.dir, "slow.tfvars")
	write(t, slow, "pause = 4\n")
	k.ok("state", "init", "prod")
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg)))
	plan := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg, "--var-file", slow))

	var wg sync.WaitGroup
	var applied, waited result
	wg.Add(1)
	go func() {
		defer wg.Done()
		applied = k.run("apply", plan)
	}()
	k.waitStatus(t, func(s statusDoc) bool { return s.has("applying", 1) })
	apply := k.applyOf(plan)

	out := k.refused("conflict: run "+apply+" holds terraform_data.slow", "state", "rm", "prod", "terraform_data.other")
	if !strings.Contains(out, "refused: reservations conflict: run "+apply+" holds terraform_data.slow") {
		t.Errorf("kl state rm beside a running apply says:\n%s", out)
	}

	wg.Add(1)
	go func() {
		defer wg.Done()
		waited = k.run("state", "rm", "prod", "terraform_data.other", "--wait", "2m", "--json")
	}()
	status := k.waitStatus(t, statusDoc.waits)
	if !strings.Contains(status, `"commit_mode": "state-rm"`) || !strings.Contains(status, `"on": "`+apply+`"`) {
		t.Errorf("kl status while the state rm waits does not show the operation waiting on %s:\n%s", apply, status)
	}
	wg.Wait()
	if applied.err != nil || waited.err != nil {
		t.Fatalf("apply: %v; state rm --wait: %v\n%s", applied.err, waited.err, waited.errOut)
	}
	var doc struct {
		Version struct {
			Serial     int64 `json:"serial"`
			Provenance struct {
				SourceSerial int64 `json:"source_serial"`
			} `json:"provenance"`
		} `json:"version"`
		Markers []struct {
			Kind  string `json:"kind"`
			Other string `json:"other_run"`
		} `json:"markers"`
	}
	if err := json.Unmarshal([]byte(waited.out), &doc); err != nil {
		t.Fatalf("kl state rm --json: %v\n%s", err, waited.out)
	}
	waitedOn := ""
	for _, m := range doc.Markers {
		if m.Kind == "waited" {
			waitedOn = m.Other
		}
	}
	if doc.Version.Serial != 3 || doc.Version.Provenance.SourceSerial != 2 || waitedOn != apply {
		t.Errorf("state rm --wait committed version %d on head %d after waiting on %q; want version 3 on the apply's version 2, after waiting on %s",
			doc.Version.Serial, doc.Version.Provenance.SourceSerial, waitedOn, apply)
	}
}

// TestConfigBlocksThroughKl: Terraform's import, removed and moved blocks
// need no day-2 command — kl plan and kl apply carry them like any
// change (README "Day-2 operations"): the move renames terraform_data.a,
// the removed block forgets terraform_data.b (destroy = false), the import
// block adopts an object by id; the version changed all four addresses,
// and the configuration without the blocks plans no changes on the head.
func TestConfigBlocksThroughKl(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	final := "resource \"terraform_data\" \"a2\" {\n  input = \"a\"\n}\n\nresource \"terraform_data\" \"x\" {}\n"
	write(t, filepath.Join(cfg, "main.tf"), "resource \"terraform_data\" \"a\" {\n  input = \"a\"\n}\n\nresource \"terraform_data\" \"b\" {\n  input = \"b\"\n}\n")
	k.ok("state", "init", "prod")
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg)))
	write(t, filepath.Join(cfg, "main.tf"), final+`
moved {
  from = terraform_data.a
  to   = terraform_data.a2
}

removed {
  from = terraform_data.b

  lifecycle {
    destroy = false
  }
}

import {
  to = terraform_data.x
  id = "abc"
}
`)
	var plan struct {
		Run struct {
			ID string `json:"id"`
		} `json:"run"`
		Summary struct {
			Move, Import, Forget int
		} `json:"summary"`
	}
	k.jsonOf(&plan, "plan", "--state", "prod", "-C", cfg)
	if plan.Summary.Move != 1 || plan.Summary.Import != 1 || plan.Summary.Forget != 1 {
		t.Errorf("kl plan summary: %+v, want 1 moved, 1 imported, 1 forgotten", plan.Summary)
	}
	k.ok("apply", plan.Run.ID)
	if got := stateList(t, k, "prod"); got != "terraform_data.a2 terraform_data.x" {
		t.Errorf("terraform state list of the head: %s, want terraform_data.a2 terraform_data.x", got)
	}
	var hist struct {
		Entries []struct {
			Version struct {
				Changed []string `json:"changed"`
			} `json:"version"`
		} `json:"entries"`
	}
	k.jsonOf(&hist, "history", "--state", "prod", "--limit", "1")
	if got := strings.Join(hist.Entries[0].Version.Changed, " "); got != "terraform_data.a terraform_data.a2 terraform_data.b terraform_data.x" {
		t.Errorf("the version changed %s, want the four addresses", got)
	}
	write(t, filepath.Join(cfg, "main.tf"), final)
	write(t, filepath.Join(cfg, "mod", "main.tf"), "")
	if out, code := planOn(t, k, cfg, k.ok("state", "pull", "prod")); code != 0 {
		t.Errorf("terraform plan without the blocks against the head: exit %d, want 0\n%s", code, out)
	}
}
