package cli_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// staleReadConfig is issue 10 §2's configuration: b's input is built from
// r's id, a variable and timestamp() — so b's planned input is unknown in
// every plan, and an unknown planned value hides what it depends on.
const staleReadConfig = `variable "bv" {
  type    = string
  default = "b0"
}

resource "terraform_data" "r" {
  input = "r"
}

resource "terraform_data" "b" {
  input = "${terraform_data.r.id}|${var.bv}|${timestamp()}"
}
`

// replanStoryDoc is what these tests read of `kl apply --json` and `kl
// run show --json`.
type replanStoryDoc struct {
	Verdict string `json:"verdict"`
	Text    string `json:"text"`
	Run     runDoc `json:"run"`
	Plan    runDoc `json:"plan"`
	Replans []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Cause  string `json:"cause"`
		Reason string `json:"reason"`
	} `json:"replans"`
	Markers  []markerDoc `json:"markers"`
	Refusals []struct {
		Rule      string   `json:"rule"`
		Addresses []string `json:"addresses"`
		Text      string   `json:"text"`
	} `json:"refusals"`
	Version *struct {
		Serial     int64 `json:"serial"`
		Provenance struct {
			PlanRun             string `json:"plan_run"`
			PlanDigest          string `json:"plan_digest"`
			SourceSerial        int64  `json:"source_serial"`
			AppliedPlanRun      string `json:"applied_plan_run"`
			AppliedPlanDigest   string `json:"applied_plan_digest"`
			AppliedSourceSerial int64  `json:"applied_source_serial"`
			Exact               bool   `json:"exact"`
		} `json:"provenance"`
	} `json:"version"`
}

// envelopeDoc is the envelope of `kl plan --json` and `kl run show PLAN
// --json`.
type envelopeDoc struct {
	Envelope struct {
		SourceSerial int64  `json:"source_serial"`
		PlanDigest   string `json:"plan_digest"`
	} `json:"envelope"`
}

