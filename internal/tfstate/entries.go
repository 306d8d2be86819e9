package tfstate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Per-resource storage (issue 16 §1, ADR 0068): the state engine stores a
// version as its header — the document without its resources — and a
// manifest of resource entries, each stored once by content. The functions
// here split a State into those parts and put them back together; the
// document they assemble is the one Marshal writes, so a document
// Terraform or Kilolock wrote comes back byte for byte.

// Header returns s without its resource entries: version, terraform
// version, serial, lineage, outputs, check results and unknown top-level
// fields. It shares s's values (read-only, as every State).
func (s *State) Header() *State {
	h := *s
	h.Resources = []Resource{}
	return &h
}

// ParseEntries reads resource entries stored one by one (each the compact
// JSON of one element of a state's "resources", as Resource.Raw holds it)
// the way Parse reads them in a document: identifying fields checked, no
// two for one address. Errors wrap ErrInvalid, naming the entry by its
// index in raws.
func ParseEntries(raws [][]byte) ([]Resource, error) {
	n := 2
	for _, r := range raws {
		n += len(r) + 1
	}
	buf := make([]byte, 0, n)
	buf = append(buf, '[')
	for i, r := range raws {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, r...)
	}
	buf = append(buf, ']')
	out, _, err, ok := parseResources(buf, 0, nil, 0)
	if !ok {
		for i, r := range raws {
			if !json.Valid(r) {
				return nil, invalid(nil, "resource entry %d: not valid JSON", i)
			}
		}
		return nil, invalid(nil, "resource entries: not valid JSON")
	}
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].markChecked()
	}
	return out, nil
}

// Assemble is header with entries as its resources, in Terraform's order
// (module instance path, mode, type, name: compareEntries), entries with no
// instances included as stored. entries is not modified.
func Assemble(header *State, entries []Resource) *State {
	s := *header
	s.Resources = slices.Clone(entries)
	slices.SortStableFunc(s.Resources, func(a, b Resource) int { return compareEntries(&a, &b) })
	return &s
}

// InTerraformOrder reports whether s's resources are in the order
// Terraform writes them (module instance path, mode, type, name; Terraform's
// statefile writer sorts them so), the order Assemble puts entries back in.
// A document whose resources are in another order (edited by hand or by
// another tool) would not come back byte for byte from its entries.
func (s *State) InTerraformOrder() bool {
	return slices.IsSortedFunc(s.Resources, func(a, b Resource) int { return compareEntries(&a, &b) })
}

// EntryDocSize is the number of bytes Marshal writes for the entry raw in
// a document's "resources" array: raw indented at the array's depth,
// without the separator before it. raw must be valid JSON.
func EntryDocSize(raw []byte) int64 {
	return int64(indentedLen(raw, len("    ")))
}

// indentedLen is len(appendIndent(nil, b, prefix)) for a prefix of
// prefixLen bytes, counted without writing.
func indentedLen(b []byte, prefixLen int) int {
	n, depth := 0, 0
	newline := func() { n += 1 + prefixLen + 2*depth }
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			e := stringEnd(b, i)
			n += e - i
			i = e - 1
		case ' ', '\t', '\n', '\r':
		case '{', '[':
			n++
			if j := skipSpace(b, i+1); j < len(b) && (b[j] == '}' || b[j] == ']') {
				n++
				i = j
				continue
			}
			depth++
			newline()
		case '}', ']':
			depth--
			newline()
			n++
		case ',':
			n++
			newline()
		case ':':
			n += 2
		default:
			n++
		}
	}
	return n
}

// DocSize is the length of the document Marshal writes for a state whose
// header (Header) Marshal writes in headerSize bytes and whose n resource
// entries take entriesSize bytes together (the sum of their EntryDocSize):
// each entry adds a new line and its indentation, entries are separated by
// commas, and a non-empty array closes on a line of its own.
func DocSize(headerSize int64, n int, entriesSize int64) int64 {
	if n == 0 {
		return headerSize
	}
	const entryPrefix = int64(len("\n    "))
	const closing = int64(len("\n  "))
	return headerSize + entriesSize + int64(n)*entryPrefix + int64(n-1) + closing
}

// EntryAddress is the address of the resource entry that holds addr, a
// resource or resource instance address as Terraform writes it (ParseTarget):
// the resource in its module instance, without the resource's own key —
// `module.app["eu"].terraform_data.web` for
// `module.app["eu"].terraform_data.web[2]` (Resource.EntryAddress). A
// resource in a module called with count or for_each has one entry per
// module instance: name each with its key. A module instance alone is an
// error: it names no one entry.
func EntryAddress(addr string) (string, error) {
	t, err := ParseTarget(addr)
	if err != nil {
		return "", err
	}
	if t.Resource == nil {
		return "", fmt.Errorf("address %q is a module instance, not a resource: it names no one resource entry", addr)
	}
	return instanceAddress(ModulePath(t.Module), t.Resource.Mode, t.Resource.Type, t.Resource.Name, nil), nil
}

// EntryAddress is the address of r as one stored entry: the resource in
// its module instance, keys kept (`module.app[0].terraform_data.c`) —
// unlike Address, which strips module instance keys and so names every
// module instance's entry of the resource at once. No two entries of a
// state share it (Parse refuses such a state).
func (r *Resource) EntryAddress() string {
	return instanceAddress(r.Module, r.Mode, r.Type, r.Name, nil)
}

// MergeReads returns the resource-level addresses (Resource.Address) whose
// head entries MergeWith reads for a merge of result over base with
// written, sorted: every resource whose entries differ between base and
// result (data sources included), and every written resource (a written
// instance's resource). The merge of a head holding only these resources'
// entries — every module instance of each — and its outputs is the merge of
// the whole head restricted to them; the head's other entries are the
// merged state's unchanged (per-resource storage commits only the slice,
// ADR 0068). Outputs are not listed: a slice carries them all. Errors are
// MergeWith's for written addresses it refuses.
func MergeReads(base, result *State, written []string) ([]string, error) {
	if base == nil || result == nil {
		return nil, fmt.Errorf("merge reads: nil state")
	}
	w, split, err := instanceWrites(written)
	if err != nil {
		return nil, err
	}
	set := changedSet(base, result, true)
	for a := range w {
		set[a] = true
	}
	for r := range split {
		set[r] = true
	}
	out := make([]string, 0, len(set))
	for a := range set {
		if !strings.HasPrefix(a, OutputPrefix) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out, nil
}
