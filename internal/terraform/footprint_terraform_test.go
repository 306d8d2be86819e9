package terraform

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// The real-Terraform tests plan a configuration of terraform_data resources
// (built in: no provider download) with a local module and its output, a
// module call with for_each, locals chaining to a resource and a moved
// block, and check the exact footprint and intent of `show -json`.

const realModule = `
variable "seed" { type = string }
locals { label = "app-${var.seed}" }
resource "terraform_data" "db"  { input = local.label }
resource "terraform_data" "svc" { input = terraform_data.db.output }
output "id" { value = terraform_data.svc.output }
`

const realRootV1 = `
variable "seed"      { default = "seed" }
variable "unrelated" { default = "u-1" }
locals {
  prefix = "kl"
  name   = "${local.prefix}-${terraform_data.seed.output}"
  fleet  = toset(["a", "b"])
}
resource "terraform_data" "seed"      { input = var.seed }
resource "terraform_data" "unrelated" { input = var.unrelated }
resource "terraform_data" "old"       { input = "moved-me" }
resource "terraform_data" "web"       { input = local.name }
module "app" {
  source = "./modules/app"
  seed   = terraform_data.seed.output
}
module "fleet" {
  source   = "./modules/app"
  for_each = local.fleet
  seed     = each.key
}
resource "terraform_data" "consumer" { input = module.app.id }
output "web" { value = terraform_data.web.output }
`

// realRootV2 renames old (moved block), and changes web (through locals),
// the fleet (through a variable of a for_each module) and consumer (through
// a module output).
var realRootV2 = strings.NewReplacer(
	`resource "terraform_data" "old"       { input = "moved-me" }`,
	`resource "terraform_data" "renamed"   { input = "moved-me" }
moved {
  from = terraform_data.old
  to   = terraform_data.renamed
}`,
	`{ input = local.name }`, `{ input = "${local.name}-v2" }`,
	`seed     = each.key`, `seed     = "${each.key}-v2"`,
	`{ input = module.app.id }`, `{ input = "${module.app.id}-v2" }`,
).Replace(realRootV1)

type realTerraform struct {
	t   *testing.T
	bin string
	tmp string
}

func setupRealTerraform(t *testing.T) *realTerraform {
	t.Helper()
	bin, err := FindBinary(os.Getenv)
	if err != nil {
		t.Skipf("skipping the real Terraform test: %v", err)
	}
	return &realTerraform{t: t, bin: bin, tmp: t.TempDir()}
}

