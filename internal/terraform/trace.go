package terraform

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/kilolock/kilolock/internal/engine"
)

// What plan JSON leaves out of a configuration, measured with Terraform
// 1.11.4: its configuration lists each resource's arguments and static
// blocks with their references, but not
//
//   - dynamic blocks (terraform internal/command/jsonconfig reads a body with
//     the provider's schema and skips what the schema does not name),
//   - lifecycle preconditions, postconditions and replace_triggered_by,
//     output preconditions,
//   - provisioner connection blocks.
//
// Two of them leave a trace elsewhere in the plan. A dynamic block's blocks
// are in the planned values (resource_changes[].change.after), under a name
// the configuration does not list, or more of them than it lists, or as a
// wholly unknown collection (for_each not yet known; static blocks always
// have a known count). A resource or output with conditions is listed in
// "checks" (Terraform 1.3+). Where the configuration is not read
// (ExtractOptions.ConfigDir unset), a trace widens the resource's module to
// its prefix; replace_triggered_by, connection blocks and conditions before
// Terraform 1.3 leave none, so the read set is then marked unverified
// (engine.Footprint.Unverified) unless widenings cover it.

// builtinProvider is terraform_data's provider: its schema has no nested
// blocks (input, output and triggers_replace are attributes of any type).
const builtinProvider = "terraform.io/builtin/terraform"

// unverifiedReason is engine.Footprint.Unverified for the modules named.
const unverifiedReason = "configuration not read (%s): plan JSON leaves out what dynamic blocks, " +
	"lifecycle conditions, replace_triggered_by and provisioner connection blocks reference"

// instanceValues is one instance's planned value as plan JSON gives it:
// after, after_unknown and after_sensitive (for a data source read while
// planning, its prior_state values and sensitive_values).
type instanceValues struct {
	after, unknown, sensitive any
}

// indexTraces indexes the planned values of every resource instance by
// resource address, and the resources and outputs that have conditions.
func (e *extractor) indexTraces(plan *tfjson.Plan) {
	changed := map[engine.Address]bool{}
	for _, rc := range plan.ResourceChanges {
		if rc == nil || rc.Change == nil || rc.ProviderName == builtinProvider {
			continue
		}
		addr, err := engine.ParseAddress(rc.Address)
		if err != nil {
			continue
		}
		changed[addr] = true
		e.values[addr] = append(e.values[addr], instanceValues{rc.Change.After, rc.Change.AfterUnknown, rc.Change.AfterSensitive})
	}
	if plan.PriorState != nil && plan.PriorState.Values != nil {
		e.indexReadData(plan.PriorState.Values.RootModule, changed)
	}
	for _, c := range plan.Checks {
		a := c.Address
		switch a.Kind {
		case tfjson.CheckKindResource:
			key := a.Type + "." + a.Name
			if a.Mode == tfjson.DataResourceMode {
				key = "data." + key
			}
			e.conditions[joinPath(normModulePath(a.Module), key)] = true
		case tfjson.CheckKindOutputValue:
			e.conditions[joinPath(normModulePath(a.Module), "output."+a.Name)] = true
		}
	}
}

// indexReadData adds the data sources read while planning (in prior_state
// only): those that resource_changes does not hold (changed).
func (e *extractor) indexReadData(sm *tfjson.StateModule, changed map[engine.Address]bool) {
	if sm == nil {
		return
	}
	for _, r := range sm.Resources {
		if r == nil || r.Mode != tfjson.DataResourceMode || r.ProviderName == builtinProvider {
			continue
		}
		a := r.Address
		if sm.Address != "" && !strings.HasPrefix(a, sm.Address+".") {
			a = sm.Address + "." + a
		}
		addr, err := engine.ParseAddress(a)
		if err != nil || changed[addr] {
			continue
		}
		var sens any
		if len(r.SensitiveValues) > 0 {
			_ = json.Unmarshal(r.SensitiveValues, &sens) // a shape hint only
		}
		vals := make(map[string]any, len(r.AttributeValues))
		for k, v := range r.AttributeValues {
			vals[k] = v
		}
		e.values[addr] = append(e.values[addr], instanceValues{after: vals, sensitive: sens})
	}
	for _, c := range sm.ChildModules {
		e.indexReadData(c, changed)
	}
}

// traceUnread records that the configuration of block key ("resource.T.N",
// "data.T.N", "output.N", "provider.…") in module m was not read, and widens
// m where plan JSON holds a trace of what it leaves out.
func (e *extractor) traceUnread(m *module, key string) {
	e.unread[m.path] = true
	name := strings.TrimPrefix(key, "resource.")
	if e.conditions[joinPath(m.path, name)] {
		e.widenModule(m, "lifecycle conditions of "+name+" in "+m.where(),
			"plan JSON lists the conditions (checks) but not what they reference")
	}
	r := m.res[name]
	if r == nil {
		return
	}
	found := map[string]bool{}
	for _, v := range e.values[engine.Address(joinPath(m.path, name))] {
		untracedBlocks("", r.Expressions, v.after, v.unknown, v.sensitive, found)
	}
	if len(found) > 0 {
		e.widenModule(m, fmt.Sprintf("nested blocks %s of %s in %s", joinSorted(found, ", "), name, m.where()),
			"the planned values hold nested blocks the configuration in plan JSON does not list: "+
				"the trace of a dynamic block, whose references plan JSON leaves out")
	}
}

