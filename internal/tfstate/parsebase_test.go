package tfstate_test

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// parsedBase is a 300-resource document as Terraform writes it, and its parse.
func parsedBase(t *testing.T) ([]byte, *tfstate.State) {
	t.Helper()
	doc, err := tfstate.SynthesizeTerraformData(300, 5, "lineage-base", 7).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	base, err := tfstate.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	return doc, base
}

// sameParse fails unless got is, field for field and byte for byte, what
// Parse made of the same document (want).
func sameParse(t *testing.T, got, want *tfstate.State) {
	t.Helper()
	if len(got.Resources) != len(want.Resources) {
		t.Fatalf("%d entries, want %d", len(got.Resources), len(want.Resources))
	}
	for i := range want.Resources {
		g, w := &got.Resources[i], &want.Resources[i]
		if g.Module != w.Module || g.Mode != w.Mode || g.Type != w.Type || g.Name != w.Name || g.Each != w.Each ||
			g.Provider != w.Provider || g.Address() != w.Address() || !bytes.Equal(g.Raw, w.Raw) {
			t.Fatalf("entry %d = %s %q, want %s %q", i, g.Address(), g.Raw, w.Address(), w.Raw)
		}
	}
	gm, err := got.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	wm, err := want.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gm, wm) {
		t.Fatalf("Marshal differs:\n%s", lineDiff(string(wm), string(gm)))
	}
	if got.ResourceCount() != want.ResourceCount() || strings.Join(got.Addresses(), " ") != strings.Join(want.Addresses(), " ") {
		t.Fatalf("resource count or addresses differ")
	}
}

// TestParseWithBaseIsParse: whatever the result shares with the base, the
// parse is Parse's — entries changed, added, removed, moved, re-indented,
// duplicated, the base unsorted or nil.
func TestParseWithBaseIsParse(t *testing.T) {
	t.Parallel()
	doc, base := parsedBase(t)
	entry := func(i int) string { // entry i of doc as written, indented
		s, err := tfstate.Parse(doc)
		if err != nil {
			t.Fatal(err)
		}
		one := *s
		one.Resources = s.Resources[i : i+1]
		b, err := one.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		_, after, _ := strings.Cut(string(b), "\"resources\": [\n    ")
		e, _, _ := strings.Cut(after, "\n  ],")
		return e
	}
	replace := func(old, new string) []byte { return []byte(strings.Replace(string(doc), old, new, 1)) }
	e10, e11 := entry(10), entry(11)
	changed := strings.Replace(e10, `"type": "string"`, `"type": "string",`+"\n"+`"extra": 1`, 1)
	n10, n0 := `"name": "`+base.Resources[10].Name+`"`, `"name": "`+base.Resources[0].Name+`"`
	tests := map[string][]byte{
		"same":              doc,
		"one changed":       replace(e10, changed),
		"one removed":       replace(e10+",\n    ", ""),
		"one added":         replace(e10, strings.Replace(e10, n10, n10[:len(n10)-1]+`a"`, 1)+",\n    "+e10),
		"two swapped":       replace(e10+",\n    "+e11, e11+",\n    "+e10),
		"a duplicate":       replace(e10, e10+",\n    "+e10),
		"compact":           compact(t, doc),
		"other white space": []byte(strings.ReplaceAll(string(doc), "\n      ", "\n\t")),
		"first and last":    replace(entry(0), strings.Replace(entry(0), n0, `"name": "a"`, 1)),
	}
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			want, werr := tfstate.Parse(b)
			for what, bs := range map[string]*tfstate.State{"base": base, "nil": nil, "synthesized": tfstate.SynthesizeTerraformData(300, 5, "lineage-base", 7)} {
				got, err := tfstate.ParseWithBase(b, bs)
				if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
					t.Fatalf("%s base: error %v, Parse's %v", what, err, werr)
				}
				if err == nil {
					sameParse(t, got, want)
				}
			}
		})
	}
	// A base out of Terraform's order still gives Parse's result.
	swapped := replace(e10+",\n    "+e11, e11+",\n    "+e10)
	unsorted, err := tfstate.Parse(swapped)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tfstate.ParseWithBase(doc, unsorted)
	if err != nil {
		t.Fatal(err)
	}
	sameParse(t, got, base)
}

