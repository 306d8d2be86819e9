package engine

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// Address names what a reservation, a write set or a read set covers
// (docs/design.md "address"; ADR 0065):
//
//   - a resource: module path + mode + type + name, instance keys dropped —
//     "terraform_data.web", "module.app.module.db.terraform_data.main",
//     "data.terraform_remote_state.net": every instance of the resource;
//   - a resource instance, or a resource in one module instance, keys as
//     Terraform writes them — `terraform_data.web["a"]`, "terraform_data.web[3]",
//     `module.app["eu"].terraform_data.main`: what a plan writes
//     (ParseInstanceAddress; a resource without count or for_each in a
//     module without them is its own only instance, and its address has no
//     key);
//   - a root output: "output.NAME" (a changed output is written state,
//     docs/terraform.md "Plan JSON");
//   - a module prefix "module.app.*", covering every resource below that
//     module call, in every instance of it (a widened scope);
//   - the whole state "*".
//
// Overlap (Overlaps) is decided on the keyless form (Resource) and the keys:
// two instances of one resource are disjoint unless equal, and a resource
// overlaps each of its instances — so a write set stored before ADR 0065,
// at resource level, still overlaps every instance.
type Address string

// AllAddresses is the whole-state address "*": it overlaps everything.
const AllAddresses Address = "*"

// IsPrefix reports whether a is a widened form ("module.x.*" or "*").
func (a Address) IsPrefix() bool { return a == AllAddresses || strings.HasSuffix(string(a), ".*") }

// IsOutput reports whether a names a root output ("output.NAME").
func (a Address) IsOutput() bool { return strings.HasPrefix(string(a), "output.") }

// Module returns the module path of a resource or instance address, without
// instance keys ("" for the root module and for outputs); for a prefix it
// returns the prefix's module path.
func (a Address) Module() string {
	if a == AllAddresses || a.IsOutput() {
		return ""
	}
	if a.IsPrefix() {
		return strings.TrimSuffix(string(a), ".*")
	}
	// Module path = all leading "module.NAME" pairs.
	parts := strings.Split(string(a.Resource()), ".")
	end := 0
	for end+1 < len(parts) && parts[end] == "module" {
		end += 2
	}
	return strings.Join(parts[:end], ".")
}

// IsInstance reports whether a carries an instance key, on the resource or
// on a module call (`x.y["k"]`, `module.m[0].x.y`).
func (a Address) IsInstance() bool {
	return !a.IsOutput() && !a.IsPrefix() && strings.IndexByte(string(a), '[') >= 0
}

// Resource returns the resource-level form of a: its instance keys dropped
// (`module.m["k"].x.y[0]` → "module.m.x.y"); any other address unchanged.
func (a Address) Resource() Address {
	if !a.IsInstance() {
		return a
	}
	segs, ok := segments(string(a))
	if !ok {
		return a
	}
	return Address(keyless(segs))
}

// segment is one dot-separated step of an address in canonical form: a name
// and the instance key written after it, brackets included ("" for none).
type segment struct{ name, key string }

// segments splits a canonical resource or instance address into its steps;
// ok is false for a string that is not one (an unterminated key).
func segments(s string) ([]segment, bool) {
	var out []segment
	for i := 0; i <= len(s); {
		j := i
		for j < len(s) && s[j] != '.' && s[j] != '[' {
			j++
		}
		seg := segment{name: s[i:j]}
		if j < len(s) && s[j] == '[' {
			n := keyEnd(s[j:])
			if n < 0 {
				return nil, false
			}
			seg.key = s[j : j+n]
			j += n
		}
		out = append(out, seg)
		if j >= len(s) {
			break
		}
		if s[j] != '.' {
			return nil, false
		}
		i = j + 1
	}
	return out, true
}

// keyEnd is the length of the key at the start of s ("[3]", `["a.b"]`, with
// backslash escapes), or -1 when it does not end.
func keyEnd(s string) int {
	if len(s) > 1 && s[1] == '"' {
		for i := 2; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case '"':
				if i+1 < len(s) && s[i+1] == ']' {
					return i + 2
				}
				return -1
			}
		}
		return -1
	}
	if i := strings.IndexByte(s, ']'); i > 1 {
		return i + 1
	}
	return -1
}

