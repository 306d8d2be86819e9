package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/testprovider/tptest"
)

// The GitHub faces of a plan's diff (issue 12 §2, ADR 0044): the `kl plan
// · P` check run (the diff's summary line and destructive changes in its
// summary, one block per resource instance in its text) and the sticky
// comment, within GitHub's limits, sensitive values masked.

// checkRunLimit and commentLimit are GitHub's (docs/github.md): a check
// run's output.summary and output.text hold 65,535 characters each, a
// comment 65,536.
const checkRunLimit, commentLimit = 65535, 65536

// manyResources is a file of n terraform_data instances (one resource
// with count).
func manyResources(n int) string {
	return fmt.Sprintf("resource \"terraform_data\" \"many\" {\n  count = %d\n  input = \"many-${count.index}\"\n}\n", n)
}

// thousands writes n with a comma between thousands ("4,742").
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// TestPlanDiffBig: a pull request that creates 5,000 resource instances,
// destroys 4, replaces 1 and updates 1. Its plan check run shows the
// diff: the summary keeps the view, the diff's summary line flagged "⚠ 4
// to destroy, 1 to replace" and every destructive change; the text holds
// the blocks, destructive ones first, then the update with its attribute
// old → new, cut with how many were left out and the `kl run show RUN`
// that shows them all. The check run and the sticky comment stay within
// GitHub's limits (the fake refuses an over-long one, as GitHub does).
func TestPlanDiffBig(t *testing.T) {
	h := setup(t, "KLBOT_PUBLIC_URL="+publicURL)
	files := change(t, [3]string{"infra/app.tf", `"app_web-v1"`, `"app_web-v2"`},
		[3]string{"infra/app.tf", "\"app_api\" {\n  input = \"app_api-v1\"\n", "\"app_api\" {\n  input = \"app_api-v1\"\n  triggers_replace = [\"v2\"]\n"})
	delete(files, "infra/dns.tf")
	files["infra/many.tf"] = manyResources(5000)
	p := pr{1, sha(1), files, []string{"infra/app.tf", "infra/dns.tf", "infra/many.tf"}}
	h.open(t, p)
	h.settle()

	plan := h.planRun(1)
	c := h.one(t, p.head, "kl plan · infra")
	if len(c.Summary) > checkRunLimit || len(c.Text) > checkRunLimit {
		t.Fatalf("check run summary %d bytes, text %d bytes: over GitHub's %d", len(c.Summary), len(c.Text), checkRunLimit)
	}
	t.Logf("check run: summary %d bytes, text %d bytes", len(c.Summary), len(c.Text))
	// The four destroys remove what the bootstrap's version 1 created,
	// from commit sha(0) on main; the branch is up to date with main, so
	// the revert check (ADR 0046) says it is deliberate: no warning, the
	// check run succeeds.
	if c.Conclusion != "success" || !strings.HasPrefix(c.Title, "⚠ +5000 ~1 -4 ±1,") || !strings.HasSuffix(c.Title, ", undoes 4 earlier changes") {
		t.Errorf("check run %s %q, want success and a title flagged ⚠ +5000 ~1 -4 ±1 … undoes 4 earlier changes", c.Conclusion, c.Title)
	}
	mustContain(t, "the plan check run's summary", c.Summary, "undoes **version 1's** creation of `terraform_data.dns_a` (run `",
		"by bootstrap): this plan destroys what version 1 created. The branch is up to date with `main`, which holds commit `00c0ffe` of version 1, so this is deliberate.")
	if strings.Contains(c.Summary, "would undo") {
		t.Errorf("the plan check run warns of what the up-to-date branch deletes on purpose:\n%s", c.Summary)
	}
	destructive := []string{"- `terraform_data.dns_a` **will be destroyed** (because terraform\\_data.dns\\_a is not in configuration)\n" +
		"- `terraform_data.dns_b` **will be destroyed** (because terraform\\_data.dns\\_b is not in configuration)\n" +
		"- `terraform_data.dns_c` **will be destroyed** (because terraform\\_data.dns\\_c is not in configuration)\n" +
		"- `terraform_data.dns_zone` **will be destroyed** (because terraform\\_data.dns\\_zone is not in configuration)\n" +
		"- `terraform_data.app_api` **must be replaced**\n"}
	mustContain(t, "the plan check run's summary", c.Summary, append([]string{"### 📝 Plan `" + plan + "`",
		"**Diff:** 5000 to add, 1 to change, 4 to destroy, 1 to replace — **⚠ 4 to destroy, 1 to replace**",
		"**⚠ 4 to destroy, 1 to replace:**"}, destructive...)...)

	// The blocks: the five destructive ones first, then app_web's update.
	blocks := regexp.MustCompile(`<details><summary><code>([^<]+)</code> (<b>)?([^<]+)`).FindAllStringSubmatch(c.Text, -1)
	var first []string
	for _, m := range blocks[:min(len(blocks), 7)] {
		first = append(first, m[1]+" "+m[3])
	}
	want := []string{"terraform_data.dns_a will be destroyed", "terraform_data.dns_b will be destroyed", "terraform_data.dns_c will be destroyed",
		"terraform_data.dns_zone will be destroyed", "terraform_data.app_api must be replaced", "terraform_data.app_web will be updated in-place",
		"terraform_data.many[0] will be created"}
	if strings.Join(first, "\n") != strings.Join(want, "\n") {
		t.Errorf("the text's first blocks are\n%s\nwant\n%s", strings.Join(first, "\n"), strings.Join(want, "\n"))
	}
	mustContain(t, "the plan check run's text", c.Text, "\n#### Diff by resource instance\n", "```diff\n! resource \"terraform_data\" \"app_web\" {\n",
		"\n!     input  = \"app_web-v1\" -> \"app_web-v2\"\n", "\n+     triggers_replace = [ # forces replacement\n",
		fmt.Sprintf("\n… %s of 5,006 blocks left out: `kl run show %s` shows the whole diff\n", thousands(5006-len(blocks)), plan))
	t.Logf("the text holds %d of 5,006 blocks", len(blocks))
	if len(blocks) < 50 {
		t.Errorf("the text holds %d blocks; want as many as fit", len(blocks))
	}

	s := h.sticky(t, 1)
	if len(s) > commentLimit {
		t.Fatalf("sticky comment of %d bytes, over GitHub's %d", len(s), commentLimit)
	}
	t.Logf("sticky comment: %d bytes", len(s))
	mustContain(t, "the sticky comment", s, append([]string{"**Diff:** 5000 to add, 1 to change, 4 to destroy, 1 to replace — **⚠ 4 to destroy, 1 to replace**",
		"\n!     input  = \"app_web-v1\" -> \"app_web-v2\"\n", "blocks left out: `kl run show " + plan + "` shows the whole diff\n"}, destructive...)...)
	h.linksOpen(t, 1)
}

