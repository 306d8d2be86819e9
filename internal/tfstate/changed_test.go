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
