package plandiff_test

import (
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/plandiff"
	"github.com/kilolock/kilolock/internal/terraform"
)

// jsonencodeConfig copies a sensitive list into another instance through
// jsonencode: Terraform's plan JSON leaves the copy unmarked, and
// jsonencode escapes the secret's < > & as \u003c \u003e \u0026 and its
// " \ as \" \\.
const jsonencodeConfig = `
variable "lst" {
  type      = list(string)
  sensitive = true
}
resource "terraform_data" "l" { input = var.lst }
resource "terraform_data" "j" { input = jsonencode(terraform_data.l.output) }
resource "terraform_data" "k" { input = "prefix:${jsonencode(jsonencode(terraform_data.l.output))}" }
`

// TestJSONEncodedSecretMasked: a secret holding < > & " \ that went
// through jsonencode (once, and twice) into an instance the state does
// not mark is masked in every rendering of the diff: the value-matching
// matches the secret's JSON string encodings too, not only its raw form
// (review of issue 12, defect 3). Real Terraform.
func TestJSONEncodedSecretMasked(t *testing.T) {
	const marker = "Secret42xq" // in the secret, in none of its escapes
	secret := `P&ss<w0rd>"` + marker + `\z`
	sc := scenario{
		name:  "jsonencode",
		v1:    map[string]string{"main.tf": jsonencodeConfig},
		v2:    map[string]string{"main.tf": jsonencodeConfig},
		vars1: []string{"-var", `lst=["` + strings.NewReplacer(`"`, `\"`, `\`, `\\`).Replace(secret) + `","c"]`},
		vars2: []string{"-var", `lst=["another-value-9876","c"]`},
	}
	rp := planScenario(t, sc)
	if !strings.Contains(string(rp.planJSON), marker) {
		t.Fatalf("the plan JSON does not hold the secret: the scenario tests nothing\n%s", rp.planJSON)
	}
	plan, err := terraform.ParsePlanJSON(rp.planJSON)
	if err != nil {
		t.Fatal(err)
	}
	d, err := plandiff.Build(plan, plandiff.Options{PriorState: rp.prior})
	if err != nil {
		t.Fatal(err)
	}
	for name, out := range renderings(t, d) {
		if strings.Contains(out, marker) {
			t.Errorf("the %s rendering of the diff holds the secret:\n%s", name, out)
		}
	}
	secrets, err := plandiff.Secrets(plan, plandiff.Options{PriorState: rp.prior})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range secrets {
		found = found || s == secret
	}
	if !found {
		t.Errorf("Secrets = %q; want the raw secret %q among them", secrets, secret)
	}
}
