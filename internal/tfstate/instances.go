package tfstate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Instance-level merge (ADR 0065). A written address that carries an
// instance key (`x.y["a"]`, `module.m[0].x.y`) names instances, not a whole
// resource: Merge then merges the resource's entries per instance — the
// written instances from the result, every other instance as an unplanned
// change would be (taken only where the head has not moved it since the
// plan) — so that the head keeps the instances another run committed since.
// A unit of this merge is one instance key of one entry (module instance):
// its current object and any deposed ones.

// unit is the objects of one instance key in one entry.
type unit struct {
	entry *Resource
	key   *Key
	objs  []json.RawMessage
}

// unitsOf returns the units of the entries of resource-level address res in
// s, by instance address (instanceAddress, canonical module path).
func unitsOf(s *State, res string) (map[string]*unit, error) {
	out := map[string]*unit{}
	if s == nil {
		return out, nil
	}
	for i := range s.Resources {
		r := &s.Resources[i]
		if r.noInstances || r.Address() != res {
			continue
		}
		steps, err := parseModulePath(r.Module)
		if err != nil {
			return nil, fmt.Errorf("entry %s: %w", res, err)
		}
		mod := ModulePath(steps)
		insts, err := r.Instances()
		if err != nil {
			return nil, err
		}
		for _, raw := range insts {
			k, err := indexKey(raw)
			if err != nil {
				return nil, fmt.Errorf("instance of %s: %w", res, err)
			}
			a := instanceAddress(mod, r.Mode, r.Type, r.Name, k)
			u := out[a]
			if u == nil {
				u = &unit{entry: r, key: k}
				out[a] = u
			}
			u.objs = append(u.objs, raw)
		}
	}
	return out, nil
}

// unitsEqual reports whether two units are the same: both absent, or the
// same entry-level fields and each object semantically equal.
func unitsEqual(a, b *unit) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if a.entry.Provider != b.entry.Provider || a.entry.Each != b.entry.Each || len(a.objs) != len(b.objs) {
		return false
	}
	for i := range a.objs {
		if !rawEqual(a.objs[i], b.objs[i]) {
			return false
		}
	}
	return true
}

// instanceWrites returns, by resource-level address, the parsed written
// addresses that carry an instance key, for each resource no written
// address names whole; the remaining written addresses (resource-level and
// outputs) are returned as a set. Errors: a written instance address that
// does not parse or names a module instance only.
func instanceWrites(written []string) (whole map[string]bool, split map[string][]Target, err error) {
	whole = map[string]bool{}
	split = map[string][]Target{}
	for _, a := range written {
		if strings.IndexByte(a, '[') < 0 || strings.HasPrefix(a, OutputPrefix) {
			whole[a] = true
			continue
		}
		t, err := ParseTarget(a)
		if err != nil {
			return nil, nil, fmt.Errorf("written address: %w", err)
		}
		if t.Resource == nil {
			return nil, nil, fmt.Errorf("written address %q names a module instance, not a resource or resource instance", a)
		}
		if t.String() != a {
			return nil, nil, fmt.Errorf("written address %q is not as Terraform writes it (%q)", a, t.String())
		}
		r := targetResource(t)
		split[r] = append(split[r], t)
	}
	for r := range whole {
		delete(split, r) // written whole: the resource-level merge
	}
	return whole, split, nil
}

// targetResource is the resource-level address of a target with a resource.
func targetResource(t Target) string {
	steps := make([]ModuleStep, len(t.Module))
	for i, m := range t.Module {
		steps[i] = ModuleStep{Name: m.Name}
	}
	return ResourceAddress(ModulePath(steps), t.Resource.Mode, t.Resource.Type, t.Resource.Name)
}

// targetCovers reports whether written target w covers the unit u of its
// resource: at each module step and on the resource, w's key is absent or
// equal to the unit's.
func targetCovers(w Target, u *unit) bool {
	steps, err := parseModulePath(u.entry.Module)
	if err != nil || len(steps) != len(w.Module) {
		return false
	}
	for i, m := range w.Module {
		if m.Name != steps[i].Name || m.Key != nil && !keyEqual(m.Key, steps[i].Key) {
			return false
		}
	}
	return w.Resource.Key == nil || keyEqual(w.Resource.Key, u.key)
}

