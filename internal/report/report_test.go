package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// goldenCase is one view rendered from one fixture. view is the JSON
// schema's view name and the testdata directory.
type goldenCase struct {
	view, name string
	render     func(w io.Writer, o Options) error
}

// now is "an hour after the fixtures began" for relative ages.
var now = t0.Add(time.Hour)

func runURL(id string) string { return "https://klbot.example.com/runs/" + id }

func goldenCases() []goldenCase {
	story := func(f func() *engine.RunStory) func(io.Writer, Options) error {
		return func(w io.Writer, o Options) error { return RunStory(w, f(), o) }
	}
	apply := func(f func() *engine.RunStory) func(io.Writer, Options) error {
		return func(w io.Writer, o Options) error { return Apply(w, f(), o) }
	}
	since := func(f func() (*engine.SincePlan, engine.Run)) func(io.Writer, Options) error {
		return func(w io.Writer, o Options) error { sp, p := f(); return SincePlan(w, sp, p, o) }
	}
	why := func(f func() *engine.Why) func(io.Writer, Options) error {
		return func(w io.Writer, o Options) error { return Why(w, f(), o) }
	}
	return []goldenCase{
		{"plan", "overlaps-widening", func(w io.Writer, o Options) error {
			return Plan(w, &engine.PlanOutcome{Run: planRunA(engine.StatusPlanned, ""), Overlaps: overlapsA()}, o)
		}},
		{"plan", "failed", func(w io.Writer, o Options) error {
			r := engine.Run{ID: planA, Kind: engine.KindPlan, State: stateName, Actor: "alice", Status: engine.StatusFailed, PR: pr(42),
				End: &engine.End{Cause: engine.CauseTerraformFailed, Terraform: &engine.TerraformFailure{Command: "plan",
					Stderr: `exit status 1: Error: Reference to undeclared resource "terraform_data.nope"`}}, CreatedAt: at(0)}
			return Plan(w, &engine.PlanOutcome{Run: r}, o)
		}},
		{"apply", "allowed-concurrent", apply(storyAllowedConcurrent)},
		{"apply", "waited-replanned", apply(storyWaitedReplanned)},
		{"apply", "legacy-replan-checked", apply(storyLegacyReplanChecked)},
		{"apply", "refused-outside", apply(storyRefusedOutside)},
		{"apply", "refused-beyond", apply(storyRefusedBeyond)},
		{"apply", "refused-stale", apply(storyRefusedStale)},
		{"plan", "targeted-replace", func(w io.Writer, o Options) error { return Plan(w, planTargetedReplace(), o) }},
		{"plan", "native-instances", func(w io.Writer, o Options) error { return Plan(w, planNativeInstances(), o) }},
		{"plan", "options", func(w io.Writer, o Options) error { return Plan(w, planWithOptions(), o) }},
		{"plan", "refresh-only", func(w io.Writer, o Options) error { return Plan(w, planRefreshOnly(), o) }},
		{"apply", "refused-intent", apply(storyRefusedIntent)},
		{"apply", "refused-validation", apply(storyRefusedValidation)},
		{"apply", "refused-behind-head", apply(storyRefusedBehindHead)},
		{"apply", "refused-strict", apply(storyRefusedStrict)},
		{"apply", "overwritten", apply(storyOverwritten)},
		{"apply", "refused-conflict", apply(storyRefusedConflict)},
		{"apply", "partial-drift", apply(storyPartialDrift)},
		{"apply", "interrupted-tainted", apply(storyInterrupted)},
		{"apply", "lease-expired-recoverable", apply(storyLeaseExpiredRecoverable)},
		{"apply", "lease-expired-unseen", apply(storyLeaseExpiredUnseen)},
		{"apply", "recovered", apply(storyRecovered)},
		{"apply", "lease-lost", apply(storyLeaseLost)},
		{"apply", "lease-lost-inputs-changed", apply(storyLeaseLostInputsChanged)},
		{"apply", "no-changes", apply(storyNoChanges)},
		{"apply", "terraform-applied", apply(storyTerraformApplied)},
		{"apply", "terraform-failed", apply(storyTerraformFailed)},
		{"run", "apply-terraform-failed", story(storyTerraformFailed)},
		{"run", "apply-waited-replanned", story(storyWaitedReplanned)},
		{"run", "apply-legacy-replan-checked", story(storyLegacyReplanChecked)},
		{"run", "apply-refused-stale", story(storyRefusedStale)},
		{"run", "apply-refused-behind-head", story(storyRefusedBehindHead)},
		{"run", "replan-open", story(storyReplanOpen)},
		{"run", "apply-partial-drift", story(storyPartialDrift)},
		{"run", "plan-open", story(storyPlanOpen)},
		{"run", "plan-applied", story(storyPlanApplied)},
		{"run", "plan-open-again", story(storyPlanOpenAgain)},
		{"run", "apply-interrupted-tainted", story(storyInterrupted)},
		{"run", "apply-lease-expired-recoverable", story(storyLeaseExpiredRecoverable)},
		{"run", "apply-late-result", story(storyLateResult)},
		{"run", "apply-holder-alive", story(storyHolderAlive)},
		{"run", "apply-recovered", story(storyRecovered)},
		{"run", "apply-lease-lost-inputs-changed", story(storyLeaseLostInputsChanged)},
		{"run", "apply-no-changes", story(storyNoChanges)},
		{"history", "prod", func(w io.Writer, o Options) error { return History(w, prodState(15), historyProd(), o) }},
		{"history", "empty", func(w io.Writer, o Options) error { return History(w, prodState(15), nil, o) }},
		{"history", "page-concurrent", func(w io.Writer, o Options) error { return History(w, prodState(40), historyConcurrent(), o) }},
		{"since-plan", "own-apply", since(sincePlanOwnApply)},
		{"since-plan", "open-refused", since(sincePlanOpenRefused)},
		{"since-plan", "open-replan", since(sincePlanOpenReplan)},
		{"since-plan", "open-independent", since(sincePlanIndependent)},
		{"since-plan", "open-unchanged", since(func() (*engine.SincePlan, engine.Run) {
			return sincePlan(12), planRunA(engine.StatusPlanned, "")
		})},
		{"runs", "recent", func(w io.Writer, o Options) error { return Runs(w, recentRuns(), RunsPage{}, o) }},
		{"runs", "page", func(w io.Writer, o Options) error {
			return Runs(w, recentRuns()[:3], RunsPage{State: stateName, More: true}, o)
		}},
		{"why", "allowed", why(whyAllowed)},
		{"why", "refused-stale", why(func() *engine.Why { return whyFrom(storyRefusedStale(), engine.VerdictRefused) })},
		{"why", "refused-intent", why(func() *engine.Why { return whyFrom(storyRefusedIntent(), engine.VerdictRefused) })},
		{"why", "refused-behind-head", why(func() *engine.Why { return whyFrom(storyRefusedBehindHead(), engine.VerdictRefused) })},
		{"why", "plan-refused-behind-head", why(func() *engine.Why { return whyPlanOf(storyRefusedBehindHead(), engine.VerdictRefused) })},
		{"why", "refused-conflict", why(func() *engine.Why { return whyFrom(storyRefusedConflict(), engine.VerdictRefused) })},
		{"why", "failed", why(func() *engine.Why { return whyFrom(storyPartialDrift(), engine.VerdictFailed) })},
		{"why", "interrupted", why(whyInterrupted)},
		{"why", "waiting", why(whyWaiting)},
		{"why", "pending", why(whyPending)},
		{"why", "plan-discarded", why(whyPlanDiscarded)},
		{"why", "plan-open-again", why(whyPlanOpenAgain)},
		{"why", "interrupted-tainted", why(func() *engine.Why { return whyFrom(storyInterrupted(), engine.VerdictInterrupted) })},
		{"why", "lease-expired-recoverable", why(func() *engine.Why { return whyFrom(storyLeaseExpiredRecoverable(), engine.VerdictFailed) })},
		{"why", "plan-lease-expired-recoverable", why(func() *engine.Why {
			return whyPlanOf(storyLeaseExpiredRecoverable(), engine.VerdictFailed)
		})},
		{"why", "plan-lease-expired", why(whyPlanLeaseExpired)},
		{"why", "recovered", why(func() *engine.Why { return whyFrom(storyRecovered(), engine.VerdictFailed) })},
		{"why", "late-result", why(func() *engine.Why { return whyFrom(storyLateResult(), engine.VerdictFailed) })},
		{"status", "waiter", func(w io.Writer, o Options) error { return Status(w, statusWaiter(), o) }},
		{"footprint", "widening", func(w io.Writer, o Options) error {
			return Footprint(w, "plan.json", footprintWidened(), engine.PlanSummary{Add: 1, Change: 1, Outputs: 1}, o)
		}},
		{"footprint", "unverified", func(w io.Writer, o Options) error {
			return Footprint(w, "plan.json", footprintUnverified(), engine.PlanSummary{Change: 2}, o)
		}},
		{"states", "list", func(w io.Writer, o Options) error { return States(w, statesList(), o) }},
		{"state-init", "empty", func(w io.Writer, o Options) error { return StateInit(w, statesList()[1], "", o) }},
		{"state-init", "file", func(w io.Writer, o Options) error { return StateInit(w, statesList()[0], "terraform.tfstate", o) }},
		{"tokens", "list", func(w io.Writer, o Options) error { return Tokens(w, tokensList(), o) }},
		{"tokens", "empty", func(w io.Writer, o Options) error { return Tokens(w, nil, o) }},
		{"token-created", "read-only", func(w io.Writer, o Options) error {
			return TokenCreated(w, tokensList()[1], secretOf(tokensList()[1]), o)
		}},
		{"token-created", "expiring", func(w io.Writer, o Options) error {
			return TokenCreated(w, tokensList()[0], secretOf(tokensList()[0]), o)
		}},
		{"token-revoked", "revoked", func(w io.Writer, o Options) error { return TokenRevoked(w, tokensList()[3], o) }},
	}
}

