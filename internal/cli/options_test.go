package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/testprovider"
)

// optionsPlanDoc is what these tests read of `kl plan --json`.
type optionsPlanDoc struct {
	Run      runDoc `json:"run"`
	Envelope struct {
		Scope struct {
			Options struct {
				Destroy     bool     `json:"destroy"`
				RefreshOnly bool     `json:"refresh_only"`
				Refresh     bool     `json:"refresh"`
				Parallelism int      `json:"parallelism"`
				Vars        []string `json:"vars"`
				Flags       []string `json:"flags"`
			} `json:"options"`
		} `json:"scope"`
		StartedAt  time.Time `json:"started_at"`
		FinishedAt time.Time `json:"finished_at"`
		Reverts    []struct {
			Text string `json:"text"`
		} `json:"reverts"`
	} `json:"envelope"`
	Summary struct {
		Add, Change, Destroy, Refresh int
		Text                          string `json:"text"`
	} `json:"summary"`
	Footprint footprintDoc `json:"footprint"`
	Diff      *struct {
		Resources []struct {
			Address string `json:"address"`
			Action  string `json:"action"`
			Drift   bool   `json:"drift"`
			Text    string `json:"text"`
		} `json:"resources"`
	} `json:"diff"`
}

// optionsApplyDoc is what these tests read of `kl apply --json`.
type optionsApplyDoc struct {
	Verdict string `json:"verdict"`
	Text    string `json:"text"`
	Version *struct {
		Changed    []string `json:"changed"`
		Provenance struct {
			Exact          bool   `json:"exact"`
			AppliedPlanRun string `json:"applied_plan_run"`
		} `json:"provenance"`
	} `json:"version"`
}

// TestPlanDestroy: `kl plan -- -destroy` plans the deletion of every
// resource and output of the state, says so in its scope, and its apply
// destroys them: the head holds none.
func TestPlanDestroy(t *testing.T) {
	t.Parallel()
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), `resource "terraform_data" "a" {
  input = "a"
}

resource "terraform_data" "b" {
  input = terraform_data.a.output
}

output "b" {
  value = terraform_data.b.output
}
`)
	k.ok("state", "init", "prod")
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg)))

	var p optionsPlanDoc
	k.jsonOf(&p, "plan", "--state", "prod", "-C", cfg, "--", "-destroy")
	if o := p.Envelope.Scope.Options; !o.Destroy || strings.Join(o.Flags, " ") != "-destroy" {
		t.Errorf("scope options = %+v, want -destroy", o)
	}
	if p.Summary.Destroy != 2 || p.Summary.Add+p.Summary.Change != 0 {
		t.Errorf("summary = %+v, want 2 to destroy and nothing else", p.Summary)
	}
	if !sameStrings(p.Footprint.Write, "output.b", "terraform_data.a", "terraform_data.b") {
		t.Errorf("write set = %v, want both resources and the output", p.Footprint.Write)
	}
	if text := k.ok("run", "show", p.Run.ID); !strings.Contains(text, "terraform options -destroy") ||
		!strings.Contains(text, "terraform_data.a will be destroyed") {
		t.Errorf("kl run show does not show the option and the deletions:\n%s", text)
	}
	// A -destroy plan destroys everything on purpose: it is not said to
	// undo each version's creation (ADR 0046 decision 3).
	if text := k.ok("run", "show", p.Run.ID); len(p.Envelope.Reverts) != 0 || strings.Contains(text, "would undo") {
		t.Errorf("the -destroy plan is said to undo earlier changes: %+v\n%s", p.Envelope.Reverts, text)
	}
	var a optionsApplyDoc
	k.jsonOf(&a, "apply", p.Run.ID)
	if a.Version == nil || !a.Version.Provenance.Exact || !sameStrings(a.Version.Changed, "output.b", "terraform_data.a", "terraform_data.b") {
		t.Fatalf("apply of the destroy plan = %s (%s), version %+v; want exact, changing both resources and the output", a.Verdict, a.Text, a.Version)
	}
	var st struct {
		Resources []any          `json:"resources"`
		Outputs   map[string]any `json:"outputs"`
	}
	if err := json.Unmarshal([]byte(k.ok("state", "pull", "prod")), &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Resources)+len(st.Outputs) != 0 {
		t.Errorf("the head after the destroy holds %d resources and %d outputs, want none", len(st.Resources), len(st.Outputs))
	}
}

