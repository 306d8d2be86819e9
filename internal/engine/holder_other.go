//go:build !unix

package engine

import "time"

// processAlive cannot tell on this system (no kill(pid, 0)): known is
// false, and Recover treats the holder as one it cannot check.
func processAlive(int, time.Time) (alive, known bool) { return false, false }