func keyless(segs []segment) string {
	var b strings.Builder
	for i, g := range segs {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(g.name)
	}
	return b.String()
}

// instancesMeet decides overlap (meet) or cover between two resource or
// instance addresses, neither a prefix nor an output: the same resource,
// and at every step the keys agree — equal, or the first has none (cover),
// or either has none (meet).
func instancesMeet(a, b Address, cover bool) bool {
	if a == b {
		return true
	}
	if !a.IsInstance() && !b.IsInstance() {
		return false
	}
	sa, okA := segments(string(a))
	sb, okB := segments(string(b))
	if !okA || !okB || len(sa) != len(sb) {
		return false
	}
	for i := range sa {
		ka, kb := sa[i].key, sb[i].key
		switch {
		case sa[i].name != sb[i].name:
			return false
		case ka == kb || ka == "":
		case kb == "" && !cover:
		default:
			return false
		}
	}
	return true
}

// Overlaps reports whether a and b cover at least one common resource
// instance or output (ADR 0065): equal addresses; a resource and any of its
// instances (`x.y` and `x.y["k"]`, `module.m.x.y` and `module.m["k"].x.y[0]`);
// two instances of one resource only when their keys agree at every step
// (`x.y["a"]` and `x.y["b"]` are disjoint; `module.m["k"].x.y` and
// `module.m["k"].x.y["a"]` overlap); a prefix and anything below it, in any
// module instance; "*" and anything. Outputs overlap only themselves, "*"
// and nothing else.
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
		return !b.IsOutput() && strings.HasPrefix(string(b.Resource()), strings.TrimSuffix(string(a), "*"))
	case bp:
		return !a.IsOutput() && strings.HasPrefix(string(a.Resource()), strings.TrimSuffix(string(b), "*"))
	case a.IsOutput() || b.IsOutput():
		return false
	}
	return instancesMeet(a, b, false)
}

// Covers reports whether a covers all of b: equal addresses, "*" and
// anything, a prefix and anything below it (a resource, an instance, or a
// longer prefix), a resource and its instances, an instance with fewer keys
// and one that agrees with it on them (`module.m["k"].x.y` covers
// `module.m["k"].x.y["a"]`). An instance covers no other instance, nor its
// resource. A reservation on a covers one on b.
func (a Address) Covers(b Address) bool {
	switch {
	case a == b || a == AllAddresses:
		return true
	case b == AllAddresses || b.IsOutput() || a.IsOutput():
		return false
	case a.IsPrefix():
		return strings.HasPrefix(strings.TrimSuffix(string(b.Resource()), "*"), strings.TrimSuffix(string(a), "*"))
	case b.IsPrefix():
		return false
	}
	return instancesMeet(a, b, true)
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

// ParseInstanceAddress parses an address as ParseAddress does but keeps the
// instance keys of a resource or resource instance, written as Terraform
// writes them (`module.app["eu"].terraform_data.web[0]`; string keys in HCL
// quoting): the form of a write set (ADR 0065). Outputs, prefixes and "*"
// are as ParseAddress returns them; a prefix keeps no keys. Errors are
// ParseAddress's, and a key that is neither a whole number from 0 nor a
// string.
func ParseInstanceAddress(s string) (Address, error) {
	a, err := ParseAddress(s)
	if err != nil || a.IsPrefix() || a.IsOutput() || strings.IndexByte(s, '[') < 0 {
		return a, err
	}
	t, err := tfstate.ParseTarget(strings.TrimSpace(s))
	if err != nil {
		return "", err
	}
	return Address(t.String()), nil
}

// MustParseInstanceAddress is ParseInstanceAddress for constants in tests;
// it panics on a malformed address.
func MustParseInstanceAddress(s string) Address {
	a, err := ParseInstanceAddress(s)
	if err != nil {
		panic(err)
	}
	return a
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
