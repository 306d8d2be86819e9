package cli_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// applyLogDoc is the part of the apply and run views' JSON that holds what
// Terraform said it did (docs/json.md "apply_log", ADR 0047).
type applyLogDoc struct {
	Schema   string `json:"schema"`
	ApplyLog *struct {
		Text   string         `json:"text"`
		Counts map[string]int `json:"counts"`
		Totals *struct {
			Add     int    `json:"add"`
			Message string `json:"message"`
		} `json:"totals"`
		Resources []struct {
			Address   string `json:"address"`
			Action    string `json:"action"`
			Outcome   string `json:"outcome"`
			ElapsedMS int64  `json:"elapsed_ms"`
			IDKey     string `json:"id_key"`
			IDValue   string `json:"id_value"`
		} `json:"resources"`
		Diagnostics []struct {
			Severity string `json:"severity"`
			Summary  string `json:"summary"`
			Detail   string `json:"detail"`
			Address  string `json:"address"`
			File     string `json:"file"`
			Line     int    `json:"line"`
			Context  string `json:"context"`
		} `json:"diagnostics"`
	} `json:"apply_log"`
}

// TestApplyReportsWhatTerraformDid: kl apply of three resources lists each
// with its outcome and timing, and Terraform's own totals line; kl run
// show of the apply says the same, and its JSON carries it (ADR 0047).
func TestApplyReportsWhatTerraformDid(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), `
resource "terraform_data" "a" { input = "a" }
resource "terraform_data" "b" { input = "b" }
resource "terraform_data" "slow" {
  input = "s"
  provisioner "local-exec" { command = "sleep 1.1" }
}
`)
	k.ok("state", "init", "prod")
	plan := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg))
	out := k.ok("apply", plan)
	apply := reULID.FindString(out)
	show := k.ok("run", "show", apply)
	for name, text := range map[string]string{"kl apply": out, "kl run show": show} {
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`(?m)^  terraform +Apply complete! Resources: 3 added, 0 changed, 0 destroyed\.$`),
			regexp.MustCompile(`(?m)^Terraform's apply, per resource instance \(3\): 3 applied$`),
			regexp.MustCompile(`(?m)^  applied +create +terraform_data\.a +(<1ms|\d+ms) +id=[0-9a-f-]{36}$`),
			regexp.MustCompile(`(?m)^  applied +create +terraform_data\.b +(<1ms|\d+ms) +id=[0-9a-f-]{36}$`),
			regexp.MustCompile(`(?m)^  applied +create +terraform_data\.slow +1\.\ds +id=[0-9a-f-]{36}$`),
		} {
			if !want.MatchString(text) {
				t.Errorf("%s does not print %s:\n%s", name, want, text)
			}
		}
	}
	var doc applyLogDoc
	k.jsonOf(&doc, "run", "show", apply)
	l := doc.ApplyLog
	if l == nil || l.Totals == nil || l.Totals.Message != "Apply complete! Resources: 3 added, 0 changed, 0 destroyed." || l.Totals.Add != 3 ||
		len(l.Resources) != 3 || l.Counts["applied"] != 3 || len(l.Diagnostics) != 0 {
		t.Fatalf("kl run show --json: apply_log %+v", l)
	}
	if r := l.Resources[2]; r.Address != "terraform_data.slow" || r.Outcome != "applied" || r.ElapsedMS < 1100 || r.IDKey != "id" {
		t.Errorf("the slow resource: %+v", r)
	}
}

// failingConfig fails in a local-exec provisioner whose command holds a
// sensitive variable (set by a var file: no TF_VAR_* to mask), through
// terraform_data's unmarked copy of it in output; a check block's
// assertion fails too (a warning).
const failingConfig = `variable "secret" {
  type      = string
  sensitive = true
}

resource "terraform_data" "ok" {
  input = "fine"
}

resource "terraform_data" "bad" {
  input = var.secret
  provisioner "local-exec" {
    command = "echo deploying with ${self.output}; exit 3"
  }
}

check "ok_is_zzz" {
  assert {
    condition     = terraform_data.ok.output == "zzz"
    error_message = "ok is not zzz"
  }
}
`