// driftConfig: two objects of the test provider.
const driftConfig = `
resource "kltest_object" "a" {
  name = "a"
}

resource "kltest_object" "b" {
  name = "b"
  settings = {
    labels = { env = "prod" }
  }
}
`

// TestPlanRefreshOnly: an object changed outside Terraform (its file in
// the test provider's fake cloud API edited behind Terraform's back) is
// seen by a plan that refreshes, not by one with -refresh=false; a
// -refresh-only plan's write set is the drifted object (its
// resource_drift, as its resource_changes are empty), its diff says it
// changed outside Terraform, and its apply commits the refreshed object —
// exactly — without changing the object: the next plan plans to change it
// back to the configuration.
func TestPlanRefreshOnly(t *testing.T) {
	t.Parallel()
	k := setup(t)
	p := withProvider(k)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), providerBlock()+driftConfig)
	k.ok("state", "init", "prod")
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg)))
	drift(t, p.APIDir, `"name": "b"`, `"name": "b-changed-by-hand"`)

	// kl footprint of the same refresh-only plan made by Terraform itself:
	// its JSON does not say it is refresh-only; --refresh-only gives the
	// drifted object as its write set, and without it kl says so.
	tf := filepath.Join(k.dir, "tf")
	write(t, filepath.Join(tf, "main.tf"), providerBlock()+driftConfig)
	write(t, filepath.Join(tf, "terraform.tfstate"), k.ok("state", "pull", "prod"))
	k.terraform(tf, "init", "-no-color")
	k.terraform(tf, "plan", "-refresh-only", "-no-color", "-out=ro.tfplan")
	write(t, filepath.Join(tf, "ro.json"), string(k.terraform(tf, "show", "-json", "ro.tfplan")))
	var fpDoc struct {
		Summary struct {
			Refresh int    `json:"refresh"`
			Text    string `json:"text"`
		} `json:"summary"`
		Footprint struct {
			Write []string `json:"write"`
		} `json:"footprint"`
	}
	k.jsonOf(&fpDoc, "footprint", "--refresh-only", filepath.Join(tf, "ro.json"))
	// A normal plan of the same drift (b changed back to the
	// configuration) given --refresh-only is refused: its drift alone
	// would make a write set without its changes.
	k.terraform(tf, "plan", "-no-color", "-out=normal.tfplan")
	write(t, filepath.Join(tf, "normal.json"), string(k.terraform(tf, "show", "-json", "normal.tfplan")))
	if r := k.run("footprint", "--refresh-only", filepath.Join(tf, "normal.json")); r.err == nil ||
		!strings.Contains(r.err.Error(), "the plan is not a refresh-only plan: its resource_changes hold 1 change(s) — kltest_object.b (update) —") ||
		!strings.Contains(r.err.Error(), "leave out --refresh-only") || r.out != "" {
		t.Errorf("kl footprint --refresh-only of a normal plan is not refused (%v):\n%s\n%s", r.err, r.out, r.errOut)
	}
	if !sameStrings(fpDoc.Footprint.Write, "kltest_object.b") || fpDoc.Summary.Refresh != 1 {
		t.Errorf("kl footprint --refresh-only: write %v, summary %+v; want the drifted b, 1 refreshed", fpDoc.Footprint.Write, fpDoc.Summary)
	}
	r := k.run("footprint", filepath.Join(tf, "ro.json"))
	if out, errOut := r.out, r.errOut; r.err != nil || !strings.Contains(errOut, "its refresh found 1 object(s) changed outside Terraform: if it was made with terraform plan -refresh-only, pass --refresh-only") ||
		!strings.Contains(out, "no changes") {
		t.Errorf("kl footprint of a refresh-only plan without --refresh-only does not say what to do (%v):\n%s\n%s", r.err, out, errOut)
	}

	var plain, noRefresh, ro optionsPlanDoc
	k.jsonOf(&plain, "plan", "--state", "prod", "-C", cfg)
	if !sameStrings(plain.Footprint.Write, "kltest_object.b") || plain.Summary.Change != 1 {
		t.Fatalf("a refreshing plan after the drift: write %v, summary %+v; want b changed back", plain.Footprint.Write, plain.Summary)
	}
	k.jsonOf(&noRefresh, "plan", "--state", "prod", "-C", cfg, "--", "-refresh=false")
	if o := noRefresh.Envelope.Scope.Options; o.Refresh || strings.Join(o.Flags, " ") != "-refresh=false" {
		t.Errorf("scope options = %+v, want -refresh=false", o)
	}
	if len(noRefresh.Footprint.Write) != 0 || noRefresh.Summary.Text != "no changes" {
		t.Errorf("a -refresh=false plan saw the drift: write %v, summary %q; want no changes (Terraform did not refresh)", noRefresh.Footprint.Write, noRefresh.Summary.Text)
	}
	k.ok("run", "discard", plain.Run.ID)
	k.ok("run", "discard", noRefresh.Run.ID)

	k.jsonOf(&ro, "plan", "--state", "prod", "-C", cfg, "--pr", "acme/infra#51", "--", "-refresh-only")
	if !ro.Envelope.Scope.Options.RefreshOnly {
		t.Errorf("scope options = %+v, want -refresh-only", ro.Envelope.Scope.Options)
	}
	if !sameStrings(ro.Footprint.Write, "kltest_object.b") || ro.Summary.Refresh != 1 || ro.Summary.Change != 0 {
		t.Fatalf("refresh-only plan: write %v, summary %+v; want the drifted b, 1 refreshed", ro.Footprint.Write, ro.Summary)
	}
	if ro.Diff == nil || len(ro.Diff.Resources) != 1 || !ro.Diff.Resources[0].Drift || ro.Diff.Resources[0].Text != "kltest_object.b has changed" {
		t.Errorf("refresh-only diff = %+v, want b, changed outside Terraform", ro.Diff)
	}
	if text := k.ok("run", "show", ro.Run.ID); !strings.Contains(text, `"b" -> "b-changed-by-hand"`) ||
		!strings.Contains(text, "1 object changed outside Terraform, to record in the state") {
		t.Errorf("kl run show of the refresh-only plan does not show the drift:\n%s", text)
	}
	var a optionsApplyDoc
	k.jsonOf(&a, "apply", ro.Run.ID)
	if a.Version == nil || !a.Version.Provenance.Exact || !sameStrings(a.Version.Changed, "kltest_object.b") {
		t.Fatalf("apply of the refresh-only plan = %s (%s), version %+v; want exact, changing kltest_object.b", a.Verdict, a.Text, a.Version)
	}
	if head := k.ok("state", "pull", "prod"); !strings.Contains(head, `"name": "b-changed-by-hand"`) {
		t.Errorf("the head does not hold the refreshed object:\n%s", head)
	}
	if !apiHolds(t, p.APIDir, `"name": "b-changed-by-hand"`) {
		t.Errorf("the refresh-only apply changed the object itself")
	}
	var after optionsPlanDoc
	k.jsonOf(&after, "plan", "--state", "prod", "-C", cfg, "--pr", "acme/infra#52")
	if !sameStrings(after.Footprint.Write, "kltest_object.b") || after.Summary.Change != 1 {
		t.Errorf("the plan after the refresh-only apply: write %v, summary %+v; want b changed back to the configuration", after.Footprint.Write, after.Summary)
	}
	// The refresh-only version recorded a change made outside Terraform,
	// not PR #51's: setting b back to the configuration undoes no one's
	// change (ADR 0046 decision 3).
	if text := k.ok("run", "show", after.Run.ID); len(after.Envelope.Reverts) != 0 || strings.Contains(text, "would undo") {
		t.Errorf("the plan correcting the recorded drift is said to undo it: %+v\n%s", after.Envelope.Reverts, text)
	}
}

