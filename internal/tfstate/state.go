package tfstate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
)

// FormatVersion is the only state format version this package reads and
// writes: 4, written by Terraform 0.12 and later (and by OpenTofu).
const FormatVersion = 4

// MaxAdoptSerial is the largest serial a state may be adopted with (the
// engine's InitState refuses larger ones): 2^53−1, the largest integer JSON
// carries exactly between implementations (RFC 8259 §6; JavaScript's
// Number.MAX_SAFE_INTEGER), so every tool that reads the state reads its
// serial right. Terraform adds to the serial on every write it makes and
// Kilolock one per commit; from at most 2^53−1 a state has about 2^62
// writes before Parse's int64 range (math.MaxInt64) runs out, where a serial
// near 2^63−1 let Terraform write one Parse could not read.
const MaxAdoptSerial = 1<<53 - 1

// ErrInvalid marks every error of Parse: the input is not a Terraform state
// v4 document. Test with errors.Is; the engine maps it to engine.ErrInvalid.
var ErrInvalid = errors.New("invalid Terraform state")

// ParseError is the error Parse returns. Error() reads
// "parsing Terraform state: <reason>"; Unwrap yields ErrInvalid and, where
// there is one, the JSON error underneath (a *json.SyntaxError for a file
// that is not JSON).
type ParseError struct {
	Reason string
	Err    error
}

func (e *ParseError) Error() string { return "parsing Terraform state: " + e.Reason }

// Unwrap returns ErrInvalid and the underlying error, if any.
func (e *ParseError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalid}
	}
	return []error{ErrInvalid, e.Err}
}

func invalid(err error, format string, args ...any) error {
	return &ParseError{Reason: fmt.Sprintf(format, args...), Err: err}
}

// State is one Terraform state v4 document.
//
// The scalar fields are parsed; resources and outputs keep their raw JSON
// (compacted), which is what Marshal writes back. A State returned by Parse,
// Empty, Merge or SynthesizeTerraformData is never modified by this package
// afterwards, and values are shared between states (Merge copies the head's
// entries by reference): treat Resources and Outputs as read-only and build
// a new State rather than editing entries in place.
type State struct {
	// TerraformVersion is the version of the Terraform that last wrote the
	// state ("1.11.4"); may be empty.
	TerraformVersion string
	// Serial grows with every write of the state; Kilolock commits head+1
	// (docs/terraform.md "Staleness as Terraform sees it").
	Serial int64
	// Lineage identifies the state across all its serials; Terraform refuses
	// a saved plan made against another lineage.
	Lineage string
	// Outputs are the root module's outputs by name.
	Outputs map[string]Output
	// Resources are the state's resource entries: one per (module instance,
	// mode, type, name), each with all its instances.
	Resources []Resource
	// CheckResults is the raw "check_results" value (nil for null). Merge
	// clears it (docs/terraform.md "Snapshot-merge"): Terraform recomputes it on the
	// next plan.
	CheckResults json.RawMessage
	// Extra holds top-level fields this package does not know, raw, written
	// back after check_results in key order.
	Extra map[string]json.RawMessage
}

// Resource is one resource entry of a state: a resource in one module
// instance, with all its instances (count/for_each keys, deposed objects).
//
// Raw is the whole entry, compacted JSON, and is what Marshal writes; the
// other fields are decoded from it by Parse and must agree with it. Parse
// also caches the entry's address: to change Module, Mode, Type or Name,
// build a new Resource rather than editing a parsed one.
type Resource struct {
	Module   string // module instance path, "" for the root: `module.app["eu"].module.db`
	Mode     string // ModeManaged or ModeData
	Type     string // "terraform_data"
	Name     string // "web"
	Each     string // "", "list" or "map" (written by Terraform 0.12–0.13 only)
	Provider string // `provider["terraform.io/builtin/terraform"]`
	Raw      json.RawMessage

	addr string // ResourceAddress, set by Parse

	// noInstances is set by Parse when the entry has no instances (an
	// "instances" that is [] or null, or none at all): Terraform 1.5 writes
	// such entries for resources a failed apply never created; newer
	// releases prune them. They are not resources: Changed, Merge,
	// Addresses and ResourceCount skip them.
	noInstances bool

	// checked points at Raw's first byte and checkedLen is its length when
	// Raw is known to be valid JSON (Parse, SynthesizeTerraformData); a Raw
	// replaced since is validated again by Marshal.
	checked    *byte
	checkedLen int

	// src is the entry's bytes as written in the document Parse read it
	// from (white space and all); it stands for Raw only while Raw is the
	// one Parse checked (source). ParseWithBase compares with it.
	src []byte
}

