package cli_test

import (
	"encoding/json"
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
// change); every Terraform process of the four runs uses the one copy of
// the provider Terraform unpacked into the plugin cache dir on the first
// init; and the sensitive value appears in no output of kl — text, JSON or
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
	runs := planApply("3", "kltest_object.a", "kltest_object.b", "output.a_secret")
	cached := p.Cached(t)
	if len(cached) != 1 {
		t.Fatalf("plugin cache holds %v after the first runs, want the one provider package", cached)
	}
	binary := filepath.Join(p.CacheDir, cached[0], "terraform-provider-"+testprovider.Type+"_v"+testprovider.Version)
	first := inode(t, binary)
	if objs := p.Objects(t); len(objs) != 3 {
		t.Fatalf("the fake API holds %v, want the 3 objects the apply created", objs)
	}

	runs = append(runs, planApply("4", "kltest_object.a")...)
	if got := p.Cached(t); len(got) != 1 || inode(t, binary) != first {
		t.Errorf("plugin cache holds %v (binary inode %d, first %d): want the one package the first init unpacked", got, inode(t, binary), first)
	}
	for _, run := range runs {
		link := filepath.Join(work, run, "data", "providers", testprovider.Hostname, testprovider.Namespace, testprovider.Type,
			testprovider.Version, testprovider.Platform)
		target, err := os.Readlink(link)
		if err != nil || filepath.Join(p.CacheDir, cached[0]) != target {
			t.Errorf("run %s: %s links to %q (%v), want the plugin cache's package %s", run, link, target, err, filepath.Join(p.CacheDir, cached[0]))
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

// inode is the inode number of path (the same file, not rewritten).
func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}
