package tfstate_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// TestEntriesWithoutInstances: Terraform 1.5 writes an entry with
// "instances": [] for a resource a failed apply never created; it is not a
// resource — not changed, not merged, not counted.
func TestEntriesWithoutInstances(t *testing.T) {
	t.Parallel()
	base := baseDoc().state(t)
	doc, err := base.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	empty := strings.Replace(string(doc), `"resources": [`, `"resources": [
    {"mode": "managed", "type": "terraform_data", "name": "never", "provider": "provider[\"terraform.io/builtin/terraform\"]", "instances": []},`, 1)
	result, err := tfstate.Parse([]byte(empty))
	if err != nil {
		t.Fatal(err)
	}
	if got := tfstate.Changed(base, result); len(got) != 0 {
		t.Errorf("Changed = %q, want none", got)
	}
	if got, want := result.ResourceCount(), base.ResourceCount(); got != want {
		t.Errorf("ResourceCount = %d, want %d", got, want)
	}
	if slices.Contains(result.Addresses(), "terraform_data.never") {
		t.Error("Addresses lists the entry without instances")
	}
	merged, _, err := tfstate.Merge(base, base, result, []string{"terraform_data.never"}, base.Serial+1)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := merged.Marshal()
	if strings.Contains(string(out), `"never"`) {
		t.Error("Merge wrote the entry without instances")
	}
}

// TestChangedRepresentation (issue 10 §3): encodings Terraform treats as
// equal are not a change — an empty "dependencies" or
// "sensitive_attributes" written by one Terraform and left out by another,
// the same dependencies in another order — while a different set of
// dependencies, an attribute or the status is.
func TestChangedRepresentation(t *testing.T) {
	t.Parallel()
	entry := func(instance string) string {
		return `{"version": 4, "terraform_version": "1.5.7", "serial": 1, "lineage": "l", "outputs": {}, "resources": [
  {"mode": "managed", "type": "terraform_data", "name": "a", "provider": "provider[\"terraform.io/builtin/terraform\"]",
   "instances": [` + instance + `]}]}`
	}
	parse := func(doc string) *tfstate.State {
		t.Helper()
		s, err := tfstate.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := parse(entry(`{"schema_version": 0, "attributes": {"id": "x", "input": null}, "sensitive_attributes": [], "dependencies": []}`))
	for name, tc := range map[string]struct {
		instance string
		changed  bool
	}{
		"empty sets left out (as Terraform 1.11 writes them)": {`{"schema_version": 0, "attributes": {"id": "x", "input": null}}`, false},
		"dependencies added":       {`{"schema_version": 0, "attributes": {"id": "x", "input": null}, "dependencies": ["terraform_data.b"]}`, true},
		"attribute changed":        {`{"schema_version": 0, "attributes": {"id": "y", "input": null}}`, true},
		"tainted":                  {`{"status": "tainted", "schema_version": 0, "attributes": {"id": "x", "input": null}}`, true},
		"sensitive paths recorded": {`{"schema_version": 0, "attributes": {"id": "x", "input": null}, "sensitive_attributes": [[{"type": "get_attr", "value": "input"}]]}`, true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := len(tfstate.Changed(base, parse(entry(tc.instance)))) > 0
			if got != tc.changed {
				t.Errorf("changed = %v, want %v", got, tc.changed)
			}
		})
	}
	// The same dependencies in another order are the same set.
	a := parse(entry(`{"schema_version": 0, "attributes": {"id": "x"}, "dependencies": ["terraform_data.b", "terraform_data.c"]}`))
	b := parse(entry(`{"schema_version": 0, "attributes": {"id": "x"}, "dependencies": ["terraform_data.c", "terraform_data.b"]}`))
	if got := tfstate.Changed(a, b); len(got) != 0 {
		t.Errorf("reordered dependencies counted as a change: %v", got)
	}
}
