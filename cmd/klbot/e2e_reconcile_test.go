package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github/githubfake"
	"github.com/kilolock/kilolock/internal/store/postgres"
)

// closeOnFake closes pull request p on the fake — merged by login when
// merged is set — without delivering anything: its "closed" delivery is
// dropped.
func (h *harness) closeOnFake(p pr, merged bool, login string) {
	t2 := true
	h.fake.AddPR(repo, githubfake.PR{Number: p.n, HeadSHA: p.head, Files: p.paths, Author: "alice", Mergeable: &t2, BaseSHA: sha(0),
		State: "closed", Merged: merged, MergedBy: login})
}

// waitStatus polls run id's status until it is want, up to timeout, and
// returns how long that took.
func (h *harness) waitStatus(t *testing.T, id string, want engine.RunStatus, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for h.runStatus(id) != string(want) {
		if time.Since(start) > timeout {
			t.Fatalf("run %s is %s after %s; want %s", id, h.runStatus(id), timeout, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start)
}

// openStore opens the test's store (closed with the test).
func (h *harness) openStore(t *testing.T) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), h.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestReconcileClosedPR (issue 11 defect 5): pull request 1 is planned,
// then closed on GitHub with its "closed" delivery dropped. The reconcile
// job (KLBOT_RECONCILE_INTERVAL=1s) notices: the plan is closed with the
// closed pull request's reason and leaves `kl status`'s open plans, the
// pull request's rows are closed (no refresh edits its sticky comment
// again), and the sticky comment says the plan was closed unapplied. Pull
// request 2, changing the same resource, is then planned without an
// overlap with it: success, not neutral.
func TestReconcileClosedPR(t *testing.T) {
	h := setup(t, "KLBOT_RECONCILE_INTERVAL=1s")
	app := "infra/app.tf"
	p1 := pr{1, sha(1), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}), []string{app}}
	p2 := pr{2, sha(2), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v3"`}), []string{app}}
	h.open(t, p1)
	h.settle()
	plan1 := h.planRun(1)

	h.closeOnFake(p1, false, "")
	took := h.waitStatus(t, plan1, engine.StatusSuperseded, 30*time.Second)
	t.Logf("PR 1's plan closed %s after its pull request closed with the delivery dropped", took.Round(time.Millisecond))
	h.settle()
	st := h.openStore(t)
	run, err := st.GetRun(context.Background(), plan1)
	if err != nil {
		t.Fatal(err)
	}
	if run.End == nil || run.End.Superseded != engine.SupersededByClosedPR {
		t.Errorf("PR 1's plan ended %+v; want superseded, its pull request closed (%s)", run.End, engine.SupersededByClosedPR)
	}
	status, err := engine.New(st, nil, nil).Status(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range status.OpenPlans {
		if p.ID == plan1 {
			t.Errorf("kl status lists PR 1's plan %s as open after its pull request closed", plan1)
		}
	}
	if n := h.count(`SELECT count(*) FROM klbot_projects WHERE repo = $1 AND pr = 1 AND open = 1`, repo); n != 0 {
		t.Errorf("PR 1 has %d open project rows after it closed: refreshes would keep editing its sticky comment", n)
	}
	mustContain(t, "PR 1's sticky comment", strings.ToLower(rendered(h.sticky(t, 1))), "closed without merging")

	h.open(t, p2)
	h.settle()
	c2 := h.one(t, p2.head, "kl plan · infra")
	if c2.Conclusion != "success" {
		t.Errorf("PR 2's plan check run is %s (%q); want success: PR 1 is closed", c2.Conclusion, c2.Title)
	}
	mustLack(t, "PR 2's plan check run", c2.Title+rendered(c2.Summary), plan1, "Overlapping open plans", "#1")
}

// TestOverlapWithClosedPR (issue 11 defect 5): pull request 1 is planned
// and closed on GitHub with its "closed" delivery dropped, before any
// reconcile round sees it (the interval is an hour). Pull request 2's plan
// overlaps PR 1's: before it is reported the overlap is checked against
// PR 1, which is closed, so PR 2's plan check run is success, naming no
// overlap with it, and PR 1's close job is enqueued: its plan closes.
func TestOverlapWithClosedPR(t *testing.T) {
	logs := captureLogs(t)
	h := setup(t, "KLBOT_RECONCILE_INTERVAL=1h", "KLBOT_LOG_LEVEL=info")
	app := "infra/app.tf"
	p1 := pr{1, sha(1), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}), []string{app}}
	p2 := pr{2, sha(2), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v3"`}), []string{app}}
	h.open(t, p1)
	h.settle()
	plan1 := h.planRun(1)
	// The reconcile round run when the replica becomes River's leader
	// must be over before PR 1 closes, or (on a loaded machine, a late
	// leader) it — not the overlap check — closes PR 1's plan.
	deadline := time.Now().Add(60 * time.Second)
	for h.count(`SELECT count(*) FROM river_job WHERE kind = 'klbot_reconcile' AND state = 'completed'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no reconcile round completed within 60 s of the start")
		}
		time.Sleep(100 * time.Millisecond)
	}
	h.closeOnFake(p1, false, "")

	h.open(t, p2)
	h.settle()
	c2 := h.one(t, p2.head, "kl plan · infra")
	t.Logf("PR 2's plan check run (%s, %q):\n%s", c2.Conclusion, c2.Title, c2.Summary)
	if c2.Conclusion != "success" {
		t.Errorf("PR 2's plan check run is %s (%q); want success: the pull request of the plan it overlaps is closed", c2.Conclusion, c2.Title)
	}
	mustLack(t, "PR 2's plan check run", c2.Title+rendered(c2.Summary), plan1, "Overlapping open plans", "#1")
	if got := h.runStatus(plan1); got != string(engine.StatusSuperseded) {
		t.Errorf("PR 1's plan is %s after PR 2's plan found its pull request closed; want superseded", got)
	}
	if lines := logs.lines(func(r map[string]any) bool {
		return r["msg"] == "not reporting an overlap with the plan of a closed pull request" && r["plan"] == plan1
	}); len(lines) != 1 {
		t.Errorf("want one log line of the overlap check dropping plan %s, got %d: the reconcile job closed it, not the overlap check", plan1, len(lines))
	}
}

// TestReconcileMissedMerge (issue 11 defect 5): with apply_trigger merge,
// pull request 1 is merged on GitHub and its "closed" delivery dropped.
// It must not be silently closed: the reconcile job enqueues the merge
// apply it missed, which applies its plan as the delivery would have (the
// merger its actor), and the "kl apply · infra" check run says applied.
func TestReconcileMissedMerge(t *testing.T) {
	h := setup(t, "KLBOT_RECONCILE_INTERVAL=1s", "KLBOT_APPLY_TRIGGER=merge")
	db := "infra/db.tf"
	p1 := pr{1, sha(1), change(t, [3]string{db, `"db_main-v1"`, `"db_main-v2"`}), []string{db}}
	h.open(t, p1)
	h.settle()
	plan1 := h.planRun(1)

	h.closeOnFake(p1, true, "alice")
	took := h.waitStatus(t, plan1, engine.StatusApplied, 60*time.Second)
	t.Logf("PR 1's plan applied %s after its merge, the delivery dropped", took.Round(time.Millisecond))
	h.settle()
	c := h.one(t, p1.head, "kl apply · infra")
	if c.Conclusion != "success" {
		t.Errorf("PR 1's apply check run is %s (%q); want success", c.Conclusion, c.Title)
	}
	mustContain(t, "PR 1's apply check run", c.Title, "Applied")
	var actor string
	h.scan(&actor, `SELECT actor FROM runs WHERE kind = 'apply' AND plan_run = $1`, plan1)
	if actor != "alice" {
		t.Errorf("the missed merge's apply has actor %q; want alice, who merged", actor)
	}
	if n := h.count(`SELECT count(*) FROM klbot_projects WHERE repo = $1 AND pr = 1 AND open = 1`, repo); n != 0 {
		t.Errorf("PR 1 has %d open project rows after its merge was reconciled", n)
	}
}
