package main

import (
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/github/githubfake"
	"github.com/kilolock/kilolock/internal/store/pgtest"
)

// TestDroppedProject (issue 11 defect 7): a pull request planned two
// projects at its first commit; its second push no longer touches project
// b. The sticky comment says so with the commit of each — b's plan made at
// the first, closed by the push at the second — and no "newer plan" that
// does not exist; pressing b's old Apply button is refused in those words
// on the commit of that button, never as an action_required check run on
// the new head.
func TestDroppedProject(t *testing.T) {
	tfBin := terraformBinary(t)
	fake := githubfake.New(t)
	key := fake.NewAppKey(appID)
	fake.AddInstallation(1, appID, repo)
	fake.SetPermission(repo, "alice", "write")
	dsn := pgtest.DSN(t)
	files := func(app, b string) map[string]string {
		f := baseRepo()
		f["kl.yaml"] = klYAML + "  - name: b\n    dir: b\n    state: acme/b\n"
		f["infra/app.tf"] = strings.Replace(f["infra/app.tf"], `"app_web-v1"`, app, 1)
		f["b/b.tf"] = resources("b_one") + b
		return f
	}
	bootstrap(t, dsn, tfBin, repo, baseRepo())
	bootstrap(t, dsn, tfBin, "acme/b", map[string]string{"infra/b.tf": resources("b_one")})
	h := start(t, fake, key, dsn, tfBin)

	first := pr{1, sha(1), files(`"app_web-v2"`, resources("b_two")), []string{"infra/app.tf", "b/b.tf"}}
	h.open(t, first)
	h.settle()
	h.one(t, sha(1), "kl plan · infra")
	h.one(t, sha(1), "kl plan · b")

	second := pr{1, sha(2), files(`"app_web-v3"`, resources("b_two")), []string{"infra/app.tf"}}
	h.seed(t, second, false)
	h.prEvent(t, "pull_request.synchronize.22", second, false)
	h.settle()
	h.one(t, sha(2), "kl plan · infra")
	if n := len(h.checkRuns(sha(2), "kl plan · b")); n != 0 {
		t.Errorf("the new head has %d plan check runs of b, want none", n)
	}
	sticky := rendered(h.sticky(t, 1))
	dropped := "the push at `" + sha(2)[:7] + "` no longer touches project b; its plan made at `" + sha(1)[:7] + "` is closed"
	mustContain(t, "the sticky comment", strings.ToLower(sticky), dropped)
	mustLack(t, "the sticky comment", sticky, "newer plan", "` at `"+sha(2)[:7]+"` is **superseded**")

	h.deliver("check_run", githubfake.RequestedAction(repo, "kl:1:b", sha(1), "alice", "kl-apply"))
	h.settle()
	if crs := h.checkRuns(sha(2), "kl apply · b"); len(crs) != 0 {
		t.Errorf("pressing b's old Apply button put %d apply check runs of b on the new head, want none: %s", len(crs), crs[0].Summary)
	}
	// A press on a button whose plan is closed is answered to the presser
	// (issue 11 §8), not in a check run: in the same words.
	if crs := h.checkRuns(sha(1), "kl apply · b"); len(crs) != 0 {
		t.Errorf("pressing b's old Apply button put %d apply check runs of b on its plan's commit, want none (a reply)", len(crs))
	}
	var reply string
	for _, c := range h.fake.Comments(repo, 1) {
		if c.UserType == "Bot" && !strings.Contains(c.Body, "kilolock:sticky:pr ") {
			reply = c.Body
		}
	}
	mustContain(t, "the reply to the old Apply button", strings.ToLower(rendered(reply)), "the push at "+sha(2)[:7]+" no longer touches project b", "no longer applicable")
	mustLack(t, "the reply to the old Apply button", rendered(reply), "newer plan")
	mustContain(t, "the sticky comment after the press", strings.ToLower(rendered(h.sticky(t, 1))), dropped)
}
