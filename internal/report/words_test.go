package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

func TestDurationWords(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		in   time.Duration
		want string
	}{
		"zero":             {0, "0s"},
		"sub-millisecond":  {300 * time.Microsecond, "<1ms"},
		"milliseconds":     {350*time.Millisecond + 400*time.Microsecond, "350ms"},
		"rounds up to 1s":  {999600 * time.Microsecond, "1s"},
		"tenths":           {4784236607, "4.8s"},
		"whole seconds":    {5 * time.Second, "5s"},
		"minute boundary":  {59960 * time.Millisecond, "1m"},
		"minutes":          {72*time.Second + 400*time.Millisecond, "1m12s"},
		"whole minutes":    {3 * time.Minute, "3m"},
		"hours":            {2*time.Hour + 5*time.Minute + 20*time.Second, "2h5m"},
		"whole hours":      {2 * time.Hour, "2h"},
		"negative (clock)": {-time.Second, "0s"},
	} {
		if got := durationWords(engine.Duration(c.in)); got != c.want {
			t.Errorf("%s: durationWords(%v) = %q, want %q", name, c.in, got, c.want)
		}
	}
}

// TestAnnotate checks where the class of a marker comes from: the engine's
// Class first, then the stored since-plan (staleness) or the reviewed
// footprint (re-plan), never the Reason text.
func TestAnnotate(t *testing.T) {
	t.Parallel()
	fp := footprintA()
	sp := sincePlan(15, entry13(), entry14(), entry15Write())
	changed := ptrBool(true)
	for name, c := range map[string]struct {
		m    engine.Marker
		fp   *engine.Footprint
		want engine.SincePlanClass
	}{
		"engine class wins": {engine.Marker{Kind: engine.MarkerReplanned, IntentChanged: changed, Addresses: set(web),
			Class: engine.ClassReadChanged}, &fp, engine.ClassReadChanged},
		"re-plan differs on the write set": {engine.Marker{Kind: engine.MarkerReplanned, IntentChanged: changed,
			Addresses: set(web, vpc)}, &fp, engine.ClassWriteChanged},
		"re-plan differs on the read set only": {engine.Marker{Kind: engine.MarkerReplanned, IntentChanged: changed,
			Addresses: set(vpc, "module.shared.terraform_data.x")}, &fp, engine.ClassReadChanged},
		"re-plan differs, no addresses": {engine.Marker{Kind: engine.MarkerReplanned, IntentChanged: changed}, &fp, engine.ClassWriteChanged},
		"no footprint, no class":        {engine.Marker{Kind: engine.MarkerReplanned, IntentChanged: changed, Addresses: set(vpc)}, nil, ""},
		"intent unchanged":              {engine.Marker{Kind: engine.MarkerReplanned, IntentChanged: ptrBool(false)}, &fp, ""},
		"staleness from since-plan": {engine.Marker{Kind: engine.MarkerStalenessFailed, Serial: 14,
			Reason: engine.ClassWriteChanged.Label()}, nil, engine.ClassReadChanged},
	} {
		got := annotate([]engine.Marker{c.m}, c.fp, sp)[0].Class
		if got != c.want {
			t.Errorf("%s: class = %q, want %q", name, got, c.want)
		}
	}
}

// TestOverlapLegend checks that a plan view explains only the ways of
// overlapping that appear, one per line, each starting with its kind.
func TestOverlapLegend(t *testing.T) {
	t.Parallel()
	out := planTargetedReplace() // one overlap: both write
	var b bytes.Buffer
	if err := Plan(&b, out, Options{Format: Text}); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	if !strings.Contains(got, "\n  both write: they never apply at once;") {
		t.Errorf("no legend line for both write:\n%s", got)
	}
	for _, how := range []string{howYouWrite, howItWrites} {
		if strings.Contains(got, how+":") {
			t.Errorf("legend explains %q, which does not appear:\n%s", how, got)
		}
	}
}

