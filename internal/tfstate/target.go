package tfstate

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// Target is an address as `terraform state rm` and `terraform state mv`
// take it, instance keys included: a module instance
// (`module.app`, `module.app["eu"].module.db[0]`), a resource
// (`module.app[0].terraform_data.web`, `data.terraform_remote_state.net`)
// or one resource instance (`terraform_data.web[2]`, `aws_instance.x["a"]`).
// It is parsed as Terraform parses it, as an HCL traversal
// (hclsyntax.ParseTraversalAbs, as Terraform's addrs package does), so
// string keys take HCL's escapes.
type Target struct {
	// Module is the module instance path, outermost first; empty for the
	// root module.
	Module []ModuleStep
	// Resource is the resource or resource instance; nil when the target
	// is the module instance itself.
	Resource *ResourceStep
}

// ModuleStep is one module call of a module instance path and its
// instance key (nil: the call has no count or for_each).
type ModuleStep struct {
	Name string
	Key  *Key
}

// ResourceStep is the resource part of a Target: mode (ModeManaged or
// ModeData), type, name and instance key (nil: every instance of the
// resource, or the instance of a resource without count or for_each —
// which one depends on the operation: Remove, Move).
type ResourceStep struct {
	Mode, Type, Name string
	Key              *Key
}

// Key is an instance key: a count index (Int) or a for_each key (Str, when
// IsStr), as a state instance's "index_key" holds it (a JSON number or
// string).
type Key struct {
	Int   int64
	Str   string
	IsStr bool
}

// ParseTarget parses a Terraform address (Target). Errors quote the input
// and say what is wrong: not an address at all (HCL's diagnostic), a
// "module" without a name, a key that is neither a whole number ≥ 0 nor a
// string, or something after the resource.
func ParseTarget(s string) (Target, error) {
	if strings.TrimSpace(s) == "" {
		return Target{}, errors.New("parsing address: empty address")
	}
	trav, diags := hclsyntax.ParseTraversalAbs([]byte(s), "", hcl.InitialPos)
	if diags.HasErrors() {
		return Target{}, fmt.Errorf("parsing address %q: %s", s, diagText(diags))
	}
	steps, err := traversalSteps(trav)
	if err != nil {
		return Target{}, fmt.Errorf("parsing address %q: %w", s, err)
	}
	var t Target
	i := 0
	for i < len(steps) && steps[i].name == "module" && steps[i].key == nil {
		if i+1 >= len(steps) || steps[i+1].key != nil {
			return Target{}, fmt.Errorf("parsing address %q: \"module\" must be followed by a module name", s)
		}
		m := ModuleStep{Name: steps[i+1].name}
		i += 2
		if i < len(steps) && steps[i].key != nil {
			m.Key = steps[i].key
			i++
		}
		t.Module = append(t.Module, m)
	}
	rest := steps[i:]
	if len(rest) == 0 {
		return t, nil
	}
	r := ResourceStep{Mode: ModeManaged}
	if rest[0].name == "data" && rest[0].key == nil {
		r.Mode = ModeData
		rest = rest[1:]
	}
	if len(rest) < 2 || rest[0].key != nil || rest[1].key != nil {
		return Target{}, fmt.Errorf("parsing address %q: want [module.NAME[KEY].]…[data.]TYPE.NAME[KEY], or a module address", s)
	}
	r.Type, r.Name = rest[0].name, rest[1].name
	rest = rest[2:]
	if len(rest) > 0 && rest[0].key != nil {
		r.Key = rest[0].key
		rest = rest[1:]
	}
	if len(rest) > 0 {
		return Target{}, fmt.Errorf("parsing address %q: unexpected %s after the resource", s, rest[0])
	}
	t.Resource = &r
	return t, nil
}

// diagText is the summary and detail of HCL's first error, on one line.
func diagText(diags hcl.Diagnostics) string {
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			if d.Detail != "" {
				return d.Summary + ": " + d.Detail
			}
			return d.Summary
		}
	}
	return diags.Error()
}

