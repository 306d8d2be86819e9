package plandiff

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	tfjson "github.com/hashicorp/terraform-json"
)

// stateDoc is a state v4 document with one terraform_data resource per
// entry of insts (name → attributes JSON, "" for none), each instance's
// input marked sensitive when its name is in sens.
func stateDoc(t *testing.T, insts map[string]string, sens ...string) *Snapshot {
	t.Helper()
	var rs []string
	var names []string
	for name, attrs := range insts {
		if attrs == "" {
			continue
		}
		sa := "[]"
		for _, s := range sens {
			if s == name {
				sa = `[[{"type":"get_attr","value":"input"}]]`
			}
		}
		rs = append(rs, fmt.Sprintf(`{"mode":"managed","type":"terraform_data","name":%q,"provider":"provider[\"terraform.io/builtin/terraform\"]",`+
			`"instances":[{"schema_version":0,"attributes":%s,"sensitive_attributes":%s}]}`, name, attrs, sa))
		names = append(names, "terraform_data."+name)
	}
	doc := `{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"l","outputs":{},"resources":[` + strings.Join(rs, ",") + `]}`
	all := []string{"terraform_data.a", "terraform_data.b", "terraform_data.c", "terraform_data.s", "terraform_data.copy"}
	s, err := ReadSnapshot([]byte(doc), all)
	if err != nil {
		t.Fatalf("ReadSnapshot: %v\n%s", err, doc)
	}
	return s
}

// tdAttrs is terraform_data's attributes as its state writes them: input
// and output as dynamic values ({"value","type"}).
func tdAttrs(id, input, output string) string {
	return fmt.Sprintf(`{"id":%q,"input":{"value":%q,"type":"string"},"output":{"value":%q,"type":"string"},"triggers_replace":null}`, id, input, output)
}

// planned makes a Planned of one resource change to terraform_data.a.
func planned(t *testing.T, actions tfjson.Actions, after, afterUnknown string) *Planned {
	t.Helper()
	rc := &tfjson.ResourceChange{Address: "terraform_data.a", Mode: tfjson.ManagedResourceMode, Type: "terraform_data", Name: "a",
		Change: &tfjson.Change{Actions: actions}}
	for _, f := range []struct {
		src string
		dst *any
	}{{after, &rc.Change.After}, {afterUnknown, &rc.Change.AfterUnknown}} {
		if f.src != "" {
			*f.dst = decode(json.RawMessage(f.src))
		}
	}
	return PlannedOf(&tfjson.Plan{ResourceChanges: []*tfjson.ResourceChange{rc}})
}

// plannedSensitive is planned with after_sensitive marks.
func plannedSensitive(t *testing.T, actions tfjson.Actions, after, afterSensitive string) *Planned {
	t.Helper()
	rc := &tfjson.ResourceChange{Address: "terraform_data.a", Mode: tfjson.ManagedResourceMode, Type: "terraform_data", Name: "a",
		Change: &tfjson.Change{Actions: actions, After: decode(json.RawMessage(after)), AfterSensitive: decode(json.RawMessage(afterSensitive))}}
	return PlannedOf(&tfjson.Plan{ResourceChanges: []*tfjson.ResourceChange{rc}})
}

