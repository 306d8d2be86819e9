package terraform

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// covers reports whether the read set holds a, itself or under a prefix.
func covers(read engine.AddressSet, a engine.Address) bool {
	for _, r := range read {
		if r == a || (r.IsPrefix() && r.Overlaps(a)) {
			return true
		}
	}
	return false
}

// TestFootprintNeverNarrower reads the real plans of testdata/plans (see
// its README): what plan JSON leaves out — the references of dynamic
// blocks, lifecycle conditions and replace_triggered_by, a module whose
// directory is not there before `terraform init` — must never make the
// read set narrower than what the configuration reads (truth, checked by
// hand against the .tf files). Without a config dir the read set covers the
// truth through widenings where plan JSON leaves a trace, and says it is
// unverified unless the widenings cover every module it depends on; with one
// it is exact, or widened to the prefix of a module whose directory cannot
// be read, and verified.
func TestFootprintNeverNarrower(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		truth []string
		// exact is the read set with the config dir.
		exact []string
		// widened lists "PREFIX <- FROM" without the config dir.
		widened []string
		// widenedDir lists "PREFIX <- FROM" with the config dir.
		widenedDir []string
		// unverified: without the config dir, a module the read set
		// depends on is neither read nor covered by a widening.
		unverified bool
	}{
		"dynamic_block_update": {
			truth:   []string{"terraform_data.cidrs", "terraform_data.edge_cidrs", "terraform_data.extra", "terraform_data.mode"},
			exact:   []string{"terraform_data.cidrs", "terraform_data.edge_cidrs", "terraform_data.extra", "terraform_data.mode"},
			widened: []string{"* <- nested blocks ingress of nested_group.mixed in root, nested blocks ingress of nested_group.web in root", "module.edge.* <- nested blocks ingress of nested_group.this in module.edge"},
		},
		"dynamic_block_create": {
			// for_each is unknown: the planned ingress blocks are unknown,
			// settings is known to be one block with an unknown mode.
			truth:   []string{"terraform_data.cidrs", "terraform_data.edge_cidrs", "terraform_data.extra", "terraform_data.mode"},
			exact:   []string{"terraform_data.cidrs", "terraform_data.edge_cidrs", "terraform_data.extra", "terraform_data.mode"},
			widened: []string{"* <- nested blocks ingress of nested_group.mixed in root, nested blocks ingress, settings of nested_group.web in root", "module.edge.* <- nested blocks ingress of nested_group.this in module.edge"},
		},
		"lifecycle_conditions": {
			truth:   []string{"terraform_data.gate", "terraform_data.limit", "terraform_data.post", "terraform_data.r", "terraform_data.trigger"},
			exact:   []string{"terraform_data.gate", "terraform_data.limit", "terraform_data.post", "terraform_data.r", "terraform_data.trigger"},
			widened: []string{"* <- lifecycle conditions of output.r in root, lifecycle conditions of terraform_data.r in root", "module.app.* <- lifecycle conditions of terraform_data.svc in module.app"},
		},
		"remote_module": {
			truth: []string{"module.network.terraform_data.quota", "module.network.terraform_data.subnet", "terraform_data.zone"},
			// module.network's directory is not in the checkout: widened to
			// its prefix, and its call's arguments read.
			exact:      []string{"module.network.*", "module.network.terraform_data.subnet", "terraform_data.zone"},
			widened:    []string{"module.network.* <- lifecycle conditions of terraform_data.subnet in module.network"},
			widenedDir: []string{"module.network.* <- configuration of module.network"},
			// terraform_data.app leaves no trace: it may have a
			// replace_triggered_by that plan JSON does not show.
			unverified: true,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join("testdata", "plans", name)
			b, err := os.ReadFile(filepath.Join(dir, "plan.json"))
			if err != nil {
				t.Fatal(err)
			}
			check := func(label string, opts ExtractOptions, wantWidened []string) engine.Footprint {
				t.Helper()
				fp, _, err := Footprint(b, opts)
				if err != nil {
					t.Fatalf("%s: %v", label, err)
				}
				for _, a := range tt.truth {
					if !covers(fp.Read, engine.Address(a)) {
						t.Errorf("%s: read set %q misses %s, which the configuration reads", label, fp.Read, a)
					}
				}
				var widened []string
				for _, w := range fp.Widened {
					widened = append(widened, string(w.Address)+" <- "+w.From)
				}
				if !reflect.DeepEqual(widened, wantWidened) {
					t.Errorf("%s: widened = %q, want %q", label, widened, wantWidened)
				}
				return fp
			}

			fp := check("plan JSON alone", ExtractOptions{}, tt.widened)
			if got := fp.Unverified != ""; got != tt.unverified || (got && !strings.HasPrefix(fp.Unverified, "configuration not read (root)")) {
				t.Errorf("plan JSON alone: unverified = %q, want unverified %t (root not read)", fp.Unverified, tt.unverified)
			}

			fp = check("config dir", ExtractOptions{ConfigDir: dir}, tt.widenedDir)
			if got := fpAddrs(fp.Read); !reflect.DeepEqual(got, tt.exact) {
				t.Errorf("config dir: read = %q, want %q", got, tt.exact)
			}
			if fp.Unverified != "" {
				t.Errorf("config dir: unverified = %q, want verified", fp.Unverified)
			}
		})
	}
}

