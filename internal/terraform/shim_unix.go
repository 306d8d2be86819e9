//go:build unix

package terraform

import (
	"os"
	"syscall"
)

// shimSupported: the shim replaces itself with Terraform (execve).
const shimSupported = true

// init puts any program that links this package into shim mode when
// ShimExecVar is set (not empty): it never returns then (see shim.go). It
// runs before main and before a test binary's TestMain.
func init() {
	if bin := os.Getenv(ShimExecVar); bin != "" {
		os.Exit(runShim(bin, os.Args, os.Environ(), os.Stderr))
	}
}

// execTerraform replaces this process with bin (execve); it returns only
// on failure.
func execTerraform(bin string, argv, env []string) error {
	return syscall.Exec(bin, argv, env)
}
