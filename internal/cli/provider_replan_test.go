package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/testprovider"
)

// providerStaleReadConfig is issue 10 §2's configuration on the test
// provider: b's name is built from r's id (the fake cloud API's), a
// variable and timestamp(), so b's planned name is unknown in every plan.
const providerStaleReadConfig = testprovider.RequiredProvidersBlock + `
variable "bv" {
  type    = string
  default = "b0"
}

resource "kltest_object" "r" {
  name = "r"
}

resource "kltest_object" "b" {
  name = "${kltest_object.r.id}|${var.bv}|${timestamp()}"
}
`

// TestProviderReplanAppliesNoStaleRead (issue 10 §2, ADR 0039) with the
// test provider's objects: PR B changes var.bv (a var file; its plan
// targets b) at one serial; an operator then replaces r (the fake cloud
// API deletes the old object and creates one with a new id). Applying B
// re-plans against the head (plan input changed: r), finds the intent
// unchanged (b's name is unknown in both plans) and applies the re-plan:
// the object the API holds for b is named after the r the API holds now —
// the reviewed plan applied to its own snapshot would name it after the
// deleted one — and the state agrees with the API. The story says the
// re-plan was applied.
func TestProviderReplanAppliesNoStaleRead(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform with the test provider")
	}
	t.Parallel()
	k := setup(t)
	p := withProvider(k)
	main := filepath.Join(k.dir, "main")
	write(t, filepath.Join(main, "main.tf"), providerStaleReadConfig)
	prB := filepath.Join(k.dir, "pr-b")
	write(t, filepath.Join(prB, "main.tf"), providerStaleReadConfig)
	write(t, filepath.Join(prB, "b.tfvars"), "bv = \"b1\"\n")
	const state = "prod"
	k.ok("state", "init", state)
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", state, "-C", main)))
	before := apiObjectsByName(t, p.APIDir)

	var b planDoc
	k.jsonOf(&b, "plan", "--state", state, "-C", prB, "--var-file", "b.tfvars", "--target", "kltest_object.b")
	if !sameStrings(b.Footprint.Write, "kltest_object.b") || !sameStrings(b.Footprint.Read, "kltest_object.r") {
		t.Fatalf("B's footprint = write %v, read %v; want write b, read r", b.Footprint.Write, b.Footprint.Read)
	}
	k.ok("apply", reULID.FindString(k.ok("plan", "--state", state, "-C", main, "--replace", "kltest_object.r", "--target", "kltest_object.r")))
	replaced := apiObjectsByName(t, p.APIDir)
	if replaced["r"] == "" || replaced["r"] == before["r"] {
		t.Fatalf("the API's r after --replace: %q (before %q); want a new object", replaced["r"], before["r"])
	}

	var story replanStoryDoc
	out := k.ok("apply", b.Run.ID, "--json")
	if err := json.Unmarshal([]byte(out), &story); err != nil {
		t.Fatalf("kl apply --json: %v\n%s", err, out)
	}
	api := apiObjectsByName(t, p.APIDir)
	var bName string
	for name := range api {
		if strings.Contains(name, "|b1|") {
			bName = name
		}
	}
	if len(api) != 2 || !strings.HasPrefix(bName, api["r"]+"|b1|") {
		t.Errorf("the API holds %v; want r and b, b named after the r it holds now (%s|b1|…), not the deleted %s", api, api["r"], before["r"])
	}
	if story.Verdict != "allowed" || len(story.Replans) != 1 || story.Replans[0].Status != "applied" || story.Version == nil ||
		story.Version.Provenance.AppliedPlanRun != story.Replans[0].ID {
		t.Fatalf("kl apply = %s (%s), re-plans %+v, version %+v; want allowed, the one re-plan applied", story.Verdict, story.Text, story.Replans, story.Version)
	}
	var head struct {
		Resources []struct {
			Name      string `json:"name"`
			Instances []struct {
				Attributes struct {
					ID   string `json:"id"`
					Name string `json:"name"`
				} `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal([]byte(k.ok("state", "pull", state)), &head); err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{"r": {api["r"], "r"}, "b": {api[bName], bName}} // id, name
	for _, r := range head.Resources {
		if a := r.Instances[0].Attributes; want[r.Name] != [2]string{a.ID, a.Name} {
			t.Errorf("head: kltest_object.%s is %s named %q; the API holds %v", r.Name, a.ID, a.Name, api)
		}
	}
	if text := k.ok("run", "show", story.Run.ID); !strings.Contains(text, "intent unchanged: applied the re-plan "+story.Replans[0].ID) {
		t.Errorf("kl run show does not say the re-plan was applied:\n%s", text)
	}
}

// apiObjectsByName reads the fake cloud API's objects in dir: id by name.
func apiObjectsByName(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var o apiObject
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[o.Name] = o.ID
	}
	return out
}
