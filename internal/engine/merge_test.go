package engine

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// state is a Terraform state of terraform_data resources named by inputs'
// keys, each with that input (a test double of what Terraform writes).
func state(t *testing.T, serial int64, inputs map[string]string) *tfstate.State {
	t.Helper()
	names := make([]string, 0, len(inputs))
	for n := range inputs {
		names = append(names, n)
	}
	sort.Strings(names)
	var rs []string
	for _, n := range names {
		rs = append(rs, fmt.Sprintf(`{"mode":"managed","type":"terraform_data","name":%q,"provider":%q,"instances":[{"schema_version":0,`+
			`"attributes":{"id":"id-%s","input":{"value":%q,"type":"string"},"output":null,"triggers_replace":null},"sensitive_attributes":[]}]}`,
			n, tfstate.TerraformDataProvider, n, inputs[n]))
	}
	st, err := tfstate.Parse([]byte(fmt.Sprintf(`{"version":4,"terraform_version":"1.11.4","serial":%d,"lineage":"L","outputs":{},"resources":[%s]}`,
		serial, strings.Join(rs, ","))))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func marshal(t *testing.T, st *tfstate.State) []byte {
	t.Helper()
	b, err := st.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func kinds(ms []Marker) []MarkerKind {
	out := []MarkerKind{}
	for _, m := range ms {
		out = append(out, m.Kind)
	}
	return out
}

// TestMerge: the commit's Merge callback (mergeInput.merge) is a pure
// function of the plan, the base Terraform applied to, what it wrote, the
// spec and the head: the version it makes, its provenance and deviation,
// its markers and the run's end — checked here without a store or
// Terraform.
func TestMerge(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	a, b := Address("terraform_data.a"), Address("terraform_data.b")
	base := map[string]string{"a": "a0", "b": "b0"}
	tests := map[string]struct {
		result, head map[string]string
		spec         commitSpec
		wantHead     map[string]string // the merged version's inputs
		wantChanged  AddressSet
		wantExact    bool
		wantKept     AddressSet
		wantMarkers  []MarkerKind
		wantStatus   RunStatus
		wantCause    Cause
	}{
		"planned write onto a head another run moved": {
			result: map[string]string{"a": "a1", "b": "b0"}, head: map[string]string{"a": "a0", "b": "b9"},
			spec:     commitSpec{written: AddressSet{a}, status: StatusApplied, changed: AddressSet{a}},
			wantHead: map[string]string{"a": "a1", "b": "b9"}, wantChanged: AddressSet{a}, wantExact: true,
			wantMarkers: []MarkerKind{MarkerCommitted}, wantStatus: StatusApplied, wantCause: CauseApplied,
		},
		"unplanned change the head changed since: kept, a deviation": {
			result: map[string]string{"a": "a1", "b": "b1"}, head: map[string]string{"a": "a0", "b": "b9"},
			spec: commitSpec{written: AddressSet{a}, status: StatusApplied, changed: AddressSet{a, b},
				deviation: Deviation{Unplanned: AddressSet{b}}},
			wantHead: map[string]string{"a": "a1", "b": "b9"}, wantChanged: AddressSet{a}, wantKept: AddressSet{b},
			wantMarkers: []MarkerKind{MarkerDeviation, MarkerCommitted}, wantStatus: StatusApplied, wantCause: CauseApplied,
		},
		"Terraform failed part-way": {
			result: map[string]string{"a": "a1", "b": "b0"}, head: map[string]string{"a": "a0", "b": "b0"},
			spec: commitSpec{written: AddressSet{a, b}, status: StatusFailed, partial: true, changed: AddressSet{a},
				end: &End{Cause: CauseTerraformFailed, Terraform: &TerraformFailure{Command: "apply"}}, deviation: Deviation{Unchanged: AddressSet{b}}},
			wantHead: map[string]string{"a": "a1", "b": "b0"}, wantChanged: AddressSet{a},
			wantMarkers: []MarkerKind{MarkerDeviation, MarkerCommitted, MarkerFailed}, wantStatus: StatusFailed, wantCause: CauseTerraformFailed,
		},
		"lease lost: only what the head did not change is merged, the rest named lost": {
			result: map[string]string{"a": "a1", "b": "b0"}, head: map[string]string{"a": "a9", "b": "b0"},
			spec:     commitSpec{status: StatusApplied, changed: AddressSet{a}}.afterLeaseLost(true),
			wantHead: map[string]string{"a": "a9", "b": "b0"}, wantKept: AddressSet{a},
			wantMarkers: []MarkerKind{MarkerDeviation, MarkerCommitted, MarkerFailed}, wantStatus: StatusFailed, wantCause: CauseLeaseLost,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			spec := tc.spec
			spec.since = []Version{{Serial: 5, Changed: AddressSet{a, b}, Provenance: Provenance{Run: "01OTHER"}}}
			env := &Envelope{SourceSerial: 4, PlanDigest: "sha256:x"}
			m := mergeInput{
				run: Run{ID: "01APPLY", Kind: KindApply, Actor: "alice", Status: StatusApplying}, plan: "01PLAN",
				reviewed: env, env: env, base: state(t, 4, base), result: state(t, 5, tc.result),
				spec: spec, now: func() time.Time { return at },
			}
			res, err := m.merge(Version{Serial: 5}, marshal(t, state(t, 5, tc.head)))
			if err != nil {
				t.Fatalf("merge: %v", err)
			}
			if want := marshal(t, state(t, 6, tc.wantHead)); string(res.Snapshot) != string(want) {
				t.Errorf("merged snapshot\n%s\nwant\n%s", res.Snapshot, want)
			}
			if !reflect.DeepEqual(NewAddressSet(res.Changed...), NewAddressSet(tc.wantChanged...)) {
				t.Errorf("changed = %v, want %v", res.Changed, tc.wantChanged)
			}
			p := res.Provenance
			if p.Run != "01APPLY" || p.PlanRun != "01PLAN" || p.SourceSerial != 4 || p.CommittedSerial != 6 || p.Mode != CommitSnapshotMerge ||
				p.Exact != (tc.wantExact && len(tc.wantKept) == 0) || p.Partial != spec.partial {
				t.Errorf("provenance = %+v", p)
			}
			if len(tc.wantKept) > 0 && (p.Deviation == nil || !reflect.DeepEqual(p.Deviation.Kept, tc.wantKept)) {
				t.Errorf("deviation = %+v, want kept %v", p.Deviation, tc.wantKept)
			}
			if got := kinds(res.Markers); !reflect.DeepEqual(got, tc.wantMarkers) {
				t.Errorf("markers = %v, want %v", got, tc.wantMarkers)
			}
			r := m.run
			if err := res.UpdateRun(&r); err != nil {
				t.Fatalf("UpdateRun: %v", err)
			}
			if r.Status != tc.wantStatus || !r.End.Is(tc.wantCause) || r.CommittedSerial != 6 || r.FinishedAt == nil || !r.FinishedAt.Equal(at) {
				t.Errorf("run = %s, end %+v, committed %d, finished %v", r.Status, r.End, r.CommittedSerial, r.FinishedAt)
			}
			if tc.wantCause == CauseLeaseLost {
				if e := r.End; !e.TerraformDone || e.Serial != 6 || len(e.Lost) != 1 || e.Lost[0].Address != a || e.Lost[0].Serial != 5 || e.Lost[0].Run != "01OTHER" {
					t.Errorf("lease-lost end = %+v; want version 6, a lost to version 5 of 01OTHER", e)
				}
			}
			// A run commits once.
			if err := res.UpdateRun(&r); err == nil {
				t.Error("a second UpdateRun of a committed run succeeded")
			}
		})
	}
}

// TestMergeProvenanceOfReplan: a commit of a re-plan applied in place of
// its reviewed plan (replan.go) keeps both plans in the provenance — the
// reviewed plan's run, digest and serial, and the re-plan's, with the head
// it was made against — and says neither when the reviewed plan itself was
// applied.
func TestMergeProvenanceOfReplan(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 7, 10, 12, 0, 0, 0, time.UTC)
	base := map[string]string{"a": "a0", "b": "b1"}
	reviewed := &Envelope{SourceSerial: 3, PlanDigest: "sha256:reviewed"}
	replan := &Envelope{SourceSerial: 5, PlanDigest: "sha256:replan"}
	for name, tc := range map[string]struct {
		applied string
		env     *Envelope
		want    Provenance
	}{
		"the re-plan applied": {applied: "01REPLAN", env: replan, want: Provenance{PlanRun: "01PLAN", SourceSerial: 3, PlanDigest: "sha256:reviewed",
			AppliedPlanRun: "01REPLAN", AppliedPlanDigest: "sha256:replan", AppliedSourceSerial: 5}},
		"the reviewed plan applied": {env: reviewed, want: Provenance{PlanRun: "01PLAN", SourceSerial: 3, PlanDigest: "sha256:reviewed"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := mergeInput{
				run: Run{ID: "01APPLY", Kind: KindApply, Status: StatusApplying}, plan: "01PLAN", reviewed: reviewed, applied: tc.applied, env: tc.env,
				base: state(t, 5, base), result: state(t, 6, map[string]string{"a": "a1", "b": "b1"}),
				spec: commitSpec{status: StatusApplied, written: AddressSet{"terraform_data.a"}, changed: AddressSet{"terraform_data.a"}},
				now:  func() time.Time { return at },
			}
			res, err := m.merge(Version{Serial: 5}, marshal(t, state(t, 5, base)))
			if err != nil {
				t.Fatalf("merge: %v", err)
			}
			p := res.Provenance
			got := Provenance{PlanRun: p.PlanRun, SourceSerial: p.SourceSerial, PlanDigest: p.PlanDigest,
				AppliedPlanRun: p.AppliedPlanRun, AppliedPlanDigest: p.AppliedPlanDigest, AppliedSourceSerial: p.AppliedSourceSerial}
			if !reflect.DeepEqual(got, tc.want) || !p.Exact {
				t.Errorf("provenance = %+v, want %+v, exact", p, tc.want)
			}
		})
	}
}
