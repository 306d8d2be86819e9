package engine_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

// nativeConfig is a root module of four resources: r reads x, y and z are
// apart, output r_out reads only r and output both reads r and y. R is r's
// input.
func nativeConfig(h *harness, r, y string) string {
	h.t.Helper()
	dir := filepath.Join(h.dir, "native-"+strings.NewReplacer("/", "_").Replace(r+"-"+y))
	src := `variable "suffix" {
  default = "s"
}

resource "terraform_data" "x" {
  input = "x0"
}

resource "terraform_data" "r" {
  input = "` + r + `:${terraform_data.x.output}-${var.suffix}"
}

resource "terraform_data" "y" {
  input = "` + y + `"
}

resource "terraform_data" "z" {
  input = file("${path.module}/z.txt")
}

output "r_out" {
  value = terraform_data.r.output
}

output "both" {
  value = "${terraform_data.r.output}/${terraform_data.y.output}"
}
`
	for name, body := range map[string]string{"main.tf": src, "z.txt": "z0", "terraform.tfvars": "suffix = \"tv\"\n"} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			h.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			h.t.Fatal(err)
		}
	}
	return dir
}

// TestNativeLane: a plan scoped to one target in the native lane plans its
// closure's slice (configuration and state), records the proof, applies
// to the slice and commits a delta; the head then holds every other
// resource and output unchanged, and a full terraform plan of the same
// configuration against it has no changes but the outputs the target's
// dependents show (none here: r_out reads only r). Its since-plan, its
// allowed-because and its version say what happened.
func TestNativeLane(t *testing.T) {
	t.Parallel()
	h := setup(t)
	base := nativeConfig(h, "r0", "y0")
	plan := func(dir string, lane engine.LaneChoice, tgt ...string) *engine.PlanOutcome {
		t.Helper()
		out, err := h.eng.Plan(h.ctx, engine.PlanInput{State: testState, Dir: dir, Actor: "alice", Targets: tgt, Lane: lane})
		if err != nil {
			t.Fatalf("Plan: %v", err)
		}
		return out
	}
	h.apply(plan(base, "").Run.ID)
	_, before := h.head()

	changed := nativeConfig(h, "r1", "y0")
	out := plan(changed, engine.LaneChoiceNative, "terraform_data.r")
	env := out.Run.Envelope
	if env.Lane != engine.LaneNative || env.Slice == nil || !env.Slice.Proved {
		t.Fatalf("lane %s, slice %+v, markers %v: want a proved native-lane plan", env.Lane, env.Slice, kinds(h.markers(out.Run.ID)))
	}
	sl := env.Slice
	if !sameSet(sl.Closure, addrs("r", "x")) || sl.Entries != 2 || sl.StateResources != 4 || sl.Scoped != "targets" {
		t.Errorf("slice = %+v, want the closure {r, x}: 2 of 4 entries, scoped to targets", sl)
	}
	if strings.Join(sl.Outputs, ",") != "r_out" {
		t.Errorf("slice outputs = %v, want [r_out] (both reads y, outside the closure)", sl.Outputs)
	}
	for _, c := range sl.Checks {
		if !c.Passed {
			t.Errorf("check %s failed: %s", c.Name, c.Found)
		}
	}
	if len(sl.Checks) != 4 {
		t.Errorf("checks = %+v, want the four of the closure proof", sl.Checks)
	}
	if got := strings.Join(env.Footprint.Write.Strings(), ","); got != "output.r_out,terraform_data.r" {
		t.Errorf("write set = %v, want r and r_out", env.Footprint.Write)
	}

	ap := h.apply(out.Run.ID)
	if ap.Version.Provenance.Mode != engine.CommitDelta {
		t.Errorf("commit mode = %s, want delta", ap.Version.Provenance.Mode)
	}
	if !ap.Version.Provenance.Exact {
		t.Errorf("commit not exact: %+v", ap.Version.Provenance.Deviation)
	}
	if _, ok := fact(h.run(ap.Run.ID).AllowedBecause, engine.FactSliceClosure); !ok {
		t.Errorf("allowed-because = %+v, want a slice-closure-proved fact", h.run(ap.Run.ID).AllowedBecause)
	}
	hs, doc := h.head()
	if got := hs.inputs(); got["r"] != "r1:x0-tv" || got["y"] != "y0" || got["z"] != "z0" || got["x"] != "x0" {
		t.Errorf("head inputs = %v, want r changed (with terraform.tfvars' suffix) and x, y, z as before", got)
	}
	bs := parseHead(t, before)
	if hs.Outputs["both"] != bs.Outputs["both"] || hs.Outputs["r_out"] == bs.Outputs["r_out"] {
		t.Errorf("outputs = %v, before %v: want r_out changed, both kept (outside the slice)", hs.Outputs, bs.Outputs)
	}
	// The full plan of the changed configuration against the head changes
	// only the output the slice left out (it reads y too).
	if out := terraformPlan(t, h, changed, doc); !strings.Contains(out, "~ both") || strings.Contains(out, "# terraform_data.") {
		t.Errorf("full plan after the native apply:\n%s\nwant only output both to change", out)
	}
}

