package terraform

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// TestApplyLogFromStream replays recorded apply streams of Terraform
// 1.11.4: each planned instance with its action and outcome, timings from
// Terraform's @timestamps, the ids it printed, every diagnostic once, and
// its totals line only when it wrote one (ADR 0047).
func TestApplyLogFromStream(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		file      string
		resources []string // "ADDRESS ACTION OUTCOME"
		totals    string
		diags     []string // "SEVERITY SUMMARY ADDRESS CONTEXT"
		slow      string   // an instance that took more than a second
	}{
		"creates, two provisioners failing": {
			file: "apply-sensitive.jsonl",
			resources: []string{"terraform_data.a create applied", "terraform_data.b create applied", "terraform_data.bad create errored",
				"terraform_data.bad2 create errored", "terraform_data.c create applied"},
			diags: []string{`warning Check block assertion failed  check "warn"`,
				`error local-exec provisioner error terraform_data.bad2 resource "terraform_data" "bad2"`,
				`error local-exec provisioner error terraform_data.bad resource "terraform_data" "bad"`},
		},
		"update, delete, replace, create, forget": {
			file: "apply-changes.jsonl",
			resources: []string{"terraform_data.d delete applied", "terraform_data.n create applied", "terraform_data.r replace applied",
				"terraform_data.u update applied"},
			totals: "Apply complete! Resources: 2 added, 1 changed, 2 destroyed.",
			slow:   "terraform_data.n",
		},
		"interrupted": {
			file: "apply-interrupted.jsonl",
			resources: []string{"terraform_data.after create not-started", "terraform_data.fast create applied",
				"terraform_data.slow create errored"},
			diags: []string{`error local-exec provisioner error terraform_data.slow resource "terraform_data" "slow"`,
				"error execution halted  "},
			slow: "terraform_data.slow",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, _ := replay(t, tc.file, phaseApply, time.Second)
			l := s.applyLog()
			var got []string
			for _, r := range l.Resources {
				got = append(got, r.Address+" "+r.Action+" "+string(r.Outcome))
				switch {
				case r.Outcome == engine.ResourceApplied && r.Action != "delete" && (r.IDKey != "id" || len(r.IDValue) != 36):
					t.Errorf("%s: id %s=%q, want the object's id", r.Address, r.IDKey, r.IDValue)
				case r.Outcome != engine.ResourceApplied && r.IDValue != "":
					t.Errorf("%s (%s) has id %q", r.Address, r.Outcome, r.IDValue)
				}
				if slow := time.Duration(r.Elapsed) > time.Second; slow != (r.Address == tc.slow) {
					t.Errorf("%s took %s", r.Address, time.Duration(r.Elapsed))
				}
				if r.Outcome == engine.ResourceNotStarted && r.Elapsed != 0 {
					t.Errorf("%s was never started but took %s", r.Address, time.Duration(r.Elapsed))
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.resources) {
				t.Errorf("resources:\n got %q\nwant %q", got, tc.resources)
			}
			var diags []string
			for _, d := range l.Diagnostics {
				diags = append(diags, strings.Join([]string{d.Severity, d.Summary, d.Address, d.Context}, " "))
				if d.File != "" && (d.Line == 0 || d.Column == 0 || d.EndLine == 0 || d.EndColumn == 0) {
					t.Errorf("%s: range %s:%d.%d-%d.%d", d.Summary, d.File, d.Line, d.Column, d.EndLine, d.EndColumn)
				}
			}
			if fmt.Sprint(diags) != fmt.Sprint(tc.diags) {
				t.Errorf("diagnostics:\n got %q\nwant %q", diags, tc.diags)
			}
			switch {
			case tc.totals == "" && l.Totals != nil:
				t.Errorf("totals %+v; Terraform wrote none", l.Totals)
			case tc.totals != "" && (l.Totals == nil || l.Totals.Message != tc.totals || l.Totals.Operation != "apply"):
				t.Errorf("totals %+v, want %q", l.Totals, tc.totals)
			}
		})
	}
}

// TestApplyLogStarted: an instance Terraform started and reported no end
// of (the stream of a Terraform killed mid-apply) is "started", with the
// time to the last message about it.
func TestApplyLogStarted(t *testing.T) {
	t.Parallel()
	s := newUIStream(phaseApply, nil, discard)
	for _, line := range []string{
		`{"@timestamp":"2026-12-02T01:00:00.000000Z","type":"planned_change","change":{"resource":{"addr":"terraform_data.r"},"action":"replace"}}`,
		`{"@timestamp":"2026-12-02T01:00:00.100000Z","type":"apply_start","hook":{"resource":{"addr":"terraform_data.r"},"action":"delete"}}`,
		`{"@timestamp":"2026-12-02T01:00:00.200000Z","type":"apply_complete","hook":{"resource":{"addr":"terraform_data.r"},"action":"delete","elapsed_seconds":0}}`,
		`{"@timestamp":"2026-12-02T01:00:00.300000Z","type":"apply_start","hook":{"resource":{"addr":"terraform_data.r"},"action":"create"}}`,
		`{"@timestamp":"2026-12-02T01:00:10.300000Z","type":"apply_progress","hook":{"resource":{"addr":"terraform_data.r"},"action":"create","elapsed_seconds":10}}`,
	} {
		if _, err := s.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	s.close()
	l := s.applyLog()
	want := engine.ResourceApply{Address: "terraform_data.r", Action: "replace", Outcome: engine.ResourceStarted, Elapsed: engine.Duration(10200 * time.Millisecond)}
	if len(l.Resources) != 1 || l.Resources[0] != want {
		t.Errorf("resources %+v, want %+v", l.Resources, want)
	}
}