var formats = []struct {
	ext string
	o   Options
}{
	{"txt", Options{Format: Text, Now: now}},
	{"md", Options{Format: Markdown, Now: now, RunURL: runURL}},
	{"json", Options{Format: JSON, Now: now}},
}

// golden compares got with testdata/path, or rewrites it with -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	path = filepath.Join("testdata", path)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the rendered output (run go test -update, then review the diff):\n--- got\n%s", path, got)
	}
}

func render(t *testing.T, c goldenCase, o Options) string {
	t.Helper()
	var b bytes.Buffer
	if err := c.render(&b, o); err != nil {
		t.Fatalf("rendering %s/%s: %v", c.view, c.name, err)
	}
	return b.String()
}

func TestGolden(t *testing.T) {
	t.Parallel()
	for _, c := range goldenCases() {
		for _, f := range formats {
			t.Run(c.view+"/"+c.name+"."+f.ext, func(t *testing.T) {
				t.Parallel()
				golden(t, filepath.Join(c.view, c.name+"."+f.ext), render(t, c, f.o))
			})
		}
	}
}

// TestGoldenColor pins the ANSI form of two apply reports: the since-plan
// classes and the verdict in colour, the symbols unchanged.
func TestGoldenColor(t *testing.T) {
	t.Parallel()
	for _, c := range goldenCases() {
		if c.view != "apply" || (c.name != "refused-stale" && c.name != "waited-replanned") {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := render(t, c, Options{Format: Text, Color: true})
			golden(t, filepath.Join(c.view, c.name+".color.txt"), got)
			plain := render(t, c, Options{Format: Text})
			if strings.Contains(plain, "\x1b[") {
				t.Errorf("text without Color holds ANSI escapes")
			}
			if stripANSI(got) != plain {
				t.Errorf("colour changed more than colour:\n%s\n---\n%s", stripANSI(got), plain)
			}
		})
	}
}

func stripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b {
			for i < len(s) && s[i] != 'm' {
				i++
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// TestJSONSchema checks that every JSON document parses and names its view's
// schema: v3 for the views whose deviation was called drift in v1 (v2) and
// that tell an applied re-plan (v3).
func TestJSONSchema(t *testing.T) {
	t.Parallel()
	for _, c := range goldenCases() {
		t.Run(c.view+"/"+c.name, func(t *testing.T) {
			t.Parallel()
			var doc map[string]any
			if err := json.Unmarshal([]byte(render(t, c, Options{Format: JSON})), &doc); err != nil {
				t.Fatalf("output is not JSON: %v", err)
			}
			version := map[string]string{"apply": "v3", "run": "v3", "history": "v3", "why": "v3"}[c.view]
			if version == "" {
				version = "v1"
			}
			if got, want := doc["schema"], "kilolock/"+c.view+"/"+version; got != want {
				t.Errorf("schema = %v, want %s", got, want)
			}
		})
	}
}

func TestParseFormat(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Format{"text": Text, "": Text, "markdown": Markdown, "MD": Markdown, "json": JSON} {
		got, err := ParseFormat(in)
		if err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseFormat("yaml"); err == nil {
		t.Errorf("ParseFormat(yaml) did not fail")
	}
}

// TestJSONDocumented checks that docs/json.md documents every schema.
func TestJSONDocumented(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "json.md"))
	if err != nil {
		t.Fatalf("reading docs/json.md: %v", err)
	}
	for _, s := range []string{SchemaPlan, SchemaApply, SchemaRun, SchemaHistory, SchemaSincePlan, SchemaRuns,
		SchemaWhy, SchemaStatus, SchemaFootprint, SchemaStates, SchemaStateInit, SchemaVersion,
		SchemaTokens, SchemaTokenCreated, SchemaTokenRevoked, SchemaGC, SchemaReseal} {
		if !strings.Contains(string(b), "### `"+s+"`") {
			t.Errorf("docs/json.md has no section for %s", s)
		}
	}
}

// TestSparseViews renders views built from the least the engine may hand
// over — no envelope, no markers, no PR — in every format: no panic, no
// error.
func TestSparseViews(t *testing.T) {
	t.Parallel()
	bare := engine.Run{ID: "R", Kind: engine.KindApply, State: "s", Status: engine.StatusRefused}
	renders := map[string]func(io.Writer, Options) error{
		"plan": func(w io.Writer, o Options) error {
			return Plan(w, &engine.PlanOutcome{Run: engine.Run{ID: "P", Kind: engine.KindPlan}}, o)
		},
		"apply": func(w io.Writer, o Options) error { return Apply(w, &engine.RunStory{Run: bare}, o) },
		"story": func(w io.Writer, o Options) error {
			return RunStory(w, &engine.RunStory{Run: engine.Run{ID: "P", Kind: engine.KindPlan}}, o)
		},
		"failed": func(w io.Writer, o Options) error {
			r := bare
			r.Status = engine.StatusFailed
			return Apply(w, &engine.RunStory{Run: r}, o)
		},
		"why": func(w io.Writer, o Options) error {
			return Why(w, &engine.Why{Run: bare, Verdict: engine.VerdictRefused}, o)
		},
		"status": func(w io.Writer, o Options) error { return Status(w, &engine.Status{}, o) },
		"since":  func(w io.Writer, o Options) error { return SincePlan(w, &engine.SincePlan{}, engine.Run{}, o) },
		"history": func(w io.Writer, o Options) error {
			return History(w, engine.State{Name: "s"}, []engine.HistoryEntry{{}}, o)
		},
		"runs":   func(w io.Writer, o Options) error { return Runs(w, []engine.Run{{}}, RunsPage{More: true}, o) },
		"states": func(w io.Writer, o Options) error { return States(w, nil, o) },
		"fp": func(w io.Writer, o Options) error {
			return Footprint(w, "-", engine.Footprint{}, engine.PlanSummary{}, o)
		},
	}
	for name, r := range renders {
		for _, f := range formats {
			var b bytes.Buffer
			if err := r(&b, f.o); err != nil {
				t.Errorf("%s as %s: %v", name, f.ext, err)
			}
		}
	}
	if err := Apply(io.Discard, &engine.RunStory{Run: engine.Run{Kind: engine.KindPlan}}, Options{}); err == nil {
		t.Errorf("Apply accepted the story of a plan run")
	}
}

// TestErrorDocument: the kilolock/error/v1 document is the error's words
// and the exit code, whatever Options a caller holds.
func TestErrorDocument(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	err := errors.New(`plan run P was already applied by run A; a plan applies at most once: plan again`)
	if err := ErrorDocument(&b, err, 3); err != nil {
		t.Fatal(err)
	}
	want := `{
  "schema": "kilolock/error/v1",
  "error": "plan run P was already applied by run A; a plan applies at most once: plan again",
  "code": 3
}
`
	if b.String() != want {
		t.Errorf("ErrorDocument =\n%s\nwant\n%s", b.String(), want)
	}

	// An error of a kind says it in "kind", not in its words.
	b.Reset()
	if err := ErrorDocument(&b, fmt.Errorf("applying: %w", engine.Errorf(engine.ErrNotFound, "run X does not exist")), 1); err != nil {
		t.Fatal(err)
	}
	want = `{
  "schema": "kilolock/error/v1",
  "error": "applying: run X does not exist",
  "kind": "not-found",
  "code": 1
}
`
	if b.String() != want {
		t.Errorf("ErrorDocument of a kind =\n%s\nwant\n%s", b.String(), want)
	}
}
