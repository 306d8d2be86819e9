package closure

import (
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// node is one block of one module path.
type node struct {
	path, key string
}

// ref is one traversal found in a block and the argument it sits in at the
// block's top level ("provider", "depends_on", … or "").
type ref struct {
	t   hcl.Traversal
	arg string
}

// blockRefs returns every traversal of a block: all arguments, meta-arguments
// included (count, for_each, depends_on, provider, providers, lifecycle),
// and nested blocks; the iterator of a dynamic block is left out (the rule of
// the read set's syntaxTraversals in internal/terraform, which leaves out
// meta-arguments too: the closure needs them).
func blockRefs(b *Block) []ref {
	if b.attr != nil {
		return exprRefs(b.attr.Expr, "", nil)
	}
	return bodyRefs(b.body, nil, true)
}

func exprRefs(e hclsyntax.Expression, arg string, iterators map[string]bool) []ref {
	var out []ref
	for _, t := range e.Variables() {
		if !iterators[t.RootName()] {
			out = append(out, ref{t: t, arg: arg})
		}
	}
	return out
}

func bodyRefs(b *hclsyntax.Body, iterators map[string]bool, top bool) []ref {
	var out []ref
	names := make([]string, 0, len(b.Attributes))
	for n := range b.Attributes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		arg := ""
		if top {
			arg = n
		}
		a := b.Attributes[n]
		switch {
		case top && n == "provider":
			if t, diags := hcl.AbsTraversalForExpr(a.Expr); !diags.HasErrors() {
				out = append(out, ref{t: t, arg: "provider"})
			}
			continue
		case top && n == "providers":
			if oc, ok := a.Expr.(*hclsyntax.ObjectConsExpr); ok {
				for _, it := range oc.Items {
					if t, diags := hcl.AbsTraversalForExpr(it.ValueExpr); !diags.HasErrors() {
						out = append(out, ref{t: t, arg: "provider"})
					}
				}
			}
			continue
		}
		out = append(out, exprRefs(a.Expr, arg, iterators)...)
	}
	for _, blk := range b.Blocks {
		inner := iterators
		if blk.Type == "dynamic" && len(blk.Labels) > 0 {
			it := blk.Labels[0]
			if a, ok := blk.Body.Attributes["iterator"]; ok {
				if t, diags := hcl.AbsTraversalForExpr(a.Expr); !diags.HasErrors() {
					it = t.RootName()
				}
			}
			inner = map[string]bool{it: true}
			for k := range iterators {
				inner[k] = true
			}
		}
		if blk.Type == "lifecycle" && top {
			// ignore_changes names attributes of the resource itself.
			for n, a := range blk.Body.Attributes {
				if n != "ignore_changes" {
					out = append(out, exprRefs(a.Expr, "", inner)...)
				}
			}
			for _, nb := range blk.Body.Blocks {
				out = append(out, bodyRefs(nb.Body, inner, false)...)
			}
			continue
		}
		out = append(out, bodyRefs(blk.Body, inner, false)...)
	}
	return out
}

// names returns the root names and attribute names of t until the first
// index or splat.
func names(t hcl.Traversal) []string {
	var out []string
	for _, s := range t {
		switch v := s.(type) {
		case hcl.TraverseRoot:
			out = append(out, v.Name)
		case hcl.TraverseAttr:
			out = append(out, v.Name)
		case hcl.TraverseIndex:
			// module.c[0].out: the key of a call instance stands between
			// the call and its output; keep walking past it.
			if len(out) == 2 && out[0] == "module" {
				continue
			}
			return out
		default:
			return out
		}
	}
	return out
}

// resolve returns the nodes a reference in module m depends on: the
// resource, data source, variable, local, provider or module call it names;
// for module.C.OUT the call and the child's output OUT; for a bare
// module.C the call and every output of the child; in depends_on, a bare
// module.C is every block of the child tree. A name that declares nothing
// (a dynamic iterator of an enclosing scope, `count`, `each`, `self`,
// `path`, an attribute of ignore_changes) resolves to nothing.
func (c *Config) resolve(m *Module, r ref) []node {
	n := names(r.t)
	if len(n) == 0 {
		return nil
	}
	has := func(k string) []node {
		if _, ok := m.blocks[k]; ok {
			return []node{{m.Path, k}}
		}
		return nil
	}
	if r.arg == "provider" {
		return has("provider." + strings.Join(n, "."))
	}
	if len(n) < 2 {
		return nil
	}
	switch n[0] {
	case "count", "each", "path", "terraform", "self":
		return nil
	case "var":
		return has("var." + n[1])
	case "local":
		return has("local." + n[1])
	case "module":
		call := has("module." + n[1])
		if call == nil {
			return nil
		}
		cl := m.calls[n[1]]
		if cl.Child == nil {
			return call
		}
		child := cl.Child
		switch {
		case r.arg == "depends_on":
			return append(call, c.everything(child)...)
		case len(n) >= 3:
			if _, ok := child.blocks["output."+n[2]]; ok {
				return append(call, node{child.Path, "output." + n[2]})
			}
			return call
		default:
			for _, k := range child.keys {
				if strings.HasPrefix(k, "output.") {
					call = append(call, node{child.Path, k})
				}
			}
			return call
		}
	case "data", "ephemeral":
		if len(n) < 3 {
			return nil
		}
		return has(n[0] + "." + n[1] + "." + n[2])
	}
	return has(n[0] + "." + n[1])
}

