package cli_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// revertConfig is two independent terraform_data resources.
func revertConfig(a, b string) string {
	return `resource "terraform_data" "a" {
  input = "` + a + `"
}

resource "terraform_data" "b" {
  input = "` + b + `"
}
`
}

// revertDoc is what these tests read of `kl plan --json`.
type revertDoc struct {
	Run struct {
		ID string `json:"id"`
	} `json:"run"`
	Envelope struct {
		Reverts []struct {
			Address    string   `json:"address"`
			Serial     int64    `json:"serial"`
			Kind       string   `json:"kind"`
			Attributes []string `json:"attributes"`
			Actor      string   `json:"actor"`
			PR         *struct {
				Repo   string `json:"repo"`
				Number int    `json:"number"`
			} `json:"pr"`
			Text string `json:"text"`
		} `json:"reverts"`
	} `json:"envelope"`
}

// TestPlanSaysWhatItWouldUndo is issue 12 §5's scenario through kl on
// SQLite with real Terraform: PR #21 changes terraform_data.a a0 → a1 and
// is applied (version 2); a branch made before it changes b and still
// says a0, so its plan sets a back: "~2", and Terraform says only "update
// in-place". kl plan says it would undo version 2's change to a, naming
// PR #21 and its author, in text and JSON. A plan that changes b alone
// (a branch made after) says nothing; nor does one that sets a to a new
// value, nor PR #21's own next plan setting a back (its own change).
func TestPlanSaysWhatItWouldUndo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	k := setup(t)
	dir := func(name, config string) string {
		d := filepath.Join(k.dir, name)
		write(t, filepath.Join(d, "main.tf"), config)
		return d
	}
	as := func(actor string, args ...string) string {
		t.Helper()
		r := k.runWith(append(append([]string(nil), k.env...), "KL_ACTOR="+actor), "", args...)
		if r.err != nil {
			t.Fatalf("kl %s: %v\nstderr:\n%s", strings.Join(args, " "), r.err, r.errOut)
		}
		return r.out
	}
	k.ok("state", "init", "prod")
	k.ok("apply", reULID.FindString(as("carol", "plan", "--state", "prod", "-C", dir("main", revertConfig("a0", "b0")))))
	pr21 := dir("pr21", revertConfig("a1", "b0"))
	as("alice", "apply", reULID.FindString(as("alice", "plan", "--state", "prod", "-C", pr21, "--pr", "acme/infra#21")))

	stale := dir("pr22", revertConfig("a0", "b1"))
	text := as("bob", "plan", "--state", "prod", "-C", stale, "--pr", "acme/infra#22")
	want := "⚠ would undo version 2's change to terraform_data.a (PR acme/infra#21, by alice): input back to its value before version 2. Is the branch behind the base?"
	if !strings.Contains(text, want) {
		t.Errorf("kl plan of the stale branch does not say %q:\n%s", want, text)
	}
	if !strings.Contains(text, "per instance: ~2") && !strings.Contains(text, "2 to change") {
		t.Errorf("kl plan of the stale branch: want two changes:\n%s", text)
	}
	var doc revertDoc
	k.jsonOf(&doc, "plan", "--state", "prod", "-C", stale, "--pr", "acme/infra#22")
	if len(doc.Envelope.Reverts) != 1 {
		t.Fatalf("kl plan --json: reverts %+v, want one", doc.Envelope.Reverts)
	}
	rv := doc.Envelope.Reverts[0]
	if rv.Address != "terraform_data.a" || rv.Serial != 2 || rv.Kind != "change" || len(rv.Attributes) != 1 || rv.Attributes[0] != "input" ||
		rv.PR == nil || rv.PR.Number != 21 || rv.Actor != "alice" || rv.Text != want {
		t.Errorf("kl plan --json: revert %+v; want version 2's change to terraform_data.a (input) by PR #21, alice", rv)
	}
	var shown revertDoc
	k.jsonOf(&shown, "run", "show", doc.Run.ID)
	if len(shown.Envelope.Reverts) != 1 || shown.Envelope.Reverts[0].Text != want {
		t.Errorf("kl run show --json: reverts %+v, want the plan's", shown.Envelope.Reverts)
	}

	for name, tc := range map[string]struct{ dir, pr string }{
		"a branch made after PR #21 changes b":  {dir("after", revertConfig("a1", "b1")), "acme/infra#23"},
		"a new value for a":                     {dir("new", revertConfig("a2", "b0")), "acme/infra#24"},
		"PR #21 sets its own change back":       {dir("own", revertConfig("a0", "b0")), "acme/infra#21"},
		"a plan without a pull request, a kept": {dir("cli", revertConfig("a1", "b2")), ""},
	} {
		args := []string{"plan", "--state", "prod", "-C", tc.dir}
		if tc.pr != "" {
			args = append(args, "--pr", tc.pr)
		}
		if out := as("dave", args...); strings.Contains(out, "would undo") {
			t.Errorf("%s: kl plan says it would undo something:\n%s", name, out)
		}
	}
}