// TestPlanParallelism: -parallelism=1 reaches Terraform, for the plan and
// for its apply: three objects whose API calls each take a second are
// created one after the other (the apply takes 3 s or more), and read one
// after the other by the next plan's refresh (3 s or more) — where
// Terraform's default of 10 does all three at once.
func TestPlanParallelism(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the provider")
	}
	t.Parallel()
	k := setup(t)
	withProvider(k)
	cfg := filepath.Join(k.dir, "cfg")
	conf := func(label string) string {
		return providerBlock() + `
resource "kltest_object" "o" {
  count = 3
  name  = "o${count.index}"
  delay = "1s"
  settings = {
    labels = { v = "` + label + `" }
  }
}
`
	}
	write(t, filepath.Join(cfg, "main.tf"), conf("1"))
	k.ok("state", "init", "prod")
	var p optionsPlanDoc
	k.jsonOf(&p, "plan", "--state", "prod", "-C", cfg, "--", "-parallelism=1")
	if o := p.Envelope.Scope.Options; o.Parallelism != 1 || strings.Join(o.Flags, " ") != "-parallelism=1" {
		t.Errorf("scope options = %+v, want -parallelism=1", o)
	}
	start := time.Now()
	k.ok("apply", p.Run.ID)
	if d := time.Since(start); d < 3*time.Second {
		t.Errorf("the apply of 3 creates of 1 s each took %s with -parallelism=1: not one after the other", d)
	}
	write(t, filepath.Join(cfg, "main.tf"), conf("2"))
	k.jsonOf(&p, "plan", "--state", "prod", "-C", cfg, "--", "-parallelism=1")
	if d := p.Envelope.FinishedAt.Sub(p.Envelope.StartedAt); d < 3*time.Second {
		t.Errorf("the plan refreshing 3 objects of 1 s each took %s with -parallelism=1: not one after the other", d)
	}
}

