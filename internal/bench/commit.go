package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// CommitOptions configures Commit.
type CommitOptions struct {
	// Src is the module root (the directory holding go.mod); Go is the go
	// command ("go" if empty).
	Src, Go string
	// Bench is the -bench pattern (CommitBench if empty); Count the -count
	// (5 if zero).
	Bench string
	Count int
	// Progress receives go test's output as it runs (nil: discarded).
	Progress io.Writer
}

// CommitBench selects the commit benchmarks of internal/tfstate:
// snapshot-merge alone, and the whole commit (parse head, base and result,
// merge, marshal), both into a 10,000-resource state.
const CommitBench = `^Benchmark(Merge|Commit)10k$`

// BenchLine is one result line of `go test -bench`: the benchmark name
// without the -GOMAXPROCS suffix, the iteration count, and value by unit
// ("ns/op", "B/op", "allocs/op", "x-valid" …).
type BenchLine struct {
	Name    string
	N       int64
	Metrics map[string]float64
}

// CommitResult is every line of figure 3 in output order.
type CommitResult struct {
	Lines []BenchLine
	Count int
}

// Names returns the benchmark names in first-seen order.
func (r CommitResult) Names() []string {
	var out []string
	seen := map[string]bool{}
	for _, l := range r.Lines {
		if !seen[l.Name] {
			seen[l.Name] = true
			out = append(out, l.Name)
		}
	}
	return out
}

// Median returns the median of unit over the lines of benchmark name (NaN
// when it has none).
func (r CommitResult) Median(name, unit string) float64 {
	var xs []float64
	for _, l := range r.Lines {
		if v, ok := l.Metrics[unit]; ok && l.Name == name {
			xs = append(xs, v)
		}
	}
	return MedianFloat(xs)
}

// Commit measures figure 3: `go test -run '^$' -bench CommitBench -benchmem
// -count N ./internal/tfstate/` in opts.Src, output passed to Progress, and
// parsed into BenchLines.
func Commit(ctx context.Context, opts CommitOptions) (*CommitResult, error) {
	if opts.Go == "" {
		opts.Go = "go"
	}
	if opts.Bench == "" {
		opts.Bench = CommitBench
	}
	if opts.Count <= 0 {
		opts.Count = 5
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, opts.Go, "test", "-run", "^$", "-bench", opts.Bench, "-benchmem",
		"-count", strconv.Itoa(opts.Count), "./internal/tfstate/")
	cmd.Dir = opts.Src
	cmd.Stdout = io.MultiWriter(&out, opts.Progress)
	cmd.Stderr = opts.Progress
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("commit benchmark: go test -bench: %w", err)
	}
	lines, err := ParseBenchOutput(&out)
	if err != nil {
		return nil, fmt.Errorf("commit benchmark: %w", err)
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("commit benchmark: go test printed no result for -bench %s", opts.Bench)
	}
	return &CommitResult{Lines: lines, Count: opts.Count}, nil
}

// benchName matches a result line's name and its -GOMAXPROCS suffix.
var benchName = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?$`)

// ParseBenchOutput reads the result lines of `go test -bench` output (the
// format of golang.org/x/perf's benchfmt: name, iterations, then value/unit
// pairs); other lines are skipped. A malformed value is an error.
func ParseBenchOutput(r io.Reader) ([]BenchLine, error) {
	var out []BenchLine
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || len(f)%2 != 0 {
			continue
		}
		m := benchName.FindStringSubmatch(f[0])
		if m == nil {
			continue
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue // "BenchmarkX-2 --- FAIL" and the like
		}
		l := BenchLine{Name: m[1], N: n, Metrics: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("reading benchmark line %q: value %q: %w", sc.Text(), f[i], err)
			}
			l.Metrics[f[i+1]] = v
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading benchmark output: %w", err)
	}
	return out, nil
}

// ModuleRoot returns the directory at or above dir holding go.mod.
func ModuleRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod at or above %s", dir)
		}
		d = parent
	}
}
