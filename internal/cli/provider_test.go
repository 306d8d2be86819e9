package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/kilolock/kilolock/internal/testprovider"
	"github.com/kilolock/kilolock/internal/testprovider/tptest"
)

// withProvider gives k the test provider (internal/testprovider): the CLI
// configuration that installs it from a filesystem mirror (replacing the
// kit's TF_CLI_CONFIG_FILE=/dev/null: kl passes a user's TF_CLI_CONFIG_FILE
// on to Terraform) and the fake cloud API's directory.
func withProvider(k *kit) *tptest.Provider {
	k.t.Helper()
	p := tptest.New(k.t)
	k.env = envWith(k.env, p.Env()...)
	return p
}

const providerSecret = "kl-secret-7f3a9c"

const providerConfig = testprovider.RequiredProvidersBlock + `
resource "kltest_object" "a" {
  name   = "a"
  delay  = "200ms"
  secret = "` + providerSecret + `"
  settings = {
    size   = SIZE
    labels = { env = "prod" }
  }
  rule {
    port = 443
    cidr = "10.0.0.0/8"
  }
}

resource "kltest_object" "b" {
  count = 2
  name  = "b${count.index}"
  delay = "50ms"
}

data "kltest_object" "a" {
  id = kltest_object.a.id
}

output "a_secret" {
  value     = kltest_object.a.secret
  sensitive = true
}
`

// TestRealProvider runs kl plan and kl apply on a configuration of a real
// provider built from source (the test provider, installed by `terraform
// init` from a filesystem mirror through TF_CLI_CONFIG_FILE): the applies
// commit exactly what was planned (the data source it reads is no
// change); kl's plugin cache (plugins/ next to the store, ADR 0061) is
// filled once, each run executing its own copy, and the plugin_cache_dir
// of the user's CLI configuration is not used; the plan of the
// configuration without a lock file says its providers were not cached;
// and the sensitive value appears in no output of kl — text, JSON or
// debug log.
func TestRealProvider(t *testing.T) {
	t.Parallel()
	k := setup(t)
	p := withProvider(k)
	work := filepath.Join(k.dir, "runs")
	k.env = envWith(k.env, "KL_KEEP_WORKDIRS=1", "KL_WORKDIR="+work, "KL_LOG_LEVEL=debug")
	cfg := filepath.Join(k.dir, "cfg")
	var outputs []string
	kl := func(args ...string) string {
		t.Helper()
		r := k.run(args...)
		if r.err != nil {
			t.Fatalf("kl %s: %v\n%s", strings.Join(args, " "), r.err, r.errOut)
		}
		outputs = append(outputs, r.out, r.errOut)
		return r.out
	}
	type story struct {
		Run     struct{ ID string } `json:"run"`
		Verdict string              `json:"verdict"`
		Text    string              `json:"text"`
		Version *struct {
			Changed    []string `json:"changed"`
			Provenance struct {
				Exact bool `json:"exact"`
			} `json:"provenance"`
		} `json:"version"`
	}
	planApply := func(size string, wantChanged ...string) []string {
		t.Helper()
		write(t, filepath.Join(cfg, "main.tf"), strings.Replace(providerConfig, "SIZE", size, 1))
		plan := reULID.FindString(kl("plan", "--state", "prod", "-C", cfg))
		var s story
		if err := json.Unmarshal([]byte(kl("apply", plan, "--json")), &s); err != nil {
			t.Fatal(err)
		}
		if s.Version == nil || !s.Version.Provenance.Exact || strings.Join(s.Version.Changed, " ") != strings.Join(wantChanged, " ") {
			t.Fatalf("apply of %s = %s (%s), version %+v; want exact, changing %v", plan, s.Verdict, s.Text, s.Version, wantChanged)
		}
		return []string{plan, s.Run.ID}
	}

	kl("state", "init", "prod")
	runs := planApply("3", "kltest_object.a", "kltest_object.b[0]", "kltest_object.b[1]", "output.a_secret") // instances (ADR 0065)
	// The configuration has no lock file: the plan installed its provider
	// for itself alone; the apply, with the plan's lock file, filled kl's
	// plugin cache, next to the store (ADR 0061).
	pkg := filepath.Join(k.dir, "plugins", testprovider.Hostname, testprovider.Namespace, testprovider.Type, testprovider.Version, testprovider.Platform)
	binary := filepath.Join(pkg, "terraform-provider-"+testprovider.Type+"_v"+testprovider.Version)
	first := inode(t, binary)
	if objs := p.Objects(t); len(objs) != 3 {
		t.Fatalf("the fake API holds %v, want the 3 objects the apply created", objs)
	}
	if show := kl("run", "show", runs[0]); !strings.Contains(show, "providers: the configuration has no .terraform.lock.hcl") {
		t.Errorf("kl run show of the plan without a lock file does not say its providers were not cached:\n%s", show)
	}
	// The lock file Terraform wrote is committed: the next runs take the
	// provider from the cache.
	write(t, filepath.Join(cfg, ".terraform.lock.hcl"), lockFileOf(t, work, runs[1]))

	runs = append(runs, planApply("4", "kltest_object.a")...)
	if inode(t, binary) != first {
		t.Errorf("plugin cache binary inode %d, first %d: want the one package installed once", inode(t, binary), first)
	}
	if got := p.Cached(t); len(got) != 0 {
		t.Errorf("the CLI configuration's plugin_cache_dir holds %v: kl's cache must replace it", got)
	}
	for _, run := range runs {
		link := filepath.Join(work, run, "data", "providers", testprovider.Hostname, testprovider.Namespace, testprovider.Type,
			testprovider.Version, testprovider.Platform)
		target, err := os.Readlink(link)
		want := filepath.Join(work, run, "plugins", testprovider.Hostname, testprovider.Namespace, testprovider.Type, testprovider.Version,
			testprovider.Platform)
		if err != nil || target != want {
			t.Errorf("run %s: %s links to %q (%v), want the run's own copy %s", run, link, target, err, want)
		}
		kl("run", "show", run)
		kl("run", "show", run, "--json")
	}
	kl("history", "--state", "prod")
	kl("history", "--state", "prod", "--json")
	kl("state", "list")
	for i, out := range outputs {
		if strings.Contains(out, providerSecret) {
			t.Errorf("output %d of kl shows the sensitive value:\n%s", i, out)
		}
	}
}