// TestReplanOutcomes checks the ends of a re-check by re-planning in the
// apply view: the re-plan applied (or, stored before issue 10 §2, the
// reviewed plan applied to its own snapshot), the re-plan open for review
// (another intent, a change outside the footprint, a reservation beyond
// those held), the configuration behind the head.
func TestReplanOutcomes(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		story   *engine.RunStory
		want    []string
		notWant []string
	}{
		"unchanged": {storyWaitedReplanned(), []string{
			"re-planned against head 14, intent unchanged: applied the re-plan " + replanA,
			"applied plan digest  " + storyWaitedReplanned().Version.Provenance.AppliedPlanDigest,
		}, []string{"applied the reviewed plan", "to its own snapshot", "it was a check"}},
		"unchanged, stored before": {storyLegacyReplanChecked(), []string{
			"re-checked by re-plan " + replanA + " against head 14: intent unchanged; applied the reviewed plan",
			"to its own snapshot (serial 12)",
		}, []string{"applied the re-plan", "applied plan digest"}},
		"outside the footprint": {storyRefusedOutside(), []string{"re-plan changes outside the reviewed footprint", string(cache),
			"review and apply " + replanA, "planned: open for review"}, []string{"applied"}},
		"beyond the reservations": {storyRefusedBeyond(), []string{"re-plan needs reservations beyond those held", "read " + string(cache),
			"review and apply " + replanA, "planned: open for review"}, []string{"applied"}},
		"write set": {storyRefusedIntent(), []string{"review and apply " + replanA, "planned: open for review"}, nil},
		"read set": {storyRefusedBehindHead(), []string{"configuration behind the head",
			"superseded: not applicable: it would revert changes of newer versions"}, []string{"kl apply " + replanA}},
	} {
		var b bytes.Buffer
		if err := Apply(&b, c.story, Options{Format: Text}); err != nil {
			t.Fatal(err)
		}
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: apply view lacks %q:\n%s", name, w, b.String())
			}
		}
		for _, w := range c.notWant {
			if strings.Contains(b.String(), w) {
				t.Errorf("%s: apply view says %q:\n%s", name, w, b.String())
			}
		}
	}
}

// undeclared is Terraform's diagnostic for a reference to a resource the
// configuration does not declare.
var undeclared = engine.Diagnostic{Severity: "error", Summary: "Reference to undeclared resource",
	Detail: `A managed resource "terraform_data.nope" has not been declared in the root module.`, File: "main.tf", Line: 3}

// tfFailed is the end of a run whose Terraform command failed as f says.
func tfFailed(f engine.TerraformFailure) *engine.End {
	return &engine.End{Cause: engine.CauseTerraformFailed, Terraform: &f}
}

