//go:build unix

package terraform

import (
	"errors"
	"os/exec"
	"syscall"
)

// killedBySIGKILL reports whether the Terraform process whose exit is err
// was killed with SIGKILL: by terraform-exec once RunnerOptions.InterruptGrace
// ran out after its SIGINT, or by the system (the OOM killer). Terraform
// then had no chance to persist what it was doing.
func killedBySIGKILL(err error) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// killLeftovers kills, with SIGKILL, the process group of the Terraform
// process whose exit is err: what an interrupted Terraform leaves running —
// its providers (a call that ignores Terraform's stop goes on, and may go
// on changing infrastructure, after Terraform was killed) and provisioner
// commands. terraform-exec starts Terraform as the leader of a process
// group of its own (Setpgid), and providers and provisioners stay in it.
// A group already gone is not an error; it returns whether it signalled
// one.
func killLeftovers(err error) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Pid() <= 1 {
		return false
	}
	return syscall.Kill(-exit.Pid(), syscall.SIGKILL) == nil
}
