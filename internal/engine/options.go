package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// PlanOptions are the Terraform plan options a plan is made with besides
// the selectors of its scope (ADR 0045): what a user passes after `--` to
// `kl plan` and `/kl plan` (internal/planopts parses them). They are kept
// in the envelope's scope, shown with it, and every re-plan of the plan
// is made with them (replanRequest). The zero value is Terraform's
// default plan: normal mode, refreshing, parallelism 10.
type PlanOptions struct {
	// Destroy is -destroy: plan to destroy every object of the state.
	Destroy bool `json:"destroy,omitempty"`
	// RefreshOnly is -refresh-only: plan only to record in the state what
	// the refresh found changed outside Terraform. The plan's write set is
	// its resource_drift (Terraform leaves resource_changes empty), and its
	// apply commits the refreshed objects.
	RefreshOnly bool `json:"refresh_only,omitempty"`
	// NoRefresh is -refresh=false: plan from the state as it is, without
	// reading the real objects first.
	NoRefresh bool `json:"no_refresh,omitempty"`
	// Parallelism is -parallelism=N, 1 to MaxParallelism: how many
	// operations Terraform runs at once, in the plan (its refresh) and in
	// the plan's apply; 0 is Terraform's default (10).
	Parallelism int `json:"parallelism,omitempty"`
	// Vars are the names of the plan's -var options, in the order first
	// given, each once. Their values are the run's secrets: kept only in
	// the plan's ArtifactVars (never in the envelope, a log or any other
	// stored row), handed to Terraform only through its environment
	// (internal/terraform, ADR 0045).
	Vars []string `json:"vars,omitempty"`
}

// MaxParallelism is the largest -parallelism kl accepts: Terraform's own
// flag is an int of any positive size; a bound keeps the value printable
// and storable everywhere (a 32-bit signed int).
const MaxParallelism = 1<<31 - 1

// Refused is the error an option Kilolock cannot honour is refused with
// (planopts: -state, -lock=false, -chdir, …): Option names the option,
// without its value ("-state"); Reason says why Kilolock cannot honour it
// and what to do instead. Error: "-state is refused: REASON".
type Refused struct {
	Option string
	Reason string
}

func (e *Refused) Error() string { return e.Option + " is refused: " + e.Reason }

// Unwrap makes a refused option an ErrInvalid.
func (e *Refused) Unwrap() error { return ErrInvalid }

// Check returns nil when o can be handed to Terraform, else an error
// wrapping ErrInvalid naming the option: -destroy and -refresh-only
// together (Terraform refuses two plan modes: "Incompatible plan mode
// options"), -refresh-only with -refresh=false (a refresh-only plan must
// refresh: terraform-exec and Terraform refuse it), a -parallelism outside
// 0..MaxParallelism, a -var name that is not a Terraform variable name
// (ValidVariableName) or given twice in Vars.
func (o PlanOptions) Check() error {
	switch {
	case o.Destroy && o.RefreshOnly:
		return Errorf(ErrInvalid, "-destroy and -refresh-only: Terraform plans in one mode at a time; choose one")
	case o.RefreshOnly && o.NoRefresh:
		return Errorf(ErrInvalid, "-refresh-only and -refresh=false: a refresh-only plan is the refresh; leave -refresh=false out")
	case o.Parallelism < 0 || o.Parallelism > MaxParallelism:
		return Errorf(ErrInvalid, "-parallelism=%d: want a whole number from 1 to %d", o.Parallelism, MaxParallelism)
	}
	seen := map[string]bool{}
	for _, n := range o.Vars {
		if err := ValidVariableName(n); err != nil {
			return Errorf(ErrInvalid, "-var: %v", err)
		}
		if seen[n] {
			return Errorf(ErrInvalid, "-var %s: named twice in the options' names", n)
		}
		seen[n] = true
	}
	return nil
}

// IsZero reports whether o is Terraform's default plan.
func (o PlanOptions) IsZero() bool {
	return !o.Destroy && !o.RefreshOnly && !o.NoRefresh && o.Parallelism == 0 && len(o.Vars) == 0
}

// Flags are o as Terraform's flags, in a fixed order, without -var:
// "-destroy", "-refresh-only", "-refresh=false", "-parallelism=N". What
// every view shows of the options, and what a re-plan command repeats.
func (o PlanOptions) Flags() []string {
	var out []string
	if o.Destroy {
		out = append(out, "-destroy")
	}
	if o.RefreshOnly {
		out = append(out, "-refresh-only")
	}
	if o.NoRefresh {
		out = append(out, "-refresh=false")
	}
	if o.Parallelism > 0 {
		out = append(out, "-parallelism="+strconv.Itoa(o.Parallelism))
	}
	return out
}

