package tfstate_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// baseDoc is the snapshot every case plans against: root resources (one
// with for_each instances), a data source, one resource in two module
// instances with count instances, a nested module, two outputs.
func baseDoc() doc {
	return doc{
		lineage: "lin-1",
		serial:  10,
		outputs: map[string]string{"a": "a1", "b": "b1"},
		entries: []entry{
			td("", "a", "a1"),
			td("", "b", "b1").withDeps("terraform_data.a"),
			tdKeys("", "c", `"x"`, "c-x", `"y"`, "c-y"),
			data("", "net", "n1"),
			tdKeys(`module.app["eu"]`, "m", "0", "eu-0", "1", "eu-1"),
			tdKeys(`module.app["us"]`, "m", "0", "us-0", "1", "us-1"),
			td(`module.one.module.db`, "n", "one"),
		},
	}
}

func TestChanged(t *testing.T) {
	t.Parallel()
	base := baseDoc()
	tests := map[string]struct {
		result doc
		want   []string
	}{
		"nothing":                  {base, nil},
		"create":                   {base.with(td("", "e", "e1")), []string{"terraform_data.e"}},
		"destroy":                  {base.without("|managed.terraform_data.a"), []string{"terraform_data.a"}},
		"one for_each instance":    {base.with(tdKeys("", "c", `"x"`, "c-x", `"y"`, "c-y2")), []string{"terraform_data.c"}},
		"for_each instance added":  {base.with(tdKeys("", "c", `"x"`, "c-x", `"y"`, "c-y", `"z"`, "c-z")), []string{"terraform_data.c"}},
		"count instance in module": {base.with(tdKeys(`module.app["us"]`, "m", "0", "us-0", "1", "us-1b")), []string{"module.app.terraform_data.m"}},
		"module instance removed":  {base.without(`module.app["us"]|managed.terraform_data.m`), []string{"module.app.terraform_data.m"}},
		"module instance added":    {base.with(tdKeys(`module.app["ap"]`, "m", "0", "ap-0")), []string{"module.app.terraform_data.m"}},
		"nested module":            {base.with(td(`module.one.module.db`, "n", "two")), []string{"module.one.module.db.terraform_data.n"}},
		"data source refreshed: a read is never a change": {base.with(data("", "net", "n2")), nil},
		"dependencies rewritten":                          {base.with(td("", "b", "b1").withDeps("terraform_data.a2")), []string{"terraform_data.b"}},
		"move":                                            {base.without("|managed.terraform_data.a").with(td("", "a2", "a1")), []string{"terraform_data.a", "terraform_data.a2"}},
		"output changed":                                  {base.withOutputs("b", "b2"), []string{"output.b"}},
		"output added and removed":                        {base.withOutputs("a", "", "z", "z1"), []string{"output.a", "output.z"}},
		"output made sensitive":                           {func() doc { d := base; d.sensitive = []string{"a"}; return d }(), []string{"output.a"}},
		"serial and version only":                         {func() doc { d := base; d.serial = 99; d.version = "1.12.0"; return d }(), nil},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := tfstate.Changed(base.state(t), tt.result.state(t))
			if !slices.Equal(got, tt.want) {
				t.Errorf("Changed = %q, want %q", got, tt.want)
			}
			// Symmetric.
			if back := tfstate.Changed(tt.result.state(t), base.state(t)); !slices.Equal(back, tt.want) {
				t.Errorf("Changed(result, base) = %q, want %q", back, tt.want)
			}
		})
	}
}

