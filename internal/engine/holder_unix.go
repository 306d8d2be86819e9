//go:build unix

package engine

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
	"time"
)

// processAlive reports whether process pid on this host is alive and is
// the one that started no later than notAfter (a run's holder created the
// run, so it started before Run.CreatedAt); known is false when it cannot
// tell. kill(pid, 0) says whether the pid exists (EPERM: it does, owned by
// another user); on Linux /proc/PID/stat then gives its state (a zombie is
// dead) and its start time, so that a pid the system reused since for a
// newer process does not read as the holder (proc(5): field 22 in clock
// ticks after boot, USER_HZ 100; btime in /proc/stat). Without /proc the
// pid's existence is the answer.
func processAlive(pid int, notAfter time.Time) (alive, known bool) {
	if pid <= 0 {
		return false, false
	}
	err := syscall.Kill(pid, 0)
	switch {
	case errors.Is(err, syscall.ESRCH):
		return false, true
	case err != nil && !errors.Is(err, syscall.EPERM):
		return false, false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true, true // no /proc (not Linux): the pid exists
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return true, true
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) > 0 && (string(f[0]) == "Z" || string(f[0]) == "X") {
		return false, true // exited, not yet reaped
	}
	if len(f) >= 20 {
		if started, ok := procStart(f[19]); ok && started.After(notAfter.Add(procStartSlack)) {
			return false, true // the pid was reused by a newer process
		}
	}
	return true, true
}

// procStartSlack is how much later than notAfter a process may seem to
// have started (btime's one-second resolution, clock adjustments) and
// still count as the holder.
const procStartSlack = 5 * time.Second

// procStart is when a process started from its /proc stat start time
// (clock ticks after boot) and /proc/stat's btime.
func procStart(ticks []byte) (time.Time, bool) {
	t, err := strconv.ParseInt(string(ticks), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	st, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, false
	}
	for line := range bytes.Lines(st) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			boot, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			const userHZ = 100
			return time.Unix(boot, 0).Add(time.Duration(t) * time.Second / userHZ), true
		}
	}
	return time.Time{}, false
}
