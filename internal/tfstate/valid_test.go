package tfstate

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// invalidSeeds are inputs json.Valid refuses, each near a rule of the
// grammar appendValid checks.
var invalidSeeds = []string{
	``, ` `, `{`, `}`, `[`, `]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{,}`, `{"a" 1}`, `{1:2}`,
	`"abc`, `"a\"`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"tab\there\"", "\"nl\n\"", "\"\x00\"", "\"\x1f\"",
	`01`, `-`, `-a`, `1.`, `1.e3`, `.5`, `1e`, `1e+`, `+1`, `--1`, `0x10`, `1 2`, `{} {}`, `[] x`,
	`tru`, `truee`, `nul`, `nulll`, `True`, `fals`, `[true false]`, `{"a":1 "b":2}`, `{"a":[1}`, `[{]`,
	`{"a":{"b":[1,2,{"c":"d"]}}`, "\"\\u00e9\x7f\\", `"\/\b\f\n\r\t\\\"\u0041" x`,
}

// checkValid compares appendValid with json.Valid and json.Compact on b,
// alone and nested in three containers (the depth limit counts them).
func checkValid(t *testing.T, b []byte) {
	t.Helper()
	want := json.Valid(b)
	dst, end, _, ok := appendValid(nil, b, 0, nil, 0)
	got := ok && skipSpace(b, end) == len(b)
	if got != want {
		t.Fatalf("appendValid(%q) = %v (end %d), json.Valid = %v", b, got, end, want)
	}
	if want {
		var c bytes.Buffer
		if err := json.Compact(&c, b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dst, c.Bytes()) {
			t.Fatalf("appendValid(%q) appended %q, json.Compact %q", b, dst, c.Bytes())
		}
	}
	nested := append(append([]byte(`{"a":[[`), b...), "]]}"...)
	_, end, _, ok = appendValid(nil, nested, 0, nil, 0)
	if got, want := ok && end == len(nested), json.Valid(nested); got != want {
		t.Fatalf("appendValid(%q) = %v, json.Valid = %v", nested, got, want)
	}
}

func TestAppendValidAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	var all [][]byte
	for _, s := range invalidSeeds {
		all = append(all, []byte(s))
	}
	for _, b := range seedFiles(t) {
		all = append(all, b)
		// Every cut of a short seed, and a few of a long one: truncations
		// end inside strings, numbers, literals and escapes.
		step := 1 + len(b)/200
		for n := 0; n < len(b); n += step {
			all = append(all, b[:n])
		}
	}
	for _, b := range all {
		checkValid(t, b)
	}
}

func TestAppendValidDepthLimit(t *testing.T) {
	t.Parallel()
	for _, n := range []int{maxDepth - 1, maxDepth, maxDepth + 1} {
		for _, open := range []string{"[", `{"k":`} {
			closing := map[string]string{"[": "]", `{"k":`: "}"}[open]
			b := []byte(strings.Repeat(open, n) + "1" + strings.Repeat(closing, n))
			_, end, _, ok := appendValid(nil, b, 0, nil, 0)
			if got, want := ok && end == len(b), json.Valid(b); got != want {
				t.Errorf("%d levels of %s: appendValid = %v, json.Valid = %v", n, open, got, want)
			}
		}
	}
}

func FuzzAppendValid(f *testing.F) {
	for _, s := range invalidSeeds {
		f.Add([]byte(s))
	}
	for _, b := range seedFiles(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkValid(t, b) })
}