// traversalStep is a name (root or attribute) or an instance key.
type traversalStep struct {
	name string
	key  *Key
}

func (s traversalStep) String() string {
	if s.key != nil {
		return s.key.String()
	}
	return strconv.Quote(s.name)
}

func traversalSteps(t hcl.Traversal) ([]traversalStep, error) {
	out := make([]traversalStep, 0, len(t))
	for _, tr := range t {
		switch v := tr.(type) {
		case hcl.TraverseRoot:
			out = append(out, traversalStep{name: v.Name})
		case hcl.TraverseAttr:
			out = append(out, traversalStep{name: v.Name})
		case hcl.TraverseIndex:
			k, err := keyOf(v.Key)
			if err != nil {
				return nil, err
			}
			out = append(out, traversalStep{key: k})
		default:
			return nil, fmt.Errorf("unsupported step %T", tr)
		}
	}
	return out, nil
}

// keyOf is the instance key of an index value: a whole number from 0 (a
// count index) or a string (a for_each key), as Terraform's addrs accept.
func keyOf(v cty.Value) (*Key, error) {
	if v.IsNull() || !v.IsKnown() {
		return nil, errors.New("an instance key must be a number or a string")
	}
	switch v.Type() {
	case cty.String:
		return &Key{Str: v.AsString(), IsStr: true}, nil
	case cty.Number:
		n, acc := v.AsBigFloat().Int64()
		if acc != big.Exact || n < 0 {
			return nil, fmt.Errorf("instance key %s: a count index is a whole number from 0", v.AsBigFloat().Text('g', -1))
		}
		return &Key{Int: n}, nil
	}
	return nil, fmt.Errorf("an instance key must be a number or a string, not %s", v.Type().FriendlyName())
}

// String renders the key as Terraform does: "[2]", `["eu"]` (HCL's
// quoting, as Terraform's addrs.StringKey).
func (k Key) String() string {
	if !k.IsStr {
		return "[" + strconv.FormatInt(k.Int, 10) + "]"
	}
	return "[" + string(hclwrite.TokensForValue(cty.StringVal(k.Str)).Bytes()) + "]"
}

// keyEqual reports whether two optional keys are the same (nil only
// equals nil).
func keyEqual(a, b *Key) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// keySuffix is "" for no key, else Key.String.
func keySuffix(k *Key) string {
	if k == nil {
		return ""
	}
	return k.String()
}

// ModulePath renders a module instance path as Terraform writes it in a
// state entry's "module" field ("" for the root module).
func ModulePath(steps []ModuleStep) string {
	var b strings.Builder
	for i, m := range steps {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString("module.")
		b.WriteString(m.Name)
		b.WriteString(keySuffix(m.Key))
	}
	return b.String()
}

// String renders the target as Terraform does (`module.app[0].x.y["k"]`).
func (t Target) String() string {
	mod := ModulePath(t.Module)
	if t.Resource == nil {
		return mod
	}
	return instanceAddress(mod, t.Resource.Mode, t.Resource.Type, t.Resource.Name, t.Resource.Key)
}

// instanceAddress is the address of one resource instance (key nil: a
// resource without count or for_each) in the module instance path mod.
func instanceAddress(mod, mode, typ, name string, key *Key) string {
	var b strings.Builder
	if mod != "" {
		b.WriteString(mod)
		b.WriteByte('.')
	}
	if mode == ModeData {
		b.WriteString("data.")
	}
	b.WriteString(typ)
	b.WriteByte('.')
	b.WriteString(name)
	b.WriteString(keySuffix(key))
	return b.String()
}

// parseModulePath reads a state entry's "module" field ("" for the root).
func parseModulePath(s string) ([]ModuleStep, error) {
	if s == "" {
		return nil, nil
	}
	t, err := ParseTarget(s)
	if err != nil {
		return nil, err
	}
	if t.Resource != nil {
		return nil, fmt.Errorf("module path %q names a resource", s)
	}
	return t.Module, nil
}
