package klyaml

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilolock/kilolock/internal/engine"
)

func TestParse(t *testing.T) {
	t.Parallel()
	good := `version: 1
apply_requirements: [approved]
projects:
  - name: infra
    dir: infra/prod
    state: acme/infra/prod
  - name: dns
    dir: ./dns/
    state: acme/dns
    when_modified: ["*.tf", "../modules/**/*.tf"]
    apply_trigger: merge
    apply_requirements: []
    on_revert: fail
`
	cfg, err := Parse([]byte(good), "")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := []Project{
		{Name: "infra", Dir: "infra/prod", State: "acme/infra/prod", Workspace: "default", WhenModified: DefaultWhenModified,
			ApplyTrigger: TriggerComment, ApplyRequirements: []Requirement{RequireApproved}, OnRevert: RevertWarn, Lane: engine.LaneChoiceTerraform, Validate: ValidateMerge},
		{Name: "dns", Dir: "dns", State: "acme/dns", Workspace: "default", WhenModified: []string{"*.tf", "../modules/**/*.tf"},
			ApplyTrigger: TriggerMerge, ApplyRequirements: []Requirement{}, OnRevert: RevertFail, Lane: engine.LaneChoiceTerraform, Validate: ValidateMerge},
	}
	if d := cmp.Diff(want, cfg.Projects); d != "" {
		t.Fatalf("projects (-want +got):\n%s", d)
	}
}

func TestParseDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := Parse([]byte("version: 1\nprojects:\n  - name: a\n    state: s\n"), TriggerMerge)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Projects[0]
	if p.Dir != "." || p.Workspace != "default" || p.ApplyTrigger != TriggerMerge || len(p.ApplyRequirements) != 0 ||
		!cmp.Equal(p.WhenModified, DefaultWhenModified) {
		t.Fatalf("defaults not applied: %+v", p)
	}
	def := Default("acme/infra", "")
	if !def.Default || len(def.Projects) != 1 || def.Projects[0].Name != "default" || def.Projects[0].State != "acme/infra" ||
		def.Projects[0].Dir != "." || def.Projects[0].ApplyTrigger != TriggerComment {
		t.Fatalf("Default: %+v", def)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		yaml string
		want []string // each must appear in the error
	}{
		"unknown field with line": {"version: 1\nprojects:\n  - name: a\n    state: s\n    dirr: x\n",
			[]string{`kl.yaml:5: unknown field "dirr" in a project`}},
		"unknown top-level field": {"version: 1\nprojcts: []\n", []string{`kl.yaml:2: unknown field "projcts" at the top level`}},
		"bad trigger value":       {"version: 1\nprojects:\n  - name: a\n    state: s\n    apply_trigger: push\n", []string{`kl.yaml:5: project "a": apply_trigger "push": want comment or merge`}},
		"bad on_revert value":     {"version: 1\non_revert: block\nprojects:\n  - name: a\n    state: s\n", []string{`kl.yaml:2: on_revert "block": want warn or fail`}},
		"on_revert not a scalar":  {"version: 1\nprojects:\n  - name: a\n    state: s\n    on_revert: [fail]\n", []string{`kl.yaml:5: project "a": on_revert: want warn or fail, got a list`}},
		"bad requirement":         {"version: 1\napply_requirements: [green]\nprojects:\n  - name: a\n    state: s\n", []string{`kl.yaml:2: apply_requirements: "green"`}},
		"wrong version":           {"version: 2\nprojects:\n  - name: a\n    state: s\n", []string{"kl.yaml:1: version 2: want version: 1"}},
		"no projects":             {"version: 1\n", []string{"no projects"}},
		"empty file":              {"", []string{"kl.yaml:1: the file is empty"}},
		"missing name and state":  {"version: 1\nprojects:\n  - dir: x\n", []string{"kl.yaml:3: project 1 (no name): name is required; kl.yaml:3: project 1 (no name): state is required"}},
		"duplicate names":         {"version: 1\nprojects:\n  - name: a\n    state: s\n  - name: a\n    state: t\n", []string{`kl.yaml:5: project name "a" is used twice (first on line 3)`}},
		"state ending in a dot":   {"version: 1\nprojects:\n  - name: a\n    state: acme/infra.\n", []string{`kl.yaml:4: project "a": state "acme/infra."`, "not ending in '.'"}},
		"dir outside":             {"version: 1\nprojects:\n  - name: a\n    state: s\n    dir: ../x\n", []string{`kl.yaml:5: project "a": dir "../x" must be a relative path inside the repository`}},
		"absolute dir":            {"version: 1\nprojects:\n  - name: a\n    state: s\n    dir: /etc\n", []string{`dir "/etc" must be a relative path`}},
		"bad state":               {"version: 1\nprojects:\n  - name: a\n    state: \"-x y\"\n", []string{`state "-x y"`}},
		"workspace":               {"version: 1\nprojects:\n  - name: a\n    state: s\n    workspace: prod\n", []string{`workspace "prod": only "default"`}},
		"bad glob":                {"version: 1\nprojects:\n  - name: a\n    state: s\n    when_modified: [\"a**\"]\n", []string{`when_modified "a**"`}},
		"wrong type":              {"version: one\nprojects: []\n", []string{`kl.yaml:1: version: want a whole number, got the string "one"`}},
		"syntax error":            {"version: 1\nprojects: [\n", []string{"kl.yaml:2: did not find expected node content"}},
		"not a mapping":           {"- a\n", []string{"kl.yaml:1: want keys such as version: 1 and projects, got a list"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.yaml), "")
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("want a *Error, got %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestParseEveryProblem: one file with a problem of each kind gets
// each reported once, on the line of the offending key or value, in line
// order — a wrong type or an unknown key does not hide the rest.
func TestParseEveryProblem(t *testing.T) {
	t.Parallel()
	file := `version: "1"
plan_drafts: yes
apply_trigger: [comment]
apply_requirements: [approved, green]
projets: []
projects:
  - name: prod
    dirr: infra/prod
    state: acme/infra/prod
    apply_trigger: push
  - name: prod
    dir: ../outside
    state: acme/infra.
    workspace: staging
    when_modified: ["*.tf", "a**"]
  - name: dns
    state: acme/dns
    when_modified: []
    name: dns2
  - dir: x
  - just a string
  - name: net
    state: {name: acme/net}
    apply_requirements: approved
`
	_, err := Parse([]byte(file), "")
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("want a *Error, got %v", err)
	}
	want := []string{
		`kl.yaml:1: version: want a whole number, got the string "1"`,
		`kl.yaml:2: plan_drafts: want true or false, got the string "yes"`,
		`kl.yaml:3: apply_trigger: want comment or merge, got a list`,
		`kl.yaml:4: apply_requirements: "green": want approved or mergeable`,
		`kl.yaml:5: unknown field "projets" at the top level (see docs/kl-yaml.md)`,
		`kl.yaml:8: unknown field "dirr" in a project (see docs/kl-yaml.md)`,
		`kl.yaml:10: project "prod": apply_trigger "push": want comment or merge`,
		`kl.yaml:11: project name "prod" is used twice (first on line 7)`,
		`kl.yaml:12: project "prod": dir "../outside" must be a relative path inside the repository`,
		`kl.yaml:13: project "prod": state "acme/infra.": use at most 200 characters in segments separated by single '/', ` +
			`each of letters, digits, '.', '_', '-', starting with a letter or digit and not ending in '.'`,
		`kl.yaml:14: project "prod": workspace "staging": only "default" is supported (Kilolock owns one state per project: use another project and state)`,
		`kl.yaml:15: project "prod": when_modified "a**": "**" must be a whole path segment`,
		`kl.yaml:18: project "dns": when_modified is empty: the project would never be planned (leave it out for the default)`,
		`kl.yaml:19: name is set twice (first on line 16)`,
		`kl.yaml:20: project 4 (no name): name is required`,
		`kl.yaml:20: project 4 (no name): state is required (the Kilolock state it plans against, e.g. acme/infra/prod)`,
		`kl.yaml:21: project 5: want keys such as name and state, got the string "just a string"`,
		`kl.yaml:23: project "net": state: want a string, got a mapping (key: value lines)`,
		`kl.yaml:24: project "net": apply_requirements: want a list such as [approved], got the string "approved"`,
	}
	if d := cmp.Diff(want, ce.Problems); d != "" {
		t.Fatalf("problems (-want +got):\n%s", d)
	}
}

// TestParseDocExample: the invalid file of docs/kl-yaml.md gets
// exactly the problems the page shows.
func TestParseDocExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "kl-yaml.md"))
	if err != nil {
		t.Fatal(err)
	}
	file := "version: 1\nprojects:\n  - name: prod\n    dir: infra/prod\n    state: acme/infra/prod\n  - name: dns\n    dirr: dns\n    state: acme/dns\n    apply_trigger: push\n"
	_, err = Parse([]byte(file), "")
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("want a *Error, got %v", err)
	}
	got := "- " + strings.Join(ce.Problems, "\n- ") + "\n" // as readConfig puts them in the check run
	for _, block := range []string{"```yaml\n" + file + "```\n", "```\n" + got + "```\n"} {
		if !strings.Contains(string(doc), block) {
			t.Errorf("docs/kl-yaml.md lacks the block\n%s", block)
		}
	}
	// The x- anchor example parses as it says.
	_, after, ok := strings.Cut(string(doc), "```yaml\nversion: 1\nx-defaults:")
	if !ok {
		t.Fatal("docs/kl-yaml.md lacks the x-defaults example")
	}
	example, _, _ := strings.Cut("version: 1\nx-defaults:"+after, "```")
	cfg, err := Parse([]byte(example), "")
	if err != nil {
		t.Fatalf("the x-defaults example: %v", err)
	}
	for _, p := range cfg.Projects {
		if p.ApplyTrigger != TriggerMerge || len(p.ApplyRequirements) != 1 {
			t.Errorf("the x-defaults example: %+v", p)
		}
	}
}

