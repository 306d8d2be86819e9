package report

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/plandiff"
	"github.com/kilolock/kilolock/internal/terraform"
)

// bigPlan is the plan JSON of n terraform_data changes, as Terraform 1.11
// writes them: the first deletes deleted, the next replaces replaced (by
// triggers_replace), the rest updated in a nested input.
func bigPlan(n, deletes, replaces int) []byte {
	var b strings.Builder
	b.WriteString(`{"format_version": "1.2", "terraform_version": "1.11.4", "resource_changes": [`)
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		addr := fmt.Sprintf("module.app.terraform_data.node_%04d", i)
		before := fmt.Sprintf(`{"id": "id-%04d", "input": {"name": "node-%d", "size": %d, "tags": {"env": "prod"}}, "output": {"name": "node-%d", "size": %d, "tags": {"env": "prod"}}, "triggers_replace": ["r1"]}`, i, i, i, i, i)
		var actions, after, extra string
		switch {
		case i < deletes:
			actions, after, extra = `["delete"]`, `null`, `, "action_reason": "delete_because_no_resource_config"`
		case i < deletes+replaces:
			actions = `["delete", "create"]`
			after = fmt.Sprintf(`{"input": {"name": "node-%d", "size": %d, "tags": {"env": "prod"}}, "triggers_replace": ["r2"]}`, i, i)
			extra = `, "after_unknown": {"id": true, "output": true}, "replace_paths": [["triggers_replace"]], "action_reason": "replace_because_cannot_update"`
		default:
			actions = `["update"]`
			after = fmt.Sprintf(`{"id": "id-%04d", "input": {"name": "node-%d", "size": %d, "tags": {"env": "staging"}}, "triggers_replace": ["r1"]}`, i, i, i+1)
			extra = `, "after_unknown": {"output": true}`
		}
		fmt.Fprintf(&b, `{"address": %q, "module_address": "module.app", "mode": "managed", "type": "terraform_data", "name": "node_%04d",
			"provider_name": "terraform.io/builtin/terraform", "change": {"actions": %s, "before": %s, "after": %s %s}}`, addr, i, actions, before, after, extra)
	}
	b.WriteString(`], "output_changes": {"count": {"actions": ["update"], "before": 1, "after": 2, "after_unknown": false, "before_sensitive": false, "after_sensitive": false}}}`)
	return []byte(b.String())
}

