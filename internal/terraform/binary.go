package terraform

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrNoBinary is returned by FindBinary when neither KL_TERRAFORM nor a
// terraform or tofu executable on PATH is found (DESIGN.md "Dependencies":
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
	path := env("PATH")
	if v := strings.TrimSpace(env("KL_TERRAFORM")); v != "" {
		p, err := lookExecutable(v, path)
		if err != nil {
			return "", fmt.Errorf("resolving KL_TERRAFORM=%q: %w: %w", v, ErrNoBinary, err)
		}
		return p, nil
	}
	for _, name := range []string{"terraform", "tofu"} {
		if p, err := lookExecutable(name, path); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("resolving the terraform binary: %w: set KL_TERRAFORM to its path, "+
		"put terraform or tofu on PATH, or run `make tools` (installs Terraform 1.5.7 into ./bin; "+
		"then set KL_TERRAFORM=./bin/terraform or add ./bin to PATH)", ErrNoBinary)
}

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
