package report

import (
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// TestReplanCommandKeepsTheLane: the re-plan a refused native-lane apply
// suggests is a native-lane plan of the same scope (a fresh-eyes tester
// copied one that had dropped the lane and planned the whole state).
func TestReplanCommandKeepsTheLane(t *testing.T) {
	plan := &engine.Run{State: "s", Envelope: &engine.Envelope{
		Lane:  engine.LaneNative,
		Scope: engine.Scope{Dir: "/w/head", ChangedFiles: []string{"main.tf", "m/x.tf"}},
		Slice: &engine.Slice{Scoped: "changed-files"},
	}}
	want := "kl plan --state s -C /w/head --lane native --changed-file main.tf --changed-file m/x.tf --base-dir BASE"
	if got := replanCommand(engine.Run{State: "s"}, plan); got != want {
		t.Errorf("re-plan of a native plan scoped to changed files:\n%s\nwant\n%s", got, want)
	}
	plan.Envelope.Scope.ChangedFiles, plan.Envelope.Scope.Targets, plan.Envelope.Slice.Scoped = nil, []string{"terraform_data.r"}, "targets"
	if got, want := replanCommand(engine.Run{State: "s"}, plan), "kl plan --state s -C /w/head --target terraform_data.r --lane native"; got != want {
		t.Errorf("re-plan of a native plan scoped to targets:\n%s\nwant\n%s", got, want)
	}
	plan.Envelope.Lane, plan.Envelope.Slice = engine.LaneTerraform, nil
	if got, want := replanCommand(engine.Run{State: "s"}, plan), "kl plan --state s -C /w/head --target terraform_data.r"; got != want {
		t.Errorf("re-plan of a terraform-lane plan:\n%s\nwant\n%s", got, want)
	}
}
