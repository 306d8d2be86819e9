package tfstate_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// editConfig has what `state rm` and `state mv` addresses name: a counted
// and a for_each resource, a resource without either, a data source, a
// counted module, a for_each module, a module without either with a module
// inside.
func editConfig() map[string]string {
	return map[string]string{
		"main.tf": `resource "terraform_data" "a" {
  count = 2
  input = "a${count.index}"
}

resource "terraform_data" "b" {
  for_each = toset(["x", "y"])
  input    = each.key
}

resource "terraform_data" "single" {
  input = "s"
}

data "terraform_remote_state" "net" {
  backend = "local"
  config = {
    path = "net.tfstate"
  }
}

module "app" {
  source = "./mod"
  count  = 2
}

module "each" {
  source   = "./mod"
  for_each = toset(["eu", "us"])
}

module "outer" {
  source = "./outer"
}
`,
		"mod/main.tf":   "resource \"terraform_data\" \"c\" {\n  input = \"c\"\n}\n",
		"outer/main.tf": "resource \"terraform_data\" \"d\" {\n  input = \"d\"\n}\n\nmodule \"inner\" {\n  source = \"../mod\"\n}\n",
		"net.tfstate":   `{"version": 4, "terraform_version": "1.11.4", "serial": 1, "lineage": "net", "outputs": {"cidr": {"value": "10.0.0.0/16", "type": "string"}}, "resources": [], "check_results": null}`,
	}
}

// TestEditsAsTerraform: Remove and Move give what `terraform state rm`
// and `terraform state mv` give for the same addresses, run by the real
// binary on the same state — every entry, instance keys, order and data
// sources included — and refuse what Terraform refuses. Where Terraform
// accepts an address of `state rm` that matches nothing beside one that
// does, Remove refuses it (ADR 0055).
func TestEditsAsTerraform(t *testing.T) {
	t.Parallel()
	bin := terraformBinary(t)
	w := newWorkDir(t, bin, "edit", editConfig())
	w.init()
	w.run([]int{0}, "apply", "-auto-approve", "-input=false", "-no-color")
	baseBytes, base := w.readState()

	for _, tc := range []struct {
		args []string // after "state"
		fail bool     // Terraform and kl refuse it
	}{
		{args: []string{"rm", "terraform_data.a"}},
		{args: []string{"rm", "terraform_data.a[1]"}},
		{args: []string{"rm", `terraform_data.b["x"]`, "terraform_data.single"}},
		{args: []string{"rm", "data.terraform_remote_state.net"}},
		{args: []string{"rm", "module.app"}},
		{args: []string{"rm", "module.app[1]"}},
		{args: []string{"rm", `module.each["us"].terraform_data.c`}},
		{args: []string{"rm", "module.outer"}},
		{args: []string{"rm", "module.outer.module.inner"}},
		{args: []string{"rm", "terraform_data.nope"}, fail: true},
		{args: []string{"rm", "terraform_data.a[7]"}, fail: true},
		{args: []string{"rm", "module.app.terraform_data.c"}, fail: true},
		{args: []string{"mv", "terraform_data.a", "terraform_data.z"}},
		{args: []string{"mv", "terraform_data.a", "module.outer.terraform_data.a"}},
		{args: []string{"mv", "terraform_data.a[0]", "terraform_data.a[5]"}},
		{args: []string{"mv", "terraform_data.a[0]", "terraform_data.moved"}},
		{args: []string{"mv", "terraform_data.a[1]", `terraform_data.b["q"]`}},
		{args: []string{"mv", "terraform_data.single", "terraform_data.a[3]"}},
		{args: []string{"mv", `terraform_data.b["x"]`, `module.each["eu"].terraform_data.b["x"]`}},
		{args: []string{"mv", "data.terraform_remote_state.net", "data.terraform_remote_state.net2"}},
		{args: []string{"mv", "module.outer", "module.renamed"}},
		{args: []string{"mv", "module.outer", "module.app[5]"}},
		{args: []string{"mv", "module.app[0]", "module.solo"}},
		{args: []string{"mv", `module.each["eu"]`, `module.each["fr"]`}},
		{args: []string{"mv", "module.outer.module.inner", "module.inner"}},
		{args: []string{"mv", "terraform_data.a", "terraform_data.b"}, fail: true},
		{args: []string{"mv", "terraform_data.a[0]", "terraform_data.a[1]"}, fail: true},
		{args: []string{"mv", "terraform_data.nope", "terraform_data.q"}, fail: true},
		{args: []string{"mv", "terraform_data.a", "null_resource.a"}, fail: true},
		{args: []string{"mv", "terraform_data.a", "module.app"}, fail: true},
		{args: []string{"mv", "module.app", "module.web"}, fail: true},
		{args: []string{"mv", "module.outer", "module.app[1]"}, fail: true},
		{args: []string{"mv", "terraform_data.a", "terraform_data.a[0]"}, fail: true},
	} {
		name := strings.Join(tc.args, " ")
		w.putState(baseBytes)
		out, code := w.run([]int{0, 1}, append([]string{"state", tc.args[0], "-lock=false", "-no-color"}, tc.args[1:]...)...)
		got, err := stateEdit(base, tc.args)
		if tc.fail {
			if code == 0 {
				t.Errorf("terraform state %s: succeeded, want a refusal\n%s", name, out)
			}
			if err == nil {
				t.Errorf("kl's state %s: succeeded, want a refusal as Terraform's: %s", name, out)
			} else if !errors.Is(err, tfstate.ErrNoMatch) && !errors.Is(err, tfstate.ErrBadMove) {
				t.Errorf("kl's state %s: %v, want ErrNoMatch or ErrBadMove", name, err)
			}
			continue
		}
		if code != 0 || err != nil {
			t.Errorf("state %s: terraform exit %d, kl's %v; want both to succeed\n%s", name, code, err, out)
			continue
		}
		_, want := w.readState()
		if d := resourcesDiff(got, want); d != "" {
			t.Errorf("state %s: kl's result differs from Terraform's: %s", name, d)
		}
		if !reflect.DeepEqual(got.Outputs, want.Outputs) || got.Lineage != want.Lineage {
			t.Errorf("state %s: outputs or lineage differ from Terraform's", name)
		}
	}

	t.Run("rm refuses a missing address beside a matching one", func(t *testing.T) {
		w.putState(baseBytes)
		w.run([]int{0}, "state", "rm", "-lock=false", "terraform_data.nope", "terraform_data.single")
		_, err := stateEdit(base, []string{"rm", "terraform_data.nope", "terraform_data.single", `module.x["k"]`})
		var nm *tfstate.NoMatchError
		if !errors.As(err, &nm) || err.Error() != `terraform_data.nope, module.x["k"] match nothing in the state` {
			t.Errorf("Remove: %v, want both missing addresses named", err)
		}
	})
}

