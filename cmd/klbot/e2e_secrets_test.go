package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/github/githubfake"
)

// TestForkNotPlannedOnPush: a pull request from a fork is not planned on
// push (KLBOT_ALLOW_FORK_PRS is false by default): a plan would run the
// fork's Terraform code with klbot's credentials. It gets a neutral "kl
// plan" check run saying so and how to plan it; a user with write
// permission plans it with "/kl plan".
func TestForkNotPlannedOnPush(t *testing.T) {
	h := setup(t)
	p := pr{1, sha(1), change(t, [3]string{"infra/app.tf", `"app_web-v1"`, `"app_web-v2"`}), []string{"infra/app.tf"}}
	h.fake.SetTarball(repo, p.head, tarball(t, p.head, p.files))
	yes := true
	h.fake.AddPR(repo, githubfake.PR{Number: p.n, HeadSHA: p.head, Files: p.paths, Author: "stranger", HeadRepo: "stranger/infra",
		Mergeable: &yes, BaseSHA: sha(0)})
	if _, code := h.prEvent(t, "pull_request.opened.0", p, false); code != http.StatusAccepted {
		t.Fatalf("opened answered %d, want 202", code)
	}
	h.settle()
	c := h.one(t, p.head, "kl plan")
	if c.Conclusion != "neutral" || !strings.Contains(c.Summary, "from a fork") || !strings.Contains(c.Summary, "/kl plan") {
		t.Errorf("fork's kl plan check run: %s\n%s\nwant neutral, saying why and how to plan it", c.Conclusion, c.Summary)
	}
	if n := len(h.checkRuns(p.head, "kl plan · infra")); n != 0 {
		t.Errorf("a fork's push got %d project plans, want none", n)
	}
	if n := h.planRuns(); n != 1 {
		t.Errorf("%d plan runs after a fork's push, want 1 (the bootstrap's)", n)
	}

	// A writer who read the change plans it.
	h.comment(t, p.n, "alice", "/kl plan")
	h.settle()
	if c := h.one(t, p.head, "kl plan · infra"); c.Conclusion != "success" {
		t.Errorf("after /kl plan by a writer: %s\n%s", c.Conclusion, c.Summary)
	}
}

// TestSecretsNotInTerraformEnv: the Terraform klbot runs for a pull
// request cannot read klbot's own configuration — the App's private key,
// the webhook secret, the database URL — from its environment. The pull
// request's code counts what it can see and prints it in a failing
// precondition: no KLBOT_ variable, while TF_DATA_DIR (set for every run)
// shows the probe works.
func TestSecretsNotInTerraformEnv(t *testing.T) {
	h := setup(t)
	files := baseRepo()
	files["infra/probe.tf"] = `locals {
  environ = file("/proc/self/environ")
}
resource "terraform_data" "probe" {
  lifecycle {
    precondition {
      condition     = length(local.environ) < 0
      error_message = "probe: ${length(regexall("KLBOT_", local.environ))} klbot variables, ${length(regexall("TF_DATA_DIR=", local.environ))} data dir"
    }
  }
}
`
	p := pr{2, sha(2), files, []string{"infra/probe.tf"}}
	h.open(t, p)
	h.settle()
	c := h.one(t, p.head, "kl plan · infra")
	if !strings.Contains(c.Summary, "probe: 0 klbot variables, 1 data dir") {
		t.Errorf("the probe's plan check run does not show an environment without KLBOT_ variables:\n%s", c.Summary)
	}
	if strings.Contains(c.Summary, secret) {
		t.Errorf("the webhook secret reached a check run:\n%s", c.Summary)
	}
}

// TestTFVarsReachTerraform: the TF_VAR_* that KLBOT_TF_VARS lists reach
// the Terraform klbot runs for a pull request, the others do not; and the
// value, which the pull request's code prints in a failing precondition,
// is masked in the check run.
func TestTFVarsReachTerraform(t *testing.T) {
	const allowed, other = "allowed-value-1234", "other-value-5678"
	h := setup(t, "KLBOT_TF_VARS=TF_VAR_allowed", "TF_VAR_allowed="+allowed, "TF_VAR_other="+other)
	files := baseRepo()
	files["infra/probe.tf"] = `variable "allowed" {
  type    = string
  default = "unset"
}

variable "other" {
  type    = string
  default = "unset"
}

locals {
  environ = file("/proc/self/environ")
}

resource "terraform_data" "probe" {
  lifecycle {
    precondition {
      condition     = length(local.environ) < 0
      error_message = "probe: allowed ${var.allowed == "` + allowed + `" ? "reached" : "missing"}, other ${var.other}, ${length(regexall("TF_VAR_other=", local.environ))} TF_VAR_other, echo ${var.allowed}"
    }
  }
}
`
	p := pr{2, sha(2), files, []string{"infra/probe.tf"}}
	h.open(t, p)
	h.settle()
	c := h.one(t, p.head, "kl plan · infra")
	if want := "probe: allowed reached, other unset, 0 TF_VAR_other, echo (value of TF_VAR_allowed)"; !strings.Contains(c.Summary, want) {
		t.Errorf("the probe's plan check run does not say %q:\n%s", want, c.Summary)
	}
	if strings.Contains(c.Summary, allowed) || strings.Contains(c.Summary, other) {
		t.Errorf("a TF_VAR_* value reached a check run:\n%s", c.Summary)
	}
}
