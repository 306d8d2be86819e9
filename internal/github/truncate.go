package github

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// TruncateFunc cuts Markdown md to at most limit bytes, keeping its
// beginning. report.Truncate is one (it keeps the report's summary).
type TruncateFunc func(md string, limit int) string

// CutLines is the default TruncateFunc: it keeps whole lines from the
// start and appends a note saying how many lines were cut. A first line
// longer than the limit is cut at a rune boundary.
func CutLines(md string, limit int) string {
	if len(md) <= limit {
		return md
	}
	if limit <= 0 {
		return ""
	}
	lines := strings.SplitAfter(md, "\n")
	note := func(n int) string { return fmt.Sprintf("\n\n… %d more lines cut (GitHub's size limit)\n", n) }
	size := 0
	for i, l := range lines {
		if size+len(l)+len(note(len(lines)-i-1)) > limit {
			n := note(len(lines) - i)
			if i == 0 {
				if len(n) >= limit {
					return cutBytes(md, limit)
				}
				return cutBytes(l, limit-len(n)) + n
			}
			return strings.Join(lines[:i], "") + n
		}
		size += len(l)
	}
	return cutBytes(md, limit) // unreachable: md is longer than limit
}

// cutBytes returns the longest prefix of s of at most n bytes ending on a
// rune boundary.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// fit makes s hold at most limit characters (GitHub counts characters):
// unchanged when it fits, else cut by the client's TruncateFunc to limit
// bytes (bytes ≥ characters, so the result fits) and, should a
// TruncateFunc overshoot, cut hard.
func (c *Client) fit(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	out := c.o.Truncate(s, limit)
	if utf8.RuneCountInString(out) > limit {
		out = cutBytes(out, limit)
	}
	return out
}