// source is the entry's bytes in the document it was parsed from, nil when
// unknown or when Raw has been replaced since.
func (r *Resource) source() []byte {
	if !r.rawChecked() {
		return nil
	}
	return r.src
}

func (r *Resource) markChecked() {
	if len(r.Raw) > 0 {
		r.checked, r.checkedLen = &r.Raw[0], len(r.Raw)
	}
}

func (r *Resource) rawChecked() bool {
	return len(r.Raw) > 0 && r.checked == &r.Raw[0] && r.checkedLen == len(r.Raw)
}

// Address returns the entry's resource-level address (see ResourceAddress).
func (r *Resource) Address() string {
	if r.addr != "" {
		return r.addr
	}
	return ResourceAddress(r.Module, r.Mode, r.Type, r.Name)
}

// Instances returns the entry's instance objects, raw, in state order. A
// missing or null "instances" field gives none.
func (r *Resource) Instances() ([]json.RawMessage, error) {
	var v struct {
		Instances []json.RawMessage `json:"instances"`
	}
	if err := json.Unmarshal(r.Raw, &v); err != nil {
		return nil, fmt.Errorf("reading instances of %s: %w", r.Address(), err)
	}
	return v.Instances, nil
}

// Tainted returns the sorted resource-level addresses that have at least
// one instance with "status": "tainted" — an object Terraform created but
// whose creation did not finish (a failed provisioner, an interrupted
// apply); the next plan replaces it.
func (s *State) Tainted() []string {
	seen := map[string]bool{}
	for i := range s.Resources {
		r := &s.Resources[i]
		// Raw is compacted JSON: a cheap test first, the decode only for
		// the few entries that may hold a tainted instance.
		if !bytes.Contains(r.Raw, []byte(`"tainted"`)) {
			continue
		}
		insts, err := r.Instances()
		if err != nil {
			continue // Parse validated the entry; nothing to report
		}
		for _, raw := range insts {
			var inst struct {
				Status string `json:"status"`
			}
			if json.Unmarshal(raw, &inst) == nil && inst.Status == "tainted" {
				seen[r.Address()] = true
				break
			}
		}
	}
	return sortedKeys(seen)
}

// Output is one root output. Raw is the whole object, compacted JSON
// ({"value":…,"type":…,"sensitive":true}), and is what Marshal writes; Value,
// Type and Sensitive are decoded from it by Parse. Values of sensitive
// outputs are here in plain text, as in the state file.
type Output struct {
	Value     json.RawMessage
	Type      json.RawMessage
	Sensitive bool
	Raw       json.RawMessage
}

// Empty returns a state with no resources and no outputs — what Terraform
// writes for an empty configuration.
func Empty(lineage string, serial int64, terraformVersion string) *State {
	return &State{
		TerraformVersion: terraformVersion,
		Serial:           serial,
		Lineage:          lineage,
		Outputs:          map[string]Output{},
		Resources:        []Resource{},
	}
}

// ResourceCount returns the number of resource entries (one per resource
// per module instance; instances of count/for_each are not counted apart).
func (s *State) ResourceCount() int {
	n := 0
	for i := range s.Resources {
		if !s.Resources[i].noInstances {
			n++
		}
	}
	return n
}

// Addresses returns the sorted, de-duplicated resource-level addresses of
// the state's entries plus "output.NAME" for every root output — the
// changed set of a state's first version.
func (s *State) Addresses() []string {
	seen := make(map[string]struct{}, len(s.Resources)+len(s.Outputs))
	out := make([]string, 0, len(s.Resources)+len(s.Outputs))
	for i := range s.Resources {
		if s.Resources[i].noInstances {
			continue
		}
		a := s.Resources[i].Address()
		if _, ok := seen[a]; !ok {
			seen[a] = struct{}{}
			out = append(out, a)
		}
	}
	for name := range s.Outputs {
		out = append(out, OutputAddress(name))
	}
	sort.Strings(out)
	return out
}
