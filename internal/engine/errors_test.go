package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestStatusErrorWords: each refusal of a plan that is not open says why in
// the operator's words — a discard by whom, when and why, taken from the
// run's fields, so an actor with ": " in its name is not split.
func TestStatusErrorWords(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		err        StatusError
		want, deny []string
	}{
		"discarded with a reason": {
			err:  StatusError{Run: "P", Kind: KindPlan, Status: StatusSuperseded, At: at, End: &End{Cause: CauseDiscarded, By: "ops: team", Why: "obsolete"}},
			want: []string{"plan run P was discarded by ops: team at 2026-11-29T12:00:00Z (obsolete) and cannot be applied"},
			deny: []string{"superseded"},
		},
		"discarded without a reason": {
			err:  StatusError{Run: "P", Kind: KindPlan, Status: StatusSuperseded, End: &End{Cause: CauseDiscarded, By: "alice"}},
			want: []string{"plan run P was discarded by alice and cannot be applied: plan again"},
		},
		"superseded by a push": {
			err:  StatusError{Run: "P", Kind: KindPlan, Status: StatusSuperseded, End: &End{Cause: CauseSuperseded, Why: "a newer push"}},
			want: []string{"plan run P is superseded and cannot be applied (see `kl why P`)"},
			deny: []string{"was discarded"},
		},
		"applied": {
			err:  StatusError{Run: "P", Kind: KindPlan, Status: StatusApplied, By: "A"},
			want: []string{"plan run P was already applied by run A"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			msg := tc.err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("Error() = %q; want %q in it", msg, w)
				}
			}
			for _, d := range tc.deny {
				if strings.Contains(msg, d) {
					t.Errorf("Error() = %q; must not say %q", msg, d)
				}
			}
		})
	}
}

// TestFencedErrorWords: the error of an apply refused over a fence (what
// kl prints after "kl: ") names the fenced run as fencing, not holding,
// its addresses, when its Terraform started, and both commands that lift
// the fence with the run's own id (ADR 0035 decision 2); a live blocker
// beside it holds its addresses.
func TestFencedErrorWords(t *testing.T) {
	t.Parallel()
	started := time.Date(2026, 12, 1, 22, 45, 28, 0, time.FixedZone("CET", 3600))
	err := &FencedError{&ConflictError{State: "prod", Run: "B", Blockers: []Blocker{
		{Run: "A", PR: &PullRequest{Repo: "acme/infra", Number: 7}, Addresses: NewAddressSet("kltest_object.x"), Fenced: true, TerraformStarted: started},
		{Run: "C", Addresses: NewAddressSet("kltest_object.y")},
	}}}
	msg := err.Error()
	for _, w := range []string{
		"reservations for run B on state prod refused: ",
		"run A (acme/infra#7) fences kltest_object.x (its holder died while its Terraform ran, started at 2026-12-01T21:45:28Z)",
		"run C holds kltest_object.y",
		"`kl run recover A` commits what its Terraform last wrote, or, after checking the real objects, `kl run unfence A --reason TEXT` lifts the fence",
	} {
		if !strings.Contains(msg, w) {
			t.Errorf("Error() = %q; want %q in it", msg, w)
		}
	}
	for _, d := range []string{"A (acme/infra#7) holds", "RUN", "conflict"} {
		if strings.Contains(msg, d) {
			t.Errorf("Error() = %q; must not say %q", msg, d)
		}
	}
}

// TestStaleErrorAbbreviates: a version that changed many instances (ADR
// 0065) is named with its first addresses and a count of the rest.
func TestStaleErrorAbbreviates(t *testing.T) {
	t.Parallel()
	var as []Address
	for i := range 20 {
		as = append(as, MustParseInstanceAddress(fmt.Sprintf(`module.dns.terraform_data.record["k%02d"]`, i)))
	}
	err := &StaleError{PlanRun: "P", Entries: []SincePlanEntry{{Serial: 6, Run: "R", Addresses: NewAddressSet(as...)}}}
	got := err.Error()
	want := `plan P is stale: planned target changed: version 6 (run R) changed module.dns.terraform_data.record["k00"], ` +
		`module.dns.terraform_data.record["k01"], module.dns.terraform_data.record["k02"], module.dns.terraform_data.record["k03"], ` +
		`module.dns.terraform_data.record["k04"], module.dns.terraform_data.record["k05"], module.dns.terraform_data.record["k06"], ` +
		`module.dns.terraform_data.record["k07"] and 12 more; re-plan`
	if got != want {
		t.Errorf("StaleError = %q\nwant         %q", got, want)
	}
}
