package plandiff_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/kilolock/kilolock/internal/plandiff"
	"github.com/kilolock/kilolock/internal/terraform"
)

// planOf parses a plan JSON of the given resource_changes (and optional
// output_changes), as terraform show -json writes one.
func planOf(t *testing.T, changes string, extra ...string) *tfjson.Plan {
	t.Helper()
	doc := `{"format_version": "1.2", "terraform_version": "1.11.4", "resource_changes": [` + changes + `]` +
		strings.Join(extra, "") + `}`
	p, err := terraform.ParsePlanJSON([]byte(doc))
	if err != nil {
		t.Fatalf("parsing %s: %v", doc, err)
	}
	return p
}

// change is one resource_changes entry of terraform_data ADDR.
func change(addr, actions, before, after, extra string) string {
	name := addr[strings.LastIndex(addr, ".")+1:]
	if i := strings.IndexByte(name, '['); i >= 0 {
		name = name[:i]
	}
	return fmt.Sprintf(`{"address": %q, "mode": "managed", "type": "terraform_data", "name": %q, "provider_name": "terraform.io/builtin/terraform",
		"change": {"actions": %s, "before": %s, "after": %s %s}}`, addr, name, actions, before, after, extra)
}

func build(t *testing.T, p *tfjson.Plan, prior string) *plandiff.Diff {
	t.Helper()
	d, err := plandiff.Build(p, plandiff.Options{PriorState: []byte(prior)})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// stateOf is a state v4 document holding the given resource entries.
func stateOf(resources string) string {
	return `{"version": 4, "terraform_version": "1.11.4", "serial": 3, "lineage": "l-1", "outputs": {}, "resources": [` + resources + `], "check_results": null}`
}

// leaks returns what of secrets a diff's stored encoding holds.
func leaks(t *testing.T, d *plandiff.Diff, secrets ...string) []string {
	t.Helper()
	b, err := plandiff.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range secrets {
		if strings.Contains(string(b), s) {
			out = append(out, s)
		}
	}
	return out
}

// TestStateMarksMask: what the state's sensitive_attributes mark is masked
// though the plan JSON marks nothing (an older Terraform wrote no
// before_sensitive, or a provider dropped the mark): in the instance, at a
// module instance's and a for_each key's address, and — for a value of at
// least 8 bytes — wherever else it appears unmarked; a short one only in
// its own instance.
func TestStateMarksMask(t *testing.T) {
	const long, short = "hunter2-long-secret", "pin7"
	p := planOf(t, strings.Join([]string{
		change(`module.a["x"].terraform_data.y["k"]`, `["update"]`,
			`{"id": "i1", "input": {"pw": "`+long+`", "pin": "`+short+`", "n": 1}, "output": {"pw": "`+long+`", "pin": "`+short+`", "n": 1}}`,
			`{"id": "i1", "input": {"pw": "`+long+`", "pin": "`+short+`", "n": 2}}`,
			`, "after_unknown": {"output": true}`),
		change("terraform_data.other", `["update"]`,
			`{"id": "i2", "input": "`+long+`", "label": "`+short+`"}`, `{"id": "i2", "input": "x-`+long+`-y", "label": "`+short+`-2"}`, ""),
	}, ","))
	prior := stateOf(`{"module": "module.a[\"x\"]", "mode": "managed", "type": "terraform_data", "name": "y",
		"provider": "provider[\"terraform.io/builtin/terraform\"]", "instances": [{"index_key": "k", "schema_version": 0,
		"attributes": {"id": "i1", "input": {"pw": "` + long + `", "pin": "` + short + `", "n": 1}, "output": {"pw": "` + long + `", "pin": "` + short + `", "n": 1}},
		"sensitive_attributes": [[{"type": "get_attr", "value": "input"}, {"type": "get_attr", "value": "pw"}],
		                         [{"type": "get_attr", "value": "input"}, {"type": "index", "value": {"value": "pin", "type": "string"}}]]}]}`)
	d := build(t, p, prior)
	if got := leaks(t, d, long); len(got) > 0 {
		t.Errorf("the diff holds %q", got)
	}
	own := &plandiff.Diff{Format: plandiff.Format, Resources: d.Resources[:1]}
	if got := leaks(t, own, short); len(got) > 0 {
		t.Errorf("%s's diff holds %q (input.pin is marked, output.pin a copy)", d.Resources[0].Address, got)
	}
	// Without the state nothing marks them: the plan JSON alone shows them,
	// as Terraform would.
	if got := leaks(t, build(t, p, ""), long, short); len(got) != 2 {
		t.Errorf("without the state the diff holds %q; want both (nothing marks them)", got)
	}
	// The short value outside its instance is shown: masked plan-wide it
	// would mask every "pin7".
	b, _ := plandiff.Marshal(&plandiff.Diff{Format: plandiff.Format, Resources: d.Resources[1:]})
	if !strings.Contains(string(b), `"`+short+`-2"`) {
		t.Errorf("terraform_data.other's label %s-2 was masked: %s", short, b)
	}
}

// TestVariableAndOutputSecretsMask: the value of a sensitive root variable
// (in clear in the plan JSON's "variables") and of a sensitive output are
// masked where a resource holds them unmarked.
func TestVariableAndOutputSecretsMask(t *testing.T) {
	const v, o = "var-secret-value", "output-secret-value"
	p := planOf(t, change("terraform_data.a", `["create"]`, `null`, `{"input": "`+v+`", "triggers_replace": ["`+o+`"]}`, `, "after_unknown": {"id": true}`),
		`, "variables": {"pw": {"value": "`+v+`"}}`,
		`, "configuration": {"root_module": {"variables": {"pw": {"sensitive": true}}, "outputs": {"o": {"sensitive": true, "expression": {}}}}}`,
		`, "output_changes": {"o": {"actions": ["create"], "before": null, "after": "`+o+`", "after_unknown": false, "before_sensitive": false, "after_sensitive": false}}`)
	d := build(t, p, "")
	if got := leaks(t, d, v, o); len(got) > 0 {
		t.Errorf("the diff holds %q", got)
	}
	if len(d.Outputs) != 1 || d.Outputs[0].After == nil || !d.Outputs[0].After.Sensitive {
		t.Errorf("output o = %+v; want masked (sensitive in the configuration)", d.Outputs)
	}
}

// TestOddMarks: marks of a shape Terraform does not write mask (or make
// unknown) the whole value; nothing panics.
func TestOddMarks(t *testing.T) {
	p := planOf(t, change("terraform_data.a", `["update"]`, `{"id": "i", "input": {"a": "old-value-1"}}`, `{"id": "i", "input": {"a": "new-value-1"}}`,
		`, "before_sensitive": {"input": "yes"}, "after_sensitive": {"input": 1}, "after_unknown": {"id": "?"}`))
	d := build(t, p, "")
	if got := leaks(t, d, "old-value-1", "new-value-1"); len(got) > 0 {
		t.Errorf("the diff holds %q", got)
	}
	var id *plandiff.Node
	for i, n := range d.Resources[0].Changes {
		if *n.Key == "id" {
			id = &d.Resources[0].Changes[i]
		}
	}
	if id == nil || id.After == nil || !id.After.Unknown {
		t.Errorf("id = %+v; want unknown after (after_unknown marks it, oddly)", id)
	}
}

// nodePaths lists a diff's nodes as "PATH ACTION" lines, elements by
// index.
func nodePaths(ns []plandiff.Node, prefix string) []string {
	var out []string
	for _, n := range ns {
		p := prefix
		switch {
		case n.Key != nil:
			p += "." + *n.Key
		case n.Index != nil:
			p += fmt.Sprintf("[%d]", *n.Index)
		}
		line := strings.TrimPrefix(p, ".") + " " + string(n.Action)
		if n.ForcesReplacement {
			line += " forces"
		}
		out = append(out, line)
		out = append(out, nodePaths(n.Changes, p)...)
	}
	return out
}

// TestArraysAndKinds: arrays are diffed by longest common subsequence (a
// removed and an added object at one place are one updated object), long
// arrays by common prefix and suffix; a value that changes kind is shown
// as the old container removed and the new one created; replace_paths
// mark the node they name.
func TestArraysAndKinds(t *testing.T) {
	long := func(n, changeAt int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			v := i
			if i == changeAt {
				v = -1
			}
			fmt.Fprint(&b, v)
		}
		return "[" + b.String() + "]"
	}
	cases := map[string]struct {
		before, after, extra string
		want                 []string
	}{
		"insert in the middle": {`{"l": ["a", "b", "c"]}`, `{"l": ["a", "x", "b", "c"]}`, "", []string{"l update", "l[1] create"}},
		"remove and add":       {`{"l": ["a", "b", "c"]}`, `{"l": ["c", "a"]}`, "", []string{"l update", "l[0] delete", "l[1] delete", "l[1] create"}},
		"object changed in place": {`{"l": [{"p": 1, "c": "x"}, {"p": 2, "c": "y"}]}`, `{"l": [{"p": 1, "c": "z"}, {"p": 2, "c": "y"}]}`, "",
			[]string{"l update", "l[0] update", "l[0].c update"}},
		"object to string": {`{"v": {"a": 1}}`, `{"v": "s"}`, "", []string{"v update", "v.a delete"}},
		"array to object":  {`{"v": [1]}`, `{"v": {"a": 1}}`, "", []string{"v delete", "v[0] delete", "v create", "v.a create"}},
		"long array, one element changed": {`{"l": ` + long(1500, -1) + `}`, `{"l": ` + long(1500, 700) + `}`, "",
			[]string{"l update", "l[700] delete", "l[700] create"}},
		"replace path into a block": {`{"rule": [{"port": 80}, {"port": 443}]}`, `{"rule": [{"port": 80}, {"port": 8443}]}`,
			`, "replace_paths": [["rule", 1, "port"]]`, []string{"rule update", "rule[1] update", "rule[1].port update forces"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := planOf(t, change("terraform_data.a", `["update"]`, c.before, c.after, c.extra))
			d := build(t, p, "")
			got := nodePaths(d.Resources[0].Changes, "")
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("nodes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

// TestOrderAndCounts: deletes first, then replacements, then the rest in
// the plan's order; no-ops only when they move or import.
func TestOrderAndCounts(t *testing.T) {
	obj := `{"id": "i", "input": "v"}`
	p := planOf(t, strings.Join([]string{
		change("terraform_data.a", `["create"]`, `null`, obj, ""),
		change("terraform_data.b", `["no-op"]`, obj, obj, ""),
		change("terraform_data.c", `["create", "delete"]`, obj, `{"input": "w"}`, `, "after_unknown": {"id": true}`),
		change("terraform_data.d", `["delete"]`, obj, `null`, ""),
		`{"address": "terraform_data.e", "previous_address": "terraform_data.old", "mode": "managed", "type": "terraform_data", "name": "e",
		  "change": {"actions": ["no-op"], "before": ` + obj + `, "after": ` + obj + `}}`,
		change("terraform_data.f", `["no-op"]`, obj, obj, `, "importing": {"id": "i"}`),
		change("terraform_data.g", `["create", "forget"]`, obj, obj, ""),
	}, ","))
	d := build(t, p, "")
	var got []string
	for _, r := range d.Resources {
		got = append(got, r.Address+" "+string(r.Action))
	}
	want := "terraform_data.d delete,terraform_data.c replace,terraform_data.a create,terraform_data.e no-op,terraform_data.f no-op,terraform_data.g create+forget"
	if strings.Join(got, ",") != want {
		t.Errorf("resources = %s; want %s", strings.Join(got, ","), want)
	}
	if c := d.Counts(); c != (plandiff.Counts{Add: 1, Destroy: 1, Replace: 1, Import: 1, Move: 1}) {
		t.Errorf("counts = %+v", c)
	}
	if !d.Resources[1].CreateFirst {
		t.Errorf("terraform_data.c: CreateFirst unset for actions [create, delete]")
	}
}

// TestBuildErrors: a bad prior state is an error naming it; a nil plan too.
func TestBuildErrors(t *testing.T) {
	if _, err := plandiff.Build(nil, plandiff.Options{}); err == nil {
		t.Error("Build(nil) succeeded")
	}
	_, err := plandiff.Build(planOf(t, ""), plandiff.Options{PriorState: []byte(`{"version": 4`)})
	if err == nil || !strings.Contains(err.Error(), "reading the prior state") {
		t.Errorf("Build with a truncated state: %v; want an error reading the prior state", err)
	}
}

// TestMarshalRoundTrip: what Marshal writes Unmarshal reads back; another
// format or malformed JSON is a clear error.
func TestMarshalRoundTrip(t *testing.T) {
	p := planOf(t, change("terraform_data.a", `["update"]`, `{"id": "i", "l": [1, 2]}`, `{"id": "i", "l": [1, 3]}`, `, "replace_paths": [["l", 1]]`))
	d := build(t, p, "")
	b, err := plandiff.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	back, err := plandiff.Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := plandiff.Marshal(back)
	if string(b) != string(b2) {
		t.Errorf("round trip changed the diff:\n%s\n%s", b, b2)
	}
	if got := back.Resources[0].ReplacePaths[0].String(); got != "l[1]" {
		t.Errorf("replace path = %q; want l[1]", got)
	}
	if _, err := plandiff.Unmarshal([]byte(`{"format": 9, "resources": []}`)); !errors.Is(err, plandiff.ErrFormat) {
		t.Errorf("format 9: %v; want ErrFormat", err)
	}
	if _, err := plandiff.Unmarshal([]byte(`{"format": 1,`)); err == nil || !strings.Contains(err.Error(), "decoding plan diff") {
		t.Errorf("truncated: %v", err)
	}
	var s plandiff.Step
	if err := json.Unmarshal([]byte(`true`), &s); err == nil {
		t.Error("a path step true decoded")
	}
}

// TestQuote: values print on one line, inert: no control character,
// invisible or bidirectional rune reaches a terminal or a fence raw.
func TestQuote(t *testing.T) {
	cases := map[string]string{
		"plain":         `"plain"`,
		"a\"b\\c":       `"a\"b\\c"`,
		"l1\nl2\t\r":    `"l1\nl2\t\r"`,
		"\x1b[31m":      `"\u001B[31m"`,
		"ali\u200bce":   `"ali\u200Bce"`,
		"\u202egnp.exe": `"\u202Egnp.exe"`,
		"${x} %{y}":     `"$${x} %%{y}"`,
		"\xff":          `"\uFFFD"`,
		"emoji 🚀":       `"emoji 🚀"`,
	}
	for in, want := range cases {
		if got := plandiff.Quote(in); got != want {
			t.Errorf("Quote(%q) = %s; want %s", in, got, want)
		}
	}
	if got := plandiff.Literal(json.RawMessage(`{"b": [1, "x"], "a": null}`)); got != `{ a = null, b = [1, "x"] }` {
		t.Errorf("Literal = %s", got)
	}
	if got := plandiff.KeyLiteral("with space"); got != `"with space"` {
		t.Errorf("KeyLiteral = %s", got)
	}
}

// TestRefreshOnly: a refresh-only plan's diff (Options.RefreshOnly) is its
// resource_drift — what changed or is gone outside Terraform — each with
// Drift set, counted as Refresh and never as destructive; its empty
// resource_changes, and a normal plan's drift, are not listed.
func TestRefreshOnly(t *testing.T) {
	obj := `{"id": "i", "input": "v"}`
	drift := `, "resource_drift": [` + change("terraform_data.a", `["update"]`, obj, `{"id": "i", "input": "w"}`, "") + `,` +
		change("terraform_data.gone", `["delete"]`, obj, `null`, "") + `]`
	doc := `{"format_version": "1.2", "terraform_version": "1.11.4", "planned_values": {"root_module": {}}` + drift + `}`
	p, err := terraform.ParsePlanJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	d, err := plandiff.Build(p, plandiff.Options{RefreshOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range d.Resources {
		got = append(got, fmt.Sprintf("%s %s %t", r.Address, r.Action, r.Drift))
	}
	if want := "terraform_data.gone delete true,terraform_data.a update true"; strings.Join(got, ",") != want {
		t.Errorf("resources = %s; want %s", strings.Join(got, ","), want)
	}
	if c := d.Counts(); c != (plandiff.Counts{Refresh: 2}) {
		t.Errorf("counts = %+v, want 2 refreshed and nothing else", c)
	}
	if len(d.Destructive()) != 0 {
		t.Errorf("destructive = %v: a refresh-only plan destroys nothing", d.Destructive())
	}
	normal := planOf(t, change("terraform_data.b", `["create"]`, `null`, obj, ""), drift)
	if d := build(t, normal, ""); len(d.Resources) != 1 || d.Resources[0].Drift {
		t.Errorf("a normal plan's diff = %+v, want its one change, not its drift", d.Resources)
	}
}
