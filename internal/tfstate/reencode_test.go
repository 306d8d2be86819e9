package tfstate_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// obj is a kltest_object entry at a schema version: version 0 stores
// created_at in Unix seconds, version 1 in RFC 3339 (the test provider's
// upgrade); deps are its dependencies.
func obj(name, value string, version int, deps ...string) string {
	created := `"1700000000"`
	if version == 1 {
		created = `"2023-11-14T22:13:20Z"`
	}
	d := ""
	if len(deps) > 0 {
		d = `, "dependencies": ["` + strings.Join(deps, `", "`) + `"]`
	}
	return fmt.Sprintf(`{"mode": "managed", "type": "kltest_object", "name": %q,
  "provider": "provider[\"kilolock.test/kilolock/kltest\"]",
  "instances": [{"schema_version": %d, "attributes": {"id": "id-%s", "name": %q, "created_at": %s}%s}]}`,
		name, version, name, value, created, d)
}

func stateOf(t *testing.T, serial int, entries ...string) *tfstate.State {
	t.Helper()
	s, err := tfstate.Parse([]byte(fmt.Sprintf(`{"version": 4, "terraform_version": "1.11.4", "serial": %d, "lineage": "l",
  "outputs": {}, "resources": [%s]}`, serial, strings.Join(entries, ",\n"))))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReencoded (issue 10 §3, ADR 0038): with the base as Terraform
// upgraded it (the plan's tfstate-prev), an instance Terraform only stored
// anew at the provider's raised schema version is re-encoded — not
// unplanned, not changed, merged in its new encoding where the head has not
// moved — while a refresh difference (drift) or new dependencies are
// unplanned changes as before; a written address whose head entry is the
// re-encoding of the base's is not overwritten. Without the upgraded base,
// every difference counts (the rule before).
func TestReencoded(t *testing.T) {
	t.Parallel()
	base := stateOf(t, 3, obj("a", "a", 0), obj("b", "b", 0), obj("c", "c", 0), obj("d", "d", 0), obj("e", "e", 0))
	upgraded := stateOf(t, 0, obj("a", "a", 1), obj("b", "b", 1), obj("c", "c", 1), obj("d", "d", 1), obj("e", "e", 1))
	// a: re-encoded; b: written; c: drifted (refresh found another name);
	// d: new dependencies; e: re-encoded.
	result := stateOf(t, 9, obj("a", "a", 1), obj("b", "b2", 1), obj("c", "c-drift", 1), obj("d", "d", 1, "kltest_object.a"), obj("e", "e", 1))
	written := []string{"kltest_object.b"}

	if got := tfstate.Reencoded(base, upgraded, result, written); strings.Join(got, " ") != "kltest_object.a kltest_object.e" {
		t.Errorf("Reencoded = %v, want a and e", got)
	}
	if got := tfstate.Reencoded(base, nil, result, written); got != nil {
		t.Errorf("Reencoded without the upgraded base = %v, want nil", got)
	}

	// The head moved e since the plan (another run changed it).
	head := stateOf(t, 4, obj("a", "a", 0), obj("b", "b", 0), obj("c", "c", 0), obj("d", "d", 0), obj("e", "e-other", 1))
	merged, rep, err := tfstate.MergeWith(tfstate.MergeInput{Head: head, Base: base, Upgraded: upgraded, Result: result, Written: written, Serial: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		got  []string
		want string
	}{
		{"Reencoded", rep.Reencoded, "kltest_object.a kltest_object.e"},
		{"Unplanned", rep.Unplanned, "kltest_object.c kltest_object.d"},
		{"Changed", rep.Changed, "kltest_object.b kltest_object.c kltest_object.d"},
		{"Kept", rep.Kept, ""},
		{"Overwritten", rep.Overwritten, ""},
		{"Merged", rep.Merged, "kltest_object.a kltest_object.b kltest_object.c kltest_object.d"},
	} {
		if strings.Join(c.got, " ") != c.want {
			t.Errorf("MergeReport.%s = %v, want [%s]", c.what, c.got, c.want)
		}
	}
	// a in its new encoding; e as the head had it.
	if got := tfstate.Changed(merged, stateOf(t, 5, obj("a", "a", 1), obj("b", "b2", 1), obj("c", "c-drift", 1),
		obj("d", "d", 1, "kltest_object.a"), obj("e", "e-other", 1))); len(got) != 0 {
		t.Errorf("merged state differs from the expected one at %v", got)
	}

	// A later run planned at the base writes a; the head holds a's
	// re-encoding (version 5 above): no change since the plan, so not
	// overwritten.
	result2 := stateOf(t, 9, obj("a", "a2", 1), obj("b", "b", 1), obj("c", "c", 1), obj("d", "d", 1), obj("e", "e", 1))
	_, rep2, err := tfstate.MergeWith(tfstate.MergeInput{Head: merged, Base: base, Upgraded: upgraded, Result: result2,
		Written: []string{"kltest_object.a"}, Serial: 6})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep2.Overwritten) != 0 || strings.Join(rep2.Changed, " ") != "kltest_object.a" {
		t.Errorf("second merge: overwritten %v, changed %v; want none overwritten, a changed", rep2.Overwritten, rep2.Changed)
	}
	// Without the upgraded base the same merge calls it overwritten, and
	// every re-encoding an unplanned change: the rule before.
	_, rep3, err := tfstate.MergeKeeping(merged, base, result2, []string{"kltest_object.a"}, nil, 6)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rep3.Overwritten, " ") != "kltest_object.a" || len(rep3.Unplanned) != 4 || len(rep3.Reencoded) != 0 {
		t.Errorf("merge without the upgraded base: overwritten %v, unplanned %v, re-encoded %v", rep3.Overwritten, rep3.Unplanned, rep3.Reencoded)
	}
}

// TestParsePrevRun: the previous-run state Terraform keeps in a saved plan
// has no lineage; ParsePrevRun reads it, Parse refuses it.
func TestParsePrevRun(t *testing.T) {
	t.Parallel()
	doc := []byte(`{"version": 4, "terraform_version": "1.11.4", "serial": 0, "lineage": "", "outputs": {}, "resources": [` + obj("a", "a", 1) + `]}`)
	s, err := tfstate.ParsePrevRun(doc)
	if err != nil || s.ResourceCount() != 1 {
		t.Fatalf("ParsePrevRun = %v, %v", s, err)
	}
	if _, err := tfstate.Parse(doc); err == nil || !strings.Contains(err.Error(), "no lineage") {
		t.Errorf("Parse of a state without lineage: %v, want the refusal", err)
	}
	if _, err := tfstate.ParsePrevRun([]byte(`{"version": 3}`)); err == nil {
		t.Error("ParsePrevRun accepted a version 3 document")
	}
}
