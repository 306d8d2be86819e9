package closure

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-exec/tfexec"
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// Names of the closure proof checks (issue 17 §4, ADR 0033 D2): the engine
// records each as a marker and falls back on any failure.
const (
	CheckValidates       = "slice-validates"
	CheckWithinSlice     = "plan-within-slice"
	CheckNoCreateOutside = "no-create-outside-slice"
	CheckTargetsPlanned  = "targets-planned"
)

// Check is the result of one closure proof check: Name is one of the Check*
// constants; Passed, or Found says in plain words what failed it.
type Check struct {
	Name   string
	Passed bool
	Found  string
}

func pass(name string) Check { return Check{Name: name, Passed: true} }

func fail(name string, what []string, format string) Check {
	sort.Strings(what)
	if len(what) > 5 {
		what = append(what[:5], fmt.Sprintf("and %d more", len(what)-5))
	}
	return Check{Name: name, Found: fmt.Sprintf(format, strings.Join(what, ", "))}
}

// Validates runs `terraform init -backend=false` and `terraform validate` on
// the slice's configuration in dir with the Terraform at execPath (a
// terraform-exec run: its environment is this process's). It fails with
// Terraform's diagnostics, or the error of a run that did not finish.
func Validates(ctx context.Context, execPath, dir string) Check {
	tf, err := tfexec.NewTerraform(dir, execPath)
	if err != nil {
		return Check{Name: CheckValidates, Found: "terraform could not be started: " + err.Error()}
	}
	if err := tf.Init(ctx, tfexec.Backend(false)); err != nil {
		return Check{Name: CheckValidates, Found: "terraform init failed: " + err.Error()}
	}
	out, err := tf.Validate(ctx)
	if err != nil {
		return Check{Name: CheckValidates, Found: "terraform validate did not run: " + err.Error()}
	}
	if !out.Valid {
		var ds []string
		for _, d := range out.Diagnostics {
			if d.Severity == tfjson.DiagnosticSeverityError {
				ds = append(ds, d.Summary+": "+d.Detail)
			}
		}
		return fail(CheckValidates, ds, "the sliced configuration does not validate: %s")
	}
	return pass(CheckValidates)
}

// WithinSlice checks that the slice's plan changes only the closure's
// resources: every resource_changes entry whose actions are not no-op, and
// the previous address of every move, is in c (Closure.Contains).
func WithinSlice(plan *tfjson.Plan, c *Closure) Check {
	var out []string
	for _, rc := range plan.ResourceChanges {
		if rc.Change == nil {
			continue
		}
		if !rc.Change.Actions.NoOp() && !c.Contains(rc.Address) {
			out = append(out, rc.Address)
		}
		if rc.PreviousAddress != "" && !c.Contains(rc.PreviousAddress) {
			out = append(out, rc.PreviousAddress)
		}
	}
	if len(out) > 0 {
		return fail(CheckWithinSlice, out, "the plan changes addresses outside the slice: %s")
	}
	return pass(CheckWithinSlice)
}

// NoCreateOutside checks that the slice's plan creates no resource the head
// state holds while the slice's state does not (the slice's state would
// then be missing an entry and the apply would duplicate an object).
// Resource level: SliceState copies a resource's entry whole, instances and
// all, so a created instance of a resource in the slice is a real create.
func NoCreateOutside(plan *tfjson.Plan, head, slice *tfstate.State) Check {
	inHead, inSlice := map[string]bool{}, map[string]bool{}
	for _, a := range head.Addresses() {
		inHead[a] = true
	}
	for _, a := range slice.Addresses() {
		inSlice[a] = true
	}
	var out []string
	for _, rc := range plan.ResourceChanges {
		if rc.Change == nil || !rc.Change.Actions.Create() {
			continue
		}
		r := tfstate.ResourceAddress(rc.ModuleAddress, string(rc.Mode), rc.Type, rc.Name)
		if inHead[r] && !inSlice[r] {
			out = append(out, rc.Address)
		}
	}
	if len(out) > 0 {
		return fail(CheckNoCreateOutside, out, "the plan creates what the head state holds outside the slice: %s")
	}
	return pass(CheckNoCreateOutside)
}

// TargetsPlanned checks that the plan has every target of c's scope: a
// resource target has a resource_changes entry of that resource (any
// action, no-op included), an instance target one of that instance. Only
// "targets" scopes are checked; a target with no instance (count = 0) fails,
// which falls back, the safe side.
func TargetsPlanned(plan *tfjson.Plan, c *Closure) Check {
	have := map[string]bool{}
	var modules []string // module instance paths with something planned
	add := func(addr, module, mode, typ, name string) {
		have[addr] = true
		have[tfstate.ResourceAddress(module, mode, typ, name)] = true
		if module != "" {
			modules = append(modules, module)
		}
	}
	for _, rc := range plan.ResourceChanges {
		add(rc.Address, rc.ModuleAddress, string(rc.Mode), rc.Type, rc.Name)
	}
	// A data source read while planning has no resource change: its
	// planned value (or prior state) is the entry that says it was read.
	for _, sv := range []*tfjson.StateValues{plan.PlannedValues, stateValues(plan.PriorState)} {
		if sv != nil {
			walkModule(sv.RootModule, func(r *tfjson.StateResource, module string) {
				if r.Mode == tfjson.DataResourceMode {
					add(r.Address, module, string(r.Mode), r.Type, r.Name)
				}
			})
		}
	}
	var out []string
	for _, t := range c.Scope.Targets {
		if !have[t] && !moduleTargetPlanned(t, modules) {
			out = append(out, t)
		}
	}
	if len(out) > 0 {
		return fail(CheckTargetsPlanned, out, "the plan has no entry for the targets %s")
	}
	return pass(CheckTargetsPlanned)
}

// moduleTargetPlanned reports whether target names a module (an instance,
// `module.a["k"]`, or a call, `module.a`) in which something is planned:
// Terraform plans a module target's resources, never the module itself.
func moduleTargetPlanned(target string, modules []string) bool {
	t, err := tfstate.ParseTarget(target)
	if err != nil || t.Resource != nil {
		return false
	}
	keyed, call := tfstate.ModulePath(t.Module), modulePathKeyless(t.Module)
	within := func(m, mod string) bool { return m == mod || strings.HasPrefix(m, mod+".") }
	for _, m := range modules {
		if within(m, keyed) {
			return true
		}
		if mt, err := tfstate.ParseTarget(m); err == nil && keyed == call && within(modulePathKeyless(mt.Module), call) {
			return true // a call without keys targets every instance
		}
	}
	return false
}

// modulePathKeyless is a module instance path without its instance keys.
func modulePathKeyless(steps []tfstate.ModuleStep) string {
	var parts []string
	for _, s := range steps {
		parts = append(parts, "module."+s.Name)
	}
	return strings.Join(parts, ".")
}

func stateValues(s *tfjson.State) *tfjson.StateValues {
	if s == nil {
		return nil
	}
	return s.Values
}

// walkModule calls f for every resource of m and its child modules, with
// the module's address.
func walkModule(m *tfjson.StateModule, f func(*tfjson.StateResource, string)) {
	if m == nil {
		return
	}
	for _, r := range m.Resources {
		f(r, m.Address)
	}
	for _, c := range m.ChildModules {
		walkModule(c, f)
	}
}
