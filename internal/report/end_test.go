package report

import (
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// TestSupersededText: what superseded a plan is put into words from its
// typed reason (klbot's), or from the caller's words.
func TestSupersededText(t *testing.T) {
	t.Parallel()
	pr := &engine.PullRequest{Repo: "acme/infra", Number: 42}
	for name, tc := range map[string]struct {
		end  *engine.End
		want string
	}{
		"newer plan": {&engine.End{Cause: engine.CauseSuperseded, Superseded: engine.SupersededByNewerPlan, PR: pr, Commit: "0123456789abcdef"},
			"superseded by a newer plan of acme/infra#42 at 0123456"},
		"closed":       {&engine.End{Cause: engine.CauseSuperseded, Superseded: engine.SupersededByClosedPR, PR: pr}, "acme/infra#42 was closed without applying it"},
		"own words":    {&engine.End{Cause: engine.CauseSuperseded, Why: "replaced by hand"}, "replaced by hand"},
		"nothing said": {&engine.End{Cause: engine.CauseSuperseded}, "something newer replaced it"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := EndText("01P", tc.end); got != tc.want {
				t.Errorf("EndText = %q, want %q", got, tc.want)
			}
			m := engine.Marker{Kind: engine.MarkerFailed, End: tc.end}
			if got := markerText(m); got != "superseded: "+tc.want {
				t.Errorf("markerText = %q, want the same after \"superseded: \"", got)
			}
		})
	}
}