// coveredModule reports whether everything module path reads is in the read
// set by widening: the whole state, or the module or an ancestor widened to
// its prefix with its call's arguments.
func (e *extractor) coveredModule(path string) bool {
	if e.read[engine.AllAddresses] {
		return true
	}
	for p := path; ; p = parentPath(p) {
		if e.widenedMods[p] {
			return true
		}
		if p == "" {
			return false
		}
	}
}

// unverified returns engine.Footprint.Unverified: the reason, naming the
// modules whose configuration was needed, not read and not covered.
func (e *extractor) unverified() string {
	var paths []string
	for path := range e.unread {
		if !e.coveredModule(path) {
			paths = append(paths, path)
		}
	}
	if len(paths) == 0 {
		return ""
	}
	sort.Strings(paths) // the root ("") first
	for i, p := range paths {
		paths[i] = where(p)
	}
	return fmt.Sprintf(unverifiedReason, strings.Join(paths, ", "))
}

// untracedBlocks adds to found the path ("ingress", "rule.match") of every
// value in a planned object (after, with its after_unknown and
// after_sensitive) that holds nested blocks exprs does not list:
//
//   - a name exprs lacks whose value is a non-empty list of objects, an
//     object that is not shaped like a map of strings, an empty object with
//     unknown attributes, or a wholly unknown value that after_sensitive
//     shapes as a collection;
//   - a name whose static blocks exprs lists, with a wholly unknown value or
//     more blocks than listed; with as many, each block is compared in
//     turn.
//
// Without the provider's schema a block is told from an attribute by shape
// only: an attribute the configuration does not set (a computed list of
// objects) is taken for blocks (wider, never narrower); a single block
// whose every attribute is a known string looks like a map of strings (a
// provider-computed tags map) and is not.
func untracedBlocks(prefix string, exprs map[string]*tfjson.Expression, after, unknown, sensitive any, found map[string]bool) {
	a, _ := after.(map[string]any)
	u, _ := unknown.(map[string]any)
	s, _ := sensitive.(map[string]any)
	keys := make(map[string]bool, len(a)+len(u))
	for k := range a {
		keys[k] = true
	}
	for k := range u {
		keys[k] = true
	}
	for k := range keys {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		wholeUnknown := u[k] == true
		ex := exprs[k]
		switch {
		case ex == nil || ex.ExpressionData == nil:
			if holdsBlocks(a[k], u[k]) || (wholeUnknown && isCollection(s[k])) {
				found[path] = true
			}
		case len(ex.NestedBlocks) > 0:
			untracedStatic(path, ex.NestedBlocks, a[k], u[k], s[k], found)
		}
	}
}

// untracedStatic compares the planned value of a name whose static blocks
// the configuration lists with those blocks.
func untracedStatic(path string, blocks []map[string]*tfjson.Expression, after, unknown, sensitive any, found map[string]bool) {
	if unknown == true {
		found[path] = true
		return
	}
	switch v := after.(type) {
	case []any:
		if len(v) > len(blocks) {
			found[path] = true
			return
		}
		if len(v) == len(blocks) {
			for i := range v {
				untracedBlocks(path, blocks[i], v[i], at(unknown, i), at(sensitive, i), found)
			}
		}
		// Fewer: a set merged equal blocks; which is which is unknown.
	case map[string]any:
		if len(blocks) == 1 { // single or group nesting; map nesting is keyed inside
			untracedBlocks(path, blocks[0], v, unknown, sensitive, found)
		}
	}
}

// holdsBlocks reports whether a planned value is shaped like nested blocks.
func holdsBlocks(v, unknown any) bool {
	switch x := v.(type) {
	case []any:
		if len(x) == 0 {
			return false
		}
		for _, el := range x {
			if _, ok := el.(map[string]any); !ok {
				return false
			}
		}
		return true
	case map[string]any:
		if len(x) == 0 {
			um, _ := unknown.(map[string]any)
			return len(um) > 0
		}
		for _, el := range x {
			if _, ok := el.(string); !ok {
				return true
			}
		}
		return false // a map of strings
	}
	return false
}

func isCollection(v any) bool {
	switch v.(type) {
	case []any, map[string]any:
		return true
	}
	return false
}

// at returns element i of a list-shaped after_unknown or after_sensitive.
func at(v any, i int) any {
	if l, ok := v.([]any); ok && i < len(l) {
		return l[i]
	}
	return nil
}
