//go:build !linux

package terraform

// protectProcess is a no-op where prctl does not exist; see the Linux
// version for what it protects.
func protectProcess() error { return nil }

func dumpable() (bool, error) { return true, nil }