// TestParseAliases: anchors, aliases and merge keys work as in
// YAML; a null value is an absent key.
func TestParseAliases(t *testing.T) {
	t.Parallel()
	file := `version: 1
x-common: &common
  apply_requirements: [approved]
x-unused: {anything: [goes, here]}
projects:
  - &base
    <<: *common
    name: a
    state: acme/a
    when_modified: &tf ["*.tf"]
    apply_trigger: merge
  - <<: *base
    name: b
    dir:
    state: acme/b
    when_modified: *tf
`
	cfg, err := Parse([]byte(file), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []Project{
		{Name: "a", Dir: ".", State: "acme/a", Workspace: "default", WhenModified: []string{"*.tf"}, ApplyTrigger: TriggerMerge, ApplyRequirements: []Requirement{RequireApproved}, OnRevert: RevertWarn, Lane: engine.LaneChoiceTerraform, Validate: ValidateMerge},
		{Name: "b", Dir: ".", State: "acme/b", Workspace: "default", WhenModified: []string{"*.tf"}, ApplyTrigger: TriggerMerge, ApplyRequirements: []Requirement{RequireApproved}, OnRevert: RevertWarn, Lane: engine.LaneChoiceTerraform, Validate: ValidateMerge},
	}
	if d := cmp.Diff(want, cfg.Projects); d != "" {
		t.Fatalf("projects (-want +got):\n%s", d)
	}
	// A merge that expands exponentially is refused, not walked.
	var sb strings.Builder
	sb.WriteString("version: 1\nx-a0: &a0 {name: x}\n")
	for i := 1; i < 30; i++ {
		fmt.Fprintf(&sb, "x-a%d: &a%d {<<: [*a%d, *a%d, *a%d, *a%d]}\n", i, i, i-1, i-1, i-1, i-1)
	}
	sb.WriteString("projects:\n  - <<: *a29\n    state: s\n")
	if _, err := Parse([]byte(sb.String()), ""); err == nil || !strings.Contains(err.Error(), "too many aliases") {
		t.Fatalf("want too many aliases, got %v", err)
	}
	// Only the top level has extension keys, and only "x-" ones.
	for file, want := range map[string]string{
		"version: 1\nx_base: 1\nprojects:\n  - name: a\n    state: s\n":      `kl.yaml:2: unknown field "x_base" at the top level`,
		"version: 1\nprojects:\n  - name: a\n    state: s\n    x-note: hi\n": `kl.yaml:5: unknown field "x-note" in a project`,
	} {
		if _, err := Parse([]byte(file), ""); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want %s, got %v", file, want, err)
		}
	}
}

