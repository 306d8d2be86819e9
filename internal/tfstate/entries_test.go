package tfstate

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDocSize: the size per-resource storage computes from a header and
// its entries' sizes is the length of the document Marshal writes, for
// synthesized states and for every state document in testdata.
func TestDocSize(t *testing.T) {
	t.Parallel()
	states := []*State{Empty("l", 1, "1.5.7"), SynthesizeTerraformData(1, 0, "l", 2), SynthesizeTerraformData(300, 4, "l", 3)}
	files, _ := filepath.Glob(filepath.Join("testdata", "*.tfstate"))
	more, _ := filepath.Glob(filepath.Join("testdata", "*", "*.tfstate"))
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if s, err := Parse(b); err == nil {
			states = append(states, s)
		}
	}
	for i, s := range states {
		doc, err := s.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		h, err := s.Header().Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var e int64
		for _, r := range s.Resources {
			if got, want := EntryDocSize(r.Raw), int64(len(appendIndent(nil, r.Raw, "    "))); got != want {
				t.Fatalf("state %d, %s: EntryDocSize %d, appendIndent writes %d", i, r.Address(), got, want)
			}
			e += EntryDocSize(r.Raw)
		}
		if got := DocSize(int64(len(h)), len(s.Resources), e); got != int64(len(doc)) {
			t.Fatalf("state %d (%d resources): DocSize %d, Marshal writes %d", i, len(s.Resources), got, len(doc))
		}
	}
	if len(states) < 5 {
		t.Fatalf("only %d states to check", len(states))
	}
}

// TestMergeOfSliceIsMergeOfWhole: MergeWith over a head holding only the
// entries of MergeReads gives, put back beside the head's other entries,
// exactly what MergeWith gives over the whole head, with the same report —
// for random changes by the run and by other commits since the plan
// (changed, created and destroyed entries, module instances, instance-level
// writes, outputs). This is what makes a commit that reads only a slice
// of the head (ADR 0068) a snapshot-merge.
func TestMergeOfSliceIsMergeOfWhole(t *testing.T) {
	t.Parallel()
	var merged, split int
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			base := keyedModules(t, SynthesizeTerraformData(40, 3, "l", 4))
			head := mutate(t, rng, base, 5, "other")
			result := mutate(t, rng, base, 5, "run")
			written := writtenBetween(t, rng, base, result)
			in := MergeInput{Head: head, Base: base, Result: result, Written: written, Serial: 6}
			whole, wrep, werr := MergeWith(in)
			reads, err := MergeReads(base, result, written)
			if err != nil {
				if werr == nil {
					t.Fatalf("MergeReads: %v; MergeWith took the same input", err)
				}
				return
			}
			in.Head = sliceByResource(head, reads)
			part, prep, perr := MergeWith(in)
			if (werr == nil) != (perr == nil) {
				t.Fatalf("whole: %v, slice: %v", werr, perr)
			}
			if werr != nil {
				return
			}
			if d := cmp.Diff(wrep, prep); d != "" {
				t.Fatalf("reports differ (-whole +slice):\n%s", d)
			}
			want, _ := whole.Marshal()
			got, _ := combine(head, part, reads).Marshal()
			if !bytes.Equal(got, want) {
				t.Fatalf("the slice's merge beside the head's other entries differs from the whole merge:\n%s", cmp.Diff(string(want), string(got)))
			}
			merged++
			if slices.ContainsFunc(written, func(a string) bool { return strings.Contains(a, "[") }) {
				split++
			}
		})
	}
	if merged < 150 || split < 30 {
		t.Fatalf("%d of 200 cases merged, %d with instance-level writes: the generator makes too few", merged, split)
	}
}

// keyedModules gives s's module.m00 entries two count instances.
func keyedModules(t *testing.T, s *State) *State {
	t.Helper()
	var raws [][]byte
	for _, r := range s.Resources {
		if r.Module == "module.m00" {
			for _, k := range []string{"[0]", "[1]"} {
				raws = append(raws, bytes.Replace(r.Raw, []byte(`"module":"module.m00"`), []byte(`"module":"module.m00`+k+`"`), 1))
			}
			continue
		}
		raws = append(raws, r.Raw)
	}
	es, err := ParseEntries(raws)
	if err != nil {
		t.Fatal(err)
	}
	out := Assemble(s.Header(), es)
	out.Outputs = map[string]Output{"o": mustOutput(t, `{"value":"x","type":"string"}`)}
	return out
}

func mustOutput(t *testing.T, raw string) Output {
	t.Helper()
	o, err := newOutput([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// mutate changes up to k random entries of s (a new value), drops one
// sometimes, adds one sometimes (tag names it) and changes the output
// sometimes.
func mutate(t *testing.T, rng *rand.Rand, s *State, k int, tag string) *State {
	t.Helper()
	raws := make([][]byte, 0, len(s.Resources)+1)
	for _, r := range s.Resources {
		raws = append(raws, r.Raw)
	}
	for range rng.IntN(k + 1) {
		i := rng.IntN(len(raws))
		raws[i] = bytes.Replace(raws[i], []byte(`"value":"`), []byte(`"value":"`+tag+`-`), 1)
	}
	if rng.IntN(3) == 0 {
		i := rng.IntN(len(raws))
		raws = slices.Delete(raws, i, i+1)
	}
	if rng.IntN(3) == 0 {
		raws = append(raws, bytes.Replace(raws[0], []byte(`"name":"`), []byte(`"name":"`+tag+`_`), 1))
	}
	es, err := ParseEntries(raws)
	if err != nil {
		t.Fatal(err)
	}
	out := Assemble(s.Header(), es)
	if rng.IntN(3) == 0 {
		out.Outputs = map[string]Output{"o": mustOutput(t, `{"value":"`+tag+`","type":"string"}`)}
	}
	return out
}

// writtenBetween is a write set for a run from base to result: most of the
// changed resources, some as instance addresses, sometimes the output.
func writtenBetween(t *testing.T, rng *rand.Rand, base, result *State) []string {
	t.Helper()
	var out []string
	for a := range changedSet(base, result, false) {
		if rng.IntN(5) == 0 {
			continue // an unplanned change
		}
		if rest, ok := strings.CutPrefix(a, "module.m00."); ok && rng.IntN(2) == 0 {
			// An instance-level write: one module instance of it.
			out = append(out, fmt.Sprintf("module.m00[%d].%s", rng.IntN(2), rest))
			continue
		}
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// sliceByResource is s with only the entries of resources.
func sliceByResource(s *State, resources []string) *State {
	want := map[string]bool{}
	for _, r := range resources {
		want[r] = true
	}
	var keep []Resource
	for _, r := range s.Resources {
		if want[r.Address()] {
			keep = append(keep, r)
		}
	}
	return Assemble(s.Header(), keep)
}

// combine is part's header and entries with head's entries outside
// resources.
func combine(head, part *State, resources []string) *State {
	want := map[string]bool{}
	for _, r := range resources {
		want[r] = true
	}
	keep := slices.Clone(part.Resources)
	for _, r := range head.Resources {
		if !want[r.Address()] {
			keep = append(keep, r)
		}
	}
	return Assemble(part.Header(), keep)
}
