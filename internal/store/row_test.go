package store_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/store"
)

var update = flag.Bool("update", false, "rewrite the row goldens (a change is a new row version and its migration)")

// fullRun is a run with every field of the row encoding set.
func fullRun() engine.Run {
	at := time.Date(2026, 12, 1, 2, 3, 4, 0, time.UTC)
	pr := &engine.PullRequest{Repo: "acme/infra", Number: 7, HeadSHA: "abc", URL: "https://github.com/acme/infra/pull/7"}
	return engine.Run{
		ID: "01APPLY", Kind: engine.KindApply, State: "acme/infra/prod", Actor: "erin", Holder: engine.Holder{Host: "ci", PID: 7},
		Status: engine.StatusFailed, PR: pr, CreatedAt: at, UpdatedAt: at, FinishedAt: &at, LeaseUntil: at,
		End: &engine.End{Cause: engine.CauseLeaseLost, Serial: 9, TerraformDone: true, NoChange: true,
			Lost: []engine.LostWrite{{Address: "terraform_data.a", Serial: 8, Run: "01OTHER"}},
			Then: &engine.End{Cause: engine.CauseTerraformFailed, Terraform: &engine.TerraformFailure{Command: "apply",
				Diagnostics: []engine.Diagnostic{{Severity: "error", Summary: "boom", Address: "terraform_data.a", File: "main.tf", Line: 3}}}}},
		ApplyRun: "01X", ReplanOf: "01Y", PlanRun: "01PLAN", CommittedSerial: 9,
		AllowedBecause: []engine.Fact{{Kind: engine.FactDisjointWrites, Run: "01OTHER", OwnWrite: engine.AddressSet{"terraform_data.a"}}},
		SincePlan:      &engine.SincePlan{PlanRun: "01PLAN", SourceSerial: 7, HeadSerial: 8},
		Envelope:       &engine.Envelope{Actor: "erin", State: "acme/infra/prod", SourceSerial: 7, Lane: engine.LaneTerraform, PlanDigest: "sha256:x"},
	}
}

// fullMarker is a marker with every field of the row encoding set.
func fullMarker() engine.Marker {
	f := false
	return engine.Marker{
		Seq: 3, At: time.Date(2026, 12, 1, 2, 3, 4, 0, time.UTC), Kind: engine.MarkerReplanned, Other: "01RP",
		OtherPR: &engine.PullRequest{Repo: "acme/infra", Number: 7}, Addresses: engine.AddressSet{"terraform_data.a"},
		Serial: 8, FromSerial: 7, Mode: engine.CommitSnapshotMerge, Count: 2, SincePlan: &engine.SincePlanSummary{SourceSerial: 7, HeadSerial: 8},
		Class: engine.ClassReadChanged, IntentChanged: &f, Deviation: &engine.Deviation{Unplanned: engine.AddressSet{"terraform_data.b"}},
		Waited: engine.Duration(time.Second), Serials: []int64{8}, End: &engine.End{Cause: engine.CauseWaiting},
		Reason: "local.x: dynamic", Extra: map[string]string{"outside": "terraform_data.c"},
	}
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got string) {
	t.Helper()
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, []byte(got), "", "  "); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, append(pretty.Bytes(), '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != pretty.String()+"\n" {
		t.Errorf("%s changed: the stored row format is not engine.Run's or engine.Marker's JSON; a change to it is a new "+
			"store.RowVersion with its migration (store/row.go). Got:\n%s", path, pretty.String())
	}
}

// TestRowGolden pins the row encoding of runs.body and markers.body
// (version store.RowVersion): renaming a field of the domain types must
// not silently change what is stored; and a row decodes to what was
// encoded.
func TestRowGolden(t *testing.T) {
	t.Parallel()
	r := fullRun()
	body, err := store.EncodeRun(r)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "run-row-v2.json", body)
	back, err := store.DecodeRun(body)
	if err != nil || !reflect.DeepEqual(back, r) {
		t.Errorf("DecodeRun(EncodeRun(r)) = %+v, %v; want r", back, err)
	}
	m := fullMarker()
	mb, err := store.EncodeMarker(m)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "marker-row-v2.json", mb)
	mback, err := store.DecodeMarker(mb)
	if err != nil || !reflect.DeepEqual(mback, m) {
		t.Errorf("DecodeMarker(EncodeMarker(m)) = %+v, %v; want m", mback, err)
	}
}

// TestRowNewer: a row of a newer encoding than this binary's is refused
// with ErrInvalid, naming the version, not read wrongly.
func TestRowNewer(t *testing.T) {
	t.Parallel()
	if _, err := store.DecodeRun(`{"v":3,"id":"01R"}`); err == nil || !errorsIs(err, engine.ErrInvalid) {
		t.Errorf("DecodeRun of v3 = %v; want ErrInvalid", err)
	}
	if _, err := store.DecodeMarker(`{"v":3}`); err == nil || !errorsIs(err, engine.ErrInvalid) {
		t.Errorf("DecodeMarker of v3 = %v; want ErrInvalid", err)
	}
}

