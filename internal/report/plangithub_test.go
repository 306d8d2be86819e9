package report

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/plandiff"
)

// fixtureDiff is the diff of the real plan fixture named name
// (diffFixtures).
func fixtureDiff(t *testing.T, name string) *plandiff.Diff {
	t.Helper()
	for _, f := range diffFixtures(t) {
		if f.name == name {
			d, err := buildFixture(t, f)
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
	}
	t.Fatalf("no plan fixture %s", name)
	return nil
}

// bigOutcome is alice's open plan with the diff of n changes (bigPlan:
// the first deletes deleted, the next replaces replaced), its write set
// naming every one of them.
func bigOutcome(t *testing.T, id string, n, deletes, replaces int) *engine.PlanOutcome {
	t.Helper()
	r := planRunA(engine.StatusPlanned, "")
	r.ID = id
	var write []engine.Address
	for i := range n {
		write = append(write, engine.Address(fmt.Sprintf("module.app.terraform_data.node_%04d", i)))
	}
	fp := engine.Footprint{Write: set(write...)}
	r.Envelope = envelope("alice", pr(42), 12, fp, 0)
	r.Envelope.Summary = engine.PlanSummary{Change: n - deletes - replaces, Destroy: deletes, Replace: replaces, Outputs: 1}
	return &engine.PlanOutcome{Run: r, Diff: buildBig(t, n, deletes, replaces)}
}

var commentApply = Applying{Project: "app", PlanCheck: "kl plan · app"}

// TestGoldenPlanCheckRun pins the `kl plan · P` check run of a plan with a
// diff (testdata/bot/plan-check-run.md: the summary with the diff's
// summary line and destructive changes, the text with one block per
// resource instance) and checks that a plan without a diff renders as
// before: the header and the view, no text.
func TestGoldenPlanCheckRun(t *testing.T) {
	t.Parallel()
	out := &engine.PlanOutcome{Run: planRunA(engine.StatusPlanned, ""), Diff: fixtureDiff(t, "terraform_data")}
	g, err := NewGitHubPlan(out, PlanHeader(out, commentApply), Options{})
	if err != nil {
		t.Fatal(err)
	}
	summary, text := g.CheckRun()
	golden(t, filepath.Join("bot", "plan-check-run.md"), "## summary\n\n"+summary+"\n## text\n"+text)
	if doc := g.Document(CommentLimit); doc != summary+text {
		t.Errorf("a document with room for everything is not the summary then the text:\n%s", doc)
	}

	out.Diff = nil
	if g, err = NewGitHubPlan(out, PlanHeader(out, commentApply), Options{Format: Text}); err != nil {
		t.Fatal(err)
	}
	var md bytes.Buffer
	if err := Plan(&md, out, Options{Format: Markdown}); err != nil {
		t.Fatal(err)
	}
	if s, x := g.CheckRun(); s != PlanHeader(out, commentApply)+md.String() || x != "" {
		t.Errorf("without a diff: summary\n%s\ntext %q; want the header and the view, no text", s, x)
	}
}

// checkViewKept checks that md holds the header and the view in brief of
// bigOutcome's plan.
func checkViewKept(t *testing.T, what, md string) {
	t.Helper()
	for _, want := range []string{"> Apply with the **Apply** button", "### 📝 Plan `", "- **changes:** per instance:", mdSummaryEnd} {
		if !strings.Contains(md, want) {
			t.Errorf("%s lost %q", what, want)
		}
	}
}

// checkDiffHeadKept checks that md holds the summary line of the diff of
// bigOutcome(5000, 12, 8) and its first destructive changes.
func checkDiffHeadKept(t *testing.T, what, md string, destructive int) {
	t.Helper()
	if head := "**Diff:** 4980 to change, 12 to destroy, 8 to replace, 1 output to change — **⚠ 12 to destroy, 8 to replace**\n"; !strings.Contains(md, head) {
		t.Errorf("%s lost the diff's summary line %q", what, head)
	}
	for i := range destructive {
		if l := fmt.Sprintf("- `module.app.terraform_data.node_%04d` **", i); !strings.Contains(md, l) {
			t.Errorf("%s does not list the destructive change %s", what, l)
		}
	}
}

// TestPlanCheckRunBig: the check run of a 5,000-resource change whose
// write set names all 5,000 fits GitHub's limits (65,535 characters each
// for the summary and the text): the summary keeps the header, the view
// in brief, the diff's summary line and all 20 destructive changes, its
// address lists cut with Truncate's note; the text keeps many blocks,
// destructive ones first, and ends with how many were left out and the
// `kl run show RUN` that shows them all.
func TestPlanCheckRunBig(t *testing.T) {
	t.Parallel()
	out := bigOutcome(t, planA, 5000, 12, 8)
	g, err := NewGitHubPlan(out, PlanHeader(out, commentApply), Options{})
	if err != nil {
		t.Fatal(err)
	}
	summary, text := g.CheckRun()
	if len(summary) > CheckRunSummaryLimit || len(text) > CheckRunSummaryLimit {
		t.Fatalf("summary %d bytes, text %d bytes: over GitHub's %d", len(summary), len(text), CheckRunSummaryLimit)
	}
	checkViewKept(t, "the summary", summary)
	checkDiffHeadKept(t, "the summary", summary, 20)
	if !strings.HasSuffix(summary, "more lines omitted; see `kl run show "+planA+"`\n") {
		t.Errorf("the summary's address lists are not cut with Truncate's note:\n%s", summary[max(0, len(summary)-300):])
	}
	checkMarkdownShape(t, summary)
	if !strings.HasPrefix(text, "\n#### Diff by resource instance\n\n<details><summary><code>module.app.terraform_data.node_0000</code> <b>will be destroyed</b>") {
		t.Errorf("the text does not start with its heading and the first destroy:\n%.300s", text)
	}
	kept := strings.Count(text, "<details>")
	note := fmt.Sprintf("\n… %s of 5,001 blocks left out: `kl run show %s` shows the whole diff\n", fmtCount(5001-kept), planA)
	if kept < 50 || !strings.HasSuffix(text, note) {
		t.Errorf("the text kept %d blocks; want many, then %q:\n%s", kept, note, text[max(0, len(text)-300):])
	}
	checkMarkdownShape(t, text)
}

// TestPlanCheckRunAllDestroyed: when 5,000 instances are destroyed the
// list of destructive changes alone is over the summary's limit: it is
// cut with its count, the summary line and the view in brief kept.
func TestPlanCheckRunAllDestroyed(t *testing.T) {
	t.Parallel()
	out := bigOutcome(t, planA, 5000, 5000, 0)
	g, err := NewGitHubPlan(out, PlanHeader(out, commentApply), Options{})
	if err != nil {
		t.Fatal(err)
	}
	summary, text := g.CheckRun()
	if len(summary) > CheckRunSummaryLimit || len(text) > CheckRunSummaryLimit {
		t.Fatalf("summary %d bytes, text %d bytes: over GitHub's %d", len(summary), len(text), CheckRunSummaryLimit)
	}
	for _, want := range []string{"### 📝 Plan `", "**Diff:** 5000 to destroy, 1 output to change — **⚠ 5000 to destroy**\n", "more to destroy or replace\n"} {
		if !strings.Contains(summary, want) {
			t.Errorf("the summary lost %q", want)
		}
	}
	if listed := strings.Count(summary, "\n- `module.app."); listed < 100 {
		t.Errorf("the summary lists %d destroys; want as many as fit", listed)
	}
	checkMarkdownShape(t, summary)
}

// TestPlanDocument: the plan as one document — an Actions job summary
// (1 MiB per step), a comment (65,536) — fits its limit and keeps the
// summary, the diff's summary line and destructive list; the address
// lists and the blocks share what is left, so neither crowds the other
// out.
func TestPlanDocument(t *testing.T) {
	t.Parallel()
	out := bigOutcome(t, planA, 5000, 12, 8)
	g, err := NewGitHubPlan(out, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int{1 << 20, CommentLimit - 400} {
		doc := g.Document(limit)
		if len(doc) > limit {
			t.Fatalf("limit %d: %d bytes", limit, len(doc))
		}
		what := fmt.Sprintf("the document of %d bytes", limit)
		checkViewKept(t, what, PlanHeader(out, commentApply)+doc)
		checkDiffHeadKept(t, what, doc, 20)
		lists := strings.Count(doc, "- `module.app.terraform_data.node_") - 20
		blocks := strings.Count(doc, "<details><summary><code>")
		if lists < 100 || blocks < 50 || !strings.Contains(doc, "`kl run show "+planA+"` shows the whole diff\n") {
			t.Errorf("limit %d: %d addresses listed, %d blocks kept; want both, and the blocks' note", limit, lists, blocks)
		}
		checkMarkdownShape(t, doc)
	}
	for _, limit := range []int{1, 40, 300, 1000, 5000} {
		if doc := g.Document(limit); len(doc) > limit {
			t.Errorf("limit %d: %d bytes", limit, len(doc))
		}
	}
}

// TestShares: max-min fair shares never add up to more than what there
// is; a part needing less than an equal share gets what it needs.
func TestShares(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		needs []int
		avail int
		want  []int
	}{
		{[]int{10, 100, 100}, 110, []int{10, 50, 50}},
		{[]int{100, 10, 100}, 1000, []int{100, 10, 100}},
		{[]int{300, 300, 300}, 100, []int{33, 33, 34}},
		{[]int{0, 500}, 100, []int{0, 100}},
		{[]int{5, 5}, -3, []int{0, 0}},
		{nil, 10, []int{}},
	} {
		if got := shares(c.needs, c.avail); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("shares(%v, %d) = %v, want %v", c.needs, c.avail, got, c.want)
		}
	}
}