// TestPlanSaysWhatItWouldDestroyOrRecreate: a branch made before a
// resource was added plans to destroy it — "would undo version N's
// creation" —, and one made before it was removed plans to create it again
// with the values it had — "would undo version N's removal".
func TestPlanSaysWhatItWouldDestroyOrRecreate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	k := setup(t)
	base := revertConfig("a0", "b0")
	withC := base + "\nresource \"terraform_data\" \"c\" {\n  input = \"c0\"\n}\n"
	dir := func(name, config string) string {
		d := filepath.Join(k.dir, name)
		write(t, filepath.Join(d, "main.tf"), config)
		return d
	}
	k.ok("state", "init", "prod")
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", "prod", "-C", dir("main", base))))
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", "prod", "-C", dir("add", withC), "--pr", "acme/infra#30")))
	out := k.ok("plan", "--state", "prod", "-C", dir("before-add", revertConfig("a0", "b1")), "--pr", "acme/infra#31")
	if want := "⚠ would undo version 2's creation of terraform_data.c (PR acme/infra#30"; !strings.Contains(out, want) ||
		!strings.Contains(out, "this plan destroys what version 2 created") {
		t.Errorf("a branch made before c was added: kl plan does not say %q:\n%s", want, out)
	}
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", "prod", "-C", dir("remove", base), "--pr", "acme/infra#32")))
	out = k.ok("plan", "--state", "prod", "-C", dir("before-remove", strings.Replace(withC, `"b0"`, `"b1"`, 1)), "--pr", "acme/infra#33")
	if want := "⚠ would undo version 3's removal of terraform_data.c (PR acme/infra#32"; !strings.Contains(out, want) ||
		!strings.Contains(out, "this plan creates it again, with input as before version 3") {
		t.Errorf("a branch made before c was removed: kl plan does not say %q:\n%s", want, out)
	}
}

// readChangedConfig: b reads src (a sensitive variable's value, which
// Terraform copies into src's output unmarked) and cfg (a plain value).
const readChangedConfig = `variable "secret" {
  type      = string
  sensitive = true
}

resource "terraform_data" "src" {
  input = var.secret
}

resource "terraform_data" "cfg" {
  input = "CFG"
}

resource "terraform_data" "b" {
  input = "${terraform_data.src.output}/${terraform_data.cfg.output}/BV"
}
`