// TestReplanAppliesNoStaleRead is issue 10 §2's reproduction, through kl
// on SQLite with real Terraform. PR B changes var.bv (set in a var file;
// its plan targets b) at serial 2; an operator then replaces r (version
// 3: a new id). Applying B re-plans against head 3 (plan input changed:
// r), and b's input is unknown in both plans, so the intent is unchanged.
// What Terraform applies must be the re-plan, made against the head: b's
// input is then built from r's CURRENT id — the reviewed plan applied to
// its own snapshot of serial 2 would build it from the destroyed one. The
// story says which plan was applied and why that was safe; the provenance
// keeps both digests.
func TestReplanAppliesNoStaleRead(t *testing.T) {
	t.Parallel()
	k := setup(t)
	main := filepath.Join(k.dir, "main")
	write(t, filepath.Join(main, "main.tf"), staleReadConfig)
	prB := filepath.Join(k.dir, "pr-b")
	write(t, filepath.Join(prB, "main.tf"), staleReadConfig)
	write(t, filepath.Join(prB, "b.tfvars"), "bv = \"b1\"\n")
	const state = "prod"
	k.ok("state", "init", state)
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", state, "-C", main)))
	_, before, _ := tfInstances(t, []byte(k.ok("state", "pull", state)))

	var b planDoc
	k.jsonOf(&b, "plan", "--state", state, "-C", prB, "--var-file", "b.tfvars", "--target", "terraform_data.b")
	var reviewed envelopeDoc
	k.jsonOf(&reviewed, "run", "show", b.Run.ID)
	if !sameStrings(b.Footprint.Write, "terraform_data.b") || !sameStrings(b.Footprint.Read, "terraform_data.r") {
		t.Fatalf("B's footprint = write %v, read %v; want write b, read r", b.Footprint.Write, b.Footprint.Read)
	}
	// The operator replaces r alone.
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", state, "-C", main, "--replace", "terraform_data.r", "--target", "terraform_data.r")))
	_, replaced, _ := tfInstances(t, []byte(k.ok("state", "pull", state)))
	if replaced["r"] == before["r"] {
		t.Fatalf("r's id %s did not change with --replace", replaced["r"])
	}

	var story replanStoryDoc
	out := k.ok("apply", b.Run.ID, "--json")
	if err := json.Unmarshal([]byte(out), &story); err != nil {
		t.Fatalf("kl apply --json: %v\n%s", err, out)
	}
	head, ids, inputs := tfInstances(t, []byte(k.ok("state", "pull", state)))
	if ids["r"] != replaced["r"] {
		t.Errorf("r's id at the head = %s, want the operator's replacement %s", ids["r"], replaced["r"])
	}
	if want := ids["r"] + "|b1|"; !strings.HasPrefix(inputs["b"], want) {
		t.Fatalf("b's input at the head = %q; want it built from r's current id and B's var file: %q… (the destroyed r was %s)", inputs["b"], want, before["r"])
	}

	if story.Verdict != "allowed" || len(story.Replans) != 1 || story.Version == nil {
		t.Fatalf("kl apply = %s (%s), %d re-plans, version %v; want allowed, one re-plan, a version", story.Verdict, story.Text, len(story.Replans), story.Version)
	}
	rp := story.Replans[0]
	var replan envelopeDoc
	k.jsonOf(&replan, "run", "show", rp.ID)
	p := story.Version.Provenance
	if p.PlanRun != b.Run.ID || p.PlanDigest != reviewed.Envelope.PlanDigest || p.SourceSerial != b.Envelope.SourceSerial {
		t.Errorf("provenance names plan %s (%s) at serial %d; want the reviewed plan %s (%s) at %d",
			p.PlanRun, p.PlanDigest, p.SourceSerial, b.Run.ID, reviewed.Envelope.PlanDigest, b.Envelope.SourceSerial)
	}
	if p.AppliedPlanRun != rp.ID || p.AppliedPlanDigest != replan.Envelope.PlanDigest || p.AppliedPlanDigest == p.PlanDigest ||
		p.AppliedSourceSerial != head-1 || replan.Envelope.SourceSerial != head-1 {
		t.Errorf("provenance applied plan %s (%s) at serial %d; want the re-plan %s (%s) made against head %d",
			p.AppliedPlanRun, p.AppliedPlanDigest, p.AppliedSourceSerial, rp.ID, replan.Envelope.PlanDigest, head-1)
	}
	if rp.Status != "applied" || rp.Cause != "replan-applied" {
		t.Errorf("re-plan = %s (%s: %s); want applied, in place of the reviewed plan", rp.Status, rp.Cause, rp.Reason)
	}
	if story.Plan.Status != "applied" {
		t.Errorf("reviewed plan status = %s, want applied (through its re-plan)", story.Plan.Status)
	}
	var started *markerDoc
	for i, m := range story.Markers {
		if m.Kind == "apply-started" {
			started = &story.Markers[i]
		}
	}
	if started == nil || started.OtherRun != rp.ID {
		t.Errorf("apply-started marker = %+v; want it to name the re-plan %s Terraform applied", started, rp.ID)
	}
	text := k.ok("run", "show", story.Run.ID)
	for _, want := range []string{
		"re-planned against head " + itoa(head-1) + ", intent unchanged: applied the re-plan " + rp.ID,
		"applied plan digest",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("kl run show does not say %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "applied the reviewed plan") {
		t.Errorf("kl run show says the reviewed plan was applied:\n%s", text)
	}
}

// TestReplanRefusedOutsideFootprint: a re-plan that would change something
// outside the reviewed footprint is refused — applying the re-plan would
// apply that too — and left open for review. PR B plans b (no -target);
// main then changes other (outside B's footprint: an independent version)
// and replaces r (B's plan input). Applying B re-plans against the head
// with B's configuration, which still says other = "o0": the re-plan would
// revert main's change to other.
func TestReplanRefusedOutsideFootprint(t *testing.T) {
	t.Parallel()
	k := setup(t)
	config := func(other string) string {
		return staleReadConfig + `
resource "terraform_data" "other" {
  input = "` + other + `"
}
`
	}
	main := filepath.Join(k.dir, "main")
	write(t, filepath.Join(main, "main.tf"), config("o0"))
	prB := filepath.Join(k.dir, "pr-b")
	write(t, filepath.Join(prB, "main.tf"), config("o0"))
	write(t, filepath.Join(prB, "b.tfvars"), "bv = \"b1\"\n")
	const state = "prod"
	k.ok("state", "init", state)
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", state, "-C", main)))

	var b planDoc
	k.jsonOf(&b, "plan", "--state", state, "-C", prB, "--var-file", "b.tfvars")
	if !sameStrings(b.Footprint.Write, "terraform_data.b") {
		t.Fatalf("B's write set = %v, want b alone", b.Footprint.Write)
	}
	// main changes other and replaces r, one targeted apply each.
	write(t, filepath.Join(main, "main.tf"), config("o1"))
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", state, "-C", main, "--target", "terraform_data.other")))
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", state, "-C", main, "--replace", "terraform_data.r", "--target", "terraform_data.r")))
	headBefore, _, inputsBefore := tfInstances(t, []byte(k.ok("state", "pull", state)))

	r := k.run("apply", b.Run.ID, "--json")
	if r.code() != 3 {
		t.Fatalf("kl apply %s: exit code %d (err %v), want 3 (refused)\n%s", b.Run.ID, r.code(), r.err, r.out)
	}
	var story replanStoryDoc
	if err := json.Unmarshal([]byte(r.out), &story); err != nil {
		t.Fatalf("kl apply --json: %v\n%s", err, r.out)
	}
	if story.Verdict != "refused" || story.Version != nil || len(story.Replans) != 1 {
		t.Fatalf("kl apply = %s (%s), version %v, %d re-plans; want refused, nothing committed, one re-plan", story.Verdict, story.Text, story.Version, len(story.Replans))
	}
	if rp := story.Replans[0]; rp.Status != "planned" {
		t.Errorf("re-plan status = %s (%s); want planned: open for review", rp.Status, rp.Reason)
	}
	if story.Run.Status != "refused" || len(story.Refusals) != 1 || story.Refusals[0].Rule != "replan-outside-footprint" ||
		!sameStrings(story.Refusals[0].Addresses, "terraform_data.other") {
		t.Errorf("apply run %s, refusals %+v; want refused by rule replan-outside-footprint on terraform_data.other", story.Run.Status, story.Refusals)
	}
	if !strings.Contains(r.err.Error(), "outside the reviewed footprint") {
		t.Errorf("kl apply error = %q; want it to say the re-plan changes something outside the reviewed footprint", r.err)
	}
	headAfter, _, inputsAfter := tfInstances(t, []byte(k.ok("state", "pull", state)))
	if headAfter != headBefore || inputsAfter["other"] != "o1" || inputsAfter["b"] != inputsBefore["b"] {
		t.Errorf("head moved (%d → %d) or changed: other %q, b %q", headBefore, headAfter, inputsAfter["other"], inputsAfter["b"])
	}
}

// sameStrings reports whether got holds exactly want, in any order.
func sameStrings(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	seen := map[string]int{}
	for _, g := range got {
		seen[g]++
	}
	for _, w := range want {
		if seen[w] == 0 {
			return false
		}
		seen[w]--
	}
	return true
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// replayConfig: t reads x and a variable, k is a resource PR's plan
// replaces, u is one the PR's branch changes but its plan does not target.
const replayConfig = `variable "v" {
  type    = string
  default = "v0"
}

resource "terraform_data" "x" {
  input = "x0"
}

resource "terraform_data" "t" {
  input = "${terraform_data.x.input}|${var.v}"
}

resource "terraform_data" "k" {
  input = "k"
}

resource "terraform_data" "u" {
  input = "%s"
}
`

// TestReplanReplaysOptions: a re-plan replays every option of the reviewed
// plan — its var file, its targets and its replacements — so the re-plan
// plans the same and is applied; drop any one and it would plan something
// else (t's input from the default variable; k not replaced; u, which the
// PR's branch changes but its plan does not target, changed too) and the
// apply would stop for review instead.
func TestReplanReplaysOptions(t *testing.T) {
	t.Parallel()
	k := setup(t)
	main := filepath.Join(k.dir, "main")
	write(t, filepath.Join(main, "main.tf"), fmt.Sprintf(replayConfig, "u0"))
	pr := filepath.Join(k.dir, "pr")
	write(t, filepath.Join(pr, "main.tf"), fmt.Sprintf(replayConfig, "u-pr"))
	write(t, filepath.Join(pr, "pr.tfvars"), "v = \"v1\"\n")
	const state = "prod"
	k.ok("state", "init", state)
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", state, "-C", main)))
	_, before, _ := tfInstances(t, []byte(k.ok("state", "pull", state)))

	var p planDoc
	k.jsonOf(&p, "plan", "--state", state, "-C", pr, "--var-file", "pr.tfvars",
		"--target", "terraform_data.t", "--target", "terraform_data.k", "--replace", "terraform_data.k")
	if !sameStrings(p.Footprint.Write, "terraform_data.k", "terraform_data.t") || !sameStrings(p.Footprint.Read, "terraform_data.x") {
		t.Fatalf("the PR's footprint = write %v, read %v; want write k and t, read x", p.Footprint.Write, p.Footprint.Read)
	}
	// x is replaced (a new id, the same input): t's plan input changed, its
	// intent did not.
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", state, "-C", main, "--replace", "terraform_data.x", "--target", "terraform_data.x")))

	var story replanStoryDoc
	out := k.ok("apply", p.Run.ID, "--json")
	if err := json.Unmarshal([]byte(out), &story); err != nil {
		t.Fatalf("kl apply --json: %v\n%s", err, out)
	}
	if story.Verdict != "allowed" || story.Version == nil || len(story.Replans) != 1 || story.Version.Provenance.AppliedPlanRun != story.Replans[0].ID {
		t.Fatalf("kl apply = %s (%s), version %v; want the re-plan applied", story.Verdict, story.Text, story.Version)
	}
	_, ids, inputs := tfInstances(t, []byte(k.ok("state", "pull", state)))
	if inputs["t"] != "x0|v1" || ids["k"] == before["k"] || inputs["u"] != "u0" {
		t.Errorf("head: t = %q (want x0|v1: the var file), k's id %s (was %s: want replaced), u = %q (want u0: not targeted)",
			inputs["t"], ids["k"], before["k"], inputs["u"])
	}
}