// stateEdit runs `state rm ADDR…` or `state mv FROM TO` (args) on s with
// Remove or Move, as version s.Serial+1.
func stateEdit(s *tfstate.State, args []string) (*tfstate.State, error) {
	var ts []tfstate.Target
	for _, a := range args[1:] {
		t, err := tfstate.ParseTarget(a)
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	if args[0] == "rm" {
		out, _, err := s.Remove(ts, s.Serial+1)
		return out, err
	}
	out, _, err := s.Move(ts[0], ts[1], s.Serial+1)
	return out, err
}

// resourcesDiff compares the resources of two states as decoded JSON,
// every member and the order of entries and instances included: "" when
// equal.
func resourcesDiff(got, want *tfstate.State) string {
	g, w := decodedResources(got), decodedResources(want)
	if len(g) != len(w) {
		return "entries " + strings.Join(entryNames(g), " ") + "; want " + strings.Join(entryNames(w), " ")
	}
	for i := range g {
		if !reflect.DeepEqual(g[i], w[i]) {
			gb, _ := json.Marshal(g[i])
			wb, _ := json.Marshal(w[i])
			return "entry " + entryNames(g[i : i+1])[0] + ":\n  " + string(gb) + "\nwant\n  " + string(wb)
		}
	}
	return ""
}

func decodedResources(s *tfstate.State) []map[string]any {
	out := make([]map[string]any, len(s.Resources))
	for i, r := range s.Resources {
		if err := json.Unmarshal(r.Raw, &out[i]); err != nil {
			panic(err)
		}
	}
	return out
}

func entryNames(es []map[string]any) []string {
	var out []string
	for _, e := range es {
		m, _ := e["module"].(string)
		out = append(out, strings.TrimPrefix(m+"."+e["type"].(string)+"."+e["name"].(string), "."))
	}
	return out
}
