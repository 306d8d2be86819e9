package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github/githubfake"
	"github.com/kilolock/kilolock/internal/store/postgres"
	"github.com/kilolock/kilolock/internal/terraform"
)

// The tests of this file hold a Terraform apply inside Terraform with a
// gate: a resource replaced (triggers_replace) whose local-exec
// provisioner waits until the gate file exists (5 minutes at most, then
// it fails), so the test decides how long the apply — and its job —
// runs. They check how jobs of one pull request take turns without
// holding a worker (ADR 0041, issue 11 §2–4).

// gatedResource is a terraform_data resource replaced when value changes
// whose creation waits for the file gate.
func gatedResource(name, value, gate string) string {
	return fmt.Sprintf("resource \"terraform_data\" %q {\n  input            = %q\n  triggers_replace = %q\n\n"+
		"  provisioner \"local-exec\" {\n    command = \"for i in $(seq 3000); do [ -e '%s' ] && exit 0; sleep 0.1; done; exit 1\"\n  }\n}\n",
		name, value, value, gate)
}

// gateOf returns a gate file path and the func that opens it.
func gateOf(t *testing.T) (string, func()) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gate")
	return path, func() {
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Error(err)
		}
	}
}

// waitUntil polls cond every 50 ms until it holds, failing the test after
// timeout.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFor is waitUntil that fails the test without stopping it: false
// when cond did not hold within timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Errorf("%s: not within %s", what, timeout)
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// inTerraform waits until plan's apply run has started its Terraform
// apply (its apply-started marker) and returns it.
func inTerraform(t *testing.T, st *postgres.Store, plan string, timeout time.Duration) string {
	t.Helper()
	var run string
	waitUntil(t, timeout, "the apply of plan "+plan+" running Terraform", func() bool {
		run = applyOf(t, st, plan)
		return run != "" && hasMarker(t, st, run, engine.MarkerApplyStarted)
	})
	return run
}

