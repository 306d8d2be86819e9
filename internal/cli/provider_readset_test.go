package cli_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/testprovider"
)

// readSetConfig is issue 10 §4's configuration on the test provider: web's
// rule blocks come from a dynamic block whose for_each reads ports, and
// its precondition reads gate. Plan JSON lists neither reference (ADR
// 0036). WEB is web's name (a change of it is the plan under test).
const readSetConfig = testprovider.RequiredProvidersBlock + `
resource "kltest_object" "ports" {
  name     = "ports"
  settings = { labels = { https = "443", ssh = "22" } }
}

resource "kltest_object" "gate" {
  name = "gate"
}

resource "kltest_object" "web" {
  name = "WEB"

  dynamic "rule" {
    for_each = kltest_object.ports.settings.labels
    content {
      port = tonumber(rule.value)
      cidr = "10.0.0.0/8"
    }
  }

  lifecycle {
    precondition {
      condition     = kltest_object.gate.name == "gate"
      error_message = "web needs the gate."
    }
  }
}

resource "kltest_object" "other" {
  name = "other"
}
`

// readSetModuleConfig is the same in a module: module app's web reads its
// variables in a dynamic block and a precondition only; the root passes
// ports' labels and gate's name in.
const readSetModuleConfig = testprovider.RequiredProvidersBlock + `
resource "kltest_object" "ports" {
  name     = "ports"
  settings = { labels = { https = "443", ssh = "22" } }
}

resource "kltest_object" "gate" {
  name = "gate"
}

resource "kltest_object" "other" {
  name = "other"
}

module "app" {
  source = "./app"
  name   = "WEB"
  ports  = kltest_object.ports.settings.labels
  gate   = kltest_object.gate.name
}
`

const readSetModuleApp = testprovider.RequiredProvidersBlock + `
variable "name" {
  type = string
}

variable "ports" {
  type = map(string)
}

variable "gate" {
  type = string
}

resource "kltest_object" "web" {
  name = var.name

  dynamic "rule" {
    for_each = var.ports
    content {
      port = tonumber(rule.value)
      cidr = "10.0.0.0/8"
    }
  }

  lifecycle {
    precondition {
      condition     = var.gate == "gate"
      error_message = "web needs the gate."
    }
  }
}
`

// footprintJSONDoc is the footprint part of `kl plan --json` and `kl
// footprint --json`.
type footprintJSONDoc struct {
	Write   []string `json:"write"`
	Read    []string `json:"read"`
	Widened []struct {
		Address string `json:"address"`
		From    string `json:"from"`
		Reason  string `json:"reason"`
	} `json:"widened"`
	Unverified *string `json:"unverified"`
}