// TestChangedIsSemantic: Terraform re-indents and other writers reorder
// keys; neither is a change. A real value change inside is.
func TestChangedIsSemantic(t *testing.T) {
	t.Parallel()
	// A state Terraform wrote, in Terraform's key order and indentation.
	b, err := os.ReadFile("../terraform/testdata/terraform-json/110_sensitive_values/terraform.tfstate")
	if err != nil {
		t.Fatal(err)
	}
	base, err := tfstate.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	// Re-encode with sorted keys and no indentation: raw entries' bytes
	// differ from base's, the meaning does not.
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	flat, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	other, err := tfstate.Parse(flat)
	if err != nil {
		t.Fatal(err)
	}
	if string(other.Resources[0].Raw) == string(base.Resources[0].Raw) {
		t.Fatal("test setup: expected reordered keys in the raw entry")
	}
	if got := tfstate.Changed(base, other); len(got) != 0 {
		t.Errorf("Changed(reordered) = %q, want none", got)
	}
	// A real change inside one count instance is a change of the resource.
	edited := strings.Replace(string(flat), `"index_key":2,"private":"bnVsbA==","schema_version":0,"sensitive_attributes":[]`,
		`"index_key":2,"private":"bnVsbA==","schema_version":1,"sensitive_attributes":[]`, 1)
	if edited == string(flat) {
		t.Fatal("test setup: edit did not apply")
	}
	changed, err := tfstate.Parse([]byte(edited))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tfstate.Changed(base, changed), []string{"null_resource.baz"}; !slices.Equal(got, want) {
		t.Errorf("Changed = %q, want %q", got, want)
	}
}

func TestChangedNil(t *testing.T) {
	t.Parallel()
	s := baseDoc().state(t)
	// Every address but the data source's: a read is never a change.
	want := slices.DeleteFunc(s.Addresses(), func(a string) bool { return strings.HasPrefix(a, "data.") })
	if got := tfstate.Changed(nil, s); !slices.Equal(got, want) {
		t.Errorf("Changed(nil, s) = %q, want every managed address and output %q", got, want)
	}
	if got := tfstate.Changed(nil, nil); len(got) != 0 {
		t.Errorf("Changed(nil, nil) = %q", got)
	}
}

