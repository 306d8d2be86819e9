package terraform

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/engine"
)

func TestExtractIntent(t *testing.T) {
	t.Parallel()
	plan, err := ParsePlanJSON([]byte(`{"format_version":"1.2",
	 "resource_drift":[{"address":"terraform_data.drifted","change":{"actions":["update"],"after":{"input":"x"}}}],
	 "resource_changes":[
	  {"address":"terraform_data.a[0]","change":{"actions":["update"],"after":{"input":"v","n":1000},"after_unknown":{"output":true}}},
	  {"address":"terraform_data.same","change":{"actions":["no-op"],"after":{"input":"v"}}},
	  {"address":"terraform_data.new","previous_address":"terraform_data.old","change":{"actions":["no-op"],"after":{"input":"m"}}},
	  {"address":"terraform_data.r","change":{"actions":["delete","create"],"after":{"input":"r"},"after_unknown":{"id":true}}},
	  {"address":"terraform_data.r","deposed":"00000001","change":{"actions":["delete"],"after":null}},
	  {"address":"data.http.x","change":{"actions":["read"],"after":{},"after_unknown":{"body":true}}}],
	 "output_changes":{"o":{"actions":["update"],"after_unknown":true},"k":{"actions":["no-op"],"after":"k"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	in, err := ExtractIntent(plan)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(in.Changes))
	for k := range in.Changes {
		keys = append(keys, k)
	}
	wantKeys := []string{"data.http.x", "output.o", "terraform_data.a[0]", "terraform_data.new", "terraform_data.r", "terraform_data.r (deposed 00000001)"}
	if got := engine.NewAddressSet(toAddresses(keys)...).Strings(); !reflect.DeepEqual(got, wantKeys) {
		t.Errorf("intent keys = %q, want %q", got, wantKeys)
	}
	if got := in.Changes["terraform_data.r"].Actions; !reflect.DeepEqual(got, []string{"delete", "create"}) {
		t.Errorf("replace actions = %q", got)
	}
	if got := in.Changes["terraform_data.new"].PreviousAddress; got != "terraform_data.old" {
		t.Errorf("move previous address = %q", got)
	}
	for k, ic := range in.Changes {
		if !strings.HasPrefix(ic.AfterDigest, "sha256:") || len(ic.AfterDigest) != len("sha256:")+64 {
			t.Errorf("%s: digest %q is not sha256:<hex>", k, ic.AfterDigest)
		}
	}
}

func TestIntentAfterDigest(t *testing.T) {
	t.Parallel()
	digest := func(after, unknown any) string {
		t.Helper()
		d, err := afterDigest(after, unknown)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	m := func(kv ...any) map[string]any {
		out := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	same := []struct {
		name       string
		a, ua      any
		b, ub      any
		wantDiffer bool
	}{
		{name: "unknown absent or null compares equal",
			a: m("x", "1"), ua: m("id", true),
			b: m("x", "1", "id", nil), ub: m("id", true)},
		{name: "unknown whole value",
			a: nil, ua: true, b: "anything", ub: true},
		{name: "unknown list element",
			a: []any{"a", nil}, ua: []any{false, true},
			b: []any{"a"}, ub: []any{false, true}},
		{name: "empty unknown mask is no unknown",
			a: m("t", m("k", "v")), ua: m("t", m()),
			b: m("t", m("k", "v")), ub: nil},
		{name: "numbers in any spelling",
			a: m("n", json.Number("1000")), b: m("n", 1000.0)},
		{name: "key order",
			a: m("a", "1", "b", "2"), b: m("b", "2", "a", "1")},
		{name: "known value changed",
			a: m("x", "1"), b: m("x", "2"), wantDiffer: true},
		{name: "known versus unknown",
			a: m("x", "1"), b: m("x", "1"), ub: m("x", true), wantDiffer: true},
		{name: "big integers stay exact",
			a: m("n", json.Number("869248136000969819847225")), b: m("n", json.Number("869248136000969819847226")), wantDiffer: true},
	}
	for _, tt := range same {
		da, db := digest(tt.a, tt.ua), digest(tt.b, tt.ub)
		if (da != db) != tt.wantDiffer {
			t.Errorf("%s: digests %s and %s, want differ=%t", tt.name, da, db, tt.wantDiffer)
		}
	}
}

// TestIntentIgnoresDrift checks that refresh-only differences are not
// intent: the same changes with other resource_drift give the same intent.
func TestIntentIgnoresDrift(t *testing.T) {
	t.Parallel()
	base := `{"format_version":"1.2","resource_changes":[{"address":"a.b","change":{"actions":["create"],"after":{"v":1}}}]DRIFT}`
	p1, err := ParsePlanJSON([]byte(strings.Replace(base, "DRIFT", "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	p2, err := ParsePlanJSON([]byte(strings.Replace(base, "DRIFT", `,"resource_drift":[{"address":"c.d","change":{"actions":["update"],"after":{"v":2}}}]`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	i1, _ := ExtractIntent(p1)
	i2, _ := ExtractIntent(p2)
	if d := i1.Diff(i2); len(d) != 0 {
		t.Errorf("drift changed the intent at %q", d)
	}
	if _, err := ExtractIntent(nil); !errors.Is(err, engine.ErrInvalid) {
		t.Errorf("nil plan: err = %v, want ErrInvalid", err)
	}
}

// TestIntentFixtures extracts the intent of every real plan fixture and
// checks its keys: the written instances and changed outputs.
func TestIntentFixtures(t *testing.T) {
	t.Parallel()
	for _, path := range planFixtures(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		plan, err := ParsePlanJSON(b)
		if err != nil {
			continue // invalid/plan.json: covered by TestParsePlanJSONErrors
		}
		in, err := ExtractIntent(plan)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		fp, err := ExtractFootprint(plan, ExtractOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var written []engine.Address
		for k, ic := range in.Changes {
			a, err := engine.ParseInstanceAddress(k)
			if err != nil {
				t.Errorf("%s: intent key %q: %v", filepath.Base(path), k, err)
			}
			written = append(written, a)
			if ic.PreviousAddress != "" {
				written = append(written, engine.MustParseInstanceAddress(ic.PreviousAddress))
			}
		}
		if got := engine.NewAddressSet(written...); !reflect.DeepEqual(got, fp.Write) {
			t.Errorf("%s: intent covers %q, write set is %q", path, got, fp.Write)
		}
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	plan, err := ParsePlanJSON([]byte(`{"format_version":"1.2","complete":false,
	 "resource_changes":[
	  {"address":"a.c","change":{"actions":["create"]}},
	  {"address":"a.u","change":{"actions":["update"]}},
	  {"address":"a.d","change":{"actions":["delete"]}},
	  {"address":"a.r1","change":{"actions":["delete","create"]}},
	  {"address":"a.r2","change":{"actions":["create","delete"]}},
	  {"address":"a.m","previous_address":"a.old","change":{"actions":["update"]}},
	  {"address":"data.x.y","change":{"actions":["read"]}},
	  {"address":"a.n","change":{"actions":["no-op"]}}],
	 "output_changes":{"o":{"actions":["create"]},"p":{"actions":["no-op"]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := engine.PlanSummary{Add: 1, Change: 2, Destroy: 1, Replace: 2, Move: 1, Read: 1, Outputs: 1, Targets: true}
	if got := Summarize(plan); got != want {
		t.Errorf("Summarize = %+v, want %+v", got, want)
	}
	if got := Summarize(nil); got != (engine.PlanSummary{}) {
		t.Errorf("Summarize(nil) = %+v", got)
	}
}

func toAddresses(s []string) []engine.Address {
	out := make([]engine.Address, len(s))
	for i, x := range s {
		out[i] = engine.Address(x)
	}
	return out
}
