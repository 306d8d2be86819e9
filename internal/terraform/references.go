package terraform

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	tfjson "github.com/hashicorp/terraform-json"
	"github.com/zclconf/go-cty/cty"

	"github.com/kilolock/kilolock/internal/engine"
)

// How a reference made in module M resolves (relative to M, as in plan
// JSON's configuration; docs/terraform.md "Plan JSON"):
//
//	TYPE.NAME[…]…        the resource M.TYPE.NAME
//	data.T.N…            the data source M.data.T.N, and transitively what its
//	                     configuration references (it is read at plan time)
//	module.C.OUT…        the output OUT of M.module.C: its expression and
//	                     depends_on in C's scope, and C's count/for_each
//	module.C (bare)      every output of M.module.C, as above (the value of a
//	                     module call is the object of its outputs)
//	var.X                root: nothing (variables are not state); in a child,
//	                     the call's argument X in the parent's scope, and the
//	                     call's count/for_each
//	local.X              with ExtractOptions.ConfigDir: the local's
//	                     expression parsed from HCL, recursively; otherwise
//	                     widened to M's prefix
//	ephemeral.T.N        with a config dir: its HCL block; otherwise widened
//	count.*, each.*, path.*, terraform.*, self…   nothing
//	anything else        widened to M's prefix
//
// Widening to M's prefix also reads every argument of M's call, so that what
// reaches M through its variables stays covered.

// readExprs reads every expression of an expressions map, in key order.
func (e *extractor) readExprs(m *module, exprs map[string]*tfjson.Expression) {
	keys := make([]string, 0, len(exprs))
	for k := range exprs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e.readExpr(m, exprs[k])
	}
}

// readExpr reads one expression and the nested blocks below it.
func (e *extractor) readExpr(m *module, ex *tfjson.Expression) {
	if ex == nil || ex.ExpressionData == nil {
		return
	}
	e.readRefs(m, ex.References)
	for _, block := range ex.NestedBlocks {
		e.readExprs(m, block)
	}
}

type ref struct {
	text  string
	steps []step
}

// readRefs resolves one expression's "references" list. From format 0.2
// (Terraform 1.0.x+, terraform PR 28884) Terraform lists each reference
// followed by its shorter forms — "module.c.x.y", "module.c.x", "module.c" —
// so a run of successive prefixes of one head is one reference: the head is
// resolved and the run skipped. Format 0.1 lists each reference once.
func (e *extractor) readRefs(m *module, refs []string) {
	parsed := make([]ref, 0, len(refs))
	for _, s := range refs {
		st, ok := parseSteps(s)
		if !ok {
			e.widenModule(m, "reference "+strconv.Quote(s)+" in "+m.where(), "the reference does not parse")
			continue
		}
		parsed = append(parsed, ref{text: s, steps: st})
	}
	for i := 0; i < len(parsed); {
		head := parsed[i]
		e.resolve(m, head.steps, head.text, false)
		i++
		if !e.grouped {
			continue
		}
		for want := len(head.steps) - 1; i < len(parsed) && want >= chainMin(head.steps); want-- {
			if !isPrefix(parsed[i].steps, head.steps, want) {
				break
			}
			i++
		}
	}
}

// chainMin is the length of the shortest form Terraform lists after a
// reference (terraform internal/command/jsonconfig marshalExpression): its
// subject, minus the instance key or output name for a keyed resource, a
// keyed module call or a module output.
func chainMin(st []step) int {
	n := len(st)
	switch st[0].name {
	case "module":
		// module.c.out → module.c; module.c[k].out → module.c[k];
		// module.c[k] → module.c.
		if n > 3 && st[2].index && !st[3].index {
			return 3
		}
		return 2
	case "data", "ephemeral":
		return 3 // data.T.N[k] → data.T.N
	case "self":
		return 1
	case "action":
		return n
	}
	return 2 // T.N[k] → T.N; var.x, local.x, each.key, …
}

func isPrefix(short, long []step, n int) bool {
	if len(short) != n || n > len(long) {
		return false
	}
	for i := range short {
		if short[i].index != long[i].index || short[i].name != long[i].name || short[i].key != long[i].key {
			return false
		}
	}
	return true
}

