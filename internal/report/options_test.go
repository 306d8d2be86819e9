package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// planWithOptions is alice's plan made with Terraform plan options (ADR
// 0045): -destroy, -refresh=false, -parallelism=4 and two -var options,
// whose values no view holds.
func planWithOptions() *engine.PlanOutcome {
	r := planRunA(engine.StatusPlanned, "")
	r.Envelope.Scope.Options = engine.PlanOptions{Destroy: true, NoRefresh: true, Parallelism: 4, Vars: []string{"region", "token"}}
	r.Envelope.Summary = engine.PlanSummary{Destroy: 3, Outputs: 1}
	return &engine.PlanOutcome{Run: r}
}

// planRefreshOnly is a refresh-only plan: it records one object changed
// outside Terraform (PlanSummary.Refresh), its write set.
func planRefreshOnly() *engine.PlanOutcome {
	r := planRunA(engine.StatusPlanned, "")
	env := r.Envelope
	env.Scope.Options = engine.PlanOptions{RefreshOnly: true}
	env.Footprint = engine.Footprint{Write: set(web)}
	env.Reservations = env.Footprint.Reservations()
	env.Summary = engine.PlanSummary{Refresh: 1}
	return &engine.PlanOutcome{Run: r}
}

// storyRefusedStaleOptions is storyRefusedStale of a plan made with plan
// options: the re-plan it names repeats them.
func storyRefusedStaleOptions(vars ...string) *engine.RunStory {
	s := storyRefusedStale()
	p := *s.Plan
	env := *p.Envelope
	env.Scope.Options = engine.PlanOptions{Destroy: true, Parallelism: 4, Vars: vars}
	p.Envelope = &env
	s.Plan = &p
	return s
}

// TestReplanRepeatsOptions: the re-plan a stale plan's apply names is made
// with the plan's options — on the command line after "--", in klbot's
// comment after "--" — and with -var options it names the variables with
// a placeholder, hands no machine a command (next_command), and leaves
// kl's command on a pull request (no comment carries a -var).
func TestReplanRepeatsOptions(t *testing.T) {
	t.Parallel()
	render := func(s *engine.RunStory, o Options) string {
		t.Helper()
		var b bytes.Buffer
		if err := Apply(&b, s, o); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	text := render(storyRefusedStaleOptions(), Options{Format: Text})
	if want := "-C infra/prod -- -destroy -parallelism=4"; !strings.Contains(text, want) {
		t.Errorf("the re-plan command does not repeat the options (%q):\n%s", want, text)
	}
	md := render(storyRefusedStaleOptions(), Options{Format: Markdown, Commands: &Commands{PR: pr(42), Project: "app"}})
	if want := "`/kl plan -p app -- -destroy -parallelism=4`"; !strings.Contains(md, want) {
		t.Errorf("the re-plan comment does not repeat the options (%q):\n%s", want, md)
	}
	js := render(storyRefusedStaleOptions(), Options{Format: JSON})
	if want := `"next_command": "kl plan --state acme/infra/prod -C infra/prod -- -destroy -parallelism=4"`; !strings.Contains(js, want) {
		t.Errorf("the JSON does not hold %s:\n%s", want, js)
	}

	withVars := storyRefusedStaleOptions("region")
	text = render(withVars, Options{Format: Text})
	if want := "-- -destroy -parallelism=4 -var region=VALUE"; !strings.Contains(text, want) || !strings.Contains(text, "with the values of its -var options") {
		t.Errorf("the re-plan command of a plan with -var does not name it with a placeholder (%q):\n%s", want, text)
	}
	if js := render(withVars, Options{Format: JSON}); strings.Contains(js, `"next_command": "kl plan`) {
		t.Errorf("a next_command is handed a machine, but VALUE is a placeholder:\n%s", js)
	}
	md = render(withVars, Options{Format: Markdown, Commands: &Commands{PR: pr(42), Project: "app"}})
	if strings.Contains(md, "/kl plan -p app") {
		t.Errorf("a comment is named for a re-plan with -var, which no comment may carry:\n%s", md)
	}
}
