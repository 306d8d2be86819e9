package report

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Truncate cuts Markdown md to at most limit bytes for GitHub
// (docs/github.md: a check run's summary holds 65535 characters, a
// comment 65536; bytes are never fewer than the characters GitHub counts,
// so a byte limit is safe).
//
// It keeps the summary — everything up to the summary-end marker the
// renderers write — and cuts whole lines from the end, closing any
// <details> or code fence left open, then appends the note
// "… N more lines omitted; see `CMD`", where CMD is the command named by
// the document's "kilolock:more" marker (`kl run show RUN` for run
// reports), or "… N more lines omitted" for a document without one (a
// notice names no run). md is returned unchanged when it fits. Only when the summary
// alone does not fit is the summary itself cut, line by line; a single
// line longer than limit is cut at a rune boundary.
func Truncate(md string, limit int) string {
	if len(md) <= limit {
		return md
	}
	if limit <= 0 {
		return ""
	}
	lines := strings.SplitAfter(md, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	more := ""
	for _, l := range lines {
		if strings.HasPrefix(l, mdMore) {
			more = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(strings.TrimPrefix(l, mdMore)), "-->"))
			break
		}
	}
	note := func(n int) string {
		if more == "" {
			return fmt.Sprintf("\n… %d more lines omitted\n", n)
		}
		return fmt.Sprintf("\n… %d more lines omitted; see `%s`\n", n, more)
	}

	// Walk forward keeping lines while the kept text, the closers it needs
	// and the note all fit; the best cut is the last one that fits. The
	// summary comes first, so it is kept whenever it fits at all.
	best, size := -1, 0
	var st blockState
	for k := 0; k <= len(lines); k++ {
		if size+len(st.closers())+len(note(len(lines)-k)) <= limit {
			best = k
		}
		if k == len(lines) {
			break
		}
		size += len(lines[k])
		if size > limit {
			break
		}
		st.step(lines[k])
	}
	if best <= 0 {
		// Not even one line fits with the note: cut the first line.
		n := note(len(lines))
		if len(n) >= limit {
			return cutRunes(md, limit)
		}
		return cutRunes(lines[0], limit-len(n)) + n
	}
	// Do not end on a dangling heading or blank line below the summary.
	summaryEnd := 0
	for i, l := range lines {
		if strings.TrimSpace(l) == mdSummaryEnd {
			summaryEnd = i + 1
			break
		}
	}
	for best > summaryEnd {
		t := strings.TrimSpace(lines[best-1])
		if t != "" && !strings.HasPrefix(t, "#") {
			break
		}
		best--
	}
	st = blockState{}
	for _, l := range lines[:best] {
		st.step(l)
	}
	return strings.Join(lines[:best], "") + st.closers() + note(len(lines)-best)
}

// blockState tracks the Markdown blocks a cut would leave open.
type blockState struct {
	details int  // <details> opened and not closed
	fence   bool // inside a ``` fence
}

func (s *blockState) step(line string) {
	t := strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(t, "```"):
		s.fence = !s.fence
	case !s.fence && strings.HasPrefix(t, "<details"):
		s.details++
	case !s.fence && strings.HasPrefix(t, "</details>") && s.details > 0:
		s.details--
	}
}

// closers closes what is open, innermost first.
func (s blockState) closers() string {
	out := ""
	if s.fence {
		out += "```\n"
	}
	return out + strings.Repeat("\n</details>\n", s.details)
}

// cutRunes returns the longest prefix of s of at most n bytes that ends on
// a rune boundary.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
