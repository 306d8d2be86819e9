package githubfake

import (
	"bytes"
	"encoding/json"
	"testing"
)

func mustSchema(t *testing.T, src string) *Schema {
	t.Helper()
	var raw any
	if err := json.Unmarshal([]byte(src), &raw); err != nil {
		t.Fatal(err)
	}
	s, err := ParseSchema(raw)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func decode(t *testing.T, src string) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(src)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParseSchemaRefusesUnknownKeywords(t *testing.T) {
	t.Parallel()
	for _, src := range []string{`{"type":"string","pattern":"^a"}`, `{"allOf":[]}`, `{"additionalProperties":{"type":"string"}}`} {
		var raw any
		_ = json.Unmarshal([]byte(src), &raw)
		if _, err := ParseSchema(raw); err == nil {
			t.Errorf("%s parsed; an unsupported keyword must fail loudly", src)
		}
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	s := mustSchema(t, `{"type":"object","required":["a"],"additionalProperties":false,"properties":{
		"a":{"type":"integer"},
		"n":{"type":"string","nullable":true,"maxLength":2},
		"o":{"oneOf":[{"type":"string"},{"type":"integer"}]},
		"l":{"type":"array","maxItems":1,"items":{"type":"boolean"}}}}`)
	tests := map[string]struct {
		doc  string
		errs int
	}{
		"valid":               {`{"a":1,"n":null,"o":"x","l":[true]}`, 0},
		"integer, not number": {`{"a":1.5}`, 1},
		"unknown key":         {`{"a":1,"z":1}`, 1},
		"too long in runes":   {`{"a":1,"n":"ééé"}`, 1},
		"two runes fit":       {`{"a":1,"n":"éé"}`, 0},
		"oneOf none":          {`{"a":1,"o":true}`, 3},
		"items and maxItems":  {`{"a":1,"l":[1,true]}`, 2},
		"missing":             {`{}`, 1},
		"not an object":       {`[]`, 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if errs := s.Validate(decode(t, tc.doc)); len(errs) != tc.errs {
				t.Errorf("%s: %d errors %v, want %d", tc.doc, len(errs), errs, tc.errs)
			}
		})
	}
}
