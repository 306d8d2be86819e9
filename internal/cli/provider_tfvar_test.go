package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/testprovider"
	"github.com/kilolock/kilolock/internal/testprovider/tptest"
)

// tfVarConfig sets kltest_object.s's sensitive secret and its name from
// variables.
const tfVarConfig = testprovider.RequiredProvidersBlock + `
variable "secret" {
  type      = string
  sensitive = true
}

variable "name" {
  type = string
}

resource "kltest_object" "s" {
  name   = var.name
  secret = var.secret
}
`

// apiObject is one object of the test provider's fake cloud API, as the
// provider stores it (<api dir>/<id>.json).
type apiObject struct {
	ID     string  `json:"id"`
	Name   string  `json:"name"`
	Secret *string `json:"secret"`
}

// onlyObject reads the one object the fake cloud API of p holds.
func onlyObject(t *testing.T, p *tptest.Provider) apiObject {
	t.Helper()
	ids := p.Objects(t)
	if len(ids) != 1 {
		t.Fatalf("the fake API holds %v, want one object", ids)
	}
	raw, err := os.ReadFile(filepath.Join(p.APIDir, ids[0]+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var o apiObject
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatalf("reading API object %s: %v\n%s", ids[0], err, raw)
	}
	return o
}

// TestProviderTFVarSecret (issue 10 §6, ADR 0037) with the test provider:
// TF_VAR_secret in kl's environment reaches the provider's sensitive
// secret attribute — the object the apply creates in the fake cloud API
// holds it — while terraform.tfvars in the configuration, the weakest
// file Terraform loads, still wins over TF_VAR_name (the object's name is
// the file's) and, once it sets secret too, over TF_VAR_secret (the next
// apply updates the object to the file's secret). Neither secret value is
// in anything kl prints: stdout and stderr (with KL_LOG_LEVEL=debug) of
// every plan, apply and view, text and JSON.
func TestProviderTFVarSecret(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform with the test provider")
	}
	t.Parallel()
	const (
		envSecret  = "env-secret-5b1e77c2"
		envName    = "name-from-env-3310"
		fileName   = "name-from-tfvars"
		fileSecret = "file-secret-90ad4e1f"
	)
	k := setup(t)
	p := withProvider(k)
	k.env = envWith(k.env, "TF_VAR_secret="+envSecret, "TF_VAR_name="+envName, "KL_LOG_LEVEL=debug")
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), tfVarConfig)
	write(t, filepath.Join(cfg, "terraform.tfvars"), "name = \""+fileName+"\"\n")
	var printed strings.Builder
	kl := func(args ...string) string {
		t.Helper()
		r := k.run(args...)
		if r.err != nil {
			t.Fatalf("kl %s: %v\nstderr:\n%s", strings.Join(args, " "), r.err, r.errOut)
		}
		quiet(t, args, r)
		printed.WriteString(r.out + r.errOut)
		return r.out
	}
	views := func(plan, apply string) {
		t.Helper()
		for _, args := range [][]string{
			{"run", "show", plan}, {"run", "show", plan, "--json"}, {"run", "show", apply}, {"run", "show", apply, "--json"},
			{"why", apply}, {"why", apply, "--json"}, {"history", "--state", "prod"}, {"history", "--state", "prod", "--json"},
			{"runs", "--json"}, {"status", "--json"},
		} {
			kl(args...)
		}
	}
	planApply := func() {
		t.Helper()
		var plan planDoc
		if err := json.Unmarshal([]byte(kl("plan", "--state", "prod", "-C", cfg, "--json")), &plan); err != nil {
			t.Fatal(err)
		}
		kl("run", "show", plan.Run.ID) // the plan's text view, diff included
		var apply storyDoc
		if err := json.Unmarshal([]byte(kl("apply", plan.Run.ID, "--json")), &apply); err != nil {
			t.Fatal(err)
		}
		if apply.Run.Status != "applied" {
			t.Fatalf("kl apply %s: %s (%s), want applied", plan.Run.ID, apply.Run.Status, apply.Run.Reason)
		}
		views(plan.Run.ID, apply.Run.ID)
	}

	kl("state", "init", "prod")
	planApply()
	o := onlyObject(t, p)
	if o.Secret == nil || *o.Secret != envSecret || o.Name != fileName {
		t.Errorf("API object %s: name %q, secret %v; want name %q (terraform.tfvars wins over TF_VAR_name), TF_VAR_secret's value",
			o.ID, o.Name, o.Secret, fileName)
	}
	first := o.ID

	// terraform.tfvars now sets secret too: it wins over TF_VAR_secret.
	write(t, filepath.Join(cfg, "terraform.tfvars"), "name = \""+fileName+"\"\nsecret = \""+fileSecret+"\"\n")
	planApply()
	o = onlyObject(t, p)
	if o.ID != first || o.Secret == nil || *o.Secret != fileSecret {
		t.Errorf("API object %s after the second apply: secret %v; want object %s updated to terraform.tfvars's secret", o.ID, o.Secret, first)
	}

	for _, v := range []string{envSecret, fileSecret} {
		if strings.Contains(printed.String(), v) {
			t.Errorf("kl printed the secret %q:\n%s", v, printed.String())
		}
	}
	if !strings.Contains(printed.String(), "TF_VAR_secret") {
		t.Errorf("kl's debug log does not name the TF_VAR_* it passes on")
	}
}
