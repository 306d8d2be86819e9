package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// Output is one root output of a version (`kl state output`): its name,
// value and type as the state holds them (JSON, as `terraform output
// -json`), and whether it is sensitive. Value is nil for a sensitive
// output whose value was withheld (Outputs without Reveal).
type Output struct {
	Name      string          `json:"name"`
	Value     json.RawMessage `json:"value,omitempty"`
	Type      json.RawMessage `json:"type"`
	Sensitive bool            `json:"sensitive"`
}

// Outputs are the root outputs of version Serial of State, by name.
type Outputs struct {
	State   string   `json:"state"`
	Serial  int64    `json:"serial"`
	Outputs []Output `json:"outputs"`
}

// OutputsInput asks for the outputs of a version: of State at Serial (< 0:
// the head); Name "" for all of them, else that one; Reveal gives a
// sensitive value of one named output (`--raw`, as `terraform output
// -raw`), which is never given otherwise.
type OutputsInput struct {
	State  string
	Serial int64
	Name   string
	Reveal bool
}

// Outputs reads the root outputs of a version (read-only: no run, no
// reservation). Sensitive values are withheld (Output.Value nil) unless
// in.Reveal names one output. Errors: Pull's (unknown state or version);
// ErrNotFound for an output name the version does not have, naming those
// it has; ErrInvalid for Reveal without a Name.
func (e *Engine) Outputs(ctx context.Context, in OutputsInput) (*Outputs, error) {
	if in.Reveal && in.Name == "" {
		return nil, Errorf(ErrInvalid, "outputs of state %s: a sensitive value is given for one named output only", in.State)
	}
	doc, v, err := e.Pull(ctx, in.State, in.Serial)
	if err != nil {
		return nil, err
	}
	st, err := tfstate.Parse(doc)
	if err != nil {
		return nil, fmt.Errorf("parsing version %d of state %s: %w", v.Serial, in.State, err)
	}
	out := &Outputs{State: in.State, Serial: v.Serial, Outputs: []Output{}}
	names := make([]string, 0, len(st.Outputs))
	for n := range st.Outputs {
		names = append(names, n)
	}
	sort.Strings(names)
	if in.Name != "" {
		if _, ok := st.Outputs[in.Name]; !ok {
			has := "none"
			if len(names) > 0 {
				has = strings.Join(names, ", ")
			}
			return nil, Errorf(ErrNotFound, "version %d of state %s has no output %q (its outputs: %s)", v.Serial, in.State, in.Name, has)
		}
		names = []string{in.Name}
	}
	for _, n := range names {
		o := st.Outputs[n]
		x := Output{Name: n, Value: o.Value, Type: o.Type, Sensitive: o.Sensitive}
		if o.Sensitive && !in.Reveal {
			x.Value = nil
		}
		out.Outputs = append(out.Outputs, x)
	}
	return out, nil
}
