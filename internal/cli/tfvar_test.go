package cli_test

import (
	"archive/zip"
	"bytes"
	"database/sql"
	"encoding/json"
	"github.com/kilolock/kilolock/internal/store"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTFVarReachesTerraform: kl hands TF_VAR_* in its environment to
// Terraform with Terraform's lowest precedence (a --var-file wins over
// TF_VAR_x), and no value is printed — on stdout, stderr or in kl's debug
// log — nor stored outside what Terraform writes itself (the saved plan
// and the state): not in a run, a marker, a report, the intent, the
// configuration archive or the work dir, which is gone after the run.
func TestTFVarReachesTerraform(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	const envX, secret = "x-from-env-9731", "s-secret-from-env-2468"
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), `variable "x" {
  type = string
}

variable "s" {
  type      = string
  sensitive = true
}

resource "terraform_data" "a" {
  input = var.x
}

resource "terraform_data" "s" {
  input = var.s
}

output "x" {
  value = var.x
}
`)
	write(t, filepath.Join(cfg, "prod.tfvars"), `x = "x-from-var-file"`+"\n")
	env := append(append([]string(nil), k.env...), "TF_VAR_x="+envX, "TF_VAR_s="+secret, "KL_LOG_LEVEL=debug")
	kl, printed := k.recording(env)
	kl("state", "init", "prod")
	plan := reULID.FindString(kl("plan", "--state", "prod", "-C", cfg, "--var-file", filepath.Join(cfg, "prod.tfvars")))
	apply := reULID.FindString(kl("apply", plan))
	for _, args := range [][]string{
		{"run", "show", plan}, {"run", "show", apply}, {"run", "show", apply, "--json"}, {"why", apply, "--json"},
		{"history", "--state", "prod", "--json"}, {"runs", "--json"}, {"status", "--json"},
	} {
		kl(args...)
	}
	if !strings.Contains(printed.String(), "TF_VAR_s") {
		t.Errorf("kl's debug log does not name the TF_VAR_* it passes:\n%s", printed.String())
	}
	for _, v := range []string{envX, secret} {
		if strings.Contains(printed.String(), v) {
			t.Errorf("kl printed the value %q of a TF_VAR_*:\n%s", v, printed.String())
		}
	}

	// The applied state: s came from the environment, x from the var file.
	r := k.runWith(env, "", "state", "pull", "prod")
	if r.err != nil {
		t.Fatalf("kl state pull: %v", r.err)
	}
	var st struct {
		Outputs   map[string]struct{ Value string } `json:"outputs"`
		Resources []struct {
			Name      string `json:"name"`
			Instances []struct {
				Attributes struct {
					Input struct{ Value string } `json:"input"`
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal([]byte(r.out), &st); err != nil {
		t.Fatalf("kl state pull: %v\n%s", err, r.out)
	}
	if got := st.Outputs["x"].Value; got != "x-from-var-file" {
		t.Errorf("var.x = %q, want the var file's x-from-var-file (a var file wins over TF_VAR_x)", got)
	}
	var gotS string
	for _, res := range st.Resources {
		if res.Name == "s" && len(res.Instances) == 1 {
			gotS = res.Instances[0].Attributes.Input.Value
		}
	}
	if gotS != secret {
		t.Errorf("terraform_data.s input = %q, want TF_VAR_s's value", gotS)
	}

	// The store: only what Terraform wrote — the saved plan, the state
	// (versions, the apply's result and checkpoint) — holds a value.
	if dump := k.dump(); strings.Contains(dump, envX) || strings.Contains(dump, secret) {
		t.Errorf("a value is in the store's rows (runs, markers, provenance, …):\n%s", dump)
	}
	arts := storedArtifacts(t, k.store)
	for name, data := range arts {
		holds := bytes.Contains(data, []byte(secret)) || bytes.Contains(data, []byte(envX))
		// Terraform's own: the saved plan, and the state the apply wrote
		// (its result and its last checkpoint).
		terraforms := name == "plan.tfplan" || strings.HasSuffix(name, ".tfstate")
		if holds && !terraforms {
			t.Errorf("stored artifact %s holds a value", name)
		}
	}
	if tfplan := zipEntry(t, arts["plan.tfplan"], "tfplan"); !bytes.Contains(tfplan, []byte(secret)) || bytes.Contains(tfplan, []byte(envX)) {
		t.Errorf("the saved plan's tfplan: holds TF_VAR_s %v (want true: Terraform stores variable values), TF_VAR_x %v (want false: the var file won)",
			bytes.Contains(tfplan, []byte(secret)), bytes.Contains(tfplan, []byte(envX)))
	}
	if ents, err := os.ReadDir(filepath.Join(k.dir, "runs")); err != nil || len(ents) != 0 {
		t.Errorf("work dirs after the runs: %v (%v), want none", ents, err)
	}
}

// storedArtifacts returns the store's artifacts by name, for one plan and
// its apply (the names are per run).
func storedArtifacts(t *testing.T, path string) map[string][]byte {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT run, name, data FROM artifacts`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var run, name string
		var stored []byte
		if err := rows.Scan(&run, &name, &stored); err != nil {
			t.Fatal(err)
		}
		data, err := store.DecodeArtifact(nil, run, name, stored) // compressed when that pays
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := out[name]; dup {
			t.Fatalf("two artifacts named %s", name)
		}
		out[name] = data
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// zipEntry returns the entry name of the zip archive b.
func zipEntry(t *testing.T, b []byte, name string) []byte {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("reading the saved plan: %v", err)
	}
	f, err := zr.Open(name)
	if err != nil {
		t.Fatalf("reading the saved plan: %v", err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
