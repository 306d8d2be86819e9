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

// TestReplanOutcomes checks the three ends of a re-check by re-planning in
// the apply view: the reviewed plan applied, the re-plan open for review,
// the configuration behind the head.
func TestReplanOutcomes(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		story   *engine.RunStory
		want    []string
		notWant []string
	}{
		"unchanged": {storyWaitedReplanned(), []string{
			"re-checked by re-plan " + replanA + " against head 14: intent unchanged; applied the reviewed plan",
		}, []string{"applied its re-plan", "instead"}},
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

func TestReasonGist(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ reason, want string }{
		"terraform diagnostic behind kl's context": {
			reason: `terraform plan: planning run 01M8M39HR5KN918JBSK6Y99A1J: terraform plan: Reference to undeclared resource: A managed resource "terraform_data.nope" has not been declared in the root module. (main.tf:3)`,
			want:   `Reference to undeclared resource: A managed resource "terra…`,
		},
		"stderr with exit status and Error:": {
			reason: `terraform plan: exit status 1: Error: Reference to undeclared resource`,
			want:   `Reference to undeclared resource`,
		},
		"init failure": {
			reason: `terraform plan: planning run 01M8M39HR5KN918JBSK6Y99A1J: terraform init: Failed to query available provider packages`,
			want:   `Failed to query available provider packages`,
		},
		"interrupted": {
			reason: `terraform plan: planning run 01M8M39HR5KN918JBSK6Y99A1J: terraform plan: interrupted: context canceled`,
			want:   `interrupted: context canceled`,
		},
		"other error chain: its cause": {
			reason: `storing plan.tfplan: writing artifact: database is locked`,
			want:   `database is locked`,
		},
		"one clause":    {reason: `plan made against lineage a, state has b`, want: `plan made against lineage a, state has b`},
		"nothing after": {reason: `terraform plan: `, want: `terraform plan:`},
		"empty":         {reason: ``, want: ``},
		"long clause is clipped": {
			reason: "reading x: " + strings.Repeat("y", 80),
			want:   strings.Repeat("y", 59) + "…",
		},
		"no context clause: from the start, without the sentinel": {
			reason: "no Terraform configuration files in /w/cfg: a plan would destroy every resource of the state; refusing (…): invalid input",
			want:   "no Terraform configuration files in /w/cfg: a plan would de…",
		},
		"missing var file keeps its name": {
			reason: "var file prod.tfvars: no such file or directory",
			want:   "var file prod.tfvars: no such file or directory",
		},
		"cause after the context keeps what it names": {
			reason: "copying configuration tree /w/cfg: larger than 64 MiB or 10000 entries: invalid input",
			want:   "larger than 64 MiB or 10000 entries",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := reasonGist(tc.reason, 60); got != tc.want {
				t.Errorf("reasonGist(%q)\n got %q\nwant %q", tc.reason, got, tc.want)
			}
		})
	}
}

// TestWhatFailedPlan: the "what" of `kl runs` for a plan that failed is
// the gist of its stored reason, naming what went wrong — not a bare
// sentinel ("invalid input") or errno ("no such file or directory").
func TestWhatFailedPlan(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ reason, want string }{
		"no configuration": {
			reason: "no Terraform configuration files in /w/cfg: a plan would destroy every resource of the state; refusing (a destroy-everything plan needs an explicit request, which kl does not offer yet): invalid input",
			want:   "no Terraform configuration files in /w/cfg: a plan would de…",
		},
		"missing var file": {reason: "var file missing.tfvars: no such file or directory", want: "var file missing.tfvars: no such file or directory"},
		"no reason":        {reason: "", want: "no envelope"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := engine.Run{ID: planA, Kind: engine.KindPlan, Status: engine.StatusFailed, Reason: tc.reason}
			if got := whatWords(r).plain(); got != tc.want {
				t.Errorf("whatWords = %q; want %q", got, tc.want)
			}
		})
	}
}

// TestDiscardedMarkerWords: the timeline entry of a discarded plan keeps
// both who discarded it and why (the marker of engine.Supersede with a
// "discarded by ACTOR: WHY" reason, or one stored before as "superseded:
// discarded by …").
func TestDiscardedMarkerWords(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ reason, want string }{
		"with a reason":    {"discarded by tester: obsolete", "discarded by tester: obsolete"},
		"without a reason": {"discarded by tester", "discarded by tester"},
		"stored before":    {"superseded: discarded by tester", "discarded by tester"},
		"superseded":       {"superseded: newer push", "superseded: newer push"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := engine.Marker{Kind: engine.MarkerFailed, Reason: tc.reason}
			if got := markerWordsOf(m, engine.StatusSuperseded).plain(); got != tc.want {
				t.Errorf("markerWordsOf(%q) = %q; want %q", tc.reason, got, tc.want)
			}
		})
	}
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
