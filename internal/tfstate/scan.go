package tfstate

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Byte-level helpers over JSON that is already known valid (checked by
// appendValid or json.Valid). They replace encoding/json's reflection and
// state-machine scanner on the hot paths (a 10,000-resource state is
// ~6 MB): each is one tight loop, and none of them may be called on
// unchecked input.

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// stringEnd returns the index just past the string starting at b[i] == '"'.
// It jumps from quote to quote (bytes.IndexByte) and counts the backslashes
// before each to tell an escaped quote from the closing one.
func stringEnd(b []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b)
		}
		j += k
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
}

// valueEnd returns the index just past the value starting at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}

// members calls fn for each member of the object b (b[0] == '{'), with the
// key still quoted and the value's exact span. It stops at fn's first error.
func members(b []byte, fn func(key, val []byte) error) error {
	i := skipSpace(b, 1)
	for i < len(b) && b[i] == '"' {
		ke := stringEnd(b, i)
		key := b[i:ke]
		vs := skipSpace(b, skipSpace(b, ke)+1) // past ':'
		ve := valueEnd(b, vs)
		if err := fn(key, b[vs:ve]); err != nil {
			return err
		}
		i = skipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return nil
}

// appendCompact appends b without insignificant white space; strings are
// copied byte for byte (no re-escaping), like json.Compact.
func appendCompact(dst, b []byte) []byte {
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '"':
			e := stringEnd(b, i)
			dst = append(dst, b[i:e]...)
			i = e - 1
		case isSpace(c):
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// span locates one member of a compacted object (appendValid): key at
// [k0,k1), the value at [k1+1, v1) (after the ':').
type span struct{ k0, k1, v1 int }

// appendIndent appends JSON b indented exactly as json.Indent(dst, b,
// prefix, "  ") would: a new line per element, "{}" and "[]" for empty
// ones, ": " after keys, white space outside strings dropped, strings and
// numbers copied byte for byte. b must be valid JSON.
func appendIndent(dst, b []byte, prefix string) []byte {
	depth := 0
	newline := func() {
		dst = append(dst, '\n')
		dst = append(dst, prefix...)
		for range depth {
			dst = append(dst, ' ', ' ')
		}
	}
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			e := stringEnd(b, i)
			dst = append(dst, b[i:e]...)
			i = e - 1
		case ' ', '\t', '\n', '\r':
		case '{', '[':
			dst = append(dst, c)
			if j := skipSpace(b, i+1); j < len(b) && (b[j] == '}' || b[j] == ']') {
				dst = append(dst, b[j])
				i = j
				continue
			}
			depth++
			newline()
		case '}', ']':
			depth--
			newline()
			dst = append(dst, c)
		case ',':
			dst = append(dst, c)
			newline()
		case ':':
			dst = append(dst, ':', ' ')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// unquote decodes a JSON string token (quotes included). Strings without
// escapes — nearly all keys and names — are converted directly.
func unquote(q []byte) (string, error) {
	if len(q) < 2 || q[0] != '"' {
		return "", errNotString
	}
	inner := q[1 : len(q)-1]
	plain := true
	for _, c := range inner {
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			plain = false
			break
		}
	}
	if plain {
		return string(inner), nil
	}
	var s string
	err := json.Unmarshal(q, &s)
	return s, err
}

type notStringError struct{}

func (notStringError) Error() string { return "want a string" }

var errNotString error = notStringError{}
