package cli_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"github.com/kilolock/kilolock/internal/store"
	"path/filepath"
	"strings"
	"testing"
)

// diffConfig has a sensitive variable (set by a var file: no TF_VAR_* to
// mask) in a terraform_data input — which Terraform copies into its output
// unmarked — a copy of that output in another resource, and a sensitive
// output.
const diffConfig = `variable "secret" {
  type      = string
  sensitive = true
}

resource "terraform_data" "s" {
  input = var.secret
}

resource "terraform_data" "copy" {
  input = terraform_data.s.output
}

resource "terraform_data" "plain" {
  input = { name = "web", size = SIZE }
}

output "secret" {
  value     = var.secret
  sensitive = true
}
`

// TestPlanDiffSecret: kl plan prints the plan's diff after the envelope,
// kl run show shows it, --json carries it (ADR 0044) — and the sensitive
// variable's value appears in none of it, nor in kl's debug log, nor in a
// store row or artifact that is not Terraform's own (the saved plan, the
// configuration archive holding the var file, the states): not even where
// Terraform itself prints it (the old value of terraform_data.s's output
// and of the copy, on the second plan).
func TestPlanDiffSecret(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	const one, two = "diff-secret-first-1357", "diff-secret-second-2468"
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	env := append(append([]string(nil), k.env...), "KL_LOG_LEVEL=debug")
	kl, printed := k.recording(env)
	planApply := func(secret, size string) (plan, text string) {
		t.Helper()
		write(t, filepath.Join(cfg, "main.tf"), strings.Replace(diffConfig, "SIZE", size, 1))
		write(t, filepath.Join(cfg, "secret.tfvars"), `secret = "`+secret+`"`+"\n")
		text = kl("plan", "--state", "prod", "-C", cfg, "--var-file", "secret.tfvars")
		plan = reULID.FindString(text)
		kl("apply", plan)
		return plan, text
	}
	kl("state", "init", "prod")
	planApply(one, "1")
	plan, text := planApply(two, "2")

	for _, want := range []string{
		"Diff: 3 to change, 1 output to change\n",
		"  # terraform_data.s will be updated in-place\n",
		"      ~ input  = (sensitive value)\n",
		"      ~ output = (sensitive value) -> (known after apply)\n",
		"  ~ secret = (sensitive value)\n",
		"          ~ size = 1 -> 2\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("kl plan does not print %q:\n%s", want, text)
		}
	}
	if d, w := strings.Index(text, "\nDiff: "), strings.Index(text, "\nWrite set"); d < 0 || w < d {
		t.Errorf("kl plan prints the diff at %d, the write set at %d: want the diff right after the envelope", d, w)
	}
	if show := kl("run", "show", plan); !strings.Contains(show, "Diff of plan "+plan+": 3 to change, 1 output to change") {
		t.Errorf("kl run show %s does not show the plan's diff:\n%s", plan, show)
	}
	var doc struct {
		Schema string `json:"schema"`
		Diff   *struct {
			Counts    struct{ Change, Outputs int } `json:"counts"`
			Resources []struct {
				Address string `json:"address"`
				Action  string `json:"action"`
			} `json:"resources"`
		} `json:"diff"`
	}
	for _, args := range [][]string{{"run", "show", plan, "--json"}, {"run", "show", reULID.FindString(kl("runs")), "--json"}} {
		if err := json.Unmarshal([]byte(kl(args...)), &doc); err != nil {
			t.Fatal(err)
		}
		if doc.Diff == nil || doc.Diff.Counts.Change != 3 || doc.Diff.Counts.Outputs != 1 || len(doc.Diff.Resources) != 3 {
			t.Errorf("kl %s: diff %+v; want 3 changes and the output", strings.Join(args, " "), doc.Diff)
		}
	}
	kl("history", "--state", "prod", "--json")
	kl("runs", "--json")

	for _, v := range []string{one, two} {
		if strings.Contains(printed.String(), v) {
			t.Errorf("kl printed the sensitive value %q:\n%s", v, printed.String())
		}
		if dump := k.dump(); strings.Contains(dump, v) {
			t.Errorf("the sensitive value %q is in the store's rows", v)
		}
		for _, a := range allArtifacts(t, k.store) {
			terraforms := a.name == "plan.tfplan" || a.name == "config.tar.gz" || strings.HasSuffix(a.name, ".tfstate")
			if bytes.Contains(a.data, []byte(v)) && !terraforms {
				t.Errorf("stored artifact %s of run %s holds the sensitive value %q", a.name, a.run, v)
			}
		}
	}
	diffs := 0
	for _, a := range allArtifacts(t, k.store) {
		if a.name == "diff.json" {
			diffs++
		}
	}
	if diffs != 2 {
		t.Errorf("%d diff.json artifacts stored; want one per plan (2)", diffs)
	}
}

type artifact struct {
	run, name string
	data      []byte
}

// allArtifacts returns every artifact of the store.
func allArtifacts(t *testing.T, path string) []artifact {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT run, name, data FROM artifacts ORDER BY run, name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []artifact
	for rows.Next() {
		var a artifact
		if err := rows.Scan(&a.run, &a.name, &a.data); err != nil {
			t.Fatal(err)
		}
		var err error
		if a.data, err = store.DecodeArtifact(nil, a.run, a.name, a.data); err != nil { // compressed when that pays
			t.Fatal(err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