// TestProviderReadSetDynamicAndConditions (issue 10 §4, ADR 0036) with the
// test provider and real Terraform: kltest_object.web's rule blocks come
// from a dynamic block whose for_each reads kltest_object.ports, and its
// lifecycle precondition reads kltest_object.gate — two references plan
// JSON does not list. For a plan changing web alone (the others applied
// before):
//
//   - `kl plan`, which reads the configuration, has a read set holding
//     ports and gate, not other, and is never unverified;
//   - `kl footprint` of the same plan's JSON (`terraform show -json` of a
//     saved plan Terraform made outside kl, against the head kl pulled)
//     with --config-dir gives exactly kl plan's footprint, verified;
//   - without --config-dir, in the root module, the traces (the rule
//     blocks the configuration in plan JSON does not list; the plan's
//     checks) widen the read set to the whole state, which covers ports
//     and gate, so it is not unverified (the widening covers it: ADR 0036
//     decision 3);
//   - without --config-dir, in module app, the traces widen module.app.*
//     and read the module call's arguments (ports and gate), and the root
//     module, whose configuration was not read and is not covered, makes
//     the read set unverified — in JSON and in the text report.
func TestProviderReadSetDynamicAndConditions(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform with the test provider")
	}
	t.Parallel()
	k := setup(t)
	withProvider(k)
	cases := []struct {
		name, state, main string
		app               bool
		web               string // web's address
		read              []string
		// noConfig is the read set of `kl footprint` without --config-dir
		// (sorted), and whether it is unverified.
		noConfig   []string
		unverified bool
	}{
		{name: "root", state: "root", main: readSetConfig, web: "kltest_object.web",
			read: []string{"kltest_object.gate", "kltest_object.ports"}, noConfig: []string{"*"}},
		{name: "module", state: "module", main: readSetModuleConfig, app: true, web: "module.app.kltest_object.web",
			read:     []string{"kltest_object.gate", "kltest_object.ports"},
			noConfig: []string{"kltest_object.gate", "kltest_object.ports", "module.app.*"}, unverified: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := k.with(t)
			cfg := filepath.Join(k.dir, c.name, "cfg")
			config := func(web string) {
				write(t, filepath.Join(cfg, "main.tf"), strings.Replace(c.main, "WEB", web, 1))
				if c.app {
					write(t, filepath.Join(cfg, "app", "main.tf"), readSetModuleApp)
				}
			}
			config("web")
			k.ok("state", "init", c.state)
			k.ok("apply", reULID.FindString(k.ok("plan", "--state", c.state, "-C", cfg)))

			// The plan under test: web's name changes.
			config("web-2")
			var plan struct {
				Run       runDoc           `json:"run"`
				Footprint footprintJSONDoc `json:"footprint"`
			}
			k.jsonOf(&plan, "plan", "--state", c.state, "-C", cfg)
			if !slices.Equal(plan.Footprint.Write, []string{c.web}) || !slices.Equal(plan.Footprint.Read, c.read) || plan.Footprint.Unverified != nil {
				t.Fatalf("kl plan: write %v, read %v, unverified %v; want write %s, read %v, verified",
					plan.Footprint.Write, plan.Footprint.Read, plan.Footprint.Unverified, c.web, c.read)
			}
			if text := k.ok("run", "show", plan.Run.ID); strings.Contains(text, "unverified") {
				t.Errorf("kl run show of kl's own plan says unverified:\n%s", text)
			}

			// The same plan made by Terraform outside kl, against the head.
			planJSON := terraformPlanJSON(k, cfg, k.ok("state", "pull", c.state))

			var exact struct {
				Footprint footprintJSONDoc `json:"footprint"`
			}
			k.jsonOf(&exact, "footprint", planJSON, "--config-dir", cfg)
			if !slices.Equal(exact.Footprint.Write, []string{c.web}) || !slices.Equal(exact.Footprint.Read, c.read) ||
				len(exact.Footprint.Widened) != 0 || exact.Footprint.Unverified != nil {
				t.Errorf("kl footprint --config-dir: %+v; want write %s, read %v, nothing widened, verified", exact.Footprint, c.web, c.read)
			}

			var bare struct {
				Footprint footprintJSONDoc `json:"footprint"`
			}
			k.jsonOf(&bare, "footprint", planJSON)
			t.Logf("kl footprint without --config-dir:\n%s", k.ok("footprint", planJSON))
			if !slices.Equal(bare.Footprint.Write, []string{c.web}) || !slices.Equal(bare.Footprint.Read, c.noConfig) {
				t.Errorf("kl footprint: write %v, read %v; want write %s, read %v (widened over what plan JSON leaves out)",
					bare.Footprint.Write, bare.Footprint.Read, c.web, c.noConfig)
			}
			var reasons []string
			for _, w := range bare.Footprint.Widened {
				reasons = append(reasons, w.From+": "+w.Reason)
			}
			all := strings.Join(reasons, "\n")
			for _, want := range []string{"nested blocks rule of kltest_object.web", "lifecycle conditions of kltest_object.web"} {
				if !strings.Contains(all, want) {
					t.Errorf("kl footprint: widenings do not name %q:\n%s", want, all)
				}
			}
			text := k.ok("footprint", planJSON)
			switch {
			case c.unverified && (bare.Footprint.Unverified == nil || !strings.HasPrefix(*bare.Footprint.Unverified, "configuration not read (root)")):
				t.Errorf("kl footprint: unverified %v; want \"configuration not read (root)…\"", bare.Footprint.Unverified)
			case c.unverified && !strings.Contains(text, "unverified"):
				t.Errorf("kl footprint (text) does not say unverified:\n%s", text)
			case !c.unverified && bare.Footprint.Unverified != nil:
				t.Errorf("kl footprint: unverified %q; want none (the whole state is read)", *bare.Footprint.Unverified)
			}
		})
	}
}

// terraformPlanJSON makes, with Terraform outside kl, a saved plan of the
// configuration in dir against state (a state v4 document), and returns
// the path of its `terraform show -json` (beside dir).
func terraformPlanJSON(k *kit, dir, state string) string {
	k.t.Helper()
	work := dir + "-terraform"
	if err := os.CopyFS(work, os.DirFS(dir)); err != nil {
		k.t.Fatal(err)
	}
	write(k.t, filepath.Join(work, "terraform.tfstate"), state)
	k.terraform(work, "init", "-input=false", "-no-color")
	k.terraform(work, "plan", "-input=false", "-no-color", "-lock=false", "-out=plan.tfplan")
	out := filepath.Join(filepath.Dir(dir), "plan.json")
	write(k.t, out, string(k.terraform(work, "show", "-json", "plan.tfplan")))
	return out
}