// applyRuns lists the apply runs of plan on state.
func applyRuns(t *testing.T, st *postgres.Store, state, plan string) []engine.Run {
	t.Helper()
	runs, err := st.ListRuns(context.Background(), engine.RunQuery{State: state, Kind: engine.KindApply, Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	var out []engine.Run
	for _, r := range runs {
		if r.PlanRun == plan {
			out = append(out, r)
		}
	}
	return out
}

func markersOf(t *testing.T, st *postgres.Store, run string, kind engine.MarkerKind) []engine.Marker {
	t.Helper()
	ms, err := st.Markers(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	var out []engine.Marker
	for _, m := range ms {
		if m.Kind == kind {
			out = append(out, m)
		}
	}
	return out
}

// TestBusyPullRequestDelaysNoOther (issue 11 §2, §4): with 2 workers, a
// long apply on PR 1 and four comments on PR 1 — a second /kl apply, a
// /kl plan, mallory's /kl apply, a /kl why — do not delay PR 2's plan:
// it completes while PR 1's Terraform still runs. Meanwhile PR 1's apply
// check run is in progress, and it is the check run that completes; the
// second /kl apply is answered (it joins the running apply: no second
// apply run, no second check run); mallory is refused at once; the /kl
// plan says in its check run that it is queued behind the apply, and runs
// after it. Before the fix every job of PR 1 waited for PR 1's lock
// holding a worker, so PR 2's plan waited for the apply to end.
func TestBusyPullRequestDelaysNoOther(t *testing.T) {
	h := setup(t)
	st := openStore(t, h.dsn)
	gate, open := gateOf(t)
	web := "resource \"terraform_data\" \"app_web\" {\n  input = \"app_web-v1\"\n}\n"
	p1 := pr{1, sha(1), change(t, [3]string{"infra/app.tf", web, gatedResource("app_web", "app_web-v2", gate)}), []string{"infra/app.tf"}}
	p2 := pr{2, sha(2), change(t, [3]string{"infra/db.tf", `"db_main-v1"`, `"db_main-v2"`}), []string{"infra/db.tf"}}
	h.open(t, p1)
	h.settle()
	plan1 := h.planRun(1)
	defer open() // whatever happens, let Terraform go

	h.comment(t, 1, "alice", "/kl apply")
	apply1 := inTerraform(t, st, plan1, 60*time.Second)

	_, again := h.comment(t, 1, "alice", "/kl apply")
	_, replan := h.comment(t, 1, "alice", "/kl plan")
	_, drive := h.comment(t, 1, "mallory", "/kl apply")
	_, why := h.comment(t, 1, "alice", "/kl why")
	t0 := time.Now()
	h.open(t, p2)

	// (a) PR 2's plan completes while PR 1's Terraform still runs.
	if waitFor(t, 60*time.Second, "PR 2's plan check run completed while PR 1's apply runs", func() bool {
		crs := h.checkRuns(p2.head, "kl plan · infra")
		return len(crs) == 1 && crs[0].Status == "completed"
	}) {
		t.Logf("PR 2 planned in %s while PR 1's apply %s runs Terraform", time.Since(t0).Round(time.Millisecond), apply1)
		if s := h.runStatus(apply1); s != string(engine.StatusApplying) {
			t.Errorf("PR 1's apply is %s once PR 2 is planned, want still applying (the gate is closed)", s)
		}
		if c := h.one(t, p2.head, "kl plan · infra"); c.Conclusion != "success" {
			t.Errorf("PR 2's plan: %s, want success:\n%s", c.Conclusion, c.Summary)
		}
	}

	// (c) While Terraform runs, the apply's check run is in progress.
	var live githubfake.CheckRun
	if crs := h.checkRuns(p1.head, "kl apply · infra"); len(crs) != 1 || crs[0].Status != "in_progress" || !strings.HasPrefix(crs[0].Title, "Applying") {
		t.Errorf("PR 1's apply check runs while Terraform runs: %+v; want one, in_progress, Applying…", crs)
	} else {
		live = crs[0]
		mustContain(t, "PR 1's in-progress apply check run", live.Summary, "applying", plan1, "`/kl apply` by @alice")
	}

	// mallory's refusal and the /kl why do not wait for the apply either.
	waitFor(t, 20*time.Second, "mallory's refusal and the /kl why answered while PR 1's apply runs", func() bool {
		return slices.Contains(reactionsOf(h, drive), "-1") && len(h.replies(1, why)) == 1
	})
	// (d) The second /kl apply is answered: it joins the running apply.
	if waitFor(t, 20*time.Second, "the second /kl apply answered while PR 1's apply runs", func() bool { return len(h.replies(1, again)) == 1 }) {
		joined := h.replyTo(t, 1, again)
		t.Logf("the reply to the second /kl apply:\n%s", joined)
		mustContain(t, "the reply to the second /kl apply", joined, "joins what is already running", "`infra`", apply1, "kl apply · infra")
	}
	if rs := reactionsOf(h, again); !slices.Contains(rs, "eyes") {
		t.Errorf("the second /kl apply has reactions %v, want 👀", rs)
	}
	// The /kl plan is queued behind the apply, and says so.
	var queued githubfake.CheckRun
	if waitFor(t, 20*time.Second, "the /kl plan's queued check run", func() bool {
		for _, c := range h.checkRuns(p1.head, "kl plan · infra") {
			if c.Status == "in_progress" {
				queued = c
				return true
			}
		}
		return false
	}) {
		t.Logf("the queued /kl plan's check run: %q\n%s", queued.Title, queued.Summary)
		mustContain(t, "the queued /kl plan's check run", queued.Title, "Queued behind", "/kl apply by @alice")
		mustContain(t, "the queued /kl plan's check run", queued.Summary, "queued", "`/kl plan` by @alice", "holds no worker")
	}

	open()
	h.settle()
	// (c) The check run that was in progress is the one that completed.
	done := h.one(t, p1.head, "kl apply · infra")
	if done.ID != live.ID || done.Conclusion != "success" {
		t.Errorf("PR 1's apply check run: id %d %s, want id %d (the in-progress one) success", done.ID, done.Conclusion, live.ID)
	}
	if runs := applyRuns(t, st, repo, plan1); len(runs) != 1 {
		t.Errorf("%d apply runs of PR 1's plan, want 1 (the second /kl apply joined it)", len(runs))
	}
	if c := h.shown(t, p1.head, "kl plan · infra"); c.ID != queued.ID || c.Conclusion != "success" {
		t.Errorf("the /kl plan's check run: id %d %s, want the queued one (%d) completed success", c.ID, c.Conclusion, queued.ID)
	}
	if crs := h.checkRuns(p1.head, "kl apply · infra"); len(crs) != 1 {
		t.Errorf("%d apply check runs on PR 1's head, want 1 (mallory's refusal and the joined command make none)", len(crs))
	}
	h.sticky(t, 1)
	mustContain(t, "the reply to mallory", h.replyTo(t, 1, drive), "write permission")
	if rs := h.replies(1, replan); len(rs) != 0 {
		t.Errorf("the /kl plan got %d replies, want none (it answers in its check run)", len(rs))
	}
}

// replies are the bot's replies to comment id on pull request n.
func (h *harness) replies(n int, id int64) []string {
	marker := fmt.Sprintf("kilolock:sticky:reply-%d -->", id)
	var out []string
	for _, c := range h.fake.Comments(repo, n) {
		if strings.Contains(c.Body, marker) {
			out = append(out, c.Body)
		}
	}
	return out
}

// twoProjects is kl.yaml with projects c (infra, state acme/infra) and d
// (other, state acme/other).
const twoProjects = "version: 1\nprojects:\n  - name: c\n    dir: infra\n    state: acme/infra\n  - name: d\n    dir: other\n    state: acme/other\n"

// bootstrapOther creates state acme/other from other/main.tf (one
// resource, other_a), applied.
func bootstrapOther(t *testing.T, h *harness) {
	t.Helper()
	ctx := context.Background()
	st := openStore(t, h.dsn)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(resources("other_a")), 0o644); err != nil {
		t.Fatal(err)
	}
	runner, err := terraform.NewRunner(terraform.RunnerOptions{WorkRoot: t.TempDir(), Binary: h.tfBin,
		Env: []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(st, runner, nil)
	if _, err := eng.InitState(ctx, "acme/other", nil, "bootstrap"); err != nil {
		t.Fatal(err)
	}
	out, err := eng.Plan(ctx, engine.PlanInput{State: "acme/other", Dir: dir, ScopeDir: "other", Actor: "bootstrap"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Apply(ctx, engine.ApplyInput{PlanRun: out.Run.ID, Actor: "bootstrap"}); err != nil {
		t.Fatal(err)
	}
}

// TestProjectsApplySideBySide (issue 11 §3): "/kl apply -p c" and
// "/kl apply -p d", sent at once on one pull request, run at once — both
// Terraform applies run together, both check runs are in progress
// together — and one sticky comment tells both. Before the fix the second
// waited for the first (one lock per pull request) with no waited marker.
func TestProjectsApplySideBySide(t *testing.T) {
	h := setup(t)
	bootstrapOther(t, h)
	st := openStore(t, h.dsn)
	gate, open := gateOf(t)
	defer open()
	web := "resource \"terraform_data\" \"app_web\" {\n  input = \"app_web-v1\"\n}\n"
	files := change(t, [3]string{"infra/app.tf", web, gatedResource("app_web", "app_web-v2", gate)})
	files["kl.yaml"] = twoProjects
	files["other/main.tf"] = gatedResource("other_a", "other_a-v2", gate)
	p := pr{1, sha(1), files, []string{"infra/app.tf", "other/main.tf"}}
	h.open(t, p)
	h.settle()
	planOf := func(project string) string {
		var id string
		h.scan(&id, `SELECT plan_run FROM klbot_projects WHERE repo = $1 AND pr = 1 AND project = $2`, repo, project)
		return id
	}
	planC, planD := planOf("c"), planOf("d")
	if planC == "" || planD == "" {
		t.Fatalf("plans of c and d: %q, %q; want both planned", planC, planD)
	}

	h.comment(t, 1, "alice", "/kl apply -p c")
	h.comment(t, 1, "alice", "/kl apply -p d")
	started := func(plan string) bool {
		run := applyOf(t, st, plan)
		return run != "" && hasMarker(t, st, run, engine.MarkerApplyStarted)
	}
	if waitFor(t, 60*time.Second, "both Terraform applies running at once", func() bool { return started(planC) && started(planD) }) {
		c, d := h.checkRuns(p.head, "kl apply · c"), h.checkRuns(p.head, "kl apply · d")
		if len(c) != 1 || len(d) != 1 || c[0].Status != "in_progress" || d[0].Status != "in_progress" {
			t.Errorf("with both Terraform applies running: kl apply · c %+v, kl apply · d %+v; want one each, both in_progress", c, d)
		}
	}
	open()
	h.settle()
	runC, runD := applyOf(t, st, planC), applyOf(t, st, planD)
	startC, endC := markerSpan(t, st, runC)
	startD, endD := markerSpan(t, st, runD)
	t.Logf("c applied %s → %s, d applied %s → %s", startC.Format(time.StampMilli), endC.Format(time.StampMilli),
		startD.Format(time.StampMilli), endD.Format(time.StampMilli))
	if !startC.Before(endD) || !startD.Before(endC) {
		t.Errorf("the applies of c and d did not overlap: c %s → %s, d %s → %s", startC, endC, startD, endD)
	}
	for _, id := range []string{runC, runD} {
		if w := markersOf(t, st, id, engine.MarkerWaited); len(w) != 0 {
			t.Errorf("apply run %s has waited markers %+v; the projects' states are disjoint", id, w)
		}
	}
	for _, name := range []string{"kl apply · c", "kl apply · d"} {
		if cr := h.one(t, p.head, name); cr.Conclusion != "success" {
			t.Errorf("%s: %s, want success:\n%s", name, cr.Conclusion, cr.Summary)
		}
	}
	mustContain(t, "the sticky comment", h.sticky(t, 1), runC, runD)
}

// markerSpan is when run's Terraform apply started (apply-started) and
// when its version was committed (committed).
func markerSpan(t *testing.T, st *postgres.Store, run string) (time.Time, time.Time) {
	t.Helper()
	s, c := markersOf(t, st, run, engine.MarkerApplyStarted), markersOf(t, st, run, engine.MarkerCommitted)
	if len(s) != 1 || len(c) != 1 {
		t.Fatalf("run %s: %d apply-started and %d committed markers, want 1 each", run, len(s), len(c))
	}
	return s[0].At, c[0].At
}

// TestWaitForReservationsSnoozes (issue 11 §2): PR 2's apply needs what
// PR 1's apply holds. It is parked — its job snoozed, no worker held —
// while its check run says on which run it waits; PR 3's plan runs on
// the free worker meanwhile (2 workers: one is PR 1's). The wait keeps
// its start across the attempts: one waited marker, and the apply is
// refused once KLBOT_APPLY_WAIT has passed since it, as a wait in one
// attempt is — the same run, the same report. The snoozes do not count
// against the job's attempts. Before the fix PR 2's job held the second
// worker for the whole wait, and PR 3's plan came after it.
func TestWaitForReservationsSnoozes(t *testing.T) {
	const wait = 10 * time.Second
	h := setup(t, "KLBOT_APPLY_WAIT="+wait.String())
	st := openStore(t, h.dsn)
	gate, open := gateOf(t)
	defer open()
	web := "resource \"terraform_data\" \"app_web\" {\n  input = \"app_web-v1\"\n}\n"
	p1 := pr{1, sha(1), change(t, [3]string{"infra/app.tf", web, gatedResource("app_web", "app_web-v2", gate)}), []string{"infra/app.tf"}}
	p2 := pr{2, sha(2), change(t, [3]string{"infra/app.tf", `"app_web-v1"`, `"app_web-v3"`}), []string{"infra/app.tf"}}
	p3 := pr{3, sha(3), change(t, [3]string{"infra/db.tf", `"db_main-v1"`, `"db_main-v2"`}), []string{"infra/db.tf"}}
	for _, p := range []pr{p1, p2} {
		h.open(t, p)
		h.settle()
	}
	plan1, plan2 := h.planRun(1), h.planRun(2)

	h.comment(t, 1, "alice", "/kl apply")
	apply1 := inTerraform(t, st, plan1, 60*time.Second)
	h.comment(t, 2, "alice", "/kl apply")
	var waiting githubfake.CheckRun
	if waitFor(t, 30*time.Second, "PR 2's apply check run waiting", func() bool {
		crs := h.checkRuns(p2.head, "kl apply · infra")
		if len(crs) == 1 && strings.HasPrefix(crs[0].Title, "Waiting") {
			waiting = crs[0]
			return true
		}
		return false
	}) {
		t.Logf("PR 2's waiting apply check run: %q\n%s", waiting.Title, waiting.Summary)
		mustContain(t, "PR 2's waiting apply check run", waiting.Title, apply1, "acme/infra#1")
		mustContain(t, "PR 2's waiting apply check run", waiting.Summary, "waiting on", apply1, "terraform_data.app_web", "gives up at", "holding no worker")
	}

	h.open(t, p3)
	waitUntil(t, 60*time.Second, "PR 3's plan check run completed", func() bool {
		crs := h.checkRuns(p3.head, "kl plan · infra")
		return len(crs) == 1 && crs[0].Status == "completed"
	})
	waitUntil(t, 10*time.Second, "PR 2's apply run", func() bool { return len(applyRuns(t, st, repo, plan2)) > 0 })
	runs := applyRuns(t, st, repo, plan2)
	if len(runs) != 1 {
		t.Fatalf("%d apply runs of PR 2's plan, want 1", len(runs))
	}
	apply2 := runs[0].ID
	if s := h.runStatus(apply2); s != string(engine.StatusWaiting) {
		t.Errorf("PR 2's apply run is %s once PR 3 is planned, want still waiting (PR 3 ran beside it)", s)
	}

	// The wait runs out at its start + KLBOT_APPLY_WAIT.
	waitUntil(t, wait+30*time.Second, "PR 2's apply refused", func() bool { return h.runStatus(apply2) == string(engine.StatusRefused) })
	r, err := st.GetRun(context.Background(), apply2)
	if err != nil {
		t.Fatal(err)
	}
	waited := markersOf(t, st, apply2, engine.MarkerWaited)
	if len(waited) != 1 || waited[0].Other != apply1 {
		t.Fatalf("PR 2's apply run has waited markers %+v; want one, on %s (the wait kept across attempts)", waited, apply1)
	}
	took := r.FinishedAt.Sub(waited[0].At)
	t.Logf("PR 2's apply: waited from %s, refused %s later, end %+v", waited[0].At.Format(time.StampMilli), took.Round(time.Millisecond), r.End)
	if r.End == nil || r.End.Cause != engine.CauseRefusedConflict || time.Duration(r.End.Waited) < wait-time.Second || took < wait || took > wait+5*time.Second {
		t.Errorf("PR 2's apply end %+v after %s; want refused on the conflict after waiting about %s from the waited marker", r.End, took, wait)
	}
	if runs := applyRuns(t, st, repo, plan2); len(runs) != 1 {
		t.Errorf("%d apply runs of PR 2's plan after the wait, want 1 (one run resumed, not one per attempt)", len(runs))
	}
	waitUntil(t, 30*time.Second, "PR 2's apply job done", func() bool {
		return h.count(`SELECT count(*) FROM river_job WHERE kind = 'klbot_apply' AND args->>'pr' = '2' AND state = 'completed'`) == 1
	})
	c2 := h.one(t, p2.head, "kl apply · infra")
	if c2.ID != waiting.ID || c2.Conclusion != "action_required" {
		t.Errorf("PR 2's apply check run: id %d %s; want the waiting one (%d), action_required", c2.ID, c2.Conclusion, waiting.ID)
	}
	mustContain(t, "PR 2's refused apply check run", c2.Summary, apply1, "acme/infra#1", "terraform_data.app_web")
	var attempt int
	var meta string
	h.scan(&attempt, `SELECT attempt FROM river_job WHERE kind = 'klbot_apply' AND args->>'pr' = '2'`)
	h.scan(&meta, `SELECT metadata::text FROM river_job WHERE kind = 'klbot_apply' AND args->>'pr' = '2'`)
	var m struct {
		Snoozes int `json:"snoozes"`
	}
	if err := json.Unmarshal([]byte(meta), &m); err != nil {
		t.Fatal(err)
	}
	t.Logf("PR 2's apply job: attempt %d after %d snoozes", attempt, m.Snoozes)
	if attempt != 1 || m.Snoozes < 3 {
		t.Errorf("PR 2's apply job: attempt %d after %d snoozes; want attempt 1 (snoozes are no attempts) after 3 or more", attempt, m.Snoozes)
	}
	// Written when the phase changed, not on every attempt: created
	// applying, then waiting, then its end (and a refresh every 30 s).
	if c2.Updates > 2 {
		t.Errorf("PR 2's apply check run was updated %d times over %d snoozes, want 2 (waiting, then its end)", c2.Updates, m.Snoozes)
	}
	open()
	h.settle()
	if c := h.one(t, p1.head, "kl apply · infra"); c.Conclusion != "success" {
		t.Errorf("PR 1's apply: %s, want success", c.Conclusion)
	}
}