// lockFileOf is the lock file Terraform wrote in the kept work dir of run.
func lockFileOf(t *testing.T, work, run string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(work, run, "cfg", "*", ".terraform.lock.hcl"))
	if err == nil && len(m) == 0 {
		m, err = filepath.Glob(filepath.Join(work, run, "cfg", ".terraform.lock.hcl"))
	}
	if err != nil || len(m) != 1 {
		t.Fatalf("lock file of run %s: %v (%v)", run, m, err)
	}
	b, err := os.ReadFile(m[0])
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// inode is the inode number of path (the same file, not rewritten).
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestSchemaUpgradeIsNoDeviation (issue 10 §3): a provider upgrade raises
// its schema version (KLTEST_SCHEMA_VERSION=1), and Terraform rewrites
// every instance of that provider the next apply writes — at the new
// schema version, in the new encoding — though the plan changes one. That
// re-encoding is representation, not change: the apply of a plan changing
// r1 commits exactly r1, says once "re-encoded by Terraform: 4" (text and
// JSON), keeps the new encoding at the head (every instance at version 1,
// as Terraform wrote it), and the other open plan, made at the same head,
// is not stale: it applies exactly too. An object that changed outside
// Terraform meanwhile (refresh drift, a planned no-op) is a change all the
// same: unplanned, in the changed set — not re-encoded.
func TestSchemaUpgradeIsNoDeviation(t *testing.T) {
	t.Parallel()
	k := setup(t)
	p := withProvider(k)
	cfg := filepath.Join(k.dir, "cfg")
	const n = 5
	config := func(changed map[int]string) {
		var b strings.Builder
		b.WriteString(testprovider.RequiredProvidersBlock)
		for i := range n {
			name := fmt.Sprintf("r%d", i)
			if c, ok := changed[i]; ok {
				name = c
			}
			fmt.Fprintf(&b, "\nresource \"kltest_object\" \"r%d\" {\n  name = %q\n  settings = { size = %d }\n}\n", i, name, i)
		}
		write(t, filepath.Join(cfg, "main.tf"), b.String())
	}
	type jstory struct {
		Run     struct{ ID string } `json:"run"`
		Verdict string              `json:"verdict"`
		Text    string              `json:"text"`
		Version *struct {
			Changed    []string `json:"changed"`
			Provenance struct {
				Exact     bool     `json:"exact"`
				Reencoded []string `json:"reencoded"`
				Deviation *struct {
					Unplanned []string `json:"unplanned"`
				} `json:"deviation"`
			} `json:"provenance"`
		} `json:"version"`
	}
	apply := func(plan string) jstory {
		t.Helper()
		var s jstory
		if err := json.Unmarshal([]byte(k.ok("apply", plan, "--json")), &s); err != nil {
			t.Fatal(err)
		}
		if s.Version == nil {
			t.Fatalf("apply of %s = %s (%s): no version", plan, s.Verdict, s.Text)
		}
		return s
	}
	config(nil)
	k.ok("state", "init", "prod")
	apply(reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg)))

	// The provider is upgraded for everyone: two plans at head 1, one
	// changing r1, the other r2. (Not targeted: Terraform 1.11 cannot show
	// a targeted plan whose untargeted instances are at an older schema
	// version — "schema version 0 for kltest_object.r0 in state does not
	// match version 1 from the provider".)
	k.env = envWith(k.env, testprovider.EnvSchemaVersion+"=1")
	config(map[int]string{1: "r1-changed"})
	planA := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg))
	config(map[int]string{2: "r2-changed"})
	planB := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg))

	a := apply(planA)
	want := []string{"kltest_object.r0", "kltest_object.r2", "kltest_object.r3", "kltest_object.r4"}
	if !a.Version.Provenance.Exact || strings.Join(a.Version.Changed, " ") != "kltest_object.r1" ||
		strings.Join(a.Version.Provenance.Reencoded, " ") != strings.Join(want, " ") {
		t.Fatalf("apply of the r1 change = %s (%s), version %+v; want exact, changing kltest_object.r1 alone, re-encoded %v",
			a.Verdict, a.Text, a.Version, want)
	}
	show := k.ok("run", "show", a.Run.ID)
	if strings.Count(show, "re-encoded by Terraform: 4") != 1 {
		t.Errorf("kl run show does not say once \"re-encoded by Terraform: 4\":\n%s", show)
	}
	var head struct {
		Resources []struct {
			Name      string `json:"name"`
			Instances []struct {
				SchemaVersion int `json:"schema_version"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal([]byte(k.ok("state", "pull", "prod")), &head); err != nil {
		t.Fatal(err)
	}
	for _, r := range head.Resources {
		if r.Instances[0].SchemaVersion != 1 {
			t.Errorf("head: %s at schema version %d, want 1 (the encoding Terraform wrote is kept)", r.Name, r.Instances[0].SchemaVersion)
		}
	}

	// The plan of r2, made at the same head, is not stale: nothing it
	// reads or writes changed, and it applies exactly.
	b := apply(planB)
	if !b.Version.Provenance.Exact || strings.Join(b.Version.Changed, " ") != "kltest_object.r2" {
		t.Errorf("apply of the r2 change = %s (%s), version %+v; want exact, changing kltest_object.r2 alone", b.Verdict, b.Text, b.Version)
	}

	// An object changed outside Terraform (its created_at, which no
	// configuration sets: a planned no-op) while another is re-encoded.
	k.env = envWith(k.env, testprovider.EnvSchemaVersion+"=0")
	config(nil)
	k.ok("state", "init", "drift")
	apply(reULID.FindString(k.ok("plan", "--state", "drift", "-C", cfg)))
	var st struct {
		Resources []struct {
			Name      string `json:"name"`
			Instances []struct {
				Attributes struct {
					ID string `json:"id"`
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal([]byte(k.ok("state", "pull", "drift")), &st); err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Resources {
		if r.Name == "r4" {
			obj := filepath.Join(p.APIDir, r.Instances[0].Attributes.ID+".json")
			raw, err := os.ReadFile(obj)
			if err != nil {
				t.Fatal(err)
			}
			var o map[string]any
			if err := json.Unmarshal(raw, &o); err != nil {
				t.Fatal(err)
			}
			o["created_at"] = "2020-01-02T03:04:05Z"
			raw, _ = json.Marshal(o)
			write(t, obj, string(raw))
		}
	}
	k.env = envWith(k.env, testprovider.EnvSchemaVersion+"=1")
	config(map[int]string{1: "r1-changed"})
	d := apply(reULID.FindString(k.ok("plan", "--state", "drift", "-C", cfg)))
	if d.Version.Provenance.Exact || d.Version.Provenance.Deviation == nil ||
		strings.Join(d.Version.Provenance.Deviation.Unplanned, " ") != "kltest_object.r4" ||
		strings.Join(d.Version.Changed, " ") != "kltest_object.r1 kltest_object.r4" ||
		strings.Join(d.Version.Provenance.Reencoded, " ") != "kltest_object.r0 kltest_object.r2 kltest_object.r3" {
		t.Errorf("apply over a changed object = %s (%s), version %+v; want r4 changed but not planned, r0, r2, r3 re-encoded",
			d.Verdict, d.Text, d.Version)
	}
}

// TestPluginCacheDirSetting: KL_PLUGIN_CACHE_DIR moves kl's plugin cache
// (ADR 0061) elsewhere, and "off" disables it: Terraform then installs as
// the user's CLI configuration says (its plugin_cache_dir here), and kl
// makes no plugins/ next to the store.
func TestPluginCacheDirSetting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, setting string
		klCache       func(dir string) string // where kl's cache must hold the provider; "" none
		userCache     bool                    // the CLI configuration's plugin_cache_dir holds it
	}{
		{name: "elsewhere", setting: "elsewhere", klCache: func(dir string) string { return filepath.Join(dir, "elsewhere") }},
		{name: "off", setting: "off", userCache: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := setup(t)
			p := withProvider(k)
			setting := tc.setting
			if tc.klCache != nil {
				setting = tc.klCache(k.dir)
			}
			k.env = envWith(k.env, "KL_PLUGIN_CACHE_DIR="+setting)
			cfg := filepath.Join(k.dir, "cfg")
			write(t, filepath.Join(cfg, "main.tf"), strings.Replace(providerConfig, "SIZE", "1", 1))
			k.ok("state", "init", "prod")
			plan := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg))
			k.ok("apply", plan)
			pkg := filepath.Join(testprovider.Hostname, testprovider.Namespace, testprovider.Type, testprovider.Version, testprovider.Platform)
			if tc.klCache != nil {
				if _, err := os.Stat(filepath.Join(tc.klCache(k.dir), pkg)); err != nil {
					t.Errorf("kl's plugin cache at %s lacks the provider: %v", tc.klCache(k.dir), err)
				}
			}
			if _, err := os.Stat(filepath.Join(k.dir, "plugins")); err == nil {
				t.Errorf("kl made plugins/ next to the store with KL_PLUGIN_CACHE_DIR=%s", setting)
			}
			if got := p.Cached(t); (len(got) == 1) != tc.userCache {
				t.Errorf("the CLI configuration's plugin_cache_dir holds %v; want the provider there: %v", got, tc.userCache)
			}
		})
	}
}
