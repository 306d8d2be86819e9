package tfstate_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// edit returns a copy of s in which the resources at idx have a new input
// and output value (as a Terraform update of terraform_data would write).
func edit(tb testing.TB, s *tfstate.State, idx ...int) (*tfstate.State, []string) {
	tb.Helper()
	out := *s
	out.Resources = slices.Clone(s.Resources)
	var addrs []string
	for _, i := range idx {
		r := out.Resources[i]
		old := fmt.Appendf(nil, `"value":%q`, r.Name)
		raw := bytes.ReplaceAll(r.Raw, old, fmt.Appendf(nil, `"value":"%s-v2"`, r.Name))
		if bytes.Equal(raw, r.Raw) {
			tb.Fatalf("edit of %s did not apply", r.Address())
		}
		r.Raw = raw
		out.Resources[i] = r
		addrs = append(addrs, r.Address())
	}
	slices.Sort(addrs)
	return &out, addrs
}

// mergeSetup is the commit of one run on a 10,000-resource state: the head
// moved since the plan (10 resources committed by another run), the run
// wrote 10 others.
func mergeSetup(b *testing.B) (head, base, result *tfstate.State, written []string) {
	b.Helper()
	base = tfstate.SynthesizeTerraformData(10_000, 10, "bench-lineage", 100)
	head, _ = edit(b, base, 11, 1011, 2011, 3011, 4011, 5011, 6011, 7011, 8011, 9011)
	head.Serial = 101
	result, written = edit(b, base, 7, 1007, 2007, 3007, 4007, 5007, 6007, 7007, 8007, 9007)
	result.Serial = 120
	return head, base, result, written
}

// yardstick times one json.Valid pass over the 10,000-resource document,
// best of five: the baseline that ratios are printed against (docs/style.md 16),
// so numbers from a loaded or slower machine stay comparable.
func yardstick(b *testing.B, s *tfstate.State) time.Duration {
	b.Helper()
	doc, err := s.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	best := time.Duration(1 << 62)
	for range 5 {
		t0 := time.Now()
		if !json.Valid(doc) {
			b.Fatal("synthetic state is not JSON")
		}
		best = min(best, time.Since(t0))
	}
	return best
}

// reportRatio adds a "x-valid" metric: time per op over one json.Valid
// pass of the state.
func reportRatio(b *testing.B, base time.Duration, start time.Time) {
	b.ReportMetric(float64(time.Since(start))/float64(b.N)/float64(base), "x-valid")
}

func BenchmarkMerge10k(b *testing.B) {
	head, base, result, written := mergeSetup(b)
	yard := yardstick(b, base)
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		m, rep, err := tfstate.Merge(head, base, result, written, head.Serial+1)
		if err != nil || len(rep.Merged) != 10 || m.ResourceCount() != 10_000 {
			b.Fatalf("Merge: %v, %+v", err, rep)
		}
	}
	reportRatio(b, yard, start)
}

func BenchmarkChanged10k(b *testing.B) {
	_, base, result, _ := mergeSetup(b)
	b.ReportAllocs()
	for b.Loop() {
		if got := tfstate.Changed(base, result); len(got) != 10 {
			b.Fatalf("Changed = %d addresses", len(got))
		}
	}
}

// BenchmarkChanged10kReordered is the slow path: every entry's bytes differ
// (keys reordered), so every entry is decoded and compared.
func BenchmarkChanged10kReordered(b *testing.B) {
	_, base, _, _ := mergeSetup(b)
	doc, err := base.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		b.Fatal(err)
	}
	sorted, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	other, err := tfstate.Parse(sorted)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if got := tfstate.Changed(base, other); len(got) != 0 {
			b.Fatalf("Changed = %d addresses", len(got))
		}
	}
}

func BenchmarkParse10k(b *testing.B) {
	doc, err := tfstate.SynthesizeTerraformData(10_000, 10, "bench-lineage", 100).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tfstate.Parse(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshal10k(b *testing.B) {
	s := tfstate.SynthesizeTerraformData(10_000, 10, "bench-lineage", 100)
	doc, err := s.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Marshal(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCommit10k is the whole commit as the engine does it: parse the
// head, the plan's base and the run's result, merge, marshal.
func BenchmarkCommit10k(b *testing.B) {
	head, base, result, written := mergeSetup(b)
	var docs [3][]byte
	for i, s := range []*tfstate.State{head, base, result} {
		d, err := s.Marshal()
		if err != nil {
			b.Fatal(err)
		}
		docs[i] = d
	}
	yard := yardstick(b, base)
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		var st [3]*tfstate.State
		for i, d := range docs {
			s, err := tfstate.Parse(d)
			if err != nil {
				b.Fatal(err)
			}
			st[i] = s
		}
		m, _, err := tfstate.Merge(st[0], st[1], st[2], written, 102)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.Marshal(); err != nil {
			b.Fatal(err)
		}
	}
	reportRatio(b, yard, start)
}
