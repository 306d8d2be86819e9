package terraform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// ErrNoBinary is returned by FindBinary when neither KL_TERRAFORM nor a
// terraform or tofu executable on PATH is found (docs/design.md "Dependencies":
// any terraform or tofu on PATH, KL_TERRAFORM overrides, `make tools`
// installs Terraform 1.5.7 into ./bin).
var ErrNoBinary = errors.New("no terraform binary found")

// FindBinary resolves the Terraform (or OpenTofu) executable Kilolock runs,
// reading the environment through env (os.Getenv in production, a map in
// tests):
//
//  1. KL_TERRAFORM, if set: a path (absolute, or relative to the current
//     directory when it holds a separator) or a bare name looked up on PATH.
//     A KL_TERRAFORM that names nothing executable is an error, never a
//     silent fallback.
//  2. "terraform" on PATH.
//  3. "tofu" on PATH.
//
// It returns an absolute path. When nothing is found the error wraps
// ErrNoBinary and names all three and `make tools`.
func FindBinary(env func(string) string) (string, error) {
	return FindBinaryNamed("KL_TERRAFORM", env)
}

// FindBinaryNamed is FindBinary with the override read from variable
// (klbot's KLBOT_TERRAFORM), which its errors name.
func FindBinaryNamed(variable string, env func(string) string) (string, error) {
	path := env("PATH")
	if v := strings.TrimSpace(env(variable)); v != "" {
		p, err := lookExecutable(v, path)
		if err != nil {
			return "", fmt.Errorf("resolving %s=%q: %w: %w", variable, v, ErrNoBinary, err)
		}
		return p, nil
	}
	for _, name := range []string{"terraform", "tofu"} {
		if p, err := lookExecutable(name, path); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("resolving the terraform binary: %w: set %s to its path, "+
		"put terraform or tofu on PATH, or run `make tools` (installs Terraform 1.5.7 into ./bin; "+
		"then set %s=./bin/terraform or add ./bin to PATH)", ErrNoBinary, variable, variable)
}

// versionTimeout bounds `terraform version`, which should answer at once.
const versionTimeout = 30 * time.Second

// CheckVersion runs `bin version -json` (with env less Kilolock's own
// variables, and no update check)
// and returns an error wrapping ErrNoBinary unless bin prints a Terraform
// or OpenTofu version — "printed no version", or "failed: …": a binary
// that is not Terraform (KL_TERRAFORM=/bin/true) would otherwise fail later
// with terraform-exec's "unable to parse version". A Terraform older than
// 0.13 has no version -json; its plain first line is accepted (terraform-exec
// then says what is wrong with it). The caller names where bin came from.
func CheckVersion(ctx context.Context, bin string, env []string) error {
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "version", "-json")
	// No update check: `terraform version` asks checkpoint.hashicorp.com.
	// Like every Terraform process: without Kilolock's own variables.
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !ownVariable(k) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "CHECKPOINT_DISABLE=1")
	out, err := cmd.Output()
	if errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err == nil && json.Unmarshal(out, &v) == nil && v.Version != "" {
		return nil
	}
	if err == nil && plainVersion.Match(out) {
		return nil
	}
	why := "printed no version"
	if err != nil {
		why = "failed: " + err.Error()
	}
	return fmt.Errorf("%w: `%s version -json` %s", ErrNoBinary, bin, why)
}

// plainVersion is the first line of `terraform version` / `tofu version`.
var plainVersion = regexp.MustCompile(`(?m)^(Terraform|OpenTofu) v\d+\.\d+`)

// lookExecutable finds name like exec.LookPath does, but on the given PATH
// value rather than the process's own.
func lookExecutable(name, pathList string) (string, error) {
	if strings.ContainsRune(name, os.PathSeparator) || strings.Contains(name, "/") {
		if err := isExecutable(name); err != nil {
			return "", err
		}
		return filepath.Abs(name)
	}
	for _, dir := range filepath.SplitList(pathList) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if isExecutable(p) == nil {
			return filepath.Abs(p)
		}
	}
	return "", fmt.Errorf("%s: not found on PATH", name)
}

func isExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("%s: is a directory", p)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s: not executable", p)
	}
	return nil
}
