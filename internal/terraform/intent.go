package terraform

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/kilolock/kilolock/internal/engine"
)

// UnknownValue is what an unknown planned value ("known after apply") is
// replaced with before an intent digest is taken: two plans whose values are
// both unknown at one place compare equal there (docs/design.md "intent").
const UnknownValue = "(known after apply)"

// ExtractIntent returns what a plan would do, for comparing a re-plan with
// the reviewed plan (docs/design.md "intent"; ADR D4).
//
// Changes is keyed by instance address (resource_changes[].address, with
// " (deposed KEY)" appended for a deposed object) for every change that
// writes state — any action other than no-op, a move (PreviousAddress set,
// even when no-op) or an import — and by "output.NAME" for every root output
// change that is not no-op. Actions are Terraform's. AfterDigest is
// "sha256:<hex>" of the canonical JSON of `after` in which every value
// marked in `after_unknown` (which mirrors after's structure) is replaced by
// UnknownValue; canonical JSON is encoding/json of the decoded value (object
// keys sorted) with numbers written in shortest exact form. Only digests are
// kept, since planned values hold secrets. resource_drift (refresh-only
// differences) is not intent — but for a refresh-only plan, whose
// resource_changes are empty, it is all it does: its caller passes
// RefreshOnlyView(plan) (ADR 0045). Errors wrap engine.ErrInvalid for a
// nil plan.
func ExtractIntent(plan *tfjson.Plan) (engine.Intent, error) {
	if plan == nil {
		return engine.Intent{}, engine.Errorf(engine.ErrInvalid, "extracting intent: no plan")
	}
	in := engine.Intent{Changes: map[string]engine.IntentChange{}}
	for _, rc := range plan.ResourceChanges {
		if rc == nil || !isWrite(rc) {
			continue
		}
		key := rc.Address
		if rc.DeposedKey != "" {
			key += " (deposed " + rc.DeposedKey + ")"
		}
		ic, err := intentChange(rc.Change)
		if err != nil {
			return engine.Intent{}, fmt.Errorf("extracting intent of %s: %w", key, err)
		}
		ic.PreviousAddress = rc.PreviousAddress
		in.Changes[key] = ic
	}
	for name, ch := range plan.OutputChanges {
		if ch != nil && ch.Actions.NoOp() {
			continue
		}
		ic, err := intentChange(ch)
		if err != nil {
			return engine.Intent{}, fmt.Errorf("extracting intent of output.%s: %w", name, err)
		}
		in.Changes["output."+name] = ic
	}
	return in, nil
}

func intentChange(ch *tfjson.Change) (engine.IntentChange, error) {
	if ch == nil {
		ch = &tfjson.Change{}
	}
	actions := make([]string, len(ch.Actions))
	for i, a := range ch.Actions {
		actions[i] = string(a)
	}
	d, err := afterDigest(ch.After, ch.AfterUnknown)
	if err != nil {
		return engine.IntentChange{}, err
	}
	return engine.IntentChange{Actions: actions, AfterDigest: d}, nil
}

// afterDigest hashes after with unknowns marked.
func afterDigest(after, unknown any) (string, error) {
	b, err := json.Marshal(canonical(after, unknown))
	if err != nil {
		return "", fmt.Errorf("encoding planned values: %w", err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// canonical merges v with its unknown mask u (true: unknown; an object or
// array: per key or element; false or absent: known) and normalizes
// numbers. A key or element marked unknown but absent from v is added.
func canonical(v, u any) any {
	if b, ok := u.(bool); ok && b {
		return UnknownValue
	}
	switch uu := u.(type) {
	case map[string]any:
		m, _ := v.(map[string]any)
		if m == nil && !hasUnknown(uu) {
			return canonical(v, nil)
		}
		out := make(map[string]any, len(m)+len(uu))
		for k, x := range m {
			out[k] = canonical(x, uu[k])
		}
		for k, x := range uu {
			if _, ok := m[k]; !ok && hasUnknown(x) {
				out[k] = canonical(nil, x)
			}
		}
		return out
	case []any:
		s, _ := v.([]any)
		if s == nil && !hasUnknown(uu) {
			return canonical(v, nil)
		}
		n := len(s)
		if len(uu) > n {
			n = len(uu)
		}
		out := make([]any, n)
		for i := range out {
			var x, ux any
			if i < len(s) {
				x = s[i]
			}
			if i < len(uu) {
				ux = uu[i]
			}
			out[i] = canonical(x, ux)
		}
		return out
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, y := range x {
			out[k] = canonical(y, nil)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, y := range x {
			out[i] = canonical(y, nil)
		}
		return out
	case json.Number:
		return canonicalNumber(string(x))
	case float64:
		return json.RawMessage(new(big.Float).SetFloat64(x).Text('g', -1))
	}
	return v
}

func hasUnknown(u any) bool {
	switch x := u.(type) {
	case bool:
		return x
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if hasUnknown(x[k]) {
				return true
			}
		}
	case []any:
		for _, y := range x {
			if hasUnknown(y) {
				return true
			}
		}
	}
	return false
}

// canonicalNumber writes a JSON number in the shortest form that reads back
// to the same value at 512 bits, so "1e3", "1000" and 1000.0 hash alike.
func canonicalNumber(s string) any {
	f, ok := new(big.Float).SetPrec(512).SetString(s)
	if !ok || f.IsInf() {
		return s
	}
	return json.RawMessage(f.Text('g', -1))
}