func TestMerge(t *testing.T) {
	t.Parallel()
	base := baseDoc()
	// otherRun is what a concurrent run committed after this run's plan: it
	// changed terraform_data.c, module.one.module.db.terraform_data.n and
	// output a. The head is base + otherRun.
	head := base.with(
		tdKeys("", "c", `"x"`, "c-x-head", `"y"`, "c-y"),
		td(`module.one.module.db`, "n", "one-head"),
	).withOutputs("a", "a-head")
	head.serial = 11

	tests := map[string]struct {
		head, result doc
		written      []string
		keep         []string
		want         doc // the merged state (serial 12 is set below)
		report       tfstate.MergeReport
	}{
		"create": {
			head: head, result: base.with(td("", "e", "e1")),
			written: []string{"terraform_data.e"},
			want:    head.with(td("", "e", "e1")),
			report:  tfstate.MergeReport{Merged: []string{"terraform_data.e"}},
		},
		"update one for_each instance of a written resource": {
			head: base, result: base.with(tdKeys("", "c", `"x"`, "c-x", `"y"`, "c-y2")),
			written: []string{"terraform_data.c"},
			want:    base.with(tdKeys("", "c", `"x"`, "c-x", `"y"`, "c-y2")),
			report:  tfstate.MergeReport{Merged: []string{"terraform_data.c"}},
		},
		"destroy": {
			head: head, result: base.without("|managed.terraform_data.a"),
			written: []string{"terraform_data.a"},
			want:    head.without("|managed.terraform_data.a"),
			report:  tfstate.MergeReport{Merged: []string{"terraform_data.a"}},
		},
		"move drops the old address": {
			head: head, result: base.without("|managed.terraform_data.a").with(td("", "a2", "a1"), td("", "b", "b1").withDeps("terraform_data.a2")),
			written: []string{"terraform_data.a", "terraform_data.a2"},
			// b's rewritten dependencies are unplanned; the head has not
			// touched b, so the result's b is taken.
			want: head.without("|managed.terraform_data.a").with(td("", "a2", "a1"), td("", "b", "b1").withDeps("terraform_data.a2")),
			report: tfstate.MergeReport{
				Merged:    []string{"terraform_data.a", "terraform_data.a2", "terraform_data.b"},
				Unplanned: []string{"terraform_data.b"},
			},
		},
		"all module instances replaced": {
			// The run destroyed module.app["us"] and changed module.app["eu"]:
			// one address, two entries in the head, one in the result.
			head: head, result: base.without(`module.app["us"]|managed.terraform_data.m`).with(tdKeys(`module.app["eu"]`, "m", "0", "eu-0b")),
			written: []string{"module.app.terraform_data.m"},
			want:    head.without(`module.app["us"]|managed.terraform_data.m`).with(tdKeys(`module.app["eu"]`, "m", "0", "eu-0b")),
			report:  tfstate.MergeReport{Merged: []string{"module.app.terraform_data.m"}},
		},
		"module instance created": {
			head: head, result: base.with(tdKeys(`module.app["ap"]`, "m", "0", "ap-0")),
			written: []string{"module.app.terraform_data.m"},
			want:    head.with(tdKeys(`module.app["ap"]`, "m", "0", "ap-0")),
			report:  tfstate.MergeReport{Merged: []string{"module.app.terraform_data.m"}},
		},
		"outputs changed and removed": {
			head: head, result: base.withOutputs("b", "b2", "z", "z1"),
			written: []string{"output.b", "output.z"},
			want:    head.withOutputs("b", "b2", "z", "z1"),
			report:  tfstate.MergeReport{Merged: []string{"output.b", "output.z"}},
		},
		"written output gone from result": {
			head: base, result: base.withOutputs("b", ""),
			written: []string{"output.b"},
			want:    base.withOutputs("b", ""),
			report:  tfstate.MergeReport{Merged: []string{"output.b"}},
		},
		"unplanned refresh merged where the head did not move": {
			head: head, result: base.with(td("", "e", "e1"), data("", "net", "n2")),
			written: []string{"terraform_data.e"},
			want:    head.with(td("", "e", "e1"), data("", "net", "n2")),
			report: tfstate.MergeReport{
				Merged: []string{"data.terraform_remote_state.net", "terraform_data.e"},
			},
		},
		"unplanned change kept when another run holds it (keep)": {
			// This run's lease lapsed: another run reserved the data source,
			// so the refresh is not merged even though the head did not move.
			head: head, result: base.with(td("", "e", "e1"), data("", "net", "n2")),
			written: []string{"terraform_data.e"},
			keep:    []string{"data.terraform_remote_state.net"},
			want:    head.with(td("", "e", "e1")),
			report:  tfstate.MergeReport{Merged: []string{"terraform_data.e"}},
		},
		"unplanned changes kept where the head moved": {
			// A failed partial apply wrote c, the nested module and output a,
			// all of which the other run changed since the plan: head wins.
			head: head,
			result: base.with(
				td("", "e", "e1"),
				tdKeys("", "c", `"x"`, "c-x-partial", `"y"`, "c-y"),
				td(`module.one.module.db`, "n", "one-partial"),
			).withOutputs("a", "a-partial"),
			written: []string{"terraform_data.e"},
			want:    head.with(td("", "e", "e1")),
			report: tfstate.MergeReport{
				Merged:    []string{"terraform_data.e"},
				Kept:      []string{"module.one.module.db.terraform_data.n", "output.a", "terraform_data.c"},
				Unplanned: []string{"module.one.module.db.terraform_data.n", "output.a", "terraform_data.c"},
			},
		},
		"written address the head changed since the plan is overwritten and reported": {
			head: head, result: base.with(tdKeys("", "c", `"x"`, "c-x-run", `"y"`, "c-y")),
			written: []string{"terraform_data.c"},
			want:    head.with(tdKeys("", "c", `"x"`, "c-x-run", `"y"`, "c-y")),
			report: tfstate.MergeReport{
				Merged:      []string{"terraform_data.c"},
				Overwritten: []string{"terraform_data.c"},
			},
		},
		"unplanned change the head already holds is merged, not kept": {
			// Another run refreshed the data source to the same value first.
			head: head.with(data("", "net", "n2")), result: base.with(td("", "e", "e1"), data("", "net", "n2")),
			written: []string{"terraform_data.e"},
			want:    head.with(td("", "e", "e1"), data("", "net", "n2")),
			report:  tfstate.MergeReport{Merged: []string{"terraform_data.e"}},
		},
		"written address the head already changed the same way is not overwritten": {
			head: head, result: base.with(tdKeys("", "c", `"x"`, "c-x-head", `"y"`, "c-y")),
			written: []string{"terraform_data.c"},
			want:    head,
			report:  tfstate.MergeReport{Merged: []string{"terraform_data.c"}},
		},
		"written but unchanged by the apply": {
			head: head, result: base,
			written: []string{"terraform_data.a"},
			want:    head,
			report:  tfstate.MergeReport{Merged: []string{"terraform_data.a"}},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h, b, r := tt.head.state(t), base.state(t), tt.result.state(t)
			hBytes, _ := h.Marshal()
			got, rep, err := tfstate.MergeKeeping(h, b, r, tt.written, tt.keep, h.Serial+1)
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			want := tt.want
			want.serial = h.Serial + 1
			sameState(t, "merged", got, want.state(t))
			if !equalReports(rep, tt.report) {
				t.Errorf("report = %+v\nwant     %+v", rep, tt.report)
			}
			if want := tfstate.Changed(h, got); !slices.Equal(rep.Changed, want) {
				t.Errorf("report.Changed = %q, want Changed(head, merged) = %q", rep.Changed, want)
			}
			if after, _ := h.Marshal(); string(after) != string(hBytes) {
				t.Error("Merge modified the head")
			}
			// Terraform's order, and a document Parse accepts.
			out, err := got.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			again, err := tfstate.Parse(out)
			if err != nil {
				t.Fatalf("Parse(merged): %v", err)
			}
			if !slices.IsSortedFunc(again.Resources, func(a, b tfstate.Resource) int {
				return strings.Compare(a.Module+"\x00"+a.Mode+"\x00"+a.Type+"\x00"+a.Name, b.Module+"\x00"+b.Mode+"\x00"+b.Type+"\x00"+b.Name)
			}) {
				t.Error("merged resources are not in Terraform's order")
			}
		})
	}
}

