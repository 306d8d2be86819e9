package terraform

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// TestShellQuote: what cliArgs writes for Terraform's parser of
// TF_CLI_ARGS* (go-shellwords).
func TestShellQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":        `''`,
		"plain":   `'plain'`,
		"it's":    `'it'\''s'`,
		`a\b "c"`: `'a\b "c"'`,
		"''":      `''\'''\'''`,
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
	got := cliArgs([]string{"../.kl-varfiles/000-a.tfvars"}, []engine.Var{{Name: "x", Value: "1"}, {Name: "y", Value: "it's"}})
	if want := `'-var-file=../.kl-varfiles/000-a.tfvars' '-var=x=1' '-var=y=it'\''s'`; got != want {
		t.Errorf("cliArgs = %s, want %s", got, want)
	}
}

// nastyValue holds every character a shell or go-shellwords treats
// specially, and white space of each kind.
const nastyValue = "it's a \"test\" \\ $HOME ${HOME} `id` $(id) ; & | < > * ? ~ # =\n\tline 2 ''"

// TestPlanVarsReachTerraform: -var values reach Terraform unchanged, what
// ever they hold, with -var's precedence — over terraform.tfvars, an
// *.auto.tfvars and a var file (varsConfig) — and the value of an
// ephemeral variable reaches the apply, which needs it again (ADR 0045).
func TestPlanVarsReachTerraform(t *testing.T) {
	t.Parallel()
	r, _ := setupRunner(t)
	dir := setupConfig(t, map[string]string{
		"main.tf": `variable "s" {
  type = string
}

variable "l" {
  type = list(string)
}

variable "e" {
  type      = string
  ephemeral = true
}

resource "terraform_data" "s" {
  input = var.s
}

resource "terraform_data" "l" {
  input = var.l
}

resource "terraform_data" "e" {
  provisioner "local-exec" {
    command     = "test \"$E\" = ephemeral-value-123"
    environment = { E = var.e }
  }
}
`,
		"terraform.tfvars":  "s = \"from terraform.tfvars\"\n",
		"z.auto.tfvars":     "s = \"from z.auto.tfvars\"\n",
		"vars/prod.tfvars":  "s = \"from the var file\"\n",
		"vars/other.tfvars": "l = [\"from the var file\"]\n",
	})
	ctx := context.Background()
	vars := []engine.Var{
		{Name: "s", Value: "overridden"}, {Name: "s", Value: nastyValue}, // the later one wins
		{Name: "l", Value: `["a b", "c"]`}, {Name: "e", Value: "ephemeral-value-123"},
	}
	plan, err := r.Plan(ctx, engine.PlanRequest{Run: "01VARS", Dir: dir, VarFiles: []string{"vars/prod.tfvars", "vars/other.tfvars"},
		Options: engine.PlanOptions{Vars: engine.VarNames(vars)}, Vars: vars, Snapshot: snapshot("4aa507be-6a16-e4b4-7ed6-770b2fd0f107", 1)})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	res, err := r.Apply(ctx, engine.ApplyRequest{Run: "01VARSAPPLY", PlanFile: plan.PlanFile, Config: plan.Config,
		Snapshot: snapshot("4aa507be-6a16-e4b4-7ed6-770b2fd0f107", 1), Vars: vars})
	if err != nil {
		t.Fatalf("Apply (with the ephemeral variable's -var): %v", err)
	}
	var st struct {
		Resources []struct {
			Name      string `json:"name"`
			Instances []struct {
				Attributes struct {
					Input struct {
						Value any `json:"value"`
					} `json:"input"`
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(res.State, &st); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, res := range st.Resources {
		a := res.Instances[0].Attributes
		b, _ := json.Marshal(a.Input.Value)
		got[res.Name] = string(b)
	}
	// e's provisioner checked the ephemeral value the apply was given.
	want := map[string]string{"s": mustJSON(t, nastyValue), "l": `["a b","c"]`, "e": "null"}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("terraform_data.%s = %s, want %s", name, got[name], w)
		}
	}
	// The Runner's diff masks -var values like TF_VAR_* ones.
	b, _ := json.Marshal(plan.Diff)
	if strings.Contains(string(b), "ephemeral-value-123") || strings.Contains(string(b), "$(id)") {
		t.Errorf("the diff holds a -var value:\n%s", b)
	}
}

// TestPlanVarApplyNeedsEphemeral: without its value at apply, Terraform
// refuses to apply a plan made with an ephemeral variable: what the apply
// is given is what it needs (the check above is no accident).
func TestPlanVarApplyNeedsEphemeral(t *testing.T) {
	t.Parallel()
	r, _ := setupRunner(t)
	dir := setupConfig(t, map[string]string{"main.tf": `variable "e" {
  type      = string
  ephemeral = true
}

resource "terraform_data" "e" {
  provisioner "local-exec" {
    command     = "test -n \"$E\""
    environment = { E = var.e }
  }
}
`})
	ctx := context.Background()
	vars := []engine.Var{{Name: "e", Value: "ephemeral-value-456"}}
	snap := snapshot("4aa507be-6a16-e4b4-7ed6-770b2fd0f108", 1)
	plan, err := r.Plan(ctx, engine.PlanRequest{Run: "01EPH", Dir: dir, Options: engine.PlanOptions{Vars: []string{"e"}}, Vars: vars, Snapshot: snap})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	_, err = r.Apply(ctx, engine.ApplyRequest{Run: "01EPHAPPLY", PlanFile: plan.PlanFile, Config: plan.Config, Snapshot: snap})
	if err == nil || !strings.Contains(err.Error(), "must also be set during the apply phase") {
		t.Errorf("Apply without the ephemeral variable's value: %v; want Terraform's refusal", err)
	}
}

// TestPlanRequestChecked: options and -var values that cannot be handed to
// Terraform are refused before it runs, naming the variable, never
// quoting its value.
func TestPlanRequestChecked(t *testing.T) {
	t.Parallel()
	r, root := setupRunner(t)
	dir := setupConfig(t, map[string]string{"main.tf": `resource "terraform_data" "a" {}`})
	for name, tc := range map[string]struct {
		req  engine.PlanRequest
		want string
	}{
		"names differ": {engine.PlanRequest{Options: engine.PlanOptions{Vars: []string{"a"}}, Vars: []engine.Var{{Name: "b", Value: "secret-value-1"}}},
			"the plan options name the variables [a], but -var values are given for [b]"},
		"NUL": {engine.PlanRequest{Options: engine.PlanOptions{Vars: []string{"a"}}, Vars: []engine.Var{{Name: "a", Value: "secret\x00value"}}},
			"-var a: the value holds a NUL byte"},
		"too long": {engine.PlanRequest{Options: engine.PlanOptions{Vars: []string{"a"}}, Vars: []engine.Var{{Name: "a", Value: strings.Repeat("s", engine.MaxVarBytes+1)}}},
			"at most 65536"},
		"two modes": {engine.PlanRequest{Options: engine.PlanOptions{Destroy: true, RefreshOnly: true}}, "-destroy and -refresh-only"},
	} {
		tc.req.Run, tc.req.Dir, tc.req.Snapshot = "01BAD", dir, snapshot("4aa507be-6a16-e4b4-7ed6-770b2fd0f109", 1)
		_, err := r.Plan(context.Background(), tc.req)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Plan = %v, want an error saying %q", name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: Plan = %v quotes the value", name, err)
		}
	}
	assertEmptyDir(t, root)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
