package closure

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// Scope is what a native-lane plan starts from (issue 17 §1): the targets
// and how they were found.
type Scope struct {
	// How is "targets" (`--target`) or "changed-files" (`--changed-file`).
	How string
	// Targets are the target addresses: as given for "targets" (instance
	// keys kept: `terraform_data.web["a"]`), the resource-level addresses of
	// the resources the files declare or reach for "changed-files"; sorted.
	Targets []string
	roots   []node
}

// TargetScope scopes a plan to targets: resource addresses as
// `terraform plan -target` takes them (module calls and instance keys
// allowed: `module.app["eu"].terraform_data.web[0]`), or a module
// (`module.app`: every resource of its tree). Errors wrap ErrInvalid for an
// address that does not parse (tfstate.ParseTarget's reason). An empty
// target set, a target the configuration does not declare (a resource only
// the state still holds is planned by the terraform lane) and a target in a
// module the slice cannot write return a *Fallback.
func TargetScope(cfg *Config, targets []string) (*Scope, error) {
	if len(targets) == 0 {
		return nil, fallback("the scope has no targets: an empty target set is never \"nothing to plan\"")
	}
	s := &Scope{How: "targets"}
	for _, raw := range targets {
		t, err := tfstate.ParseTarget(raw)
		if err != nil {
			return nil, fmt.Errorf("scoping to targets: %w: %w", ErrInvalid, err)
		}
		m := cfg.modules[""]
		for _, st := range t.Module {
			cl := m.calls[st.Name]
			if cl == nil {
				return nil, fallback("target %s: module %s is not called in the configuration", raw, joinPath(m.Path, "module."+st.Name))
			}
			if cl.Child == nil {
				return nil, fallback("target %s: %s", raw, cl.Why)
			}
			m = cl.Child
		}
		if t.Resource == nil {
			roots := cfg.everything(m)
			if len(roots) == 0 {
				return nil, fallback("target %s: the module declares no resource", raw)
			}
			s.roots = append(s.roots, roots...)
		} else {
			key := t.Resource.Type + "." + t.Resource.Name
			if t.Resource.Mode == tfstate.ModeData {
				key = "data." + key
			}
			if _, ok := m.blocks[key]; !ok {
				return nil, fallback("target %s is not declared in the configuration (a resource only the state holds is planned by the terraform lane)", raw)
			}
			s.roots = append(s.roots, node{m.Path, key})
		}
		s.Targets = append(s.Targets, raw)
	}
	sort.Strings(s.Targets)
	return s, nil
}

// Closure is the dependency closure of a scope's targets in one
// configuration (issue 17 §2): every block the targets need to plan as the
// full configuration would plan them.
type Closure struct {
	// Scope is the scope the closure was computed from.
	Scope *Scope
	// Addresses are the resource-level addresses (module path without
	// instance keys, data sources with "data.") of every resource and data
	// source of the closure, and the old addresses of the moved blocks it
	// holds; sorted. The slice's state holds their entries.
	Addresses []string
	// Blocks are the closure's blocks as "MODULE|KEY" ("|terraform_data.a",
	// "module.app|var.name"; Block.Key), sorted.
	Blocks []string
	cfg    *Config
	sel    map[node]bool
	addrs  map[string]bool
}

// Compute returns the closure of s in cfg: from each root, every block its
// block references (resources, data sources, locals, variables, module
// calls and outputs, through module calls in both directions), the provider
// configuration each resource uses and what that references, count,
// for_each and depends_on (a module in depends_on: its whole tree), and
// every module call on the way to a block; then every moved, import and
// removed block whose addresses name a resource of the closure, with what
// it references, until nothing is added. A directory called by several
// module calls is sliced once: a block taken in one call is taken in every
// call of that directory (and so are their addresses). The `terraform`
// blocks of each written module are always part of the slice (WriteSlice).
// A closure that reaches a module call the slice cannot write (a remote
// source) returns a *Fallback naming it.
func Compute(cfg *Config, s *Scope) (*Closure, error) {
	c := &Closure{Scope: s, cfg: cfg, sel: map[node]bool{}, addrs: map[string]bool{}}
	byDir := map[string][]string{}
	for _, p := range cfg.paths {
		byDir[cfg.modules[p].Dir] = append(byDir[cfg.modules[p].Dir], p)
	}
	var queue []node
	add := func(n node) {
		for _, p := range byDir[cfg.modules[n.path].Dir] {
			o := node{p, n.key}
			if !c.sel[o] {
				c.sel[o] = true
				queue = append(queue, o)
			}
		}
	}
	for _, r := range s.roots {
		add(r)
	}
	for {
		for len(queue) > 0 {
			n := queue[0]
			queue = queue[1:]
			m := cfg.modules[n.path]
			if b := m.blocks[n.key]; b.Kind == "module" {
				if cl := m.calls[strings.TrimPrefix(n.key, "module.")]; cl.Child == nil {
					return nil, fallback("the closure reaches %s", cl.Why)
				}
			}
			for _, d := range cfg.deps(n) {
				add(d)
			}
		}
		c.collectAddresses()
		grew := false
		for _, p := range cfg.paths {
			m := cfg.modules[p]
			for _, k := range m.keys {
				b := m.blocks[k]
				n := node{p, k}
				if c.sel[n] || (b.Kind != "moved" && b.Kind != "import" && b.Kind != "removed") {
					continue
				}
				touches, from := c.touches(m, b)
				if !touches {
					continue
				}
				add(n)
				grew = true
				for _, f := range from {
					c.addrs[f] = true
				}
			}
		}
		for _, n := range c.dependentOutputs() {
			add(n)
			grew = true
		}
		if !grew {
			break
		}
	}
	c.collectAddresses()
	for n := range c.sel {
		c.Blocks = append(c.Blocks, n.path+"|"+n.key)
	}
	sort.Strings(c.Blocks)
	return c, nil
}