// TestEndGist: the gist of an end for a table is what Terraform said (its
// diagnostics, else its stderr or the cause), or the error a step of
// Kilolock's own failed with, without the engine's sentinel — not the
// context around them; at most 60 runes.
func TestEndGist(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		end  *engine.End
		want string
	}{
		"terraform diagnostic: its summary and detail, clipped": {
			end:  tfFailed(engine.TerraformFailure{Command: "plan", Diagnostics: []engine.Diagnostic{undeclared}}),
			want: `Reference to undeclared resource: A managed resource "terra…`,
		},
		"terraform diagnostics, joined": {
			end: tfFailed(engine.TerraformFailure{Command: "plan", Diagnostics: []engine.Diagnostic{
				{Severity: "error", Summary: "Unsupported block type"}, {Severity: "error", Summary: "Missing name"}}}),
			want: `Unsupported block type; Missing name`,
		},
		"terraform stderr without diagnostics": {
			end:  tfFailed(engine.TerraformFailure{Command: "init", Stderr: "Failed to query available provider packages"}),
			want: `Failed to query available provider packages`,
		},
		"terraform interrupted: the cause": {
			end:  tfFailed(engine.TerraformFailure{Command: "plan", Cause: "interrupted: context canceled"}),
			want: `interrupted: context canceled`,
		},
		"terraform said nothing: the sentence": {
			end:  tfFailed(engine.TerraformFailure{Command: "show"}),
			want: `terraform show`,
		},
		"a step's Terraform failure: the diagnostic": {
			end: &engine.End{Cause: engine.CauseFailed, Step: engine.StepReplan, Run: replanA,
				Err:       `terraform plan: Reference to undeclared resource`,
				Terraform: &engine.TerraformFailure{Command: "plan", Diagnostics: []engine.Diagnostic{{Severity: "error", Summary: "Reference to undeclared resource"}}}},
			want: `Reference to undeclared resource`,
		},
		"failed step: its error, not the step": {
			end:  &engine.End{Cause: engine.CauseFailed, Step: engine.StepStoreArtifact, Artifact: engine.ArtifactPlanFile, Err: "writing artifact: database is locked"},
			want: `writing artifact: database is locked`,
		},
		"failed step of a kind: its error, whole (no label in it)": {
			end: &engine.End{Cause: engine.CauseFailed, Step: engine.StepPlan, Kind: engine.KindInvalid,
				Err: "copying configuration tree /w/cfg: larger than 64 MiB or 10000 entries"},
			want: `copying configuration tree /w/cfg: larger than 64 MiB or 10…`,
		},
		"not found kind: whole": {
			end:  &engine.End{Cause: engine.CauseFailed, Step: engine.StepReadHead, Kind: engine.KindNotFound, Err: "version 14 of state s is gone"},
			want: `version 14 of state s is gone`,
		},
		"errno keeps what it names": {
			end:  &engine.End{Cause: engine.CauseFailed, Step: engine.StepPlan, Err: "var file prod.tfvars: no such file or directory"},
			want: `var file prod.tfvars: no such file or directory`,
		},
		"lineage: the sentence": {
			end:  &engine.End{Cause: engine.CauseFailed, Step: engine.StepCheckLineage, Lineage: "a", StateLineage: "b"},
			want: `plan made against lineage a, state has b`,
		},
		"long error is clipped": {
			end:  &engine.End{Cause: engine.CauseFailed, Step: engine.StepReadChanged, Err: strings.Repeat("y", 80)},
			want: strings.Repeat("y", 59) + "…",
		},
		"discard": {
			end:  &engine.End{Cause: engine.CauseDiscarded, By: "tester", Why: "obsolete"},
			want: `discarded by tester: obsolete`,
		},
		"legacy: as stored": {
			end:  &engine.End{Legacy: "terraform plan: exit status 1: Error: Unsupported block type"},
			want: `terraform plan: exit status 1: Error: Unsupported block type`,
		},
		"legacy is clipped": {
			end:  &engine.End{Legacy: strings.Repeat("z", 70)},
			want: strings.Repeat("z", 59) + "…",
		},
		"no end": {end: nil, want: ``},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := endGist(planA, tc.end, 60); got != tc.want {
				t.Errorf("endGist(%+v)\n got %q\nwant %q", tc.end, got, tc.want)
			}
		})
	}
}

// TestWhatFailedPlan: the "what" of `kl runs` for a plan that failed is
// the gist of its end, naming what went wrong — not a bare sentinel
// ("invalid input") or the step around it.
func TestWhatFailedPlan(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		end  *engine.End
		want string
	}{
		"no configuration": {
			end: &engine.End{Cause: engine.CauseFailed, Step: engine.StepPlan, Kind: engine.KindInvalid,
				Err: "no Terraform configuration files in /w/cfg: a plan would destroy every resource of the state; refusing (a destroy-everything plan needs an explicit request, which kl does not offer yet)"},
			want: "no Terraform configuration files in /w/cfg: a plan would de…",
		},
		"missing var file": {
			end:  &engine.End{Cause: engine.CauseFailed, Step: engine.StepPlan, Err: "var file missing.tfvars: no such file or directory"},
			want: "var file missing.tfvars: no such file or directory",
		},
		"terraform diagnostic": {
			end:  tfFailed(engine.TerraformFailure{Command: "plan", Diagnostics: []engine.Diagnostic{undeclared}}),
			want: `Reference to undeclared resource: A managed resource "terra…`,
		},
		"storing an artifact": {
			end:  &engine.End{Cause: engine.CauseFailed, Step: engine.StepStoreArtifact, Artifact: engine.ArtifactPlanFile, Err: "writing artifact: database is locked"},
			want: "writing artifact: database is locked",
		},
		"lease expired while planning": {
			end:  &engine.End{Cause: engine.CauseLeaseExpired, Holder: holder, Phase: engine.PhasePlanning, LeaseEnd: at(660)},
			want: "its holder ci-runner-7:4242 stopped renewing while planning…",
		},
		"legacy": {
			end:  &engine.End{Legacy: "storing plan.tfplan: database is locked"},
			want: "storing plan.tfplan: database is locked",
		},
		"no end": {end: nil, want: "no envelope"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := engine.Run{ID: planA, Kind: engine.KindPlan, Status: engine.StatusFailed, End: tc.end}
			if got := whatWords(r).plain(); got != tc.want {
				t.Errorf("whatWords = %q; want %q", got, tc.want)
			}
		})
	}
}

