package terraform

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"
)

// TestParsePlanJSONDecoded: the plan JSON terraform-exec's ShowPlanFile
// decoded (json.Decoder with UseNumber, tfjson.Plan with UseJSONNumber:
// tfexec.JSONNumber(true)) and handed to parsePlanJSON is the plan
// ParsePlanJSON decodes from the same bytes, nested blocks restored — so
// that the runner's plan, which takes terraform-exec's decoding instead of
// decoding the output of `show -json` a second time, derives the same
// footprint, intent and diff. A document ParsePlanJSON refuses is refused
// with the same error.
func TestParsePlanJSONDecoded(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*", "plan*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("found %d plan JSON files in testdata, want at least 5", len(files))
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want, wantErr := ParsePlanJSON(b)
			decoded := &tfjson.Plan{}
			decoded.UseJSONNumber(true)
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.UseNumber()
			if err := dec.Decode(decoded); err != nil {
				if wantErr == nil {
					t.Fatalf("terraform-exec's decoding failed where ParsePlanJSON did not: %v", err)
				}
				return // terraform-exec's ShowPlanFile fails itself then
			}
			got, gotErr := parsePlanJSON(b, decoded)
			if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
				t.Fatalf("parsePlanJSON error %v, ParsePlanJSON's %v", gotErr, wantErr)
			}
			if wantErr != nil {
				return
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("parsePlanJSON of terraform-exec's decoding differs from ParsePlanJSON")
			}
			if got.Config == nil {
				t.Errorf("no configuration decoded")
			}
		})
	}
}
