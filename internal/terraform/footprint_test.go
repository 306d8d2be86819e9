package terraform

import (
	"archive/zip"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// setupConfigDir writes files (path relative to a temp dir → content) and
// returns the temp dir.
func setupConfigDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fpChange is the JSON of a resource change of addr with actions (a JSON list body).
func fpChange(addr, actions string) string {
	return `{"address":"` + addr + `","change":{"actions":[` + actions + `]}}`
}

func fpAddrs(s engine.AddressSet) []string {
	out := s.Strings()
	if len(out) == 0 {
		return nil
	}
	return out
}

func TestExtractFootprintReferences(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		plan  string
		files map[string]string // config dir; nil: no config dir
		write []string
		read  []string
		// widened lists "ADDRESS <- FROM" per widening.
		widened []string
	}{
		{
			name: "module outputs through two levels",
			plan: `{"format_version":"1.2",
			 "resource_changes":[` + fpChange("terraform_data.r", `"update"`) + `],
			 "configuration":{"root_module":{
			  "resources":[{"address":"terraform_data.r","mode":"managed","type":"terraform_data","name":"r",
			    "expressions":{"input":{"references":["module.a.out.x","module.a.out","module.a"]}}}],
			  "module_calls":{"a":{"source":"./a","module":{
			    "outputs":{"out":{"expression":{"references":["module.b.deep","module.b"]}},
			               "other":{"expression":{"references":["terraform_data.other.output","terraform_data.other"]}}},
			    "resources":[{"address":"terraform_data.other","mode":"managed","type":"terraform_data","name":"other"}],
			    "module_calls":{"b":{"source":"./b","module":{
			      "outputs":{"deep":{"expression":{"references":["terraform_data.x.output","terraform_data.x"]}}},
			      "resources":[{"address":"terraform_data.x","mode":"managed","type":"terraform_data","name":"x"}]}}}}}}}}}`,
			write: []string{"terraform_data.r"},
			read:  []string{"module.a.module.b.terraform_data.x"},
		},
		{
			// Format 0.1 lists each reference once: "module.a" after
			// "module.a.out" is a reference of its own to the whole module
			// object, i.e. all of a's outputs.
			name: "format 0.1 bare module call reads every output",
			plan: `{"format_version":"0.1",
			 "resource_changes":[` + fpChange("terraform_data.r", `"update"`) + `],
			 "configuration":{"root_module":{
			  "resources":[{"address":"terraform_data.r","mode":"managed","type":"terraform_data","name":"r",
			    "expressions":{"input":{"references":["module.a.out","module.a"]}}}],
			  "module_calls":{"a":{"source":"./a","module":{
			    "outputs":{"out":{"expression":{"references":["terraform_data.x"]}},
			               "other":{"expression":{"references":["terraform_data.other"]}}},
			    "resources":[{"address":"terraform_data.x","mode":"managed","type":"terraform_data","name":"x"},
			                 {"address":"terraform_data.other","mode":"managed","type":"terraform_data","name":"other"}]}}}}}}`,
			write: []string{"terraform_data.r"},
			read:  []string{"module.a.terraform_data.other", "module.a.terraform_data.x"},
		},
		{
			// module.a's output passes a root value through a variable: a
			// bare module reference reads it (a module.a.* prefix would not).
			name: "bare module call follows outputs through variables",
			plan: `{"format_version":"1.2",
			 "resource_changes":[` + fpChange("terraform_data.r", `"update"`) + `],
			 "configuration":{"root_module":{
			  "resources":[{"address":"terraform_data.r","mode":"managed","type":"terraform_data","name":"r",
			    "expressions":{"input":{"references":["module.a"]}}},
			   {"address":"terraform_data.seed","mode":"managed","type":"terraform_data","name":"seed"}],
			  "module_calls":{"a":{"source":"./a",
			    "expressions":{"v":{"references":["terraform_data.seed.output","terraform_data.seed"]}},
			    "module":{"outputs":{"pass":{"expression":{"references":["var.v"]}}},"variables":{"v":{}}}}}}}}`,
			write: []string{"terraform_data.r"},
			read:  []string{"terraform_data.seed"},
		},
		{
			// ADR 0065: a literal key reads one instance; a key only known
			// at apply (Terraform lists the resource alone) the resource.
			name: "a reference to one instance reads the instance",
			plan: `{"format_version":"1.2",
			 "resource_changes":[` + fpChange("terraform_data.r", `"update"`) + `,` + fpChange("module.m.terraform_data.q", `"update"`) + `],
			 "configuration":{"root_module":{
			  "resources":[{"address":"terraform_data.r","mode":"managed","type":"terraform_data","name":"r",
			    "expressions":{"input":{"references":["terraform_data.src[\"k\"].output","terraform_data.src[\"k\"]","terraform_data.src",
			      "terraform_data.n[2].id","terraform_data.n[2]","terraform_data.n","terraform_data.dyn"]}}}],
			  "module_calls":{"m":{"source":"./m","for_each_expression":{"constant_value":{"a":1}},"module":{
			    "resources":[{"address":"terraform_data.q","mode":"managed","type":"terraform_data","name":"q",
			      "expressions":{"input":{"references":["terraform_data.p[\"x\"].id","terraform_data.p[\"x\"]","terraform_data.p"]}}}]}}}}}}`,
			write: []string{"module.m.terraform_data.q", "terraform_data.r"},
			read:  []string{`module.m.terraform_data.p["x"]`, "terraform_data.dyn", "terraform_data.n[2]", `terraform_data.src["k"]`},
		},
		{
			name: "var through module calls",
			plan: `{"format_version":"1.2",
			 "resource_changes":[` + fpChange(`module.app.module.db[\"x\"].terraform_data.main[0]`, `"create"`) + `],
			 "configuration":{"root_module":{
			  "resources":[{"address":"terraform_data.seed","mode":"managed","type":"terraform_data","name":"seed"},
			               {"address":"terraform_data.keys","mode":"managed","type":"terraform_data","name":"keys"}],
			  "module_calls":{"app":{"source":"./app",
			    "expressions":{"seed":{"references":["terraform_data.seed.output","terraform_data.seed"]},
			                   "unused":{"references":["terraform_data.unused"]}},
			    "module":{"variables":{"seed":{},"unused":{}},
			      "module_calls":{"db":{"source":"./db",
			        "for_each_expression":{"references":["terraform_data.keys.output","terraform_data.keys"]},
			        "expressions":{"name":{"references":["var.seed"]}},
			        "module":{"variables":{"name":{}},
			          "resources":[{"address":"terraform_data.main","mode":"managed","type":"terraform_data","name":"main",
			            "count_expression":{"constant_value":1},
			            "expressions":{"input":{"references":["var.name","count.index","each.key","path.module"]}}}]}}}}}}}}}`,
			write: []string{`module.app.module.db["x"].terraform_data.main[0]`},
			read:  []string{"module.app.terraform_data.keys", "terraform_data.seed"},
		},
		{
			name: "locals to locals to resource with config dir",
			plan: `{"format_version":"1.2",
			 "resource_changes":[` + fpChange("terraform_data.web", `"update"`) + `],
			 "configuration":{"root_module":{
			  "resources":[{"address":"terraform_data.web","mode":"managed","type":"terraform_data","name":"web",
			    "expressions":{"input":{"references":["local.name"]}}},
			   {"address":"terraform_data.seed","mode":"managed","type":"terraform_data","name":"seed"}]}}}`,
			files: map[string]string{"main.tf": `
locals {
  prefix = "kl"
  name   = "${local.prefix}-${local.base}"
  loop_a = local.loop_b
  loop_b = local.loop_a
}
locals {
  base = [for s in terraform_data.seed[*].output : upper(s) if s != local.loop_a]
}
resource "terraform_data" "web" { input = local.name }
resource "terraform_data" "seed" { input = "x" }
`},
			write: []string{"terraform_data.web"},
			read:  []string{"terraform_data.seed"},
		},
		{
			name: "locals without config dir widen to the module prefix",
			plan: `{"format_version":"1.2",
			 "resource_changes":[` + fpChange("terraform_data.web", `"update"`) + `,` + fpChange("module.app.terraform_data.db", `"update"`) + `],
			 "configuration":{"root_module":{
			  "resources":[{"address":"terraform_data.web","mode":"managed","type":"terraform_data","name":"web",
			    "expressions":{"input":{"references":["local.name"]}}},
			   {"address":"terraform_data.seed","mode":"managed","type":"terraform_data","name":"seed"}],
			  "module_calls":{"app":{"source":"./app",
			    "expressions":{"seed":{"references":["terraform_data.seed.output","terraform_data.seed"]}},
			    "module":{"variables":{"seed":{}},"resources":[{"address":"terraform_data.db","mode":"managed","type":"terraform_data","name":"db",
			      "expressions":{"input":{"references":["local.label","local.other"]}}}]}}}}}}`,
			write:   []string{"module.app.terraform_data.db", "terraform_data.web"},
			read:    []string{"*", "module.app.*", "terraform_data.seed"},
			widened: []string{"* <- local.name in root", "module.app.* <- local.label in module.app, local.other in module.app"},
		},
		{
			name: "module locals with config dir through the modules manifest",
			plan: `{"format_version":"1.2",
			 "resource_changes":[` + fpChange("module.app.terraform_data.db", `"update"`) + `],
			 "configuration":{"root_module":{
			  "resources":[{"address":"terraform_data.seed","mode":"managed","type":"terraform_data","name":"seed"}],
			  "module_calls":{"app":{"source":"registry.example/app/x",
			    "expressions":{"seed":{"references":["terraform_data.seed.output","terraform_data.seed"]}},
			    "module":{"variables":{"seed":{}},"resources":[{"address":"terraform_data.db","mode":"managed","type":"terraform_data","name":"db",
			      "expressions":{"input":{"references":["local.label"]}}}]}}}}}}`,
			files: map[string]string{
				"main.tf":                             `module "app" { source = "registry.example/app/x" }`,
				".terraform/modules/modules.json":     `{"Modules":[{"Key":"","Source":"","Dir":"."},{"Key":"app","Source":"registry.example/app/x","Dir":".terraform/modules/app"}]}`,
				".terraform/modules/app/main.tf.json": `{"locals":{"label":"app-${var.seed}"},"resource":{"terraform_data":{"db":{"input":"${local.label}"}}}}`,
			},
			write: []string{"module.app.terraform_data.db"},
			read:  []string{"terraform_data.seed"},
		},
		{
			name: "unreadable module dir widens its locals",
			plan: `{"format_version":"1.2",
			 "resource_changes":[` + fpChange("module.app.terraform_data.db", `"update"`) + `],
			 "configuration":{"root_module":{
			  "module_calls":{"app":{"source":"git::https://example.com/app.git",
			    "module":{"resources":[{"address":"terraform_data.db","mode":"managed","type":"terraform_data","name":"db",
			      "expressions":{"input":{"references":["local.label"]}}}]}}}}}}`,
			files:   map[string]string{"main.tf": `module "app" { source = "git::https://example.com/app.git" }`},
			write:   []string{"module.app.terraform_data.db"},
			read:    []string{"module.app.*"},
			widened: []string{"module.app.* <- configuration of module.app, local.label in module.app"},
		},
		{
			name: "data source read transitively",
			plan: `{"format_version":"1.2",
			 "resource_changes":[` + fpChange("terraform_data.r", `"create"`) + `],
			 "configuration":{"root_module":{
			  "resources":[{"address":"terraform_data.r","mode":"managed","type":"terraform_data","name":"r",
			    "expressions":{"input":{"references":["data.http.cfg.body","data.http.cfg"]}}},
			   {"address":"data.http.cfg","mode":"data","type":"http","name":"cfg",
			    "expressions":{"url":{"references":["terraform_data.src.output","terraform_data.src"]}},
			    "depends_on":["terraform_data.order"]}]}}}`,
			write: []string{"terraform_data.r"},
			read:  []string{"data.http.cfg", "terraform_data.order", "terraform_data.src"},
		},
		{
			name: "provider configuration references",
			plan: `{"format_version":"1.2",
			 "resource_changes":[` + fpChange("aws_s3_bucket.b", `"create"`) + `,` + fpChange("module.app.aws_s3_bucket.c", `"create"`) + `],
			 "configuration":{
			  "provider_config":{
			    "aws":{"name":"aws","expressions":{"region":{"references":["terraform_data.region.output","terraform_data.region"]}}},
			    "aws.east":{"name":"aws","alias":"east","expressions":{"assume_role":[{"role_arn":{"references":["data.aws_iam_role.r.arn","data.aws_iam_role.r"]}}]}},
			    "module.app:aws":{"name":"aws","module_address":"module.app","expressions":{"profile":{"references":["var.profile"]}}}},
			  "root_module":{
			   "resources":[{"address":"aws_s3_bucket.b","mode":"managed","type":"aws_s3_bucket","name":"b","provider_config_key":"aws"},
			     {"address":"data.aws_iam_role.r","mode":"data","type":"aws_iam_role","name":"r","provider_config_key":"aws"}],
			   "module_calls":{"app":{"source":"./app",
			     "expressions":{"profile":{"references":["terraform_data.profile.output","terraform_data.profile"]}},
			     "module":{"variables":{"profile":{}},"resources":[{"address":"aws_s3_bucket.c","mode":"managed","type":"aws_s3_bucket","name":"c","provider_config_key":"app:aws"}]}}}}}}`,
			write: []string{"aws_s3_bucket.b", "module.app.aws_s3_bucket.c"},
			read:  []string{"terraform_data.profile", "terraform_data.region"},
		},
		{
			// A key that names no entry with expressions (passed or
			// inherited configuration): every provider configuration of
			// the module and its ancestors is read.
			name: "unresolved provider key reads the ancestors' provider configurations",
			plan: `{"format_version":"1.2",
			 "resource_changes":[` + fpChange("module.app.aws_s3_bucket.c", `"create"`) + `],
			 "configuration":{
			  "provider_config":{
			    "aws.east":{"name":"aws","alias":"east","expressions":{"assume_role":[{"role_arn":{"references":["data.aws_iam_role.r.arn","data.aws_iam_role.r"]}}]}},
			    "module.other:aws":{"name":"aws","module_address":"module.other","expressions":{"region":{"references":["terraform_data.unrelated"]}}}},
			  "root_module":{
			   "resources":[{"address":"data.aws_iam_role.r","mode":"data","type":"aws_iam_role","name":"r","provider_config_key":"aws",
			      "expressions":{"name":{"constant_value":"x"}}}],
			   "module_calls":{"other":{"source":"./other","module":{}},
			     "app":{"source":"./app","module":{"resources":[{"address":"aws_s3_bucket.c","mode":"managed","type":"aws_s3_bucket","name":"c","provider_config_key":"app:aws.east"}]}}}}}}`,
			write: []string{"module.app.aws_s3_bucket.c"},
			read:  []string{"data.aws_iam_role.r"},
		},
		{
			// Terraform ≥ 1.3 names the configuration used: a key without
			// an entry (built-in terraform_data, an unconfigured alias) reads
			// no provider configuration.
			name: "provider keys are exact from Terraform 1.3",
			plan: `{"format_version":"1.2","terraform_version":"1.11.4",
			 "resource_changes":[` + fpChange("terraform_data.t", `"create"`) + `,` + fpChange("aws_s3_bucket.z", `"create"`) + `,` + fpChange("module.app.x_thing.c", `"create"`) + `],
			 "configuration":{
			  "provider_config":{
			    "aws":{"name":"aws","expressions":{"region":{"references":["terraform_data.region.output","terraform_data.region"]}}},
			    "module.app:x":{"name":"x","module_address":"module.app","expressions":{"token":{"references":["var.v"]}}}},
			  "root_module":{
			   "resources":[{"address":"terraform_data.t","mode":"managed","type":"terraform_data","name":"t","provider_config_key":"terraform"},
			     {"address":"aws_s3_bucket.z","mode":"managed","type":"aws_s3_bucket","name":"z","provider_config_key":"aws.west"}],
			   "module_calls":{"app":{"source":"./app",
			     "expressions":{"v":{"references":["terraform_data.v.output","terraform_data.v"]}},
			     "module":{"variables":{"v":{}},"resources":[{"address":"x_thing.c","mode":"managed","type":"x_thing","name":"c","provider_config_key":"module.app:x"}]}}}}}}`,
			write: []string{"aws_s3_bucket.z", "module.app.x_thing.c", "terraform_data.t"},
			read:  []string{"terraform_data.v"},
		},
		{
			name: "provider keys before Terraform 1.3 fall back to the ancestors",
			plan: `{"format_version":"1.2","terraform_version":"1.2.9",
			 "resource_changes":[` + fpChange("terraform_data.t", `"create"`) + `],
			 "configuration":{
			  "provider_config":{
			    "aws":{"name":"aws","expressions":{"region":{"references":["terraform_data.region.output","terraform_data.region"]}}}},
			  "root_module":{
			   "resources":[{"address":"terraform_data.t","mode":"managed","type":"terraform_data","name":"t","provider_config_key":"terraform"}]}}}`,
			write: []string{"terraform_data.t"},
			read:  []string{"terraform_data.region"},
		},
		{
			name: "depends_on from prior state of a deleted resource",
			plan: `{"format_version":"1.2",
			 "resource_changes":[` + fpChange("terraform_data.w[0]", `"delete"`) + `],
			 "prior_state":{"format_version":"1.0","values":{"root_module":{
			   "resources":[{"address":"terraform_data.w[0]","mode":"managed","type":"terraform_data","name":"w","index":0,
			      "depends_on":["terraform_data.a","module.m.terraform_data.b"]},
			    {"address":"terraform_data.w[1]","mode":"managed","type":"terraform_data","name":"w","index":1,
			      "depends_on":["data.x.y"]},
			    {"address":"terraform_data.other","mode":"managed","type":"terraform_data","name":"other","depends_on":["terraform_data.nope"]}]}}},
			 "configuration":{"root_module":{}}}`,
			write: []string{"terraform_data.w[0]"},
			read:  []string{"data.x.y", "module.m.terraform_data.b", "terraform_data.a"},
		},
		{
			// A configured resource reads what its configuration references;
			// prior_state's transitive depends_on is not read.
			name: "prior state depends_on of a configured resource is not read",
			plan: `{"format_version":"1.2",
			 "resource_changes":[` + fpChange("terraform_data.w", `"update"`) + `],
			 "prior_state":{"format_version":"1.0","values":{"root_module":{
			   "resources":[{"address":"terraform_data.w","mode":"managed","type":"terraform_data","name":"w",
			      "depends_on":["terraform_data.a","terraform_data.deep"]}]}}},
			 "configuration":{"root_module":{"resources":[{"address":"terraform_data.w","mode":"managed","type":"terraform_data","name":"w",
			   "expressions":{"input":{"references":["terraform_data.a.id","terraform_data.a"]}}}]}}}`,
			write: []string{"terraform_data.w"},
			read:  []string{"terraform_data.a"},
		},
		{
			// Terraform 0.12 wrote prior-state addresses relative to their module.
			name: "relative prior state depends_on of Terraform 0.12",
			plan: `{"format_version":"0.1",
			 "resource_changes":[` + fpChange("module.m.null_resource.w", `"delete"`) + `],
			 "prior_state":{"format_version":"0.1","values":{"root_module":{"child_modules":[{"address":"module.m",
			   "resources":[{"address":"null_resource.w","mode":"managed","type":"null_resource","name":"w","depends_on":["null_resource.a"]}]}]}}},
			 "configuration":{"root_module":{"module_calls":{"m":{"source":"./m","module":{}}}}}}`,
			write: []string{"module.m.null_resource.w"},
			read:  []string{"module.m.null_resource.a"},
		},
		{
			name: "move writes both addresses",
			plan: `{"format_version":"1.2",
			 "resource_changes":[{"address":"terraform_data.new","previous_address":"terraform_data.old","change":{"actions":["no-op"]}},
			   ` + fpChange("terraform_data.untouched", `"no-op"`) + `],
			 "prior_state":{"format_version":"1.0","values":{"root_module":{
			   "resources":[{"address":"terraform_data.old","depends_on":["terraform_data.dep"]}]}}},
			 "configuration":{"root_module":{"resources":[{"address":"terraform_data.new","mode":"managed","type":"terraform_data","name":"new",
			   "expressions":{"input":{"references":["terraform_data.untouched.output","terraform_data.untouched"]}}}]}}}`,
			write: []string{"terraform_data.new", "terraform_data.old"},
			read:  []string{"terraform_data.dep", "terraform_data.untouched"},
		},
		{
			name: "output changes",
			plan: `{"format_version":"1.2",
			 "output_changes":{"o":{"actions":["update"]},"same":{"actions":["no-op"]},"gone":{"actions":["delete"]}},
			 "configuration":{"root_module":{"outputs":{
			   "o":{"expression":{"references":["terraform_data.z.output","terraform_data.z"]},"depends_on":["terraform_data.order"]},
			   "same":{"expression":{"references":["terraform_data.q"]}}}}}}`,
			write: []string{"output.gone", "output.o"},
			read:  []string{"terraform_data.order", "terraform_data.z"},
		},
		{
			name: "single and map nested blocks keep their references",
			plan: `{"format_version":"1.2",
			 "resource_changes":[` + fpChange("x_thing.t", `"create"`) + `],
			 "configuration":{"root_module":{"resources":[{"address":"x_thing.t","mode":"managed","type":"x_thing","name":"t",
			   "expressions":{
			     "timeouts":{"create":{"references":["terraform_data.single.output","terraform_data.single"]}},
			     "rule":{"a":{"target":{"references":["terraform_data.map.output","terraform_data.map"]}}},
			     "ingress":[{"cidr":{"references":["terraform_data.list.output","terraform_data.list"]},
			                 "inner":{"x":{"references":["terraform_data.deep"]}}}]}}]}}}`,
			write: []string{"x_thing.t"},
			read:  []string{"terraform_data.deep", "terraform_data.list", "terraform_data.map", "terraform_data.single"},
		},
		{
			name: "delete without configuration reads prior-state dependencies",
			plan: `{"format_version":"1.2",
			 "resource_changes":[{"address":"module.gone.terraform_data.x","change":{"actions":["delete"]},"action_reason":"delete_because_no_module"}],
			 "prior_state":{"format_version":"1.0","values":{"root_module":{"child_modules":[{"address":"module.gone",
			   "resources":[{"address":"module.gone.terraform_data.x","depends_on":["terraform_data.root"]}]}]}}},
			 "configuration":{"root_module":{}}}`,
			write: []string{"module.gone.terraform_data.x"},
			read:  []string{"terraform_data.root"},
		},
		{
			name: "depends_on a module reads its prefix",
			plan: `{"format_version":"1.2",
			 "resource_changes":[` + fpChange("terraform_data.r", `"create"`) + `],
			 "configuration":{"root_module":{"resources":[{"address":"terraform_data.r","mode":"managed","type":"terraform_data","name":"r",
			   "depends_on":["module.net","terraform_data.a"]}],
			   "module_calls":{"net":{"source":"./net","module":{}}}}}}`,
			write:   []string{"terraform_data.r"},
			read:    []string{"module.net.*", "terraform_data.a"},
			widened: []string{"module.net.* <- depends_on module.net in root"},
		},
		{
			name: "module call for_each counts for everything inside",
			plan: `{"format_version":"1.2",
			 "resource_changes":[` + fpChange(`module.fleet[\"a\"].terraform_data.db`, `"update"`) + `],
			 "configuration":{"root_module":{"module_calls":{"fleet":{"source":"./fleet",
			   "for_each_expression":{"references":["terraform_data.regions.output","terraform_data.regions"]},
			   "depends_on":["terraform_data.first"],
			   "module":{"resources":[{"address":"terraform_data.db","mode":"managed","type":"terraform_data","name":"db"}]}}}}}}`,
			write: []string{`module.fleet["a"].terraform_data.db`},
			read:  []string{"terraform_data.first", "terraform_data.regions"},
		},
		{
			name: "unknown constructs widen",
			plan: `{"format_version":"1.2",
			 "resource_changes":[` + fpChange("module.app.terraform_data.r", `"create"`) + `,` + fpChange("module.app.terraform_data.orphan", `"update"`) + `],
			 "configuration":{"root_module":{"module_calls":{"app":{"source":"./app",
			   "expressions":{"in":{"references":["terraform_data.input"]}},
			   "module":{"resources":[{"address":"terraform_data.r","mode":"managed","type":"terraform_data","name":"r",
			     "expressions":{"input":{"references":["action.x.y","ephemeral.vault_secret.s.value","ephemeral.vault_secret.s"]}}}]}}}}}}`,
			write:   []string{"module.app.terraform_data.orphan", "module.app.terraform_data.r"},
			read:    []string{"module.app.*", "terraform_data.input"},
			widened: []string{"module.app.* <- ephemeral.vault_secret.s in module.app, module.app.terraform_data.orphan, reference action.x.y in module.app"},
		},
		{
			name: "HCL blocks add references plan JSON leaves out",
			plan: `{"format_version":"1.2",
			 "resource_changes":[` + fpChange("x_thing.t", `"create"`) + `],
			 "configuration":{"root_module":{"resources":[
			   {"address":"x_thing.t","mode":"managed","type":"x_thing","name":"t"},
			   {"address":"terraform_data.rules","mode":"managed","type":"terraform_data","name":"rules"},
			   {"address":"terraform_data.trigger","mode":"managed","type":"terraform_data","name":"trigger"},
			   {"address":"terraform_data.check","mode":"managed","type":"terraform_data","name":"check"}]}}}`,
			files: map[string]string{"main.tf": `
resource "x_thing" "t" {
  provider = aws.east
  dynamic "rule" {
    for_each = terraform_data.rules.output
    iterator = r
    content {
      name = r.value
    }
  }
  lifecycle {
    ignore_changes       = [tags]
    replace_triggered_by = [terraform_data.trigger]
    precondition {
      condition     = terraform_data.check.output != ""
      error_message = "x"
    }
  }
}
`},
			write: []string{"x_thing.t"},
			read:  []string{"terraform_data.check", "terraform_data.rules", "terraform_data.trigger"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			plan, err := ParsePlanJSON([]byte(tt.plan))
			if err != nil {
				t.Fatal(err)
			}
			var opts ExtractOptions
			if tt.files != nil {
				opts.ConfigDir = setupConfigDir(t, tt.files)
			}
			fp, err := ExtractFootprint(plan, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := fpAddrs(fp.Write); !reflect.DeepEqual(got, tt.write) {
				t.Errorf("write = %q, want %q", got, tt.write)
			}
			if got := fpAddrs(fp.Read); !reflect.DeepEqual(got, tt.read) {
				t.Errorf("read = %q, want %q", got, tt.read)
			}
			var widened []string
			for _, w := range fp.Widened {
				widened = append(widened, string(w.Address)+" <- "+w.From)
				if w.Reason == "" {
					t.Errorf("widening %s has no reason", w.Address)
				}
			}
			if !reflect.DeepEqual(widened, tt.widened) {
				t.Errorf("widened = %q, want %q", widened, tt.widened)
			}
		})
	}
}

func TestExtractFootprintWideningReasons(t *testing.T) {
	t.Parallel()
	plan, err := ParsePlanJSON([]byte(`{"format_version":"1.2",
	 "resource_changes":[` + fpChange("terraform_data.web", `"update"`) + `],
	 "configuration":{"root_module":{"resources":[{"address":"terraform_data.web","mode":"managed","type":"terraform_data","name":"web",
	   "expressions":{"input":{"references":["local.missing"]}}}]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		opts ExtractOptions
		want string
	}{
		"no config dir": {ExtractOptions{}, "no config dir was given"},
		"local not defined": {ExtractOptions{ConfigDir: setupConfigDir(t, map[string]string{
			"main.tf": `locals { other = 1 }` + "\n" + `resource "terraform_data" "web" { input = local.missing }`,
		})}, "local.missing is not defined in"},
		"unparseable hcl": {ExtractOptions{ConfigDir: setupConfigDir(t, map[string]string{"main.tf": `locals {`})}, "parsing "},
	} {
		fp, err := ExtractFootprint(plan, tc.opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(fp.Widened) != 1 || fp.Widened[0].Address != engine.AllAddresses || !strings.Contains(fp.Widened[0].From, "local.missing in root") {
			t.Fatalf("%s: widened = %+v, want one widening to * from local.missing in root", name, fp.Widened)
		}
		if !strings.Contains(fp.Widened[0].Reason, tc.want) {
			t.Errorf("%s: reason %q does not say %q", name, fp.Widened[0].Reason, tc.want)
		}
	}
}

func TestParsePlanJSONErrors(t *testing.T) {
	t.Parallel()
	read := func(p string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "terraform-json", p))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name  string
		input []byte
		want  string
	}{
		{"malformed fixture", read("invalid/plan.json"), "malformed JSON at line 676, column 29"},
		{"malformed state fixture", read("invalid/state.json"), "malformed JSON at line 12, column 28"},
		{"state JSON", read("110_sensitive_values/state.json"), "this is state JSON"},
		{"state JSON of a move", read("moved_block/show.json"), "this is state JSON"},
		{"raw state file", read("no_changes/terraform.tfstate"), "this is a Terraform state file"},
		{"empty", nil, "the input is empty"},
		{"blank", []byte(" \n\t\n"), "the input is empty"},
		{"saved plan file", savedPlanFile(t), "this is a saved plan file, not its JSON: run `terraform show -json PLANFILE > plan.json` and pass that"},
		{"null", []byte("null"), "JSON null"},
		{"array", []byte("[1]"), "is a JSON array"},
		{"no format version", []byte(`{"resource_changes":[]}`), "format_version is missing"},
		{"future format", []byte(`{"format_version":"2.0","resource_changes":[]}`), `unsupported format_version "2.0"`},
		{"not a version", []byte(`{"format_version":"banana","resource_changes":[]}`), "is not a version"},
		{"not a plan", []byte(`{"format_version":"1.0"}`), "not a plan"},
		{"wrong type", []byte(`{"format_version":"1.2","resource_changes":{"a":1}}`), "near line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := ParsePlanJSON(tt.input)
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, engine.ErrInvalid) {
				t.Errorf("error %v does not wrap engine.ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if _, _, ferr := Footprint(tt.input, ExtractOptions{}); ferr == nil || ferr.Error() != err.Error() {
				t.Errorf("Footprint error = %v, want %v", ferr, err)
			}
		})
	}
}

// savedPlanFile returns a zip with the entries of a saved plan file
// (`terraform plan -out`), which is what `kl footprint tfplan.bin` reads.
func savedPlanFile(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range []string{"tfplan", "tfstate", "tfconfig/m-/main.tf"} {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte("x"))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestExtractFootprintBadAddress(t *testing.T) {
	t.Parallel()
	plan, err := ParsePlanJSON([]byte(`{"format_version":"1.2","resource_changes":[` + fpChange("module.x", `"create"`) + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ExtractFootprint(plan, ExtractOptions{}); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("err = %v, want ErrInvalid", err)
	}
	if _, err := ExtractFootprint(nil, ExtractOptions{}); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("nil plan: err = %v, want ErrInvalid", err)
	}
}

func FuzzParsePlanJSON(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "terraform-json", "*", "*.json"))
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"format_version":"1.2","resource_changes":[null,{"change":null}],"output_changes":{"a":null},"configuration":{"root_module":{"resources":[null],"module_calls":{"m":null}}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		plan, err := ParsePlanJSON(b)
		if err != nil {
			if !errors.Is(err, engine.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		_, _ = ExtractFootprint(plan, ExtractOptions{})
		_, _ = ExtractIntent(plan)
		_ = Summarize(plan)
	})
}
