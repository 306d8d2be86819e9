package engine

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// TextProblem says what makes s unfit to be stored and printed later on
// other people's terminals and pull requests — actors, reasons, state and
// project names, dirs — or "" when it is fine: invalid UTF-8, a control
// character (an escape sequence recolours or rewrites a terminal, a newline
// breaks a table), a bidirectional control (it reorders what is shown, as
// in "Trojan Source", CVE-2021-42574), or any other character that is not
// printable (unicode.IsPrint: an invisible format character such as U+200B
// ZERO WIDTH SPACE makes "ali\u200bce" look like "alice"; a line or
// paragraph separator breaks a line; a space other than the ASCII one looks
// like it). kl and klbot refuse such text on input; internal/report escapes
// what an older store holds.
func TextProblem(s string) string {
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, r := range s {
		switch {
		case unicode.IsControl(r):
			return fmt.Sprintf("contains the control character %U: use printable text on one line", r)
		case unicode.Is(unicode.Bidi_Control, r):
			return fmt.Sprintf("contains the bidirectional control %U: use printable text", r)
		case unicode.In(r, unicode.Zl, unicode.Zp):
			return fmt.Sprintf("contains the line or paragraph separator %U: use printable text on one line", r)
		case unicode.IsSpace(r) && r != ' ':
			return fmt.Sprintf("contains the space character %U: use the ASCII space", r)
		case !unicode.IsPrint(r):
			return fmt.Sprintf("contains the invisible or unprintable character %U: use printable text", r)
		}
	}
	return ""
}
