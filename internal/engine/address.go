package engine

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Address names what a reservation, a write set or a read set covers, at
// resource level (docs/design.md "address"):
//
//   - a resource: module path + mode + type + name, instance keys dropped —
//     "terraform_data.web", "module.app.module.db.terraform_data.main",
//     "data.terraform_remote_state.net";
//   - a root output: "output.NAME" (a changed output is written state,
//     docs/terraform.md "Plan JSON");
//   - a module prefix "module.app.*", covering every resource below that
//     module call (a widened scope);
//   - the whole state "*".
//
// Instances ([0], ["a"]) belong to their resource, and module instances
// (module.app["x"]) to their module call, so two runs touching different
// instances of one resource conflict: Terraform writes a resource's
// instances as one state entry.
type Address string

// AllAddresses is the whole-state address "*": it overlaps everything.
const AllAddresses Address = "*"

// IsPrefix reports whether a is a widened form ("module.x.*" or "*").
func (a Address) IsPrefix() bool { return a == AllAddresses || strings.HasSuffix(string(a), ".*") }

// IsOutput reports whether a names a root output ("output.NAME").
func (a Address) IsOutput() bool { return strings.HasPrefix(string(a), "output.") }

// Module returns the module path of a resource address ("" for the root
// module and for outputs); for a prefix it returns the prefix's module path.
func (a Address) Module() string {
	s := string(a)
	if a == AllAddresses || a.IsOutput() {
		return ""
	}
	if a.IsPrefix() {
		return strings.TrimSuffix(s, ".*")
	}
	// Module path = all leading "module.NAME" pairs.
	parts := strings.Split(s, ".")
	end := 0
	for end+1 < len(parts) && parts[end] == "module" {
		end += 2
	}
	return strings.Join(parts[:end], ".")
}

// Overlaps reports whether a and b cover at least one common address:
// equal addresses, a prefix and anything below it, or "*" and anything.
func (a Address) Overlaps(b Address) bool {
	if a == b || a == AllAddresses || b == AllAddresses {
		return true
	}
	ap, bp := a.IsPrefix(), b.IsPrefix()
	switch {
	case ap && bp:
		pa, pb := strings.TrimSuffix(string(a), "*"), strings.TrimSuffix(string(b), "*")
		return strings.HasPrefix(pa, pb) || strings.HasPrefix(pb, pa)
	case ap:
		return !b.IsOutput() && strings.HasPrefix(string(b), strings.TrimSuffix(string(a), "*"))
	case bp:
		return !a.IsOutput() && strings.HasPrefix(string(a), strings.TrimSuffix(string(b), "*"))
	}
	return false
}

// Covers reports whether a covers all of b: equal addresses, "*" and
// anything, or a prefix and anything below it (a resource, or a longer
// prefix). A reservation on a covers one on b.
func (a Address) Covers(b Address) bool {
	switch {
	case a == b || a == AllAddresses:
		return true
	case !a.IsPrefix() || b == AllAddresses || b.IsOutput():
		return false
	}
	return strings.HasPrefix(strings.TrimSuffix(string(b), "*"), strings.TrimSuffix(string(a), "*"))
}

// ModulePrefix returns the widened address covering every resource of the
// module path mod ("" → "*", the whole state).
func ModulePrefix(mod string) Address {
	if mod == "" {
		return AllAddresses
	}
	return Address(mod + ".*")
}

