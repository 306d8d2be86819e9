package closure_test

import (
	"strings"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/kilolock/kilolock/internal/closure"
	"github.com/kilolock/kilolock/internal/tfstate"
)

const headState = `{
  "version": 4,
  "terraform_version": "1.11.4",
  "serial": 3,
  "lineage": "l-1",
  "outputs": {"web": {"value": "x", "type": "string"}, "other": {"value": "y", "type": "string"}},
  "resources": [
    {"mode": "managed", "type": "terraform_data", "name": "base", "provider": "provider[\"terraform.io/builtin/terraform\"]", "instances": [{"schema_version": 0, "attributes": {"id": "1"}}]},
    {"mode": "managed", "type": "terraform_data", "name": "lonely", "provider": "provider[\"terraform.io/builtin/terraform\"]", "instances": [{"schema_version": 0, "attributes": {"id": "2"}}]}
  ]
}
`

func rc(addr, typ, name string, actions ...tfjson.Action) *tfjson.ResourceChange {
	return &tfjson.ResourceChange{Address: addr, Mode: tfjson.ManagedResourceMode, Type: typ, Name: name, Change: &tfjson.Change{Actions: actions}}
}

// TestProofChecks: each check passes on a plan within the slice and fails,
// naming what it found, on one that is not; SliceState keeps the closure's
// entries and the outputs the slice declares.
func TestProofChecks(t *testing.T) {
	t.Parallel()
	cfg := load(t, "testdata/basic")
	s, err := closure.TargetScope(cfg, []string{"terraform_data.web[1]"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := closure.Compute(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	head, err := tfstate.Parse([]byte(headState))
	if err != nil {
		t.Fatal(err)
	}
	slice := c.SliceState(head)
	// output.web reads only terraform_data.web, which the closure holds:
	// the slice declares it (as -target plans it), and keeps its value.
	if got := slice.Addresses(); len(got) != 2 || got[0] != "output.web" || got[1] != "terraform_data.base" {
		t.Errorf("SliceState addresses = %v, want [output.web terraform_data.base]", got)
	}
	if _, ok := slice.Outputs["web"]; len(slice.Outputs) != 1 || !ok || slice.Lineage != "l-1" || slice.Serial != 3 {
		t.Errorf("SliceState = outputs %v, lineage %q, serial %d", slice.Outputs, slice.Lineage, slice.Serial)
	}
	if len(head.Resources) != 2 {
		t.Error("SliceState modified the head")
	}

	good := &tfjson.Plan{ResourceChanges: []*tfjson.ResourceChange{
		rc("terraform_data.base", "terraform_data", "base", tfjson.ActionNoop),
		rc("terraform_data.web[0]", "terraform_data", "web", tfjson.ActionCreate),
		rc("terraform_data.web[1]", "terraform_data", "web", tfjson.ActionCreate),
	}}
	for _, ch := range []closure.Check{closure.WithinSlice(good, c), closure.NoCreateOutside(good, head, slice), closure.TargetsPlanned(good, c)} {
		if !ch.Passed || ch.Found != "" {
			t.Errorf("%s on a good plan: %+v", ch.Name, ch)
		}
	}

	moved := rc("terraform_data.web[0]", "terraform_data", "web", tfjson.ActionNoop)
	moved.PreviousAddress = "terraform_data.elsewhere[0]"
	bad := &tfjson.Plan{ResourceChanges: []*tfjson.ResourceChange{
		rc("terraform_data.lonely", "terraform_data", "lonely", tfjson.ActionCreate),
		moved,
	}}
	for _, tc := range []struct {
		ch   closure.Check
		name string
		want string
	}{
		{closure.WithinSlice(bad, c), closure.CheckWithinSlice, "outside the slice: terraform_data.elsewhere[0], terraform_data.lonely"},
		{closure.NoCreateOutside(bad, head, slice), closure.CheckNoCreateOutside, "holds outside the slice: terraform_data.lonely"},
		{closure.TargetsPlanned(bad, c), closure.CheckTargetsPlanned, "no entry for the targets terraform_data.web[1]"},
	} {
		if tc.ch.Passed || tc.ch.Name != tc.name || !strings.Contains(tc.ch.Found, tc.want) {
			t.Errorf("%s on a bad plan: %+v, want it to fail saying %q", tc.name, tc.ch, tc.want)
		}
	}
}

// TestTargetsPlannedModulesAndData: a module target is planned when a
// resource of it (any instance, for a call without keys) has a change —
// Terraform plans a module's resources, never the module — and a data
// source read while planning has no change, only its planned value.
func TestTargetsPlannedModulesAndData(t *testing.T) {
	t.Parallel()
	cfg := load(t, "testdata/basic")
	inMod := &tfjson.ResourceChange{Address: `module.app.terraform_data.svc["a"]`, ModuleAddress: "module.app", Mode: tfjson.ManagedResourceMode,
		Type: "terraform_data", Name: "svc", Change: &tfjson.Change{Actions: tfjson.Actions{tfjson.ActionUpdate}}}
	plan := &tfjson.Plan{ResourceChanges: []*tfjson.ResourceChange{inMod}, PlannedValues: &tfjson.StateValues{RootModule: &tfjson.StateModule{
		Resources: []*tfjson.StateResource{{Address: "data.terraform_remote_state.net", Mode: tfjson.DataResourceMode, Type: "terraform_remote_state", Name: "net"}},
	}}}
	for _, tc := range []struct {
		targets []string
		passed  bool
	}{
		{[]string{"module.app"}, true},
		{[]string{"data.terraform_remote_state.net"}, true},
		{[]string{"data.terraform_remote_state.other"}, false},
	} {
		s, err := closure.TargetScope(cfg, []string{"terraform_data.base"})
		if err != nil {
			t.Fatal(err)
		}
		s.Targets = tc.targets
		c, err := closure.Compute(cfg, s)
		if err != nil {
			t.Fatal(err)
		}
		if ch := closure.TargetsPlanned(plan, c); ch.Passed != tc.passed {
			t.Errorf("targets %v: %+v, want passed %v", tc.targets, ch, tc.passed)
		}
	}
}