// terraformPlan runs a full `terraform plan` of a copy of dir against doc
// and returns what it printed.
func terraformPlan(t *testing.T, h *harness, dir string, doc []byte) string {
	t.Helper()
	work := t.TempDir()
	if err := os.CopyFS(work, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "terraform.tfstate"), doc, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		cmd := exec.CommandContext(h.ctx, h.bin, args...)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "TF_CLI_CONFIG_FILE=/dev/null", "TF_IN_AUTOMATION=1", "TF_DATA_DIR="+filepath.Join(work, ".tfdata"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("terraform %s: %v\n%s", args[0], err, out)
		}
		return string(out)
	}
	run("init", "-input=false", "-no-color")
	return run("plan", "-input=false", "-no-color", "-lock=false")
}

// TestNativeLaneFallsBack: what the closure cannot see or prove plans in
// the terraform lane, with a fell-back marker saying why, and the plan's
// envelope says it fell back; --lane auto says why it chose its lane.
func TestNativeLaneFallsBack(t *testing.T) {
	t.Parallel()
	h := setup(t)
	base := nativeConfig(h, "r0", "y0")
	if _, err := h.eng.Plan(h.ctx, engine.PlanInput{State: testState, Dir: base, Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		in   engine.PlanInput
		want string
	}{
		"no targets": {engine.PlanInput{Lane: engine.LaneChoiceNative}, "the scope has no targets"},
		"a target only the state could hold": {engine.PlanInput{Lane: engine.LaneChoiceNative, Targets: []string{"terraform_data.gone"}},
			"not declared in the configuration"},
		"a var file changed": {engine.PlanInput{Lane: engine.LaneChoiceNative, ChangedFiles: []string{"terraform.tfvars"}, BaseDir: base},
			"terraform.tfvars changed"},
		"a partial list of changed files": {engine.PlanInput{Lane: engine.LaneChoiceNative, ChangedFiles: []string{"main.tf"}, BaseDir: base,
			ScopeIncomplete: "GitHub lists 3000 of the pull request's 3001 changed files"}, "GitHub lists 3000 of the pull request's 3001 changed files"},
		"a destroy plan": {engine.PlanInput{Lane: engine.LaneChoiceNative, Targets: []string{"terraform_data.r"}, Options: engine.PlanOptions{Destroy: true}},
			"a destroy plan also destroys what depends on its targets"},
		"a replacement outside the closure": {engine.PlanInput{Lane: engine.LaneChoiceNative, Targets: []string{"terraform_data.r"}, Replace: []string{"terraform_data.y"}},
			"the replacement of terraform_data.y is outside the closure"},
		"a refresh-only plan": {engine.PlanInput{Lane: engine.LaneChoiceNative, Targets: []string{"terraform_data.r"}, Options: engine.PlanOptions{RefreshOnly: true}},
			"a refresh-only plan refreshes every object of the state"},
		"auto on a small state": {engine.PlanInput{Lane: engine.LaneChoiceAuto, Targets: []string{"terraform_data.r"}},
			"lane auto: a closure of 2 resources against the state's 0"},
	} {
		in := tc.in
		in.State, in.Dir, in.Actor = testState, base, "alice"
		out, err := h.eng.Plan(h.ctx, in)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		env := out.Run.Envelope
		if env.Lane != engine.LaneTerraform || env.Slice != nil || !strings.Contains(env.LaneReason, tc.want) {
			t.Errorf("%s: lane %s, slice %+v, reason %q: want the terraform lane saying %q", name, env.Lane, env.Slice, env.LaneReason, tc.want)
		}
		var fell []engine.Marker
		for _, m := range h.markers(out.Run.ID) {
			if m.Kind == engine.MarkerFellBack {
				fell = append(fell, m)
			}
		}
		if auto := in.Lane == engine.LaneChoiceAuto; (len(fell) == 1) == auto || (!auto && !strings.Contains(fell[0].Reason, tc.want)) {
			t.Errorf("%s: fell-back markers %+v", name, fell)
		}
	}
	if _, err := h.eng.Plan(h.ctx, engine.PlanInput{State: testState, Dir: base, Actor: "alice", Lane: engine.LaneChoiceNative,
		ChangedFiles: []string{"main.tf"}}); err == nil || !strings.Contains(err.Error(), "--base-dir") {
		t.Errorf("changed files without a base dir: %v, want an error naming --base-dir", err)
	}
	// A list of changed files that leaves out a changed file falls back
	// naming it, unless it is the pull request's own list (klbot).
	changed := nativeConfig(h, "r1", "y0")
	for _, pr := range []bool{false, true} {
		out, err := h.eng.Plan(h.ctx, engine.PlanInput{State: testState, Dir: changed, Actor: "alice", Lane: engine.LaneChoiceNative,
			ChangedFiles: []string{"z.txt"}, BaseDir: base, ListedByPR: pr})
		if err != nil {
			t.Fatal(err)
		}
		reason := out.Run.Envelope.LaneReason
		if left := strings.Contains(reason, "main.tf differs from the base but is not among the changed files"); left == pr {
			t.Errorf("changed files leaving out main.tf (listed by a pull request: %v): lane reason %q", pr, reason)
		}
	}
	if _, err := h.eng.Plan(h.ctx, engine.PlanInput{State: testState, Dir: base, Actor: "alice", Lane: engine.LaneChoiceNative,
		Targets: []string{"terraform_data.r"}, ChangedFiles: []string{"main.tf"}, BaseDir: base}); !errors.Is(err, engine.ErrInvalid) ||
		!strings.Contains(err.Error(), "not both") {
		t.Errorf("targets and changed files: %v, want ErrInvalid saying a plan is scoped one way, not both", err)
	}
}

// TestNativeLaneValidation: with Validate, a native-lane apply first plans
// the whole configuration in the terraform lane against the head. Same
// intent on the write set: "validated: native intent unchanged", the
// validation plan closed, the native plan applied (delta). Another intent
// — here the whole configuration kept for validation says something else
// for r, as a closure that missed an input would — refuses the apply
// before Terraform runs, the native plan superseded by the validation
// plan, which stays open for review, and the marker holds both intents.
func TestNativeLaneValidation(t *testing.T) {
	t.Parallel()
	h := setup(t)
	h.apply(h.planIn(nativeConfig(h, "r0", "y0"), "").ID)
	native := h.planIn(nativeConfig(h, "r1", "y0"), engine.LaneChoiceNative, "terraform_data.r")
	out, err := h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: native.ID, State: testState, Actor: "alice", Validate: true})
	if err != nil {
		t.Fatalf("Apply --validate: %v", err)
	}
	v := h.marker(out.Run.ID, engine.MarkerValidated)
	if v.IntentChanged == nil || *v.IntentChanged || out.Version.Provenance.Mode != engine.CommitDelta {
		t.Errorf("validated marker %+v, commit mode %s: want intent unchanged and a delta commit", v, out.Version.Provenance.Mode)
	}
	if vp := h.run(v.Other); vp.Status != engine.StatusSuperseded || vp.End == nil || vp.End.Cause != engine.CauseValidationPassed || vp.Envelope.Lane != engine.LaneTerraform {
		t.Errorf("validation plan %s: status %s, end %+v: want closed as validation-passed, in the terraform lane", vp.ID, vp.Status, vp.End)
	}

	native = h.planIn(nativeConfig(h, "r2", "y0"), engine.LaneChoiceNative, "terraform_data.r")
	other := nativeConfig(h, "r3", "y0")
	whole, err := h.eng.Terraform.(engine.ConfigArchiver).ArchiveConfig(other, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.store.PutArtifact(h.ctx, native.ID, engine.ArtifactWholeConfig, whole); err != nil {
		t.Fatal(err)
	}
	_, err = h.eng.Apply(h.ctx, engine.ApplyInput{PlanRun: native.ID, State: testState, Actor: "alice", Validate: true})
	if !errors.Is(err, engine.ErrValidationChanged) || !errors.Is(err, engine.ErrIntentChanged) {
		t.Fatalf("Apply --validate of a plan the whole configuration contradicts: %v, want ErrValidationChanged", err)
	}
	runs := h.applyRuns(native.ID)
	a := runs[len(runs)-1]
	v = h.marker(a.ID, engine.MarkerValidated)
	if a.Status != engine.StatusRefused || v.IntentChanged == nil || !*v.IntentChanged || !strings.Contains(v.Extra["native"], "terraform_data.r: update") ||
		!strings.Contains(v.Extra["terraform"], "terraform_data.r: update") || v.Extra["native"] == v.Extra["terraform"] {
		t.Errorf("refused apply %s (%s), marker %+v: want both intents of terraform_data.r", a.ID, a.Status, v)
	}
	for _, m := range h.markers(a.ID) {
		if m.Kind == engine.MarkerApplyStarted {
			t.Error("Terraform ran after the validation refused the apply")
		}
	}
	if p, vp := h.run(native.ID), h.run(v.Other); p.Status != engine.StatusSuperseded || vp.Status != engine.StatusPlanned {
		t.Errorf("native plan %s, validation plan %s: want superseded and open for review", p.Status, vp.Status)
	}
}

