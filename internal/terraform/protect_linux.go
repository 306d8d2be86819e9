package terraform

import "golang.org/x/sys/unix"

// protectProcess marks this process non-dumpable (prctl PR_SET_DUMPABLE 0):
// its /proc/PID files then belong to root, so the Terraform it starts —
// which runs the configuration's code under the same uid — cannot read
// this process's environment (/proc/PPID/environ: KL_STORE, klbot's key and
// secrets) or memory. It also turns off core dumps. Root can still read
// them: run kl and klbot as an unprivileged user (the Dockerfile does).
func protectProcess() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// dumpable reports whether this process is dumpable (for tests).
func dumpable() (bool, error) {
	v, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	return v != 0, err
}
