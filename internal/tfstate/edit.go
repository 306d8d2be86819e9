package tfstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Editing a state without Terraform: `kl state rm` and `kl state mv`
// (issue 14 §6, ADR 0055). The rules are `terraform state rm` and
// `terraform state mv`'s (Terraform 1.11, measured: docs/terraform.md
// "State edits"), except that every address must match: Terraform ignores
// an address of `state rm` that matches nothing when another one matches.

// ErrNoMatch marks the error of an address that matches nothing in the
// state (a *NoMatchError).
var ErrNoMatch = errors.New("no match in the state")

// NoMatchError names the addresses of an edit that match nothing in the
// state. Unwrap yields ErrNoMatch.
type NoMatchError struct {
	Addresses []string
}

func (e *NoMatchError) Error() string {
	if len(e.Addresses) == 1 {
		return fmt.Sprintf("%s matches nothing in the state", e.Addresses[0])
	}
	return fmt.Sprintf("%s match nothing in the state", strings.Join(e.Addresses, ", "))
}

// Unwrap returns ErrNoMatch.
func (e *NoMatchError) Unwrap() error { return ErrNoMatch }

// ErrBadMove marks a move Terraform refuses too: the target exists, the
// types differ, a resource moved to a module address (a *MoveError).
var ErrBadMove = errors.New("invalid state move")

// MoveError is a refused move: From, To and why. Unwrap yields ErrBadMove.
type MoveError struct {
	From, To string
	Why      string
}

func (e *MoveError) Error() string {
	return fmt.Sprintf("cannot move %s to %s: %s", e.From, e.To, e.Why)
}

// Unwrap returns ErrBadMove.
func (e *MoveError) Unwrap() error { return ErrBadMove }

// Remove returns s without what targets name, as version serial (s is not
// changed), and the instance addresses it removed, sorted. As `terraform
// state rm`: a resource without a key removes every instance of it; an
// instance key removes that instance (with its deposed objects); a module
// address removes every resource in that module instance and the modules
// below it — its last step without a key meaning every instance of the
// module call (`module.app` removes module.app[0] and module.app[1]);
// the keys of the module path before must match exactly. Every target
// must match something: else a *NoMatchError names each that does not, and
// nothing is removed.
func (s *State) Remove(targets []Target, serial int64) (*State, []string, error) {
	es, err := s.editEntries()
	if err != nil {
		return nil, nil, err
	}
	matched := make([]bool, len(targets))
	removed := map[string]bool{}
	var keep []*editEntry
	for _, e := range es {
		drop, err := e.removeMatching(targets, matched, removed)
		if err != nil {
			return nil, nil, err
		}
		if !drop {
			keep = append(keep, e)
		}
	}
	var missing []string
	for i, t := range targets {
		if !matched[i] {
			missing = append(missing, t.String())
		}
	}
	if len(missing) > 0 {
		return nil, nil, &NoMatchError{Addresses: missing}
	}
	out, err := s.rebuilt(keep, serial)
	if err != nil {
		return nil, nil, err
	}
	return out, sortedKeys(removed), nil
}

// removeMatching removes from e what targets match, marking each target
// that matched, and records the instance addresses removed. It reports
// whether e is left without instances (and is dropped).
func (e *editEntry) removeMatching(targets []Target, matched []bool, removed map[string]bool) (bool, error) {
	if e.empty {
		return false, nil
	}
	whole := false
	var gone []*Key
	for i, t := range targets {
		switch {
		case t.Resource == nil:
			if moduleHasPrefix(e.module, t.Module, true) {
				whole, matched[i] = true, true
			}
		case e.isResource(t.Module, t.Resource):
			if t.Resource.Key == nil {
				whole, matched[i] = true, true
				continue
			}
			insts, err := e.instances()
			if err != nil {
				return false, err
			}
			for _, in := range insts {
				if keyEqual(in.key, t.Resource.Key) {
					matched[i] = true
					gone = append(gone, t.Resource.Key)
					break
				}
			}
		}
	}
	if !whole && len(gone) == 0 {
		return false, nil
	}
	insts, err := e.instances()
	if err != nil {
		return false, err
	}
	var left []editInstance
	for _, in := range insts {
		if whole || slices.ContainsFunc(gone, func(k *Key) bool { return keyEqual(k, in.key) }) {
			removed[e.instanceAddress(in.key)] = true
			continue
		}
		left = append(left, in)
	}
	e.insts, e.dirty = left, true
	return len(left) == 0, nil
}

