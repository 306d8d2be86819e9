package report

import (
	"sort"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// truncateRoom is what a document fitted before Truncate leaves it: its
// note ("… N more lines omitted; see `kl run show RUN`") and the closers
// of what a cut leaves open.
const truncateRoom = 256

// GitHubPlan is a plan run's Markdown report with its diff (ADR 0044),
// laid out once for GitHub's faces and fitted to each one's limits:
//
//   - the summary: a header the caller gives (PlanHeader for klbot), the
//     plan's view in brief (Plan: the envelope up to the summary-end
//     marker), the diff's summary line and its list of destructive
//     changes (DiffMarkdown's), then the view's sections (write set, read
//     set, overlaps);
//   - the blocks: a "Diff by resource instance" heading and one
//     collapsible block per resource instance with a ```diff fence,
//     destructive ones first, then the outputs'.
//
// What is cut goes in reverse order of importance: the view's sections
// and the blocks first (each ending with how many were left out and the
// `kl run show RUN` that shows them all), the list of destructive changes
// only when it alone does not fit (ending "… and N more to destroy or
// replace"), never the header, the view in brief or the diff's summary
// line. A plan without a diff (a failed plan, one an older kl made) or
// whose diff is empty renders as the header and the view alone.
type GitHubPlan struct {
	top   string  // the header and the view in brief, through the summary-end marker
	rest  string  // the view's sections
	diff  *mdDiff // nil without a diff
	title string  // the blocks' heading
}

// NewGitHubPlan renders plan outcome out for GitHub, with header above
// its view (Markdown, "" for none) and out.Diff as its diff; o's format is
// ignored (always Markdown). Errors are Plan's.
func NewGitHubPlan(out *engine.PlanOutcome, header string, o Options) (*GitHubPlan, error) {
	o.Format, o.MaxMarkdown = Markdown, 0
	var b strings.Builder
	if err := Plan(&b, out, o); err != nil {
		return nil, err
	}
	md := b.String()
	g := &GitHubPlan{top: header + md, title: "\n" + o.heading(1) + "Diff by resource instance\n"}
	if i := strings.Index(md, "\n"+mdSummaryEnd+"\n"); i >= 0 {
		cut := i + len(mdSummaryEnd) + 2
		g.top, g.rest = header+md[:cut], md[cut:]
	}
	if d := out.Diff; d != nil && (len(d.Resources) > 0 || len(d.Outputs) > 0) {
		g.diff = newMDDiff(d, out.Run.ID)
	}
	return g, nil
}

// CheckRun is the output of the plan's `kl plan · P` check run: its
// summary, and its text holding the blocks ("" without a diff), each at
// most CheckRunSummaryLimit bytes (GitHub: 65,535 characters each for
// output.summary and output.text). The blocks go in the text so that the
// view's address lists and the per-resource blocks do not compete for
// the summary's room: GitHub shows the text right below the summary.
func (g *GitHubPlan) CheckRun() (summary, text string) {
	if g.diff == nil {
		return Truncate(g.top+g.rest, CheckRunSummaryLimit), ""
	}
	must := g.must(CheckRunSummaryLimit)
	summary = Truncate(must+g.rest, CheckRunSummaryLimit)
	return summary, g.title + g.diff.fitBlocks(CheckRunSummaryLimit-len(g.title))
}

// Document is the summary, then the blocks, as one Markdown document of
// at most limit bytes (an Actions job summary, a comment): once the
// header, the view in brief and the diff's summary line and destructive
// list are in, the view's sections and the blocks share what is left
// (shares: neither takes more than half while the other needs it).
func (g *GitHubPlan) Document(limit int) string {
	if g.diff == nil {
		return Truncate(g.top+g.rest, limit)
	}
	must := g.must(limit)
	sh := shares([]int{len(g.rest), len(g.title) + g.diff.blocksSize()}, limit-len(must)-truncateRoom)
	summary := Truncate(must+g.rest, min(limit, len(must)+truncateRoom+sh[0]))
	blocks := g.diff.fitBlocks(limit - len(summary) - len(g.title))
	if blocks == "" {
		return summary
	}
	return summary + g.title + blocks
}

// must is what a summary keeps whatever its limit: the header and the
// view in brief, the diff's summary line and as much of its destructive
// list as fits in limit with room for Truncate.
func (g *GitHubPlan) must(limit int) string {
	return g.top + "\n" + g.diff.fitHead(limit-len(g.top)-1-truncateRoom)
}

// shares divides avail bytes among parts that need needs[i] bytes each,
// max-min fair: a part that needs less than an equal share gets what it
// needs, and what it leaves is shared among the others. The shares never
// add up to more than avail (none when avail ≤ 0).
func shares(needs []int, avail int) []int {
	out := make([]int, len(needs))
	order := make([]int, len(needs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return needs[order[a]] < needs[order[b]] })
	for k, i := range order {
		if avail <= 0 {
			break
		}
		out[i] = min(needs[i], avail/(len(order)-k))
		avail -= out[i]
	}
	return out
}
