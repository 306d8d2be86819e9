package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// TestWhyTitleSaysTheRunsStatus: where `kl why`'s title word is a run
// status word (failed, refused, interrupted, waiting), it is the status
// the other views print for that run (`kl runs`, `kl run show`): a
// lease-expired run is "lease-expired" there, so it is not "failed" here
// (F8). Verdicts that are not status words (allowed, pending, closed) are
// the answer to "why" and stay.
func TestWhyTitleSaysTheRunsStatus(t *testing.T) {
	t.Parallel()
	cases := map[string]func() *engine.Why{
		"apply lease-expired":          func() *engine.Why { return whyFrom(storyLeaseExpiredRecoverable(), engine.VerdictFailed) },
		"apply recovered":              func() *engine.Why { return whyFrom(storyRecovered(), engine.VerdictFailed) },
		"plan whose apply expired":     func() *engine.Why { return whyPlanOf(storyLeaseExpiredRecoverable(), engine.VerdictFailed) },
		"plan that never finished":     whyPlanLeaseExpired,
		"apply failed":                 func() *engine.Why { return whyFrom(storyPartialDrift(), engine.VerdictFailed) },
		"apply interrupted":            func() *engine.Why { return whyFrom(storyInterrupted(), engine.VerdictInterrupted) },
		"apply refused":                func() *engine.Why { return whyFrom(storyRefusedStale(), engine.VerdictRefused) },
		"apply waiting":                whyWaiting,
		"plan refused behind the head": func() *engine.Why { return whyPlanOf(storyRefusedBehindHead(), engine.VerdictRefused) },
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			y := f()
			var why, runs bytes.Buffer
			if err := Why(&why, y, Options{Format: Text}); err != nil {
				t.Fatal(err)
			}
			if err := Runs(&runs, []engine.Run{y.Run}, RunsPage{}, Options{Format: JSON}); err != nil {
				t.Fatal(err)
			}
			var doc struct {
				Runs []struct {
					Status string `json:"status"`
				} `json:"runs"`
			}
			if err := json.Unmarshal(runs.Bytes(), &doc); err != nil || len(doc.Runs) != 1 {
				t.Fatalf("kl runs --json: %v\n%s", err, runs.String())
			}
			title, _, _ := strings.Cut(why.String(), "\n")
			_, word, _ := strings.Cut(title, ": ")
			if word != doc.Runs[0].Status {
				t.Errorf("kl why says %q; kl runs says %q for the same run %s (status %s)", title, doc.Runs[0].Status, y.Run.ID, y.Run.Status)
			}
		})
	}
}
