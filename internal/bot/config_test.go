package bot

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseConfig(t *testing.T) {
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
`
	cfg, err := ParseConfig([]byte(good), "")
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	want := []Project{
		{Name: "infra", Dir: "infra/prod", State: "acme/infra/prod", Workspace: "default", WhenModified: DefaultWhenModified,
			ApplyTrigger: TriggerComment, ApplyRequirements: []Requirement{RequireApproved}},
		{Name: "dns", Dir: "dns", State: "acme/dns", Workspace: "default", WhenModified: []string{"*.tf", "../modules/**/*.tf"},
			ApplyTrigger: TriggerMerge, ApplyRequirements: []Requirement{}},
	}
	if d := cmp.Diff(want, cfg.Projects); d != "" {
		t.Fatalf("projects (-want +got):\n%s", d)
	}
}

func TestParseConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := ParseConfig([]byte("version: 1\nprojects:\n  - name: a\n    state: s\n"), TriggerMerge)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Projects[0]
	if p.Dir != "." || p.Workspace != "default" || p.ApplyTrigger != TriggerMerge || len(p.ApplyRequirements) != 0 ||
		!cmp.Equal(p.WhenModified, DefaultWhenModified) {
		t.Fatalf("defaults not applied: %+v", p)
	}
	def := DefaultConfig("acme/infra", "")
	if !def.Default || len(def.Projects) != 1 || def.Projects[0].Name != "default" || def.Projects[0].State != "acme/infra" ||
		def.Projects[0].Dir != "." || def.Projects[0].ApplyTrigger != TriggerComment {
		t.Fatalf("DefaultConfig: %+v", def)
	}
}

func TestParseConfigErrors(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		yaml string
		want []string // each must appear in the error
	}{
		"unknown field with line": {"version: 1\nprojects:\n  - name: a\n    state: s\n    dirr: x\n",
			[]string{`kl.yaml:5: unknown field "dirr" in a project`}},
		"unknown top-level field": {"version: 1\nprojcts: []\n", []string{`kl.yaml:2: unknown field "projcts" at the top level`}},
		"bad trigger value":       {"version: 1\nprojects:\n  - name: a\n    state: s\n    apply_trigger: push\n", []string{`kl.yaml:5: apply_trigger "push": want comment or merge`}},
		"bad requirement":         {"version: 1\napply_requirements: [green]\nprojects:\n  - name: a\n    state: s\n", []string{`kl.yaml:2: apply_requirements: "green"`}},
		"wrong version":           {"version: 2\nprojects:\n  - name: a\n    state: s\n", []string{"kl.yaml:1: version 2: want version: 1"}},
		"no projects":             {"version: 1\n", []string{"no projects"}},
		"empty file":              {"", []string{"kl.yaml:1: the file is empty"}},
		"missing name and state":  {"version: 1\nprojects:\n  - dir: x\n", []string{"kl.yaml:3: project 1: name is required", "kl.yaml:3: project \"\": state is required"}},
		"duplicate names":         {"version: 1\nprojects:\n  - name: a\n    state: s\n  - name: a\n    state: t\n", []string{`kl.yaml:5: project name "a" is used twice (first on line 3)`}},
		"state ending in a dot":   {"version: 1\nprojects:\n  - name: a\n    state: acme/infra.\n", []string{`kl.yaml:3: project "a": state "acme/infra."`, "not ending in '.'"}},
		"dir outside":             {"version: 1\nprojects:\n  - name: a\n    state: s\n    dir: ../x\n", []string{`kl.yaml:3: project "a": dir "../x" must be a relative path inside the repository`}},
		"absolute dir":            {"version: 1\nprojects:\n  - name: a\n    state: s\n    dir: /etc\n", []string{`dir "/etc" must be a relative path`}},
		"bad state":               {"version: 1\nprojects:\n  - name: a\n    state: \"-x y\"\n", []string{`state "-x y"`}},
		"workspace":               {"version: 1\nprojects:\n  - name: a\n    state: s\n    workspace: prod\n", []string{`workspace "prod": only "default"`}},
		"bad glob":                {"version: 1\nprojects:\n  - name: a\n    state: s\n    when_modified: [\"a**\"]\n", []string{`when_modified "a**"`}},
		"wrong type":              {"version: one\nprojects: []\n", []string{"kl.yaml:1: cannot unmarshal"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseConfig([]byte(tc.yaml), "")
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("want a *ConfigError, got %v", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
