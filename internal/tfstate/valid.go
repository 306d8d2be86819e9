package tfstate

import "encoding/binary"

// A checking compactor: one pass over a JSON value that both validates it
// and appends it without insignificant white space, so that Parse reads a
// document once instead of running json.Valid over it and then splitting
// it (issue 16's bench: json.Valid was half of the parse). It accepts
// exactly what encoding/json's json.Valid accepts (FuzzAppendValid checks
// the two against each other): RFC 8259 values; strings without control
// characters below U+0020, with the escapes \" \\ \/ \b \f \n \r \t and
// \uXXXX, invalid UTF-8 let through as json.Valid lets it through; numbers
// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?; true, false, null; at most
// maxDepth nested arrays and objects (encoding/json's limit). Strings and
// numbers are copied byte for byte, as json.Compact copies them.

// maxDepth is encoding/json's nesting limit (its scanner's maxNestingDepth):
// json.Valid refuses a document nesting more arrays and objects than this.
const maxDepth = 10000

const (
	ones  = 0x0101010101010101 // 0x01 in every byte
	highs = 0x8080808080808080 // 0x80 in every byte
)

// plainWord reports whether none of the 8 bytes of x is '"', '\\' or a
// control character below 0x20: the word needs no look inside a string.
// (x−ones·n) &^ x & highs is non-zero exactly when some byte of x is below
// n, for n ≤ 0x80 (Hacker's Delight 6-1; Anderson's Bit Twiddling Hacks,
// "hasless"); a byte equal to c is a zero byte of x ^ ones·c.
func plainWord(x uint64) bool {
	q := x ^ (ones * '"')
	s := x ^ (ones * '\\')
	return ((q-ones)&^q|(s-ones)&^s|(x-ones*0x20)&^x)&highs == 0
}

// validStringEnd returns the index just past the JSON string starting at
// b[i] == '"', and whether it is a valid string (see the grammar above).
// It reads 8 bytes at a time until one of them needs a look.
func validStringEnd(b []byte, i int) (int, bool) {
	j := i + 1
	for {
		for j+8 <= len(b) && plainWord(binary.LittleEndian.Uint64(b[j:])) {
			j += 8
		}
		if j >= len(b) {
			return len(b), false
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1, true
		case c == '\\':
			n := escapeLen(b[j+1:])
			if n == 0 {
				return j, false
			}
			j += 1 + n
		case c < 0x20:
			return j, false
		default:
			j++
		}
	}
}

// escapeLen is the length of the valid escape at the start of b (what
// follows a backslash), 0 when there is none.
func escapeLen(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	switch b[0] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 1
	case 'u':
		if len(b) < 5 {
			return 0
		}
		for _, c := range b[1:5] {
			if !isHex(c) {
				return 0
			}
		}
		return 5
	}
	return 0
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// validNumberEnd returns the index just past the JSON number starting at
// b[i] ('-' or a digit), and whether it is a valid number. What follows it
// is the caller's to check (json.Valid refuses "01" at the '1').
func validNumberEnd(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digitsEnd(b, i+1)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		if i++; i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		i = digitsEnd(b, i)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		if i++; i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return i, false
		}
		i = digitsEnd(b, i)
	}
	return i, true
}

func digitsEnd(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

// literalAt reports whether b holds lit (true, false, null) at i.
func literalAt(b []byte, i int, lit string) bool {
	return len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit
}

// appendValid checks the JSON value that starts at b[i] (after any white
// space), nested in depth arrays and objects already, and appends it
// compacted to dst. It returns dst, the index just past the value and
// whether the value is valid; when it is an object, spans gets its
// members' spans (offsets into dst; see span), as Parse reads an entry's
// fields from them. On false, dst and spans hold a part of the value.
func appendValid(dst, b []byte, i int, spans []span, depth int) ([]byte, int, []span, bool) {
	var open [16]bool // the open containers, true for an object
	stack := open[:0]
	ok := true
	for {
		// A value starts at i.
		if i = skipSpace(b, i); i >= len(b) {
			return dst, i, spans, false
		}
		switch c := b[i]; c {
		case '{', '[':
			if depth+len(stack)+1 > maxDepth {
				return dst, i, spans, false
			}
			dst = append(dst, c)
			if i = skipSpace(b, i+1); i < len(b) && b[i] == c+2 { // '}' is '{'+2, ']' is '['+2
				dst = append(dst, b[i])
				i++
				break
			}
			stack = append(stack, c == '{')
			if c == '{' {
				if dst, i, spans, ok = appendKey(dst, b, i, spans, len(stack) == 1); !ok {
					return dst, i, spans, false
				}
			}
			continue
		case '"':
			e, ok := validStringEnd(b, i)
			if !ok {
				return dst, e, spans, false
			}
			dst, i = append(dst, b[i:e]...), e
		case 't', 'f', 'n':
			lit := "null"
			switch c {
			case 't':
				lit = "true"
			case 'f':
				lit = "false"
			}
			if !literalAt(b, i, lit) {
				return dst, i, spans, false
			}
			dst, i = append(dst, lit...), i+len(lit)
		default:
			if c != '-' && !isDigit(c) {
				return dst, i, spans, false
			}
			e, ok := validNumberEnd(b, i)
			if !ok {
				return dst, e, spans, false
			}
			dst, i = append(dst, b[i:e]...), e
		}
		if dst, i, stack, spans, ok = closeValue(dst, b, i, stack, spans); !ok || len(stack) == 0 {
			return dst, i, spans, ok
		}
	}
}

// closeValue is appendValid's step after a value: it closes the containers
// that end at b[i] and reads the comma and, in an object, the key before
// the next value. It returns with an empty stack when the outermost value
// has ended.
func closeValue(dst, b []byte, i int, stack []bool, spans []span) ([]byte, int, []bool, []span, bool) {
	for len(stack) > 0 {
		if i = skipSpace(b, i); i >= len(b) {
			return dst, i, stack, spans, false
		}
		obj, c := stack[len(stack)-1], b[i]
		outer := len(stack) == 1 && obj && len(spans) > 0
		switch {
		case c == ',':
			if outer {
				spans[len(spans)-1].v1 = len(dst)
			}
			dst = append(dst, ',')
			if !obj {
				return dst, i + 1, stack, spans, true
			}
			var ok bool
			dst, i, spans, ok = appendKey(dst, b, i+1, spans, len(stack) == 1)
			return dst, i, stack, spans, ok
		case obj && c == '}', !obj && c == ']':
			if outer {
				spans[len(spans)-1].v1 = len(dst)
			}
			dst = append(dst, c)
			i++
			stack = stack[:len(stack)-1]
		default:
			return dst, i, stack, spans, false
		}
	}
	return dst, i, stack, spans, true
}

// appendKey reads an object member's key and the colon after it (white
// space first), appending both; record adds the key's span.
func appendKey(dst, b []byte, i int, spans []span, record bool) ([]byte, int, []span, bool) {
	if i = skipSpace(b, i); i >= len(b) || b[i] != '"' {
		return dst, i, spans, false
	}
	e, ok := validStringEnd(b, i)
	if !ok {
		return dst, e, spans, false
	}
	if record {
		spans = append(spans, span{k0: len(dst), k1: len(dst) + e - i})
	}
	dst = append(dst, b[i:e]...)
	if i = skipSpace(b, e); i >= len(b) || b[i] != ':' {
		return dst, i, spans, false
	}
	return append(dst, ':'), i + 1, spans, true
}
