package tfstate_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// realStates are states written by real Terraform releases (0.12.0, 1.1.0),
// from terraform-json's test data: inputs nobody here shaped.
func realStates(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../terraform/testdata/terraform-json/*/terraform.tfstate")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no real states found under ../terraform/testdata/terraform-json")
	}
	return files
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	real, err := os.ReadFile("../terraform/testdata/terraform-json/has_changes/terraform.tfstate")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		in   string
		want string // substring of the message
	}{
		"empty":              {"", "not a Terraform state: empty input"},
		"not JSON":           {"hello", "not a Terraform state: invalid character 'h'"},
		"HCL":                {`resource "x" "y" {}`, "not a Terraform state: invalid character 'r'"},
		"array":              {`[1, 2]`, "not a Terraform state: want a JSON object, found an array"},
		"truncated":          {string(real[:len(real)/2]), "not a Terraform state: unexpected end of input (truncated file?)"},
		"trailing garbage":   {`{"version": 4, "lineage": "l"} x`, "not a Terraform state: invalid character 'x'"},
		"no version":         {`{"lineage": "l"}`, `not a Terraform state: no "version" field`},
		"version string":     {`{"version": "4", "lineage": "l"}`, `"version" is "4", want the number 4`},
		"version 3":          {`{"version": 3, "serial": 1, "lineage": "l", "modules": []}`, "found state format version 3; Kilolock reads version 4 only, written by Terraform ≥ 0.12"},
		"version 5":          {`{"version": 5, "lineage": "l"}`, "found state format version 5, newer than version 4"},
		"version 3 bad rest": {`{"version": 3, "resources": 7}`, "found state format version 3"},
		"no lineage":         {`{"version": 4, "serial": 1, "resources": []}`, "state has no lineage"},
		"empty lineage":      {`{"version": 4, "lineage": ""}`, "state has no lineage"},
		"lineage number":     {`{"version": 4, "lineage": 7}`, "lineage: want a string"},
		"negative serial":    {`{"version": 4, "lineage": "l", "serial": -1}`, "serial -1: out of range: want 0 to 9223372036854775807"},
		"serial past int64":  {`{"version": 4, "lineage": "l", "serial": 9223372036854775812}`, "serial 9223372036854775812: out of range: want 0 to 9223372036854775807"},
		"serial past uint64": {`{"version": 4, "lineage": "l", "serial": 18446744073709551621}`, "serial 18446744073709551621: out of range: want 0 to 9223372036854775807"},
		"fractional serial":  {`{"version": 4, "lineage": "l", "serial": 1.5}`, "serial 1.5: want a whole number from 0 to 9223372036854775807"},
		"resources object":   {`{"version": 4, "lineage": "l", "resources": {}}`, "resources: want an array, found an object"},
		"resource string":    {`{"version": 4, "lineage": "l", "resources": ["secret"]}`, "resources[0]: want an object, found a string"},
		"missing type": {`{"version": 4, "lineage": "l", "resources": [
			{"mode": "managed", "name": "web", "instances": []}]}`, `resources[0] (module "", .web): missing "type"`},
		"missing name": {`{"version": 4, "lineage": "l", "resources": [
			{"mode": "managed", "type": "terraform_data", "instances": []}]}`, `missing "name"`},
		"missing both": {`{"version": 4, "lineage": "l", "resources": [
			{"module": "module.a", "mode": "managed"}]}`, `resources[0] (module "module.a", .): missing "type" and "name"`},
		"bad mode": {`{"version": 4, "lineage": "l", "resources": [
			{"mode": "ephemeral", "type": "t", "name": "n"}]}`, `mode "ephemeral", want "managed" or "data"`},
		"bad module": {`{"version": 4, "lineage": "l", "resources": [
			{"module": "module.a[\"x]", "mode": "managed", "type": "t", "name": "n"}]}`, `unterminated instance key`},
		"duplicate": {`{"version": 4, "lineage": "l", "resources": [
			{"module": "module.a[0]", "mode": "managed", "type": "t", "name": "n"},
			{"module": "module.a[0]", "mode": "managed", "type": "t", "name": "n"}]}`, `resources[1]: a second entry for module.a.t.n in module "module.a[0]"`},
		"output not object": {`{"version": 4, "lineage": "l", "outputs": {"o": "secret"}}`, `output "o": want an object, found a string`},
		// Syntax errors inside the entries, found by the pass that splits
		// them, keep encoding/json's message and offset.
		"bad escape in an entry": {`{"version": 4, "lineage": "l", "resources": [{"mode": "managed", "type": "t", "name": "n\q"}]}`,
			`invalid character 'q' in string escape code (at byte 90)`},
		"control character in an entry": {"{\"version\": 4, \"lineage\": \"l\", \"resources\": [{\"name\": \"a\nb\"}]}",
			`invalid character '\n' in string literal`},
		"trailing comma in resources": {`{"version": 4, "lineage": "l", "resources": [{"mode": "managed", "type": "t", "name": "n"},]}`,
			`invalid character ']' looking for beginning of value`},
		"bad number in an entry": {`{"version": 4, "lineage": "l", "resources": [{"mode": "managed", "type": "t", "name": "n", "x": 01}]}`,
			`invalid character '1' after object key:value pair`},
		"syntax error after a bad entry": {`{"version": 4, "lineage": "l", "resources": [{"mode": "x", "type": "t", "name": "n"}, {"a": tru}]}`,
			`invalid character '}' in literal true (expecting 'e')`},
		"nested too deep": {`{"version": 4, "lineage": "l", "resources": [{"x": ` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}]}`,
			`exceeded max depth`},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, err := tfstate.Parse([]byte(tt.in))
			if err == nil {
				t.Fatalf("Parse = %+v, want an error", s)
			}
			if !errors.Is(err, tfstate.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			if !strings.HasPrefix(err.Error(), "parsing Terraform state: ") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error %q quotes a value from the state", err)
			}
		})
	}
}

func TestParseSyntaxErrorUnwraps(t *testing.T) {
	t.Parallel()
	_, err := tfstate.Parse([]byte(`{"version": 4,, }`))
	var syn *json.SyntaxError
	if !errors.As(err, &syn) {
		t.Fatalf("error %v does not unwrap to *json.SyntaxError", err)
	}
	var pe *tfstate.ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v is not a *ParseError", err)
	}
}

func TestParseRealStates(t *testing.T) {
	t.Parallel()
	for _, file := range realStates(t) {
		t.Run(filepath.Base(filepath.Dir(file)), func(t *testing.T) {
			t.Parallel()
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			s, err := tfstate.Parse(b)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var want struct {
				Serial           int64
				Lineage          string
				TerraformVersion string `json:"terraform_version"`
				Outputs          map[string]any
				Resources        []any
			}
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			if s.Serial != want.Serial || s.Lineage != want.Lineage || s.TerraformVersion != want.TerraformVersion {
				t.Errorf("serial/lineage/version = %d/%s/%s, want %d/%s/%s", s.Serial, s.Lineage, s.TerraformVersion,
					want.Serial, want.Lineage, want.TerraformVersion)
			}
			if s.ResourceCount() != len(want.Resources) || len(s.Outputs) != len(want.Outputs) {
				t.Errorf("%d resources, %d outputs; want %d, %d", s.ResourceCount(), len(s.Outputs), len(want.Resources), len(want.Outputs))
			}
			for i, r := range s.Resources {
				var got any
				if err := json.Unmarshal(r.Raw, &got); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want.Resources[i]) {
					t.Errorf("resources[%d] (%s) raw differs from the file", i, r.Address())
				}
			}

			// Round trip: Parse → Marshal → Parse is semantically identical,
			// and a second Marshal is byte-identical to the first.
			out, err := s.Marshal()
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			s2, err := tfstate.Parse(out)
			if err != nil {
				t.Fatalf("Parse(Marshal): %v", err)
			}
			sameState(t, "round trip", s2, s)
			if !slices.Equal(s2.Addresses(), s.Addresses()) {
				t.Errorf("addresses after round trip = %v, want %v", s2.Addresses(), s.Addresses())
			}
			out2, err := s2.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if string(out2) != string(out) {
				t.Errorf("second Marshal differs:\n%s", lineDiff(string(out), string(out2)))
			}
			var a, c any
			if err := json.Unmarshal(b, &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(out, &c); err != nil {
				t.Fatal(err)
			}
			am, cm := a.(map[string]any), c.(map[string]any)
			if _, ok := am["check_results"]; !ok {
				delete(cm, "check_results") // 0.12/1.1 files predate check_results; Marshal writes null
			}
			if !reflect.DeepEqual(am, cm) {
				t.Errorf("Marshal output is not the same JSON document as the file")
			}
		})
	}
}

func TestAddresses(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../terraform/testdata/terraform-json/has_changes/terraform.tfstate")
	if err != nil {
		t.Fatal(err)
	}
	s, err := tfstate.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"data.null_data_source.baz",
		"module.foo.null_resource.foo",
		"null_resource.bar",
		"null_resource.baz",
		"null_resource.foo",
		"output.foo", "output.interpolated", "output.interpolated_deep", "output.list",
		"output.map", "output.referenced", "output.referenced_deep", "output.string",
	}
	if got := s.Addresses(); !slices.Equal(got, want) {
		t.Errorf("Addresses() =\n%q\nwant\n%q", got, want)
	}
	if s.ResourceCount() != 5 {
		t.Errorf("ResourceCount() = %d, want 5", s.ResourceCount())
	}

	// Module instances of one resource are one address.
	d := doc{entries: []entry{
		tdKeys(`module.app["eu"]`, "m", "0", "eu-0", "1", "eu-1"),
		tdKeys(`module.app["us"]`, "m", "0", "us-0"),
		td("", "a", "a1"),
	}}
	s = d.state(t)
	if got, want := s.Addresses(), []string{"module.app.terraform_data.m", "terraform_data.a"}; !slices.Equal(got, want) {
		t.Errorf("Addresses() = %q, want %q", got, want)
	}
	if s.ResourceCount() != 3 {
		t.Errorf("ResourceCount() = %d, want 3", s.ResourceCount())
	}
	insts, err := s.Resources[0].Instances()
	if err != nil || len(insts) != 2 {
		t.Errorf("Instances() = %d instances, %v; want 2", len(insts), err)
	}
}

func TestEmptyMarshal(t *testing.T) {
	t.Parallel()
	s := tfstate.Empty("8849e197-aa78-59a1-b830-e68c18be809e", 2, "1.11.4")
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// Byte for byte what Terraform 1.11.4 writes for an empty configuration.
	golden(t, "empty.tfstate", b)
	s2, err := tfstate.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, "round trip", s2, s)
	if len(s2.Addresses()) != 0 {
		t.Errorf("Addresses() = %v, want none", s2.Addresses())
	}
}

func TestMarshalKeepsUnknownFields(t *testing.T) {
	t.Parallel()
	in := `{
  "version": 4,
  "terraform_version": "1.99.0",
  "serial": 3,
  "lineage": "l",
  "outputs": {"o": {"value": "<&>", "type": "string", "sensitive": true, "future": 1}},
  "resources": [
    {"mode": "managed", "type": "t", "name": "n", "provider": "p", "future_field": [1, 2.50, "x"],
     "instances": [{"schema_version": 2, "identity": {"k": "v"}, "private": "YWJj", "attributes": {"big": 12345678901234567890}}]}
  ],
  "check_results": [{"object_kind": "resource", "config_addr": "t.n", "status": "pass", "objects": null}],
  "zz_future": {"a": true}
}`
	s, err := tfstate.Parse([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "unknown-fields.tfstate", out)
	for _, want := range []string{`"future_field": [`, `2.50`, `12345678901234567890`, `"identity": {`, `"zz_future": {`, `"future": 1`, `"value": "<&>"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("Marshal output lost %s", want)
		}
	}
	if !s.Outputs["o"].Sensitive || string(s.Outputs["o"].Value) != `"<&>"` {
		t.Errorf("output o = %+v", s.Outputs["o"])
	}
}

func TestMarshalHandBuiltEntries(t *testing.T) {
	t.Parallel()
	s := tfstate.Empty("l", 1, "1.11.4")
	s.Resources = append(s.Resources, tfstate.Resource{
		Mode: "managed", Type: "t", Name: "n",
		Raw: json.RawMessage(`{ "mode" : "managed", "type": "t", "name": "n", "instances": [ ] }`),
	})
	out, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := "  \"resources\": [\n    {\n      \"mode\": \"managed\",\n      \"type\": \"t\",\n      \"name\": \"n\",\n      \"instances\": []\n    }\n  ],\n"
	if !strings.Contains(string(out), want) {
		t.Errorf("Marshal of a hand-built entry:\n%s\nwant it to contain\n%s", out, want)
	}

	s.Resources[0].Raw = json.RawMessage(`{"mode": "managed",`)
	if _, err := s.Marshal(); err == nil || !strings.Contains(err.Error(), "writing resource t.n: raw entry is not valid JSON") {
		t.Errorf("Marshal of a broken entry: %v", err)
	}

	// A parsed entry whose Raw is replaced is checked again.
	p, err := tfstate.Parse(out)
	if err != nil {
		t.Fatal(err)
	}
	p.Resources[0].Raw = json.RawMessage(`{]`)
	if _, err := p.Marshal(); err == nil {
		t.Error("Marshal accepted a replaced, broken Raw")
	}
}

func TestSynthesizeTerraformData(t *testing.T) {
	t.Parallel()
	s := tfstate.SynthesizeTerraformData(7, 2, "lin", 3)
	want := []string{
		"module.m00.terraform_data.r00001", "module.m00.terraform_data.r00004",
		"module.m01.terraform_data.r00002", "module.m01.terraform_data.r00005",
		"terraform_data.r00000", "terraform_data.r00003", "terraform_data.r00006",
	}
	if got := s.Addresses(); !slices.Equal(got, want) {
		t.Errorf("Addresses() = %q, want %q", got, want)
	}
	if s.Serial != 3 || s.Lineage != "lin" || s.ResourceCount() != 7 {
		t.Errorf("serial/lineage/count = %d/%s/%d", s.Serial, s.Lineage, s.ResourceCount())
	}
	b, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := tfstate.SynthesizeTerraformData(7, 2, "lin", 3).Marshal()
	if err != nil || string(again) != string(b) {
		t.Errorf("SynthesizeTerraformData is not deterministic (%v)", err)
	}
	p, err := tfstate.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, "round trip", p, s)
	if got := tfstate.SynthesizeTerraformData(2000, 0, "lin", 1).ResourceCount(); got != 2000 {
		t.Errorf("2,000-resource state has %d entries", got)
	}
	files := tfstate.SynthesizeTerraformDataConfig(7, 2)
	if len(files) != 3 || !strings.Contains(string(files["m01/main.tf"]), `resource "terraform_data" "r00005"`) ||
		!strings.Contains(string(files["main.tf"]), `source = "./m00"`) {
		t.Errorf("SynthesizeTerraformDataConfig(7, 2) = %q", files)
	}
}
