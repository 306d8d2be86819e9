package tfstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Parse reads a Terraform state v4 document. Errors wrap ErrInvalid (as a
// *ParseError) and say what is wrong: not JSON or truncated ("not a
// Terraform state: …", with encoding/json's message and the byte offset), a
// format version other than 4 (found version, and that Terraform ≥ 0.12
// writes version 4), no lineage, a resource entry without type or name,
// with an unknown mode or a malformed module path, or two entries for the
// same resource. A syntax error anywhere in b is reported before any of the
// others.
//
// Cost: one pass over b that checks the JSON (what json.Valid accepts, no
// more: valid.go) while it splits and compacts the entries
// (BenchmarkParse10k: a 10,000-resource state is 6.4 MB). The State keeps
// slices of b (each entry's bytes as written, for ParseWithBase): do not
// modify b afterwards.
func Parse(b []byte) (*State, error) {
	return parse(b, true, nil)
}

// ParseWithBase is Parse (same result, same errors) for a document that
// shares most of its entries with base: the state Terraform wrote after
// applying a plan to base. An entry whose bytes in b are, byte for byte,
// the bytes base's entry at the same place in Terraform's order had in the
// document base was parsed from is taken from base — its Raw shared, not
// compacted or checked again, since those bytes were checked when base
// was parsed — so the cost is a comparison of memory plus the parse of the
// entries that changed (issue 16's bench: the whole terraform-lane commit).
// Every other entry is parsed as Parse parses it. base must come from
// Parse or ParseWithBase of a document not modified since; nil base, or a
// State built otherwise, makes this Parse.
func ParseWithBase(b []byte, base *State) (*State, error) {
	return parse(b, true, base)
}

// ParsePrevRun reads the state Terraform keeps in a saved plan as its
// previous-run state (the plan file's "tfstate-prev": the snapshot
// upgraded to the providers' current schemas, before refreshing), which
// Terraform writes with no lineage and serial 0. Errors are Parse's, less
// the missing lineage.
func ParsePrevRun(b []byte) (*State, error) {
	return parse(b, false, nil)
}

func parse(b []byte, needLineage bool, base *State) (*State, error) {
	start := skipSpace(b, 0)
	if start == len(b) {
		return nil, invalid(nil, "not a Terraform state: empty input")
	}
	if b[start] != '{' {
		if !json.Valid(b) {
			return nil, syntaxError(b)
		}
		return nil, invalid(nil, "not a Terraform state: want a JSON object, found %s", jsonKind(b[start:]))
	}
	m, ok := splitMembers(b, start, base)
	// A walk that stopped at an error in the resources skipped the rest of
	// them unchecked: a syntax error there still comes first.
	if !ok || (m.unchecked && !json.Valid(b)) {
		return nil, syntaxError(b)
	}
	if err := m.fill(needLineage); err != nil {
		return nil, err
	}
	return m.s, nil
}

// topMembers are the top-level members of a state document as splitMembers
// found them: the scalar ones and outputs raw, for fill to check; the
// resources, check_results and unknown members already in s.
type topMembers struct {
	version, serial, lineage, tfVersion, outputs []byte
	s                                            *State
	// resErr is parseResources' error, reported after the other members'.
	resErr error
	// unchecked: after resErr, the rest of the resources was skipped, not
	// checked.
	unchecked bool
}

// splitMembers walks the top-level members of the object that starts at
// b[start] by hand, checking the JSON as it goes: the resources array
// (nearly all of the document) is split and compacted in the same pass
// (parseResources); the other members are compacted. It reports false for
// anything json.Valid refuses (the caller says what), including anything
// but white space after the object.
func splitMembers(b []byte, start int, base *State) (*topMembers, bool) {
	m := &topMembers{s: &State{Resources: []Resource{}}}
	i := skipSpace(b, start+1)
	if i < len(b) && b[i] == '}' {
		return m, skipSpace(b, i+1) == len(b)
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return nil, false
		}
		ke, ok := validStringEnd(b, i)
		if !ok {
			return nil, false
		}
		key, err := unquote(b[i:ke])
		if i = skipSpace(b, ke); err != nil || i >= len(b) || b[i] != ':' {
			return nil, false
		}
		var ve int
		if key == "resources" {
			if ve, ok = m.readResources(b, i+1, base); !ok {
				return nil, false
			}
		} else {
			var val []byte
			if val, ve, _, ok = appendValid(nil, b, i+1, nil, 1); !ok {
				return nil, false
			}
			m.set(key, val)
		}
		switch i = skipSpace(b, ve); {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == '}':
			return m, skipSpace(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
}

// readResources reads the resources member's value, which starts at b[at]
// (after white space), into m.s.Resources; it returns the index past it and
// false for a syntax error.
func (m *topMembers) readResources(b []byte, at int, base *State) (int, bool) {
	var ve int
	var ok bool
	m.s.Resources, ve, m.resErr, ok = parseResources(b, skipSpace(b, at), base, 1)
	if m.resErr != nil && ok {
		// parseResources skipped the rest without checking it.
		m.unchecked = true
	}
	return ve, ok
}

// set keeps the compact value val of the top-level member key.
func (m *topMembers) set(key string, val []byte) {
	s := m.s
	switch key {
	case "version":
		m.version = val
	case "serial":
		m.serial = val
	case "lineage":
		m.lineage = val
	case "terraform_version":
		m.tfVersion = val
	case "outputs":
		m.outputs = val
	case "check_results":
		s.CheckResults = nil
		if string(val) != "null" {
			s.CheckResults = val
		}
	default:
		if s.Extra == nil {
			s.Extra = map[string]json.RawMessage{}
		}
		s.Extra[key] = val
	}
}

// fill checks the format version and sets m.s's lineage (required when
// needLineage), serial, Terraform version and outputs from the raw
// members; then reports the resources' error, if any.
func (m *topMembers) fill(needLineage bool) error {
	s := m.s
	if err := checkVersion(m.version); err != nil {
		return err
	}
	var err error
	if s.Lineage, err = optString(m.lineage); err != nil {
		return invalid(nil, "lineage: %v, found %s", err, jsonKind(m.lineage))
	}
	if s.Lineage == "" && needLineage {
		return invalid(nil, "state has no lineage (every state Terraform writes has one)")
	}
	if len(m.serial) > 0 && string(m.serial) != "null" {
		if s.Serial, err = parseSerial(m.serial); err != nil {
			return invalid(nil, "serial %s: %v", m.serial, err)
		}
	}
	if s.TerraformVersion, err = optString(m.tfVersion); err != nil {
		return invalid(nil, "terraform_version: %v, found %s", err, jsonKind(m.tfVersion))
	}
	if s.Outputs, err = parseOutputs(m.outputs); err != nil {
		return err
	}
	return m.resErr
}

// syntaxError explains why b is not JSON, with the byte offset.
func syntaxError(b []byte) error {
	var v json.RawMessage
	err := json.Unmarshal(b, &v)
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		if err.Error() == "unexpected end of JSON input" {
			return invalid(err, "not a Terraform state: unexpected end of input (truncated file?)")
		}
		return invalid(err, "not a Terraform state: %v (at byte %d)", err, syn.Offset)
	}
	return invalid(err, "not a Terraform state: not valid JSON")
}

func checkVersion(raw []byte) error {
	if len(raw) == 0 {
		return invalid(nil, "not a Terraform state: no \"version\" field")
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return invalid(nil, "not a Terraform state: \"version\" is %s, want the number 4", raw)
	}
	switch {
	case v == FormatVersion:
		return nil
	case v < FormatVersion:
		return invalid(nil, "found state format version %d; Kilolock reads version 4 only, written by Terraform ≥ 0.12: upgrade the state by running Terraform ≥ 0.12 on it once", v)
	default:
		return invalid(nil, "found state format version %d, newer than version 4, the one Kilolock reads (Terraform ≥ 0.12)", v)
	}
}

// optString decodes an optional JSON string; absent and null give "".
func optString(raw []byte) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	return unquote(raw)
}

func parseOutputs(raw []byte) (map[string]Output, error) {
	out := map[string]Output{}
	if len(raw) == 0 || string(raw) == "null" {
		return out, nil
	}
	if raw[0] != '{' {
		return nil, invalid(nil, "outputs: want an object, found %s", jsonKind(raw))
	}
	err := members(raw, func(key, val []byte) error {
		name, err := unquote(key)
		if err != nil {
			return invalid(err, "outputs: reading a name: %v", err)
		}
		o, err := newOutput(val)
		if err != nil {
			return invalid(err, "output %q: %v", name, err)
		}
		out[name] = o
		return nil
	})
	return out, err
}

func newOutput(raw []byte) (Output, error) {
	if raw[0] != '{' {
		return Output{}, fmt.Errorf("want an object, found %s", jsonKind(raw))
	}
	o := Output{Raw: appendCompact(make([]byte, 0, len(raw)), raw)}
	var f struct {
		Value     json.RawMessage `json:"value"`
		Type      json.RawMessage `json:"type"`
		Sensitive bool            `json:"sensitive"`
	}
	if err := json.Unmarshal(o.Raw, &f); err != nil {
		return Output{}, err
	}
	o.Value, o.Type, o.Sensitive = f.Value, f.Type, f.Sensitive
	return o, nil
}

type entryKey struct{ module, mode, typ, name string }

// parseResources reads the resources value starting at b[at] (no white
// space before it), nested in depth arrays and objects: it checks the JSON
// while it splits the array into compacted entries and reads each entry's
// identifying fields (instances are copied, not decoded); entries found
// byte for byte in base are taken from it (ParseWithBase). It returns the
// index past the value and ok false for a syntax error. A semantic error
// (err) comes with the entries read so far and the index past the value
// found without checking the rest (valueEnd).
func parseResources(b []byte, at int, base *State, depth int) (out []Resource, end int, err error, ok bool) {
	if at >= len(b) {
		return nil, at, nil, false
	}
	switch b[at] {
	case 'n':
		return []Resource{}, at + 4, nil, literalAt(b, at, "null")
	case '[':
	default:
		if _, end, _, ok = appendValid(nil, b, at, nil, depth); !ok {
			return nil, end, nil, false
		}
		return nil, end, invalid(nil, "resources: want an array, found %s", jsonKind(b[at:])), true
	}
	p := entryParser{b: b, strs: map[string]string{}}
	if base != nil {
		p.base = base.Resources
		out = make([]Resource, 0, len(base.Resources)+8)
	} else {
		// One backing array for all compacted entries (compact JSON is never
		// longer than its source); each Raw is capped so appends cannot
		// spill. With a base, few entries are compacted: buf grows as needed.
		p.buf = make([]byte, 0, len(b)-at)
	}
	i := skipSpace(b, at+1)
	if i < len(b) && b[i] == ']' {
		return []Resource{}, i + 1, nil, true
	}
	for n := 0; ; n++ {
		if i >= len(b) {
			return out, i, nil, false
		}
		if b[i] != '{' {
			if _, e, _, ok := appendValid(nil, b, i, nil, depth+1); !ok {
				return out, e, nil, false
			}
			return out, valueEnd(b, at), invalid(nil, "resources[%d]: want an object, found %s", n, jsonKind(b[i:])), true
		}
		r, e, err, ok := p.entry(i, n, depth+1)
		if !ok || err != nil {
			return out, valueEnd(b, at), err, ok
		}
		if p.dups.add(out, &r) {
			return out, valueEnd(b, at), invalid(nil, "resources[%d]: a second entry for %s in module %q", n, r.addr, r.Module), true
		}
		out = append(out, r)
		switch i = skipSpace(b, e); {
		case i < len(b) && b[i] == ',':
			i = skipSpace(b, i+1)
		case i < len(b) && b[i] == ']':
			return out, i + 1, nil, true
		default:
			return out, i, nil, false
		}
	}
}

// entryParser reads the entries of one resources array (parseResources).
type entryParser struct {
	b     []byte
	buf   []byte
	strs  map[string]string // decoded module and provider strings, which repeat
	spans []span
	// base is ParseWithBase's base entries; next the one to compare the
	// next entry with (both in Terraform's order).
	base []Resource
	next int
	dups dupCheck
}

// entry reads the entry that starts at p.b[i] == '{', the n-th: from the
// base when its bytes are the next base entry's, else checked and
// compacted. It returns the index past it; ok false for a syntax error.
func (p *entryParser) entry(i, n, depth int) (Resource, int, error, bool) {
	b := p.b
	// The next base entry, or the one after it (an entry removed or
	// renamed just before).
	for k := p.next; k < len(p.base) && k < p.next+2; k++ {
		cand := &p.base[k]
		if src := cand.source(); len(src) > 0 && len(b)-i >= len(src) && string(b[i:i+len(src)]) == string(src) {
			// A whole object equal to a valid one ends where it does.
			r := *cand
			e := i + len(src)
			r.src = b[i:e:e]
			p.next = k + 1
			return r, e, nil, true
		}
	}
	start := len(p.buf)
	var e int
	var ok bool
	if p.buf, e, p.spans, ok = appendValid(p.buf, b, i, p.spans[:0], depth); !ok {
		return Resource{}, e, nil, false
	}
	r := Resource{Raw: p.buf[start:len(p.buf):len(p.buf)], src: b[i:e:e]}
	if err := r.readFields(p.spans, p.buf, p.strs, n); err != nil {
		return Resource{}, e, err, true
	}
	// Step over the base entries r comes after or replaces.
	for p.next < len(p.base) && compareEntries(&p.base[p.next], &r) < 0 {
		p.next++
	}
	if p.next < len(p.base) && compareEntries(&p.base[p.next], &r) == 0 {
		p.next++
	}
	return r, e, nil, true
}

// dupCheck finds a second entry for one resource (module instance, mode,
// type, name). While the entries come in Terraform's order, strictly
// ascending, none can repeat an earlier one and no set is kept; from the
// first entry out of order on, a set of all of them is.
type dupCheck struct{ seen map[entryKey]struct{} }

// add reports whether r repeats one of out (the entries before it) and
// counts r.
func (d *dupCheck) add(out []Resource, r *Resource) bool {
	if d.seen == nil {
		if len(out) == 0 || compareEntries(&out[len(out)-1], r) < 0 {
			return false
		}
		d.seen = make(map[entryKey]struct{}, 2*len(out))
		for i := range out {
			d.seen[entryKey{out[i].Module, out[i].Mode, out[i].Type, out[i].Name}] = struct{}{}
		}
	}
	k := entryKey{r.Module, r.Mode, r.Type, r.Name}
	if _, dup := d.seen[k]; dup {
		return true
	}
	d.seen[k] = struct{}{}
	return false
}

// readFields sets the identifying fields of r from its members (spans are
// offsets into buf) and checks them.
func (r *Resource) readFields(spans []span, buf []byte, strs map[string]string, n int) error {
	r.noInstances = true
	for _, sp := range spans {
		var dst *string
		switch string(buf[sp.k0:sp.k1]) {
		case `"instances"`:
			v := string(buf[sp.k1+1 : sp.v1])
			r.noInstances = v == "[]" || v == "null"
			continue
		case `"module"`:
			dst = &r.Module
		case `"mode"`:
			dst = &r.Mode
		case `"type"`:
			dst = &r.Type
		case `"name"`:
			dst = &r.Name
		case `"each"`:
			dst = &r.Each
		case `"provider"`:
			dst = &r.Provider
		default:
			continue
		}
		v := buf[sp.k1+1 : sp.v1]
		if s, ok := strs[string(v)]; ok {
			*dst = s
			continue
		}
		s, err := optString(v)
		if err != nil {
			return invalid(nil, "resources[%d]: %s: %v, found %s", n, buf[sp.k0:sp.k1], err, jsonKind(v))
		}
		if len(strs) < 1024 {
			strs[string(v)] = s
		}
		*dst = s
	}
	if r.Type == "" || r.Name == "" {
		return invalid(nil, "resources[%d] (module %q, %s.%s): missing %s", n, r.Module, r.Type, r.Name, missing(r.Type, r.Name))
	}
	if r.Mode != ModeManaged && r.Mode != ModeData {
		return invalid(nil, "resources[%d] (%s.%s): mode %q, want \"managed\" or \"data\"", n, r.Type, r.Name, r.Mode)
	}
	mod, err := moduleCallPath(r.Module)
	if err != nil {
		return invalid(err, "resources[%d] (%s.%s): %v", n, r.Type, r.Name, err)
	}
	r.addr = ResourceAddress(mod, r.Mode, r.Type, r.Name)
	r.markChecked()
	return nil
}

func missing(typ, name string) string {
	switch {
	case typ == "" && name == "":
		return "\"type\" and \"name\""
	case typ == "":
		return "\"type\""
	}
	return "\"name\""
}

// jsonKind names the kind of a raw JSON value for an error message; never
// the value itself (states hold secrets).
func jsonKind(b []byte) string {
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// parseSerial reads a serial: a JSON integer from 0 to math.MaxInt64
// (Kilolock keeps serials as int64; Terraform's own are uint64). A number
// outside that range is out of range, anything else not a whole number.
func parseSerial(raw []byte) (int64, error) {
	n, err := strconv.ParseInt(string(raw), 10, 64)
	switch {
	case err == nil && n >= 0:
		return n, nil
	case errors.Is(err, strconv.ErrRange) || err == nil:
		return 0, fmt.Errorf("out of range: want 0 to %d", int64(math.MaxInt64))
	}
	return 0, fmt.Errorf("want a whole number from 0 to %d", int64(math.MaxInt64))
}
