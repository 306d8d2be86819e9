package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
	"github.com/kilolock/kilolock/internal/github/githubfake"
	"github.com/kilolock/kilolock/internal/terraform"
)

// wholeConfig replaces the whole configuration a native-lane plan keeps
// for its validation (engine.ArtifactWholeConfig) with files' infra dir.
func (h *harness) wholeConfig(t *testing.T, plan string, files map[string]string) {
	t.Helper()
	dir := t.TempDir()
	for n, body := range files {
		if rel, ok := strings.CutPrefix(n, "infra/"); ok {
			if err := os.WriteFile(filepath.Join(dir, rel), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	runner, err := terraform.NewRunner(terraform.RunnerOptions{WorkRoot: t.TempDir(), Binary: h.tfBin})
	if err != nil {
		t.Fatal(err)
	}
	whole, err := runner.ArchiveConfig(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.openStore(t).PutArtifact(context.Background(), plan, engine.ArtifactWholeConfig, whole); err != nil {
		t.Fatal(err)
	}
}

// nativeYAML is klYAML on the native lane, validating every apply: the
// default branch's kl.yaml of TestNativeLane.
const nativeYAML = "version: 1\nlane: native\nvalidate: always\nprojects:\n  - name: infra\n    dir: infra\n    state: acme/infra\n"

// TestNativeLane: kl.yaml's lane: and validate: (issue 17 §1, §6; ADR
// 0070). They are safety keys: with the default branch on klbot's
// defaults, a pull request whose own kl.yaml asks for lane: native fails
// "kl config" and nothing is planned. Once the default branch says lane:
// native and validate: always, a pull request changing one resource plans
// on the native lane, scoped to its changed files against the base
// commit's tree (the plan check run shows the lane line and the closure
// proof), and "/kl apply" validates it first ("validated: native intent
// unchanged") and commits a delta. A pull request changing a .tfvars, and
// one changing more files than GitHub lists, fall back to the terraform
// lane saying why.
func TestNativeLane(t *testing.T) {
	h := setup(t)
	h.fake.SetTarball(repo, sha(0), tarball(t, sha(0), baseRepo()))
	app := "infra/app.tf"

	// The pull request cannot choose the native lane itself.
	files := change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`},
		[3]string{"kl.yaml", "    state: acme/infra\n", "    state: acme/infra\n    lane: native\n"})
	p1 := pr{1, sha(1), files, []string{app, "kl.yaml"}}
	h.open(t, p1)
	h.settle()
	if crs := h.checkRuns(p1.head, "kl plan · infra"); len(crs) != 0 {
		t.Errorf("PR 1 asks for lane: native and got %d plan check runs: %s %q", len(crs), crs[0].Conclusion, crs[0].Title)
	}
	mustContain(t, "PR 1's kl config check run", h.one(t, p1.head, "kl config").Summary,
		`kl.yaml:6: project "infra": lane native loosens terraform (klbot's default: the default branch has no kl.yaml): `+
			"a pull request may only move it along native → auto → terraform, not back")

	// The default branch chooses it: a change of one resource plans its closure.
	h.fake.SetFile(repo, githubfake.DefaultBranch, "kl.yaml", []byte(nativeYAML))
	p2 := pr{2, sha(2), change(t, [3]string{app, `"app_web-v1"`, `"app_web-v2"`}), []string{app}}
	h.open(t, p2)
	h.settle()
	c := h.one(t, p2.head, "kl plan · infra")
	if c.Conclusion != "success" {
		t.Fatalf("PR 2: plan %s %q:\n%s", c.Conclusion, c.Title, c.Summary)
	}
	mustContain(t, "PR 2's plan check run", c.Summary, "native (scoped to changed files", "closure proof", "slice-validates passed",
		"changed files `app.tf`")
	golden(t, "lane/pr2.plan.md", c.Summary)
	h.comment(t, 2, "alice", "/kl apply")
	h.settle()
	c = h.one(t, p2.head, "kl apply · infra")
	if c.Conclusion != "success" {
		t.Fatalf("PR 2: apply %s %q:\n%s", c.Conclusion, c.Title, c.Summary)
	}
	mustContain(t, "PR 2's apply check run (validate: always)", c.Summary, "**validation:** native intent unchanged", "commit mode:** delta")
	golden(t, "lane/pr2.apply.md", c.Summary)
	if serial := h.headSerial(); serial != 2 {
		t.Fatalf("head serial %d after PR 2's apply, want 2", serial)
	}

	// A validation that plans something else refuses the apply with both
	// intents: the whole configuration kept for it is made to say dns_b-v9
	// where the native plan says dns_b-v2, as a closure missing an input would.
	up := [3]string{app, `"app_web-v1"`, `"app_web-v2"`} // up to date with PR 2's change
	p5 := pr{5, sha(5), change(t, up, [3]string{"infra/dns.tf", `"dns_b-v1"`, `"dns_b-v2"`}), []string{"infra/dns.tf"}}
	h.open(t, p5)
	h.settle()
	if c := h.one(t, p5.head, "kl plan · infra"); c.Conclusion != "success" || !strings.Contains(c.Summary, "native (scoped to changed files") {
		t.Fatalf("PR 5: plan %s %q, want success on the native lane:\n%s", c.Conclusion, c.Title, c.Summary)
	}
	h.wholeConfig(t, h.planRun(5), change(t, up, [3]string{"infra/dns.tf", `"dns_b-v1"`, `"dns_b-v9"`}))
	h.comment(t, 5, "alice", "/kl apply")
	h.settle()
	c = h.one(t, p5.head, "kl apply · infra")
	if c.Conclusion != "action_required" {
		t.Fatalf("PR 5: apply %s %q, want refused by its validation:\n%s", c.Conclusion, c.Title, c.Summary)
	}
	mustContain(t, "PR 5's refused apply", c.Summary, "Refused: validation changed the native intent",
		"**native intent:** `terraform_data.dns_b: update sha256:", "**terraform lane intent:** `terraform_data.dns_b: update sha256:")
	golden(t, "lane/pr5.apply.md", c.Summary)
	sticky := h.stickyOnce(t, 5, "validation changed")
	mustContain(t, "PR 5's sticky comment", sticky, "validation changed the native intent")
	h.noCLICommands(t, 2, 5)
	if serial := h.headSerial(); serial != 2 {
		t.Fatalf("head serial %d after PR 5's refused apply, want 2", serial)
	}

	// A var file: the closure cannot tell what it sets.
	files = change(t, up, [3]string{"infra/db.tf", `"db_main-v1"`, `"db_main-v2"`})
	files["infra/terraform.tfvars"] = "# no values yet\n"
	p3 := pr{3, sha(3), files, []string{"infra/db.tf", "infra/terraform.tfvars"}}
	h.open(t, p3)
	h.settle()
	c = h.one(t, p3.head, "kl plan · infra")
	if c.Conclusion != "success" {
		t.Fatalf("PR 3: plan %s %q:\n%s", c.Conclusion, c.Title, c.Summary)
	}
	mustContain(t, "PR 3's plan check run", c.Summary,
		"fell back from the native lane: terraform.tfvars changed: a variable file sets values the configuration does not show")

	// More files than GitHub lists: the list is not the change.
	paths := []string{"infra/dns.tf"}
	for i := range 3000 {
		paths = append(paths, fmt.Sprintf("docs/page-%04d.md", i))
	}
	p4 := pr{4, sha(4), change(t, up, [3]string{"infra/dns.tf", `"dns_a-v1"`, `"dns_a-v2"`}), paths}
	h.open(t, p4)
	h.settle()
	c = h.one(t, p4.head, "kl plan · infra")
	if c.Conclusion != "success" && c.Conclusion != "neutral" {
		t.Fatalf("PR 4: plan %s %q:\n%s", c.Conclusion, c.Title, c.Summary)
	}
	mustContain(t, "PR 4's plan check run", c.Summary,
		"fell back from the native lane: GitHub lists 3000 of the pull request's 3001 changed files (at most 3000): the changed files are not all known")
	if strings.Contains(c.Summary, "lane           native") {
		t.Errorf("PR 4 planned on the native lane:\n%s", c.Summary)
	}

	// validate: merge (the default): "/kl apply" does not validate; the
	// apply at merge does.
	h.fake.SetFile(repo, githubfake.DefaultBranch, "kl.yaml", []byte("version: 1\nlane: native\nprojects:\n  - name: infra\n    dir: infra\n    state: acme/infra\n"))
	dnsC := [3]string{"infra/dns.tf", `"dns_c-v1"`, `"dns_c-v2"`}
	p6 := pr{6, sha(6), change(t, up, dnsC), []string{"infra/dns.tf"}}
	h.open(t, p6)
	h.settle()
	h.comment(t, 6, "alice", "/kl apply")
	h.settle()
	c = h.one(t, p6.head, "kl apply · infra")
	if c.Conclusion != "success" || strings.Contains(c.Summary, "**validation:**") || !strings.Contains(c.Summary, "**lane:** native") {
		t.Fatalf("PR 6 (validate: merge, applied by comment): apply %s %q, want applied on the native lane without validation:\n%s", c.Conclusion, c.Title, c.Summary)
	}
	h.mergePR(t, p6)
	h.fake.SetFile(repo, githubfake.DefaultBranch, "kl.yaml", []byte("version: 1\nlane: native\napply_trigger: merge\nprojects:\n  - name: infra\n    dir: infra\n    state: acme/infra\n"))
	net := [3]string{"infra/net.tf", `"net_subnet_d-v1"`, `"net_subnet_d-v2"`}
	p7 := pr{7, sha(7), change(t, up, dnsC, net), []string{"infra/net.tf"}}
	h.open(t, p7)
	h.settle()
	if c := h.one(t, p7.head, "kl plan · infra"); !strings.Contains(c.Summary, "**lane:** native") {
		t.Fatalf("PR 7: plan %s %q, want the native lane:\n%s", c.Conclusion, c.Title, c.Summary)
	}
	h.merged(t, p7, sha(70), change(t, up, dnsC, net))
	h.settle()
	c = h.one(t, p7.head, "kl apply · infra")
	if c.Conclusion != "success" {
		t.Fatalf("PR 7 merged: apply %s %q:\n%s", c.Conclusion, c.Title, c.Summary)
	}
	mustContain(t, "PR 7's apply at merge (validate: merge)", c.Summary, "**validation:** native intent unchanged")
	golden(t, "lane/pr7.apply.md", c.Summary)
}