// TestStickyDiffShares: the sticky comment of a pull request with three
// projects whose open plans each change 5,000 resources, and one whose
// plan changes a few, fits in a comment: every project keeps its section,
// its diff's summary line and whole list of destructive changes; the
// blocks are shared, so each big plan shows some of its own, with the
// note naming its run, and the small plan shows all of its own.
func TestStickyDiffShares(t *testing.T) {
	t.Parallel()
	s := Sticky{Repo: "acme/infra", PR: 42}
	ids := []string{"01J2ZP0A11CE00000000APPLAN", "01J2ZP0A11CE00000000DBPLAN", "01J2ZP0A11CE0000000NETPLAN", "01J2ZP0A11CE0000000DNSPLAN"}
	names := []string{"app", "db", "net", "dns"}
	for i, id := range ids {
		out := bigOutcome(t, id, 5000, 12, 8)
		if names[i] == "dns" {
			out.Diff = fixtureDiff(t, "terraform_data")
		}
		s.Projects = append(s.Projects, StickyProject{Applying: Applying{Project: names[i], PlanCheck: "kl plan · " + names[i]},
			State: stateName, HeadSHA: botSHA, Plan: &out.Run, SincePlan: sincePlan(12), Diff: out.Diff})
	}
	limit := CommentLimit - 200
	var b bytes.Buffer
	if err := RenderSticky(&b, s, Options{Format: Markdown, MaxMarkdown: limit}); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	if len(md) > limit {
		t.Fatalf("%d bytes, over the limit of %d", len(md), limit)
	}
	checkMarkdownShape(t, md)
	sections := strings.Split(md, "\n#### 📝 ")
	if len(sections) != 5 {
		t.Fatalf("%d project sections, want 4:\n%.2000s", len(sections)-1, md)
	}
	var kept []int
	for i, sec := range sections[1:] {
		if !strings.HasPrefix(sec, "`"+names[i]+"` on "+stateName) || !strings.Contains(sec, "`kl run show "+ids[i]+"`\n") {
			t.Errorf("section %d is not project %s's, whole:\n%.300s", i, names[i], sec)
		}
		if names[i] == "dns" {
			if !strings.Contains(sec, DiffMarkdown(s.Projects[i].Diff, 1<<30, ids[i])) {
				t.Errorf("the small plan's diff is not whole:\n%s", sec)
			}
			continue
		}
		checkDiffHeadKept(t, "project "+names[i]+"'s section", sec, 20)
		n := strings.Count(sec, "<details><summary><code>")
		note := fmt.Sprintf("\n… %s of 5,001 blocks left out: `kl run show %s` shows the whole diff\n", fmtCount(5001-n), ids[i])
		if n < 20 || !strings.Contains(sec, note) {
			t.Errorf("project %s kept %d blocks; want some, and the note %q", names[i], n, note)
		}
		kept = append(kept, n)
	}
	if len(kept) == 3 && (kept[0] > kept[1]+2 || kept[1] > kept[0]+2 || kept[2] > kept[0]+2 || kept[0] > kept[2]+2) {
		t.Errorf("the big plans kept %v blocks: not an equal share", kept)
	}
}