// TestUndo: the rule of Planned.Undo (ADR 0046), case by case.
func TestUndo(t *testing.T) {
	t.Parallel()
	update := tfjson.Actions{tfjson.ActionUpdate}
	a0, a1 := tdAttrs("id-a", "a0", "a0"), tdAttrs("id-a", "a1", "a1")
	outUnknown := `{"output":true}`
	tests := map[string]struct {
		before, after, head string
		plan                *Planned
		want                *Undo
	}{
		"a change set back": {a0, a1, a1,
			planned(t, update, `{"id":"id-a","input":"a0","triggers_replace":null}`, outUnknown),
			&Undo{Kind: UndoChange, Attributes: []string{"input"}, Paths: []UndonePath{{Path: "input"}}}},
		"a new value": {a0, a1, a1,
			planned(t, update, `{"id":"id-a","input":"a2","triggers_replace":null}`, outUnknown), nil},
		"the version's attributes left alone": {a0, a1, a1,
			planned(t, update, `{"id":"id-a","input":"a1","output":"a1","triggers_replace":"t"}`, ""), nil},
		"only unknowns": {a0, a1, a1,
			planned(t, update, `{"id":"id-a","triggers_replace":null}`, `{"input":true,"output":true}`), nil},
		"a later version set it back already": {a0, a1, a0,
			planned(t, update, `{"id":"id-a","input":"a0","output":"a0","triggers_replace":"t"}`, ""), nil},
		"a creation destroyed": {"", a1, a1, planned(t, tfjson.Actions{tfjson.ActionDelete}, "", ""), &Undo{Kind: UndoCreation}},
		"a creation kept, changed": {"", a1, a1,
			planned(t, update, `{"id":"id-a","input":"a2","triggers_replace":null}`, outUnknown), nil},
		"a removal created again": {a0, "", "",
			planned(t, tfjson.Actions{tfjson.ActionCreate}, `{"input":"a0","triggers_replace":null}`, `{"id":true,"output":true}`),
			&Undo{Kind: UndoRemoval, Attributes: []string{"input"}, Paths: []UndonePath{{Path: "input"}}}},
		"a removal created otherwise": {a0, "", "",
			planned(t, tfjson.Actions{tfjson.ActionCreate}, `{"input":"a9","triggers_replace":null}`, `{"id":true,"output":true}`), nil},
		"a nested change set back": {
			`{"id":"x","tags":{"env":"dev","team":"t"}}`, `{"id":"x","tags":{"env":"prod","team":"t"}}`, `{"id":"x","tags":{"env":"prod","team":"u"}}`,
			planned(t, update, `{"id":"x","tags":{"env":"dev","team":"u"}}`, ""), &Undo{Kind: UndoChange, Attributes: []string{"tags"}, Paths: []UndonePath{{Path: "tags"}}}},
		// Defect 6 of the issue 12 review: the version changed input.a and
		// input.b, the plan sets back only a — "input back to its value
		// before the version" would be false.
		"part of a change set back": {
			`{"id":"x","input":{"a":1,"b":1}}`, `{"id":"x","input":{"a":2,"b":2}}`, `{"id":"x","input":{"a":2,"b":2}}`,
			planned(t, update, `{"id":"x","input":{"a":1,"b":2}}`, ""), &Undo{Kind: UndoChange, Attributes: []string{"input"}, Paths: []UndonePath{{Path: "input.a"}}}},
		"all of a nested change set back": {
			`{"id":"x","input":{"a":1,"b":1,"c":1}}`, `{"id":"x","input":{"a":2,"b":2,"c":1}}`, `{"id":"x","input":{"a":2,"b":2,"c":3}}`,
			planned(t, update, `{"id":"x","input":{"a":1,"b":1,"c":3}}`, ""), &Undo{Kind: UndoChange, Attributes: []string{"input"}, Paths: []UndonePath{{Path: "input"}}}},
		"part of a list and a quoted key": {
			`{"id":"x","rule":[{"port":1,"proto":"tcp"}],"tags":{"my env":"a","t":"a"}}`,
			`{"id":"x","rule":[{"port":2,"proto":"udp"}],"tags":{"my env":"b","t":"b"}}`,
			`{"id":"x","rule":[{"port":2,"proto":"udp"}],"tags":{"my env":"b","t":"b"}}`,
			planned(t, update, `{"id":"x","rule":[{"port":1,"proto":"udp"}],"tags":{"my env":"a","t":"b"}}`, ""),
			&Undo{Kind: UndoChange, Attributes: []string{"rule", "tags"}, Paths: []UndonePath{{Path: "rule[0].port"}, {Path: `tags["my env"]`}}}},
		"part of a sensitive value set back": {
			`{"id":"x","creds":{"user":"u1","pass":"p1"}}`, `{"id":"x","creds":{"user":"u2","pass":"p2"}}`, `{"id":"x","creds":{"user":"u2","pass":"p2"}}`,
			plannedSensitive(t, update, `{"id":"x","creds":{"user":"u1","pass":"p2"}}`, `{"creds":true}`),
			&Undo{Kind: UndoChange, Attributes: []string{"creds"}, Paths: []UndonePath{{Path: "creds", Part: true}}}},
		"all of a sensitive value set back": {
			`{"id":"x","creds":{"user":"u1","pass":"p1"}}`, `{"id":"x","creds":{"user":"u2","pass":"p2"}}`, `{"id":"x","creds":{"user":"u2","pass":"p2"}}`,
			plannedSensitive(t, update, `{"id":"x","creds":{"user":"u1","pass":"p1"}}`, `{"creds":true}`),
			&Undo{Kind: UndoChange, Attributes: []string{"creds"}, Paths: []UndonePath{{Path: "creds"}}}},
		"a plan value shaped like the state's dynamic encoding": {a0, a1, a1,
			planned(t, update, `{"id":"id-a","input":{"value":"a0","type":"string"},"triggers_replace":null}`, outUnknown), nil},
		"a replacement setting it back": {a0, a1, a1,
			planned(t, tfjson.Actions{tfjson.ActionDelete, tfjson.ActionCreate}, `{"input":"a0","triggers_replace":null}`, `{"id":true,"output":true}`),
			&Undo{Kind: UndoChange, Attributes: []string{"input"}, Paths: []UndonePath{{Path: "input"}}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			before, after, head := stateDoc(t, map[string]string{"a": tc.before}), stateDoc(t, map[string]string{"a": tc.after}),
				stateDoc(t, map[string]string{"a": tc.head})
			got, ok := tc.plan.Undo("terraform_data.a", before, after, head)
			switch {
			case tc.want == nil && ok:
				t.Fatalf("Undo = %+v, want none", got)
			case tc.want != nil && !ok:
				t.Fatalf("Undo = none, want %+v", *tc.want)
			case tc.want != nil:
				if d := cmp.Diff(*tc.want, got); d != "" {
					t.Fatalf("Undo (-want +got):\n%s", d)
				}
			}
		})
	}
}