// TestWhatEndedApply: the "what" of `kl runs` for an apply that did not
// commit names the plan and, in a few words, what stopped it (endShort).
func TestWhatEndedApply(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		status engine.RunStatus
		end    *engine.End
		want   string
	}{
		"conflict":    {engine.StatusRefused, conflictEnd(), "reservations conflict"},
		"waited":      {engine.StatusRefused, &engine.End{Cause: engine.CauseRefusedConflict, Blockers: erinHoldsVPC(), Waited: engine.Duration(3 * time.Second)}, "reservations conflict after waiting 3s"},
		"stale":       {engine.StatusRefused, staleEnd(), "plan is stale"},
		"behind head": {engine.StatusRefused, behindEnd(), engine.ErrBehindHead.Error()},
		"intent":      {engine.StatusRefused, intentEnd(), "re-plan " + replanA + " against head 14 plans so…"},
		"terraform":   {engine.StatusFailed, failEnd(), "terraform apply failed"},
		"interrupted": {engine.StatusInterrupted, interruptEnd(), "interrupted during terraform apply"},
		"waiting":     {engine.StatusInterrupted, &engine.End{Cause: engine.CauseInterrupted, Phase: engine.PhaseWaiting}, "interrupted while waiting for reservations"},
		"lease":       {engine.StatusLeaseExpired, leaseEnd(), "its holder ci-runner-7:4242 stopped renewing"},
		"lease lost":  {engine.StatusFailed, &engine.End{Cause: engine.CauseLeaseLost, Serial: 14}, "lease lost before commit"},
		"claim":       {engine.StatusRefused, &engine.End{Cause: engine.CauseRefusedClaim, Plan: planA, Err: "conflict"}, "claiming plan " + planA},
		"failed step": {engine.StatusFailed, &engine.End{Cause: engine.CauseFailed, Step: engine.StepAcquire, Err: "database is locked"}, "acquiring reservations"},
		"no step":     {engine.StatusFailed, &engine.End{Cause: engine.CauseFailed, Step: engine.StepReadState, Err: "state s does not exist", Kind: engine.KindNotFound}, "state s does not exist"},
		"legacy":      {engine.StatusFailed, &engine.End{Legacy: "committing: database is locked"}, "committing: database is locked"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := engine.Run{ID: applyA, Kind: engine.KindApply, Status: tc.status, PlanRun: planA, End: tc.end}
			want := "plan " + planA + "; " + tc.want
			if got := whatWords(r).plain(); got != want {
				t.Errorf("whatWords = %q; want %q", got, want)
			}
		})
	}
}

// TestDiscardedMarkerWords: the timeline entry of a closed plan's "failed"
// marker says how it was closed: a discard keeps both who discarded it and
// why; a supersede its caller's words; a marker stored before ends were
// typed, its words as stored.
func TestDiscardedMarkerWords(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		m    engine.Marker
		want string
	}{
		"with a reason":    {engine.Marker{End: &engine.End{Cause: engine.CauseDiscarded, By: "tester", Why: "obsolete"}}, "discarded by tester: obsolete"},
		"without a reason": {engine.Marker{End: &engine.End{Cause: engine.CauseDiscarded, By: "tester"}}, "discarded by tester"},
		"superseded":       {engine.Marker{End: &engine.End{Cause: engine.CauseSuperseded, Why: "newer push"}}, "superseded: newer push"},
		"legacy end":       {engine.Marker{End: &engine.End{Legacy: "superseded: the change no longer touches project app"}}, "superseded: the change no longer touches project app"},
		"legacy reason":    {engine.Marker{Reason: "superseded: newer push"}, "superseded: newer push"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := tc.m
			m.Kind = engine.MarkerFailed
			if got := markerWordsOf(m, engine.StatusSuperseded).plain(); got != tc.want {
				t.Errorf("markerWordsOf(%+v) = %q; want %q", m, got, tc.want)
			}
		})
	}
}