// TestLegacyEnd: the reasons of version-1 rows the migration can type,
// and the rest kept as Legacy.
func TestLegacyEnd(t *testing.T) {
	t.Parallel()
	plan := engine.Run{Kind: engine.KindPlan, Status: engine.StatusSuperseded}
	for name, tc := range map[string]struct {
		run             engine.Run
		reason, by, why string
		want            *engine.End
	}{
		"applied":         {run: engine.Run{Kind: engine.KindApply, Status: engine.StatusApplied}, want: &engine.End{Cause: engine.CauseApplied}},
		"no changes":      {run: engine.Run{Kind: engine.KindApply, Status: engine.StatusApplied}, reason: "the plan has no changes: nothing applied, nothing committed", want: &engine.End{Cause: engine.CauseNothingToApply}},
		"discarded":       {run: plan, reason: "discarded by erin: old", by: "erin", why: "old", want: &engine.End{Cause: engine.CauseDiscarded, By: "erin", Why: "old"}},
		"superseded":      {run: plan, reason: "a newer push", want: &engine.End{Cause: engine.CauseSuperseded, Why: "a newer push"}},
		"anything else":   {run: engine.Run{Kind: engine.KindApply, Status: engine.StatusFailed}, reason: "terraform apply: boom", want: &engine.End{Legacy: "terraform apply: boom"}},
		"open, no reason": {run: engine.Run{Kind: engine.KindPlan, Status: engine.StatusPlanned}},
		"applied plan: no end, as the engine writes": {run: engine.Run{Kind: engine.KindPlan, Status: engine.StatusApplied}},
		"interrupted, committed": {run: engine.Run{Kind: engine.KindApply, Status: engine.StatusInterrupted, CommittedSerial: 4},
			reason: "interrupted during terraform apply: committed what Terraform wrote",
			want:   &engine.End{Cause: engine.CauseInterrupted, Phase: engine.PhaseTerraformApply, Serial: 4}},
		"interrupted, nothing committed (the old words said otherwise)": {run: engine.Run{Kind: engine.KindApply, Status: engine.StatusInterrupted},
			reason: "interrupted during terraform apply: committed what Terraform wrote",
			want:   &engine.End{Cause: engine.CauseInterrupted, Phase: engine.PhaseTerraformApply}},
		"interrupted while waiting": {run: engine.Run{Kind: engine.KindApply, Status: engine.StatusInterrupted},
			reason: "interrupted while waiting for reservations", want: &engine.End{Cause: engine.CauseInterrupted, Phase: engine.PhaseWaiting}},
		"lease on reservations, recoverable": {run: engine.Run{ID: "01A", Kind: engine.KindApply, Status: engine.StatusLeaseExpired},
			reason: "its holder ci-7:42 stopped renewing: the lease on its reservations ran out at 2026-11-01T02:03:04Z; Terraform had started applying: `kl run recover 01A` commits what it last wrote",
			want: &engine.End{Cause: engine.CauseLeaseExpired, Holder: engine.Holder{Host: "ci-7", PID: 42},
				LeaseEnd: time.Date(2026, 11, 1, 2, 3, 4, 0, time.UTC), Recoverable: true}},
		"recovered since: no longer recoverable": {run: engine.Run{ID: "01A", Kind: engine.KindApply, Status: engine.StatusLeaseExpired, CommittedSerial: 5},
			reason: "its holder ci-7:42 stopped renewing while applying: its lease ran out at 2026-11-01T02:03:04Z; Terraform had started applying: `kl run recover 01A` commits what it last wrote",
			want: &engine.End{Cause: engine.CauseLeaseExpired, Holder: engine.Holder{Host: "ci-7", PID: 42}, Phase: engine.PhaseApplying,
				LeaseEnd: time.Date(2026, 11, 1, 2, 3, 4, 0, time.UTC)}},
		"the hint alone": {run: engine.Run{ID: "01A", Kind: engine.KindApply, Status: engine.StatusLeaseExpired},
			reason: "Terraform had started applying: `kl run recover 01A` commits what it last wrote", want: &engine.End{Cause: engine.CauseLeaseExpired, Recoverable: true}},
		"plan of a lapsed apply": {run: engine.Run{Kind: engine.KindPlan, Status: engine.StatusFailed},
			reason: "apply run 01A lost its lease before it committed (holder ci-7:42 stopped renewing; its lease ran out at 2026-11-01T02:03:04Z): Terraform may have changed infrastructure; re-plan",
			want:   &engine.End{Cause: engine.CauseApplyLeaseExpired, Run: "01A", Holder: engine.Holder{Host: "ci-7", PID: 42}, LeaseEnd: time.Date(2026, 11, 1, 2, 3, 4, 0, time.UTC)}},
		"plan of a partial apply": {run: engine.Run{Kind: engine.KindPlan, Status: engine.StatusFailed},
			reason: "apply run 01A failed part-way; its partial result is version 7: re-plan", want: &engine.End{Cause: engine.CauseApplyPartial, Run: "01A", Serial: 7}},
		"plan of a recovered apply": {run: engine.Run{Kind: engine.KindPlan, Status: engine.StatusFailed},
			reason: "apply run 01A stopped part-way; `kl run recover` committed what Terraform had written as version 8: re-plan",
			want:   &engine.End{Cause: engine.CauseApplyRecovered, Run: "01A", Serial: 8}},
		"plan found stale by an apply": {run: engine.Run{Kind: engine.KindPlan, Status: engine.StatusStale, ApplyRun: "01A"},
			reason: "apply run 01A: plan 01P is stale: planned target changed: version 3 changed terraform_data.a; re-plan",
			want:   &engine.End{Cause: engine.CauseApplyEnded, Run: "01A", Then: &engine.End{Legacy: "plan 01P is stale: planned target changed: version 3 changed terraform_data.a; re-plan"}}},
		"re-plan check": {run: engine.Run{Kind: engine.KindPlan, Status: engine.StatusSuperseded},
			reason: "re-check for apply run 01A: intent unchanged; the reviewed plan 01P was applied", want: &engine.End{Cause: engine.CauseReplanChecked, Run: "01A", Plan: "01P"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := store.LegacyEnd(tc.run, tc.reason, tc.by, tc.why); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("LegacyEnd = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