// TestPlanDiffSensitive: a pull request adds a test-provider object whose
// sensitive attribute (the provider's schema marks it) is a literal,
// another whose attribute is a sensitive variable (its value from a
// TF_VAR_* klbot passes), and a terraform_data whose input is that
// variable. The plan check run and the sticky comment show each as
// "(sensitive value)", and the values nowhere — nor does the run page the
// check run links to (issue 18).
func TestPlanDiffSensitive(t *testing.T) {
	const password, apiKey = "pw-e2e-s3cr3t-9931", "literal-api-key-0042"
	prov := tptest.New(t)
	h := setup(t, append(prov.Env(), "KLBOT_TF_VARS=TF_VAR_db_password", "TF_VAR_db_password="+password, "KLBOT_PUBLIC_URL="+publicURL)...)
	files := baseRepo()
	files["infra/secret.tf"] = `terraform {
  required_providers {
    kltest = { source = "kilolock.test/kilolock/kltest" }
  }
}

variable "db_password" {
  type      = string
  sensitive = true
}

resource "kltest_object" "db" {
  name   = "db"
  secret = var.db_password
}

resource "kltest_object" "api" {
  name   = "api"
  secret = "` + apiKey + `"
}

resource "terraform_data" "pw" {
  input = var.db_password
}
`
	p := pr{1, sha(1), files, []string{"infra/secret.tf"}}
	h.open(t, p)
	h.settle()

	c := h.one(t, p.head, "kl plan · infra")
	s := h.sticky(t, 1)
	secretLine := regexp.MustCompile(`(?m)^\+ +secret += \(sensitive value\)$`)
	inputLine := regexp.MustCompile(`(?m)^\+ +input += \(sensitive value\)$`)
	for what, md := range map[string]string{"the plan check run": c.Summary + c.Text, "the sticky comment": s} {
		mustContain(t, what, md, "**Diff:** 3 to add", `+ resource "kltest_object" "api" {`, `+ resource "kltest_object" "db" {`,
			`+ resource "terraform_data" "pw" {`)
		if n := len(secretLine.FindAllString(md, -1)); n != 2 {
			t.Errorf("%s shows %d secret attributes as (sensitive value), want 2:\n%s", what, n, md)
		}
		if !inputLine.MatchString(md) {
			t.Errorf("%s does not show terraform_data.pw's input as (sensitive value):\n%s", what, md)
		}
	}
	h.linksOpen(t, 1)
	page := h.page(t, c.DetailsURL)
	mustContain(t, "the run page", page, "Diff of plan", `+ resource "kltest_object" "db" {`, "(sensitive value)")
	for what, md := range map[string]string{"the plan check run's title": c.Title, "summary": c.Summary, "text": c.Text, "the sticky comment": s, "the run page": page} {
		for _, v := range []string{password, apiKey} {
			if strings.Contains(md, v) {
				t.Errorf("%s shows the sensitive value %q:\n%s", what, v, md)
			}
		}
	}
}
