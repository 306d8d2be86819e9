package terraform

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exe := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bin := filepath.Join(dir, "bin")
	tofuOnly := filepath.Join(dir, "tofu-only")
	empty := filepath.Join(dir, "empty")
	for _, d := range []string{bin, tofuOnly, empty} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tfPath := exe("bin/terraform")
	tofuPath1 := exe("bin/tofu")
	tofuPath2 := exe("tofu-only/tofu")
	custom := exe("custom-terraform")
	if err := os.WriteFile(filepath.Join(empty, "terraform"), []byte("x"), 0o644); err != nil { // not executable
		t.Fatal(err)
	}
	_ = tofuPath1

	tests := map[string]struct {
		env     map[string]string
		want    string
		wantErr string
	}{
		"terraform on PATH":          {env: map[string]string{"PATH": empty + ":" + bin}, want: tfPath},
		"tofu when no terraform":     {env: map[string]string{"PATH": empty + ":" + tofuOnly}, want: tofuPath2},
		"KL_TERRAFORM path wins":     {env: map[string]string{"PATH": bin, "KL_TERRAFORM": custom}, want: custom},
		"KL_TERRAFORM name on PATH":  {env: map[string]string{"PATH": tofuOnly, "KL_TERRAFORM": "tofu"}, want: tofuPath2},
		"KL_TERRAFORM missing fails": {env: map[string]string{"PATH": bin, "KL_TERRAFORM": filepath.Join(dir, "nope")}, wantErr: "KL_TERRAFORM"},
		"nothing found":              {env: map[string]string{"PATH": empty}, wantErr: "make tools"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := FindBinary(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if !errors.Is(err, ErrNoBinary) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("FindBinary() error = %v, want ErrNoBinary mentioning %q", err, tc.wantErr)
				}
				if name == "nothing found" {
					for _, w := range []string{"KL_TERRAFORM", "terraform", "tofu"} {
						if !strings.Contains(err.Error(), w) {
							t.Errorf("error %q does not name %s", err, w)
						}
					}
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("FindBinary() = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestCheckVersion: a binary that prints no Terraform version, or fails,
// is refused (ErrNoBinary) naming the command and why; a real Terraform
// passes.
func TestCheckVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for bin, want := range map[string]string{
		"/bin/true":  "`/bin/true version -json` printed no version",
		"/bin/false": "`/bin/false version -json` failed: exit status 1",
	} {
		err := CheckVersion(ctx, bin, nil)
		if !errors.Is(err, ErrNoBinary) || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckVersion(%s) = %v; want ErrNoBinary saying %q", bin, err, want)
		}
	}
	// The check runs the binary like Terraform: without KL_*/KLBOT_*.
	probe := filepath.Join(t.TempDir(), "probe")
	if err := os.WriteFile(probe, []byte("#!/bin/sh\nenv | grep -q '^KL' && exit 7\necho '{\"terraform_version\":\"1.5.7\"}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckVersion(ctx, probe, []string{"PATH=" + os.Getenv("PATH"), "KL_STORE=postgres://secret", "KLBOT_WEBHOOK_SECRET=s"}); err != nil {
		t.Errorf("CheckVersion passed Kilolock's variables to the binary: %v", err)
	}
	if tf, err := exec.LookPath("terraform"); err == nil {
		if err := CheckVersion(ctx, tf, []string{"PATH=" + os.Getenv("PATH")}); err != nil {
			t.Errorf("CheckVersion(%s) = %v; want nil", tf, err)
		}
	}
}