// TestEndText: every cause the engine writes reads as a sentence; an apply
// that committed says nothing more than its status.
func TestEndText(t *testing.T) {
	t.Parallel()
	causes := []engine.Cause{
		engine.CauseApplied,
		engine.CauseNothingToApply,
		engine.CauseWaiting,
		engine.CauseRefusedConflict,
		engine.CauseRefusedFenced,
		engine.CauseRefusedStale,
		engine.CauseIntentChanged,
		engine.CauseBehindHead,
		engine.CauseRefusedClaim,
		engine.CauseInterrupted,
		engine.CauseTerraformFailed,
		engine.CauseFailed,
		engine.CauseLeaseExpired,
		engine.CauseLeaseLost,
		engine.CauseApplyEnded,
		engine.CauseApplyPartial,
		engine.CauseApplyLeaseLost,
		engine.CauseApplyRecovered,
		engine.CauseApplyLeaseExpired,
		engine.CauseSuperseded,
		engine.CauseDiscarded,
		engine.CauseReplanChecked,
		engine.CauseReplanApplied,
		engine.CauseReplanReverts,
		engine.CauseOutsideFootprint,
		engine.CauseBeyondReservations,
	}
	for _, c := range causes {
		t.Run(string(c), func(t *testing.T) {
			t.Parallel()
			end := sampleEnd(c)
			got := EndText(applyA, end)
			switch {
			case c == engine.CauseApplied && got != "":
				t.Errorf("EndText(%+v) = %q; want \"\"", end, got)
			case c != engine.CauseApplied && strings.TrimSpace(got) == "":
				t.Errorf("EndText(%+v) is empty", end)
			case c != engine.CauseApplied && got == string(c):
				t.Errorf("EndText(%+v) = %q: the cause's name, not a sentence", end, got)
			}
		})
	}
	if got := EndText(applyA, nil); got != "" {
		t.Errorf("EndText(nil) = %q; want \"\"", got)
	}
	if got := EndText(applyA, &engine.End{Cause: "from-a-newer-kl"}); got != "from-a-newer-kl" {
		t.Errorf("EndText of an unknown cause = %q; want its name", got)
	}
	if got := EndText(applyA, &engine.End{Legacy: "as it was stored"}); got != "as it was stored" {
		t.Errorf("EndText of a legacy end = %q; want it as stored", got)
	}
}

// fencedEnd is the refusal of an apply over the fence of applyA, whose
// holder died while its Terraform ran (ADR 0035).
func fencedEnd() *engine.End {
	return &engine.End{Cause: engine.CauseRefusedFenced, Blockers: []engine.Blocker{{
		Run: applyA, Holder: holder, Addresses: engine.AddressSet{"module.net.terraform_data.vpc"}, Fenced: true, TerraformStarted: at(600),
		Held: []engine.Reservation{{Address: "module.net.terraform_data.vpc", Mode: engine.ModeWrite, Run: applyA, FencedAt: at(720)}},
	}}}
}