// keptUnit reports whether a keep address covers or meets the unit at
// address a of resource res: the resource itself, a prefix above it, "*",
// or an instance address that agrees with a where both have keys.
func keptUnit(keep []string, res, a string, u *unit) bool {
	for _, k := range keep {
		switch {
		case k == res || k == a || k == "*":
			return true
		case strings.HasSuffix(k, ".*"):
			if strings.HasPrefix(res, strings.TrimSuffix(k, "*")) {
				return true
			}
		case strings.IndexByte(k, '[') >= 0:
			t, err := ParseTarget(k)
			if err == nil && t.Resource != nil && targetResource(t) == res && targetMeets(t, u) {
				return true
			}
		}
	}
	return false
}

// targetMeets is targetCovers where an absent key on either side agrees.
func targetMeets(w Target, u *unit) bool {
	steps, err := parseModulePath(u.entry.Module)
	if err != nil || len(steps) != len(w.Module) {
		return false
	}
	for i, m := range w.Module {
		if m.Name != steps[i].Name || m.Key != nil && steps[i].Key != nil && !keyEqual(m.Key, steps[i].Key) {
			return false
		}
	}
	return w.Resource.Key == nil || u.key == nil || keyEqual(w.Resource.Key, u.key)
}

// mergeInstances decides, per unit of resource res, whether the merge takes
// the result's or keeps the head's, and returns the resource's merged
// entries and its part of the report (instance addresses).
func mergeInstances(in MergeInput, res string, ws []Target) ([]Resource, MergeReport, error) {
	var rep MergeReport
	hu, err := unitsOf(in.Head, res)
	if err != nil {
		return nil, rep, err
	}
	bu, err := unitsOf(in.Base, res)
	if err != nil {
		return nil, rep, err
	}
	ru, err := unitsOf(in.Result, res)
	if err != nil {
		return nil, rep, err
	}
	var uu map[string]*unit
	if in.Upgraded != nil {
		if uu, err = unitsOf(in.Upgraded, res); err != nil {
			return nil, rep, err
		}
	}
	all := map[string]*unit{}
	for _, m := range []map[string]*unit{bu, ru, hu} {
		for a, u := range m {
			all[a] = u
		}
	}
	chosen := map[string]*unit{} // address → the unit the merged state holds (nil: none)
	for _, a := range sortedUnitKeys(all) {
		h, b, r := hu[a], bu[a], ru[a]
		unmoved := unitsEqual(h, b) || uu != nil && unitsEqual(h, uu[a])
		written := slices.ContainsFunc(ws, func(w Target) bool { return targetCovers(w, all[a]) })
		take := false
		reencoded := false
		switch {
		case written:
			take = true
			if !unmoved && !unitsEqual(h, r) {
				rep.Overwritten = append(rep.Overwritten, a)
			}
		case unitsEqual(b, r):
			// Not changed by the run: the head's stays.
		case uu != nil && r != nil && unitsEqual(uu[a], r):
			reencoded = true
			rep.Reencoded = append(rep.Reencoded, a)
			take = !keptUnit(in.Keep, res, a, all[a]) && (unmoved || unitsEqual(h, r))
		default:
			rep.Unplanned = append(rep.Unplanned, a)
			take = !keptUnit(in.Keep, res, a, all[a]) && (unmoved || unitsEqual(h, r))
			if !take {
				rep.Kept = append(rep.Kept, a)
			}
		}
		if take {
			rep.Merged = append(rep.Merged, a)
			chosen[a] = r
			if !unitsEqual(h, r) && !reencoded {
				rep.Changed = append(rep.Changed, a)
			}
		} else {
			chosen[a] = h
		}
	}
	entries, err := rebuildEntries(in.Head, in.Result, res, chosen)
	return entries, rep, err
}

// rebuildEntries builds the entries of res from the chosen units: one entry
// per module instance that holds at least one, its instances in key order
// (numbers, then strings), its other fields from the head's entry of that
// module instance when there is one, else the result's.
func rebuildEntries(head, result *State, res string, chosen map[string]*unit) ([]Resource, error) {
	byMod := map[string][]*unit{}
	var mods []string
	for _, a := range sortedUnitKeys(chosen) {
		u := chosen[a]
		if u == nil {
			continue
		}
		m := u.entry.Module
		if _, ok := byMod[m]; !ok {
			mods = append(mods, m)
		}
		byMod[m] = append(byMod[m], u)
	}
	tmpl := map[string]*Resource{}
	for _, s := range []*State{result, head} { // head's wins
		for i := range s.Resources {
			if r := &s.Resources[i]; !r.noInstances && r.Address() == res {
				tmpl[r.Module] = r
			}
		}
	}
	slices.Sort(mods)
	out := make([]Resource, 0, len(mods))
	for _, m := range mods {
		us := byMod[m]
		slices.SortStableFunc(us, func(a, b *unit) int { return compareKeys(a.key, b.key) })
		var objs []json.RawMessage
		for _, u := range us {
			objs = append(objs, u.objs...)
		}
		t := tmpl[m]
		raw, err := withInstances(t.Raw, objs)
		if err != nil {
			return nil, fmt.Errorf("rebuilding entry %s: %w", res, err)
		}
		out = append(out, Resource{Module: t.Module, Mode: t.Mode, Type: t.Type, Name: t.Name, Each: t.Each,
			Provider: t.Provider, Raw: raw, addr: res})
	}
	return out, nil
}

