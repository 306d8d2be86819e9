package engine_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

// forEachConfig is a root module with one for_each terraform_data resource
// "r" over vals (key → value). A created instance (triggers_replace = its
// value: every change replaces it) waits for the file gate before it
// completes; "" means no gate.
func forEachConfig(vals map[string]string, gate string) string {
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("locals {\n  vals = {\n")
	for _, k := range keys {
		fmt.Fprintf(&b, "    %s = %q\n", k, vals[k])
	}
	b.WriteString("  }\n}\n\nresource \"terraform_data\" \"r\" {\n  for_each = local.vals\n  input = each.value\n  triggers_replace = each.value\n")
	if gate != "" {
		fmt.Fprintf(&b, "  provisioner \"local-exec\" {\n    command = \"for i in $(seq 600); do [ -e '%s' ] && exit 0; sleep 0.1; done; exit 1\"\n  }\n", gate)
	}
	b.WriteString("}\n")
	return b.String()
}

func (h *harness) planHCL(src, who string) engine.Run {
	h.t.Helper()
	dir := filepath.Join(h.dir, fmt.Sprintf("config-%02d", h.n.Add(1)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(src), 0o644); err != nil {
		h.t.Fatal(err)
	}
	out, err := h.eng.Plan(h.ctx, engine.PlanInput{State: testState, Dir: dir, Actor: who})
	if err != nil {
		h.t.Fatalf("Plan: %v", err)
	}
	return out.Run
}

// headInstances returns the input of every instance of terraform_data.r at
// the head, by for_each key.
func (h *harness) headInstances() map[string]string {
	h.t.Helper()
	doc, _, err := h.eng.Pull(h.ctx, testState, -1)
	if err != nil {
		h.t.Fatalf("Pull: %v", err)
	}
	var st struct {
		Resources []struct {
			Name      string `json:"name"`
			Instances []struct {
				Key        string `json:"index_key"`
				Attributes struct {
					Input struct {
						Value string `json:"value"`
					} `json:"input"`
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(doc, &st); err != nil {
		h.t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range st.Resources {
		for _, in := range r.Instances {
			if r.Name == "r" {
				out[in.Key] = in.Attributes.Input.Value
			}
		}
	}
	return out
}

func inst(keys ...string) engine.AddressSet {
	var as []engine.Address
	for _, k := range keys {
		as = append(as, engine.Address(`terraform_data.r["`+k+`"]`))
	}
	return engine.NewAddressSet(as...)
}

// TestInstancesApplyTogether is issue 16 §3 with real Terraform: PR 1
// changes terraform_data.r["a"], PR 2 changes ["b"] of the same for_each
// resource, planned at one head. Both hold their reservations at the same
// time (neither waits: Wait is 0, so a conflict would refuse at once), both
// commit, and the head has both changes — each version changed its own
// instance, the later apply's since-plan calls the other's version
// independent, and its allowed-because says disjoint write sets.
func TestInstancesApplyTogether(t *testing.T) {
	t.Parallel()
	h := setup(t)
	g0, open0 := h.gate()
	open0()
	h.apply(h.planHCL(forEachConfig(map[string]string{"a": "a0", "b": "b0"}, g0), "tester").ID)
	source := h.headSerial()

	g1, open1 := h.gate()
	g2, open2 := h.gate()
	p1 := h.planHCL(forEachConfig(map[string]string{"a": "a1", "b": "b0"}, g1), "alice")
	p2 := h.planHCL(forEachConfig(map[string]string{"a": "a0", "b": "b1"}, g2), "bob")
	if w := p1.Envelope.Footprint.Write; !sameSet(w, inst("a")) {
		t.Fatalf("PR 1's write set = %v; want terraform_data.r[\"a\"] only", w)
	}
	if w := p2.Envelope.Footprint.Write; !sameSet(w, inst("b")) {
		t.Fatalf("PR 2's write set = %v; want terraform_data.r[\"b\"] only", w)
	}

	type result struct {
		out *engine.ApplyOutcome
		err error
	}
	done := make(chan result, 2)
	for _, p := range []engine.Run{p1, p2} {
		go func() {
			out, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: p.ID, Actor: p.Actor})
			done <- result{out, err}
		}()
	}
	// Both gates are shut: both applies sit in Terraform holding their
	// reservations, at the same time.
	waitFor(t, 60*time.Second, "both applies to hold their reservations", func() bool {
		runs := map[string]bool{}
		for _, r := range h.reservations() {
			runs[r.Run] = true
		}
		return len(runs) == 2
	})
	open1()
	open2()
	var outs []*engine.ApplyOutcome
	for range 2 {
		r := <-done
		if r.err != nil {
			t.Fatalf("apply: %v", r.err)
		}
		outs = append(outs, r.out)
	}
	if got := h.headInstances(); got["a"] != "a1" || got["b"] != "b1" || len(got) != 2 {
		t.Fatalf("head instances = %v; want a=a1 and b=b1 (no lost update)", got)
	}
	if h.headSerial() != source+2 {
		t.Fatalf("head serial %d; want %d", h.headSerial(), source+2)
	}
	byPlan := map[string]engine.AddressSet{p1.ID: inst("a"), p2.ID: inst("b")}
	for _, v := range h.versions() {
		if v.Serial <= source {
			continue
		}
		if want := byPlan[v.Provenance.PlanRun]; !sameSet(v.Changed, want) || !v.Provenance.Exact {
			t.Errorf("version %d (plan %s): changed %v, exact %v (%+v); want %v, exact", v.Serial, v.Provenance.PlanRun, v.Changed, v.Provenance.Exact, v.Provenance.Deviation, want)
		}
	}
	for _, o := range outs {
		if _, ok := fact(h.run(o.Run.ID).AllowedBecause, engine.FactWaitedFor); ok {
			t.Errorf("apply %s waited: %+v", o.Run.ID, h.run(o.Run.ID).AllowedBecause)
		}
	}
	// The apply that committed second saw the other's version.
	later := outs[0]
	if later.Version.Serial < outs[1].Version.Serial {
		later = outs[1]
	}
	sp, err := h.eng.SincePlan(h.ctx, later.Run.PlanRun)
	if err != nil {
		t.Fatal(err)
	}
	var others []engine.SincePlanEntry
	for _, e := range sp.Entries {
		if !e.OwnApply {
			others = append(others, e)
		}
	}
	if len(others) != 1 || others[0].Class != engine.ClassIndependent {
		t.Errorf("since-plan of the later plan = %+v; want one independent version (the other instance)", sp.Entries)
	}
	// The run that acquired second (a race: either) says why it was
	// allowed beside the other: disjoint write sets, one instance each.
	disjoint := false
	for _, o := range outs {
		if f, ok := fact(h.run(o.Run.ID).AllowedBecause, engine.FactDisjointWrites); ok &&
			len(f.OwnWrite) == 1 && len(f.OtherWrite) == 1 && len(f.OwnWrite.Overlapping(f.OtherWrite)) == 0 &&
			sameSet(f.OwnWrite.Union(f.OtherWrite), inst("a", "b")) {
			disjoint = true
		}
	}
	if !disjoint {
		t.Errorf("allowed-because = %+v / %+v; want a disjoint-write-sets fact over [\"a\"] and [\"b\"]",
			h.run(outs[0].Run.ID).AllowedBecause, h.run(outs[1].Run.ID).AllowedBecause)
	}
}

// TestInstancesSincePlan: a version that changed only ["b"] leaves a plan
// of ["a"] independent (not "planned target changed"); the plan applies,
// the head keeps ["b"]. A plan that changes every instance (a new value
// for all) writes ["a"] and ["b"]: a version that changed ["a"] makes it
// stale, truthfully; and a plan that adds key "c" writes only ["c"], which
// Terraform's plan creates alone, and applies beside a change of ["a"].
func TestInstancesSincePlan(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.apply(h.planHCL(forEachConfig(map[string]string{"a": "a0", "b": "b0"}, ""), "tester").ID)

	pa := h.planHCL(forEachConfig(map[string]string{"a": "a1", "b": "b0"}, ""), "alice")
	pAll := h.planHCL(forEachConfig(map[string]string{"a": "a9", "b": "b9"}, ""), "carol")
	if w := pAll.Envelope.Footprint.Write; !sameSet(w, inst("a", "b")) {
		t.Fatalf("whole-resource plan's write set = %v; want both instances", w)
	}
	pb := h.planHCL(forEachConfig(map[string]string{"a": "a0", "b": "b1"}, ""), "bob")
	vb := h.apply(pb.ID).Version
	if !sameSet(vb.Changed, inst("b")) {
		t.Fatalf("version %d changed %v; want terraform_data.r[\"b\"]", vb.Serial, vb.Changed)
	}

	sp, err := h.eng.SincePlan(h.ctx, pa.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.Entries) != 1 || sp.Entries[0].Class != engine.ClassIndependent || sp.Entries[0].Serial != vb.Serial {
		t.Fatalf("since-plan of the plan of [\"a\"] = %+v; want version %d independent", sp.Entries, vb.Serial)
	}
	sp, err = h.eng.SincePlan(h.ctx, pAll.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.Entries) != 1 || sp.Entries[0].Class != engine.ClassWriteChanged || !sameSet(sp.Entries[0].Addresses, inst("b")) {
		t.Fatalf("since-plan of the whole-resource plan = %+v; want version %d planned target changed on [\"b\"]", sp.Entries, vb.Serial)
	}

	va := h.apply(pa.ID)
	if !sameSet(va.Version.Changed, inst("a")) || !va.Version.Provenance.Exact {
		t.Errorf("version %d changed %v (exact %v); want [\"a\"], exact", va.Version.Serial, va.Version.Changed, va.Version.Provenance.Exact)
	}
	if m := h.marker(va.Run.ID, engine.MarkerStalenessPassed); m.Kind != engine.MarkerStalenessPassed {
		t.Errorf("apply of [\"a\"] has no staleness-passed marker: %v", kinds(h.markers(va.Run.ID)))
	}
	if got := h.headInstances(); got["a"] != "a1" || got["b"] != "b1" {
		t.Fatalf("head instances = %v; want a=a1, b=b1", got)
	}

	// The whole-resource plan is stale: both its instances changed.
	_, err = h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: pAll.ID, Actor: "carol"})
	if !errors.Is(err, engine.ErrStalePlan) {
		t.Fatalf("apply of the whole-resource plan = %v; want a stale plan", err)
	}

	// Adding a key: Terraform's plan creates ["c"] only, disjoint from a
	// change of ["a"] planned at the same head.
	pc := h.planHCL(forEachConfig(map[string]string{"a": "a1", "b": "b1", "c": "c0"}, ""), "dave")
	pa2 := h.planHCL(forEachConfig(map[string]string{"a": "a2", "b": "b1"}, ""), "erin")
	if w := pc.Envelope.Footprint.Write; !sameSet(w, inst("c")) {
		t.Fatalf("adding a key: write set = %v; want terraform_data.r[\"c\"]", w)
	}
	h.apply(pa2.ID)
	vc := h.apply(pc.ID)
	if !sameSet(vc.Version.Changed, inst("c")) {
		t.Errorf("version %d changed %v; want [\"c\"]", vc.Version.Serial, vc.Version.Changed)
	}
	if got := h.headInstances(); !(got["a"] == "a2" && got["b"] == "b1" && got["c"] == "c0") || len(got) != 3 {
		t.Fatalf("head instances = %v; want a=a2, b=b1, c=c0", got)
	}
}
