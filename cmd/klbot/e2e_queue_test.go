package main

import (
	"testing"
)

// TestAggregateCheck (issue 15 §2): every pull request head gets one
// aggregate "kl" check run beside the per-project ones — the check to
// require, since GitHub asks the same names of pull requests and merge
// groups. It passes while each touched project's plan is applicable or
// applied, and when nothing is touched; it fails once another pull
// request's commit makes a plan stale, and for an invalid kl.yaml.
func TestAggregateCheck(t *testing.T) {
	h := setup(t)
	app := "infra/app.tf"
	p1 := pr{1, sha(1), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}), []string{app}}
	p3 := pr{3, sha(3), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v3"`}), []string{app}}
	p8 := pr{8, sha(8), change(t, [3]string{"README.md", "infra", "infra, documented"}), []string{"README.md"}}
	bad := baseRepo()
	bad["kl.yaml"] = "version: 1\nprojects:\n  - name: infra\n    dirr: infra\n    state: acme/infra\n"
	p9 := pr{9, sha(9), bad, []string{"kl.yaml"}}
	for _, p := range []pr{p1, p3, p8, p9} {
		h.open(t, p)
		h.settle()
	}
	for _, p := range []pr{p1, p3} {
		k := h.shown(t, p.head, "kl")
		if k.Conclusion != "success" || k.Title != "1 project ready" {
			t.Errorf("PR %d's kl check: %s %q, want success \"1 project ready\"", p.n, k.Conclusion, k.Title)
		}
		mustContain(t, "the kl check of a planned head", rendered(k.Summary), "| `infra` | `acme/infra` |", "applicable; `/kl apply -p infra` applies it")
	}
	if k := h.shown(t, p8.head, "kl"); k.Conclusion != "success" || k.Title != "No project touched" {
		t.Errorf("PR 8's kl check: %s %q, want success \"No project touched\"", k.Conclusion, k.Title)
	}
	if k := h.shown(t, p9.head, "kl"); k.Conclusion != "failure" {
		t.Errorf("PR 9's kl check (invalid kl.yaml): %s %q, want failure", k.Conclusion, k.Title)
	} else {
		mustContain(t, "the kl check of an invalid kl.yaml", k.Summary, "kl.yaml is invalid", "`kl config`")
	}

	h.comment(t, 1, "alice", "/kl apply")
	h.settle()
	k1 := h.shown(t, p1.head, "kl")
	if k1.Conclusion != "success" {
		t.Errorf("PR 1's kl check after its apply: %s %q, want success", k1.Conclusion, k1.Title)
	}
	mustContain(t, "PR 1's kl check after its apply", rendered(k1.Summary), "applied by run", "version 2")
	k3 := h.shown(t, p3.head, "kl")
	if k3.Conclusion != "failure" {
		t.Errorf("PR 3's kl check after PR 1 changed its planned target: %s %q, want failure", k3.Conclusion, k3.Title)
	}
	t.Logf("PR 3's kl check:\n%s", k3.Summary)
	mustContain(t, "PR 3's stale kl check", rendered(k3.Summary), "stale: version 2 by acme/infra#1", "/kl plan")
	for _, p := range []pr{p1, p3, p8, p9} {
		if n := len(h.checkRuns(p.head, "kl")); n != 1 {
			t.Errorf("PR %d's head has %d kl check runs, want 1", p.n, n)
		}
	}
}
