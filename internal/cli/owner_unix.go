//go:build unix

package cli

import (
	"io/fs"
	"syscall"
)

// fileOwner is the uid owning a file (fi.Sys's syscall.Stat_t.Uid).
func fileOwner(_ string, fi fs.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