// TestParseWithBaseRefuses: entries taken from the base do not hide what
// is wrong elsewhere in the document, with Parse's messages.
func TestParseWithBaseRefuses(t *testing.T) {
	t.Parallel()
	doc, base := parsedBase(t)
	last := bytes.LastIndex(doc, []byte(`"instances"`))
	tests := map[string]struct {
		in   []byte
		want string
	}{
		"truncated in the last entry": {doc[:last], "unexpected end of input (truncated file?)"},
		"truncated after an entry":    {doc[:bytes.Index(doc, []byte("\n    {"))+1], "unexpected end of input"},
		"garbage after the document":  {append(append([]byte{}, doc...), "x"...), "invalid character 'x' after top-level value"},
		"bad escape in a changed entry": {bytes.Replace(doc, []byte(`"`+base.Resources[200].Name+`"`), []byte(`"r\q"`), 1),
			`invalid character 'q' in string escape code`},
		"a second copy of an entry": {bytes.Replace(doc, []byte("\n  ],"), append(append([]byte(",\n    "), lastEntry(t, doc)...), "\n  ],"...), 1),
			"a second entry for " + base.Resources[len(base.Resources)-1].Address()},
		"no lineage": {bytes.Replace(doc, []byte(`"lineage": "lineage-base"`), []byte(`"lineage": ""`), 1), "state has no lineage"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := tfstate.ParseWithBase(tt.in, base)
			if err == nil || !errors.Is(err, tfstate.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseWithBase = %v, want an ErrInvalid saying %q", err, tt.want)
			}
			_, perr := tfstate.Parse(tt.in)
			if perr == nil || perr.Error() != err.Error() {
				t.Fatalf("ParseWithBase says %q, Parse %v", err, perr)
			}
		})
	}
}

// lastEntry is the last element of doc's resources as written.
func lastEntry(t *testing.T, doc []byte) []byte {
	t.Helper()
	end := bytes.LastIndex(doc, []byte("\n  ],"))
	start := bytes.LastIndex(doc[:end], []byte("\n    {"))
	if start < 0 || end < 0 {
		t.Fatal("no entries")
	}
	return doc[start+len("\n    ") : end]
}

func compact(t *testing.T, doc []byte) []byte {
	t.Helper()
	s, err := tfstate.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString(`{"version":4,"serial":` + strconv.FormatInt(s.Serial, 10) + `,"lineage":"` + s.Lineage + `","resources":[`)
	for i, r := range s.Resources {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(r.Raw)
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

// TestParseWithBaseShares: the entries that did not change are the base's
// own (Raw shared, nothing compacted again); the changed one is not.
func TestParseWithBaseShares(t *testing.T) {
	t.Parallel()
	doc, base := parsedBase(t)
	b := bytes.Replace(doc, []byte(`"`+base.Resources[42].Name+`"`), []byte(`"changed"`), 2)
	got, err := tfstate.ParseWithBase(b, base)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got.Resources {
		shared := &got.Resources[i].Raw[0] == &base.Resources[i].Raw[0]
		if shared != (i != 42) {
			t.Errorf("entry %d (%s): shared with the base = %v", i, got.Resources[i].Address(), shared)
		}
	}
}

// TestParseWithBaseTerraformApply: real Terraform applying a one-resource
// change writes every other entry byte for byte as the base it applied to
// had it, so ParseWithBase takes all of them from the base — the premise of
// the engine's parse of an apply's result.
func TestParseWithBaseTerraformApply(t *testing.T) {
	t.Parallel()
	bin := terraformBinary(t)
	files := map[string]string{}
	for f, b := range tfstate.SynthesizeTerraformDataConfig(30, 2) {
		files[f] = string(b)
	}
	files["main.tf"] = strings.Replace(files["main.tf"], `input = "r00003"`, `input = "r00003-changed"`, 1)
	w := newWorkDir(t, bin, "parsebase", files)
	doc, err := tfstate.SynthesizeTerraformData(30, 2, "3d2bc6d8-6c1e-4f0a-9b5e-2f4a1c7d9e01", 5).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	base, err := tfstate.Parse(doc)
	if err != nil {
		t.Fatal(err)
	}
	w.putState(doc)
	w.init()
	w.run([]int{0}, "apply", "-auto-approve", "-input=false", "-no-color", "-lock=false")
	out, want := w.readState()
	got, err := tfstate.ParseWithBase(out, base)
	if err != nil {
		t.Fatal(err)
	}
	sameParse(t, got, want)
	var fresh []string
	for i := range got.Resources {
		if &got.Resources[i].Raw[0] != &base.Resources[i].Raw[0] {
			fresh = append(fresh, got.Resources[i].Address())
		}
	}
	if strings.Join(fresh, " ") != "terraform_data.r00003" {
		t.Errorf("entries parsed anew: %v, want only terraform_data.r00003 (the changed one)", fresh)
	}
}

// FuzzParseWithBase: for any document, ParseWithBase against a fixed base
// gives exactly what Parse gives — the same error, or the same entries and
// the same bytes from Marshal.
func FuzzParseWithBase(f *testing.F) {
	doc, err := tfstate.SynthesizeTerraformData(12, 2, "lineage-fuzz", 3).Marshal()
	if err != nil {
		f.Fatal(err)
	}
	base, err := tfstate.Parse(doc)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(doc)
	f.Add(bytes.Replace(doc, []byte(`"r00004"`), []byte(`"r00004x"`), 2))
	f.Add(doc[:len(doc)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		want, werr := tfstate.Parse(b)
		got, err := tfstate.ParseWithBase(b, base)
		if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
			t.Fatalf("ParseWithBase error %v, Parse's %v", err, werr)
		}
		if err == nil {
			sameParse(t, got, want)
		}
	})
}
