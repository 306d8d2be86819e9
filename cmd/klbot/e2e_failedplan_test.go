package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/github/githubfake"
	"github.com/kilolock/kilolock/internal/store/pgtest"
	"github.com/kilolock/kilolock/internal/testprovider/tptest"
)

// TestFailedPlanMasksStateSecret: a pull request whose plan fails because
// Terraform cannot convert the unmarked terraform_data copy of a
// provider-sensitive value quotes that value in its error; the public
// check run says what failed with "(sensitive value)" in its place, and
// no comment, log line or non-artifact row holds the value (review of
// issue 12, defect 1; ADR 0047). Real Terraform, the test provider, real
// PostgreSQL.
func TestFailedPlanMasksStateSecret(t *testing.T) {
	const secret = "CloudApiSecret-e2e-31337"
	prov := tptest.New(t)
	obj := `{"id":"00000000000c10d1","name":"db","delay":null,"secret":"` + secret + `","settings":null,"rules":[],"created_at":"2026-12-01T00:00:00Z"}`
	if err := os.WriteFile(filepath.Join(prov.APIDir, "00000000000c10d1.json"), []byte(obj), 0o600); err != nil {
		t.Fatal(err)
	}
	files := baseRepo()
	files["infra/secret.tf"] = `terraform {
  required_providers {
    kltest = { source = "kilolock.test/kilolock/kltest" }
  }
}
data "kltest_object" "db" { id = "00000000000c10d1" }
resource "terraform_data" "copy" { input = data.kltest_object.db.secret }
`
	tfBin := terraformBinary(t)
	fake := githubfake.New(t)
	key := fake.NewAppKey(appID)
	fake.AddInstallation(1, appID, repo)
	fake.SetPermission(repo, "alice", "write")
	dsn := pgtest.DSN(t)
	bootstrap(t, dsn, tfBin, repo, files, prov.Env()...)
	logs := captureLogs(t)
	h := start(t, fake, key, dsn, tfBin, prov.Env()...)

	failing := baseRepo()
	failing["infra/secret.tf"] = files["infra/secret.tf"] + `resource "terraform_data" "num" { input = tonumber(terraform_data.copy.output) }` + "\n"
	h.open(t, pr{1, sha(1), failing, []string{"infra/secret.tf"}})
	h.settle()
	said := false
	for _, c := range h.fake.CheckRuns(repo) {
		text := c.Title + "\n" + c.Summary + "\n" + c.Text
		if strings.Contains(text, secret) {
			t.Errorf("check run %q holds the secret:\n%s", c.Name, text)
		}
		said = said || strings.Contains(text, `cannot convert "(sensitive value)"`)
	}
	if !said {
		t.Errorf("no check run says what failed, masked: %+v", h.fake.CheckRuns(repo))
	}
	for _, b := range h.bodies(1) {
		if strings.Contains(b, secret) {
			t.Errorf("a comment holds the secret:\n%s", b)
		}
	}
	if strings.Contains(strings.Join(logs.lines(func(map[string]any) bool { return true }), "\n"), secret) {
		t.Errorf("klbot logged the secret")
	}
	for _, l := range strings.Split(h.everyRow(t), "\n") {
		if strings.Contains(l, secret) {
			t.Errorf("a row holds the secret: %.300s", l)
		}
	}
}
