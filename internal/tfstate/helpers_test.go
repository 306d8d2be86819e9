package tfstate_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/tfstate"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// entry is one resource entry of a hand-built state: terraform_data
// instances whose input/output is the given value, keyed by index key
// (`""` for none, `0`, `"x"` as raw JSON).
type entry struct {
	module, mode, typ, name string
	instances               []inst
	deps                    []string
}

type inst struct {
	key   string // raw JSON index key, "" for none
	value string
}

// td is a managed terraform_data entry with one unkeyed instance.
func td(module, name, value string) entry {
	return entry{module: module, mode: "managed", typ: "terraform_data", name: name, instances: []inst{{value: value}}}
}

// tdKeys is a managed terraform_data entry with keyed instances:
// tdKeys("", "c", `"x"`, "c-x", `"y"`, "c-y").
func tdKeys(module, name string, kv ...string) entry {
	e := entry{module: module, mode: "managed", typ: "terraform_data", name: name}
	for i := 0; i+1 < len(kv); i += 2 {
		e.instances = append(e.instances, inst{key: kv[i], value: kv[i+1]})
	}
	return e
}

// data is a terraform_remote_state data source entry.
func data(module, name, value string) entry {
	return entry{module: module, mode: "data", typ: "terraform_remote_state", name: name, instances: []inst{{value: value}}}
}

func (e entry) withDeps(deps ...string) entry { e.deps = deps; return e }

func (e entry) json() map[string]any {
	var insts []any
	for _, in := range e.instances {
		o := map[string]any{
			"schema_version": 0,
			"attributes": map[string]any{
				"id":               "id-" + e.name + in.key,
				"input":            map[string]any{"value": in.value, "type": "string"},
				"output":           map[string]any{"value": in.value, "type": "string"},
				"triggers_replace": nil,
			},
			"sensitive_attributes": []any{},
			"private":              "bnVsbA==",
		}
		if in.key != "" {
			o["index_key"] = json.RawMessage(in.key)
		}
		if len(e.deps) > 0 {
			o["dependencies"] = e.deps
		}
		insts = append(insts, o)
	}
	r := map[string]any{
		"mode": e.mode, "type": e.typ, "name": e.name,
		"provider":  tfstate.TerraformDataProvider,
		"instances": insts,
	}
	if e.module != "" {
		r["module"] = e.module
	}
	return r
}

// doc describes a hand-built state.
type doc struct {
	lineage   string
	serial    int64
	version   string            // terraform_version, "1.11.4" if empty
	outputs   map[string]string // name → string value
	entries   []entry
	checkRes  string // raw check_results, "" for null
	sensitive []string
}

func (d doc) bytes(t testing.TB) []byte {
	t.Helper()
	if d.lineage == "" {
		d.lineage = "lin-1"
	}
	if d.version == "" {
		d.version = "1.11.4"
	}
	outs := map[string]any{}
	for name, v := range d.outputs {
		o := map[string]any{"value": v, "type": "string"}
		if slices.Contains(d.sensitive, name) {
			o["sensitive"] = true
		}
		outs[name] = o
	}
	var res []any
	for _, e := range d.entries {
		res = append(res, e.json())
	}
	if res == nil {
		res = []any{}
	}
	var cr any
	if d.checkRes != "" {
		cr = json.RawMessage(d.checkRes)
	}
	b, err := json.MarshalIndent(map[string]any{
		"version": 4, "terraform_version": d.version, "serial": d.serial, "lineage": d.lineage,
		"outputs": outs, "resources": res, "check_results": cr,
	}, "", "  ")
	if err != nil {
		t.Fatalf("building state: %v", err)
	}
	return b
}

func (d doc) state(t testing.TB) *tfstate.State {
	t.Helper()
	s, err := tfstate.Parse(d.bytes(t))
	if err != nil {
		t.Fatalf("parsing built state: %v", err)
	}
	return s
}

// with returns a copy of d with entries replaced or added (matched by
// module, mode, type, name) and removed (by "module|type.name" keys).
func (d doc) with(es ...entry) doc {
	out := d
	out.entries = slices.Clone(d.entries)
	for _, e := range es {
		i := slices.IndexFunc(out.entries, func(x entry) bool {
			return x.module == e.module && x.mode == e.mode && x.typ == e.typ && x.name == e.name
		})
		if i >= 0 {
			out.entries[i] = e
		} else {
			out.entries = append(out.entries, e)
		}
	}
	return out
}

// without removes entries by "module|mode.type.name" (module may be empty).
func (d doc) without(keys ...string) doc {
	out := d
	out.entries = slices.DeleteFunc(slices.Clone(d.entries), func(x entry) bool {
		return slices.Contains(keys, x.module+"|"+x.mode+"."+x.typ+"."+x.name)
	})
	return out
}

// withOutputs returns a copy of d with outputs set ("" value: removed).
func (d doc) withOutputs(kv ...string) doc {
	out := d
	out.outputs = map[string]string{}
	for k, v := range d.outputs {
		out.outputs[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(out.outputs, kv[i])
		} else {
			out.outputs[kv[i]] = kv[i+1]
		}
	}
	return out
}

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create it): %v", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs from golden file (run with -update after review):\n%s", path, lineDiff(string(want), string(got)))
	}
}

// lineDiff is a minimal first-difference report.
func lineDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n  want %q\n  got  %q", i+1, w, g)
		}
	}
	return "(no line differs)"
}

// sameState fails unless a and b hold the same serial, lineage, version,
// check_results and semantically equal resources and outputs.
func sameState(t *testing.T, what string, got, want *tfstate.State) {
	t.Helper()
	if d := tfstate.Changed(want, got); len(d) != 0 {
		t.Errorf("%s: entries differ at %v", what, d)
	}
	if got.Serial != want.Serial || got.Lineage != want.Lineage || got.TerraformVersion != want.TerraformVersion {
		t.Errorf("%s: serial/lineage/version = %d/%s/%s, want %d/%s/%s", what,
			got.Serial, got.Lineage, got.TerraformVersion, want.Serial, want.Lineage, want.TerraformVersion)
	}
	if string(got.CheckResults) != string(want.CheckResults) {
		t.Errorf("%s: check_results = %s, want %s", what, got.CheckResults, want.CheckResults)
	}
}
