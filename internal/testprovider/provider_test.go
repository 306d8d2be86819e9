package testprovider_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/testprovider"
	"github.com/kilolock/kilolock/internal/testprovider/tptest"
)

// tf runs the real terraform in dir with the provider's environment plus
// env, and returns stdout, stderr and the exit code.
func tf(t *testing.T, p *tptest.Provider, dir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command("terraform", append([]string{args[0], "-no-color"}, args[1:]...)...)
	cmd.Dir = dir
	cmd.Env = append(append(append(os.Environ(), p.Env()...), "TF_IN_AUTOMATION=1"), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errOut.String(), ee.ExitCode()
	case err != nil:
		t.Fatalf("terraform %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), 0
}

// ok runs terraform and fails t unless it exits 0.
func ok(t *testing.T, p *tptest.Provider, dir string, env []string, args ...string) string {
	t.Helper()
	out, errOut, code := tf(t, p, dir, env, args...)
	if code != 0 {
		t.Fatalf("terraform %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// says reports whether text holds want once Terraform's line wrapping is
// undone (every run of white space read as one space).
func says(text, want string) bool {
	return strings.Contains(strings.Join(strings.Fields(text), " "), want)
}

func writeConfig(t *testing.T, dir, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(testprovider.RequiredProvidersBlock+body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// instance is one resource instance of a state file.
type instance struct {
	SchemaVersion int                        `json:"schema_version"`
	Attributes    map[string]json.RawMessage `json:"attributes"`
}

// readState returns the instances of dir's terraform.tfstate by address
// ("kltest_object.a", "kltest_object.b[0]", "data.kltest_object.a").
func readState(t *testing.T, dir string) map[string]instance {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Resources []struct {
			Mode, Type, Name string
			Instances        []struct {
				instance
				IndexKey any `json:"index_key"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	out := map[string]instance{}
	for _, r := range st.Resources {
		for _, in := range r.Instances {
			a := r.Type + "." + r.Name
			if r.Mode == "data" {
				a = "data." + a
			}
			if in.IndexKey != nil {
				k, _ := json.Marshal(in.IndexKey)
				a += "[" + string(k) + "]"
			}
			out[a] = in.instance
		}
	}
	return out
}

func str(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s is not a string: %v", raw, err)
	}
	return s
}

const objectsConfig = `
resource "kltest_object" "a" {
  name   = "a"
  delay  = "200ms"
  secret = "hunter2-secret"
  settings = {
    size   = 3
    labels = { env = "prod" }
  }
  rule {
    port = 443
    cidr = "10.0.0.0/8"
  }
  rule {
    port = 80
    cidr = "0.0.0.0/0"
  }
}

resource "kltest_object" "b" {
  count = 2
  name  = "b${count.index}"
}

data "kltest_object" "a" {
  id = kltest_object.a.id
}

output "a_labels" {
  value = data.kltest_object.a.labels
}
`

// TestObjectLifecycle runs the provider under the real Terraform: init
// installs it from the filesystem mirror into the plugin cache dir; an
// apply creates objects in the fake API (each create taking its delay),
// with nested attributes, a list of blocks and a sensitive attribute that
// the plan masks; the data source reads one back; an in-place update
// keeps id and created_at; import into a fresh state reads every attribute
// from the API (the next plan changes nothing); an object changed outside
// Terraform shows as drift; destroy deletes the objects.
func TestObjectLifecycle(t *testing.T) {
	t.Parallel()
	p := tptest.New(t)
	dir := t.TempDir()
	writeConfig(t, dir, objectsConfig)
	init := ok(t, p, dir, nil, "init", "-input=false")
	if !strings.Contains(init, "Installing "+testprovider.Source+" v"+testprovider.Version) {
		t.Errorf("init did not install the provider from the mirror:\n%s", init)
	}
	if got := p.Cached(t); len(got) != 1 {
		t.Errorf("plugin cache holds %v, want the one provider package", got)
	}

	plan := ok(t, p, dir, nil, "plan", "-input=false")
	if strings.Contains(plan, "hunter2-secret") || !strings.Contains(plan, "(sensitive value)") {
		t.Errorf("plan does not mask the sensitive secret:\n%s", plan)
	}
	start := time.Now()
	ok(t, p, dir, nil, "apply", "-input=false", "-auto-approve")
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("apply took %v: the create of kltest_object.a waits its delay of 200ms", took)
	}
	st := readState(t, dir)
	a := st["kltest_object.a"]
	if objs := p.Objects(t); len(objs) != 3 {
		t.Fatalf("API holds %v, want 3 objects", objs)
	}
	if got := string(a.Attributes["rule"]); !strings.Contains(got, `"port":443`) && !strings.Contains(got, `"port": 443`) {
		t.Errorf("rule blocks in state = %s", got)
	}
	if !regexp.MustCompile(`^\d+$`).MatchString(str(t, a.Attributes["created_at"])) {
		t.Errorf("created_at at schema version 0 = %s, want Unix seconds", a.Attributes["created_at"])
	}
	if d := st["data.kltest_object.a"]; str(t, d.Attributes["fingerprint"]) != str(t, a.Attributes["fingerprint"]) {
		t.Errorf("data source read fingerprint %s, the resource has %s", d.Attributes["fingerprint"], a.Attributes["fingerprint"])
	}
	if out := ok(t, p, dir, nil, "output", "-json", "a_labels"); !strings.Contains(out, `"env":"prod"`) {
		t.Errorf("data source labels = %s", out)
	}

	// An in-place update: same id and created_at, a new fingerprint.
	writeConfig(t, dir, strings.Replace(objectsConfig, `size   = 3`, `size   = 4`, 1))
	ok(t, p, dir, nil, "apply", "-input=false", "-auto-approve")
	a2 := readState(t, dir)["kltest_object.a"]
	if str(t, a2.Attributes["id"]) != str(t, a.Attributes["id"]) || str(t, a2.Attributes["created_at"]) != str(t, a.Attributes["created_at"]) ||
		str(t, a2.Attributes["fingerprint"]) == str(t, a.Attributes["fingerprint"]) {
		t.Errorf("update: before %v, after %v; want the same id and created_at, another fingerprint", a.Attributes, a2.Attributes)
	}

	// Import into a fresh state: every attribute from the API.
	imp := t.TempDir()
	writeConfig(t, imp, strings.Replace(objectsConfig, `size   = 3`, `size   = 4`, 1))
	ok(t, p, imp, nil, "init", "-input=false")
	ok(t, p, imp, nil, "import", "-input=false", "kltest_object.a", str(t, a.Attributes["id"]))
	if got := readState(t, imp)["kltest_object.a"]; string(got.Attributes["settings"]) != string(a2.Attributes["settings"]) ||
		str(t, got.Attributes["secret"]) != "hunter2-secret" {
		t.Errorf("imported object = %v, want what the apply wrote: %v", got.Attributes, a2.Attributes)
	}
	if out, errOut, code := tf(t, p, imp, nil, "plan", "-input=false", "-detailed-exitcode", "-target", "kltest_object.a"); code != 0 {
		t.Errorf("plan after import: exit %d, want 0 (no changes)\n%s\n%s", code, out, errOut)
	}

	// Changed outside Terraform: drift, planned back.
	obj := filepath.Join(p.APIDir, str(t, a.Attributes["id"])+".json")
	b, err := os.ReadFile(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(obj, bytes.Replace(b, []byte(`"name": "a"`), []byte(`"name": "renamed"`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := ok(t, p, dir, nil, "plan", "-input=false"); !strings.Contains(out, `"renamed" -> "a"`) {
		t.Errorf("plan after a change outside Terraform:\n%s", out)
	}

	ok(t, p, dir, nil, "destroy", "-input=false", "-auto-approve")
	if objs := p.Objects(t); len(objs) != 0 {
		t.Errorf("API holds %v after destroy", objs)
	}
}

// TestSchemaUpgrade raises the schema version a test can raise: objects
// applied at version 0, planned with KLTEST_SCHEMA_VERSION=1, change
// nothing (the plan says so), yet the apply rewrites every object at
// version 1 with created_at in RFC 3339 — Terraform's upgrade of the stored
// objects. The version 0 provider then refuses the state.
func TestSchemaUpgrade(t *testing.T) {
	t.Parallel()
	p := tptest.New(t)
	dir := t.TempDir()
	writeConfig(t, dir, objectsConfig)
	ok(t, p, dir, nil, "init", "-input=false")
	ok(t, p, dir, nil, "apply", "-input=false", "-auto-approve")
	before := readState(t, dir)

	v1 := []string{testprovider.EnvSchemaVersion + "=1"}
	if out, errOut, code := tf(t, p, dir, v1, "plan", "-input=false", "-detailed-exitcode"); code != 0 {
		t.Fatalf("plan at schema version 1: exit %d, want 0 (no changes)\n%s\n%s", code, out, errOut)
	}
	ok(t, p, dir, v1, "apply", "-input=false", "-auto-approve")
	after := readState(t, dir)
	for _, addr := range []string{"kltest_object.a", "kltest_object.b[0]", "kltest_object.b[1]"} {
		b, a := before[addr], after[addr]
		if b.SchemaVersion != 0 || a.SchemaVersion != 1 {
			t.Errorf("%s: schema version %d → %d, want 0 → 1", addr, b.SchemaVersion, a.SchemaVersion)
		}
		sec, err := time.Parse(time.RFC3339, str(t, a.Attributes["created_at"]))
		if err != nil || str(t, b.Attributes["created_at"]) != strconv.FormatInt(sec.Unix(), 10) {
			t.Errorf("%s: created_at %s → %s, want Unix seconds → the same time in RFC 3339", addr, b.Attributes["created_at"], a.Attributes["created_at"])
		}
	}
	if out, errOut, code := tf(t, p, dir, v1, "plan", "-input=false", "-detailed-exitcode"); code != 0 {
		t.Errorf("plan after the upgrade: exit %d, want 0\n%s\n%s", code, out, errOut)
	}
	if _, errOut, code := tf(t, p, dir, nil, "plan", "-input=false"); code == 0 || !says(errOut, "newer provider version") {
		t.Errorf("the version 0 provider on a version 1 state: exit %d, want an error saying a newer provider wrote it\n%s", code, errOut)
	}
}

// TestBadInput: a delay that is not a duration and a schema version the
// provider does not know are refused with a message naming them.
func TestBadInput(t *testing.T) {
	t.Parallel()
	p := tptest.New(t)
	dir := t.TempDir()
	writeConfig(t, dir, `resource "kltest_object" "a" {
  name  = "a"
  delay = "soon"
}
`)
	ok(t, p, dir, nil, "init", "-input=false")
	if _, errOut, code := tf(t, p, dir, nil, "plan", "-input=false"); code == 0 || !says(errOut, `delay "soon" is not a duration`) {
		t.Errorf("delay = \"soon\": exit %d, stderr:\n%s", code, errOut)
	}
	writeConfig(t, dir, `resource "kltest_object" "a" {
  name = "a"
}
`)
	if _, errOut, code := tf(t, p, dir, []string{testprovider.EnvSchemaVersion + "=7"}, "plan", "-input=false"); code == 0 ||
		!says(errOut, testprovider.EnvSchemaVersion+`="7": want a schema version from 0 to 1`) {
		t.Errorf("%s=7: exit %d, stderr:\n%s", testprovider.EnvSchemaVersion, code, errOut)
	}
	if _, errOut, code := tf(t, p, dir, []string{testprovider.EnvAPIDir + "="}, "plan", "-input=false"); code == 0 ||
		!says(errOut, `Set api_dir in the provider "kltest" block, or `+testprovider.EnvAPIDir) {
		t.Errorf("no API directory: exit %d, stderr:\n%s", code, errOut)
	}
}

// TestSchemaVersion parses the variable's values.
func TestSchemaVersion(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"": 0, "0": 0, "1": 1} {
		if got, err := testprovider.SchemaVersion(in); err != nil || got != want {
			t.Errorf("SchemaVersion(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"2", "-1", "one", " 1"} {
		if _, err := testprovider.SchemaVersion(in); err == nil || !strings.Contains(err.Error(), testprovider.EnvSchemaVersion) {
			t.Errorf("SchemaVersion(%q) = %v, want an error naming %s", in, err, testprovider.EnvSchemaVersion)
		}
	}
}