// resolve reads what one reference made in module m reads. fromHCL marks a
// traversal found by parsing HCL rather than listed by Terraform: there,
// roots that are not references (dynamic block iterators, keywords such as
// `destroy`, provider addresses) are skipped by requiring the resource,
// data source or module call to exist in m's configuration.
func (e *extractor) resolve(m *module, st []step, text string, fromHCL bool) {
	unknown := func() {
		if !fromHCL {
			e.widenModule(m, "reference "+text+" in "+m.where(), "the reference is not a construct the extractor resolves")
		}
	}
	if len(st) == 0 || st[0].index {
		unknown()
		return
	}
	named := func(i int) bool { return len(st) > i && !st[i].index }
	switch st[0].name {
	case "count", "each", "path", "terraform", "self":
		return
	case "var":
		if !named(1) {
			unknown()
			return
		}
		e.followVar(m, st[1].name)
	case "local":
		if !named(1) {
			unknown()
			return
		}
		e.followLocal(m, st[1].name)
	case "module":
		if !named(1) {
			unknown()
			return
		}
		if fromHCL && m.children[st[1].name] == nil {
			return
		}
		i := 2
		if len(st) > i && st[i].index {
			i++
		}
		if named(i) {
			e.followOutput(m, st[1].name, st[i].name)
		} else {
			e.followAllOutputs(m, st[1].name)
		}
	case "data":
		if !named(1) || !named(2) {
			unknown()
			return
		}
		e.followData(m, st[1].name, st[2].name, text, fromHCL)
	case "ephemeral":
		if !named(1) || !named(2) {
			unknown()
			return
		}
		e.followEphemeral(m, st[1].name, st[2].name)
	case "action":
		unknown()
	default:
		if !named(1) {
			unknown()
			return
		}
		key := st[0].name + "." + st[1].name
		if fromHCL && m.res[key] == nil {
			return
		}
		e.read[readAddress(joinPath(m.path, key), st)] = true
	}
}

// readAddress is what a reference to resource addr (steps st) reads: one
// instance when the reference names one with a literal key
// (`x.y["k"].id` → `x.y["k"]`, in every instance of the enclosing module
// call: ADR 0065), else the whole resource.
func readAddress(addr string, st []step) engine.Address {
	if len(st) > 2 && st[2].index && st[2].key != "?" {
		if a, err := engine.ParseInstanceAddress(addr + "[" + st[2].key + "]"); err == nil {
			return a
		}
	}
	return engine.Address(addr)
}

// followVar reads what input variable name of module m is set from.
func (e *extractor) followVar(m *module, name string) {
	if m.call == nil || !e.once("var|"+m.path+"|"+name) {
		return
	}
	e.readExpr(m.parent, m.call.Expressions[name])
	e.readRepetition(m)
}

// followOutput reads what output out of the call m.module.callName reads.
func (e *extractor) followOutput(m *module, callName, out string) {
	child := m.children[callName]
	from := "module." + callName + "." + out + " in " + m.where()
	if child == nil {
		e.widenModule(m, from, "the module call has no configuration in the plan")
		return
	}
	if !e.once("out|" + child.path + "|" + out) {
		return
	}
	e.readRepetition(child)
	o := child.cfg.Outputs[out]
	if o == nil {
		e.widenModule(child, from, "the module has no such output in the plan's configuration")
		return
	}
	e.readExpr(child, o.Expression)
	e.readDependsOn(child, o.DependsOn)
	e.readHCLBlock(child, "output."+out)
}

// followAllOutputs reads a bare module call reference: all of its outputs.
func (e *extractor) followAllOutputs(m *module, callName string) {
	child := m.children[callName]
	if child == nil {
		e.widenModule(m, "module."+callName+" in "+m.where(), "the module call has no configuration in the plan")
		return
	}
	if !e.once("outs|" + child.path) {
		return
	}
	e.readRepetition(child)
	names := make([]string, 0, len(child.cfg.Outputs))
	for n := range child.cfg.Outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e.followOutput(m, callName, n)
	}
}

// followData reads a data source and, transitively, what its configuration
// references: its value is read at plan time from them.
func (e *extractor) followData(m *module, typ, name, text string, fromHCL bool) {
	key := "data." + typ + "." + name
	cfg := m.res[key]
	if cfg == nil {
		if !fromHCL {
			e.read[engine.Address(joinPath(m.path, key))] = true
			e.widenModule(m, "reference "+text+" in "+m.where(), "the data source has no configuration in the plan")
		}
		return
	}
	e.read[engine.Address(joinPath(m.path, key))] = true
	e.readResourceConfig(m, cfg)
}

