package engine

import "sort"

// Intent is what a plan would do, for comparing a re-plan with the reviewed
// plan (docs/design.md "intent"): per written instance its actions and a digest of
// its known planned values (an unknown value compares as "unknown"), plus the
// changed root outputs. Refresh-only differences, log text and JSON key order
// are not intent. Only digests are kept: planned values hold secrets.
type Intent struct {
	// Changes is keyed by instance address ("module.a.terraform_data.x[0]")
	// or "output.NAME"; no-op entries are left out.
	Changes map[string]IntentChange `json:"changes"`
}

// IntentChange is one planned change: Terraform's actions ("create",
// "update", "delete", "read"; a replace is two) and "sha256:<hex>" of the
// canonical planned values with unknowns marked.
type IntentChange struct {
	Actions     []string `json:"actions"`
	AfterDigest string   `json:"after_digest"`
	// PreviousAddress is set for a move.
	PreviousAddress string `json:"previous_address,omitempty"`
}

// Diff returns the instance addresses whose intent differs between i and o
// (present in one only, other actions, other planned values), sorted.
func (i Intent) Diff(o Intent) []string {
	var out []string
	for k, a := range i.Changes {
		b, ok := o.Changes[k]
		if !ok || !a.equal(b) {
			out = append(out, k)
		}
	}
	for k := range o.Changes {
		if _, ok := i.Changes[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func (a IntentChange) equal(b IntentChange) bool {
	if len(a.Actions) != len(b.Actions) || a.AfterDigest != b.AfterDigest || a.PreviousAddress != b.PreviousAddress {
		return false
	}
	for i := range a.Actions {
		if a.Actions[i] != b.Actions[i] {
			return false
		}
	}
	return true
}
