package cli_test

import (
	"encoding/json"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/store/pgtest"
)

// prPlanDoc is the part of a kl plan --json document these tests read.
type prPlanDoc struct {
	Run struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"run"`
	Envelope struct {
		PlanDigest     string `json:"plan_digest"`
		CommitSHA      string `json:"commit_sha"`
		PlannedAtMerge bool   `json:"planned_at_merge"`
	} `json:"envelope"`
	Overlaps []struct {
		Run string `json:"run"`
	} `json:"overlaps"`
}

// runStatus is the status `kl run show RUN --json` gives run id.
func (k *kit) runStatus(id string) string {
	k.t.Helper()
	var doc struct {
		Run struct {
			Status string `json:"status"`
		} `json:"run"`
	}
	k.jsonOf(&doc, "run", "show", id)
	return doc.Run.Status
}

// TestPlanSupersedesOwnOlderPlan (issue 15 §4): a newer plan of the same
// pull request, state and directory closes the pull request's older open
// plan (superseded by a newer plan, as klbot does) instead of listing it
// as an overlap that "both write"; a plan of another pull request, or of
// another directory, stays open and is listed.
func TestPlanSupersedesOwnOlderPlan(t *testing.T) {
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), reportConfig("v1"))
	k.ok("state", "init", "prod")
	c1, c2 := strings.Repeat("a1", 20), strings.Repeat("b2", 20)

	var other, old, newer prPlanDoc
	k.jsonOf(&other, "plan", "--state", "prod", "-C", cfg, "--pr", "acme/infra#8", "--commit", strings.Repeat("c3", 20))
	k.jsonOf(&old, "plan", "--state", "prod", "-C", cfg, "--pr", "acme/infra#7", "--commit", c1)
	if len(old.Overlaps) != 1 || old.Overlaps[0].Run != other.Run.ID {
		t.Errorf("first plan of #7: overlaps %+v, want the plan of #8 (%s)", old.Overlaps, other.Run.ID)
	}
	write(t, filepath.Join(cfg, "main.tf"), reportConfig("v2"))
	k.jsonOf(&newer, "plan", "--state", "prod", "-C", cfg, "--pr", "acme/infra#7", "--commit", c2)
	var got []string
	for _, o := range newer.Overlaps {
		got = append(got, o.Run)
	}
	if len(got) != 1 || got[0] != other.Run.ID {
		t.Errorf("newer plan of #7: overlaps %v, want only the plan of #8 (%s), not #7's own older plan %s", got, other.Run.ID, old.Run.ID)
	}
	if s := k.runStatus(old.Run.ID); s != "superseded" {
		t.Errorf("older plan of #7 is %s, want superseded by the newer plan", s)
	}
	out := k.ok("run", "show", old.Run.ID)
	if !strings.Contains(out, "superseded by a newer plan of acme/infra#7 at "+c2[:7]) {
		t.Errorf("kl run show of the older plan does not say what superseded it:\n%s", out)
	}
	if s := k.runStatus(other.Run.ID); s != "planned" {
		t.Errorf("the plan of #8 is %s, want planned (another pull request's plan stays open)", s)
	}
}

// TestStoreKeyValueDSN (issue 15 §4): a libpq key=value KL_STORE is a
// PostgreSQL store, not a SQLite path; an error opening it never shows
// the password.
func TestStoreKeyValueDSN(t *testing.T) {
	const password = "kv-s3cret-pw-9137"
	k := setup(t)
	// Unreachable (port 1): the error names PostgreSQL and the server,
	// not the password, and no SQLite file named after the DSN appears.
	for _, bad := range []string{
		"host=127.0.0.1 port=1 user=kl dbname=kl connect_timeout=5 password=" + password,
		"dbname=kl password='" + password + "' port=notaport", // pgx cannot parse it
		"postgres://kl:" + password + "@127.0.0.1:1/kl?connect_timeout=5",
	} {
		r := k.runWith(envWith(k.env, "KL_STORE="+bad), "", "state", "list")
		if r.err == nil {
			t.Fatalf("kl state list with store %q succeeded:\n%s", bad, r.out)
		}
		for what, s := range map[string]string{"error": r.err.Error(), "stdout": r.out, "stderr": r.errOut} {
			if strings.Contains(s, password) {
				t.Errorf("%s shows the store's password: %s", what, s)
			}
		}
		if !strings.Contains(r.err.Error(), "PostgreSQL") || strings.Contains(r.err.Error(), "kl state init") {
			t.Errorf("error %q: want it to name a PostgreSQL store, not suggest creating a SQLite one", r.err)
		}
	}

	// A reachable one in key=value form: the store works.
	u, err := url.Parse(pgtest.DSN(t))
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Skipf("the test DSN is not a postgres:// URL (%v)", err)
	}
	kv := []string{"host=" + u.Hostname(), "dbname=" + strings.TrimPrefix(u.Path, "/")}
	if p := u.Port(); p != "" {
		kv = append(kv, "port="+p)
	}
	if u.User != nil {
		kv = append(kv, "user="+u.User.Username())
		if pw, ok := u.User.Password(); ok {
			kv = append(kv, "password='"+pw+"'")
		}
	}
	for key, vals := range u.Query() {
		kv = append(kv, key+"='"+vals[0]+"'")
	}
	env := envWith(k.env, "KL_STORE="+strings.Join(kv, " "))
	if r := k.runWith(env, "", "state", "init", "kvprod"); r.err != nil {
		t.Fatalf("kl state init with a key=value store: %v\n%s", r.err, r.errOut)
	}
	if r := k.runWith(env, "", "state", "list"); r.err != nil || !strings.Contains(r.out, "kvprod") {
		t.Errorf("kl state list with a key=value store: %v\n%s", r.err, r.out)
	}
}

// TestApplyPR (issue 15 §1): kl apply --pr applies the pull request's
// newest plan at the commit — the reviewed one, the same plan digest —
// and says clearly when there is none: no plan of the pull request, none
// at the commit (naming the plans it has), the newest there superseded;
// plans of two states at the commit need --state.
func TestApplyPR(t *testing.T) {
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), reportConfig("v1"))
	k.ok("state", "init", "prod")
	k.ok("state", "init", "stage")
	c1, c2 := strings.Repeat("a1", 20), strings.Repeat("b2", 20)

	var p1, p2, stage prPlanDoc
	k.jsonOf(&p1, "plan", "--state", "prod", "-C", cfg, "--pr", "acme/infra#7", "--commit", c1)
	write(t, filepath.Join(cfg, "main.tf"), reportConfig("v2"))
	k.jsonOf(&p2, "plan", "--state", "prod", "-C", cfg, "--pr", "acme/infra#7", "--commit", c2)
	k.jsonOf(&stage, "plan", "--state", "stage", "-C", cfg, "--pr", "acme/infra#7", "--commit", c2)

	fails := func(code int, want []string, args ...string) {
		t.Helper()
		r := k.run(args...)
		if r.code() != code {
			t.Fatalf("kl %s: exit code %d (%v), want %d", strings.Join(args, " "), r.code(), r.err, code)
		}
		for _, w := range want {
			if !strings.Contains(r.err.Error(), w) {
				t.Errorf("kl %s: error %q does not say %q", strings.Join(args, " "), r.err, w)
			}
		}
	}
	fails(1, []string{"no plan of acme/infra#9 in the store", "kl plan --pr acme/infra#9"}, "apply", "--pr", "acme/infra#9")
	fails(1, []string{"no plan of acme/infra#7 at commit " + strings.Repeat("d4", 20), p2.Run.ID + " (planned, commit " + c2[:12],
		p1.Run.ID + " (superseded, commit " + c1[:12]}, "apply", "--pr", "acme/infra#7", "--commit", strings.Repeat("d4", 20))
	fails(1, []string{"the newest plan of acme/infra#7 at commit " + c1 + ", " + p1.Run.ID + ", is superseded: not applicable"},
		"apply", "--pr", "acme/infra#7", "--commit", c1)
	fails(1, []string{"acme/infra#7 has plans of 2 projects at commit " + c2, "state prod, directory", "state stage, directory", "--state"},
		"apply", "--pr", "acme/infra#7")
	fails(1, []string{"not both"}, "apply", p2.Run.ID, "--pr", "acme/infra#7")
	fails(1, []string{"--commit is for --pr"}, "apply", p2.Run.ID, "--commit", c2)
	fails(1, []string{`--pr "acme/infra"`}, "apply", "--pr", "acme/infra")

	// --json: a missing plan is a kilolock/error/v1 document of kind not-found.
	r := k.run("--json", "apply", "--pr", "acme/infra#7", "--commit", strings.Repeat("d4", 20), "--state", "prod")
	if r.code() != 1 || !strings.Contains(r.out, `"kind": "not-found"`) {
		t.Errorf("kl --json apply --pr of a missing plan: exit %d, stdout:\n%s", r.code(), r.out)
	}

	var applied struct {
		Verdict string `json:"verdict"`
		Plan    struct {
			ID       string `json:"id"`
			Envelope struct {
				PlanDigest string `json:"plan_digest"`
			} `json:"envelope"`
		} `json:"plan"`
		Version struct {
			Provenance struct {
				PlanDigest        string `json:"plan_digest"`
				AppliedPlanDigest string `json:"applied_plan_digest"`
			} `json:"provenance"`
		} `json:"version"`
	}
	k.jsonOf(&applied, "apply", "--pr", "acme/infra#7", "--commit", c2[:7], "--state", "prod")
	if applied.Verdict != "allowed" || applied.Plan.ID != p2.Run.ID || applied.Version.Provenance.PlanDigest != p2.Envelope.PlanDigest || applied.Version.Provenance.AppliedPlanDigest != "" {
		t.Errorf("kl apply --pr: verdict %s of plan %s, applied digest %s; want plan %s applied with its digest %s",
			applied.Verdict, applied.Plan.ID, applied.Version.Provenance.PlanDigest+applied.Version.Provenance.AppliedPlanDigest, p2.Run.ID, p2.Envelope.PlanDigest)
	}
	// Applied already: a refusal naming the apply, not a second apply.
	k.refused("already applied", "apply", "--pr", "acme/infra#7", "--state", "prod")
}

// TestApplyPlannedAtMerge (issue 15 §1, §4): a plan made at merge (kl
// plan --at-merge) and its apply are never called "reviewed": the plan
// report says "planned at merge, not reviewed", the apply report "applied
// a plan nobody reviewed", in text, Markdown and JSON; inside GitHub
// Actions the pull request is linked.
func TestApplyPlannedAtMerge(t *testing.T) {
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), reportConfig("v1"))
	k.ok("state", "init", "prod")
	merge := strings.Repeat("e5", 20)
	r := k.run("plan", "--state", "prod", "-C", cfg, "--at-merge")
	if r.err == nil || !strings.Contains(r.err.Error(), "--at-merge needs --pr") {
		t.Errorf("kl plan --at-merge without --pr: %v, want it refused", r.err)
	}
	env := append(append([]string(nil), k.env...), "GITHUB_SERVER_URL=https://github.example", "GITHUB_REPOSITORY=acme/infra")
	kl, _ := k.recording(env)
	var plan prPlanDoc
	out := kl("plan", "--state", "prod", "-C", cfg, "--pr", "acme/infra#7", "--commit", merge, "--at-merge", "--json")
	if err := json.Unmarshal([]byte(out), &plan); err != nil || !plan.Envelope.PlannedAtMerge {
		t.Fatalf("kl plan --at-merge --json: planned_at_merge not true (%v):\n%s", err, out)
	}
	text := kl("run", "show", plan.Run.ID)
	if !strings.Contains(text, "planned at merge, not reviewed") {
		t.Errorf("kl run show of a plan made at merge does not say it is not reviewed:\n%s", text)
	}
	// Its commit is the base branch's after the merge, not the pull
	// request's head: "acme/infra#7 at C" would say otherwise.
	if want := "acme/infra#7, merged: planned at " + merge + " of its base branch"; !strings.Contains(text, want) {
		t.Errorf("kl run show of a plan made at merge does not say %q:\n%s", want, text)
	}
	md := kl("apply", plan.Run.ID)
	for _, want := range []string{"planned at merge, not reviewed: " + plan.Run.ID, "applied a plan nobody reviewed", "acme/infra#7"} {
		if !strings.Contains(md, want) {
			t.Errorf("the apply's report does not say %q:\n%s", want, md)
		}
	}
	var pj struct {
		Run struct {
			PR struct {
				URL string `json:"url"`
			} `json:"pr"`
		} `json:"run"`
	}
	if err := json.Unmarshal([]byte(out), &pj); err != nil || pj.Run.PR.URL != "https://github.example/acme/infra/pull/7" {
		t.Errorf("the plan's pull request is not linked (%v): %+v", err, pj)
	}
	if strings.Contains(md, "reviewed "+plan.Run.ID) || strings.Contains(md, "the reviewed plan") {
		t.Errorf("the apply's report calls the plan made at merge reviewed:\n%s", md)
	}
	var hist struct {
		Entries []struct {
			Version struct {
				Provenance struct {
					PlannedAtMerge bool `json:"planned_at_merge"`
				} `json:"provenance"`
			} `json:"version"`
		} `json:"entries"`
	}
	if err := json.Unmarshal([]byte(kl("history", "--state", "prod", "--json")), &hist); err != nil || len(hist.Entries) == 0 || !hist.Entries[0].Version.Provenance.PlannedAtMerge {
		t.Errorf("kl history --json: the version's provenance does not say planned_at_merge (%v): %+v", err, hist)
	}
}

// TestReportApplyOnPush (issue 15 §4): kl report github of an apply on
// push — no pull request in the event — updates the sticky comment of the
// pull request its plan was made for, which links it; the check run is
// on the pushed commit.
func TestReportApplyOnPush(t *testing.T) {
	g := setupGitHub(t, nil)
	planOut := g.runWith(g.ghEnv, "", "--json", "plan", "--state", ghState, "-C", g.cfg, "--pr", "actions")
	if planOut.err != nil {
		t.Fatalf("kl plan --pr actions: %v\n%s", planOut.err, planOut.errOut)
	}
	plan := runIDOf(t, planOut.out)
	g.report("--from-json", g.save("plan", planOut.out))
	if c := g.comment(); !strings.Contains(c.Body, "Plan `"+plan+"`") {
		t.Fatalf("the plan's comment does not tell plan %s:\n%s", plan, c.Body)
	}

	push := strings.Repeat("c3", 20)
	write(t, g.event, `{"ref":"refs/heads/main","before":"`+strings.Repeat("d4", 20)+`","after":"`+push+`"}`)
	g.ghEnv = append(g.ghEnv, "GITHUB_EVENT_NAME=push", "GITHUB_SHA="+push)
	r := g.runWith(g.ghEnv, "", "--json", "apply", plan, "--state", ghState)
	if r.err != nil {
		t.Fatalf("kl apply: %v\n%s", r.err, r.errOut)
	}
	apply := runIDOf(t, r.out)
	g.report("--from-json", g.save("apply", r.out))
	c := g.comment()
	if !strings.Contains(c.Body, "Apply `"+apply+"`") || c.Edits != 1 {
		t.Errorf("the apply on push did not update the sticky comment of #%d (%d edits):\n%s", ghPR, c.Edits, c.Body)
	}
	if !strings.Contains(c.Body, "[acme/infra#7]("+g.fake.URL()+"/acme/infra/pull/7)") {
		t.Errorf("the apply's comment does not link the pull request:\n%s", c.Body)
	}
	if cr := g.checkRun("kl apply · " + ghState); cr.HeadSHA != push {
		t.Errorf("the apply's check run is on %s, want the pushed commit %s", cr.HeadSHA, push)
	}
}
