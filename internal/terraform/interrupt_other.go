//go:build !unix

package terraform

// killedBySIGKILL: no SIGKILL without Unix signals (terraform-exec kills
// Terraform at once on cancellation there).
func killedBySIGKILL(error) bool { return false }

// killLeftovers: no process groups to signal.
func killLeftovers(error) bool { return false }