// varConfig: x is set by terraform.tfvars and a --var-file too, which a
// -var wins over; y has no value but a -var's; b's input is unknown in
// every plan (timestamp) and reads r, so a version that replaces r
// re-plans b with the intent unchanged (replan_test.go's setup).
const varConfig = `variable "x" {
  type = string
}

variable "y" {
  type = string
}

resource "terraform_data" "r" {
  input = "r"
}

resource "terraform_data" "b" {
  input = "${terraform_data.r.id}|${var.x}|${var.y}|${timestamp()}"
}

resource "terraform_data" "y" {
  input = var.y
}
`

// TestPlanVar: -var NAME=VALUE reaches Terraform with -var's precedence
// (it wins over terraform.tfvars and --var-file), never on a command line
// (Terraform's argv, recorded by a wrapper), printed (text, JSON, debug
// log, the diff), or stored outside the artifacts (the saved plan, the
// states, the plan's -var values); the scope names the variables; and the
// re-plan of an apply whose plan input changed is made with the values
// (y has no other): the re-plan is applied, and b at the head holds them.
func TestPlanVar(t *testing.T) {
	t.Parallel()
	const secretX, secretY = "x-from-dash-var-5183", "y-from-dash-var-7302"
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), varConfig)
	write(t, filepath.Join(cfg, "terraform.tfvars"), "x = \"x-from-tfvars\"\n")
	write(t, filepath.Join(cfg, "x.tfvars"), "x = \"x-from-var-file\"\n")
	argvLog := filepath.Join(k.dir, "argv.log")
	wrapper := filepath.Join(k.dir, "terraform-wrapper")
	tf, err := lookTerraform()
	if err != nil {
		t.Skip(err)
	}
	write(t, wrapper, "#!/bin/sh\nprintf '%s\\n' \"$*\" >> "+argvLog+"\nexec "+tf+" \"$@\"\n")
	if err := os.Chmod(wrapper, 0o700); err != nil {
		t.Fatal(err)
	}
	k.env = envWith(k.env, "KL_TERRAFORM="+wrapper, "KL_LOG_LEVEL=debug")
	kl, printed := k.recording(nil)
	vars := []string{"--", "-var", "x=" + secretX, "-var=y=" + secretY}
	kl("state", "init", "prod")
	base := reULID.FindString(kl(append([]string{"plan", "--state", "prod", "-C", cfg}, vars...)...))
	kl("apply", base)
	// The state holds the values, as Terraform wrote them: its pull is no
	// output of kl's own.
	_, _, inputs := tfInstances(t, []byte(k.ok("state", "pull", "prod")))
	if !strings.Contains(inputs["b"], "|"+secretX+"|"+secretY+"|") {
		t.Fatalf("b's input = %q: the -var values did not reach Terraform, or terraform.tfvars won over -var x", inputs["b"])
	}

	var b optionsPlanDoc
	if err := json.Unmarshal([]byte(kl(append([]string{"plan", "--state", "prod", "-C", cfg, "--var-file", "x.tfvars",
		"--target", "terraform_data.b", "--json"}, vars...)...)), &b); err != nil {
		t.Fatal(err)
	}
	if !sameStrings(b.Envelope.Scope.Options.Vars, "x", "y") {
		t.Errorf("scope options = %+v, want the -var names x, y", b.Envelope.Scope.Options)
	}
	if text := kl("run", "show", b.Run.ID); !strings.Contains(text, "-var x, y (values kept with the plan's secrets)") {
		t.Errorf("kl run show does not name the -var options:\n%s", text)
	}
	// The operator replaces r: b's plan input changed.
	kl("apply", reULID.FindString(kl("plan", "--state", "prod", "-C", cfg, "--replace", "terraform_data.r", "--target", "terraform_data.r",
		"--", "-var", "x=other-x-value", "-var", "y=other-y-value")))
	var a optionsApplyDoc
	if err := json.Unmarshal([]byte(kl("apply", b.Run.ID, "--json")), &a); err != nil {
		t.Fatal(err)
	}
	if a.Version == nil || a.Version.Provenance.AppliedPlanRun == "" {
		t.Fatalf("apply of b = %s (%s), version %+v; want the re-plan applied", a.Verdict, a.Text, a.Version)
	}
	_, ids, inputs := tfInstances(t, []byte(k.ok("state", "pull", "prod")))
	if want := ids["r"] + "|" + secretX + "|" + secretY + "|"; !strings.HasPrefix(inputs["b"], want) {
		t.Errorf("b's input at the head = %q, want %q…: the re-plan did not repeat the -var options (or a var file won over -var x)", inputs["b"], want)
	}
	for _, args := range [][]string{{"run", "show", b.Run.ID, "--json"}, {"run", "show", a.Version.Provenance.AppliedPlanRun},
		{"history", "--state", "prod", "--json"}, {"runs", "--json"}, {"status"}} {
		kl(args...)
	}
	noValue(t, k, printed.String(), argvLog, secretX, secretY)
}

