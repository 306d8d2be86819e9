package tfstate

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// Marshal writes the state the way Terraform does (statefile version 4):
// two-space indent, fields in Terraform's order (version, terraform_version,
// serial, lineage, outputs, resources, check_results), outputs by name, a
// trailing newline. Resources are written in slice order; Parse and Merge
// keep Terraform's order (module, mode, type, name). A document Terraform
// wrote therefore comes back byte for byte. The error is non-nil only when a
// raw entry is not valid JSON (a State built by hand).
func (s *State) Marshal() ([]byte, error) {
	size := 256
	for i := range s.Resources {
		size += len(s.Resources[i].Raw) * 2 // indentation roughly doubles compact JSON
	}
	for _, o := range s.Outputs {
		size += len(o.Raw) * 2
	}
	b := make([]byte, 0, size)
	b = append(b, "{\n  \"version\": 4,\n  \"terraform_version\": "...)
	b = appendString(b, s.TerraformVersion)
	b = append(b, ",\n  \"serial\": "...)
	b = strconv.AppendInt(b, s.Serial, 10)
	b = append(b, ",\n  \"lineage\": "...)
	b = appendString(b, s.Lineage)
	b = append(b, ",\n  \"outputs\": {"...)
	names := make([]string, 0, len(s.Outputs))
	for name := range s.Outputs {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "\n    "...)
		b = appendString(b, name)
		b = append(b, ": "...)
		raw := s.Outputs[name].Raw
		if !json.Valid(raw) {
			return nil, fmt.Errorf("writing output %q: raw value is not valid JSON", name)
		}
		b = appendIndent(b, raw, "    ")
	}
	if len(names) > 0 {
		b = append(b, "\n  "...)
	}
	b = append(b, "},\n  \"resources\": ["...)
	for i := range s.Resources {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, "\n    "...)
		r := &s.Resources[i]
		if !r.rawChecked() && !json.Valid(r.Raw) {
			return nil, fmt.Errorf("writing resource %s: raw entry is not valid JSON", r.Address())
		}
		b = appendIndent(b, r.Raw, "    ")
	}
	if len(s.Resources) > 0 {
		b = append(b, "\n  "...)
	}
	b = append(b, "],\n  \"check_results\": "...)
	if len(s.CheckResults) == 0 {
		b = append(b, "null"...)
	} else if !json.Valid(s.CheckResults) {
		return nil, errors.New("writing check_results: not valid JSON")
	} else {
		b = appendIndent(b, s.CheckResults, "  ")
	}
	keys := make([]string, 0, len(s.Extra))
	for k := range s.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b = append(b, ",\n  "...)
		b = appendString(b, k)
		b = append(b, ": "...)
		if !json.Valid(s.Extra[k]) {
			return nil, fmt.Errorf("writing field %q: not valid JSON", k)
		}
		b = appendIndent(b, s.Extra[k], "  ")
	}
	b = append(b, "\n}\n"...)
	return b, nil
}

// appendString appends s as a JSON string, escaped like encoding/json (and
// so like Terraform, which uses it with HTML escaping on).
func appendString(b []byte, s string) []byte {
	q, err := json.Marshal(s)
	if err != nil {
		panic(err) // unreachable: encoding/json marshals every string
	}
	return append(b, q...)
}
