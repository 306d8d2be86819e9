package main

import (
	"strings"
	"testing"
)

// TestApplyOfAppliedPlanAnswered (issue 11 §8): a "/kl apply" of a plan
// that is applied already applies nothing, is answered in a reply naming
// the apply run, and leaves the "kl apply · PROJECT" check run as it was
// — one check run, still the success of the apply — instead of
// re-rendering it silently (or, since check runs are made per job, adding
// one more that says the same).
func TestApplyOfAppliedPlanAnswered(t *testing.T) {
	h := setup(t)
	app := "infra/app.tf"
	p1 := pr{1, sha(1), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}), []string{app}}
	h.open(t, p1)
	h.settle()
	h.comment(t, 1, "alice", "/kl apply")
	h.settle()
	applied := h.one(t, p1.head, "kl apply · infra")
	if applied.Conclusion != "success" {
		t.Fatalf("PR 1's apply: %s %q, want success", applied.Conclusion, applied.Title)
	}
	runs, serial := h.applyRuns(), h.headSerial()

	_, cid := h.comment(t, 1, "alice", "/kl apply")
	h.settle()
	crs := h.checkRuns(p1.head, "kl apply · infra")
	if len(crs) != 1 || crs[0].Conclusion != "success" || crs[0].Title != applied.Title || crs[0].Summary != applied.Summary {
		t.Errorf("after a second /kl apply: %d apply check runs, want the one of the apply, untouched (%q)", len(crs), applied.Title)
	}
	if n, s := h.applyRuns(), h.headSerial(); n != runs || s != serial {
		t.Errorf("a second /kl apply made apply runs or versions: %d → %d runs, head %d → %d", runs, n, serial, s)
	}
	reply := h.replyTo(t, 1, cid)
	t.Logf("the reply to the second /kl apply:\n%s", reply)
	mustContain(t, "the reply to the second /kl apply", reply, "`/kl apply -p infra`", "no longer applicable", "applied already, by run")
	if strings.Contains(reply, "Plan again") {
		t.Errorf("the reply asks to plan again an applied plan:\n%s", reply)
	}
}
