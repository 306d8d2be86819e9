package closure_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilolock/kilolock/internal/closure"
)

func load(t *testing.T, dir string) *closure.Config {
	t.Helper()
	cfg, err := closure.Load(dir)
	if err != nil {
		t.Fatalf("Load(%s): %v", dir, err)
	}
	return cfg
}

func TestClosure(t *testing.T) {
	t.Parallel()
	cfg := load(t, "testdata/basic")
	for name, tc := range map[string]struct {
		targets []string
		addrs   []string
		blocks  []string // a subset the closure must hold
		without []string // blocks it must not hold
	}{
		"a resource reads a local and a variable": {
			targets: []string{"terraform_data.base"},
			addrs:   []string{"terraform_data.base", "terraform_data.old_base"},
			blocks:  []string{"|local.prefix", "|var.region", "|moved#9"},
			without: []string{"|local.other", "|var.unused", "|terraform_data.web", "|output.web"},
		},
		"an instance target takes its resource and count": {
			targets: []string{"terraform_data.web[1]"},
			addrs:   []string{"terraform_data.base", "terraform_data.old_base", "terraform_data.web"},
			without: []string{"|module.app"},
		},
		"a module output follows the call and its inputs": {
			targets: []string{"terraform_data.uses_app"},
			addrs: []string{"module.app.terraform_data.svc", "terraform_data.base", "terraform_data.old_base",
				"terraform_data.uses_app", "terraform_data.web"},
			blocks:  []string{"|module.app", "module.app|var.name", "module.app|output.id"},
			without: []string{"module.app|terraform_data.side"},
		},
		"a target in a module needs its call": {
			targets: []string{`module.app.terraform_data.svc["a"]`},
			addrs:   []string{"module.app.terraform_data.svc", "terraform_data.base", "terraform_data.old_base", "terraform_data.web"},
			without: []string{"module.app|output.id", "|terraform_data.uses_app"},
		},
		"a module target takes its tree": {
			targets: []string{"module.app"},
			addrs: []string{"module.app.terraform_data.side", "module.app.terraform_data.svc", "terraform_data.base",
				"terraform_data.old_base", "terraform_data.web"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := closure.TargetScope(cfg, tc.targets)
			if err != nil {
				t.Fatal(err)
			}
			c, err := closure.Compute(cfg, s)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.addrs, c.Addresses); d != "" {
				t.Errorf("Addresses (-want +got):\n%s", d)
			}
			has := map[string]bool{}
			for _, b := range c.Blocks {
				has[b] = true
			}
			for _, b := range tc.blocks {
				if !has[b] {
					t.Errorf("closure lacks %s; has %v", b, c.Blocks)
				}
			}
			for _, b := range tc.without {
				if has[b] {
					t.Errorf("closure holds %s, which the targets do not need", b)
				}
			}
		})
	}
}

func TestTargetScopeRefuses(t *testing.T) {
	t.Parallel()
	cfg := load(t, "testdata/basic")
	for name, tc := range map[string]struct {
		targets  []string
		fallback string // a *Fallback whose reason holds this
		invalid  string // an ErrInvalid error holding this
	}{
		"no targets":        {targets: nil, fallback: "empty target set"},
		"not declared":      {targets: []string{"terraform_data.gone"}, fallback: "terraform_data.gone is not declared"},
		"module not called": {targets: []string{"module.nope.terraform_data.x"}, fallback: "module.nope is not called"},
		"not an address":    {targets: []string{"terraform_data."}, invalid: `parsing address "terraform_data."`},
		"bad key":           {targets: []string{"terraform_data.web[-1]"}, invalid: "terraform_data.web[-1]"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := closure.TargetScope(cfg, tc.targets)
			var fb *closure.Fallback
			switch {
			case tc.fallback != "":
				if !errors.As(err, &fb) || !strings.Contains(fb.Reason, tc.fallback) {
					t.Fatalf("err = %v, want a fallback saying %q", err, tc.fallback)
				}
			default:
				if !errors.Is(err, closure.ErrInvalid) || !strings.Contains(err.Error(), tc.invalid) || errors.As(err, &fb) {
					t.Fatalf("err = %v, want ErrInvalid saying %q", err, tc.invalid)
				}
			}
		})
	}
}

func TestLoadFallsBack(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		files map[string]string
		want  string
	}{
		"json file":     {map[string]string{"main.tf": "", "x.tf.json": "{}"}, "JSON configuration file x.tf.json"},
		"override file": {map[string]string{"main.tf": "", "x_override.tf": ""}, "override file x_override.tf"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for n, s := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, n), []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := closure.Load(dir)
			var fb *closure.Fallback
			if !errors.As(err, &fb) || !strings.Contains(fb.Reason, tc.want) {
				t.Fatalf("err = %v, want a fallback saying %q", err, tc.want)
			}
		})
	}
	if _, err := closure.Load(t.TempDir()); !errors.Is(err, closure.ErrInvalid) {
		t.Errorf("Load of an empty dir: err = %v, want ErrInvalid", err)
	}
}

func TestRemoteModuleFallsBackWhenReached(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := `module "net" {
  source = "hashicorp/consul/aws"
}

resource "terraform_data" "a" {
  input = module.net.id
}

resource "terraform_data" "b" {}
`
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := load(t, dir)
	s, err := closure.TargetScope(cfg, []string{"terraform_data.b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := closure.Compute(cfg, s); err != nil {
		t.Errorf("a closure that does not reach the remote module: %v", err)
	}
	s, err = closure.TargetScope(cfg, []string{"terraform_data.a"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = closure.Compute(cfg, s)
	var fb *closure.Fallback
	if !errors.As(err, &fb) || !strings.Contains(fb.Reason, `source "hashicorp/consul/aws"`) {
		t.Fatalf("err = %v, want a fallback naming the remote source", err)
	}
}

// TestOutsideSources: the local module calls whose source leaves the root
// module directory are listed, each once, absolute; a remote source and a
// module inside the directory are not.
func TestOutsideSources(t *testing.T) {
	t.Parallel()
	top := t.TempDir()
	dir := filepath.Join(top, "prod")
	for name, src := range map[string]string{
		"prod/main.tf": "module \"net\" {\n  source = \"../modules/net\"\n}\n\nmodule \"net2\" {\n  source = \"../modules/net/\"\n}\n\n" +
			"module \"app\" {\n  source = \"./app\"\n}\n\nmodule \"remote\" {\n  source = \"hashicorp/consul/aws\"\n}\n",
		"prod/app/main.tf":    "resource \"terraform_data\" \"a\" {}\n",
		"modules/net/main.tf": "resource \"terraform_data\" \"n\" {}\n",
	} {
		p := filepath.Join(top, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := load(t, dir).OutsideSources()
	if want := []string{filepath.Join(top, "modules", "net")}; !slices.Equal(got, want) {
		t.Errorf("OutsideSources = %q, want %q", got, want)
	}
}

// terraformBinary returns KL_TERRAFORM, else terraform or tofu from PATH,
// and skips the test when there is none (STYLE.md 14: real Terraform).
func terraformBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("KL_TERRAFORM"); p != "" {
		return p
	}
	for _, name := range []string{"terraform", "tofu"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Terraform: set KL_TERRAFORM or put terraform or tofu on PATH")
	return ""
}