// Move returns s with what from names moved to to, as version serial (s
// is not changed), and how many resource instances moved. As `terraform
// state mv`:
//   - a module instance moves to a module instance address (keys must
//     match exactly: `module.app` is the instance without a key), with
//     every module below it; nothing may be at the target yet;
//   - a resource (no key) moves to a resource address of the same mode
//     and type in any module instance, with all its instances; no resource
//     may be there yet. A resource without count or for_each also moves to
//     an instance address (`x.b[0]`), as its one instance;
//   - an instance moves to an instance address of the same mode and type
//     (no key: the instance of a resource without count or for_each), into
//     the resource there or a new one; no instance may be there yet.
//
// Errors: a *NoMatchError when from matches nothing; a *MoveError when
// Terraform refuses the move too (from and to the same, the target taken,
// other types, a resource to a module address or back); nothing is moved.
func (s *State) Move(from, to Target, serial int64) (*State, int, error) {
	es, err := s.editEntries()
	if err != nil {
		return nil, 0, err
	}
	bad := func(why string) (*State, int, error) {
		return nil, 0, &MoveError{From: from.String(), To: to.String(), Why: why}
	}
	if from.String() == to.String() {
		return bad("it is the same address")
	}
	var n int
	switch {
	case from.Resource == nil:
		if to.Resource != nil {
			return bad("the source is a module instance, so the target must be a module instance address")
		}
		if len(to.Module) == 0 {
			return bad("the target is the root module: a module instance moves to a module instance address")
		}
		n, err = moveModule(es, from, to)
	case to.Resource == nil:
		return bad("the source is a resource, so the target must be a resource address")
	case from.Resource.Mode != to.Resource.Mode || from.Resource.Type != to.Resource.Type:
		return bad("resource types don't match")
	default:
		var whole bool
		if whole, err = wholeResource(es, from, to); err == nil {
			if whole {
				n, err = moveResource(es, from, to)
				break
			}
			es, n, err = moveInstance(es, from, to)
		}
	}
	if err != nil {
		return nil, 0, err
	}
	out, err := s.rebuilt(es, serial)
	if err != nil {
		return nil, 0, err
	}
	return out, n, nil
}

// moveModule moves the entries of module instance from (and below) to to.
func moveModule(es []*editEntry, from, to Target) (int, error) {
	var moving []*editEntry
	for _, e := range es {
		if e.empty {
			continue
		}
		if moduleHasPrefix(e.module, from.Module, false) {
			moving = append(moving, e)
		} else if moduleHasPrefix(e.module, to.Module, false) {
			return 0, &MoveError{From: from.String(), To: to.String(), Why: "there is already a module instance at that address in the state"}
		}
	}
	if len(moving) == 0 {
		return 0, &NoMatchError{Addresses: []string{from.String()}}
	}
	n := 0
	for _, e := range moving {
		insts, err := e.instances()
		if err != nil {
			return 0, err
		}
		n += countKeys(insts)
		e.setModule(append(slices.Clone(to.Module), e.module[len(from.Module):]...))
	}
	return n, nil
}

