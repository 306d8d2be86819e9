package tfstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Parse reads a Terraform state v4 document. Errors wrap ErrInvalid (as a
// *ParseError) and say what is wrong: not JSON or truncated ("not a
// Terraform state: …"), a format version other than 4 (found version, and
// that Terraform ≥ 0.12 writes version 4), no lineage, a resource entry
// without type or name, with an unknown mode or a malformed module path, or
// two entries for the same resource.
//
// Cost: one json.Valid pass over b plus one lighter pass that splits and
// compacts the entries — about twice json.Valid's time (BenchmarkParse10k:
// a 10,000-resource state is 6.4 MB).
func Parse(b []byte) (*State, error) {
	return parse(b, true)
}

// ParsePrevRun reads the state Terraform keeps in a saved plan as its
// previous-run state (the plan file's "tfstate-prev": the snapshot
// upgraded to the providers' current schemas, before refreshing), which
// Terraform writes with no lineage and serial 0. Errors are Parse's, less
// the missing lineage.
func ParsePrevRun(b []byte) (*State, error) {
	return parse(b, false)
}

func parse(b []byte, needLineage bool) (*State, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, invalid(nil, "not a Terraform state: empty input")
	}
	if !json.Valid(b) {
		return nil, syntaxError(b)
	}
	start := skipSpace(b, 0)
	if b[start] != '{' {
		return nil, invalid(nil, "not a Terraform state: want a JSON object, found %s", jsonKind(b[start:]))
	}
	m, err := splitMembers(b, start)
	if err != nil {
		return nil, err
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
}

// splitMembers walks the top-level members of the valid JSON object that
// starts at b[start] by hand: the resources array (nearly all of the
// document) is split and compacted in the same pass that finds its end.
func splitMembers(b []byte, start int) (*topMembers, error) {
	m := &topMembers{s: &State{Resources: []Resource{}}}
	s := m.s
	i := skipSpace(b, start+1)
	for i < len(b) && b[i] == '"' {
		ke := stringEnd(b, i)
		key, err := unquote(b[i:ke])
		if err != nil {
			return nil, invalid(err, "reading a field name: %v", err)
		}
		vs := skipSpace(b, skipSpace(b, ke)+1) // past ':'
		var ve int
		if key == "resources" {
			s.Resources, ve, m.resErr = parseResources(b, vs)
		} else {
			ve = valueEnd(b, vs)
			val := b[vs:ve]
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
					s.CheckResults = appendCompact(nil, val)
				}
			default:
				if s.Extra == nil {
					s.Extra = map[string]json.RawMessage{}
				}
				s.Extra[key] = appendCompact(nil, val)
			}
		}
		i = skipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return m, nil
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

// parseResources reads the resources value starting at b[at]: it splits
// the array into compacted entries and reads each entry's identifying
// fields (instances are copied, not decoded). It returns the index past the
// value; an error comes with the entries read so far.
func parseResources(b []byte, at int) ([]Resource, int, error) {
	switch b[at] {
	case 'n':
		return []Resource{}, valueEnd(b, at), nil
	case '[':
	default:
		return nil, valueEnd(b, at), invalid(nil, "resources: want an array, found %s", jsonKind(b[at:]))
	}
	var (
		out   []Resource
		seen  = map[entryKey]struct{}{}
		strs  = map[string]string{} // decoded module and provider strings, which repeat
		spans []span
		// One backing array for all compacted entries (compact JSON is never
		// longer than its source); each Raw is capped so appends cannot spill.
		buf = make([]byte, 0, len(b)-at)
	)
	i := skipSpace(b, at+1)
	for n := 0; i < len(b) && b[i] != ']'; n++ {
		if b[i] != '{' {
			return out, valueEnd(b, at), invalid(nil, "resources[%d]: want an object, found %s", n, jsonKind(b[i:]))
		}
		start := len(buf)
		buf, i, spans = appendCompactObject(buf, b, i, spans[:0])
		r := Resource{Raw: buf[start:len(buf):len(buf)]}
		if err := r.readFields(spans, buf, strs, n); err != nil {
			return out, valueEnd(b, at), err
		}
		k := entryKey{r.Module, r.Mode, r.Type, r.Name}
		if _, dup := seen[k]; dup {
			return out, valueEnd(b, at), invalid(nil, "resources[%d]: a second entry for %s in module %q", n, r.addr, r.Module)
		}
		seen[k] = struct{}{}
		out = append(out, r)
		i = skipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	if out == nil {
		out = []Resource{}
	}
	return out, i + 1, nil
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
