package cli_test

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestDataSourceIsNoDeviation (issue 10 §3): a configuration that reads a
// data source — here terraform_remote_state, Terraform's built-in one —
// applies exactly, also when the data it reads moved on since the last
// version: what Terraform read is not a change of state Kilolock owns, so
// it is no deviation ("1 unplanned: data.terraform_remote_state…"), not in
// a version's changed set, and no other plan becomes stale by it.
func TestDataSourceIsNoDeviation(t *testing.T) {
	t.Parallel()
	k := setup(t)
	remote := filepath.Join(k.dir, "network.tfstate")
	remoteState := func(cidr string) string {
		return `{"version": 4, "terraform_version": "1.5.7", "serial": 3, "lineage": "11111111-2222-3333-4444-555555555555",
  "outputs": {"cidr": {"value": "` + cidr + `", "type": "string"}}, "resources": []}` + "\n"
	}
	write(t, remote, remoteState("10.0.0.0/16"))
	cfg := filepath.Join(k.dir, "cfg")
	config := func(app, other string) {
		write(t, filepath.Join(cfg, "main.tf"), fmt.Sprintf(`data "terraform_remote_state" "net" {
  backend = "local"
  config  = { path = %q }
}

resource "terraform_data" "app" {
  input = "%s ${data.terraform_remote_state.net.outputs.cidr}"
}

resource "terraform_data" "other" {
  input = %q
}
`, remote, app, other))
	}
	applyExact := func(plan string) {
		t.Helper()
		var story struct {
			Verdict string `json:"verdict"`
			Text    string `json:"text"`
			Version *struct {
				Changed    []string `json:"changed"`
				Provenance struct {
					Exact     bool `json:"exact"`
					Deviation any  `json:"deviation"`
				} `json:"provenance"`
			} `json:"version"`
		}
		out := k.ok("apply", plan, "--json")
		if err := json.Unmarshal([]byte(out), &story); err != nil {
			t.Fatal(err)
		}
		if story.Verdict != "allowed" || story.Version == nil || !story.Version.Provenance.Exact || story.Version.Provenance.Deviation != nil {
			t.Fatalf("apply of %s = %s (%s), version %+v; want allowed and exact: a data source read is no deviation", plan, story.Verdict, story.Text, story.Version)
		}
		for _, a := range story.Version.Changed {
			if strings.HasPrefix(a, "data.") {
				t.Errorf("version changed set %v holds a data source", story.Version.Changed)
			}
		}
	}

	config("v1", "other")
	k.ok("state", "init", "prod")
	applyExact(reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg)))

	// The remote state moves on; two plans at the same head read the new
	// value: one changes app, the other only other. Neither makes the
	// other stale, and neither deviates.
	write(t, remote, remoteState("10.1.0.0/16"))
	config("v2", "other")
	changeApp := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg, "--target", "terraform_data.app"))
	config("v1", "other2")
	changeOther := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg, "--target", "terraform_data.other"))
	applyExact(changeApp)
	applyExact(changeOther)
}

// TestReencodedStateIsNoDeviation (issue 10 §3): a state adopted as an
// older Terraform wrote it — every instance with "dependencies": [] and
// "sensitive_attributes": [], as Terraform 1.5 writes them — is rewritten
// whole by the Terraform that applies (which leaves empty sets out). A
// one-resource change then commits one changed resource, exactly: the
// re-encoding is no deviation and makes no other plan stale.
func TestReencodedStateIsNoDeviation(t *testing.T) {
	t.Parallel()
	k := setup(t)
	const n = 20
	var resources, config []string
	for i := range n {
		resources = append(resources, fmt.Sprintf(`{"mode": "managed", "type": "terraform_data", "name": "r%d",
  "provider": "provider[\"terraform.io/builtin/terraform\"]",
  "instances": [{"schema_version": 0, "attributes": {"id": "00000000-0000-0000-0000-%012d", "input": {"value": "v%d", "type": "string"},
    "output": {"value": "v%d", "type": "string"}, "triggers_replace": null}, "sensitive_attributes": [], "dependencies": []}]}`, i, i, i, i))
		config = append(config, fmt.Sprintf("resource \"terraform_data\" \"r%d\" {\n  input = %q\n}\n", i, fmt.Sprintf("v%d", i)))
	}
	adopted := filepath.Join(k.dir, "old.tfstate")
	write(t, adopted, `{"version": 4, "terraform_version": "1.5.7", "serial": 7, "lineage": "22222222-3333-4444-5555-666666666666",
  "outputs": {}, "resources": [`+strings.Join(resources, ",\n")+`]}`+"\n")
	cfg := filepath.Join(k.dir, "cfg")
	k.ok("state", "init", "prod", "--from", adopted)
	config[3] = "resource \"terraform_data\" \"r3\" {\n  input = \"changed\"\n}\n"
	write(t, filepath.Join(cfg, "main.tf"), strings.Join(config, "\n"))
	plan := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg))
	var story struct {
		Text    string `json:"text"`
		Version *struct {
			Changed    []string `json:"changed"`
			Provenance struct {
				Exact bool `json:"exact"`
			} `json:"provenance"`
		} `json:"version"`
	}
	if err := json.Unmarshal([]byte(k.ok("apply", plan, "--json")), &story); err != nil {
		t.Fatal(err)
	}
	if story.Version == nil || !story.Version.Provenance.Exact || len(story.Version.Changed) != 1 || story.Version.Changed[0] != "terraform_data.r3" {
		t.Fatalf("apply = %s, version %+v; want exact, changing terraform_data.r3 alone", story.Text, story.Version)
	}
}