// TestPlannedOf: only managed instances that are created, updated,
// deleted or replaced are planned; moves, reads, no-ops and deposed
// objects are not.
func TestPlannedOf(t *testing.T) {
	t.Parallel()
	rc := func(addr string, mode tfjson.ResourceMode, a tfjson.Actions, f func(*tfjson.ResourceChange)) *tfjson.ResourceChange {
		r := &tfjson.ResourceChange{Address: addr, Mode: mode, Type: "terraform_data", Name: "x", Change: &tfjson.Change{Actions: a}}
		if f != nil {
			f(r)
		}
		return r
	}
	p := PlannedOf(&tfjson.Plan{ResourceChanges: []*tfjson.ResourceChange{
		rc("terraform_data.u", tfjson.ManagedResourceMode, tfjson.Actions{tfjson.ActionUpdate}, nil),
		rc(`module.m["k"].terraform_data.x[0]`, tfjson.ManagedResourceMode, tfjson.Actions{tfjson.ActionCreate},
			func(r *tfjson.ResourceChange) { r.ModuleAddress = `module.m["k"]` }),
		rc("terraform_data.n", tfjson.ManagedResourceMode, tfjson.Actions{tfjson.ActionNoop}, nil),
		rc("data.terraform_data.d", tfjson.DataResourceMode, tfjson.Actions{tfjson.ActionRead}, nil),
		rc("terraform_data.m", tfjson.ManagedResourceMode, tfjson.Actions{tfjson.ActionUpdate},
			func(r *tfjson.ResourceChange) { r.PreviousAddress = "terraform_data.old" }),
		rc("terraform_data.dp", tfjson.ManagedResourceMode, tfjson.Actions{tfjson.ActionDelete},
			func(r *tfjson.ResourceChange) { r.DeposedKey = "abcd" }),
	}})
	if d := cmp.Diff([]string{`module.m["k"].terraform_data.x[0]`, "terraform_data.u"}, p.Instances()); d != "" {
		t.Errorf("Instances (-want +got):\n%s", d)
	}
	if got := p.Resource(`module.m["k"].terraform_data.x[0]`); got != "module.m.terraform_data.x" {
		t.Errorf("Resource = %q, want module.m.terraform_data.x", got)
	}
}