// TestFenceWords: a fence is told as a fence — the refusal names the run,
// when its Terraform started and both commands; the fenced run's end says
// "lease expired mid-apply (fenced)"; a waited-for run whose lease ran out
// did not "release" anything; a lifted fence says by whom and why.
func TestFenceWords(t *testing.T) {
	t.Parallel()
	lift := "`kl run recover " + applyA + "` commits what its Terraform last wrote, or, after checking the real objects, `kl run unfence " + applyA + " --reason TEXT`"
	refusal := EndText(applyB, fencedEnd())
	for _, want := range []string{"fenced: run " + applyA + " fences module.net.terraform_data.vpc", "started at " + leaseTime(at(600)), lift} {
		if !strings.Contains(refusal, want) {
			t.Errorf("refusal %q lacks %q", refusal, want)
		}
	}
	if got := endShort(applyB, fencedEnd()); got != "fenced by crashed apply "+applyA {
		t.Errorf("endShort of the refusal = %q", got)
	}
	end := leaseEnd()
	end.Fenced, end.TerraformStarted = engine.AddressSet{"module.net.terraform_data.vpc"}, at(600)
	if got := EndText(applyA, end); !strings.HasPrefix(got, "lease expired mid-apply (fenced)") || !strings.Contains(got, lift) || strings.Contains(got, "released") ||
		!strings.Contains(got, "module.net.terraform_data.vpc stays fenced — no other apply may write or read it —") {
		t.Errorf("fenced run's end = %q", got)
	}
	// A holder that lived gave its lease up after its Terraform was killed
	// (ADR 0043): the end says so, not that the holder stopped renewing.
	killed := *end
	killed.Then = &engine.End{Cause: engine.CauseInterrupted, Phase: engine.PhaseTerraformApply, Terraform: &engine.TerraformFailure{Command: "apply", Killed: true}}
	if got := EndText(applyA, &killed); !strings.HasPrefix(got, "lease expired mid-apply (fenced): Terraform did not stop in time after an interrupt and was killed, so its holder "+holder.String()+" gave up the lease") ||
		strings.Contains(got, "stopped renewing") || !strings.Contains(got, lift) {
		t.Errorf("killed run's end = %q", got)
	}
	killed.Then = &engine.End{Cause: engine.CauseTerraformFailed, Terraform: &engine.TerraformFailure{Command: "apply", Killed: true}}
	if got := EndText(applyA, &killed); !strings.Contains(got, "Terraform was killed (SIGKILL), so its holder") || strings.Contains(got, "interrupt") {
		t.Errorf("end of a run whose Terraform the system killed = %q", got)
	}
	end.Lifted = engine.LiftUnfenced
	if got := EndText(applyA, end); !strings.HasPrefix(got, "lease expired mid-apply (fenced)") || strings.Contains(got, "fenced — no other apply") || !strings.Contains(got, "lifted without a commit") {
		t.Errorf("fenced run's end after an unfence = %q", got)
	}
	end.Lifted = engine.LiftRecovered
	if got := EndText(applyA, end); strings.Contains(got, "fenced — no other apply") || !strings.Contains(got, "lifted by its recovery") {
		t.Errorf("fenced run's end after its recovery = %q", got)
	}
	waited := engine.Fact{Kind: engine.FactWaitedFor, Run: applyA, Addresses: engine.AddressSet{"module.net.terraform_data.vpc"}, Waited: engine.Duration(3e9)}
	if got := factWords(waited, 0, 1).plain(); !strings.HasSuffix(got, ", which released it") {
		t.Errorf("waited for a run that released: %q", got)
	}
	waited.OtherEnd = leaseEnd()
	if got := factWords(waited, 0, 1).plain(); strings.Contains(got, "released it") || !strings.Contains(got, "its lease ran out") {
		t.Errorf("waited for a run whose lease ran out: %q", got)
	}
	m := engine.Marker{Kind: engine.MarkerFenceLifted, Lift: engine.LiftUnfenced, By: "carol", Reason: "checked the VPC",
		Addresses: engine.AddressSet{"module.net.terraform_data.vpc"}}
	if got := markerWords(m).plain(); !strings.HasPrefix(got, "fence lifted by carol on module.net.terraform_data.vpc") || !strings.Contains(got, "checked the VPC") {
		t.Errorf("unfence marker = %q", got)
	}
	m.Lift, m.By, m.Reason = engine.LiftRecovered, "", ""
	if got := markerWords(m).plain(); !strings.Contains(got, "the recovery committed") {
		t.Errorf("recovery's fence-lifted marker = %q", got)
	}
}

// sampleEnd is an end of cause c with the facts the engine (or the lease
// sweep) stores with it.
func sampleEnd(c engine.Cause) *engine.End {
	switch c {
	case engine.CauseWaiting:
		return &engine.End{Cause: c, Blockers: erinHoldsVPC()}
	case engine.CauseRefusedConflict:
		return conflictEnd()
	case engine.CauseRefusedFenced:
		return fencedEnd()
	case engine.CauseRefusedStale:
		return staleEnd()
	case engine.CauseIntentChanged:
		return intentEnd()
	case engine.CauseBehindHead:
		return behindEnd()
	case engine.CauseRefusedClaim:
		return &engine.End{Cause: c, Plan: planA, Err: "run " + planA + " is applying", Kind: engine.KindConflict}
	case engine.CauseInterrupted:
		return interruptEnd()
	case engine.CauseTerraformFailed:
		return failEnd()
	case engine.CauseFailed:
		return &engine.End{Cause: c, Step: engine.StepStoreArtifact, Artifact: engine.ArtifactPlanFile, Err: "writing artifact: database is locked"}
	case engine.CauseLeaseExpired:
		return leaseEnd()
	case engine.CauseLeaseLost:
		return &engine.End{Cause: c, Serial: 14, Then: interruptEnd()}
	case engine.CauseApplyEnded:
		return &engine.End{Cause: c, Run: applyA, Then: staleEnd()}
	case engine.CauseApplyPartial, engine.CauseApplyLeaseLost, engine.CauseApplyRecovered:
		return &engine.End{Cause: c, Run: applyA, Serial: 13}
	case engine.CauseApplyLeaseExpired:
		return &engine.End{Cause: c, Run: applyA, Holder: holder, LeaseEnd: at(720)}
	case engine.CauseSuperseded:
		return &engine.End{Cause: c, Why: "newer push"}
	case engine.CauseDiscarded:
		return &engine.End{Cause: c, By: "carol", Why: "obsolete"}
	case engine.CauseReplanChecked:
		return &engine.End{Cause: c, Run: applyA, Plan: planA}
	case engine.CauseReplanApplied:
		return &engine.End{Cause: c, Run: applyA, Plan: planA, Serial: 15}
	case engine.CauseOutsideFootprint:
		return outsideEnd()
	case engine.CauseBeyondReservations:
		return beyondEnd()
	case engine.CauseReplanReverts:
		return &engine.End{Cause: c, Plan: planA}
	}
	return &engine.End{Cause: c}
}