// TestParseOneStateOneProject: a state belongs to one project — not
// to two dirs (one would plan to destroy the other's resources), nor twice
// to one dir (workspace is always "default", so that is one project twice).
func TestParseOneStateOneProject(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ file, want string }{
		"two dirs": {"version: 1\nprojects:\n  - name: a\n    dir: a\n    state: acme/infra\n  - name: b\n    dir: b\n    state: acme/infra\n",
			`kl.yaml:8: project "b": state "acme/infra" is also project "a"'s (line 5): one state is one configuration (dir)`},
		"dirs equal once cleaned": {"version: 1\nprojects:\n  - name: a\n    dir: ./a/\n    state: acme/infra\n  - name: b\n    state: acme/infra\n    dir: a\n",
			`kl.yaml:7: project "b": state "acme/infra" is also project "a"'s (line 5), with the same dir "a": one state is one project`},
		"same dir, other workspace": {"version: 1\nprojects:\n  - name: a\n    state: acme/infra\n  - name: b\n    state: acme/infra\n    workspace: staging\n",
			`kl.yaml:6: project "b": state "acme/infra" is also project "a"'s (line 4), with the same dir ".": one state is one project; ` +
				`kl.yaml:7: project "b": workspace "staging": only "default" is supported`},
		"merged from an anchor": {"version: 1\nx-s: &s {state: acme/infra}\nprojects:\n  - <<: *s\n    name: a\n  - <<: *s\n    name: b\n    dir: b\n",
			`kl.yaml:6: project "b": state "acme/infra" is also project "a"'s (line 2): one state is one configuration (dir)`},
		"unnamed first": {"version: 1\nprojects:\n  - state: acme/infra\n  - name: b\n    dir: b\n    state: acme/infra\n",
			`kl.yaml:6: project "b": state "acme/infra" is also project 1 (no name)'s (line 3)`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.file), "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want %s, got %v", tc.want, err)
			}
		})
	}
	// Distinct states are fine, in one dir or not.
	ok := "version: 1\nprojects:\n  - name: a\n    state: acme/a\n  - name: b\n    state: acme/b\n  - name: c\n    dir: c\n    state: acme/a/c\n"
	if _, err := Parse([]byte(ok), ""); err != nil {
		t.Fatal(err)
	}
}

// TestParseOneDocument: a second YAML document is refused on the
// line it starts, not ignored; a leading "---" and a closing "..." are
// one document.
func TestParseOneDocument(t *testing.T) {
	t.Parallel()
	good := "version: 1\nprojects:\n  - name: a\n    state: s\n"
	for _, file := range []string{"---\n" + good, good + "...\n"} {
		if _, err := Parse([]byte(file), ""); err != nil {
			t.Errorf("%q: %v", file, err)
		}
	}
	for file, want := range map[string]string{
		good + "\n---\nversion: 1\nprojects:\n  - name: b\n    state: t\n": "kl.yaml:6: a second YAML document starts here (---)",
		good + "---\n":             "kl.yaml:5: a second YAML document starts here (---)",
		"---\n---\n" + good:        "kl.yaml:1: the file is empty: want at least version: 1 and projects; kl.yaml:2: a second YAML document",
		good + "--- x\n":           "kl.yaml:5: a second YAML document starts here (---)",
		good + "---\nversion: [\n": "kl.yaml:6: did not find expected node content",
	} {
		_, err := Parse([]byte(file), "")
		var ce *Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want %s, got %v", file, want, err)
		}
	}
}