// followEphemeral reads an ephemeral resource: it is not state and not in
// plan JSON, but it is opened at plan time from what its block references.
func (e *extractor) followEphemeral(m *module, typ, name string) {
	from := "ephemeral." + typ + "." + name + " in " + m.where()
	if !e.once("eph|" + m.path + "|" + typ + "." + name) {
		return
	}
	if e.hcl == nil {
		e.widenModule(m, from, "ephemeral resources are not in plan JSON and no config dir was given")
		return
	}
	hm, err := e.hcl.module(m)
	if err != nil {
		e.widenModule(m, from, err.Error())
		return
	}
	trs, ok := hm.blocks["ephemeral."+typ+"."+name]
	if !ok {
		e.widenModule(m, from, fmt.Sprintf("the block is not in %s: the config dir does not match the plan", hm.dir))
		return
	}
	e.resolveTraversals(m, trs)
	e.readProviderFallback(m)
}

// followLocal reads what local value name of module m reads.
func (e *extractor) followLocal(m *module, name string) {
	if !e.once("local|" + m.path + "|" + name) {
		return
	}
	from := "local." + name + " in " + m.where()
	if e.hcl == nil {
		e.widenModule(m, from, "locals are not in plan JSON and no config dir was given")
		return
	}
	hm, err := e.hcl.module(m)
	if err != nil {
		e.widenModule(m, from, err.Error())
		return
	}
	trs, ok := hm.locals[name]
	if !ok {
		e.widenModule(m, from, fmt.Sprintf("local.%s is not defined in %s: the config dir does not match the plan", name, hm.dir))
		return
	}
	e.resolveTraversals(m, trs)
}

// readHCLBlock reads, with a config dir, every traversal of a block (key
// "resource.T.N", "data.T.N", "output.N", "provider.NAME[.ALIAS]") of
// module m: the references plan JSON leaves out (dynamic blocks, lifecycle
// conditions and replace_triggered_by, connection blocks; trace.go). What
// cannot be read is never dropped: a module whose directory cannot be read
// (a remote module before `terraform init`) is widened to its prefix, and
// so is one whose directory lacks the block (the config dir does not match
// the plan; a provider block may be absent: the configuration is then
// implied). Without a config dir the block is recorded as not read and
// widened where plan JSON leaves a trace (traceUnread).
func (e *extractor) readHCLBlock(m *module, key string) {
	if e.hcl == nil {
		e.traceUnread(m, key)
		return
	}
	hm, err := e.hcl.module(m)
	if err != nil {
		e.widenModule(m, "configuration of "+m.where(), "the module's directory cannot be read: "+err.Error())
		return
	}
	trs, ok := hm.blocks[key]
	if !ok && !strings.HasPrefix(key, "provider.") {
		e.widenModule(m, strings.TrimPrefix(key, "resource.")+" in "+m.where(),
			fmt.Sprintf("the block is not in %s: the config dir does not match the plan", hm.dir))
		return
	}
	e.resolveTraversals(m, trs)
}

func (e *extractor) resolveTraversals(m *module, trs []hcl.Traversal) {
	for _, t := range trs {
		st, ok := traversalSteps(t)
		if !ok || len(st) == 0 {
			continue
		}
		e.resolve(m, st, traversalText(t), true)
	}
}

// step is one step of a reference: a name (root or attribute) or an index
// key (rendered: a quoted string or a number).
type step struct {
	name  string
	key   string
	index bool
}

// parseSteps parses a reference or address as Terraform writes it.
func parseSteps(s string) ([]step, bool) {
	t, diags := hclsyntax.ParseTraversalAbs([]byte(s), "", hcl.InitialPos)
	if diags.HasErrors() {
		return nil, false
	}
	return traversalSteps(t)
}

func traversalSteps(t hcl.Traversal) ([]step, bool) {
	out := make([]step, 0, len(t))
	for _, tr := range t {
		switch v := tr.(type) {
		case hcl.TraverseRoot:
			out = append(out, step{name: v.Name})
		case hcl.TraverseAttr:
			out = append(out, step{name: v.Name})
		case hcl.TraverseIndex:
			out = append(out, step{index: true, key: renderKey(v.Key)})
		case hcl.TraverseSplat:
			return out, true // a splat reads the whole collection before it
		default:
			return nil, false
		}
	}
	return out, true
}