// wholeResource reports whether from (a resource address) moves a whole
// resource: it has no key, and to has none either — or the resource has
// instances beside the one without a key, when a keyed target is refused
// as Terraform refuses it.
func wholeResource(es []*editEntry, from, to Target) (bool, error) {
	if from.Resource.Key != nil {
		return false, nil
	}
	if to.Resource.Key == nil {
		return true, nil
	}
	e := findResource(es, from.Module, from.Resource)
	if e == nil {
		return false, &NoMatchError{Addresses: []string{from.String()}}
	}
	insts, err := e.instances()
	if err != nil {
		return false, err
	}
	for _, in := range insts {
		if in.key != nil {
			return false, &MoveError{From: from.String(), To: to.String(),
				Why: "the source is a whole resource (not a resource instance) so the target must also be a whole resource"}
		}
	}
	return false, nil
}

// moveResource moves the whole resource from to to (both without keys).
func moveResource(es []*editEntry, from, to Target) (int, error) {
	e := findResource(es, from.Module, from.Resource)
	if e == nil {
		return 0, &NoMatchError{Addresses: []string{from.String()}}
	}
	if findResource(es, to.Module, to.Resource) != nil {
		return 0, &MoveError{From: from.String(), To: to.String(), Why: "there is already a resource at that address in the state"}
	}
	insts, err := e.instances()
	if err != nil {
		return 0, err
	}
	e.setModule(to.Module)
	e.name = to.Resource.Name
	return countKeys(insts), nil
}

// moveInstance moves the instance from (its deposed objects with it) to
// the instance address to, into the resource there or a new entry.
func moveInstance(es []*editEntry, from, to Target) ([]*editEntry, int, error) {
	src := findResource(es, from.Module, from.Resource)
	var objs, rest []editInstance
	if src != nil {
		insts, err := src.instances()
		if err != nil {
			return nil, 0, err
		}
		for _, in := range insts {
			if keyEqual(in.key, from.Resource.Key) {
				objs = append(objs, in)
			} else {
				rest = append(rest, in)
			}
		}
	}
	if len(objs) == 0 {
		return nil, 0, &NoMatchError{Addresses: []string{from.String()}}
	}
	dst := findResource(es, to.Module, to.Resource)
	if dst != nil {
		insts, err := dst.instances()
		if err != nil {
			return nil, 0, err
		}
		for _, in := range insts {
			if keyEqual(in.key, to.Resource.Key) {
				return nil, 0, &MoveError{From: from.String(), To: to.String(), Why: "there is already a resource instance at that address in the state"}
			}
		}
	}
	for i := range objs {
		objs[i] = objs[i].withKey(to.Resource.Key)
	}
	if dst == src {
		src.insts, src.dirty = sortInstances(append(rest, objs...)), true
		return es, 1, nil
	}
	src.insts, src.dirty = rest, true
	if dst == nil {
		dst = &editEntry{raw: src.raw, mode: src.mode, typ: src.typ, name: to.Resource.Name, dropEach: true, dirty: true, decoded: true}
		dst.setModule(to.Module)
		es = append(es, dst)
	}
	dst.insts, dst.dirty = sortInstances(append(dst.insts, objs...)), true
	if len(rest) == 0 {
		es = slices.DeleteFunc(es, func(e *editEntry) bool { return e == src })
	}
	return es, 1, nil
}

// findResource is the entry of resource r in module instance mod (keys
// exact), or nil.
func findResource(es []*editEntry, mod []ModuleStep, r *ResourceStep) *editEntry {
	for _, e := range es {
		if !e.empty && e.isResource(mod, r) {
			return e
		}
	}
	return nil
}

// countKeys is the number of distinct instance keys among insts (deposed
// objects belong to their instance).
func countKeys(insts []editInstance) int {
	seen := map[string]bool{}
	for _, in := range insts {
		seen[keySuffix(in.key)] = true
	}
	return len(seen)
}

