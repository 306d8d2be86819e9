package tfstate_test

import (
	"reflect"
	"testing"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// TestMergeInstances is ADR 0065's merge: two runs each write one instance
// of one for_each resource from the same base; the second merge keeps the
// first run's instance at the head, and each report names instances.
func TestMergeInstances(t *testing.T) {
	t.Parallel()
	base := baseDoc()
	runA := base.with(tdKeys("", "c", `"x"`, "c-x2", `"y"`, "c-y"))
	runB := base.with(tdKeys("", "c", `"x"`, "c-x", `"y"`, "c-y2"))
	both := base.with(tdKeys("", "c", `"x"`, "c-x2", `"y"`, "c-y2"))
	both.serial = 12
	b := base.state(t)
	h1, repA, err := tfstate.Merge(b, b, runA.state(t), []string{`terraform_data.c["x"]`}, 11)
	if err != nil {
		t.Fatal(err)
	}
	h2, repB, err := tfstate.Merge(h1, b, runB.state(t), []string{`terraform_data.c["y"]`}, 12)
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, "after both runs", h2, both.state(t))
	if want := []string{`terraform_data.c["y"]`}; !reflect.DeepEqual(repB.Changed, want) || !reflect.DeepEqual(repB.Merged, want) {
		t.Errorf("run B: changed %q, merged %q; want %q", repB.Changed, repB.Merged, want)
	}
	if len(repB.Overwritten)+len(repB.Kept)+len(repB.Unplanned) != 0 {
		t.Errorf("run B report = %+v; want nothing overwritten, kept or unplanned (head's [\"x\"] is not B's)", repB)
	}
	if want := []string{`terraform_data.c["x"]`}; !reflect.DeepEqual(repA.Changed, want) {
		t.Errorf("run A changed %q; want %q", repA.Changed, want)
	}

	// The same second run, written at resource level (a run planned
	// before ADR 0065): the whole entry is B's, A's ["x"] is overwritten.
	h3, repOld, err := tfstate.Merge(h1, b, runB.state(t), []string{"terraform_data.c"}, 12)
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, "resource-level write", h3, func() doc { d := runB; d.serial = 12; return d }().state(t))
	if want := []string{"terraform_data.c"}; !reflect.DeepEqual(repOld.Overwritten, want) {
		t.Errorf("resource-level write: overwritten %q; want %q", repOld.Overwritten, want)
	}
}