// TestUntracedBlocks pins which planned shapes count as nested blocks the
// configuration does not list (the trace of a dynamic block), by shape alone.
func TestUntracedBlocks(t *testing.T) {
	t.Parallel()
	decode := func(s string) any {
		t.Helper()
		if s == "" {
			return nil
		}
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := map[string]struct {
		exprs                     string // the resource's "expressions" in plan JSON
		after, unknown, sensitive string
		want                      []string
	}{
		"listed attribute":           {exprs: `{"rules":{"references":["var.r"]}}`, after: `{"rules":[{"a":"x"}]}`},
		"unlisted list of objects":   {exprs: `{}`, after: `{"rule":[{"a":"x"}]}`, want: []string{"rule"}},
		"unlisted empty list":        {exprs: `{}`, after: `{"rule":[]}`},
		"unlisted list of strings":   {exprs: `{}`, after: `{"names":["a"]}`},
		"unlisted map of strings":    {exprs: `{}`, after: `{"tags_all":{"Name":"x"}}`},
		"unlisted object":            {exprs: `{}`, after: `{"settings":{"mode":"x","port":1}}`, want: []string{"settings"}},
		"unlisted object, unknowns":  {exprs: `{}`, after: `{"settings":{}}`, unknown: `{"settings":{"mode":true}}`, want: []string{"settings"}},
		"unknown scalar":             {exprs: `{}`, after: `{}`, unknown: `{"id":true}`},
		"unknown collection":         {exprs: `{}`, after: `{}`, unknown: `{"rule":true}`, sensitive: `{"rule":[]}`, want: []string{"rule"}},
		"static blocks, same count":  {exprs: `{"rule":[{"a":{"constant_value":"x"}}]}`, after: `{"rule":[{"a":"x"}]}`},
		"static blocks, more":        {exprs: `{"rule":[{"a":{"constant_value":"x"}}]}`, after: `{"rule":[{"a":"x"},{"a":"y"}]}`, want: []string{"rule"}},
		"static blocks, unknown":     {exprs: `{"rule":[{"a":{"constant_value":"x"}}]}`, after: `{}`, unknown: `{"rule":true}`, want: []string{"rule"}},
		"static blocks, fewer (set)": {exprs: `{"rule":[{"a":{"constant_value":"x"}},{"a":{"constant_value":"x"}}]}`, after: `{"rule":[{"a":"x"}]}`},
		"dynamic inside static": {
			exprs: `{"rule":[{"a":{"constant_value":"x"}}]}`,
			after: `{"rule":[{"a":"x","match":[{"cidr":"10.0.0.0/8"}]}]}`, want: []string{"rule.match"},
		},
		"dynamic inside a single block": {
			exprs: `{"settings":{"mode":{"constant_value":"x"}}}`,
			after: `{"settings":{"mode":"x","extra":[{"k":"v"}]}}`, want: []string{"settings.extra"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			exprs, err := decodeExpressions(mustRawMap(t, tt.exprs))
			if err != nil {
				t.Fatal(err)
			}
			found := map[string]bool{}
			untracedBlocks("", exprs, decode(tt.after), decode(tt.unknown), decode(tt.sensitive), found)
			var got []string
			for k := range found {
				got = append(got, k)
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("untraced = %q, want %q", got, tt.want)
			}
		})
	}
}

func mustRawMap(t *testing.T, s string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFootprintTraceReadData: a data source read while planning is in
// prior_state only; its dynamic "filter" blocks leave their trace there.
func TestFootprintTraceReadData(t *testing.T) {
	t.Parallel()
	plan := `{"format_version":"1.2","terraform_version":"1.11.4",
	 "resource_changes":[` + fpChange("module.app.terraform_data.r", `"update"`) + `],
	 "prior_state":{"format_version":"1.0","values":{"root_module":{"child_modules":[{"address":"module.app","resources":[
	   {"address":"module.app.data.x_image.i","mode":"data","type":"x_image","name":"i","provider_name":"registry.terraform.io/x/x",
	    "values":{"id":"i-1","filter":[{"name":"tag","values":["a"]}]},"sensitive_values":{"filter":[{"values":[false]}]}}]}]}}},
	 "configuration":{"root_module":{"module_calls":{"app":{"source":"./app",
	   "expressions":{"tag":{"references":["terraform_data.tag.output","terraform_data.tag"]}},
	   "module":{"resources":[
	    {"address":"terraform_data.r","mode":"managed","type":"terraform_data","name":"r",
	     "expressions":{"input":{"references":["data.x_image.i.id","data.x_image.i"]}}},
	    {"address":"data.x_image.i","mode":"data","type":"x_image","name":"i","expressions":{}}]}}}}}}`
	fp, _, err := Footprint([]byte(plan), ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"module.app.*", "module.app.data.x_image.i", "terraform_data.tag"}
	if got := fpAddrs(fp.Read); !reflect.DeepEqual(got, want) {
		t.Errorf("read = %q, want %q", got, want)
	}
	if len(fp.Widened) != 1 || fp.Widened[0].From != "nested blocks filter of data.x_image.i in module.app" {
		t.Errorf("widened = %+v, want module.app.* from the filter blocks of data.x_image.i", fp.Widened)
	}
	// module.app is covered by its prefix and its call's arguments; the
	// root adds only those arguments, which plan JSON lists whole.
	if fp.Unverified != "" {
		t.Errorf("unverified = %q, want verified", fp.Unverified)
	}
}

// TestFootprintConfigDirMismatch: a config dir that lacks a block the plan
// configures does not match the plan: the module is widened, not dropped.
func TestFootprintConfigDirMismatch(t *testing.T) {
	t.Parallel()
	plan := `{"format_version":"1.2",
	 "resource_changes":[` + fpChange("terraform_data.r", `"update"`) + `],
	 "configuration":{"root_module":{"resources":[{"address":"terraform_data.r","mode":"managed","type":"terraform_data","name":"r"}]}}}`
	dir := setupConfigDir(t, map[string]string{"main.tf": `resource "terraform_data" "other" {}`})
	fp, _, err := Footprint([]byte(plan), ExtractOptions{ConfigDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(fp.Widened) != 1 || fp.Widened[0].Address != engine.AllAddresses || fp.Widened[0].From != "terraform_data.r in root" ||
		!strings.Contains(fp.Widened[0].Reason, "the config dir does not match the plan") {
		t.Errorf("widened = %+v, want * from terraform_data.r: the config dir does not match", fp.Widened)
	}
	if fp.Unverified != "" {
		t.Errorf("unverified = %q: a widening to * covers everything", fp.Unverified)
	}
}

// TestFootprintBadConfigDir: a config dir that is not a root module is bad
// input, named in the error.
func TestFootprintBadConfigDir(t *testing.T) {
	t.Parallel()
	plan := []byte(`{"format_version":"1.2","resource_changes":[` + fpChange("terraform_data.r", `"update"`) + `]}`)
	empty := t.TempDir()
	file := filepath.Join(empty, "main.tf")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ dir, want string }{
		"missing":      {filepath.Join(empty, "nope"), "config dir: stat " + filepath.Join(empty, "nope") + ": no such file or directory"},
		"a file":       {file, "config dir " + file + " is not a directory"},
		"no .tf files": {t.TempDir(), "holds no .tf or .tf.json files: not a Terraform root module"},
	} {
		_, _, err := Footprint(plan, ExtractOptions{ConfigDir: tc.dir})
		if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrInvalid saying %q", name, err, tc.want)
		}
	}
}

// TestPlanFootprintVerified: `kl plan` (Runner.Plan) always reads the
// configuration, so its footprint is never unverified, and it finds what
// plan JSON leaves out — lifecycle conditions, replace_triggered_by, an
// output precondition — in local modules and in a remote (git) module that
// `terraform init` fetched into the run's TF_DATA_DIR.
func TestPlanFootprintVerified(t *testing.T) {
	t.Parallel()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skipf("skipping: a git module source needs git: %v", err)
	}
	r, _ := setupRunner(t)
	repo := filepath.Join(t.TempDir(), "network")
	writeTree(t, repo, map[string]string{"main.tf": `
variable "zone" { type = string }
resource "terraform_data" "subnet" {
  input = "net-${var.zone}"
  lifecycle {
    precondition {
      condition     = terraform_data.quota.output > 0
      error_message = "no quota"
    }
  }
}
resource "terraform_data" "quota" { input = 5 }
output "subnet" { value = terraform_data.subnet.output }
`})
	for _, args := range [][]string{{"init", "-q"}, {"add", "main.tf"}, {"-c", "user.email=kl@test", "-c", "user.name=kl", "commit", "-qm", "v1"}} {
		cmd := exec.Command(git, args...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	files := map[string]string{}
	for _, p := range []string{"main.tf", "modules/app/main.tf"} {
		b, err := os.ReadFile(filepath.Join("testdata", "plans", "lifecycle_conditions", filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		files[p] = string(b)
	}
	files["network.tf"] = `
resource "terraform_data" "zone" { input = "a" }
module "network" {
  source = "git::file://` + filepath.ToSlash(repo) + `"
  zone   = terraform_data.zone.output
}
`
	dir := setupConfig(t, files)
	plan, err := r.Plan(context.Background(), engine.PlanRequest{Run: "01VERIFIED", Dir: dir, Snapshot: snapshot("4aa507be-6a16-e4b4-7ed6-770b2fd0f106", 0)})
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	fp := plan.Footprint
	if fp.Unverified != "" {
		t.Errorf("kl plan's footprint is unverified: %q", fp.Unverified)
	}
	want := []string{
		"module.network.terraform_data.quota", // precondition in the git module
		"terraform_data.gate",                 // output precondition; var.gate of module.app's precondition
		"terraform_data.limit",                // precondition
		"terraform_data.post",                 // postcondition
		"terraform_data.r",                    // output.r
		"terraform_data.trigger",              // replace_triggered_by
		"terraform_data.zone",                 // module.network's zone
	}
	if got := fpAddrs(fp.Read); !reflect.DeepEqual(got, want) {
		t.Errorf("read = %q, want %q", got, want)
	}
	if len(fp.Widened) != 0 {
		t.Errorf("widened = %+v, want none: the configuration was read", fp.Widened)
	}
}
