package plandiff

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Format is the version of the stored encoding (Marshal, Unmarshal).
// Fields are only added within a format; a change that breaks a reader
// makes a new one.
const Format = 1

// Diff is the diff of one plan: the resource instances it changes, imports
// or moves — destructive changes first (Sorted) — and the root outputs it
// changes.
type Diff struct {
	Format    int        `json:"format"`
	Resources []Resource `json:"resources"`
	// Outputs are the changed root outputs, by name; each Node's Key is the
	// output's name.
	Outputs []Node `json:"outputs"`
}

// Action is what Terraform will do to a resource instance, or to one
// attribute or element (Node.Action: create, update, delete, no-op).
type Action string

// Actions. A resource's no-op is listed only when it moves or is imported.
// An action combination Terraform adds later is kept as its keywords
// joined by "+" ("create+forget").
const (
	Create  Action = "create"
	Update  Action = "update"
	Delete  Action = "delete"
	Replace Action = "replace"
	Read    Action = "read"
	Forget  Action = "forget"
	NoOp    Action = "no-op"
)

// Resource is one resource instance's change (a resource_changes entry).
type Resource struct {
	// Address is the instance address ("module.app.terraform_data.web[0]").
	Address string `json:"address"`
	// PreviousAddress is where the instance was before a move (a moved
	// block): Terraform moves it besides Action.
	PreviousAddress string `json:"previous_address,omitempty"`
	// Deposed names a deposed object (create_before_destroy left it):
	// Action is then Delete.
	Deposed string `json:"deposed,omitempty"`
	Mode    string `json:"mode"` // "managed" or "data"
	Type    string `json:"type"`
	Name    string `json:"name"`
	Action  Action `json:"action"`
	// CreateFirst is set for a Replace that creates the new object before
	// destroying the old one (create_before_destroy: actions
	// ["create","delete"]).
	CreateFirst bool `json:"create_first,omitempty"`
	// Reason is Terraform's action_reason keyword, as it wrote it
	// ("replace_because_cannot_update", "delete_because_no_resource_config").
	Reason string `json:"reason,omitempty"`
	// Import is set when the plan imports the object (change.importing).
	Import *Import `json:"import,omitempty"`
	// ReplacePaths are the attribute paths that force the replacement
	// (change.replace_paths); the Nodes at those paths have
	// ForcesReplacement set.
	ReplacePaths []Path `json:"replace_paths,omitempty"`
	// Changes are the top-level attributes that change (and, for an update,
	// a replacement or a move, the id and name that identify the object),
	// by name.
	Changes []Node `json:"changes"`
	// Unchanged counts the top-level attributes hidden because they do not
	// change (null ones not counted, as Terraform counts them).
	Unchanged int `json:"unchanged,omitempty"`
	// Drift is set when the change was made outside Terraform (a
	// resource_drift entry of a refresh-only plan: Options.RefreshOnly):
	// Action is what the refresh found (Update: it changed; Delete: it is
	// gone), which the plan's apply records in the state without touching
	// the object.
	Drift bool `json:"drift,omitempty"`
}

// Import is an import of an existing object.
type Import struct {
	ID string `json:"id,omitempty"` // the import id ("" when imported by identity)
}

// Node is one changed attribute, map entry or array element, or a
// context line (Action NoOp: an unchanged id or name shown to identify the
// object). A leaf has Before and/or After; a container (Kind "object" or
// "array") has Changes and Unchanged, and Before or After only when that
// side is not a container of its kind (null, unknown, or another value:
// "{…} -> (known after apply)").
type Node struct {
	// Key is the attribute name, map key or output name; Index the array
	// element's position (in After, or in Before for a removed element).
	// Exactly one is set.
	Key   *string `json:"key,omitempty"`
	Index *int    `json:"index,omitempty"`
	// Action is Create (null or absent before), Delete (null or absent
	// after), Update or NoOp.
	Action Action `json:"action"`
	// Kind is "object" (an object or a map) or "array" (a list, a set or a
	// tuple) for a container; "" for a leaf.
	Kind   string `json:"kind,omitempty"`
	Before *Value `json:"before,omitempty"`
	After  *Value `json:"after,omitempty"`
	// Changes are a container's changed children: keys sorted, elements in
	// order.
	Changes []Node `json:"changes,omitempty"`
	// Unchanged counts a container's children hidden because they do not
	// change.
	Unchanged int `json:"unchanged,omitempty"`
	// ForcesReplacement marks an attribute that forces the resource's
	// replacement (Resource.ReplacePaths).
	ForcesReplacement bool `json:"forces_replacement,omitempty"`
}