// TestApplyReportsTerraformFailure: a failed kl apply shows the errored
// resource, Terraform's diagnostics in full — the error with its address,
// the warning — in text and JSON, and the sensitive value Terraform quotes
// in its error is in no output, no log line, no store row and no artifact
// but Terraform's own (the saved plan, the configuration archive, the
// states).
func TestApplyReportsTerraformFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	const secret = "apply-log-secret-8642"
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), failingConfig)
	write(t, filepath.Join(cfg, "secret.tfvars"), `secret = "`+secret+`"`+"\n")
	env := append(append([]string(nil), k.env...), "KL_LOG_LEVEL=debug")
	var printed strings.Builder
	kl := func(args ...string) result {
		t.Helper()
		r := k.runWith(env, "", args...)
		printed.WriteString(r.out + r.errOut)
		if r.err != nil {
			printed.WriteString(r.err.Error())
		}
		return r
	}
	if r := kl("state", "init", "prod"); r.err != nil {
		t.Fatal(r.err)
	}
	r := kl("plan", "--state", "prod", "-C", cfg, "--var-file", "secret.tfvars")
	if r.err != nil {
		t.Fatalf("kl plan: %v\n%s", r.err, r.errOut)
	}
	plan := reULID.FindString(r.out)
	r = kl("apply", plan, "--json")
	if r.code() != 1 {
		t.Fatalf("kl apply: exit %d (%v), want 1: the apply fails\n%s", r.code(), r.err, r.errOut)
	}
	var doc applyLogDoc
	if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
		t.Fatalf("kl apply --json: %v\n%s", err, r.out)
	}
	if doc.Schema != "kilolock/apply/v3" || doc.ApplyLog == nil {
		t.Fatalf("kl apply --json: schema %q, apply_log %v", doc.Schema, doc.ApplyLog)
	}
	l := doc.ApplyLog
	outcomes := map[string]string{}
	for _, res := range l.Resources {
		outcomes[res.Address] = res.Outcome
	}
	if len(outcomes) != 2 || outcomes["terraform_data.ok"] != "applied" || outcomes["terraform_data.bad"] != "errored" || l.Totals != nil {
		t.Errorf("apply_log resources %v, totals %v: want ok applied, bad errored, no totals line", outcomes, l.Totals)
	}
	var sawErr, sawWarn bool
	for _, d := range l.Diagnostics {
		switch {
		case d.Severity == "error" && d.Summary == "local-exec provisioner error" && d.Address == "terraform_data.bad" && d.File == "main.tf" && d.Line == 12 &&
			strings.Contains(d.Detail, "Error running command 'echo deploying with (sensitive value); exit 3': exit status 3. Output: deploying with (sensitive value)"):
			sawErr = true
		case d.Severity == "warning" && d.Summary == "Check block assertion failed" && d.Detail == "ok is not zzz" && d.Context == `check "ok_is_zzz"`:
			sawWarn = true
		}
	}
	if !sawErr || !sawWarn {
		t.Errorf("apply_log diagnostics %+v: want the provisioner's error at terraform_data.bad (main.tf:12), masked, and the check's warning", l.Diagnostics)
	}

	apply := k.applyOf(plan)
	show := kl("run", "show", apply)
	for _, want := range []string{
		"  terraform  1 errored, 1 applied; no totals line (Terraform writes one only when the apply completes)\n",
		"Terraform's diagnostics: 1 error, 1 warning\n",
		"  Error: local-exec provisioner error\n" +
			"    with terraform_data.bad, on main.tf line 12, in resource \"terraform_data\" \"bad\"\n" +
			"    Error running command 'echo deploying with (sensitive value); exit 3': exit status 3. Output: deploying with (sensitive value)\n",
		"  Warning: Check block assertion failed\n    on main.tf line 19, in check \"ok_is_zzz\"\n    ok is not zzz\n",
		"Terraform's apply, per resource instance (2): 1 errored, 1 applied\n",
	} {
		if !strings.Contains(show.out, want) {
			t.Errorf("kl run show %s does not print %q:\n%s", apply, want, show.out)
		}
	}
	if !regexp.MustCompile(`(?m)^  errored +create +terraform_data\.bad +\S+$`).MatchString(show.out) {
		t.Errorf("kl run show %s does not list terraform_data.bad as errored:\n%s", apply, show.out)
	}
	kl("runs", "--json")
	kl("why", apply, "--json")

	if strings.Contains(printed.String(), secret) {
		t.Errorf("kl printed or logged the sensitive value:\n%s", printed.String())
	}
	if strings.Contains(k.dump(), secret) {
		t.Errorf("the sensitive value is in the store's rows")
	}
	logs := 0
	for _, a := range allArtifacts(t, k.store) {
		terraforms := a.name == "plan.tfplan" || a.name == "config.tar.gz" || strings.HasSuffix(a.name, ".tfstate")
		if bytes.Contains(a.data, []byte(secret)) && !terraforms {
			t.Errorf("stored artifact %s of run %s holds the sensitive value", a.name, a.run)
		}
		if a.name == "apply-log.json" {
			logs++
		}
	}
	if logs != 1 {
		t.Errorf("%d apply-log.json artifacts; want the apply's", logs)
	}
}
