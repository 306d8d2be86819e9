package report

import (
	"strconv"
	"strings"
	"unicode"
)

// The report model: every view builds one doc, which the text and Markdown
// renderers lay out. A doc is a title, a summary (the part Truncate always
// keeps) and titled sections; sections hold blocks of sentences. The words
// live in sentences, built once in words.go and events.go.
//
// Layout rule: a view puts what was decided (verdict, refusal, since-plan,
// allowed-because, provenance) before long address lists (write set, read
// set, deviation), so that Truncate, which cuts from the end, drops lists
// before it drops the story.

// tone colours a span in a terminal; Markdown ignores it except for a
// document's title.
type tone int

const (
	toneNone tone = iota
	toneGood      // allowed, exact, independent
	toneWarn      // waited, re-planned, plan input changed, deviation
	toneBad       // refused, failed, planned target changed
	toneInfo      // this plan's own apply, pending
	toneDim       // legends, secondary facts
)

// spanKind says what a span names, which decides its Markdown form.
type spanKind int

const (
	kText   spanKind = iota // words, escaped in Markdown
	kCode                   // an address, command, digest or path: `code`
	kRun                    // a run id: `code`, linked with Options.RunURL
	kStrong                 // **emphasis**
	kLink                   // text linked to url (a PR)
	kMark                   // a since-plan class symbol: `=`, `~`, `!`, `*`
)

// span is a run of text with one style.
type span struct {
	kind spanKind
	text string
	tone tone
	url  string
	cmd  *command // a next step: klbot's comment for it on a pull request (commands.go)
	end  *endRef  // a run's end: its next steps as klbot's comments on a pull request
}

// sentence is a line of words: the unit a fact, a marker or a since-plan
// entry is written in.
type sentence []span

func txt(s string) span              { return span{kind: kText, text: inert(s)} }
func code(s string) span             { return span{kind: kCode, text: inert(s)} }
func strong(s string) span           { return span{kind: kStrong, text: inert(s)} }
func toned(t tone, s string) span    { return span{kind: kText, text: inert(s), tone: t} }
func runSpan(id string) span         { return span{kind: kRun, text: inert(id)} }
func markSpan(m mark) span           { return span{kind: kMark, text: m.sym, tone: m.tone} }
func linkSpan(text, url string) span { return span{kind: kLink, text: inert(text), url: url} }
func strongT(t tone, s string) span  { return span{kind: kStrong, text: inert(s), tone: t} }

// inert makes stored text safe to print on one line: every rune that is
// not printable (unicode.IsPrint, with the ASCII space) is written as a Go
// escape ("\x1b", "\n", "\u200b", "\u202e"). That covers control
// characters (an ESC would drive the reader's terminal; a newline could
// fake a row of a table or a line of a story), invisible and format
// characters (a zero-width space makes "ali\u200bce" pass for "alice"),
// bidirectional overrides (which reorder what a reviewer reads,
// CVE-2021-42574) and spaces other than the ASCII one. Actors, reasons and
// Terraform's messages come from other people and from older versions of
// kl; kl refuses such text on input, and this keeps what an older store
// holds from reaching a terminal or a PR comment raw. Spans are words, one
// line each: the renderers lay out lines themselves.
func inert(s string) string {
	if strings.IndexFunc(s, unsafeRune) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unsafeRune(r) {
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func unsafeRune(r rune) bool {
	return r != ' ' && !unicode.IsPrint(r)
}
func (s sentence) add(p ...span) sentence { return append(s, p...) }

// words builds a sentence from strings (plain words), spans and sentences.
func words(parts ...any) sentence {
	var out sentence
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			if v != "" {
				out = append(out, txt(v))
			}
		case span:
			out = append(out, v)
		case sentence:
			out = append(out, v...)
		case nil:
		default:
			panic("report: words: unsupported part")
		}
	}
	return out
}

// plain returns the sentence as plain text: what JSON "text" fields hold.
func (s sentence) plain() string {
	var b strings.Builder
	for _, p := range s {
		b.WriteString(p.text)
	}
	return b.String()
}

// join joins sentences with sep.
func join(ss []sentence, sep string) sentence {
	var out sentence
	for i, s := range ss {
		if i > 0 {
			out = append(out, txt(sep))
		}
		out = append(out, s...)
	}
	return out
}

// mark is a symbol that tells the since-plan classes apart without colour
// (ADR D8); the legend explains each once where it appears.
type mark struct {
	sym     string
	tone    tone
	label   string // the class label
	meaning string // what it means for the plan, for the legend
}

var (
	markIndependent = mark{"=", toneGood, "independent", "outside the plan's footprint"}
	markReadChanged = mark{"~", toneWarn, "plan input changed", "changed the read set"}
	markWriteChange = mark{"!", toneBad, "planned target changed", "changed the write set"}
	markOwnApply    = mark{"*", toneInfo, "this plan's own apply", "the version this plan's apply committed"}
	allMarks        = []mark{markIndependent, markReadChanged, markWriteChange, markOwnApply}
)

// block is one unit of layout.
type block interface{ isBlock() }

// fields are key/value lines, aligned on the key.
type fields []field

type field struct {
	key string
	val sentence
}

// para is one line of words.
type para sentence

// list is a bulleted list of sentences.
type list []item

type item struct{ s sentence }

// table has a header and rows of cells.
type table struct {
	head []string
	rows [][]sentence
}

// addrList lists addresses one per line, each with an optional note.
// Text shows at most max rows (0: all) and a count of the rest; Markdown
// folds lists longer than foldOver into <details>.
type addrList struct {
	rows []addrRow
	max  int
}

type addrRow struct {
	addr string
	note sentence
}

// legend explains the marks used in the preceding blocks.
type legend []mark

func (fields) isBlock()   {}
func (para) isBlock()     {}
func (list) isBlock()     {}
func (table) isBlock()    {}
func (addrList) isBlock() {}
func (legend) isBlock()   {}

// section is a titled group of blocks.
type section struct {
	title  sentence
	blocks []block
}

// doc is one rendered view.
type doc struct {
	tone  tone
	title sentence
	// more is the command that shows the whole report, for Truncate's note.
	more    string
	summary []block
	body    []section
}

func (d *doc) section(title sentence, blocks ...block) {
	var bs []block
	for _, b := range blocks {
		if b != nil {
			bs = append(bs, b)
		}
	}
	if len(bs) > 0 {
		d.body = append(d.body, section{title: title, blocks: bs})
	}
}

// marksIn returns the marks used by table or list rows, in legend order.
func marksIn(used map[string]bool) legend {
	var out legend
	for _, m := range allMarks {
		if used[m.sym] {
			out = append(out, m)
		}
	}
	return out
}
