package bench

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Median returns the median of ds (the mean of the middle two for an even
// count), 0 for none. ds is not modified.
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return s[n/2-1] + (s[n/2]-s[n/2-1])/2
}

// MedianFloat is Median for float64 values; NaN for none.
func MedianFloat(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Ratio returns a/b, NaN when b is 0.
func Ratio(a, b time.Duration) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// FormatRatio prints a ratio with two decimals and "×" ("5.42×"), or "n/a".
func FormatRatio(r float64) string {
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", r)
}

// FormatSeconds prints a duration in seconds with two decimals ("3.14 s").
func FormatSeconds(d time.Duration) string {
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// FormatNanos prints a time per operation in ns with a readable unit
// ("812 µs", "4.12 ms", "1.30 s"); "n/a" for NaN.
func FormatNanos(ns float64) string {
	switch {
	case math.IsNaN(ns):
		return "n/a"
	case ns >= 1e9:
		return fmt.Sprintf("%.2f s", ns/1e9)
	case ns >= 1e6:
		return fmt.Sprintf("%.2f ms", ns/1e6)
	case ns >= 1e3:
		return fmt.Sprintf("%.0f µs", ns/1e3)
	default:
		return fmt.Sprintf("%.0f ns", ns)
	}
}

// FormatBytes prints a byte count in decimal units ("5.31 MB"); "n/a" for
// NaN.
func FormatBytes(b float64) string {
	switch {
	case math.IsNaN(b):
		return "n/a"
	case b >= 1e9:
		return fmt.Sprintf("%.2f GB", b/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.2f MB", b/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", b/1e3)
	default:
		return fmt.Sprintf("%.0f B", b)
	}
}

// formatAll prints each duration in seconds, for per-round lists.
func formatAll(ds []time.Duration) string {
	out := ""
	for i, d := range ds {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%.2f", d.Seconds())
	}
	return "[" + out + "] s"
}
