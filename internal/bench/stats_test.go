package bench

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	t.Parallel()
	s := time.Second
	tests := map[string]struct {
		in   []time.Duration
		want time.Duration
	}{
		"none":     {nil, 0},
		"one":      {[]time.Duration{3 * s}, 3 * s},
		"odd":      {[]time.Duration{9 * s, 1 * s, 5 * s}, 5 * s},
		"even":     {[]time.Duration{4 * s, 1 * s, 2 * s, 8 * s}, 3 * s},
		"even odd": {[]time.Duration{1, 2}, 1}, // rounds down to the nanosecond
		"repeated": {[]time.Duration{2 * s, 2 * s, 7 * s}, 2 * s},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			in := slices.Clone(tc.in)
			if got := Median(tc.in); got != tc.want {
				t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
			}
			if !slices.Equal(in, tc.in) {
				t.Errorf("Median reordered its input: %v", tc.in)
			}
		})
	}
}

func TestMedianFloat(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		in   []float64
		want float64
	}{
		"one":  {[]float64{2.5}, 2.5},
		"odd":  {[]float64{3, 1, 2}, 2},
		"even": {[]float64{4, 1, 3, 2}, 2.5},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := MedianFloat(tc.in); got != tc.want {
				t.Errorf("MedianFloat(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
	if got := MedianFloat(nil); !math.IsNaN(got) {
		t.Errorf("MedianFloat(nil) = %v, want NaN", got)
	}
}

func TestFormat(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		got, want string
	}{
		"ratio":           {FormatRatio(Ratio(18*time.Second, 3*time.Second)), "6.00×"},
		"ratio by zero":   {FormatRatio(Ratio(time.Second, 0)), "n/a"},
		"seconds":         {FormatSeconds(3140 * time.Millisecond), "3.14 s"},
		"seconds rounded": {FormatSeconds(4999 * time.Microsecond), "0.00 s"},
		"nanos ns":        {FormatNanos(512), "512 ns"},
		"nanos µs":        {FormatNanos(812_400), "812 µs"},
		"nanos ms":        {FormatNanos(4_123_456), "4.12 ms"},
		"nanos s":         {FormatNanos(1.3e9), "1.30 s"},
		"nanos NaN":       {FormatNanos(math.NaN()), "n/a"},
		"bytes B":         {FormatBytes(999), "999 B"},
		"bytes kB":        {FormatBytes(62_000), "62.0 kB"},
		"bytes MB":        {FormatBytes(5_310_000), "5.31 MB"},
		"bytes GB":        {FormatBytes(2.5e9), "2.50 GB"},
		"bytes NaN":       {FormatBytes(math.NaN()), "n/a"},
		"all":             {formatAll([]time.Duration{time.Second, 2500 * time.Millisecond}), "[1.00, 2.50] s"},
	}
	for name, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s: got %q, want %q", name, tc.got, tc.want)
		}
	}
}