// everything is every resource, data source and output of a module tree.
func (c *Config) everything(m *Module) []node {
	var out []node
	for _, k := range m.keys {
		switch m.blocks[k].Kind {
		case "resource", "data", "output", "module":
			out = append(out, node{m.Path, k})
		}
	}
	for _, cl := range m.calls {
		if cl.Child != nil {
			out = append(out, c.everything(cl.Child)...)
		}
	}
	return out
}

// providerOf returns the provider blocks a resource block of m may use: the
// one its `provider` argument names or, without it, the default
// configuration of the local name its type begins with (Terraform's rule:
// `aws_instance` → `aws`); in a child module without such a block, the
// configuration its call passes (`providers`) and the parent's own, up to
// the root. A provider without a block has the empty implied configuration
// and needs nothing.
func (c *Config) providerOf(m *Module, b *Block) []node {
	if b.body == nil {
		return nil
	}
	local := strings.SplitN(strings.TrimPrefix(strings.TrimPrefix(b.Key, "data."), "ephemeral."), "_", 2)[0]
	if a, ok := b.body.Attributes["provider"]; ok {
		if t, diags := hcl.AbsTraversalForExpr(a.Expr); !diags.HasErrors() {
			local = strings.Join(names(t), ".")
		}
	}
	var out []node
	for cur := m; cur != nil; cur = cur.parent {
		if _, ok := cur.blocks["provider."+local]; ok {
			return append(out, node{cur.Path, "provider." + local})
		}
		if cur.call == nil {
			break
		}
		// What the call passes under this name (the call's own refs read
		// it); a default configuration is also inherited from the parent.
		if pb := cur.parent.blocks["module."+cur.call.Name]; pb != nil && pb.body != nil {
			if a, ok := pb.body.Attributes["providers"]; ok {
				if oc, ok := a.Expr.(*hclsyntax.ObjectConsExpr); ok {
					for _, it := range oc.Items {
						kt, kd := hcl.AbsTraversalForExpr(it.KeyExpr)
						vt, vd := hcl.AbsTraversalForExpr(it.ValueExpr)
						if kd.HasErrors() || vd.HasErrors() || strings.Join(names(kt), ".") != local {
							continue
						}
						if _, ok := cur.parent.blocks["provider."+strings.Join(names(vt), ".")]; ok {
							return append(out, node{cur.parent.Path, "provider." + strings.Join(names(vt), ".")})
						}
					}
				}
			}
		}
	}
	return out
}

// deps returns the nodes one node needs in the slice.
func (c *Config) deps(nd node) []node {
	m := c.modules[nd.path]
	b := m.blocks[nd.key]
	var out []node
	for _, r := range blockRefs(b) {
		out = append(out, c.resolve(m, r)...)
	}
	switch b.Kind {
	case "resource", "data", "ephemeral":
		out = append(out, c.providerOf(m, b)...)
	case "variable":
		// A child's variable is set by its call: the call's arguments.
		if m.call != nil {
			out = append(out, node{m.parent.Path, "module." + m.call.Name})
		}
	case "module":
		// The call is written whole: each argument needs its variable.
		if cl := m.calls[strings.TrimPrefix(b.Key, "module.")]; cl != nil && cl.Child != nil {
			for n := range b.body.Attributes {
				if _, ok := cl.Child.blocks["var."+n]; ok {
					out = append(out, node{cl.Child.Path, "var." + n})
				}
			}
		}
	}
	// Every module on the way to the node is called.
	for cur := m; cur.call != nil; cur = cur.parent {
		out = append(out, node{cur.parent.Path, "module." + cur.call.Name})
	}
	return out
}
