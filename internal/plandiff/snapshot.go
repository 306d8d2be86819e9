package plandiff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// Snapshot is a Terraform state v4 document read for comparing two
// versions of a state (ADR 0046): the attributes and sensitive_attributes
// of the instances of the resources asked for, and the values that are
// sensitive anywhere in it. It holds secrets: it is kept in memory only,
// and only what Compare makes of it (masked) leaves the package.
type Snapshot struct {
	// insts are the instances read, by instance address; current objects
	// only (a deposed object is no version's value of an address).
	insts map[string]instance
	// byResource lists the instance addresses of each resource address read.
	byResource map[string][]string
	// outputs are the root outputs, by name.
	outputs map[string]stateOutput
	// sec are the leaves marked sensitive anywhere in the document (of
	// every instance, read or not, and of sensitive outputs).
	sec *secrets
}

type instance struct {
	resource, mode, typ, name string
	attrs                     any // decoded attributes, numbers as json.Number; dynamic ones unwrapped
	marks                     *mark
	// dynamic are the top-level attributes unwrapped from the state's
	// encoding of a dynamically typed value (unwrapDynamic).
	dynamic map[string]bool
}

type stateOutput struct {
	value     any
	sensitive bool
}

// ReadSnapshot reads raw (a state v4 document, as a version's snapshot is
// stored) for Compare and Planned.Undo: the attributes of every current
// instance of resources (resource-level addresses as
// tfstate.ResourceAddress spells them, "data." for data sources; nil
// reads none), the root outputs, and the values marked sensitive by any
// instance's sensitive_attributes or by a sensitive output. An empty raw
// is a state without resources.
//
// Errors: a document tfstate.Parse refuses, or an instance whose JSON it
// cannot read, naming the resource.
func ReadSnapshot(raw []byte, resources []string) (*Snapshot, error) {
	s := &Snapshot{insts: map[string]instance{}, byResource: map[string][]string{}, outputs: map[string]stateOutput{},
		sec: &secrets{min: minContained}}
	if len(bytes.TrimSpace(raw)) == 0 {
		return s, nil
	}
	st, err := tfstate.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("reading snapshot: %w", err)
	}
	want := map[string]bool{}
	for _, r := range resources {
		want[r] = true
	}
	for name, o := range st.Outputs {
		v := decode(o.Value)
		s.outputs[name] = stateOutput{value: v, sensitive: o.Sensitive}
		if o.Sensitive {
			s.sec.add(v)
		}
	}
	for i := range st.Resources {
		if err := s.readResource(&st.Resources[i], want); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Snapshot) readResource(r *tfstate.Resource, want map[string]bool) error {
	addr := r.Address()
	if !want[addr] && !mayMark(r.Raw) {
		return nil // no sensitive_attributes path in it, and not asked for
	}
	insts, err := r.Instances()
	if err != nil {
		return fmt.Errorf("reading snapshot: %w", err)
	}
	for _, raw := range insts {
		var inst stateInstance
		if err := json.Unmarshal(raw, &inst); err != nil {
			return fmt.Errorf("reading snapshot: an instance of %s: %w", addr, err)
		}
		m := markOfPaths(inst.SensitiveAttributes)
		read := want[addr] && inst.Deposed == ""
		if m == nil && !read {
			continue // no secret, and not asked for: not decoded
		}
		attrs := decode(inst.Attributes)
		dyn := unwrapDynamic(attrs)
		s.sec.addMarked(attrs, m)
		if !read {
			continue
		}
		ia := instanceAddress(r, inst.IndexKey)
		s.insts[ia] = instance{resource: addr, mode: r.Mode, typ: r.Type, name: r.Name, attrs: attrs, marks: m, dynamic: dyn}
		s.byResource[addr] = append(s.byResource[addr], ia)
	}
	return nil
}

// Compare diffs the resource instances of resources (resource-level
// addresses; "output.NAME" for a root output) from snapshot a to snapshot
// b — both read with those resources — as Build diffs a plan: per
// instance that differs its action (Create: only b has it; Delete: only a
// has it; Update), the changed attributes old → new, unchanged ones
// hidden and counted; root outputs as Nodes keyed by name. It answers
// "what changed in what this plan reads between its source version and a
// later one" (issue 12 §4, ADR 0046).
//
// Masked as Build masks (ADR 0044 decision 2): a value either
// snapshot's sensitive_attributes mark (both sides of the leaf then), a
// leaf equal to a value marked anywhere in either snapshot (8 bytes or
// more) or in the instance itself (any length: terraform_data copies its
// sensitive input into output unmarked), and a sensitive output whole.
// Resources are sorted by address, instances within them too.
func Compare(a, b *Snapshot, resources []string) ([]Resource, []Node) {
	bl := &builder{sec: &secrets{min: minContained}}
	for _, s := range []*Snapshot{a, b} {
		for v := range s.sec.exact {
			bl.sec.addLeaf(v)
		}
	}
	var rs []Resource
	var outs []Node
	for _, addr := range resources {
		if name, ok := cutOutput(addr); ok {
			outs = append(outs, bl.snapshotOutput(name, a, b)...)
			continue
		}
		for _, ia := range instancesOf(addr, a, b) {
			if r, ok := bl.snapshotInstance(ia, a.insts[ia], b.insts[ia]); ok {
				rs = append(rs, r)
			}
		}
	}
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].Address < rs[j].Address })
	return rs, outs
}

