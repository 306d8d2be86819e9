package tfstate

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// scanSeeds are valid JSON documents with the shapes that trip hand-written
// scanners: escapes before quotes, empty containers, nesting, numbers at
// the end of containers, white space everywhere.
var scanSeeds = []string{
	`{}`, `[]`, `""`, `0`, `-1.5e+3`, `true`, `null`,
	`{"a":{}, "b":[], "c":[{}], "d":[[]]}`,
	` { "k" : [ 1 , 2.50 , "x" , null , true ] , "e" : { } } `,
	`{"q":"a\"b","bs":"c\\","both":"\\\"","u":"\u00e9\ud83d\ude00","html":"<&>"}`,
	`["\\\\", "\\", "\"", "]", "}", "{", "[", ",", ":"]`,
	"{\n\t\"tabs\":\r\n[1,\n2]}",
	`{"provider":"provider[\"terraform.io/builtin/terraform\"]","module":"module.a[\"x.y[0]\"]"}`,
}

func seedFiles(t testing.TB) [][]byte {
	t.Helper()
	var out [][]byte
	files, _ := filepath.Glob("../terraform/testdata/terraform-json/*/*.json")
	more, _ := filepath.Glob("../terraform/testdata/terraform-json/*/terraform.tfstate")
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if json.Valid(b) {
			out = append(out, b)
		}
	}
	for _, s := range scanSeeds {
		out = append(out, []byte(s))
	}
	return out
}

// checkScan compares the hand-written helpers with encoding/json on b.
func checkScan(t *testing.T, b []byte) {
	t.Helper()
	if !json.Valid(b) {
		return
	}
	var want bytes.Buffer
	if err := json.Compact(&want, b); err != nil {
		t.Fatal(err)
	}
	if got := appendCompact(nil, b); !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("appendCompact(%q) = %q, want %q", b, got, want.Bytes())
	}
	for _, prefix := range []string{"", "    "} {
		var ind bytes.Buffer
		if err := json.Indent(&ind, want.Bytes(), prefix, "  "); err != nil {
			t.Fatal(err)
		}
		if got := appendIndent(nil, want.Bytes(), prefix); !bytes.Equal(got, ind.Bytes()) {
			t.Fatalf("appendIndent(%q, %q) = %q, want %q", want.Bytes(), prefix, got, ind.Bytes())
		}
		// Non-compact input indents the same (white space is dropped).
		var ind2 bytes.Buffer
		if err := json.Indent(&ind2, bytes.TrimSpace(b), prefix, "  "); err != nil {
			t.Fatal(err)
		}
		if got := appendIndent(nil, bytes.TrimSpace(b), prefix); !bytes.Equal(got, ind2.Bytes()) {
			t.Fatalf("appendIndent(%q, %q) = %q, want %q", b, prefix, got, ind2.Bytes())
		}
	}
	start := skipSpace(b, 0)
	if end := valueEnd(b, start); !bytes.Equal(bytes.TrimSpace(b[end:]), nil) {
		t.Fatalf("valueEnd(%q) = %d: leaves %q", b, end, b[end:])
	}
	if b[start] == '{' {
		dst, end, spans, ok := appendValid([]byte("x"), b, start, nil, 0)
		if !ok || !bytes.Equal(dst[1:], want.Bytes()) || len(bytes.TrimSpace(b[end:])) != 0 {
			t.Fatalf("appendValid(%q) = %q, end %d, %v", b, dst[1:], end, ok)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		count := map[string]int{}
		vals := map[string][]byte{}
		for _, sp := range spans {
			k, err := unquote(dst[sp.k0:sp.k1])
			if err != nil {
				t.Fatalf("span key %q: %v", dst[sp.k0:sp.k1], err)
			}
			count[k]++
			vals[k] = dst[sp.k1+1 : sp.v1]
		}
		for k, n := range count {
			var c bytes.Buffer
			if err := json.Compact(&c, m[k]); err != nil {
				t.Fatal(err)
			}
			if n == 1 && !bytes.Equal(vals[k], c.Bytes()) {
				t.Fatalf("appendValid(%q): key %q spans %q, want %q", b, k, vals[k], c.Bytes())
			}
		}
		for k := range m {
			if count[k] == 0 {
				t.Fatalf("appendValid(%q): no span for key %q", b, k)
			}
		}
	}
}

func TestScanHelpersAgreeWithEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, b := range seedFiles(t) {
		checkScan(t, b)
	}
}

func FuzzScanHelpers(f *testing.F) {
	for _, b := range seedFiles(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkScan(t, b) })
}

func TestUnquote(t *testing.T) {
	t.Parallel()
	for _, s := range []string{`"plain"`, `"q\"x"`, `"é"`, `"\u00e9"`, `"tab\there"`, `""`} {
		var want string
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatal(err)
		}
		if got, err := unquote([]byte(s)); err != nil || got != want {
			t.Errorf("unquote(%s) = %q, %v; want %q", s, got, err, want)
		}
	}
	if _, err := unquote([]byte(`7`)); err == nil {
		t.Error("unquote(7) succeeded")
	}
}