// TestParseUnprintable: names, dirs, states and globs hold
// printable characters only, as kl -C wants: no control character,
// newline, tab, invisible format character or bidirectional override.
func TestParseUnprintable(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ file, want string }{
		"bidi override in dir": {"version: 1\nprojects:\n  - name: a\n    state: s\n    dir: \"infra/\u202eorp\"\n",
			`kl.yaml:5: project "a": dir "infra/\u202eorp" contains the bidirectional control U+202E: use printable text`},
		"raw bidi override in dir": {"version: 1\nprojects:\n  - name: a\n    state: s\n    dir: infra/\u202eorp\n",
			`kl.yaml:5: project "a": dir "infra/\u202eorp" contains the bidirectional control U+202E`},
		"newline in dir": {"version: 1\nprojects:\n  - name: a\n    state: s\n    dir: \"a\\nb\"\n",
			`kl.yaml:5: project "a": dir "a\nb" contains the control character U+000A`},
		"escape in dir": {"version: 1\nprojects:\n  - name: a\n    state: s\n    dir: \"a\\x1b[31m\"\n",
			`kl.yaml:5: project "a": dir "a\x1b[31m" contains the control character U+001B`},
		"tab in dir": {"version: 1\nprojects:\n  - name: a\n    state: s\n    dir: \"a\\tb\"\n",
			`kl.yaml:5: project "a": dir "a\tb" contains the control character U+0009`},
		"zero width space in state": {"version: 1\nprojects:\n  - name: a\n    state: \"acme/in\\u200bfra\"\n",
			`kl.yaml:4: project "a": state "acme/in\u200bfra" contains the invisible or unprintable character U+200B`},
		"control in name": {"version: 1\nprojects:\n  - name: \"a\\x07\"\n    state: s\n",
			`kl.yaml:3: project 1: name "a\a" contains the control character U+0007`},
		"isolate in glob": {"version: 1\nprojects:\n  - name: a\n    state: s\n    when_modified: [\"*.tf\", \"\\u2066x.tf\"]\n",
			`kl.yaml:5: project "a": when_modified "\u2066x.tf" contains the bidirectional control U+2066`},
		"no-break space in dir": {"version: 1\nprojects:\n  - name: a\n    state: s\n    dir: \"a\\u00a0b\"\n",
			`kl.yaml:5: project "a": dir "a\u00a0b" contains the space character U+00A0`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.file), "")
			var ce *Error
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want %s, got %v", tc.want, err)
			}
			if len(ce.Problems) != 1 {
				t.Fatalf("want one problem, got %q", ce.Problems)
			}
		})
	}
	// Printable non-ASCII and the ASCII space are fine in a dir.
	ok := "version: 1\nprojects:\n  - name: a\n    state: s\n    dir: \"infra/prod é/a b\"\n"
	if cfg, err := Parse([]byte(ok), ""); err != nil || cfg.Projects[0].Dir != "infra/prod é/a b" {
		t.Fatalf("got %+v, %v", cfg, err)
	}
}

// TestParseSyntaxLine: a YAML syntax error names the line of the
// mistake, not yaml.v3's line (that of the enclosing block, or the one
// before the mistake).
func TestParseSyntaxLine(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ file, want string }{
		"tab in the indentation": {"version: 1\nprojects:\n  - name: a\n\tdir: x\n    state: s\n",
			"kl.yaml:4: found a tab character that violates indentation"},
		"stray key in the list": {"version: 1\nprojects:\n  - name: a\n    state: s\n  - name: b\n    state: t\n  x: 1\n",
			"kl.yaml:7: did not find expected '-' indicator"},
		"dedented key": {"version: 1\nprojects:\n  - name: a\n    state: s\n   dir: x\n",
			"kl.yaml:5: "},
		"list after a mapping, blank lines between": {"version: 1\n\n\n- a\n",
			"kl.yaml:4: did not find expected key"},
		"tab on the first line": {"\tversion: 1\n", "kl.yaml:1: found character that cannot start any token"},
		"mapping in a plain value": {"version: 1\nprojects:\n  - name: a: b\n    state: s\n",
			"kl.yaml:3: mapping values are not allowed in this context"},
		"unknown anchor": {"version: 1\nprojects:\n  - name: a\n    state: s\n    when_modified: *nope\n",
			"kl.yaml:5: unknown anchor 'nope' referenced"},
		"unclosed flow list":  {"version: 1\nprojects: [\n", "kl.yaml:2: did not find expected node content"},
		"no trailing newline": {"version: 1\nprojects:\n  - name: a\n\tdir: x", "kl.yaml:4: found a tab character"},
		// The first 5 lines fail (at their end, inside the list) otherwise
		// than the file (on line 7): the message says the line may be a
		// later one.
		"missing comma in a flow list": {"version: 1\nprojects:\n  - name: a\n    state: s\n    when_modified: [\"a\",\n      \"b\"\n      \"c\"]\n",
			"kl.yaml:5: YAML syntax error on this line or a later one: did not find expected ',' or ']'"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tc.file), "")
			var ce *Error
			if !errors.As(err, &ce) || len(ce.Problems) != 1 || !strings.HasPrefix(ce.Problems[0], tc.want) {
				t.Fatalf("want %s, got %v", tc.want, err)
			}
		})
	}
}