func cutOutput(addr string) (string, bool) {
	if len(addr) > len(tfstate.OutputPrefix) && addr[:len(tfstate.OutputPrefix)] == tfstate.OutputPrefix {
		return addr[len(tfstate.OutputPrefix):], true
	}
	return "", false
}

// instancesOf are the instance addresses of resource addr in a or b,
// sorted.
func instancesOf(addr string, a, b *Snapshot) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range []*Snapshot{a, b} {
		for _, ia := range s.byResource[addr] {
			if !seen[ia] {
				seen[ia] = true
				out = append(out, ia)
			}
		}
	}
	sort.Strings(out)
	return out
}

// snapshotInstance diffs one instance between two snapshots; false when
// it is in neither or did not change.
func (b *builder) snapshotInstance(addr string, x, y instance) (Resource, bool) {
	inX, inY := x.resource != "", y.resource != ""
	meta := x
	if !inX {
		meta = y
	}
	r := Resource{Address: addr, Mode: meta.mode, Type: meta.typ, Name: meta.name}
	switch {
	case !inX && !inY:
		return Resource{}, false
	case !inX:
		r.Action = Create
	case !inY:
		r.Action = Delete
	default:
		r.Action = Update
	}
	bs := side{v: objectOr(x.attrs), present: inX, sens: x.marks}
	as := side{v: objectOr(y.attrs), present: inY, sens: y.marks}
	b.local = &secrets{min: 1}
	b.local.addMarked(x.attrs, x.marks)
	b.local.addMarked(y.attrs, y.marks)
	r.Changes, r.Unchanged = b.attributes(r.Action, bs, as)
	if r.Action == Update && !anyChanged(r.Changes) {
		return Resource{}, false
	}
	return r, true
}

// anyChanged reports whether ns holds more than context lines.
func anyChanged(ns []Node) bool {
	for _, n := range ns {
		if n.Action != NoOp {
			return true
		}
	}
	return false
}

func objectOr(v any) any {
	if m, ok := v.(map[string]any); ok {
		return m
	}
	return map[string]any{}
}

// snapshotOutput diffs root output name between two snapshots (none when
// equal); a sensitive one is masked whole.
func (b *builder) snapshotOutput(name string, x, y *Snapshot) []Node {
	ox, inX := x.outputs[name]
	oy, inY := y.outputs[name]
	bs := side{v: ox.value, present: inX}
	as := side{v: oy.value, present: inY}
	if ox.sensitive || oy.sensitive {
		bs.sens, as.sens = &mark{all: true}, &mark{all: true}
	}
	b.local = &secrets{min: 1}
	b.local.addMarked(bs.v, bs.sens)
	b.local.addMarked(as.v, as.sens)
	ns, st := b.node(keyStep(name), bs, as)
	if st != changed {
		return nil
	}
	return ns
}

// mayMark reports whether a state entry's JSON may hold a
// sensitive_attributes path: every step of one is {"type":"get_attr",…}
// or {"type":"index",…}, so an entry with neither word (and no \u escape
// that could spell one) holds none.
func mayMark(raw []byte) bool {
	return bytes.Contains(raw, []byte(`"get_attr"`)) || bytes.Contains(raw, []byte(`"index"`)) || bytes.Contains(raw, []byte(`\u`))
}

// unwrapDynamic replaces, in a state instance's attributes, each top-level
// attribute that holds a dynamically typed value as Terraform's state
// encodes it — {"value": V, "type": T}, T a type expression: "string",
// ["list","string"], ["object",{…}] — with V, which is how the plan JSON
// and Terraform's renderer give it (terraform_data's input, output and
// triggers_replace are such attributes). Without the providers' schemas an
// object attribute of exactly those two keys whose "type" is a type
// expression is taken for one too; the attributes unwrapped are returned.
func unwrapDynamic(attrs any) map[string]bool {
	m, ok := attrs.(map[string]any)
	if !ok {
		return nil
	}
	var out map[string]bool
	for k, v := range m {
		if inner, ok := dynamicValue(v); ok {
			m[k] = inner
			if out == nil {
				out = map[string]bool{}
			}
			out[k] = true
		}
	}
	return out
}

// dynamicValue is V of {"value": V, "type": T} with T a type expression.
func dynamicValue(v any) (any, bool) {
	o, ok := v.(map[string]any)
	if !ok || len(o) != 2 {
		return nil, false
	}
	inner, hasValue := o["value"]
	t, hasType := o["type"]
	if !hasValue || !hasType || !typeExpr(t) {
		return nil, false
	}
	return inner, true
}

// typeExpr reports whether t is a cty type in JSON: a primitive's name,
// or ["list"|"set"|"map", T], ["tuple", [T…]], ["object", {K: T}] (with
// an optional third element of optional attributes).
func typeExpr(t any) bool {
	switch x := t.(type) {
	case string:
		return x == "string" || x == "number" || x == "bool" || x == "dynamic"
	case []any:
		if len(x) < 2 || len(x) > 3 {
			return false
		}
		kind, _ := x[0].(string)
		switch kind {
		case "list", "set", "map":
			return len(x) == 2 && typeExpr(x[1])
		case "tuple":
			elems, ok := x[1].([]any)
			if !ok || len(x) != 2 {
				return false
			}
			for _, e := range elems {
				if !typeExpr(e) {
					return false
				}
			}
			return true
		case "object":
			attrs, ok := x[1].(map[string]any)
			if !ok {
				return false
			}
			for _, e := range attrs {
				if !typeExpr(e) {
					return false
				}
			}
			return true
		}
	}
	return false
}
