package plandiff_test

import (
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/kilolock/kilolock/internal/plandiff"
)

// Reading Terraform's own rendering of a plan (`terraform show -no-color
// PLANFILE`) for the attribute paths it prints as changed, to check that
// the diff has every one of them.

var (
	// "  # ADDR will be updated in-place", "  # ADDR has moved to NEW",
	// "  # ADDR (deposed object K) will be destroyed".
	reShowHeader = regexp.MustCompile(`^\s*# (\S+)(?: \(deposed object \S+\))? (?:will|must|is|has moved to (\S+))`)
	reShowBlock  = regexp.MustCompile(`^\s*(?:[-+~/<=.]+\s+)?(?:resource|data) "`)
	reShowKV     = regexp.MustCompile(`^("(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z0-9_-]*)\s*=\s*(.*)$`)
	reShowNested = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_-]*) \{$`)
)

// showSyms are the symbols Terraform starts a changed line with.
var showSyms = []string{"-/+ ", "+/- ", "<= ", "+ ", "- ", "~ "}

// changedPaths returns, per address ("output.NAME" for a root output), the
// paths of the lines Terraform's rendering marks as changed: keys joined by
// dots, array elements and nested blocks left out of the path (Terraform
// prints neither an index nor, for a block, a key per element), "" for an
// output itself.
func changedPaths(show string) map[string][]string {
	out := map[string][]string{}
	var addr string
	var stack []string
	inBlock, outputs := false, false
	record := func(p []string) {
		a, rest := addr, p
		if outputs {
			a, rest = "output."+p[0], p[1:]
		}
		out[a] = append(out[a], strings.Join(rest, "."))
	}
	lines := strings.Split(show, "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		switch {
		case strings.HasPrefix(line, "Changes to Outputs:"):
			inBlock, outputs, stack = true, true, nil
			continue
		case !inBlock:
			if m := reShowHeader.FindStringSubmatch(line); m != nil {
				addr = m[1]
				if m[2] != "" {
					addr = m[2]
				}
			} else if reShowBlock.MatchString(line) {
				inBlock, stack = true, nil
			}
			continue
		}
		rest := strings.TrimSpace(line)
		changed := false
		for _, s := range showSyms {
			if strings.HasPrefix(rest, s) {
				rest, changed = strings.TrimSpace(rest[len(s):]), true
				break
			}
		}
		rest = strings.TrimSuffix(rest, " # forces replacement")
		switch {
		case rest == "" || strings.HasPrefix(rest, "#"):
		case strings.HasPrefix(rest, "}") || strings.HasPrefix(rest, "]"):
			if len(stack) == 0 {
				inBlock = outputs // a resource block ends; outputs go on
				continue
			}
			stack = stack[:len(stack)-1]
		case reShowNested.MatchString(rest):
			key := reShowNested.FindStringSubmatch(rest)[1]
			if changed {
				record(appendPath(stack, key))
			}
			stack = append(stack, key)
		case reShowKV.MatchString(rest):
			m := reShowKV.FindStringSubmatch(rest)
			key := m[1]
			if k, err := strconv.Unquote(key); err == nil {
				key = k
			}
			if changed {
				record(appendPath(stack, key))
			}
			v := m[2]
			switch {
			case strings.HasSuffix(v, "{") || strings.HasSuffix(v, "["):
				stack = append(stack, key)
			case strings.HasPrefix(v, "<<-"):
				end := strings.TrimPrefix(v, "<<-")
				for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), end); i++ {
				}
			}
		case rest == "{" || rest == "[":
			if changed && len(stack) > 0 {
				record(appendPath(stack))
			}
			stack = append(stack, "[]")
		default: // an array element
			if changed && len(stack) > 0 {
				record(appendPath(stack))
			}
		}
	}
	for a, ps := range out {
		out[a] = uniq(ps)
	}
	return out
}

// appendPath is stack with key, array elements ("[]") left out.
func appendPath(stack []string, keys ...string) []string {
	var p []string
	for _, s := range append(append([]string{}, stack...), keys...) {
		if s != "[]" {
			p = append(p, s)
		}
	}
	return p
}

// diffPaths returns, per address, the paths of d's nodes that change,
// spelt as changedPaths spells them.
func diffPaths(d *plandiff.Diff) map[string][]string {
	out := map[string][]string{}
	var walk func(addr string, prefix []string, ns []plandiff.Node)
	walk = func(addr string, prefix []string, ns []plandiff.Node) {
		for _, n := range ns {
			p := prefix
			if n.Key != nil {
				p = append(append([]string{}, prefix...), *n.Key)
			}
			if n.Action != plandiff.NoOp {
				out[addr] = append(out[addr], strings.Join(p, "."))
			}
			walk(addr, p, n.Changes)
		}
	}
	for _, r := range d.Resources {
		walk(r.Address, nil, r.Changes)
	}
	for _, o := range d.Outputs {
		walk("output."+*o.Key, nil, append([]plandiff.Node{}, stripKey(o)))
	}
	for a, ps := range out {
		out[a] = uniq(ps)
	}
	return out
}

// stripKey is an output's node without its name: its path is "".
func stripKey(n plandiff.Node) plandiff.Node {
	n.Key = nil
	return n
}

func uniq(ss []string) []string {
	sort.Strings(ss)
	out := ss[:0]
	for i, s := range ss {
		if i == 0 || s != ss[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// planLine reads Terraform's "Plan: 1 to import, 2 to add, 3 to change, 4
// to destroy." (zeros where it says nothing; ok false without the line).
func planLine(show string) (imp, add, change, destroy int, ok bool) {
	m := regexp.MustCompile(`Plan: (?:(\d+) to import, )?(\d+) to add, (\d+) to change, (\d+) to destroy\.`).FindStringSubmatch(show)
	if m == nil {
		return 0, 0, 0, 0, false
	}
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	return n(m[1]), n(m[2]), n(m[3]), n(m[4]), true
}
