package license_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/license"
)

func goBin(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH")
	}
	return bin
}

// TestCollectKilolock collects what kl and klbot really link, on two
// platforms, and checks the notices a release must carry: cobra's
// Apache-2.0 licence, the NOTICE of Prometheus' client (Apache-2.0
// §4(d)), golang.org/x/sys' PATENTS grant, and Go's own licence; and that
// kilolock itself is not listed as third-party.
func TestCollectKilolock(t *testing.T) {
	t.Parallel()
	mods, err := license.Collect(context.Background(), goBin(t), filepath.Join("..", ".."),
		[]string{"linux/amd64", "darwin/arm64"}, []string{"./cmd/kl", "./cmd/klbot"})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]string{}
	for _, m := range mods {
		if strings.HasPrefix(m.Path, "github.com/kilolock/") {
			t.Errorf("the main module is listed as third-party: %s", m.Path)
		}
		for _, f := range m.Files {
			files[m.Path] = append(files[m.Path], f.Name)
			if len(f.Text) == 0 {
				t.Errorf("%s %s: empty %s", m.Path, m.Version, f.Name)
			}
		}
	}
	for path, want := range map[string]string{
		"github.com/spf13/cobra":              "LICENSE.txt",
		"github.com/prometheus/client_golang": "NOTICE",
		"golang.org/x/sys":                    "PATENTS",
		"modernc.org/sqlite":                  "LICENSE",
		"github.com/hashicorp/terraform-exec": "LICENSE",
		"std":                                 "LICENSE",
		"github.com/mattn/go-isatty":          "LICENSE", // darwin only
	} {
		if !strings.Contains(strings.Join(files[path], " "), want) {
			t.Errorf("%s: files %v, want %s among them", path, files[path], want)
		}
	}
	var b bytes.Buffer
	if err := license.Write(&b, "kl and klbot", mods); err != nil {
		t.Fatal(err)
	}
	cobra := string(findModule(t, mods, "github.com/spf13/cobra").Files[0].Text)
	if !strings.Contains(b.String(), "github.com/spf13/cobra v") || !strings.Contains(b.String(), strings.TrimRight(cobra, "\n")) {
		t.Errorf("THIRD_PARTY_NOTICES does not hold cobra's licence verbatim under its name and version")
	}
}

func findModule(t *testing.T, mods []license.Module, path string) license.Module {
	t.Helper()
	for _, m := range mods {
		if m.Path == path {
			return m
		}
	}
	t.Fatalf("module %s not collected", path)
	return license.Module{}
}

// TestCollectRefuses: a module without a licence file, and a platform
// that is not GOOS/GOARCH, are errors naming them.
func TestCollectRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/app\n\ngo 1.22\n\nrequire example.com/dep v0.0.0\n\nreplace example.com/dep => ./dep\n")
	write("main.go", "package main\n\nimport _ \"example.com/dep\"\n\nfunc main() {}\n")
	write("dep/go.mod", "module example.com/dep\n\ngo 1.22\n")
	write("dep/dep.go", "package dep\n")
	write("dep/README.md", "no licence here\n")
	_, err := license.Collect(context.Background(), goBin(t), dir, []string{"linux/amd64"}, []string{"."})
	if err == nil || !strings.Contains(err.Error(), "module example.com/dep v0.0.0 has no licence file") {
		t.Errorf("Collect of a module without a licence: %v", err)
	}
	_, err = license.Collect(context.Background(), goBin(t), dir, []string{"linux"}, []string{"."})
	if err == nil || !strings.Contains(err.Error(), `platform "linux": want GOOS/GOARCH`) {
		t.Errorf("Collect with platform linux: %v", err)
	}
}
