package plandiff_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/terraform"
	"github.com/kilolock/kilolock/internal/testprovider"
	"github.com/kilolock/kilolock/internal/testprovider/tptest"
)

// The real plans: each scenario applies version 1 of a configuration with
// the real Terraform, then plans version 2 against the state it wrote.

// Secrets of the scenarios: what no rendering of the diff may hold.
const (
	secretOne = "s3cr3t-value-one"
	secretTwo = "s3cr3t-value-two"
	apiKeyOne = "kl-api-key-0001"
	apiKeyTwo = "kl-api-key-0002"
)

// scenario is a configuration in two versions, applied then planned.
type scenario struct {
	name string
	// v1 is applied, v2 planned; file name → content.
	v1, v2 map[string]string
	// vars1 and vars2 are the -var arguments of the apply and the plan.
	vars1, vars2 []string
	// secrets must appear in no rendering of the diff.
	secrets []string
	// provider says the scenario needs the test provider (internal/testprovider).
	provider bool
}

const dataModule = `
variable "secret" {
  type      = string
  sensitive = true
}
variable "gen" { type = number }
resource "terraform_data" "inner" {
  input = { pw = var.secret, n = var.gen }
}
`

const dataV1 = `
variable "secret" {
  type      = string
  sensitive = true
}
variable "gen" { type = number }
resource "terraform_data" "nested" {
  input = {
    name  = "web"
    tags  = { env = "prod", team = "a", old = "x" }
    ports = [80, 443, 8080]
    rules = [{ port = 80, cidr = "10.0.0.0/8" }, { port = 443, cidr = "0.0.0.0/0" }]
    inner = { deep = { x = 1, y = "same" } }
    set   = toset(["a", "b", "c"])
  }
}
resource "terraform_data" "secret" { input = var.secret }
# Terraform copies the sensitive input into output unmarked: so is this copy.
resource "terraform_data" "copy" { input = terraform_data.secret.output }
resource "terraform_data" "gone" { input = "bye" }
resource "terraform_data" "old" { input = "moving" }
resource "terraform_data" "kept" { input = "keep the object" }
resource "terraform_data" "rep" {
  input            = "r"
  triggers_replace = ["v${var.gen}"]
}
module "m" {
  count  = 1
  source = "./m"
  secret = var.secret
  gen    = var.gen
}
output "secret" {
  value     = var.secret
  sensitive = true
}
output "plain" { value = "p${var.gen}" }
output "obj" { value = { a = var.gen, b = "x" } }
`

const dataV2 = `
variable "secret" {
  type      = string
  sensitive = true
}
variable "gen" { type = number }
resource "terraform_data" "nested" {
  input = {
    name  = "web"
    tags  = { env = "prod", team = "b", new = "y" }
    ports = [80, 8443, 8080, 9090]
    rules = [{ port = 80, cidr = "10.0.0.0/16" }, { port = 443, cidr = "0.0.0.0/0" }]
    inner = { deep = { x = 2, y = "same" } }
    set   = toset(["a", "c", "d"])
  }
}
resource "terraform_data" "secret" { input = var.secret }
resource "terraform_data" "copy" { input = terraform_data.secret.output }
moved {
  from = terraform_data.old
  to   = terraform_data.renamed
}
resource "terraform_data" "renamed" { input = "moving" }
removed {
  from = terraform_data.kept
  lifecycle {
    destroy = false
  }
}
resource "terraform_data" "rep" {
  input            = "r"
  triggers_replace = ["v${var.gen}"]
}
resource "terraform_data" "fresh" {
  input = { from = terraform_data.nested.output.name, fixed = "f" }
}
import {
  to = terraform_data.imported
  id = "imp-1"
}
resource "terraform_data" "imported" {}
module "m" {
  count  = 1
  source = "./m"
  secret = var.secret
  gen    = var.gen
}
output "secret" {
  value     = var.secret
  sensitive = true
}
output "plain" { value = "p${var.gen}" }
output "obj" { value = { a = var.gen, b = "x" } }
output "new" { value = terraform_data.fresh.output }
`

