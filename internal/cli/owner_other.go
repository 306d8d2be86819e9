//go:build !unix

package cli

import "io/fs"

// fileOwner reports no owner: where files have no uid, the search for the
// default store keeps only its ceilings and the filesystem root (ADR 0049).
func fileOwner(string, fs.FileInfo) (int, bool) { return 0, false }