// TestSincePlanShowsReadChanges is issue 12 §4: PR B plans b, which reads
// src and cfg; then src's secret and cfg's value change (another apply,
// one version). kl history --since-plan B, kl run show B and B's apply
// (which re-plans) show, for that "plan input changed" version, which
// attributes of the read resources changed since B's source version:
// cfg's input old → new, src's input and output masked — the secret in
// clear nowhere, though Terraform's state keeps src's output unmarked.
func TestSincePlanShowsReadChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	const one, two = "read-secret-first-8642", "read-secret-second-9753"
	k := setup(t)
	var printed strings.Builder
	kl := func(args ...string) string {
		t.Helper()
		out := k.ok(args...)
		printed.WriteString(out)
		return out
	}
	dir := func(name, secret, cfg, bv string) string {
		d := filepath.Join(k.dir, name)
		write(t, filepath.Join(d, "main.tf"), strings.NewReplacer("CFG", cfg, "BV", bv).Replace(readChangedConfig))
		write(t, filepath.Join(d, "secret.tfvars"), `secret = "`+secret+`"`+"\n")
		return d
	}
	kl("state", "init", "prod")
	kl("apply", reULID.FindString(kl("plan", "--state", "prod", "-C", dir("main", one, "c0", "v0"), "--var-file", "secret.tfvars")))
	b := reULID.FindString(kl("plan", "--state", "prod", "-C", dir("pr-b", one, "c0", "v1"), "--var-file", "secret.tfvars",
		"--target", "terraform_data.b"))
	main2 := dir("main2", two, "c1", "v0")
	kl("apply", reULID.FindString(kl("plan", "--state", "prod", "-C", main2, "--var-file", "secret.tfvars",
		"--target", "terraform_data.src", "--target", "terraform_data.cfg")))

	wants := []string{
		"What version 2 changed in what the plan reads\n",
		"  # terraform_data.cfg changed\n",
		`      ~ input  = "c0" -> "c1"` + "\n",
		"  # terraform_data.src changed\n",
		"      ~ input  = (sensitive value)\n",
		"      ~ output = (sensitive value)\n",
	}
	for _, args := range [][]string{{"history", "--since-plan", b}, {"run", "show", b}} {
		out := kl(args...)
		for _, w := range wants {
			if !strings.Contains(out, w) {
				t.Errorf("kl %s does not show %q:\n%s", strings.Join(args, " "), w, out)
			}
		}
	}
	var doc struct {
		Entries []struct {
			Serial      int64  `json:"serial"`
			Class       string `json:"class"`
			ReadChanges []struct {
				Address string `json:"address"`
				Action  string `json:"action"`
				Changes []struct {
					Key    string `json:"key"`
					Before *struct {
						Value     json.RawMessage `json:"value"`
						Sensitive bool            `json:"sensitive"`
					} `json:"before"`
				} `json:"changes"`
			} `json:"read_changes"`
		} `json:"entries"`
	}
	if err := json.Unmarshal([]byte(kl("history", "--since-plan", b, "--json")), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Entries) != 1 || doc.Entries[0].Class != "read-changed" || len(doc.Entries[0].ReadChanges) != 2 {
		t.Fatalf("kl history --since-plan --json: %+v; want one read-changed entry with cfg and src", doc.Entries)
	}
	for _, r := range doc.Entries[0].ReadChanges {
		for _, c := range r.Changes {
			if r.Address == "terraform_data.src" && c.Key != "id" && (c.Before == nil || !c.Before.Sensitive || len(c.Before.Value) > 0) {
				t.Errorf("src's %s before = %+v; want it sensitive, without a value", c.Key, c.Before)
			}
		}
	}
	res := k.run("apply", b) // refused: the re-plan would change b, which reads them
	printed.WriteString(res.out + res.errOut)
	if applied := res.out; !strings.Contains(applied, "What version 2 changed in what the plan reads") || !strings.Contains(applied, `"c0" -> "c1"`) {
		t.Errorf("kl apply of B (re-planned) does not say what changed in what it reads:\n%s", applied)
	}
	for _, v := range []string{one, two} {
		if strings.Contains(printed.String(), v) {
			t.Errorf("kl printed the sensitive value %q", v)
		}
	}
}

// objectConfig is terraform_data.a whose input is an object of a and b.
func objectConfig(a, b int) string {
	return fmt.Sprintf("resource \"terraform_data\" \"a\" {\n  input = { a = %d, b = %d }\n}\n", a, b)
}