// withInstances returns the entry object raw with its "instances" member
// replaced by objs, other members in their order.
func withInstances(raw json.RawMessage, objs []json.RawMessage) (json.RawMessage, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	put := func(key, val []byte) {
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.Write(key)
		b.WriteByte(':')
		b.Write(val)
	}
	inst := []byte("[" + string(bytes.Join(rawSlices(objs), []byte(","))) + "]")
	seen := false
	err := members(raw, func(key, val []byte) error {
		if string(key) == `"instances"` {
			seen = true
			put(key, inst)
			return nil
		}
		put(key, val)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !seen {
		put([]byte(`"instances"`), inst)
	}
	b.WriteByte('}')
	if !json.Valid(b.Bytes()) {
		return nil, fmt.Errorf("entry is not a JSON object")
	}
	return b.Bytes(), nil
}

func rawSlices(objs []json.RawMessage) [][]byte {
	out := make([][]byte, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}

func sortedUnitKeys(m map[string]*unit) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// refineInstances replaces, in the sorted list addrs, each resource-level
// address that written names at instance level by its instances that
// differ between a and b (unitsEqual; only those where b's unit equals
// upgraded's when only is set). Errors: an entry that does not decode.
func refineInstances(addrs []string, a, b, upgraded *State, written []string, only bool) ([]string, error) {
	_, split, err := instanceWrites(written)
	if err != nil || len(split) == 0 {
		return addrs, err
	}
	var out []string
	for _, r := range addrs {
		if _, ok := split[r]; !ok {
			out = append(out, r)
			continue
		}
		au, err := unitsOf(a, r)
		if err != nil {
			return nil, err
		}
		bu, err := unitsOf(b, r)
		if err != nil {
			return nil, err
		}
		var uu map[string]*unit
		if only {
			if uu, err = unitsOf(upgraded, r); err != nil {
				return nil, err
			}
		}
		all := map[string]*unit{}
		for k, u := range au {
			all[k] = u
		}
		for k, u := range bu {
			all[k] = u
		}
		for _, k := range sortedUnitKeys(all) {
			if unitsEqual(au[k], bu[k]) {
				continue
			}
			if only && (bu[k] == nil || !unitsEqual(uu[k], bu[k])) {
				continue
			}
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}

// ChangedInstances is Changed with each resource that written names at
// instance level (`x.y["a"]`, ADR 0065) broken down into the instance
// addresses that differ between base and result; every other address stays
// at resource level. Errors: a written instance address that does not parse,
// an entry whose instances do not decode.
func ChangedInstances(base, result *State, written []string) ([]string, error) {
	return refineInstances(Changed(base, result), base, result, nil, written, false)
}

// ReencodedInstances is Reencoded where each resource that written names
// at instance level is looked at per instance: the instances not written
// whose result objects equal the upgraded base's while differing from the
// base's. Errors are ChangedInstances's.
func ReencodedInstances(base, upgraded, result *State, written []string) ([]string, error) {
	if upgraded == nil {
		return nil, nil
	}
	whole, split, err := instanceWrites(written)
	if err != nil {
		return nil, err
	}
	out := Reencoded(base, upgraded, result, mapKeys(whole))
	var extra []string
	for r, ws := range split {
		cand, err := refineInstances([]string{r}, base, result, upgraded, written, true)
		if err != nil {
			return nil, err
		}
		ru, err := unitsOf(result, r)
		if err != nil {
			return nil, err
		}
		for _, a := range cand {
			if u := ru[a]; u != nil && !slices.ContainsFunc(ws, func(w Target) bool { return targetCovers(w, u) }) {
				extra = append(extra, a)
			}
		}
		out = slices.DeleteFunc(out, func(s string) bool { return s == r })
	}
	out = append(out, extra...)
	slices.Sort(out)
	return out, nil
}

func mapKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
