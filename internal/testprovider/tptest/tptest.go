// Package tptest gives tests Kilolock's test provider (internal/testprovider)
// as Terraform installs a real one: built from source once per test binary,
// zipped into a filesystem mirror, installed by `terraform init` through a
// CLI configuration (TF_CLI_CONFIG_FILE) into a plugin cache dir — no
// network, no `make tools` needed.
package tptest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/kilolock/kilolock/internal/testprovider"
)

// Provider is the test provider set up for one test: the mirror it installs
// from (shared by every test of the binary), and the test's own plugin
// cache dir, CLI configuration and fake cloud API directory.
type Provider struct {
	// Mirror is the filesystem mirror's root (testprovider.MirrorPackage
	// under it).
	Mirror string
	// CacheDir is the plugin_cache_dir of CLIConfig: `terraform init`
	// unpacks the provider there once and links it into each data dir.
	CacheDir string
	// CLIConfig is the CLI configuration file (TF_CLI_CONFIG_FILE).
	CLIConfig string
	// APIDir is the fake cloud API's directory (KLTEST_API_DIR): one JSON
	// file per object, <id>.json.
	APIDir string
}

// New builds the provider (once per test binary: see build), and returns
// it set up in directories of t's own. It skips t when no terraform is on
// PATH (the provider is of no use without one) and fails it when the build
// fails.
func New(t testing.TB) *Provider {
	t.Helper()
	if _, err := exec.LookPath("terraform"); err != nil {
		t.Skip("terraform not on PATH (make tools)")
	}
	mirror, err := build()
	if err != nil {
		t.Fatalf("building the test provider: %v", err)
	}
	dir := t.TempDir()
	p := &Provider{Mirror: mirror, CacheDir: filepath.Join(dir, "plugin-cache"),
		CLIConfig: filepath.Join(dir, testprovider.CLIConfigName), APIDir: filepath.Join(dir, "api")}
	for _, d := range []string{p.CacheDir, p.APIDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(p.CLIConfig, []byte(testprovider.CLIConfig(p.Mirror, p.CacheDir)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Env is the environment Terraform (or kl) needs for the provider: the CLI
// configuration, the API directory, CHECKPOINT_DISABLE. Append it to an
// environment; a later entry wins over an earlier one of the same key.
func (p *Provider) Env() []string {
	return []string{"TF_CLI_CONFIG_FILE=" + p.CLIConfig, testprovider.EnvAPIDir + "=" + p.APIDir, "CHECKPOINT_DISABLE=1"}
}

// Objects returns the ids of the objects the fake cloud API holds, sorted.
func (p *Provider) Objects(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(p.APIDir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && !strings.HasPrefix(id, ".") {
			ids = append(ids, id)
		}
	}
	return ids
}

// Cached returns the provider packages the plugin cache dir holds: one path
// per VERSION/OS_ARCH directory of the provider, relative to CacheDir.
func (p *Provider) Cached(t testing.TB) []string {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(p.CacheDir, testprovider.Hostname, testprovider.Namespace, testprovider.Type, "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range matches {
		matches[i], _ = filepath.Rel(p.CacheDir, m)
	}
	return matches
}

var (
	buildOnce   sync.Once
	buildMirror string
	buildErr    error
)

// build compiles the provider with `go build` (Go's build cache makes a
// rebuild a link, a few seconds) and returns a mirror holding it, once per
// test binary. The mirror lives in a directory named by the binary's
// sha256 under the system temp dir (os.TempDir()/kilolock-kltest-UID/HASH),
// so every test binary of one source tree shares one, and none is left
// behind per run; it is moved into place whole (a rename), so concurrent
// test binaries never see half of one.
func build() (string, error) {
	buildOnce.Do(func() { buildMirror, buildErr = buildAndMirror() })
	return buildMirror, buildErr
}

func buildAndMirror() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	root, err := moduleRoot(goBin)
	if err != nil {
		return "", err
	}
	parent := filepath.Join(os.TempDir(), fmt.Sprintf("kilolock-kltest-%d", os.Getuid()))
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(parent, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // gone once renamed into place
	bin := filepath.Join(tmp, "terraform-provider-"+testprovider.Type)
	cmd := exec.Command(goBin, "build", "-trimpath", "-o", bin, "./internal/testprovider/cmd/terraform-provider-kltest")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	sum, err := fileSum(bin)
	if err != nil {
		return "", err
	}
	final := filepath.Join(parent, sum[:16])
	if _, err := os.Stat(filepath.Join(final, testprovider.MirrorPackage())); err == nil {
		return final, nil // built before, by this source
	}
	if err := testprovider.WriteMirror(filepath.Join(tmp, "mirror"), bin); err != nil {
		return "", err
	}
	if err := os.Rename(filepath.Join(tmp, "mirror"), final); err != nil && !errors.Is(err, fs.ErrExist) {
		if _, serr := os.Stat(filepath.Join(final, testprovider.MirrorPackage())); serr != nil {
			return "", fmt.Errorf("moving the provider mirror into place: %w", err)
		}
		// Another test binary moved the same mirror there first.
	}
	return final, nil
}

// moduleRoot is the directory of the go.mod of the package under test (go
// test runs in the package's directory, inside the module).
func moduleRoot(goBin string) (string, error) {
	out, err := exec.Command(goBin, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("go env GOMOD: not inside the kilolock module")
	}
	return filepath.Dir(mod), nil
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
