package plandiff

import (
	"maps"
	"slices"
	"sort"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// Planned is what a plan sets each managed resource instance it writes
// to: Terraform's "after" values with their after_unknown marks, read by
// PlannedOf. It holds secrets — planned values are in clear, sensitive
// ones too — so it lives in memory only: it is never stored, logged or
// printed, and Undo reports attribute names, never values (ADR 0046).
type Planned struct {
	insts map[string]plannedInstance
	addrs []string // instance addresses, sorted
}

type plannedInstance struct {
	resource string
	after    any // decoded "after"; nil when gone
	gone     bool
	unk      *mark
	sens     *mark // after_sensitive
}

// PlannedOf reads the planned values of plan's resource changes that
// create, update, delete or replace a managed resource instance. Left
// out: data sources, reads, no-ops, forgets, deposed objects (no
// version's value of an address) and moved instances (the versions hold
// them at another address). A nil plan plans nothing.
func PlannedOf(plan *tfjson.Plan) *Planned {
	p := &Planned{insts: map[string]plannedInstance{}}
	if plan == nil {
		return p
	}
	for _, rc := range plan.ResourceChanges {
		if rc == nil || rc.Change == nil || rc.Mode != tfjson.ManagedResourceMode || rc.DeposedKey != "" || rc.PreviousAddress != "" {
			continue
		}
		a, _ := action(rc.Change.Actions)
		if a != Create && a != Update && a != Delete && a != Replace {
			continue
		}
		p.insts[rc.Address] = plannedInstance{
			resource: tfstate.ResourceAddress(rc.ModuleAddress, tfstate.ModeManaged, rc.Type, rc.Name),
			after:    rc.Change.After, gone: a == Delete, unk: markOf(rc.Change.AfterUnknown),
			sens: markOf(rc.Change.AfterSensitive),
		}
		p.addrs = append(p.addrs, rc.Address)
	}
	sort.Strings(p.addrs)
	return p
}

// Instances returns the instance addresses p plans, sorted.
func (p *Planned) Instances() []string {
	if p == nil {
		return nil
	}
	return p.addrs
}

// Resource returns the resource-level address of planned instance addr
// (tfstate.ResourceAddress), "" when p does not plan it.
func (p *Planned) Resource(addr string) string {
	if p == nil {
		return ""
	}
	return p.insts[addr].resource
}

// Resources returns the resource-level addresses of the instances p
// plans, sorted, each once.
func (p *Planned) Resources() []string {
	if p == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, a := range p.addrs {
		if r := p.insts[a].resource; !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	sort.Strings(out)
	return out
}

// UndoKind says which change of a version a plan would undo.
type UndoKind string

// Undo kinds.
const (
	// UndoChange: the version changed the instance's attributes; the plan
	// sets those it changes back to their value before the version.
	UndoChange UndoKind = "change"
	// UndoCreation: the version created the instance; the plan destroys it.
	UndoCreation UndoKind = "creation"
	// UndoRemoval: the version removed the instance; the plan creates it
	// again, with the values it had before.
	UndoRemoval UndoKind = "removal"
)

// Undo is a planned instance whose planned value undoes a version's
// change (Planned.Undo).
type Undo struct {
	Kind UndoKind
	// Attributes are the top-level attributes the plan sets back (for
	// UndoChange and UndoRemoval), sorted: schema names, never values.
	Attributes []string
	// Paths are what of those attributes the plan sets back, sorted by
	// path: each the shortest path within which it sets back everything
	// the version changed (UndonePath). Names and keys, never values.
	Paths []UndonePath
}

// UndonePath is one part of an instance a plan sets back (Undo.Paths).
// Path is an attribute path as Terraform writes a traversal (`input`,
// `input.a`, `tags["env"]`, `rule[0].port`: Path.String). Without Part,
// the plan sets back everything the version changed within the value at
// Path — so `input` alone means all of what the version changed in input.
// With Part, it sets back only some of it, and the value at Path is marked
// sensitive (by a snapshot or the plan), so no path within it is named:
// keys of a sensitive map are part of its value.
type UndonePath struct {
	Path string `json:"path"`
	Part bool   `json:"part,omitempty"`
}

// Undo reports whether the plan's value of instance addr undoes the
// change a version made to it: before and after are the snapshots before
// and of that version, head the one the plan was made against, each read
// with addr's resource (ReadSnapshot). It compares values, never shows
// them; sensitive ones compare like any other.
//
// The rule (ADR 0046): take the attribute paths at which the version
// changed the instance (objects key by key, arrays of one length element
// by element, an object that appears or disappears leaf by leaf, other
// values whole; null and absent alike). Of those, keep the ones the plan
// changes: its value there is known (an unknown is no evidence either
// way) and differs from head's. It undoes the version when at least one
// is kept and at every kept path the plan's value equals the value before
// the version. So a plan that leaves the version's attributes alone is no
// undo (ok false, and an older version may still be one), nor is one that
// sets them to anything else.
func (p *Planned) Undo(addr string, before, after, head *Snapshot) (Undo, bool) {
	pi, ok := p.insts[addr]
	if !ok || before == nil || after == nil || head == nil {
		return Undo{}, false
	}
	x, inX := before.insts[addr]
	y, inY := after.insts[addr]
	if !inX && !inY {
		return Undo{}, false
	}
	var paths, back []Path
	diffPaths(nil, x.attrs, y.attrs, &paths)
	attrs := map[string]bool{}
	for _, path := range paths {
		if !pi.gone && (unknownAt(pi.unk, path) || wrapperShaped(pi.after, path, x, y)) {
			continue
		}
		pv := valueAt(pi.after, path)
		if equal(pv, valueAt(head.insts[addr].attrs, path)) {
			continue // the plan does not change it
		}
		if !equal(pv, valueAt(x.attrs, path)) {
			return Undo{}, false
		}
		if len(path) > 0 && !path[0].IsIndex {
			attrs[path[0].Key] = true
			back = append(back, path)
		}
	}
	if len(attrs) == 0 {
		return Undo{}, false
	}
	u := Undo{Kind: UndoChange}
	switch {
	case !inX && pi.gone:
		return Undo{Kind: UndoCreation}, true
	case !inX:
		return Undo{}, false // the version created it and the plan keeps an object
	case !inY:
		u.Kind = UndoRemoval
	}
	for a := range attrs {
		u.Attributes = append(u.Attributes, a)
	}
	sort.Strings(u.Attributes)
	u.Paths = undonePaths(paths, back, []*mark{x.marks, y.marks, head.insts[addr].marks, pi.sens})
	return u, true
}

// undonePaths names the set-back paths back among the version's changed
// paths changed (ADR 0046 decision 3): for each, its shortest prefix
// within which every changed path is set back; a prefix deeper than a
// value sens marks sensitive is said as part of that value instead. Each
// once, sorted.
func undonePaths(changed, back []Path, sens []*mark) []UndonePath {
	isBack := map[string]bool{}
	for _, p := range back {
		isBack[p.String()] = true
	}
	whole := func(prefix Path) bool {
		for _, c := range changed {
			if hasPrefix(c, prefix) && !isBack[c.String()] {
				return false
			}
		}
		return true
	}
	seen := map[string]bool{}
	var out []UndonePath
	for _, p := range back {
		k := 1
		for !whole(p[:k]) {
			k++
		}
		u := UndonePath{Path: p[:k].String()}
		if s := sensitivePrefix(sens, p); s < k {
			u = UndonePath{Path: p[:s].String(), Part: true}
		}
		if !seen[u.Path] {
			seen[u.Path] = true
			out = append(out, u)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func hasPrefix(p, prefix Path) bool {
	if len(p) < len(prefix) {
		return false
	}
	for i, s := range prefix {
		if p[i] != s {
			return false
		}
	}
	return true
}

// sensitivePrefix is the length of the shortest prefix of p (at least 1)
// whose value one of marks marks sensitive as a whole, len(p) when none
// does.
func sensitivePrefix(marks []*mark, p Path) int {
	marks = append([]*mark(nil), marks...)
	for _, m := range marks {
		if m.isAll() {
			return 1
		}
	}
	for k := 1; k <= len(p); k++ {
		for i, m := range marks {
			s := p[k-1]
			if s.IsIndex {
				marks[i] = m.elem(s.Index)
			} else {
				marks[i] = m.key(s.Key)
			}
			if marks[i].isAll() {
				return k
			}
		}
	}
	return len(p)
}

// wrapperShaped reports whether the plan's value of the top-level
// attribute path starts at is itself an object shaped like the state's
// encoding of a dynamic value while a snapshot unwrapped it
// (unwrapDynamic): then the plan and the snapshots do not spell it alike,
// and it is no evidence either way.
func wrapperShaped(after any, path Path, x, y instance) bool {
	if len(path) == 0 || path[0].IsIndex || !x.dynamic[path[0].Key] && !y.dynamic[path[0].Key] {
		return false
	}
	_, ok := dynamicValue(valueAt(after, path[:1]))
	return ok
}

// diffPaths appends the paths below p at which x and y differ (decoded
// JSON; nil is null or absent): objects key by key, arrays of one length
// element by element, a container against null leaf by leaf of the
// container, anything else as a whole.
func diffPaths(p Path, x, y any, out *[]Path) {
	xm, xObj := x.(map[string]any)
	ym, yObj := y.(map[string]any)
	xa, xArr := x.([]any)
	ya, yArr := y.([]any)
	switch {
	case xObj && yObj, xObj && y == nil, x == nil && yObj:
		for _, k := range unionKeys(xm, ym) {
			diffPaths(append(p[:len(p):len(p)], Step{Key: k}), xm[k], ym[k], out)
		}
	case xArr && yArr && len(xa) == len(ya), xArr && y == nil, x == nil && yArr:
		for i := 0; i < max(len(xa), len(ya)); i++ {
			diffPaths(append(p[:len(p):len(p)], Step{Index: i, IsIndex: true}), at(xa, i), at(ya, i), out)
		}
	case !equal(x, y):
		*out = append(*out, p)
	}
}

func unionKeys(a, b map[string]any) []string {
	seen := map[string]bool{}
	for k := range a {
		seen[k] = true
	}
	for k := range b {
		seen[k] = true
	}
	return slices.Sorted(maps.Keys(seen))
}

func at(a []any, i int) any {
	if i < len(a) {
		return a[i]
	}
	return nil
}

// valueAt is v's value at path (nil where there is none).
func valueAt(v any, path Path) any {
	for _, s := range path {
		switch x := v.(type) {
		case map[string]any:
			if s.IsIndex {
				return nil
			}
			v = x[s.Key]
		case []any:
			if !s.IsIndex {
				return nil
			}
			v = at(x, s.Index)
		default:
			return nil
		}
	}
	return v
}

// unknownAt reports whether m (after_unknown) marks the value at path, a
// value holding it, or anything within it unknown.
func unknownAt(m *mark, path Path) bool {
	for _, s := range path {
		if m == nil {
			return false
		}
		if m.all {
			return true
		}
		if s.IsIndex {
			m = m.elem(s.Index)
		} else {
			m = m.key(s.Key)
		}
	}
	return m != nil
}
