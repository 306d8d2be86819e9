package bench

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const benchOutput = `goos: linux
goarch: amd64
pkg: github.com/kilolock/kilolock/internal/tfstate
cpu: AMD EPYC
BenchmarkMerge10k-2    	      19	  63274394 ns/op	         0.6856 x-valid	 2353512 B/op	    3291 allocs/op
BenchmarkMerge10k-2    	      20	  67022683 ns/op	         0.9248 x-valid	 2356921 B/op	    3285 allocs/op
BenchmarkMerge10k-2    	      21	  61000000 ns/op	         0.7000 x-valid	 2350000 B/op	    3280 allocs/op
BenchmarkCommit10k     	       2	 781670531 ns/op	        11.35 x-valid	58696580 B/op	   91350 allocs/op
--- FAIL: BenchmarkOther-2
BenchmarkOther-2 --- FAIL
PASS
ok  	github.com/kilolock/kilolock/internal/tfstate	8.586s
`

func TestParseBenchOutput(t *testing.T) {
	t.Parallel()
	lines, err := ParseBenchOutput(strings.NewReader(benchOutput))
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 4 {
		t.Fatalf("got %d lines, want 4: %+v", len(lines), lines)
	}
	want := BenchLine{Name: "BenchmarkCommit10k", N: 2, Metrics: map[string]float64{
		"ns/op": 781670531, "x-valid": 11.35, "B/op": 58696580, "allocs/op": 91350,
	}}
	if diff := cmp.Diff(want, lines[3]); diff != "" {
		t.Errorf("line 4 (-want +got):\n%s", diff)
	}
	res := CommitResult{Lines: lines}
	if diff := cmp.Diff([]string{"BenchmarkMerge10k", "BenchmarkCommit10k"}, res.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	tests := map[string]struct {
		name, unit string
		want       float64
	}{
		"ns":     {"BenchmarkMerge10k", "ns/op", 63274394},
		"bytes":  {"BenchmarkMerge10k", "B/op", 2353512},
		"ratio":  {"BenchmarkMerge10k", "x-valid", 0.7},
		"single": {"BenchmarkCommit10k", "allocs/op", 91350},
	}
	for name, tc := range tests {
		if got := res.Median(tc.name, tc.unit); got != tc.want {
			t.Errorf("%s: Median(%s, %s) = %v, want %v", name, tc.name, tc.unit, got, tc.want)
		}
	}
}

func TestParseBenchOutputMalformed(t *testing.T) {
	t.Parallel()
	if _, err := ParseBenchOutput(strings.NewReader("BenchmarkX-2 10 abc ns/op\n")); err == nil {
		t.Error("a malformed value parsed without error")
	}
}