// Var is one -var NAME=VALUE of a plan. Value is a secret of the run
// (ADR 0045): Var prints, logs and encodes as JSON without it (String,
// GoString, LogValue, MarshalJSON), so that no log line or stored row
// can hold it by accident; MarshalVars and UnmarshalVars encode the values
// for ArtifactVars, the only place they are kept.
type Var struct {
	Name  string
	Value string
}

// String is "NAME=(value hidden)".
func (v Var) String() string { return v.Name + "=(value hidden)" }

// GoString is String: %#v hides the value too.
func (v Var) GoString() string { return v.String() }

// LogValue is the name alone.
func (v Var) LogValue() slog.Value { return slog.StringValue(v.String()) }

// MarshalJSON encodes the name alone: {"name":"NAME"}.
func (v Var) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Name string `json:"name"`
	}{v.Name})
}

// MaxVarBytes is the most bytes the values of one plan's -var options may
// hold together: Terraform gets them in one environment variable
// (internal/terraform: TF_CLI_ARGS_plan), and Linux refuses to start a
// program with an environment string over 128 KiB (MAX_ARG_STRLEN).
const MaxVarBytes = 64 << 10

// CheckVars returns nil when vars can be handed to Terraform, else an
// error wrapping ErrInvalid that names the variable but never quotes its
// value: a name that is not a Terraform variable name (ValidVariableName),
// a value holding a NUL byte (no environment can carry it), values over
// MaxVarBytes together.
func CheckVars(vars []Var) error {
	total := 0
	for _, v := range vars {
		if err := ValidVariableName(v.Name); err != nil {
			return Errorf(ErrInvalid, "-var: %v", err)
		}
		if strings.ContainsRune(v.Value, 0) {
			return Errorf(ErrInvalid, "-var %s: the value holds a NUL byte, which Terraform cannot be given", v.Name)
		}
		total += len(v.Value)
	}
	if total > MaxVarBytes {
		return Errorf(ErrInvalid, "-var: the values hold %d bytes together, at most %d: put large values in a var file (--var-file)", total, MaxVarBytes)
	}
	return nil
}

// VarNames are the names of vars in the order first given, each once
// (PlanOptions.Vars); nil for none.
func VarNames(vars []Var) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range vars {
		if !seen[v.Name] {
			seen[v.Name] = true
			out = append(out, v.Name)
		}
	}
	return out
}

// storedVar is one Var as ArtifactVars holds it.
type storedVar struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// MarshalVars encodes vars, values included, for ArtifactVars:
// [{"name":"NAME","value":"VALUE"},…] in order.
func MarshalVars(vars []Var) ([]byte, error) {
	out := make([]storedVar, len(vars))
	for i, v := range vars {
		out[i] = storedVar(v)
	}
	return json.Marshal(out)
}

// UnmarshalVars decodes what MarshalVars encoded. The error never quotes
// the data (it holds secrets).
func UnmarshalVars(b []byte) ([]Var, error) {
	var in []storedVar
	if err := json.Unmarshal(b, &in); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("decoding -var values: not JSON (at byte %d)", se.Offset)
		}
		return nil, errors.New("decoding -var values: not a list of names and values")
	}
	out := make([]Var, len(in))
	for i, v := range in {
		out[i] = Var(v)
	}
	return out, nil
}

// reservedVariableNames are the names Terraform refuses for a variable
// ("The variable name … is reserved due to its special meaning inside
// module blocks"; measured with Terraform 1.11.4).
var reservedVariableNames = map[string]bool{
	"source": true, "version": true, "providers": true, "provider": true, "count": true,
	"for_each": true, "lifecycle": true, "depends_on": true, "locals": true,
}

// ValidVariableName returns nil when name can be a Terraform input
// variable's name — an HCL identifier (a letter or underscore, then
// letters, digits, underscores and hyphens) that Terraform does not reserve
// (count, for_each, source, …) — and otherwise an error saying what is
// wrong. TF_VAR_NAME and -var NAME=… reach a variable only when NAME is
// such a name.
func ValidVariableName(name string) error {
	switch {
	case name == "":
		return errors.New("the variable name is empty")
	case !hclsyntax.ValidIdentifier(name):
		return fmt.Errorf("%q is not a Terraform variable name (a letter or underscore, then letters, digits, underscores or hyphens)", name)
	case reservedVariableNames[name]:
		return fmt.Errorf("%q is reserved by Terraform: no variable can have that name", name)
	}
	return nil
}