// planIn plans dir on testState in lane with targets.
func (h *harness) planIn(dir string, lane engine.LaneChoice, tgt ...string) engine.Run {
	h.t.Helper()
	out, err := h.eng.Plan(h.ctx, engine.PlanInput{State: testState, Dir: dir, Actor: "alice", Targets: tgt, Lane: lane})
	if err != nil {
		h.t.Fatalf("Plan: %v", err)
	}
	return out.Run
}

// writeTree writes files (path relative to dir → content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNativeLaneModulesAndDependents: what a fresh-eyes tester broke.
// (1) A resource of a module called with count: its entries are one per
// module instance, and the slice's state holds them all, so Terraform
// updates the objects in place instead of creating a second of each (the
// slice had read none, and the apply orphaned the originals). (2) A
// changed resource reaches what reads it and what its
// replace_triggered_by names in other files: they are in the scope, so a
// full plan after the native apply has nothing left to do.
func TestNativeLaneModulesAndDependents(t *testing.T) {
	t.Parallel()
	h := setup(t)
	files := map[string]string{
		"main.tf":   "module \"m\" {\n  source = \"./m\"\n  count  = 2\n}\n",
		"m/main.tf": "resource \"terraform_data\" \"inner\" {\n  input = \"inner\"\n}\n",
		"a.tf":      "resource \"terraform_data\" \"a\" {\n  input = \"a1\"\n}\n",
		"b.tf": "resource \"terraform_data\" \"b\" {\n  input = terraform_data.a.output\n}\n\n" +
			"resource \"terraform_data\" \"c\" {\n  lifecycle {\n    replace_triggered_by = [terraform_data.a]\n  }\n}\n\n" +
			"resource \"terraform_data\" \"apart\" {\n  input = \"apart\"\n}\n",
	}
	base := filepath.Join(h.dir, "tree0")
	writeTree(t, base, files)
	h.apply(h.planIn(base, "").ID)
	doc0, _, _ := h.eng.Pull(h.ctx, testState, -1)
	idsBefore := objectIDs(t, doc0)

	step := func(name, prev, file, old, new string) (string, *engine.PlanOutcome) {
		t.Helper()
		dir := filepath.Join(h.dir, name)
		if err := os.CopyFS(dir, os.DirFS(prev)); err != nil {
			t.Fatal(err)
		}
		files[file] = strings.Replace(files[file], old, new, 1)
		writeTree(t, dir, map[string]string{file: files[file]})
		out, err := h.eng.Plan(h.ctx, engine.PlanInput{State: testState, Dir: dir, Actor: "alice", Lane: engine.LaneChoiceNative,
			ChangedFiles: []string{file}, BaseDir: prev})
		if err != nil {
			t.Fatalf("%s: Plan: %v", name, err)
		}
		if env := out.Run.Envelope; env.Lane != engine.LaneNative || env.Slice == nil || !env.Slice.Proved {
			t.Fatalf("%s: lane %s (%s), slice %+v: want a proved native-lane plan", name, env.Lane, env.LaneReason, env.Slice)
		}
		return dir, out
	}

	head1, out := step("tree1", base, "m/main.tf", `= "inner"`, `= "inner2"`)
	if sl := out.Run.Envelope.Slice; sl.Entries != 2 {
		t.Errorf("slice of module.m's resource: %d entries, want both module instances' (2)", sl.Entries)
	}
	ap := h.apply(out.Run.ID)
	if !ap.Version.Provenance.Exact {
		t.Errorf("commit of the module change not exact: %+v", ap.Version.Provenance.Deviation)
	}
	doc1, _, _ := h.eng.Pull(h.ctx, testState, -1)
	idsAfter := objectIDs(t, doc1)
	for _, a := range []string{"module.m[0].terraform_data.inner", "module.m[1].terraform_data.inner"} {
		if idsBefore[a] == "" || idsAfter[a] != idsBefore[a] {
			t.Errorf("%s: object %q before, %q after: want the same object updated in place", a, idsBefore[a], idsAfter[a])
		}
	}
	if len(idsAfter) != len(idsBefore) {
		t.Errorf("objects after the module change: %v, before %v", idsAfter, idsBefore)
	}

	head2, out := step("tree2", head1, "a.tf", `= "a1"`, `= "a2"`)
	for _, want := range []engine.Address{"terraform_data.a", "terraform_data.b", "terraform_data.c"} {
		if !out.Run.Envelope.Slice.Closure.Contains(want) {
			t.Errorf("closure %v lacks %s, which reads or is replaced by the changed terraform_data.a", out.Run.Envelope.Slice.Closure, want)
		}
	}
	h.apply(out.Run.ID)
	doc2, _, _ := h.eng.Pull(h.ctx, testState, -1)
	if got := objectIDs(t, doc2)["terraform_data.c"]; got == idsAfter["terraform_data.c"] {
		t.Errorf("terraform_data.c kept object %s: its replace_triggered_by names the changed a", got)
	}
	if plan := terraformPlan(t, h, head2, doc2); !strings.Contains(plan, "No changes.") {
		t.Errorf("full plan after the native applies:\n%s\nwant no changes", plan)
	}
}