// moduleHasPrefix reports whether module instance path mod is prefix or
// below it. Keys must be equal, except that with anyLastKey, prefix's last
// step without a key matches every instance of that module call.
func moduleHasPrefix(mod, prefix []ModuleStep, anyLastKey bool) bool {
	if len(mod) < len(prefix) {
		return false
	}
	for i, p := range prefix {
		if mod[i].Name != p.Name {
			return false
		}
		if anyLastKey && i == len(prefix)-1 && p.Key == nil {
			continue
		}
		if !keyEqual(mod[i].Key, p.Key) {
			return false
		}
	}
	return true
}

// editEntry is one resource entry of a state being edited: its
// identifying fields decoded, its instances decoded when first needed
// (instances), and its raw entry rebuilt (encode) only when dirty.
type editEntry struct {
	raw             json.RawMessage
	module          []ModuleStep
	modStr          string
	mode, typ, name string
	empty           bool // the entry has no instances (Resource.noInstances)
	insts           []editInstance
	decoded         bool
	dirty           bool
	dropEach        bool // a new entry: no "each" (Terraform 0.12–0.13 only)
}

// editInstance is one instance object of an entry and its "index_key".
type editInstance struct {
	key *Key
	raw json.RawMessage
}

// editEntries decodes s's entries for an edit.
func (s *State) editEntries() ([]*editEntry, error) {
	paths := map[string][]ModuleStep{}
	out := make([]*editEntry, 0, len(s.Resources))
	for i := range s.Resources {
		r := &s.Resources[i]
		mod, ok := paths[r.Module]
		if !ok {
			var err error
			if mod, err = parseModulePath(r.Module); err != nil {
				return nil, fmt.Errorf("resource %s: %w", r.Address(), err)
			}
			paths[r.Module] = mod
		}
		out = append(out, &editEntry{raw: r.Raw, module: mod, modStr: r.Module, mode: r.Mode, typ: r.Type, name: r.Name, empty: r.noInstances})
	}
	return out, nil
}

// isResource reports whether e is the entry of resource r (its key aside)
// in module instance mod.
func (e *editEntry) isResource(mod []ModuleStep, r *ResourceStep) bool {
	return e.mode == r.Mode && e.typ == r.Type && e.name == r.Name && len(e.module) == len(mod) && moduleHasPrefix(e.module, mod, false)
}

func (e *editEntry) setModule(mod []ModuleStep) {
	e.module, e.modStr, e.dirty = mod, ModulePath(mod), true
}

func (e *editEntry) instanceAddress(k *Key) string {
	return instanceAddress(e.modStr, e.mode, e.typ, e.name, k)
}

// instances decodes e's instances once.
func (e *editEntry) instances() ([]editInstance, error) {
	if e.decoded {
		return e.insts, nil
	}
	raws, err := (&Resource{Raw: e.raw}).Instances()
	if err != nil {
		return nil, err
	}
	for _, raw := range raws {
		k, err := indexKey(raw)
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", e.instanceAddress(nil), err)
		}
		e.insts = append(e.insts, editInstance{key: k, raw: raw})
	}
	e.decoded = true
	return e.insts, nil
}

// indexKey reads an instance object's "index_key": nil when absent.
func indexKey(inst []byte) (*Key, error) {
	if len(inst) == 0 || inst[0] != '{' {
		return nil, fmt.Errorf("an instance is %s, not an object", jsonKind(inst))
	}
	var k *Key
	err := members(inst, func(key, val []byte) error {
		if string(key) != `"index_key"` || string(val) == "null" {
			return nil
		}
		if val[0] == '"' {
			s, err := unquote(val)
			k = &Key{Str: s, IsStr: true}
			return err
		}
		n, err := strconv.ParseInt(string(val), 10, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("index_key %s: want a count index (a whole number from 0) or a for_each key (a string)", jsonKind(val))
		}
		k = &Key{Int: n}
		return nil
	})
	return k, err
}