// TestInert: stored text from other people (actors, reasons, Terraform's
// messages) is printed on one line with every non-printable rune escaped
// (controls, newlines, tabs, invisible and bidi characters), in every
// renderer; other Unicode stays.
func TestInert(t *testing.T) {
	t.Parallel()
	tests := map[string]struct{ in, want string }{
		"plain":          {"alice", "alice"},
		"unicode":        {"zoë → ops", "zoë → ops"},
		"tab, newline":   {"a\tb\nc", `a\tb\nc`},
		"zero-width":     {"ali\u200bce", `ali\u200bce`},
		"line separator": {"a\u2028b", `a\u2028b`},
		"no-break space": {"a\u00a0b", `a\u00a0b`},
		"escape":         {"evil\x1b[31mRED", `evil\x1b[31mRED`},
		"carriage":       {"ok\rFAKE", `ok\rFAKE`},
		"C1 CSI":         {"x\u009by", `x\u009by`},
		"bidi override":  {"admin\u202egnp.exe", `admin\u202egnp.exe`},
		"isolate":        {"a\u2066b", `a\u2066b`},
		"delete":         {"a\x7fb", `a\x7fb`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := inert(tc.in); got != tc.want {
				t.Errorf("inert(%q) = %q, want %q", tc.in, got, tc.want)
			}
			s := words("by ", strong(tc.in))
			for _, o := range []Options{{}, {Color: true}} {
				if got := (textPainter{color: o.Color}).sentence(s); strings.Contains(got, "\x1b[31m") || strings.ContainsRune(got, '\u202e') {
					t.Errorf("text rendering of %q kept a raw control: %q", tc.in, got)
				}
			}
		})
	}
}

// TestCountWordsInstances: a set that names instances (ADR 0065) counts
// its resources at resource level and its instances apart.
func TestCountWordsInstances(t *testing.T) {
	t.Parallel()
	i := engine.MustParseInstanceAddress
	for name, c := range map[string]struct {
		in   engine.AddressSet
		want string
	}{
		"resources":         {engine.NewAddressSet("terraform_data.a", "terraform_data.b"), "2 resources"},
		"one instance":      {engine.NewAddressSet(i(`x.y["a"]`)), "1 resource"},
		"two instances":     {engine.NewAddressSet(i(`x.y["a"]`), i(`x.y["b"]`), "output.o"), "2 instances of 1 resource, 1 output"},
		"mixed":             {engine.NewAddressSet(i(`x.y[0]`), i(`x.y[1]`), "x.z"), "3 instances of 2 resources"},
		"module instances":  {engine.NewAddressSet(i(`module.m["a"].x.y`), i(`module.m["b"].x.y`)), "2 instances of 1 resource"},
		"one per resource":  {engine.NewAddressSet(i(`x.y["a"]`), i(`x.z["a"]`)), "2 resources"},
		"prefix and output": {engine.NewAddressSet("module.a.*", "output.o"), "1 output, 1 prefix"},
	} {
		if got := countWords(c.in); got != c.want {
			t.Errorf("%s: countWords(%v) = %q; want %q", name, c.in, got, c.want)
		}
	}
}
