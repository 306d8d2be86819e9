package cli_test

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestLanesTellTheSameStory runs one change — a nested attribute of a
// real provider's resource with a sensitive argument, beside a counted
// resource, a data source reading it and a sensitive output — through
// both lanes, each in a store of its own: the terraform lane with
// --target and the native lane with the same --target. Both commit the
// same change; the native one commits a delta from a slice of two of the
// state's entries; the stories of both applies have the same sections and
// the same JSON shape but for the native lane's own facts (its slice and
// the slice-closure-proved fact); and the secret is printed by neither.
func TestLanesTellTheSameStory(t *testing.T) {
	t.Parallel()
	stories := map[string]map[string]any{}
	texts := map[string]string{}
	for _, lane := range []string{"terraform", "native"} {
		k := setup(t)
		withProvider(k)
		cfg := filepath.Join(k.dir, "cfg")
		write(t, filepath.Join(cfg, "main.tf"), strings.Replace(providerConfig, "SIZE", "1", 1))
		k.ok("state", "init", "prod")
		k.ok("apply", reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg)))
		write(t, filepath.Join(cfg, "main.tf"), strings.Replace(providerConfig, "SIZE", "2", 1))
		plan := k.ok("plan", "--state", "prod", "-C", cfg, "--lane", lane, "--target", "kltest_object.a")
		if !strings.Contains(plan, "lane           "+lane) {
			t.Fatalf("%s lane: plan says\n%s", lane, plan)
		}
		apply := k.ok("apply", reULID.FindString(plan))
		id := reULID.FindString(apply)
		show := k.ok("run", "show", id)
		for _, out := range []string{plan, apply, show} {
			if strings.Contains(out, providerSecret) {
				t.Fatalf("%s lane printed the secret:\n%s", lane, out)
			}
		}
		var doc map[string]any
		k.jsonOf(&doc, "run", "show", id)
		stories[lane], texts[lane] = doc, show
		pulled := k.ok("state", "pull", "prod")
		if strings.Count(pulled, `"type": "kltest_object"`) != 3 || !strings.Contains(pulled, `"size": 2`) || !strings.Contains(pulled, `"a_secret"`) {
			t.Errorf("%s lane: head after the apply:\n%s", lane, pulled)
		}
	}
	if !strings.Contains(texts["native"], "commit mode   delta") || !strings.Contains(texts["terraform"], "commit mode   snapshot-merge") {
		t.Errorf("commit modes: native\n%s\nterraform\n%s", texts["native"], texts["terraform"])
	}
	env := stories["native"]["envelope"].(map[string]any)
	sl, _ := env["slice"].(map[string]any)
	if sl == nil || sl["proved"] != true || sl["entries"] != float64(1) || sl["state_resources"] != float64(3) || len(sl["outputs"].([]any)) != 1 {
		t.Errorf("native envelope slice = %v, want proved, 1 of 3 entries (kltest_object.a: b and the data source reading a are not its dependencies), output a_secret", sl)
	}
	// Same sections, in the same order.
	if a, b := sections(texts["terraform"]), sections(texts["native"]); !slices.Equal(a, b) {
		t.Errorf("sections differ:\nterraform %q\nnative    %q", a, b)
	}
	// Same JSON shape, but for what only the native lane has.
	tf, nat := shape(stories["terraform"]), shape(stories["native"])
	var extra, missing []string
	for p := range nat {
		if !tf[p] && !strings.HasPrefix(p, ".envelope.slice.") && !strings.HasPrefix(p, ".plan.envelope.slice.") && p != ".allowed_because[].addresses[]" {
			extra = append(extra, p)
		}
	}
	for p := range tf {
		if !nat[p] {
			missing = append(missing, p)
		}
	}
	sort.Strings(extra)
	sort.Strings(missing)
	if len(extra)+len(missing) > 0 {
		t.Errorf("JSON shapes differ: only native %v; only terraform %v", extra, missing)
	}
}

// sections are the headings of a story: its lines that start a section
// (no indent, not the first line).
func sections(story string) []string {
	var out []string
	for i, l := range strings.Split(reULID.ReplaceAllString(story, "RUN"), "\n") {
		if i > 0 && l != "" && !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "\t") {
			out = append(out, strings.TrimRight(strings.Map(func(r rune) rune {
				if r >= '0' && r <= '9' {
					return '#'
				}
				return r
			}, l), " "))
		}
	}
	return out
}

// shape is the set of paths to the leaves of a JSON document (".a.b",
// ".list[].c").
func shape(v any) map[string]bool {
	out := map[string]bool{}
	var walk func(v any, p string)
	walk = func(v any, p string) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				walk(c, p+"."+k)
			}
		case []any:
			for _, c := range x {
				walk(c, p+"[]")
			}
		default:
			out[p] = true
		}
	}
	b, _ := json.Marshal(v)
	var doc any
	_ = json.Unmarshal(b, &doc)
	walk(doc, "")
	return out
}
