package report

import (
	"fmt"
	"strings"

	"github.com/kilolock/kilolock/internal/plandiff"
)

// The words of a plan's diff (ADR 0044): Terraform's own, as its renderer
// writes them (terraform internal/command/jsonformat), so that a reviewer
// who knows `terraform plan` reads the same sentences.

// diffCountsWords is a diff's summary line: "2 to add, 1 to change, 1 to
// destroy, 1 to replace, 1 to import, 1 to move, 2 outputs to change",
// then, when the plan destroys anything, the flag "⚠ 1 to destroy, 1 to
// replace" — in every summary the diff appears in.
func diffCountsWords(c plandiff.Counts) sentence {
	if c.Empty() {
		return words("no changes")
	}
	var parts []string
	add := func(n int, s string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	add(c.Add, "to add")
	add(c.Change, "to change")
	add(c.Destroy, "to destroy")
	add(c.Replace, "to replace")
	add(c.Read, "to read")
	add(c.Forget, "to forget")
	add(c.Import, "to import")
	add(c.Move, "to move")
	add(c.Refresh, "changed outside Terraform, to record in the state")
	if c.Outputs > 0 {
		parts = append(parts, plural(c.Outputs, "output to change", "outputs to change"))
	}
	out := words(strings.Join(parts, ", "))
	if flag := destructiveFlag(c); flag != "" {
		out = out.add(txt(" — "), strongT(toneBad, flag))
	}
	return out
}

// destructiveFlag is "⚠ 1 to destroy, 2 to replace", or "" when the plan
// destroys nothing.
func destructiveFlag(c plandiff.Counts) string { return flagWords(c.Destroy, c.Replace) }

// flagWords is "⚠ 1 to destroy, 2 to replace" (either part left out when
// zero), or "" for none.
func flagWords(destroy, replace int) string {
	var parts []string
	if destroy > 0 {
		parts = append(parts, fmt.Sprintf("%d to destroy", destroy))
	}
	if replace > 0 {
		parts = append(parts, fmt.Sprintf("%d to replace", replace))
	}
	if len(parts) == 0 {
		return ""
	}
	return "⚠ " + strings.Join(parts, ", ")
}

// resourceHeadline is Terraform's headline of a resource change ("will be
// updated in-place", "must be replaced", "has moved to X") and its notes
// ("(because X is not in configuration)", "(imported from \"id\")",
// "(moved from X)"). subject is the address the headline is about: the
// previous one for a move alone.
func resourceHeadline(r plandiff.Resource) (subject, verb string, notes []string) {
	subject = r.Address
	if r.Deposed != "" {
		subject += " (deposed object " + r.Deposed + ")"
	}
	moved := r.PreviousAddress != ""
	if r.Drift {
		// Terraform's words for a refresh-only plan's objects.
		verb = "has changed"
		if r.Action == plandiff.Delete {
			verb = "has been deleted"
		}
		return subject, verb, nil
	}
	switch r.Action {
	case plandiff.Create:
		verb = "will be created"
	case plandiff.Read:
		verb = "will be read during apply"
	case plandiff.Update:
		verb = "will be updated in-place"
	case plandiff.Delete:
		verb = "will be destroyed"
	case plandiff.Replace:
		verb = replaceVerb(r.Reason)
	case plandiff.Forget:
		verb = "will no longer be managed by Terraform, but will not be destroyed"
	case plandiff.NoOp:
		switch {
		case r.Import != nil:
			verb = "will be imported"
		case moved:
			subject, verb, moved = r.PreviousAddress, "has moved to "+r.Address, false
		}
	default:
		verb = "will be changed (Terraform's actions: " + string(r.Action) + ")"
	}
	if r.Action == plandiff.Forget {
		notes = append(notes, "(destroy = false is set in the configuration)")
	} else if n := reasonNote(r); n != "" {
		notes = append(notes, n)
	}
	if r.Import != nil && r.Action != plandiff.NoOp {
		notes = append(notes, "(imported from "+plandiff.Quote(r.Import.ID)+")")
	}
	if moved {
		notes = append(notes, "(moved from "+r.PreviousAddress+")")
	}
	return subject, verb, notes
}

func replaceVerb(reason string) string {
	switch reason {
	case "replace_because_tainted":
		return "is tainted, so must be replaced"
	case "replace_by_request":
		return "will be replaced, as requested"
	case "replace_by_triggers":
		return "will be replaced due to changes in replace_triggered_by"
	}
	return "must be replaced"
}

// reasonNote is Terraform's note on why a resource is destroyed or read
// (its action_reason); "" when it says none. A reason this build does not
// know is named as Terraform wrote it.
func reasonNote(r plandiff.Resource) string {
	switch r.Reason {
	case "", "replace_because_tainted", "replace_by_request", "replace_by_triggers", "replace_because_cannot_update":
		return ""
	case "delete_because_no_resource_config":
		return "(because " + r.Address + " is not in configuration)"
	case "delete_because_no_module":
		return "(because " + moduleOf(r.Address) + " is not in configuration)"
	case "delete_because_wrong_repetition":
		switch {
		case strings.HasSuffix(r.Address, "]") && strings.HasSuffix(r.Address, "\"]"):
			return "(because resource does not use for_each)"
		case strings.HasSuffix(r.Address, "]"):
			return "(because resource does not use count)"
		}
		return "(because resource uses count or for_each)"
	case "delete_because_count_index":
		return "(because index " + instanceKey(r.Address) + " is out of range for count)"
	case "delete_because_each_key":
		return "(because key " + instanceKey(r.Address) + " is not in for_each map)"
	case "delete_because_no_move_target":
		return "(because " + r.PreviousAddress + " was moved to " + r.Address + ", which is not in configuration)"
	case "read_because_config_unknown":
		return "(config refers to values not yet known)"
	case "read_because_dependency_pending":
		return "(depends on a resource or a module with changes pending)"
	case "read_because_check_nested":
		return "(config will be reloaded to verify a check block)"
	}
	return "(reason: " + r.Reason + ")"
}

// instanceKey is the trailing "[…]" of an instance address.
func instanceKey(addr string) string {
	if i := strings.LastIndexByte(addr, '['); i >= 0 && strings.HasSuffix(addr, "]") {
		return addr[i:]
	}
	return "[]"
}

// moduleOf is the module instance path of an address ("module.a[0]" of
// "module.a[0].x.y"), the address itself when it has none.
func moduleOf(addr string) string {
	a, err := parseInstance(addr)
	if err != nil || a == "" {
		return addr
	}
	return a
}

// parseInstance returns the module part of an instance address: every
// "module.NAME[KEY]" step up to the resource.
func parseInstance(addr string) (string, error) {
	rest, mod := addr, ""
	for strings.HasPrefix(rest, "module.") {
		end := len("module.")
		for end < len(rest) && rest[end] != '.' && rest[end] != '[' {
			end++
		}
		if end < len(rest) && rest[end] == '[' {
			close := strings.IndexByte(rest[end:], ']')
			if close < 0 {
				return "", fmt.Errorf("unterminated key in %q", addr)
			}
			end += close + 1
		}
		if mod != "" {
			mod += "."
		}
		mod += rest[:end]
		rest = strings.TrimPrefix(rest[end:], ".")
	}
	return mod, nil
}