// dependentOutputs are the root module's outputs outside the closure that
// depend, directly or through locals, variables and module outputs, on a
// block of it, so that the apply does not leave them stale at the head.
// Scoped to targets, as Terraform's -target: only an output whose
// resources are all in the closure (an output that also reads a resource
// outside stays out, as the targeted resources' dependents do). Scoped to
// changed files: every such output, with what it reads (the full plan
// would change it).
func (c *Closure) dependentOutputs() []node {
	root := c.cfg.modules[""]
	var out []node
	for _, k := range root.keys {
		n := node{"", k}
		if root.blocks[k].Kind != "output" || c.sel[n] {
			continue
		}
		touches, outside := c.reaches(n)
		if touches && (!outside || c.Scope.How == "changed-files") {
			out = append(out, n)
		}
	}
	return out
}

// reaches walks what n depends on: touches, a block of the closure;
// outside, a resource or data source not in it.
func (c *Closure) reaches(n node) (touches, outside bool) {
	seen := map[node]bool{n: true}
	queue := []node{n}
	for ; len(queue) > 0; queue = queue[1:] {
		q := queue[0]
		if c.sel[q] {
			touches = true
			continue
		}
		if k := c.cfg.modules[q.path].blocks[q.key].Kind; k == "resource" || k == "data" {
			outside = true
		}
		for _, d := range c.cfg.deps(q) {
			if !seen[d] {
				seen[d] = true
				queue = append(queue, d)
			}
		}
	}
	return touches, outside
}

func (c *Closure) collectAddresses() {
	for n := range c.sel {
		if k := c.cfg.modules[n.path].blocks[n.key].Kind; k == "resource" || k == "data" {
			c.addrs[joinPath(n.path, n.key)] = true
		}
	}
	c.Addresses = c.Addresses[:0]
	for a := range c.addrs {
		c.Addresses = append(c.Addresses, a)
	}
	sort.Strings(c.Addresses)
}

// touches says whether a moved, import or removed block of m names an
// address of the closure (or one inside a module of it), and returns the
// old addresses it moves or removes (the slice's state needs them).
func (c *Closure) touches(m *Module, b *Block) (bool, []string) {
	var hit bool
	var from []string
	for _, arg := range []string{"from", "to"} {
		a, ok := b.body.Attributes[arg]
		if !ok {
			continue
		}
		t, diags := hcl.AbsTraversalForExpr(a.Expr)
		if diags.HasErrors() {
			continue
		}
		addr := joinPath(m.Path, keyless(t))
		for _, x := range c.Addresses {
			if x == addr || strings.HasPrefix(x, addr+".") {
				hit = true
			}
		}
		if arg == "from" {
			from = append(from, addr)
		}
	}
	return hit, from
}

// keyless spells a traversal as an address without instance keys.
func keyless(t hcl.Traversal) string {
	var parts []string
	for _, s := range t {
		switch v := s.(type) {
		case hcl.TraverseRoot:
			parts = append(parts, v.Name)
		case hcl.TraverseAttr:
			parts = append(parts, v.Name)
		}
	}
	return strings.Join(parts, ".")
}

// Contains says whether addr — a resource or instance address as plan JSON
// or a state spells it (`module.app["eu"].terraform_data.web[0]`) — belongs
// to a resource of the closure. An address that does not parse is not
// contained.
func (c *Closure) Contains(addr string) bool {
	r, err := resourceOf(addr)
	return err == nil && c.addrs[r]
}

// resourceOf is the resource-level address of a resource or instance
// address.
func resourceOf(addr string) (string, error) {
	t, err := tfstate.ParseTarget(addr)
	if err != nil {
		return "", err
	}
	if t.Resource == nil {
		return "", fmt.Errorf("%w: %s is a module, not a resource", ErrInvalid, addr)
	}
	var mod []string
	for _, m := range t.Module {
		mod = append(mod, "module."+m.Name)
	}
	return tfstate.ResourceAddress(strings.Join(mod, "."), t.Resource.Mode, t.Resource.Type, t.Resource.Name), nil
}

// SliceState returns the slice's state (issue 17 §3): full's lineage and
// serial, the entries of the closure's resources — every instance of each,
// whole — and the root outputs the slice declares. full is not modified.
func (c *Closure) SliceState(full *tfstate.State) *tfstate.State {
	out := *full
	out.Resources = nil
	for _, r := range full.Resources {
		if c.addrs[r.Address()] {
			out.Resources = append(out.Resources, r)
		}
	}
	out.Outputs = map[string]tfstate.Output{}
	for name, o := range full.Outputs {
		if c.sel[node{"", "output." + name}] {
			out.Outputs[name] = o
		}
	}
	return &out
}