// noValue checks that no value is in kl's output, Terraform's argv, the
// store's rows, or an artifact other than Terraform's own (the saved plan,
// the states) and the plan's -var values.
func noValue(t *testing.T, k *kit, printed, argvLog string, values ...string) {
	t.Helper()
	argv, err := os.ReadFile(argvLog)
	if err != nil || !bytes.Contains(argv, []byte("plan")) {
		t.Fatalf("terraform's argv was not recorded (%v):\n%s", err, argv)
	}
	dump := k.dump()
	arts := allArtifacts(t, k.store)
	for _, v := range values {
		if strings.Contains(printed, v) {
			t.Errorf("kl printed the -var value %q:\n%s", v, printed)
		}
		if bytes.Contains(argv, []byte(v)) {
			t.Errorf("the -var value %q was on terraform's command line:\n%s", v, argv)
		}
		if strings.Contains(dump, v) {
			t.Errorf("the -var value %q is in the store's rows", v)
		}
		kept := false
		for _, a := range arts {
			secretKept := a.name == "plan.tfplan" || a.name == "vars.json" || strings.HasSuffix(a.name, ".tfstate")
			if bytes.Contains(a.data, []byte(v)) && !secretKept {
				t.Errorf("stored artifact %s of run %s holds the -var value %q", a.name, a.run, v)
			}
			kept = kept || a.name == "vars.json" && bytes.Contains(a.data, []byte(v))
		}
		if !kept {
			t.Errorf("no vars.json holds the -var value %q: where does a re-plan get it?", v)
		}
	}
}

