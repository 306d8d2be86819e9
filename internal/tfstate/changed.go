package tfstate

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// Changed returns the sorted resource-level addresses (and "output.NAME")
// whose state entries differ between base and result: added, removed, or
// any entry of the address differs — an address groups one entry per module
// instance, and the whole group is compared. This is "what an apply
// changed" (docs/design.md apply step 5) and the unplanned changes Merge looks at.
//
// Comparison is semantic, not by bytes: each entry is compared as decoded
// JSON (object key order and white space do not matter; numbers compare by
// their literal text), because Terraform re-indents and others may reorder
// keys. Identical compacted bytes short-cut the decode, so states written by
// Terraform and by Marshal compare fast (1–2 ms for 10,000 entries). A
// nil state counts as empty.
func Changed(base, result *State) []string {
	return sortedKeys(changedSet(base, result, false))
}

// Equivalent reports whether a and b hold the same resources — data
// sources included — and the same root outputs, compared as Changed
// compares them (semantically). Serial, lineage, Terraform version and
// check results are not compared. A nil state counts as empty.
func Equivalent(a, b *State) bool {
	return len(changedSet(a, b, true)) == 0
}

// Reencoded returns the sorted resource-level addresses of managed
// resources whose entries differ between base and result only by
// Terraform's re-encoding, written excluded: upgraded is base as Terraform
// upgraded it to the providers' current schemas before refreshing (the
// saved plan's "tfstate-prev"), and result's entries of the address equal
// upgraded's. That is what Terraform writes for an instance whose planned
// action was no-op and whose refresh found nothing, once a provider raised
// its schema version (docs/terraform.md): the object is what it was, stored
// anew — representation, not change (ADR 0038). A difference the refresh
// found (drift), new dependencies, a taint or a new object is not. Nil when
// upgraded is nil.
func Reencoded(base, upgraded, result *State, written []string) []string {
	if upgraded == nil {
		return nil
	}
	interest := changedSet(base, result, false)
	for _, a := range written {
		delete(interest, a)
	}
	for a := range interest {
		if strings.HasPrefix(a, OutputPrefix) {
			delete(interest, a)
		}
	}
	ug, rg := groupsOf(upgraded, interest), groupsOf(result, interest)
	var out []string
	for a := range interest {
		if len(rg[a]) > 0 && groupsEqual(ug[a], rg[a]) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}

// changedSet walks the entries of base and result side by side in
// Terraform's order (a merge join: no index, no hashing per entry) and
// returns the addresses whose entries differ. Data sources (mode "data")
// count only with data: Terraform reads them again at every plan and
// apply, and what it read is not state Kilolock owns — so a read is never
// a change (Changed), never a deviation, never in a version's changed set,
// and never makes another plan stale; the merge alone looks at them, to
// keep the head's copy fresh.
func changedSet(base, result *State, data bool) map[string]bool {
	out := map[string]bool{}
	a, b := sortedView(base), sortedView(result)
	if !data {
		a, b = managedView(a), managedView(b)
	}
	for i, j := 0, 0; i < len(a) || j < len(b); {
		c := 0
		switch {
		case j == len(b):
			c = -1
		case i == len(a):
			c = 1
		default:
			c = compareEntries(a[i], b[j])
		}
		switch {
		case c < 0:
			out[a[i].Address()] = true
			i++
		case c > 0:
			out[b[j].Address()] = true
			j++
		default:
			if !rawEqual(a[i].Raw, b[j].Raw) {
				out[a[i].Address()] = true
			}
			i++
			j++
		}
	}
	bo, ro := outputsOf(base), outputsOf(result)
	for name, o := range bo {
		if r, ok := ro[name]; !ok || !rawEqual(o.Raw, r.Raw) {
			out[OutputAddress(name)] = true
		}
	}
	for name := range ro {
		if _, ok := bo[name]; !ok {
			out[OutputAddress(name)] = true
		}
	}
	return out
}

// managedView is v without its data sources.
func managedView(v []*Resource) []*Resource {
	out := v[:0:0]
	for _, r := range v {
		if r.Mode != ModeData {
			out = append(out, r)
		}
	}
	return out
}

// sortedView returns pointers to s's entries in Terraform's order
// (compareEntries); states from Parse, Marshal and Terraform are already in
// it, so this is one check and one copy.
func sortedView(s *State) []*Resource {
	if s == nil {
		return nil
	}
	v := make([]*Resource, 0, len(s.Resources))
	for i := range s.Resources {
		if !s.Resources[i].noInstances {
			v = append(v, &s.Resources[i])
		}
	}
	if !slices.IsSortedFunc(v, compareEntries) {
		slices.SortStableFunc(v, compareEntries)
	}
	return v
}

// compareEntries orders entries like Terraform's statefile writer
// (statefile/version4.go, normalize): module instance path, then mode
// ("data" before "managed"), type, name.
func compareEntries(a, b *Resource) int {
	if c := strings.Compare(a.Module, b.Module); c != 0 {
		return c
	}
	if c := strings.Compare(a.Mode, b.Mode); c != 0 {
		return c
	}
	if c := strings.Compare(a.Type, b.Type); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

func outputsOf(s *State) map[string]Output {
	if s == nil {
		return nil
	}
	return s.Outputs
}

// groupsEqual reports whether two groups of entries of one address are the
// same: the same module instances, each entry semantically equal.
func groupsEqual(a, b []*Resource) bool {
	if len(a) != len(b) {
		return false
	}
	for _, ra := range a {
		i := slices.IndexFunc(b, func(rb *Resource) bool { return rb.Module == ra.Module })
		if i < 0 || !rawEqual(ra.Raw, b[i].Raw) {
			return false
		}
	}
	return true
}

// rawEqual compares two JSON values: equal bytes, or equal once decoded
// (json.Number keeps numbers exact) and normalised for the encodings
// Terraform treats as equal (normalize): representation is not change.
func rawEqual(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	va, errA := decodeAny(a)
	vb, errB := decodeAny(b)
	if errA != nil || errB != nil {
		return false // not JSON: only identical bytes are equal
	}
	return reflect.DeepEqual(normalize(va), normalize(vb))
}

// setMembers are the instance members Terraform reads as sets, empty or
// absent alike: it writes "dependencies": [] in some versions (1.5) and
// leaves it out in others (1.11), sorts it on its own, and drops an empty
// "sensitive_attributes".
var setMembers = []string{"dependencies", "sensitive_attributes"}

// normalize rewrites a decoded resource entry (an object with
// "instances") so that encodings Terraform treats as equal compare equal:
// each instance's set members sorted, and dropped when empty. What a
// resource IS — attributes, status (tainted), deposed keys, schema
// version, private data, the non-empty sets — is kept. Anything else is
// returned as it is.
func normalize(v any) any {
	entry, ok := v.(map[string]any)
	if !ok {
		return v
	}
	instances, ok := entry["instances"].([]any)
	if !ok {
		return v
	}
	for _, in := range instances {
		inst, ok := in.(map[string]any)
		if !ok {
			continue
		}
		for _, k := range setMembers {
			list, isList := inst[k].([]any)
			switch {
			case inst[k] == nil, isList && len(list) == 0:
				delete(inst, k)
			case isList:
				slices.SortFunc(list, func(x, y any) int { return strings.Compare(canonical(x), canonical(y)) })
			}
		}
	}
	return entry
}

// canonical is v's JSON text, for ordering set members.
func canonical(v any) string {
	b, _ := json.Marshal(v) // decoded JSON always encodes
	return string(b)
}

func decodeAny(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
