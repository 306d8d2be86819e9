package bench

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Table is a small text table rendered as Markdown with padded columns, so
// it reads in a terminal and pastes into the README as is.
type Table struct {
	Header []string
	Rows   [][]string
}

// Add appends a row; missing cells render empty, extra cells are dropped.
func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

// Render writes the table: a header row, a separator, the rows. Cells are
// padded to the widest cell of their column (counted in runes); '|' in a
// cell is escaped.
func (t *Table) Render(w io.Writer) error {
	n := len(t.Header)
	width := make([]int, n)
	cell := func(row []string, i int) string {
		if i < len(row) {
			return strings.ReplaceAll(row[i], "|", `\|`)
		}
		return ""
	}
	for i := range n {
		width[i] = max(3, utf8.RuneCountInString(cell(t.Header, i)))
		for _, r := range t.Rows {
			width[i] = max(width[i], utf8.RuneCountInString(cell(r, i)))
		}
	}
	var b strings.Builder
	line := func(row []string) {
		b.WriteString("|")
		for i := range n {
			c := cell(row, i)
			b.WriteString(" " + c + strings.Repeat(" ", width[i]-utf8.RuneCountInString(c)) + " |")
		}
		b.WriteString("\n")
	}
	line(t.Header)
	b.WriteString("|")
	for i := range n {
		b.WriteString(" " + strings.Repeat("-", width[i]) + " |")
	}
	b.WriteString("\n")
	for _, r := range t.Rows {
		line(r)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing table: %w", err)
	}
	return nil
}
