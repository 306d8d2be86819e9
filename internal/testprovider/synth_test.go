package testprovider_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/testprovider"
	"github.com/kilolock/kilolock/internal/testprovider/tptest"
)

// TestSynthesize: a plan of SynthesizeConfig against Synthesize's state
// refreshes every object from the API and has no changes (exit code 0 of
// -detailed-exitcode), with the lock file LockFile writes; one name changed
// is one update in place.
func TestSynthesize(t *testing.T) {
	t.Parallel()
	p := tptest.New(t)
	dir := t.TempDir()
	state, err := testprovider.Synthesize(p.APIDir, 3, "1ms", "b3c5e1d4-0000-4000-8000-00000000be4c", 7)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := testprovider.LockFile(p.Mirror)
	if err != nil {
		t.Fatal(err)
	}
	config := testprovider.SynthesizeConfig(3, "1ms")
	for name, b := range map[string][]byte{"terraform.tfstate": state, ".terraform.lock.hcl": lock, "main.tf": config} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(p.Objects(t)); got != 3 {
		t.Fatalf("the API holds %d objects, want 3", got)
	}
	ok(t, p, dir, nil, "init", "-input=false")
	if out, errOut, code := tf(t, p, dir, nil, "plan", "-input=false", "-detailed-exitcode"); code != 0 {
		t.Fatalf("plan of the synthetic state: exit %d, want 0 (no changes)\n%s\n%s", code, out, errOut)
	}
	after, err := os.ReadFile(filepath.Join(dir, ".terraform.lock.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after, lock) {
		t.Errorf("terraform init rewrote the lock file:\n%s\nwant:\n%s", after, lock)
	}
	changed := bytes.Replace(config, []byte(`name  = "r00001"`), []byte(`name  = "r00001-changed"`), 1)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), changed, 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := tf(t, p, dir, nil, "plan", "-input=false", "-detailed-exitcode")
	if code != 2 || !says(out, "Plan: 0 to add, 1 to change, 0 to destroy.") || !strings.Contains(out, "kltest_object.r00001 will be updated in-place") {
		t.Errorf("plan of one changed name: exit %d, want 2 and one update of kltest_object.r00001\n%s\n%s", code, out, errOut)
	}
}

func TestSynthesizeRefusesBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, c := range map[string]struct {
		n     int
		delay string
		want  string
	}{
		"negative count": {-1, "", "want 0 or more"},
		"bad delay":      {1, "soon", `delay "soon" is not a duration`},
		"negative delay": {1, "-1s", `delay "-1s" is not a duration`},
	} {
		if _, err := testprovider.Synthesize(filepath.Join(dir, name), c.n, c.delay, "l", 1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, c.want)
		}
	}
	if _, err := testprovider.LockFile(dir); err == nil || !strings.Contains(err.Error(), "hashing the provider package") {
		t.Errorf("LockFile of a dir without a mirror: error %v", err)
	}
}
