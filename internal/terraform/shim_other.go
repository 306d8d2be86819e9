//go:build !unix

package terraform

import "errors"

// shimSupported: without execve the shim is not used; TF_VAR_* are then
// dropped with a warning (NewRunner).
const shimSupported = false

func execTerraform(string, []string, []string) error {
	return errors.New("no execve on this platform")
}