func equalReports(a, b tfstate.MergeReport) bool {
	return slices.Equal(a.Merged, b.Merged) && slices.Equal(a.Kept, b.Kept) &&
		slices.Equal(a.Unplanned, b.Unplanned) && slices.Equal(a.Overwritten, b.Overwritten)
}

// TestMergeKeepsEntriesVerbatim: the result's entries are copied as written
// (private, sensitive_attributes, dependencies), the head's untouched ones
// byte for byte; serial, lineage, version and check_results follow the rule.
func TestMergeKeepsEntriesVerbatim(t *testing.T) {
	t.Parallel()
	base := baseDoc()
	head := base
	head.version = "1.5.7"
	head.checkRes = `[{"object_kind":"resource","config_addr":"terraform_data.a","status":"pass","objects":null}]`
	result := base.with(td("", "e", "e1").withDeps("terraform_data.a"))
	result.version = "1.11.4"
	result.serial = 27 // Terraform raises it by several per apply: never reused

	h, r := head.state(t), result.state(t)
	got, _, err := tfstate.Merge(h, base.state(t), r, []string{"terraform_data.e"}, 11)
	if err != nil {
		t.Fatal(err)
	}
	if got.Serial != 11 || got.Lineage != "lin-1" || got.TerraformVersion != "1.11.4" || got.CheckResults != nil {
		t.Errorf("serial/lineage/version/check_results = %d/%s/%s/%s, want 11/lin-1/1.11.4/null",
			got.Serial, got.Lineage, got.TerraformVersion, got.CheckResults)
	}
	for _, res := range got.Resources {
		var src *tfstate.State = h
		if res.Name == "e" {
			src = r
		}
		i := slices.IndexFunc(src.Resources, func(x tfstate.Resource) bool { return x.Address() == res.Address() && x.Module == res.Module })
		if string(src.Resources[i].Raw) != string(res.Raw) {
			t.Errorf("%s (%s): raw entry not copied verbatim", res.Address(), res.Module)
		}
	}
	out, err := got.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "merge-verbatim.tfstate", out)

	// The older version wins nowhere: head newer than result.
	got, _, err = tfstate.Merge(result.state(t), base.state(t), head.state(t), nil, 12)
	if err != nil {
		t.Fatal(err)
	}
	if got.TerraformVersion != "1.11.4" {
		t.Errorf("terraform_version = %s, want 1.11.4 (the newer)", got.TerraformVersion)
	}
}

