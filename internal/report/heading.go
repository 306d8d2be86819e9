package report

import "strings"

// heading is the Markdown heading prefix depth levels below a view's first
// heading, which is at o.HeadingLevel ("### " when 0), at most "###### "
// (Markdown has six levels).
func (o Options) heading(depth int) string {
	level := o.HeadingLevel
	if level <= 0 {
		level = 3
	}
	return strings.Repeat("#", min(level+depth, 6)) + " "
}
