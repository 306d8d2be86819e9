package tfstate_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// FuzzParse: Parse never panics; whatever it accepts, Marshal writes and
// Parse reads back to the same state, and a second Marshal is identical.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("../terraform/testdata/terraform-json/*/terraform.tfstate")
	golden, _ := filepath.Glob("testdata/*.tfstate")
	for _, file := range append(files, golden...) {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"version":4,"lineage":"l","resources":[{"module":"module.a[\"x\\\"]\"]","mode":"data","type":"t","name":"n","instances":[]}]}`))
	f.Add([]byte(`{"version":4,"lineage":"l","outputs":{"o":{"value":[],"type":["tuple",[]]}},"resources":null,"check_results":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := tfstate.Parse(b)
		if err != nil {
			return
		}
		out, err := s.Marshal()
		if err != nil {
			t.Fatalf("Marshal of a parsed state: %v", err)
		}
		s2, err := tfstate.Parse(out)
		if err != nil {
			t.Fatalf("Parse(Marshal(Parse(b))): %v\n%s", err, out)
		}
		if d := tfstate.Changed(s, s2); len(d) != 0 {
			t.Fatalf("round trip changed %v", d)
		}
		out2, err := s2.Marshal()
		if err != nil || string(out2) != string(out) {
			t.Fatalf("second Marshal differs (%v)", err)
		}
	})
}
