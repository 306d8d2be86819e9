package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strings"
)

// Machine describes where the figures were measured: they mean little
// without it (2 shared cores here; results are noisy).
type Machine struct {
	CPUs  int    // logical CPUs this process may use (nproc)
	Model string // "model name" of /proc/cpuinfo, else GOARCH
	// Load is the 1, 5 and 15 minute load average at the time of reading
	// (/proc/loadavg); empty where unavailable.
	Load string
	OS   string // GOOS/GOARCH
}

// ReadMachine reads the machine description now.
func ReadMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Model: runtime.GOARCH, OS: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if model := cpuModel(b); model != "" {
			m.Model = model
		}
	}
	m.Load = LoadAverage()
	return m
}

// LoadAverage returns the 1, 5 and 15 minute load averages ("0.48 3.22
// 5.66"), or "" where /proc/loadavg is unavailable.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// cpuModel returns the first "model name" of a /proc/cpuinfo document.
func cpuModel(cpuinfo []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// String is the machine line: "machine: 2 CPUs (nproc), Intel(R) Xeon(R)
// …, linux/amd64, load average 0.48 3.22 5.66 at start".
func (m Machine) String() string {
	load := m.Load
	if load == "" {
		load = "unknown"
	}
	return fmt.Sprintf("machine: %d CPUs (nproc), %s, %s, load average %s at start", m.CPUs, m.Model, m.OS, load)
}
