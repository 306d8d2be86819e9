package report

import (
	"strings"
	"testing"
)

// TestHTMLEscapes: the HTML renderer escapes every word, links only
// http(s) URLs and paths of this server, and draws the since-plan marks
// with classes of their own (ADR D8).
func TestHTMLEscapes(t *testing.T) {
	d := &doc{tone: toneBad, title: words("run ", runSpan("01J0000000000000000000000X"), " <script>alert(1)</script>")}
	d.summary = []block{
		para(words(linkSpan("evil", "javascript:alert(1)"), " ", linkSpan("pr", "https://github.com/acme/infra/pull/1"))),
		fields{{key: "a&b", val: words(code(`"x"`), toned(toneWarn, "warn"))}},
		legend{markIndependent, markReadChanged, markWriteChange},
	}
	o := Options{Format: HTML, RunURL: func(id string) string { return "/runs/" + id }}
	got := renderHTML(d, o)
	for _, want := range []string{
		`<article class="report verdict-bad">`,
		`<a href="/runs/01J0000000000000000000000X"><code class="run">01J0000000000000000000000X</code></a>`,
		"&lt;script&gt;alert(1)&lt;/script&gt;",
		`<a href="https://github.com/acme/infra/pull/1">pr</a>`,
		"<dt>a&amp;b</dt><dd><code>&#34;x&#34;</code><span class=\"tone-warn\">warn</span></dd>",
		`<code class="mark tone-good">=</code>`, `<code class="mark tone-warn">~</code>`, `<code class="mark tone-bad">!</code>`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("HTML lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{"<script>", "javascript:", `href="evil`} {
		if strings.Contains(got, bad) {
			t.Errorf("HTML holds %q:\n%s", bad, got)
		}
	}
	if u := safeURL("//evil.example.com/x"); u != "" {
		t.Errorf("safeURL of a scheme-relative URL = %q, want none", u)
	}
}
