package report

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// Apply logs (engine.ApplyLog, ADR 0047) as the Terraform adapter records
// them, on the stories of scenarios_test.go.

func ms(n float64) engine.Duration { return engine.Duration(n * float64(time.Millisecond)) }

// storyTerraformApplied is storyAllowedConcurrent with what Terraform said:
// three instances applied and its totals line.
func storyTerraformApplied() *engine.RunStory {
	s := storyAllowedConcurrent()
	s.ApplyLog = &engine.ApplyLog{
		Resources: []engine.ResourceApply{
			{Address: "module.app.terraform_data.web", Action: "update", Outcome: engine.ResourceApplied, Elapsed: ms(12400),
				IDKey: "id", IDValue: "3f1c9a2e-7b4d-4e0a-9c21-5d8e6f7a1b20"},
			{Address: `module.app.terraform_data.worker["eu"]`, Action: "create", Outcome: engine.ResourceApplied, Elapsed: ms(35210),
				IDKey: "id", IDValue: "a0b1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d"},
			{Address: `module.app.terraform_data.worker["us"]`, Action: "create", Outcome: engine.ResourceApplied, Elapsed: ms(0.4),
				IDKey: "id", IDValue: "b1c2d3e4-f5a6-4b7c-8d9e-0f1a2b3c4d5e"},
		},
		Totals: &engine.ChangeTotals{Add: 2, Change: 1, Operation: "apply", Message: "Apply complete! Resources: 2 added, 1 changed, 0 destroyed."},
	}
	return s
}

// failedLog is what Terraform said in storyPartialDrift: the web server
// replaced, the worker's provisioner failed (its command quoted a
// sensitive value, masked by the adapter), a check block's assertion
// failed (a warning without an address), the queue never started, and no
// totals line.
func failedLog() *engine.ApplyLog {
	return &engine.ApplyLog{
		Resources: []engine.ResourceApply{
			{Address: "module.app.terraform_data.cache", Action: "replace", Outcome: engine.ResourceApplied, Elapsed: ms(2250),
				IDKey: "id", IDValue: "c2d3e4f5-a6b7-4c8d-9e0f-1a2b3c4d5e6f"},
			{Address: "module.app.terraform_data.queue", Action: "create", Outcome: engine.ResourceNotStarted},
			{Address: "module.app.terraform_data.web", Action: "update", Outcome: engine.ResourceApplied, Elapsed: ms(840),
				IDKey: "id", IDValue: "3f1c9a2e-7b4d-4e0a-9c21-5d8e6f7a1b20"},
			{Address: "module.app.terraform_data.worker", Action: "create", Outcome: engine.ResourceErrored, Elapsed: ms(30120)},
		},
		Diagnostics: []engine.Diagnostic{
			{Severity: "warning", Summary: "Check block assertion failed", Detail: "the web server answers on /health",
				File: "checks.tf", Line: 4, Column: 21, EndLine: 4, EndColumn: 58, Context: `check "health"`},
			{Severity: "error", Summary: "local-exec provisioner error",
				Detail:  "Error running command './bootstrap --token (sensitive value)': exit status 2. Output: connecting…\nbootstrap: token rejected\n",
				Address: "module.app.terraform_data.worker", File: "modules/app/main.tf", Line: 31, Column: 28, EndLine: 31, EndColumn: 29,
				Context: `resource "terraform_data" "worker"`},
		},
	}
}

func storyTerraformFailed() *engine.RunStory {
	s := storyPartialDrift()
	s.ApplyLog = failedLog()
	return s
}

// TestApplyLogMarkdownWithinLimits: the Markdown of an apply of 5,000
// instances, one errored, fits a check run's summary; the summary keeps
// Terraform's words, the errored instance and the diagnostics survive,
// and the instances left out are counted with the command that lists
// them all. Diagnostics too long for the limit are cut after the summary.
func TestApplyLogMarkdownWithinLimits(t *testing.T) {
	t.Parallel()
	s := storyTerraformFailed()
	l := s.ApplyLog
	for i := range 5000 {
		l.Resources = append(l.Resources, engine.ResourceApply{Address: fmt.Sprintf(`module.fleet.terraform_data.node["n%04d"]`, i),
			Action: "create", Outcome: engine.ResourceApplied, Elapsed: ms(3), IDKey: "id", IDValue: fmt.Sprintf("%08d-0000-4000-8000-000000000000", i)})
	}
	var b bytes.Buffer
	if err := Apply(&b, s, Options{Format: Markdown}); err != nil {
		t.Fatal(err)
	}
	md := Truncate(b.String(), CheckRunSummaryLimit)
	if len(md) > CheckRunSummaryLimit {
		t.Fatalf("%d bytes, over the check run's %d", len(md), CheckRunSummaryLimit)
	}
	for _, want := range []string{
		"**terraform:** 1 errored, 1 not started, 5002 applied; no totals line",
		"**Error:** local-exec provisioner error — with `module.app.terraform_data.worker`",
		"| errored | create | `module.app.terraform_data.worker` | 30.1s |  |",
		"… and 4,904 more instances: `kl run show " + applyA + "` lists them all",
		"<details open><summary>5004 resource instances</summary>",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown does not hold %q", want)
		}
	}
	if n := strings.Count(md, "| applied | create | `module.fleet."); n > mdResourceRows {
		t.Errorf("%d instance lines; want at most %d", n, mdResourceRows)
	}

	// Diagnostics that alone exceed the limit: the summary survives.
	long := strings.Repeat("a provider's very long explanation. ", 40)
	for i := range 300 {
		l.Diagnostics = append(l.Diagnostics, engine.Diagnostic{Severity: "error", Summary: fmt.Sprintf("Failure %d", i), Detail: long})
	}
	b.Reset()
	if err := Apply(&b, s, Options{Format: Markdown}); err != nil {
		t.Fatal(err)
	}
	md = Truncate(b.String(), CheckRunSummaryLimit)
	if len(md) > CheckRunSummaryLimit || !strings.Contains(md, "**terraform:** 1 errored") || !strings.Contains(md, "more lines omitted; see `kl run show "+applyA+"`") {
		t.Errorf("cut to %d bytes: the summary or the note is missing:\n%s", len(md), md[:min(len(md), 2000)])
	}
	if strings.Count(md, "```")%2 != 0 {
		t.Errorf("a fence is left open")
	}
}

// TestDiagnosticMarkdownFence: a detail that holds a fence and control
// characters stays inside its own longer fence, inert.
func TestDiagnosticMarkdownFence(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	mdPainter{}.diagnostics(&b, diagList{{Severity: "error", Summary: "Bad", Detail: "run:\n```sh\nrm -rf /\n```\n\x1b[31mred"}})
	want := "**Error:** Bad\n\n````text\nrun:\n```sh\nrm -rf /\n```\n\\x1b[31mred\n````\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
}