// dir lays out the root config (and the module) plus an optional state in
// a fresh directory and runs init there. It returns the directory and its
// TF_DATA_DIR.
func (r *realTerraform) dir(name, root string, state []byte) (string, string) {
	r.t.Helper()
	dir := filepath.Join(r.tmp, name)
	files := map[string]string{"main.tf": root, "modules/app/main.tf": realModule}
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	if state != nil {
		if err := os.WriteFile(filepath.Join(dir, "terraform.tfstate"), state, 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	data := filepath.Join(r.tmp, name+"-data")
	r.run(dir, data, "init", "-input=false", "-no-color")
	return dir, data
}

func (r *realTerraform) run(dir, data string, args ...string) []byte {
	r.t.Helper()
	cmd := exec.Command(r.bin, args...)
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + r.tmp,
		"TF_CLI_CONFIG_FILE=/dev/null",
		"TF_DATA_DIR=" + data,
		"TF_IN_AUTOMATION=1",
		"CHECKPOINT_DISABLE=1",
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("terraform %s in %s: %v\n%s%s", strings.Join(args, " "), dir, err, out, stderr.String())
	}
	return out
}

// apply applies root to state (nil: empty) and returns the new state.
func (r *realTerraform) apply(name, root string, state []byte, vars ...string) []byte {
	r.t.Helper()
	dir, data := r.dir(name, root, state)
	r.run(dir, data, append([]string{"apply", "-auto-approve", "-input=false", "-no-color"}, vars...)...)
	b, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
	if err != nil {
		r.t.Fatal(err)
	}
	return b
}

// plan plans root against state and returns `show -json` of the saved plan,
// the config dir and its modules manifest.
func (r *realTerraform) plan(name, root string, state []byte, vars ...string) ([]byte, string, string) {
	r.t.Helper()
	dir, data := r.dir(name, root, state)
	r.run(dir, data, append([]string{"plan", "-out=plan.tfplan", "-input=false", "-no-color"}, vars...)...)
	return r.run(dir, data, "show", "-json", "plan.tfplan"), dir, filepath.Join(data, "modules", "modules.json")
}

func TestFootprintRealTerraform(t *testing.T) {
	t.Parallel()
	r := setupRealTerraform(t)
	s1 := r.apply("v1", realRootV1, nil)
	planJSON, dir, manifest := r.plan("v2", realRootV2, s1)

	wantWrite := []string{ // instances (ADR 0065)
		`module.fleet["a"].terraform_data.db`,
		`module.fleet["a"].terraform_data.svc`,
		`module.fleet["b"].terraform_data.db`,
		`module.fleet["b"].terraform_data.svc`,
		"output.web",
		"terraform_data.consumer",
		"terraform_data.old",
		"terraform_data.renamed",
		"terraform_data.web",
	}
	exactRead := []string{
		"module.app.terraform_data.svc", // module.app.id (db, below it, is not written: not read)
		"module.fleet.terraform_data.db",
		"terraform_data.seed", // local.name → terraform_data.seed
		"terraform_data.web",  // output.web
	}
	tests := map[string]struct {
		opts    ExtractOptions
		read    []string
		widened []string
	}{
		"config dir and manifest": {opts: ExtractOptions{ConfigDir: dir, ModulesManifest: manifest}, read: exactRead},
		"config dir, module dirs from sources": {
			opts: ExtractOptions{ConfigDir: dir, ModulesManifest: filepath.Join(dir, "no-such-manifest.json")},
			read: exactRead,
		},
		"plan JSON alone": {
			// "*" covers terraform_data.seed, read through local.name.
			read: []string{"*", "module.app.terraform_data.svc", "module.fleet.*", "module.fleet.terraform_data.db", "terraform_data.web"},
			widened: []string{
				"* <- local.fleet in root, local.name in root",
				"module.fleet.* <- local.label in module.fleet",
			},
		},
	}
	for name, tt := range tests {
		fp, sum, err := Footprint(planJSON, tt.opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := fpAddrs(fp.Write); !reflect.DeepEqual(got, wantWrite) {
			t.Errorf("%s: write = %q, want %q", name, got, wantWrite)
		}
		want := engine.NewAddressSet()
		for _, a := range tt.read {
			want = want.Union(engine.AddressSet{engine.Address(a)})
		}
		if got := fpAddrs(fp.Read); !reflect.DeepEqual(got, fpAddrs(want)) {
			t.Errorf("%s: read = %q, want %q", name, got, want)
		}
		var widened []string
		for _, w := range fp.Widened {
			widened = append(widened, string(w.Address)+" <- "+w.From)
		}
		if !reflect.DeepEqual(widened, tt.widened) {
			t.Errorf("%s: widened = %q, want %q", name, widened, tt.widened)
		}
		wantSum := engine.PlanSummary{Change: 6, Move: 1, Outputs: 1} // fleet a, b: db, svc; web; consumer
		if sum != wantSum {
			t.Errorf("%s: summary = %+v, want %+v", name, sum, wantSum)
		}
	}
}

func TestIntentRealTerraform(t *testing.T) {
	t.Parallel()
	r := setupRealTerraform(t)
	s1 := r.apply("v1", realRootV1, nil)
	// Another run changed something this plan does not read…
	s2 := r.apply("unrelated", realRootV1, s1, "-var=unrelated=u-2")
	// …and another changed a value this plan reads.
	s3 := r.apply("seed", realRootV1, s1, "-var=seed=seed-2")

	intent := func(name string, state []byte, vars ...string) engine.Intent {
		t.Helper()
		b, _, _ := r.plan(name, realRootV2, state, vars...)
		plan, err := ParsePlanJSON(b)
		if err != nil {
			t.Fatal(err)
		}
		in, err := ExtractIntent(plan)
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	reviewed := intent("p1", s1)
	if got := len(reviewed.Changes); got != 8 { // 6 instance updates, the move, output.web
		t.Errorf("reviewed intent has %d changes, want 8: %v", got, reviewed.Changes)
	}
	if ic := reviewed.Changes["terraform_data.renamed"]; ic.PreviousAddress != "terraform_data.old" || !reflect.DeepEqual(ic.Actions, []string{"no-op"}) {
		t.Errorf("move intent = %+v, want no-op from terraform_data.old", ic)
	}
	if d := reviewed.Diff(intent("p2", s2, "-var=unrelated=u-2")); len(d) != 0 {
		t.Errorf("re-plan after an unrelated change: intent differs at %q, want the same intent", d)
	}
	want := []string{"terraform_data.consumer", "terraform_data.web"}
	if d := reviewed.Diff(intent("p3", s3, "-var=seed=seed-2")); !reflect.DeepEqual(d, want) {
		t.Errorf("re-plan after a read value changed: intent differs at %q, want %q", d, want)
	}
}
