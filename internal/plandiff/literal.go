package plandiff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Literal renders a known value (Value.JSON) as Terraform prints it: a
// string quoted (Quote), a number as written, true, false, null, {} or [].
// A non-empty object or array — which Build never puts in a Value — is
// written as compact JSON with its strings quoted the same way.
func Literal(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "null"
	}
	switch t[0] {
	case '"':
		var s string
		if json.Unmarshal(t, &s) == nil {
			return Quote(s)
		}
	case '{', '[':
		dec := json.NewDecoder(bytes.NewReader(t))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) == nil {
			var b strings.Builder
			writeLiteral(&b, v)
			return b.String()
		}
	}
	return string(t)
}

func writeLiteral(b *strings.Builder, v any) {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{ ")
		for i, k := range sortedKeys(x) {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(KeyLiteral(k) + " = ")
			writeLiteral(b, x[k])
		}
		b.WriteString(" }")
	case []any:
		b.WriteString("[")
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeLiteral(b, e)
		}
		b.WriteString("]")
	case string:
		b.WriteString(Quote(x))
	case nil:
		b.WriteString("null")
	default:
		fmt.Fprint(b, x)
	}
}

// KeyLiteral renders an attribute name or map key: bare when it is an
// identifier (HCL: a letter or underscore, then letters, digits,
// underscores and dashes), quoted otherwise (`"with space"`).
func KeyLiteral(k string) string {
	if identifier(k) {
		return k
	}
	return Quote(k)
}

func identifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || unicode.IsLetter(r) && r < utf8.RuneSelf:
		case i > 0 && (r == '-' || r >= '0' && r <= '9'):
		default:
			return false
		}
	}
	return true
}

// Quote quotes s as an HCL string literal, the way Terraform prints one:
// backslash escapes for `"`, `\`, newline, carriage return and tab, `$${`
// and `%%{` for template sequences, and \uNNNN (\UNNNNNNNN) for every other
// rune that is not printable (unicode.IsPrint, with the ASCII space) — so a
// value can neither drive a terminal (ESC), fake a line (a newline), hide
// text (a zero-width space) nor reorder it (a bidirectional override,
// CVE-2021-42574). An invalid UTF-8 byte is written as \uFFFD.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\uFFFD`)
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case (r == '$' || r == '%') && strings.HasPrefix(s[i+size:], "{"):
			b.WriteRune(r)
			b.WriteRune(r)
		case r != ' ' && !unicode.IsPrint(r):
			if r > 0xFFFF {
				fmt.Fprintf(&b, `\U%08X`, r)
			} else {
				fmt.Fprintf(&b, `\u%04X`, r)
			}
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
	return b.String()
}
