package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// hugePlan is a plan of 5,000 resources: its Markdown is far over GitHub's
// limits.
func hugePlan() *engine.PlanOutcome {
	var w, r []engine.Address
	for i := range 5000 {
		w = append(w, engine.Address(fmt.Sprintf("module.fleet.terraform_data.node_%04d", i)))
	}
	for i := range 300 {
		r = append(r, engine.Address(fmt.Sprintf("module.net.terraform_data.subnet_%03d", i)))
	}
	fp := engine.Footprint{Write: set(w...), Read: set(r...)}
	run := planRunA(engine.StatusPlanned, "")
	run.Envelope.Footprint, run.Envelope.Reservations = fp, fp.Reservations()
	run.Envelope.Summary = engine.PlanSummary{Add: 5000}
	return &engine.PlanOutcome{Run: run, Overlaps: overlapsA()}
}

func TestTruncateHugePlan(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := Plan(&b, hugePlan(), Options{Format: Markdown}); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	if len(md) <= CheckRunSummaryLimit {
		t.Fatalf("the huge plan's Markdown is only %d bytes: the test needs more than %d", len(md), CheckRunSummaryLimit)
	}
	for _, limit := range []int{CheckRunSummaryLimit, CommentLimit, 4000} {
		got := Truncate(md, limit)
		if len(got) > limit {
			t.Errorf("Truncate(%d) returned %d bytes", limit, len(got))
		}
		summary := md[:strings.Index(md, mdSummaryEnd)+len(mdSummaryEnd)]
		if !strings.HasPrefix(got, summary) {
			t.Errorf("Truncate(%d) lost the summary", limit)
		}
		if o, c := strings.Count(got, "<details>"), strings.Count(got, "</details>"); o != c {
			t.Errorf("Truncate(%d) left %d <details> and %d </details>", limit, o, c)
		}
		omitted := strings.Count(md[keptPrefix(md, got):], "\n")
		wantNote := fmt.Sprintf("… %d more lines omitted; see `kl run show %s`\n", omitted, planA)
		if !strings.HasSuffix(got, wantNote) {
			t.Errorf("Truncate(%d) ends with %q, want %q", limit, got[max(0, len(got)-100):], wantNote)
		}
	}
	// Options.MaxMarkdown cuts the same way.
	b.Reset()
	if err := Plan(&b, hugePlan(), Options{Format: Markdown, MaxMarkdown: CheckRunSummaryLimit}); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != Truncate(md, CheckRunSummaryLimit) {
		t.Errorf("MaxMarkdown output differs from Truncate")
	}
	// The cut output, head and tail, reviewed like any golden file.
	cut := strings.Split(Truncate(md, CheckRunSummaryLimit), "\n")
	golden(t, "plan/huge.truncated-ends.md", strings.Join(cut[:32], "\n")+"\n[… cut by the test …]\n"+strings.Join(cut[len(cut)-8:], "\n"))
}

// keptPrefix returns how many bytes of md, in whole lines, got begins with.
func keptPrefix(md, got string) int {
	n := 0
	for n < len(md) {
		i := strings.IndexByte(md[n:], '\n')
		if i < 0 || !strings.HasPrefix(got, md[:n+i+1]) {
			break
		}
		n += i + 1
	}
	return n
}

func TestTruncate(t *testing.T) {
	t.Parallel()
	const head = "<!-- kilolock:more kl history --state s -->\n### title\n\nsummary line\n\n" + mdSummaryEnd + "\n"
	body := "\n#### Section\n\n<details><summary>20 addresses</summary>\n\n"
	for i := range 20 {
		body += fmt.Sprintf("- `module.app.terraform_data.a%02d`\n", i)
	}
	body += "\n</details>\n\n#### Next\n\nlast line\n"
	md := head + body
	note := func(n int) string { return fmt.Sprintf("\n… %d more lines omitted; see `kl history --state s`\n", n) }
	// md has 37 lines: 6 of summary, 31 of body.
	cutDetails := head + "\n#### Section\n\n<details><summary>20 addresses</summary>\n\n- `module.app.terraform_data.a00`\n" +
		"\n</details>\n" + note(25)
	cases := map[string]struct {
		limit int
		want  string
	}{
		"fits":                         {len(md), md},
		"cut inside details closes it": {len(cutDetails), cutDetails},
		"no dangling heading":          {len(head) + len("\n#### Section\n") + len(note(12)), head + note(31)},
		"summary alone too long":       {40, cutRunes(md, 40)},
		"summary cut by whole lines":   {len(note(36)) + 50, "<!-- kilolock:more kl history --state s -->\n" + note(36)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := Truncate(md, c.limit)
			if len(got) > c.limit {
				t.Errorf("got %d bytes, limit %d", len(got), c.limit)
			}
			if got != c.want {
				t.Errorf("Truncate(%d):\n%s\nwant:\n%s", c.limit, got, c.want)
			}
		})
	}
	if got := Truncate("ééé", 3); got != "é" {
		t.Errorf("Truncate cut inside a rune: %q", got)
	}
}

// TestTruncateNoMarker: a document without a "kilolock:more" marker (a
// notice, a reply) names no command to see the rest (issue 11 defect 6:
// replies said "see `kl run show RUN`" with a literal RUN).
func TestTruncateNoMarker(t *testing.T) {
	t.Parallel()
	md := strings.Repeat("a line of a notice\n", 100)
	got := Truncate(md, 200)
	if len(got) > 200 || !strings.HasSuffix(got, "\n… 91 more lines omitted\n") {
		t.Errorf("Truncate without a marker = %q, want the first lines and \"… N more lines omitted\"", got)
	}
}