// Value is one side of a leaf: a known value (a string, number, bool,
// null, or an empty object or array), or unknown until apply, or sensitive
// — whose value is never kept.
type Value struct {
	JSON      json.RawMessage `json:"value,omitempty"`
	Unknown   bool            `json:"unknown,omitempty"`
	Sensitive bool            `json:"sensitive,omitempty"`
}

// Path is an attribute path: keys (strings) and array indices (numbers),
// as Terraform writes replace_paths.
type Path []Step

// Step is one step of a Path: a key, or (IsIndex) an index.
type Step struct {
	Key     string
	Index   int
	IsIndex bool
}

// MarshalJSON writes a key as a string and an index as a number.
func (s Step) MarshalJSON() ([]byte, error) {
	if s.IsIndex {
		return json.Marshal(s.Index)
	}
	return json.Marshal(s.Key)
}

// UnmarshalJSON reads a string as a key and a number as an index.
func (s *Step) UnmarshalJSON(b []byte) error {
	var k string
	if err := json.Unmarshal(b, &k); err == nil {
		*s = Step{Key: k}
		return nil
	}
	var i int
	if err := json.Unmarshal(b, &i); err != nil {
		return fmt.Errorf("path step %s: want a string or an integer", b)
	}
	*s = Step{Index: i, IsIndex: true}
	return nil
}

// String renders p as Terraform writes a traversal: `settings.labels["env"]`,
// `rule[0].port`.
func (p Path) String() string {
	var b bytes.Buffer
	for i, s := range p {
		switch {
		case s.IsIndex:
			fmt.Fprintf(&b, "[%d]", s.Index)
		case identifier(s.Key) && i == 0:
			b.WriteString(s.Key)
		case identifier(s.Key):
			b.WriteString("." + s.Key)
		default:
			b.WriteString("[" + Quote(s.Key) + "]")
		}
	}
	return b.String()
}

// Counts are a diff's changes per resource instance, as Terraform counts
// them in its "Plan:" line except that a replacement is counted once as
// Replace (not as one add and one destroy). Import and Move count besides
// the action; Outputs counts changed root outputs.
type Counts struct {
	Add, Change, Destroy, Replace, Import, Move, Read, Forget, Outputs int
	// Refresh counts the resources changed or gone outside Terraform that
	// a refresh-only plan records (Resource.Drift), counted only here.
	Refresh int
}

// Counts counts d's changes.
func (d *Diff) Counts() Counts {
	var c Counts
	if d == nil {
		return c
	}
	for _, r := range d.Resources {
		if r.Drift {
			c.Refresh++
			continue
		}
		switch r.Action {
		case Create:
			c.Add++
		case Update:
			c.Change++
		case Delete:
			c.Destroy++
		case Replace:
			c.Replace++
		case Read:
			c.Read++
		case Forget:
			c.Forget++
		}
		if r.Import != nil {
			c.Import++
		}
		if r.PreviousAddress != "" {
			c.Move++
		}
	}
	c.Outputs = len(d.Outputs)
	return c
}

// Empty reports whether c counts nothing.
func (c Counts) Empty() bool { return c == Counts{} }

// Destructive reports whether r destroys an object: a delete or a
// replacement — not one the refresh found gone (Drift), which the plan
// only records.
func (r Resource) Destructive() bool { return !r.Drift && (r.Action == Delete || r.Action == Replace) }

// Destructive returns d's deletes and replacements, in d's order (which
// Build puts first).
func (d *Diff) Destructive() []Resource {
	if d == nil {
		return nil
	}
	var out []Resource
	for _, r := range d.Resources {
		if r.Destructive() {
			out = append(out, r)
		}
	}
	return out
}

// ErrFormat is returned by Unmarshal for a document of another format.
var ErrFormat = errors.New("unsupported plan diff format")

// Marshal encodes d for storage (compact JSON).
func Marshal(d *Diff) ([]byte, error) {
	if d == nil {
		return nil, errors.New("encoding plan diff: no diff")
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("encoding plan diff: %w", err)
	}
	return b, nil
}

// Unmarshal decodes what Marshal wrote. A document of another Format
// wraps ErrFormat; malformed JSON is an error naming it.
func Unmarshal(b []byte) (*Diff, error) {
	var d Diff
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("decoding plan diff: %w", err)
	}
	if d.Format != Format {
		return nil, fmt.Errorf("decoding plan diff: format %d: %w (this build reads format %d)", d.Format, ErrFormat, Format)
	}
	return &d, nil
}