func TestMergeErrors(t *testing.T) {
	t.Parallel()
	base := baseDoc()
	other := base
	other.lineage = "lin-2"
	tests := map[string]struct {
		head, base, result doc
		written            []string
		want               string
		is                 error
	}{
		"head lineage":     {other, base, base, nil, `lineage mismatch: head "lin-2", plan base "lin-1", apply result "lin-1"`, tfstate.ErrLineageMismatch},
		"result lineage":   {base, base, other, nil, `apply result "lin-2"`, tfstate.ErrLineageMismatch},
		"base lineage":     {base, other, base, nil, `plan base "lin-2"`, tfstate.ErrLineageMismatch},
		"module prefix":    {base, base, base, []string{"terraform_data.a", "module.app.*"}, `written address "module.app.*" is a prefix`, nil},
		"whole state":      {base, base, base, []string{"*"}, `written address "*" is a prefix`, nil},
		"module instance":  {base, base, base, []string{`module.app["eu"]`}, `names a module instance`, nil},
		"bad instance key": {base, base, base, []string{`terraform_data.c[-1]`}, `Index value required`, nil},
		"not canonical":    {base, base, base, []string{`terraform_data.c[ "x" ]`}, `not as Terraform writes it`, nil},
		"empty address":    {base, base, base, []string{""}, `empty written address`, nil},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, _, err := tfstate.Merge(tt.head.state(t), tt.base.state(t), tt.result.state(t), tt.written, 11)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "merging run state into head: ") {
				t.Fatalf("Merge error = %v, want it to contain %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v does not wrap %v", err, tt.is)
			}
		})
	}
	if _, _, err := tfstate.Merge(nil, base.state(t), base.state(t), nil, 1); err == nil {
		t.Error("Merge(nil head) succeeded")
	}
}

// TestMergeTwoRuns is the ADR's central case on hand-built states: two runs
// plan against one base, write disjoint addresses, commit one after the
// other; the final state holds both runs' changes and nothing else.
func TestMergeTwoRuns(t *testing.T) {
	t.Parallel()
	base := baseDoc()
	runA := base.with(td("", "e", "e1"), tdKeys(`module.app["eu"]`, "m", "0", "eu-0a", "1", "eu-1"))
	runB := base.without("|managed.terraform_data.c").withOutputs("b", "b2")
	both := base.with(td("", "e", "e1"), tdKeys(`module.app["eu"]`, "m", "0", "eu-0a", "1", "eu-1")).
		without("|managed.terraform_data.c").withOutputs("b", "b2")
	both.serial = 12

	b := base.state(t)
	h1, repA, err := tfstate.Merge(b, b, runA.state(t), []string{"terraform_data.e", "module.app.terraform_data.m"}, 11)
	if err != nil {
		t.Fatal(err)
	}
	h2, repB, err := tfstate.Merge(h1, b, runB.state(t), []string{"terraform_data.c", "output.b"}, 12)
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, "after both runs", h2, both.state(t))
	if len(repA.Kept)+len(repB.Kept)+len(repA.Overwritten)+len(repB.Overwritten) != 0 {
		t.Errorf("reports = %+v, %+v; want nothing kept or overwritten", repA, repB)
	}
	out, err := h2.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "merge-two-runs.tfstate", out)
	golden(t, "merge-two-runs.report.txt", []byte(fmt.Sprintf("run A: %+v\nrun B: %+v\n", repA, repB)))
}