// objectIDs is a state's object ids by instance address (resource
// entries of one instance each, module instance keys kept).
func objectIDs(t *testing.T, doc []byte) map[string]string {
	t.Helper()
	var raw struct {
		Resources []struct {
			Module, Type, Name string
			Instances          []struct {
				Attributes struct {
					ID string `json:"id"`
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(doc, &raw); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range raw.Resources {
		a := r.Type + "." + r.Name
		if r.Module != "" {
			a = r.Module + "." + a
		}
		for _, in := range r.Instances {
			out[a] = in.Attributes.ID
		}
	}
	return out
}

// TestModuleCountAdded: adding count to a module call destroys
// module.m's object and creates module.m[0]'s and module.m[1]'s. The
// version's changed set names the resource (module.m.terraform_data.inner,
// every module instance), and the deviation must not call the created
// instances "planned but unchanged" (a fresh-eyes tester saw it do so).
func TestModuleCountAdded(t *testing.T) {
	t.Parallel()
	h := setup(t)
	inner := map[string]string{"m/main.tf": "resource \"terraform_data\" \"inner\" {\n  input = \"inner\"\n}\n"}
	base := filepath.Join(h.dir, "count0")
	writeTree(t, base, inner)
	writeTree(t, base, map[string]string{"main.tf": "module \"m\" {\n  source = \"./m\"\n}\n"})
	h.apply(h.planIn(base, "").ID)
	head := filepath.Join(h.dir, "count2")
	writeTree(t, head, inner)
	writeTree(t, head, map[string]string{"main.tf": "module \"m\" {\n  source = \"./m\"\n  count  = 2\n}\n"})
	ap := h.apply(h.planIn(head, "").ID)
	if d := ap.Version.Provenance.Deviation; d != nil && len(d.Unchanged) > 0 {
		t.Errorf("deviation %+v: the created module instances were changed", d)
	}
	if !ap.Version.Provenance.Exact {
		t.Errorf("commit not exact: %+v", ap.Version.Provenance.Deviation)
	}
}