// TestRevertFailRendered: a plan that would undo an earlier change, of a
// project with on_revert: fail (Applying.RevertFail, Commands.RevertFail:
// ADR 0046), is told so natively in every view a reviewer reads — the
// check run opens with why it cannot be applied, its next step is to
// bring the branch up to date (no `/kl apply`), and the sticky section is
// marked ⛔ and does not say how to apply it. Under warn, for a plan that
// undoes nothing, or for one whose up-to-date branch undoes on purpose
// what its base holds (ADR 0046 decision 7), the views say how to apply
// it as before.
func TestRevertFailRendered(t *testing.T) {
	t.Parallel()
	reverting := func() *engine.PlanOutcome {
		out := &engine.PlanOutcome{Run: planRunA(engine.StatusPlanned, ""), Diff: fixtureDiff(t, "terraform_data")}
		out.Run.Envelope.Reverts = []engine.Revert{{Address: "terraform_data.a", Serial: 4, Kind: engine.RevertChange,
			Attributes: []string{"input"}, Run: "run-b", Actor: "bob", PR: &engine.PullRequest{Repo: "acme/infra", Number: 21}}}
		return out
	}
	fail := commentApply
	fail.RevertFail = true
	cm := &Commands{Project: "app", RevertFail: true}
	for _, tc := range []struct {
		name    string
		out     *engine.PlanOutcome
		a       Applying
		refused bool
	}{
		{"fail", reverting(), fail, true},
		{"warn", reverting(), commentApply, false},
		{"fail, undoes nothing", &engine.PlanOutcome{Run: planRunA(engine.StatusPlanned, ""), Diff: fixtureDiff(t, "terraform_data")}, fail, false},
		{"fail, deliberate", deliberately(reverting()), fail, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := *cm
			c.RevertFail = tc.a.RevertFail
			g, err := NewGitHubPlan(tc.out, PlanHeader(tc.out, tc.a), Options{Commands: &c})
			if err != nil {
				t.Fatal(err)
			}
			summary, _ := g.CheckRun()
			var sb strings.Builder
			sp := StickyProject{Applying: tc.a, State: "acme/infra", HeadSHA: "abc1234", Plan: &tc.out.Run,
				SincePlan: &engine.SincePlan{PlanRun: tc.out.Run.ID, SourceSerial: 12, HeadSerial: 12}}
			row, err := stickySection(sp, Options{Format: Markdown, Commands: &c})
			if err != nil {
				t.Fatal(err)
			}
			sb.WriteString(row.text)
			sticky := sb.String()
			head := "> ⛔ This plan cannot be applied: it would undo earlier changes not shown to be deliberate (below) and project `app` has `on_revert: fail` (kl.yaml):"
			next := "- **next:** bring the branch up to date with its base and push (`on_revert: fail`)"
			if !tc.refused {
				if strings.Contains(summary, "⛔") || !strings.Contains(summary, "- **next:** `/kl apply -p app`") {
					t.Errorf("the check run of a plan that may be applied:\n%s", summary)
				}
				if strings.Contains(sticky, "⛔") || !strings.Contains(sticky, "Apply it with `/kl apply -p app`") {
					t.Errorf("the sticky section of a plan that may be applied:\n%s", sticky)
				}
				return
			}
			if !strings.HasPrefix(summary, head) {
				t.Errorf("the check run does not open with why the plan cannot be applied:\n%s", summary)
			}
			mustHave(t, "check run", summary, next, "would undo **version 4's** change to `terraform_data.a`")
			if strings.Contains(summary, "/kl apply") {
				t.Errorf("the check run of a refused plan says how to apply it:\n%s", summary)
			}
			if row.icon != "⛔" {
				t.Errorf("sticky icon %q, want ⛔", row.icon)
			}
			mustHave(t, "sticky", sticky, "⛔ It cannot be applied: it would undo earlier changes not shown to be deliberate (below) and project `app` has `on_revert: fail`",
				"would undo **version 4's** change to `terraform_data.a`")
			if strings.Contains(sticky, "/kl apply") || strings.Contains(sticky, "Apply it with") {
				t.Errorf("the sticky section of a refused plan says how to apply it:\n%s", sticky)
			}
		})
	}
}

// deliberately records on out's plan that its branch was up to date with
// main, where the pull request of every version it undoes is merged
// (engine.Envelope.Deliberate).
func deliberately(out *engine.PlanOutcome) *engine.PlanOutcome {
	b := &engine.BranchStatus{Base: "main", HeadSHA: "abc1234", AheadBy: 1}
	for _, rv := range out.Run.Envelope.Reverts {
		b.Versions = append(b.Versions, engine.VersionInBase{Serial: rv.Serial, Holds: true})
	}
	out.Run.Envelope.Branch = b
	return out
}

// mustHave fails t unless s holds every one of want.
func mustHave(t *testing.T, what, s string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(s, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, s)
		}
	}
}