// providerV1 and providerV2 use the test provider: its schema marks
// kltest_object's secret sensitive (the variable is not), settings is a
// nested attribute with a map, rule a list of blocks; the data source
// reads a (its secret sensitive too), during apply once a changes.
const providerV1 = testprovider.RequiredProvidersBlock + `
variable "api_key" { type = string }
resource "kltest_object" "a" {
  name   = "a"
  secret = var.api_key
  settings = {
    size   = 1
    labels = { env = "prod", team = "x" }
  }
  rule {
    port = 80
    cidr = "10.0.0.0/8"
  }
}
resource "kltest_object" "b" { name = "b" }
data "kltest_object" "a" { id = kltest_object.a.id }
`

const providerV2 = testprovider.RequiredProvidersBlock + `
variable "api_key" { type = string }
resource "kltest_object" "a" {
  name   = "a"
  secret = var.api_key
  settings = {
    size   = 2
    labels = { env = "prod", team = "y", tier = "web" }
  }
  rule {
    port = 80
    cidr = "10.0.0.0/16"
  }
  rule {
    port = 443
    cidr = "0.0.0.0/0"
  }
}
resource "kltest_object" "c" {
  name   = "c"
  secret = var.api_key
}
data "kltest_object" "a" { id = kltest_object.a.id }
`

var scenarios = []scenario{
	{
		name:    "terraform_data",
		v1:      map[string]string{"main.tf": dataV1, "m/main.tf": dataModule},
		v2:      map[string]string{"main.tf": dataV2, "m/main.tf": dataModule},
		vars1:   []string{"-var", "secret=" + secretOne, "-var", "gen=1"},
		vars2:   []string{"-var", "secret=" + secretTwo, "-var", "gen=2"},
		secrets: []string{secretOne, secretTwo},
	},
	{
		name:     "kltest",
		v1:       map[string]string{"main.tf": providerV1},
		v2:       map[string]string{"main.tf": providerV2},
		vars1:    []string{"-var", "api_key=" + apiKeyOne},
		vars2:    []string{"-var", "api_key=" + apiKeyTwo},
		secrets:  []string{apiKeyOne, apiKeyTwo},
		provider: true,
	},
}

// realPlan is a scenario planned with the real Terraform: `show -json` of
// the saved plan, `show` of it (Terraform's own rendering, -no-color), the
// state it was planned against, and the `terraform version` line.
type realPlan struct {
	planJSON, show, prior []byte
	version               string
}

// planScenario applies sc.v1 and plans sc.v2 in a temp dir. It skips when
// no Terraform is found.
func planScenario(t *testing.T, sc scenario) realPlan {
	t.Helper()
	bin, err := terraform.FindBinary(os.Getenv)
	if err != nil {
		t.Skipf("skipping the real Terraform test: %v", err)
	}
	tmp := t.TempDir()
	dir, data := filepath.Join(tmp, "cfg"), filepath.Join(tmp, "data")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + tmp, "TF_CLI_CONFIG_FILE=/dev/null",
		"TF_DATA_DIR=" + data, "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1"}
	if sc.provider {
		env = append(env, tptest.New(t).Env()...)
	}
	run := func(args ...string) []byte {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir, cmd.Env = dir, env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("terraform %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return out
	}
	writeFiles(t, dir, sc.v1)
	run("init", "-input=false", "-no-color")
	run(append([]string{"apply", "-auto-approve", "-input=false", "-no-color"}, sc.vars1...)...)
	prior, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, sc.v2)
	run("init", "-input=false", "-no-color")
	run(append([]string{"plan", "-out=plan.tfplan", "-input=false", "-no-color"}, sc.vars2...)...)
	version := strings.SplitN(string(run("version")), "\n", 2)[0]
	return realPlan{
		planJSON: run("show", "-json", "plan.tfplan"),
		show:     run("show", "-no-color", "plan.tfplan"),
		prior:    prior,
		version:  version,
	}
}

// writeFiles replaces the .tf files of dir with files.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	old, _ := filepath.Glob(filepath.Join(dir, "*.tf"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			t.Fatal(err)
		}
	}
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
