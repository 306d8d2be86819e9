package terraform

import (
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	tfjson "github.com/hashicorp/terraform-json"
)

func traversalTexts(trs []hcl.Traversal) []string {
	out := make([]string, 0, len(trs))
	for _, t := range trs {
		out = append(out, traversalText(t))
	}
	sort.Strings(out)
	return out
}

func TestLocalsParseModuleDir(t *testing.T) {
	t.Parallel()
	dir := setupConfigDir(t, map[string]string{
		"a.tf": `
locals {
  a = local.b
  b = { for k, v in var.m : k => v if v != terraform_data.x.output }
}
provider "aws" {
  alias  = "east"
  region = terraform_data.region.output
}
check "c" {
  data "http" "probe" { url = terraform_data.url.output }
  assert {
    condition     = true
    error_message = "x"
  }
}
resource "x_thing" "t" {
  provider   = aws.east
  depends_on = [module.m]
  dynamic "rule" {
    for_each = var.rules
    content { name = rule.value }
  }
}
`,
		"a_override.tf": `locals { a = terraform_data.override.output }`,
		"j.tf.json":     `{"locals": {"j": "${var.v}-${local.a}"}, "output": {"o": {"value": "${terraform_data.o.output}"}}}`,
		"notes.txt":     `locals { ignored = terraform_data.nope }`,
	})
	hm, err := parseModuleDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		got  []hcl.Traversal
		want []string
	}{
		"local with an override": {hm.locals["a"], []string{"local.b", "terraform_data.override.output"}},
		"local with a for":       {hm.locals["b"], []string{"terraform_data.x.output", "var.m"}},
		"local in JSON":          {hm.locals["j"], []string{"local.a", "var.v"}},
		"provider alias":         {hm.blocks["provider.aws.east"], []string{"terraform_data.region.output"}},
		"check data source":      {hm.blocks["data.http.probe"], []string{"terraform_data.url.output"}},
		"resource, meta-arguments and iterator left out": {hm.blocks["resource.x_thing.t"], []string{"var.rules"}},
		"output in JSON": {hm.blocks["output.o"], []string{"terraform_data.o.output"}},
	}
	for name, tt := range tests {
		if got := traversalTexts(tt.got); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: traversals = %q, want %q", name, got, tt.want)
		}
	}
	if _, ok := hm.locals["ignored"]; ok {
		t.Error("a .txt file was parsed")
	}
}

func TestLocalsModuleDirs(t *testing.T) {
	t.Parallel()
	root := setupConfigDir(t, map[string]string{
		"main.tf":        `locals { r = 1 }`,
		"mods/a/main.tf": `locals { a = 1 }`,
		"mods/b/main.tf": `locals { b = 1 }`,
		"manifest.json":  `{"Modules":[{"Key":"","Source":"","Dir":"."},{"Key":"reg","Source":"example/reg/x","Dir":"mods/b"}]}`,
		"broken.json":    `{"Modules":`,
	})
	rootMod := &module{path: ""}
	local := &module{path: "module.a", key: "a", parent: rootMod, call: &tfjson.ModuleCall{Source: "./mods/a"}}
	nested := &module{path: "module.a.module.up", key: "a.up", parent: local, call: &tfjson.ModuleCall{Source: "../b"}}
	reg := &module{path: "module.reg", key: "reg", parent: rootMod, call: &tfjson.ModuleCall{Source: "example/reg/x"}}

	l := newHCLLoader(ExtractOptions{ConfigDir: root, ModulesManifest: filepath.Join(root, "manifest.json")})
	for m, wantLocal := range map[*module]string{rootMod: "r", local: "a", nested: "b", reg: "b"} {
		hm, err := l.module(m)
		if err != nil {
			t.Errorf("%s: %v", m.path, err)
			continue
		}
		if _, ok := hm.locals[wantLocal]; !ok {
			t.Errorf("%s: read %s, want the dir declaring local.%s", m.where(), hm.dir, wantLocal)
		}
	}

	for name, tc := range map[string]struct {
		manifest string
		want     string
	}{
		"no manifest":     {"", "no modules manifest was found"},
		"missing entry":   {filepath.Join(root, "manifest.json"), ""},
		"broken manifest": {filepath.Join(root, "broken.json"), "reading modules manifest"},
		"absent manifest": {filepath.Join(root, "nope.json"), "reading modules manifest"},
	} {
		l := newHCLLoader(ExtractOptions{ConfigDir: root, ModulesManifest: tc.manifest})
		other := &module{path: "module.other", key: "other", parent: rootMod, call: &tfjson.ModuleCall{Source: "example/other/x"}}
		_, err := l.module(other)
		if err == nil {
			t.Errorf("%s: no error for a registry module without a manifest entry", name)
			continue
		}
		want := tc.want
		if want == "" {
			want = `the modules manifest has no entry "other"`
		}
		if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "example/other/x") {
			t.Errorf("%s: error %q does not say %q and the source", name, err, want)
		}
	}
}