func buildBig(t *testing.T, n, deletes, replaces int) *plandiff.Diff {
	t.Helper()
	plan, err := terraform.ParsePlanJSON(bigPlan(n, deletes, replaces))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	d, err := plandiff.Build(plan, plandiff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Build of %d resource changes: %s", n, time.Since(start))
	return d
}

// checkMarkdownShape checks that md closes every <details> and fence it
// opens.
func checkMarkdownShape(t *testing.T, md string) {
	t.Helper()
	if o, c := strings.Count(md, "<details>"), strings.Count(md, "</details>"); o != c {
		t.Errorf("%d <details> opened, %d closed", o, c)
	}
	if n := len(regexp.MustCompile("(?m)^```").FindAllString(md, -1)); n%2 != 0 {
		t.Errorf("%d fence lines: one is left open", n)
	}
}

// TestDiffMarkdownBudget: a 5,000-resource change renders within GitHub's
// limits; the summary line, the counts and the whole list of destructive
// changes survive, blocks are cut from the end with a note naming how many
// and the command that shows them all. Destructive blocks come first.
func TestDiffMarkdownBudget(t *testing.T) {
	d := buildBig(t, 5000, 12, 8)
	full := DiffMarkdown(d, 1<<30, "01RUN")
	for _, limit := range []int{CheckRunSummaryLimit, CommentLimit} {
		md := DiffMarkdown(d, limit, "01RUN")
		if len(md) > limit || len(full) <= limit {
			t.Fatalf("limit %d: rendered %d bytes (whole diff %d)", limit, len(md), len(full))
		}
		head := "**Diff:** 4980 to change, 12 to destroy, 8 to replace, 1 output to change — **⚠ 12 to destroy, 8 to replace**\n"
		if !strings.HasPrefix(md, head) {
			t.Errorf("does not start with the summary line %q:\n%.300s", head, md)
		}
		for i := range 20 {
			addr := fmt.Sprintf("- `module.app.terraform_data.node_%04d` **", i)
			if !strings.Contains(md, addr) {
				t.Errorf("the destructive change %s is not listed", addr)
			}
		}
		kept := strings.Count(md, "<details>")
		note := fmt.Sprintf("\n… %s of 5,001 blocks left out: `kl run show 01RUN` shows the whole diff\n", fmtCount(5001-kept))
		if kept < 50 || !strings.HasSuffix(md, note) {
			t.Errorf("kept %d blocks; want many, and the note %q at the end:\n%s", kept, note, md[max(0, len(md)-300):])
		}
		first := md[strings.Index(md, "<details>"):]
		if !strings.HasPrefix(first, "<details><summary><code>module.app.terraform_data.node_0000</code> <b>will be destroyed</b>") {
			t.Errorf("the first block is not the first destroy: %.120s", first)
		}
		checkMarkdownShape(t, md)
	}
}

// TestDiffMarkdownAllDestroyed: when even the list of destructive changes
// does not fit, the summary line survives whole and the list ends with how
// many more there are.
func TestDiffMarkdownAllDestroyed(t *testing.T) {
	d := buildBig(t, 5000, 5000, 0)
	md := DiffMarkdown(d, CheckRunSummaryLimit, "01RUN")
	if len(md) > CheckRunSummaryLimit {
		t.Fatalf("rendered %d bytes", len(md))
	}
	if !strings.HasPrefix(md, "**Diff:** 5000 to destroy, 1 output to change — **⚠ 5000 to destroy**\n") {
		t.Errorf("summary line lost:\n%.200s", md)
	}
	listed := strings.Count(md, "\n- `module.app.")
	more := fmt.Sprintf("- … and %s more to destroy or replace\n", fmtCount(5000-listed))
	if listed < 100 || !strings.Contains(md, more) {
		t.Errorf("listed %d destroys; want many, then %q", listed, more)
	}
	if !strings.HasSuffix(md, "\n… 5,001 of 5,001 blocks left out: `kl run show 01RUN` shows the whole diff\n") {
		t.Errorf("no note at the end:\n%s", md[max(0, len(md)-300):])
	}
	checkMarkdownShape(t, md)
	if got := DiffMarkdown(d, 40, "01RUN"); len(got) > 40 {
		t.Errorf("budget 40: %d bytes", len(got))
	}
}

// TestManyOutputsWithinLimits: a plan changing 1,500 root outputs and no
// resource shows them in the check run's text, cut block by block
// (outputsPerBlock each) within GitHub's limit — not left out whole as
// one block too big for any room.
func TestManyOutputsWithinLimits(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"format_version": "1.2", "terraform_version": "1.11.4", "resource_changes": [], "output_changes": {`)
	for i := range 1500 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"out_%04d": {"actions": ["update"], "before": "old-value-%04d", "after": "new-value-%04d", "after_unknown": false, "before_sensitive": false, "after_sensitive": false}`, i, i, i)
	}
	b.WriteString(`}}`)
	plan, err := terraform.ParsePlanJSON([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	d, err := plandiff.Build(plan, plandiff.Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := &engine.PlanOutcome{Run: planRunA(engine.StatusPlanned, ""), Diff: d}
	out.Run.Envelope.Summary = engine.PlanSummary{Outputs: 1500}
	g, err := NewGitHubPlan(out, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	summary, text := g.CheckRun()
	if len(summary) > CheckRunSummaryLimit || len(text) > CheckRunSummaryLimit {
		t.Fatalf("summary %d bytes, text %d: over GitHub's %d", len(summary), len(text), CheckRunSummaryLimit)
	}
	if !strings.Contains(text, "Changes to Outputs (1–50 of 1500)") || !strings.Contains(text, "out_0000") || len(text) < CheckRunSummaryLimit/2 {
		t.Errorf("the check run's text (%d bytes) does not show the first outputs:\n%.600s", len(text), text)
	}
	if !strings.Contains(text, "blocks left out: `kl run show "+out.Run.ID+"` shows the whole diff") {
		t.Errorf("the check run's text does not say how many output blocks were left out")
	}
	checkMarkdownShape(t, text)
	if title := PlanTitle(out); !strings.Contains(title, "1500 outputs change") {
		t.Errorf("title %q does not say the outputs change", title)
	}
}
