package tfstate

import (
	"fmt"
	"strings"
)

// Resource modes as a state v4 entry spells them in its "mode" field.
const (
	ModeManaged = "managed"
	ModeData    = "data"
)

// OutputPrefix starts the address of a root output: "output.NAME"
// (docs/terraform.md "Plan JSON": a changed output is part of the write set).
const OutputPrefix = "output."

// ResourceAddress returns the resource-level address of a state entry, the
// way engine.ParseAddress spells it (docs/design.md "address"): the module path
// with module instance keys stripped, "data." for data sources, then type
// and name. Examples:
//
//	ResourceAddress(`module.app["x"].module.db[0]`, "managed", "terraform_data", "main")
//	    = "module.app.module.db.terraform_data.main"
//	ResourceAddress("", "data", "terraform_remote_state", "net")
//	    = "data.terraform_remote_state.net"
//
// module is a module instance path as Terraform writes it in a state entry's
// "module" field ("" for the root module); keys are numbers or HCL-quoted
// strings and may hold dots, brackets and escaped quotes. Parse rejects
// malformed module paths; for one that does not parse, ResourceAddress keeps
// the module text as it is.
func ResourceAddress(module, mode, typ, name string) string {
	mod, err := moduleCallPath(module)
	if err != nil {
		mod = module
	}
	var b strings.Builder
	b.Grow(len(mod) + len(typ) + len(name) + 7)
	if mod != "" {
		b.WriteString(mod)
		b.WriteByte('.')
	}
	if mode == ModeData {
		b.WriteString("data.")
	}
	b.WriteString(typ)
	b.WriteByte('.')
	b.WriteString(name)
	return b.String()
}

// OutputAddress returns the address of the root output name: "output.NAME".
func OutputAddress(name string) string { return OutputPrefix + name }

// moduleCallPath strips the instance keys from a module instance path
// (`module.a["x.y[0]"].module.b[2]` → "module.a.module.b") and checks its
// shape: "module.NAME" steps joined by dots, each optionally followed by one
// key, a decimal number or a double-quoted string with backslash escapes.
func moduleCallPath(m string) (string, error) {
	if m == "" {
		return "", nil
	}
	if strings.IndexByte(m, '[') < 0 {
		// No keys: only check the shape, return m itself (no allocation).
		for rest := m; ; {
			_, tail, err := moduleStep(rest, m)
			if err != nil {
				return "", err
			}
			if tail == "" {
				return m, nil
			}
			rest = tail[1:] // tail starts with '.'
		}
	}
	var b strings.Builder
	b.Grow(len(m))
	rest := m
	for {
		name, tail, err := moduleStep(rest, m)
		if err != nil {
			return "", err
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString("module.")
		b.WriteString(name)
		if strings.HasPrefix(tail, "[") {
			n, err := keyLen(tail)
			if err != nil {
				return "", fmt.Errorf("module path %q: %w", m, err)
			}
			tail = tail[n:]
		}
		if tail == "" {
			return b.String(), nil
		}
		if tail[0] != '.' {
			return "", fmt.Errorf("module path %q: unexpected %q after module %q", m, tail, name)
		}
		rest = tail[1:]
	}
}

// moduleStep reads "module.NAME" at the start of s and returns NAME and what
// follows it ("", ".…" or "[…").
func moduleStep(s, whole string) (name, tail string, err error) {
	if !strings.HasPrefix(s, "module.") {
		return "", "", fmt.Errorf("module path %q: want \"module.NAME\" at %q", whole, s)
	}
	s = s[len("module."):]
	i := strings.IndexAny(s, ".[]\" \t\n")
	if i < 0 {
		i = len(s)
	}
	if i == 0 {
		return "", "", fmt.Errorf("module path %q: empty module name", whole)
	}
	if i < len(s) && s[i] != '.' && s[i] != '[' {
		return "", "", fmt.Errorf("module path %q: unexpected %q in a module name", whole, s[i])
	}
	return s[:i], s[i:], nil
}

// keyLen returns the length of the instance key at the start of s
// ("[0]", `["a.b"]`, `["q\"x"]`), brackets included.
func keyLen(s string) (int, error) {
	if len(s) < 3 {
		return 0, fmt.Errorf("truncated instance key %q", s)
	}
	if s[1] == '"' {
		for i := 2; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++ // skip the escaped character
			case '"':
				if i+1 < len(s) && s[i+1] == ']' {
					return i + 2, nil
				}
				return 0, fmt.Errorf("instance key %q: want ']' after the closing quote", s)
			}
		}
		return 0, fmt.Errorf("unterminated instance key %q", s)
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if c == ']' && i > 1 {
			return i + 1, nil
		}
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("instance key %q: want a number or a quoted string", s)
		}
	}
	return 0, fmt.Errorf("unterminated instance key %q", s)
}