// providerBlock is the terraform block that requires the test provider.
func providerBlock() string { return testprovider.RequiredProvidersBlock }

// drift edits the test provider's objects behind Terraform's back: in
// every object file of the fake API in dir, old becomes new (at least one
// must hold old).
func drift(t *testing.T, dir, old, new string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(old)) {
			n++
			if err := os.WriteFile(f, bytes.ReplaceAll(b, []byte(old), []byte(new)), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n == 0 {
		t.Fatalf("no object of the fake API holds %s", old)
	}
}

// apiHolds reports whether an object file of the fake API in dir holds s.
func apiHolds(t *testing.T, dir, s string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

// lookTerraform is the terraform on PATH, as an absolute path.
func lookTerraform() (string, error) {
	p, err := exec.LookPath("terraform")
	if err != nil {
		return "", err
	}
	return filepath.Abs(p)
}

// TestPlanVarMasked: Terraform quotes a variable's value in a failed
// validation's message; kl's error, and the run's end it stores and
// shows, say "(value of -var NAME)" instead.
func TestPlanVarMasked(t *testing.T) {
	t.Parallel()
	const secret = "not-a-region-4417"
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), `variable "region" {
  type = string
  validation {
    condition     = startswith(var.region, "eu-")
    error_message = "The region ${var.region} is not in Europe."
  }
}

resource "terraform_data" "a" {
  input = var.region
}
`)
	k.ok("state", "init", "prod")
	r := k.run("plan", "--state", "prod", "-C", cfg, "--", "-var", "region="+secret)
	if r.err == nil {
		t.Fatalf("kl plan with a region that fails validation succeeded:\n%s", r.out)
	}
	if msg := r.out + r.errOut + r.err.Error(); strings.Contains(msg, secret) || !strings.Contains(r.err.Error(), "(value of -var region)") {
		t.Errorf("kl plan's error does not mask the -var value:\n%s", msg)
	}
	if strings.Contains(k.dump(), secret) {
		t.Errorf("the failed run's end in the store holds the -var value")
	}
	if text := k.ok("runs"); strings.Contains(text, secret) {
		t.Errorf("kl runs shows the -var value:\n%s", text)
	}
}

// TestPlanOptionsRefused: options Kilolock cannot honour, unknown ones,
// bad values and arguments before "--" are refused before a run is
// stored, naming the option and why — and never quoting a -var value.
func TestPlanOptionsRefused(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-in-a-bad-option"
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), `resource "terraform_data" "a" {}`+"\n")
	k.ok("state", "init", "prod")
	before := k.dump()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--", "-state=other.tfstate"}, "-state is refused: Kilolock owns the state"},
		{[]string{"--", "-lock=false"}, "-lock is refused: Kilolock replaces Terraform's state lock with reservations"},
		{[]string{"--", "-chdir=infra"}, "-chdir is refused: it is a global option of terraform"},
		{[]string{"--", "-frobnicate"}, "unknown option -frobnicate"},
		{[]string{"--", "-parallelism=0"}, `-parallelism="0": want a whole number from 1`},
		{[]string{"--", "-destroy", "-refresh-only"}, "-destroy and -refresh-only"},
		{[]string{"--", "-var", secret}, "-var: want NAME=VALUE"},
		{[]string{"--", "-var", "x=", secret}, "unexpected argument after the plan options"},
		{[]string{"x=" + secret}, "kl plan takes no arguments: Terraform's plan options go after --"},
	} {
		r := k.run(append([]string{"plan", "--state", "prod", "-C", cfg}, tc.args...)...)
		if r.err == nil || !strings.Contains(r.err.Error(), tc.want) {
			t.Errorf("kl plan %q: %v\n%s\nwant an error saying %q", tc.args, r.err, r.errOut, tc.want)
			continue
		}
		if strings.Contains(r.out+r.errOut+r.err.Error(), secret) {
			t.Errorf("kl plan %q quoted the value: %v", tc.args, r.err)
		}
	}
	if after := k.dump(); after != before {
		t.Errorf("a refused plan changed the store:\n%s", after)
	}
}