// TestCompare: what changed between two snapshots, masked as a plan's diff
// is: the input the state marks sensitive, its unmarked copy in output
// (terraform_data), and the same secret copied into another resource.
func TestCompare(t *testing.T) {
	t.Parallel()
	const one, two = "compare-secret-one", "compare-secret-two"
	x := stateDoc(t, map[string]string{"s": tdAttrs("id-s", one, one), "copy": tdAttrs("id-c", one, one), "b": tdAttrs("id-b", "b0", "b0")}, "s")
	y := stateDoc(t, map[string]string{"s": tdAttrs("id-s", two, two), "copy": tdAttrs("id-c", two, two), "c": tdAttrs("id-x", "c0", "c0"),
		"b": tdAttrs("id-b", "b0", "b0")}, "s")
	rs, _ := Compare(x, y, []string{"terraform_data.b", "terraform_data.c", "terraform_data.copy", "terraform_data.s"})
	got, err := json.Marshal(rs)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{one, two} {
		if strings.Contains(string(got), v) {
			t.Fatalf("Compare shows the secret %q: %s", v, got)
		}
	}
	var addrs []string
	for _, r := range rs {
		addrs = append(addrs, r.Address+" "+string(r.Action))
	}
	if d := cmp.Diff([]string{"terraform_data.c create", "terraform_data.copy update", "terraform_data.s update"}, addrs); d != "" {
		t.Fatalf("resources (-want +got):\n%s", d)
	}
	for _, r := range rs[1:] {
		for _, n := range r.Changes {
			if n.Action == Update && (n.Before == nil || !n.Before.Sensitive || n.After == nil || !n.After.Sensitive) {
				t.Errorf("%s.%s = %+v → %+v, want both sides masked", r.Address, *n.Key, n.Before, n.After)
			}
		}
	}
	if c := rs[0].Changes; len(c) != 3 || string(c[1].After.JSON) != `"c0"` {
		t.Errorf("terraform_data.c's created attributes = %+v, want id, input and output, input \"c0\" (unwrapped)", c)
	}
}

// TestCompareSecretOfAnotherResource: a secret the state marks in a
// resource not asked for still masks its copy in one asked for.
func TestCompareSecretOfAnotherResource(t *testing.T) {
	t.Parallel()
	const one, two = "other-secret-one", "other-secret-two"
	doc := func(v string) []byte {
		return []byte(`{"version":4,"serial":1,"lineage":"l","outputs":{},"resources":[` +
			`{"mode":"managed","type":"terraform_data","name":"s","provider":"p","instances":[{"attributes":` + tdAttrs("i1", v, v) +
			`,"sensitive_attributes":[[{"type":"get_attr","value":"input"}]]}]},` +
			`{"mode":"managed","type":"terraform_data","name":"copy","provider":"p","instances":[{"attributes":` + tdAttrs("i2", v, v) +
			`,"sensitive_attributes":[]}]}]}`)
	}
	only := []string{"terraform_data.copy"}
	x, err := ReadSnapshot(doc(one), only)
	if err != nil {
		t.Fatal(err)
	}
	y, err := ReadSnapshot(doc(two), only)
	if err != nil {
		t.Fatal(err)
	}
	rs, _ := Compare(x, y, only)
	got, _ := json.Marshal(rs)
	if len(rs) != 1 || strings.Contains(string(got), one) || strings.Contains(string(got), two) {
		t.Fatalf("Compare of the copy = %s; want one resource, the secret masked", got)
	}
}