// withKey is the instance with its "index_key" set to k (removed for nil),
// written first as Terraform writes it.
func (in editInstance) withKey(k *Key) editInstance {
	var b bytes.Buffer
	b.WriteByte('{')
	if k != nil {
		b.WriteString(`"index_key":`)
		b.Write(keyJSON(k))
	}
	_ = members(in.raw, func(key, val []byte) error {
		if string(key) == `"index_key"` {
			return nil
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.Write(key)
		b.WriteByte(':')
		b.Write(val)
		return nil
	})
	b.WriteByte('}')
	return editInstance{key: k, raw: b.Bytes()}
}

// keyJSON is the JSON of an instance key: a number or a string.
func keyJSON(k *Key) []byte {
	if !k.IsStr {
		return strconv.AppendInt(nil, k.Int, 10)
	}
	return appendString(nil, k.Str)
}

// sortInstances orders instances as Terraform writes them: no key first,
// then count indexes ascending, then for_each keys; an instance's objects
// keep their order.
func sortInstances(insts []editInstance) []editInstance {
	slices.SortStableFunc(insts, func(a, b editInstance) int { return compareKeys(a.key, b.key) })
	return insts
}

func compareKeys(a, b *Key) int {
	switch {
	case a == nil || b == nil:
		return boolRank(a != nil) - boolRank(b != nil)
	case a.IsStr != b.IsStr:
		return boolRank(a.IsStr) - boolRank(b.IsStr)
	case a.IsStr:
		return strings.Compare(a.Str, b.Str)
	case a.Int < b.Int:
		return -1
	case a.Int > b.Int:
		return 1
	}
	return 0
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// encode is e's raw entry with its edits: members in the original order,
// "module" first (or dropped at the root), the new name and instances.
func (e *editEntry) encode() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	sep := func() {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
	}
	if e.modStr != "" {
		b.WriteString(`"module":`)
		b.Write(appendString(nil, e.modStr))
	}
	_ = members(e.raw, func(key, val []byte) error {
		switch string(key) {
		case `"module"`:
			return nil
		case `"each"`:
			if e.dropEach {
				return nil
			}
		case `"name"`:
			val = appendString(nil, e.name)
		case `"instances"`:
			var ib bytes.Buffer
			ib.WriteByte('[')
			for i, in := range e.insts {
				if i > 0 {
					ib.WriteByte(',')
				}
				ib.Write(in.raw)
			}
			ib.WriteByte(']')
			val = ib.Bytes()
		}
		sep()
		b.Write(key)
		b.WriteByte(':')
		b.Write(val)
		return nil
	})
	b.WriteByte('}')
	return b.Bytes()
}

// rebuilt is s with entries es (in Terraform's order) as version serial,
// written and parsed again: a State like Parse's, every entry checked.
func (s *State) rebuilt(es []*editEntry, serial int64) (*State, error) {
	slices.SortStableFunc(es, func(a, b *editEntry) int {
		return compareEntries(&Resource{Module: a.modStr, Mode: a.mode, Type: a.typ, Name: a.name}, &Resource{Module: b.modStr, Mode: b.mode, Type: b.typ, Name: b.name})
	})
	out := &State{TerraformVersion: s.TerraformVersion, Serial: serial, Lineage: s.Lineage, Outputs: s.Outputs,
		CheckResults: s.CheckResults, Extra: s.Extra, Resources: make([]Resource, 0, len(es))}
	for i := 1; i < len(es); i++ {
		if compareEntries(&Resource{Module: es[i-1].modStr, Mode: es[i-1].mode, Type: es[i-1].typ, Name: es[i-1].name},
			&Resource{Module: es[i].modStr, Mode: es[i].mode, Type: es[i].typ, Name: es[i].name}) == 0 {
			return nil, fmt.Errorf("editing the state: two entries for %s", es[i].instanceAddress(nil))
		}
	}
	for _, e := range es {
		raw := e.raw
		if e.dirty {
			raw = e.encode()
		}
		out.Resources = append(out.Resources, Resource{Raw: raw})
	}
	doc, err := out.Marshal()
	if err != nil {
		return nil, fmt.Errorf("editing the state: %w", err)
	}
	return Parse(doc)
}