func renderKey(k cty.Value) string {
	if !k.IsKnown() || k.IsNull() {
		return "?"
	}
	switch k.Type() {
	case cty.String:
		return strconv.Quote(k.AsString())
	case cty.Number:
		return k.AsBigFloat().Text('g', -1)
	}
	return "?"
}

func traversalText(t hcl.Traversal) string {
	st, _ := traversalSteps(t)
	var s string
	for i, x := range st {
		switch {
		case x.index:
			s += "[" + x.key + "]"
		case i == 0:
			s += x.name
		default:
			s += "." + x.name
		}
	}
	return s
}

// modulePathOf returns "module.a.module.b" for the leading module steps.
func modulePathOf(st []step) string {
	var path string
	for i := 0; i+1 < len(st); i++ {
		if st[i].name == "module" && !st[i].index && !st[i+1].index {
			path = joinPath(path, "module."+st[i+1].name)
			i++
		}
	}
	return path
}

// readProvider reads the provider configuration a resource uses, named by
// its provider_config_key.
//
// From Terraform 1.3 the key names the configuration actually used: keys of
// module resources are normalized to the configuration a parent passes or
// lets the module inherit, and a key with no entry means no provider block
// configures it (terraform internal/command/jsonconfig
// normalizeModuleProviderKeys). Before, the key is opaque and often names no
// entry ("CALL:NAME" for module resources; passed and inherited
// configurations are not listed under the child: terraform-json
// ConfigResource docs, terraform issues 23408 and 30113). Then, unless the
// key names an entry with expressions, every provider configuration of the
// module and its ancestors is read — the one used is among them.
func (e *extractor) readProvider(m *module, key string) {
	if key != "" {
		mod, local := splitProviderKey(key)
		pes := e.providers[mod+"|"+local]
		configured := false
		for _, pe := range pes {
			configured = configured || len(pe.cfg.Expressions) > 0
		}
		switch {
		case len(pes) > 0 && (e.exactProviderKeys || configured):
			for _, pe := range pes {
				e.readProviderEntry(pe)
			}
			return
		case len(pes) == 0 && e.exactProviderKeys:
			return
		}
	}
	e.readProviderFallback(m)
}

func (e *extractor) readProviderFallback(m *module) {
	path := ""
	if m != nil {
		path = m.path
	}
	if !e.once("provall|" + path) {
		return
	}
	for _, k := range e.provOrder {
		for _, pe := range e.providers[k] {
			if isAncestorOrSelf(pe.mod, path) {
				e.readProviderEntry(pe)
			}
		}
	}
}

func (e *extractor) readProviderEntry(pe *providerEntry) {
	if !e.once("prov|" + pe.raw) {
		return
	}
	pm := e.mods[pe.mod]
	if pm == nil {
		if len(pe.cfg.Expressions) > 0 {
			e.widenPath(pe.mod, "provider configuration "+pe.local+" in "+where(pe.mod), "the provider's module has no configuration in the plan")
		}
		return
	}
	e.readExprs(pm, pe.cfg.Expressions)
	if pe.cfg.FullName == builtinProvider {
		return // terraform_data's provider takes no configuration
	}
	e.readHCLBlock(pm, "provider."+pe.local)
}

// splitProviderKey normalizes a provider_config key or provider_config_key
// ("aws", "aws.east", "foo:null", "module.foo:null.aliased",
// "foo.bar:aws") into (module path, local provider name[.alias]).
func splitProviderKey(key string) (string, string) {
	mod, local, ok := strings.Cut(key, ":")
	if !ok {
		return "", key
	}
	return normModulePath(mod), local
}

// normModulePath turns "foo.bar" (Terraform 0.12–1.2 module addresses in
// provider keys) or "module.foo.module.bar" into "module.foo.module.bar".
func normModulePath(s string) string {
	if s == "" || strings.HasPrefix(s, "module.") {
		return s
	}
	parts := strings.Split(s, ".")
	for i, p := range parts {
		parts[i] = "module." + p
	}
	return strings.Join(parts, ".")
}

func joinPath(mod, rest string) string {
	if mod == "" {
		return rest
	}
	return mod + "." + rest
}

func parentPath(path string) string {
	i := strings.LastIndex(path, ".module.")
	if i < 0 {
		return ""
	}
	return path[:i]
}

func isAncestorOrSelf(anc, path string) bool {
	return anc == "" || anc == path || strings.HasPrefix(path, anc+".")
}

func where(mod string) string {
	if mod == "" {
		return "root"
	}
	return mod
}