// ParseAddress parses a Terraform address as it appears in plan JSON, state
// files and on the command line — instance keys allowed
// (`module.app["eu"].terraform_data.web[0]`) — and returns its resource-level
// Address. It also accepts "output.NAME", the prefix form "module.x.*" and
// "*". Anything else (a bare module call, an attribute reference, trailing
// junk) is an error that quotes the input.
func ParseAddress(s string) (Address, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("parsing address: empty address")
	}
	if s == "*" {
		return AllAddresses, nil
	}
	prefix := false
	body := s
	if strings.HasSuffix(s, ".*") {
		prefix = true
		body = strings.TrimSuffix(s, ".*")
	}
	trav, diags := hclsyntax.ParseTraversalAbs([]byte(body), "", hcl.InitialPos)
	if diags.HasErrors() {
		return "", fmt.Errorf("parsing address %q: %s", s, diags.Error())
	}
	steps, err := traversalNames(trav)
	if err != nil {
		return "", fmt.Errorf("parsing address %q: %w", s, err)
	}
	var out []string
	i := 0
	for i < len(steps) && steps[i].name == "module" {
		if i+1 >= len(steps) || steps[i+1].index {
			return "", fmt.Errorf("parsing address %q: \"module\" must be followed by a module name", s)
		}
		out = append(out, "module", steps[i+1].name)
		i += 2
		if i < len(steps) && steps[i].index {
			i++ // module instance key: belongs to the module call
		}
	}
	if prefix {
		if i != len(steps) || len(out) == 0 {
			return "", fmt.Errorf("parsing address %q: a prefix must be a module path followed by \".*\"", s)
		}
		return Address(strings.Join(out, ".") + ".*"), nil
	}
	rest := steps[i:]
	if len(rest) > 0 && rest[0].name == "output" && len(out) == 0 {
		if len(rest) != 2 || rest[1].index {
			return "", fmt.Errorf("parsing address %q: an output address is \"output.NAME\"", s)
		}
		return Address("output." + rest[1].name), nil
	}
	if len(rest) > 0 && rest[0].name == "output" {
		return "", fmt.Errorf("parsing address %q: only root outputs are addresses (\"output.NAME\")", s)
	}
	if len(rest) > 0 && rest[0].name == "data" {
		out = append(out, "data")
		rest = rest[1:]
	}
	if len(rest) < 2 || rest[0].index || rest[1].index {
		return "", fmt.Errorf("parsing address %q: want [module.NAME.]...[data.]TYPE.NAME[KEY]", s)
	}
	out = append(out, rest[0].name, rest[1].name)
	rest = rest[2:]
	if len(rest) > 0 && rest[0].index {
		rest = rest[1:]
	}
	if len(rest) > 0 {
		return "", fmt.Errorf("parsing address %q: unexpected %q after the resource name", s, rest[0].name)
	}
	return Address(strings.Join(out, ".")), nil
}

// MustParseAddress is ParseAddress for constants in tests and examples; it
// panics on a malformed address.
func MustParseAddress(s string) Address {
	a, err := ParseAddress(s)
	if err != nil {
		panic(err)
	}
	return a
}

type step struct {
	name  string
	index bool
}

func traversalNames(t hcl.Traversal) ([]step, error) {
	var out []step
	for _, tr := range t {
		switch v := tr.(type) {
		case hcl.TraverseRoot:
			out = append(out, step{name: v.Name})
		case hcl.TraverseAttr:
			out = append(out, step{name: v.Name})
		case hcl.TraverseIndex:
			out = append(out, step{index: true})
		default:
			return nil, fmt.Errorf("unsupported traversal step %T", tr)
		}
	}
	return out, nil
}

// AddressSet is a sorted, de-duplicated list of addresses. The zero value is
// empty and ready to use.
type AddressSet []Address

// NewAddressSet returns the sorted, de-duplicated set of addrs.
func NewAddressSet(addrs ...Address) AddressSet {
	m := make(map[Address]struct{}, len(addrs))
	for _, a := range addrs {
		m[a] = struct{}{}
	}
	out := make(AddressSet, 0, len(m))
	for a := range m {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Contains reports whether s holds exactly a (no prefix matching).
func (s AddressSet) Contains(a Address) bool {
	i := sort.Search(len(s), func(i int) bool { return s[i] >= a })
	return i < len(s) && s[i] == a
}

// Union returns s ∪ t.
func (s AddressSet) Union(t AddressSet) AddressSet {
	return NewAddressSet(append(append([]Address{}, s...), t...)...)
}

// Minus returns the addresses of s not literally in t.
func (s AddressSet) Minus(t AddressSet) AddressSet {
	var out AddressSet
	for _, a := range s {
		if !t.Contains(a) {
			out = append(out, a)
		}
	}
	return out
}

// Overlapping returns the addresses of s that overlap any address of t
// (prefixes included): the intersection as an operator reads it.
func (s AddressSet) Overlapping(t AddressSet) AddressSet {
	var out AddressSet
	for _, a := range s {
		for _, b := range t {
			if a.Overlaps(b) {
				out = append(out, a)
				break
			}
		}
	}
	return out
}

// Strings returns the addresses as plain strings.
func (s AddressSet) Strings() []string {
	out := make([]string, len(s))
	for i, a := range s {
		out[i] = string(a)
	}
	return out
}