// TestMergeInstanceCases: adding and destroying instances, unplanned
// changes of other instances (taken where the head did not move them, kept
// where it did, kept when another run holds them), module instances.
func TestMergeInstanceCases(t *testing.T) {
	t.Parallel()
	base := baseDoc()
	tests := map[string]struct {
		head, result doc
		written      []string
		keep         []string
		want         doc
		rep          tfstate.MergeReport
	}{
		"add a key": {
			head:    base.with(tdKeys("", "c", `"x"`, "c-x2", `"y"`, "c-y")),
			result:  base.with(tdKeys("", "c", `"x"`, "c-x", `"y"`, "c-y", `"z"`, "c-z")),
			written: []string{`terraform_data.c["z"]`},
			want:    base.with(tdKeys("", "c", `"x"`, "c-x2", `"y"`, "c-y", `"z"`, "c-z")),
			rep:     tfstate.MergeReport{Merged: []string{`terraform_data.c["z"]`}, Changed: []string{`terraform_data.c["z"]`}},
		},
		"destroy a key": {
			head:    base.with(tdKeys("", "c", `"x"`, "c-x2", `"y"`, "c-y")),
			result:  base.with(tdKeys("", "c", `"x"`, "c-x")),
			written: []string{`terraform_data.c["y"]`},
			want:    base.with(tdKeys("", "c", `"x"`, "c-x2")),
			rep:     tfstate.MergeReport{Merged: []string{`terraform_data.c["y"]`}, Changed: []string{`terraform_data.c["y"]`}},
		},
		"destroy the last key drops the entry": {
			head:    base.with(tdKeys("", "c", `"y"`, "c-y")),
			result:  base.with(tdKeys("", "c", `"x"`, "c-x")),
			written: []string{`terraform_data.c["y"]`},
			want:    base.without("|managed.terraform_data.c"),
			rep:     tfstate.MergeReport{Merged: []string{`terraform_data.c["y"]`}, Changed: []string{`terraform_data.c["y"]`}},
		},
		"unplanned change of an unmoved instance is taken": {
			head:    base,
			result:  base.with(tdKeys("", "c", `"x"`, "c-x2", `"y"`, "c-y-refreshed")),
			written: []string{`terraform_data.c["x"]`},
			want:    base.with(tdKeys("", "c", `"x"`, "c-x2", `"y"`, "c-y-refreshed")),
			rep: tfstate.MergeReport{Merged: []string{`terraform_data.c["x"]`, `terraform_data.c["y"]`},
				Unplanned: []string{`terraform_data.c["y"]`}, Changed: []string{`terraform_data.c["x"]`, `terraform_data.c["y"]`}},
		},
		"unplanned change of a moved instance is kept": {
			head:    base.with(tdKeys("", "c", `"x"`, "c-x", `"y"`, "c-y-head")),
			result:  base.with(tdKeys("", "c", `"x"`, "c-x2", `"y"`, "c-y-refreshed")),
			written: []string{`terraform_data.c["x"]`},
			want:    base.with(tdKeys("", "c", `"x"`, "c-x2", `"y"`, "c-y-head")),
			rep: tfstate.MergeReport{Merged: []string{`terraform_data.c["x"]`}, Kept: []string{`terraform_data.c["y"]`},
				Unplanned: []string{`terraform_data.c["y"]`}, Changed: []string{`terraform_data.c["x"]`}},
		},
		"unplanned change of an instance another run holds is kept": {
			head:    base,
			result:  base.with(tdKeys("", "c", `"x"`, "c-x2", `"y"`, "c-y-refreshed")),
			written: []string{`terraform_data.c["x"]`},
			keep:    []string{`terraform_data.c["y"]`},
			want:    base.with(tdKeys("", "c", `"x"`, "c-x2", `"y"`, "c-y")),
			rep: tfstate.MergeReport{Merged: []string{`terraform_data.c["x"]`}, Kept: []string{`terraform_data.c["y"]`},
				Unplanned: []string{`terraform_data.c["y"]`}, Changed: []string{`terraform_data.c["x"]`}},
		},
		"overwritten instance": {
			head:    base.with(tdKeys("", "c", `"x"`, "c-x-head", `"y"`, "c-y")),
			result:  base.with(tdKeys("", "c", `"x"`, "c-x2", `"y"`, "c-y")),
			written: []string{`terraform_data.c["x"]`},
			want:    base.with(tdKeys("", "c", `"x"`, "c-x2", `"y"`, "c-y")),
			rep: tfstate.MergeReport{Merged: []string{`terraform_data.c["x"]`}, Overwritten: []string{`terraform_data.c["x"]`},
				Changed: []string{`terraform_data.c["x"]`}},
		},
		"one module instance": {
			head:    base.with(tdKeys(`module.app["us"]`, "m", "0", "us-0-head", "1", "us-1")),
			result:  base.with(tdKeys(`module.app["eu"]`, "m", "0", "eu-0", "1", "eu-1b")),
			written: []string{`module.app["eu"].terraform_data.m[1]`},
			want: base.with(tdKeys(`module.app["us"]`, "m", "0", "us-0-head", "1", "us-1"),
				tdKeys(`module.app["eu"]`, "m", "0", "eu-0", "1", "eu-1b")),
			rep: tfstate.MergeReport{Merged: []string{`module.app["eu"].terraform_data.m[1]`}, Changed: []string{`module.app["eu"].terraform_data.m[1]`}},
		},
		"a module instance whole": {
			head:    base.with(tdKeys(`module.app["us"]`, "m", "0", "us-0-head", "1", "us-1")),
			result:  base.with(tdKeys(`module.app["eu"]`, "m", "0", "eu-0b", "1", "eu-1b")),
			written: []string{`module.app["eu"].terraform_data.m`},
			want: base.with(tdKeys(`module.app["us"]`, "m", "0", "us-0-head", "1", "us-1"),
				tdKeys(`module.app["eu"]`, "m", "0", "eu-0b", "1", "eu-1b")),
			rep: tfstate.MergeReport{Merged: []string{`module.app["eu"].terraform_data.m[0]`, `module.app["eu"].terraform_data.m[1]`},
				Changed: []string{`module.app["eu"].terraform_data.m[0]`, `module.app["eu"].terraform_data.m[1]`}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, rep, err := tfstate.MergeKeeping(tc.head.state(t), base.state(t), tc.result.state(t), tc.written, tc.keep, 11)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			want.serial = 11
			sameState(t, name, got, want.state(t))
			if !sameReport(rep, tc.rep) {
				t.Errorf("report = %+v\nwant     %+v", rep, tc.rep)
			}
		})
	}
}

func TestChangedInstances(t *testing.T) {
	t.Parallel()
	base := baseDoc()
	result := base.with(tdKeys("", "c", `"x"`, "c-x2", `"y"`, "c-y"), td("", "a", "a2"),
		tdKeys(`module.app["eu"]`, "m", "0", "eu-0b", "1", "eu-1"))
	got, err := tfstate.ChangedInstances(base.state(t), result.state(t),
		[]string{`terraform_data.c["x"]`, "terraform_data.a", "module.app.terraform_data.m"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"module.app.terraform_data.m", "terraform_data.a", `terraform_data.c["x"]`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ChangedInstances = %q; want %q (instances only where written names them)", got, want)
	}
	if _, err := tfstate.ChangedInstances(base.state(t), result.state(t), []string{`terraform_data.c[`}); err == nil {
		t.Error("ChangedInstances accepted a malformed written address")
	}
}

// sameReport compares reports with nil and empty lists alike.
func sameReport(a, b tfstate.MergeReport) bool {
	eq := func(x, y []string) bool { return len(x) == 0 && len(y) == 0 || reflect.DeepEqual(x, y) }
	return eq(a.Merged, b.Merged) && eq(a.Kept, b.Kept) && eq(a.Unplanned, b.Unplanned) &&
		eq(a.Overwritten, b.Overwritten) && eq(a.Changed, b.Changed) && eq(a.Reencoded, b.Reencoded)
}