// TestPlanSaysWhichPartItUndoes (defect 6 of the issue 12 review): PR #21
// changes input {a=1,b=1} → {a=2,b=2} (version 2); PR #22 plans
// {a=1,b=2}, which sets back a and keeps b. "input back to its value
// before version 2" would be false — that value is {a=1,b=1}: kl says
// `input.a`, in text and JSON (paths), and values nowhere. A plan that
// sets both back says `input`.
func TestPlanSaysWhichPartItUndoes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	k := setup(t)
	dir := func(name, config string) string {
		d := filepath.Join(k.dir, name)
		write(t, filepath.Join(d, "main.tf"), config)
		return d
	}
	k.ok("state", "init", "prod")
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", "prod", "-C", dir("main", objectConfig(1, 1)))))
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", "prod", "-C", dir("pr21", objectConfig(2, 2)), "--pr", "acme/infra#21")))

	part := dir("pr22", objectConfig(1, 2))
	out := k.ok("plan", "--state", "prod", "-C", part, "--pr", "acme/infra#22")
	want := "⚠ would undo version 2's change to terraform_data.a (PR acme/infra#21, by alice): input.a back to its value before version 2. Is the branch behind the base?"
	if !strings.Contains(out, want) {
		t.Errorf("kl plan of {a=1,b=2} does not say %q:\n%s", want, out)
	}
	var doc struct {
		Envelope struct {
			Reverts []struct {
				Attributes []string `json:"attributes"`
				Paths      []struct {
					Path string `json:"path"`
					Part bool   `json:"part"`
				} `json:"paths"`
				Text string `json:"text"`
			} `json:"reverts"`
		} `json:"envelope"`
	}
	k.jsonOf(&doc, "plan", "--state", "prod", "-C", part, "--pr", "acme/infra#22")
	if rs := doc.Envelope.Reverts; len(rs) != 1 || len(rs[0].Paths) != 1 || rs[0].Paths[0].Path != "input.a" || rs[0].Paths[0].Part ||
		len(rs[0].Attributes) != 1 || rs[0].Attributes[0] != "input" || rs[0].Text != want {
		t.Errorf("kl plan --json: reverts %+v; want one, attribute input, path input.a", rs)
	}
	whole := k.ok("plan", "--state", "prod", "-C", dir("pr23", objectConfig(1, 1)), "--pr", "acme/infra#23")
	if want := "input back to its value before version 2."; !strings.Contains(whole, want) {
		t.Errorf("kl plan of {a=1,b=1} does not say %q:\n%s", want, whole)
	}
}

// readTwoConfig: b reads net, an object of cidr and short.
const readTwoConfig = `resource "terraform_data" "net" {
  input = { cidr = "NET", short = "SHORT" }
}

resource "terraform_data" "b" {
  input = "${terraform_data.net.output.cidr}/BV"
}
`

// TestSincePlanReadChangeOfEachVersion (defect 7 of the issue 12 review):
// after plan B (source serial 1), which reads net, version 2 (PR #41)
// changes net's cidr and version 3 (PR #42) only its short. Each version's
// section shows its own change, credited to its own pull request: version
// 3's does not show the cidr change, which PR #41 made.
func TestSincePlanReadChangeOfEachVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	k := setup(t)
	dir := func(name, net, short, bv string) string {
		d := filepath.Join(k.dir, name)
		write(t, filepath.Join(d, "main.tf"), strings.NewReplacer("NET", net, "SHORT", short, "BV", bv).Replace(readTwoConfig))
		return d
	}
	k.ok("state", "init", "prod")
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", "prod", "-C", dir("main", "10.0.0.0/16", "k9", "v0"))))
	b := reULID.FindString(k.ok("plan", "--state", "prod", "-C", dir("pr-b", "10.0.0.0/16", "k9", "v1"), "--target", "terraform_data.b", "--pr", "acme/infra#40"))
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", "prod", "-C", dir("pr41", "10.1.0.0/16", "k9", "v0"), "--pr", "acme/infra#41",
		"--target", "terraform_data.net")))
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", "prod", "-C", dir("pr42", "10.1.0.0/16", "k10", "v0"), "--pr", "acme/infra#42",
		"--target", "terraform_data.net")))

	out := k.ok("history", "--since-plan", b)
	i, j := strings.Index(out, "What version 2 changed in what the plan reads"), strings.Index(out, "What version 3 changed in what the plan reads")
	if i < 0 || j < i {
		t.Fatalf("kl history --since-plan does not show versions 2 and 3's read changes in order:\n%s", out)
	}
	v2, v3 := out[i:j], out[j:]
	for _, c := range []struct {
		section, name, want string
		has                 bool
	}{
		{v2, "version 2", "(acme/infra#41, alice)", true},
		{v2, "version 2", `~ cidr = "10.0.0.0/16" -> "10.1.0.0/16"`, true},
		{v2, "version 2", `"k9" -> "k10"`, false},
		{v3, "version 3", "(acme/infra#42, alice)", true},
		{v3, "version 3", `~ short = "k9" -> "k10"`, true},
		{v3, "version 3", `"10.0.0.0/16" -> "10.1.0.0/16"`, false},
		{v3, "version 3", "since source serial", false},
	} {
		if strings.Contains(c.section, c.want) != c.has {
			t.Errorf("%s's section: contains %q = %v, want %v:\n%s", c.name, c.want, !c.has, c.has, c.section)
		}
	}
}
