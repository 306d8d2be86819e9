package bench

import "testing"

func TestCPUModel(t *testing.T) {
	t.Parallel()
	tests := map[string]struct{ in, want string }{
		"x86":  {"processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nmodel name\t: other\n", "AMD EPYC 7B13"},
		"none": {"processor\t: 0\nBogoMIPS\t: 50.00\n", ""},
	}
	for name, tc := range tests {
		if got := cpuModel([]byte(tc.in)); got != tc.want {
			t.Errorf("%s: cpuModel = %q, want %q", name, got, tc.want)
		}
	}
}

func TestMachineString(t *testing.T) {
	t.Parallel()
	m := Machine{CPUs: 2, Model: "AMD EPYC", OS: "linux/amd64", Load: "0.48 3.22 5.66"}
	want := "machine: 2 CPUs (nproc), AMD EPYC, linux/amd64, load average 0.48 3.22 5.66 at start"
	if got := m.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	m.Load = ""
	if got := m.String(); got != "machine: 2 CPUs (nproc), AMD EPYC, linux/amd64, load average unknown at start" {
		t.Errorf("String() without load = %q", got)
	}
}
