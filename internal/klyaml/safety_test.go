package klyaml

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilolock/kilolock/internal/engine"
)

// baseYAML is a default branch's kl.yaml: approval at the top level, prod
// applied on merge, dev without requirements.
const baseYAML = `version: 1
apply_requirements: [approved]
projects:
  - name: prod
    dir: prod
    state: acme/prod
    apply_trigger: merge
  - name: dev
    dir: dev
    state: acme/dev
    apply_requirements: []
`

func mustParse(t *testing.T, src string, trigger Trigger) *Config {
	t.Helper()
	cfg, err := Parse([]byte(src), trigger)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return cfg
}

// rules is each project's safety keys, as "NAME: TRIGGER [REQS]".
func rules(cfg *Config) []string {
	var out []string
	for _, p := range cfg.Projects {
		out = append(out, p.Name+": "+string(p.ApplyTrigger)+" "+safetyKeys[0].show(&p))
	}
	return out
}

// TestMergeFromDefaultBranch: a pull request's kl.yaml against the
// default branch's (ADR 0040): a key it does not set is the base's, one
// it sets may be as tight or tighter, a looser one is a problem naming
// the line, the project, the key, both values and where the base's came
// from.
func TestMergeFromDefaultBranch(t *testing.T) {
	t.Parallel()
	base := BaseOf(mustParse(t, baseYAML, ""))
	tests := map[string]struct {
		pr       string
		want     []string // rules of the merged projects
		problems []string
	}{
		"the base itself": {pr: baseYAML, want: []string{"prod: merge [approved]", "dev: comment []"}},
		"keys left out take the base's": {
			pr:   "version: 1\nprojects:\n  - name: prod\n    dir: prod\n    state: acme/prod\n  - name: dev\n    dir: dev\n    state: acme/dev\n",
			want: []string{"prod: merge [approved]", "dev: comment []"},
		},
		"a key set empty counts as left out": {
			pr:   "version: 1\napply_requirements:\nprojects:\n  - name: prod\n    dir: prod\n    state: acme/prod\n",
			want: []string{"prod: merge [approved]"},
		},
		"tighter: a requirement added, dev applied on merge": {
			pr: "version: 1\napply_requirements: [mergeable, approved]\nprojects:\n  - name: prod\n    dir: prod\n    state: acme/prod\n" +
				"  - name: dev\n    dir: dev\n    state: acme/dev\n    apply_trigger: merge\n",
			want: []string{"prod: merge [mergeable, approved]", "dev: merge [mergeable, approved]"},
		},
		"the top level drops approval": {
			pr: "version: 1\napply_requirements: []\nprojects:\n  - name: prod\n    dir: prod\n    state: acme/prod\n" +
				"  - name: dev\n    dir: dev\n    state: acme/dev\n",
			problems: []string{`kl.yaml:2: project "prod": apply_requirements [] loosens [approved] set by the default branch's kl.yaml (line 2): ` +
				`a pull request may add to the list, not leave out what its base has; change it on the default branch first`},
		},
		"a project drops approval and its merge trigger": {
			pr: "version: 1\nprojects:\n  - name: prod\n    dir: prod\n    state: acme/prod\n    apply_trigger: comment\n    apply_requirements: [mergeable]\n",
			problems: []string{
				`kl.yaml:6: project "prod": apply_trigger comment loosens merge set by the default branch's kl.yaml (line 7): ` +
					`a pull request may only move it along comment → merge, not back; change it on the default branch first`,
				`kl.yaml:7: project "prod": apply_requirements [mergeable] loosens [approved] set by the default branch's kl.yaml (line 2): ` +
					`a pull request may add to the list, not leave out what its base has; change it on the default branch first`,
			},
		},
		"a renamed project keeps its state's rules": {
			pr:       "version: 1\nprojects:\n  - name: production\n    dir: prod\n    state: acme/prod\n    apply_trigger: comment\n",
			problems: []string{`kl.yaml:6: project "production": apply_trigger comment loosens merge set by the default branch's kl.yaml (line 7): ` + "a pull request may only move it along comment → merge, not back; change it on the default branch first"},
		},
		"a new state gets the base's top level": {
			pr:       "version: 1\nprojects:\n  - name: new\n    state: acme/new\n    apply_requirements: []\n",
			problems: []string{`kl.yaml:5: project "new": apply_requirements [] loosens [approved] set by the default branch's kl.yaml (line 2): ` + "a pull request may add to the list, not leave out what its base has; change it on the default branch first"},
		},
		"a new state inherits the base's top level": {
			pr:   "version: 1\nprojects:\n  - name: new\n    state: acme/new\n",
			want: []string{"new: comment [approved]"},
		},
		"anchors: the line is the anchor's": {
			pr:       "version: 1\nx-rules: &rules\n  apply_requirements: []\nprojects:\n  - <<: *rules\n    name: prod\n    dir: prod\n    state: acme/prod\n",
			problems: []string{`kl.yaml:3: project "prod": apply_requirements [] loosens [approved] set by the default branch's kl.yaml (line 2): ` + "a pull request may add to the list, not leave out what its base has; change it on the default branch first"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := Merge(mustParse(t, tc.pr, ""), base)
			if tc.problems != nil {
				var ce *Error
				if !errors.As(err, &ce) {
					t.Fatalf("Merge = %v, want problems", err)
				}
				if d := cmp.Diff(tc.problems, ce.Problems); d != "" {
					t.Fatalf("problems (-want +got):\n%s", d)
				}
				return
			}
			if err != nil {
				t.Fatalf("Merge: %v", err)
			}
			if d := cmp.Diff(tc.want, rules(got)); d != "" {
				t.Fatalf("merged rules (-want +got):\n%s", d)
			}
		})
	}
}

// TestMergeWithoutKLYAML: a default branch without kl.yaml is klbot's
// defaults (KLBOT_APPLY_TRIGGER merge here); a pull request without one
// takes its base's rules.
func TestMergeWithoutKLYAML(t *testing.T) {
	t.Parallel()
	base := BaseOf(Default("acme/infra", TriggerMerge))
	_, err := Merge(mustParse(t, "version: 1\napply_trigger: comment\nprojects:\n  - name: a\n    state: acme/infra\n", TriggerMerge), base)
	want := `kl.yaml:2: project "a": apply_trigger comment loosens merge (klbot's default: the default branch has no kl.yaml): ` +
		"a pull request may only move it along comment → merge, not back; change it on the default branch first"
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0] != want {
		t.Fatalf("Merge = %v, want %s", err, want)
	}
	got, err := Merge(Default("acme/infra", ""), BaseOf(mustParse(t, baseYAML, "")))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"default: comment [approved]"}, rules(got)); d != "" {
		t.Fatalf("a pull request without kl.yaml (-want +got):\n%s", d)
	}
}

// serverYAML requires approval everywhere, lets acme/infra's kl.yaml change
// apply_requirements, and applies acme/locked on merge.
const serverYAML = `repos:
  - id: /.*/
    apply_requirements: [approved]
  - id: acme/infra
    allowed_overrides: [apply_requirements]
  - id: acme/locked
    apply_trigger: merge
`

// TestMergeFromServerConfig: with KLBOT_REPO_CONFIG, the matching entries
// are the base (a later entry's keys over an earlier one's), an allowed
// override may be anything, the others only tighter.
func TestMergeFromServerConfig(t *testing.T) {
	t.Parallel()
	s, err := ParseServer([]byte(serverYAML), "repos.yaml")
	if err != nil {
		t.Fatal(err)
	}
	loose := "version: 1\napply_requirements: []\nprojects:\n  - name: a\n    state: s\n"
	plain := "version: 1\nprojects:\n  - name: a\n    state: s\n"
	tests := map[string]struct {
		repo, pr string
		trigger  Trigger // KLBOT_APPLY_TRIGGER
		want     []string
		problem  string
	}{
		"klbot's default trigger": {repo: "acme/other", trigger: TriggerMerge, pr: "version: 1\napply_trigger: comment\nprojects:\n  - name: a\n    state: s\n",
			problem: `kl.yaml:2: project "a": apply_trigger comment loosens merge (klbot's default: no KLBOT_REPO_CONFIG entry for acme/other sets it): a pull request may only move it along comment → merge, not back; ask klbot's operator to allow it (KLBOT_REPO_CONFIG allowed_overrides) or change it there`},
		"allowed override":              {repo: "acme/infra", pr: loose, want: []string{"a: comment []"}},
		"exact ids ignore case":         {repo: "ACME/Infra", pr: loose, want: []string{"a: comment []"}},
		"left out: the server's value":  {repo: "acme/infra", pr: plain, want: []string{"a: comment [approved]"}},
		"later entries add their keys":  {repo: "acme/locked", pr: plain, want: []string{"a: merge [approved]"}},
		"tighter without an allowance":  {repo: "acme/other", pr: "version: 1\napply_trigger: merge\napply_requirements: [approved, mergeable]\nprojects:\n  - name: a\n    state: s\n", want: []string{"a: merge [approved, mergeable]"}},
		"not allowed: requirements":     {repo: "acme/other", pr: loose, problem: `kl.yaml:2: project "a": apply_requirements [] loosens [approved] set by KLBOT_REPO_CONFIG (repos.yaml line 3): a pull request may add to the list, not leave out what its base has; ask klbot's operator to allow it (KLBOT_REPO_CONFIG allowed_overrides) or change it there`},
		"not allowed: trigger":          {repo: "acme/locked", pr: "version: 1\napply_trigger: comment\nprojects:\n  - name: a\n    state: s\n", problem: `kl.yaml:2: project "a": apply_trigger comment loosens merge set by KLBOT_REPO_CONFIG (repos.yaml line 7): a pull request may only move it along comment → merge, not back; ask klbot's operator to allow it (KLBOT_REPO_CONFIG allowed_overrides) or change it there`},
		"unset by the server: defaults": {repo: "acme/infra", pr: "version: 1\napply_trigger: merge\nprojects:\n  - name: a\n    state: s\n", want: []string{"a: merge [approved]"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			base, ok := s.Base(tc.repo, tc.trigger)
			if !ok {
				t.Fatalf("no entry matches %s", tc.repo)
			}
			got, err := Merge(mustParse(t, tc.pr, ""), base)
			if tc.problem != "" {
				var ce *Error
				if !errors.As(err, &ce) || len(ce.Problems) != 1 || ce.Problems[0] != tc.problem {
					t.Fatalf("Merge = %v\nwant %s", err, tc.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, rules(got)); d != "" {
				t.Fatalf("merged rules (-want +got):\n%s", d)
			}
		})
	}
	exact, err := ParseServer([]byte("repos:\n  - id: acme/infra\n    apply_trigger: merge\n"), "repos.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := exact.Base("acme/other", ""); ok {
		t.Errorf("an entry for acme/infra matched acme/other: its base must be the default branch's kl.yaml")
	}
	var none *ServerConfig // KLBOT_REPO_CONFIG unset
	if _, ok := none.Base("acme/infra", ""); ok {
		t.Errorf("no KLBOT_REPO_CONFIG matched a repository")
	}
}

// TestTighten: at apply, a stored project's rules are joined with the base
// as it is then — tightened where the base is tighter, never loosened,
// allowed overrides kept.
func TestTighten(t *testing.T) {
	t.Parallel()
	fromFile := BaseOf(mustParse(t, baseYAML, ""))
	s, err := ParseServer([]byte(serverYAML), "repos.yaml")
	if err != nil {
		t.Fatal(err)
	}
	infra, _ := s.Base("acme/infra", "")
	stored := func(state string, trig Trigger, reqs ...Requirement) Project {
		return Project{Name: "p", State: state, ApplyTrigger: trig, ApplyRequirements: append([]Requirement{}, reqs...)}
	}
	tests := map[string]struct {
		p    Project
		base *Base
		want string
	}{
		"tightened to the base":          {stored("acme/prod", TriggerComment), fromFile, "p: merge [approved]"},
		"its own tighter rules kept":     {stored("acme/dev", TriggerMerge, RequireMergeable), fromFile, "p: merge [mergeable]"},
		"requirements joined":            {stored("acme/prod", TriggerMerge, RequireMergeable), fromFile, "p: merge [mergeable, approved]"},
		"a state the base does not list": {stored("acme/new", TriggerComment), fromFile, "p: comment [approved]"},
		"an allowed override kept":       {stored("acme/x", TriggerComment), infra, "p: comment []"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := Tighten(tc.p, tc.base)
			if s := rules(&Config{Projects: []Project{got}}); s[0] != tc.want {
				t.Fatalf("Tighten = %s, want %s", s[0], tc.want)
			}
		})
	}
}

// TestSafetyKeysParsed: every safety key is a key of kl.yaml's top level
// and projects, and of a KLBOT_REPO_CONFIG entry, so that a new one is
// read wherever it can be set.
func TestSafetyKeysParsed(t *testing.T) {
	t.Parallel()
	for _, k := range SafetyKeys() {
		if !slices.Contains(topKeys, k) || !slices.Contains(projectKeys, k) {
			t.Errorf("safety key %s is not a kl.yaml key at the top level and in projects", k)
		}
		src := "repos:\n  - id: a/b\n    " + k + ": nonsense\n"
		_, err := ParseServer([]byte(src), "repos.yaml")
		if err == nil || strings.Contains(err.Error(), "unknown field") {
			t.Errorf("safety key %s in a repos entry: %v, want it read (and its value refused)", k, err)
		}
	}
}

// TestParseServerErrors: a bad KLBOT_REPO_CONFIG file names each problem
// with the file's name and line.
func TestParseServerErrors(t *testing.T) {
	t.Parallel()
	tests := map[string]struct{ src, want string }{
		"empty":           {"", "repos.yaml:1: the file is empty: want at least repos: with one entry"},
		"no repos":        {"x-a: 1\n", "repos.yaml:1: no repos: list at least one entry (- id: owner/name) under repos"},
		"empty repos":     {"repos: []\n", "repos.yaml:1: no repos: list at least one entry"},
		"not a list":      {"repos: acme/infra\n", `repos.yaml:1: repos: want a list of entries (- id: owner/name), got the string "acme/infra"`},
		"unknown top":     {"repo:\n  - id: a/b\n", `repos.yaml:1: unknown field "repo" at the top level`},
		"unknown key":     {"repos:\n  - id: a/b\n    workflow: custom\n", `repos.yaml:3: unknown field "workflow" in a repos entry`},
		"no id":           {"repos:\n  - apply_trigger: merge\n", "repos.yaml:2: repos entry 1: id is required"},
		"bad regex":       {"repos:\n  - id: /acme/(/\n", `repos.yaml:2: repos entry 1: id "/acme/(/": not a regular expression`},
		"not owner/name":  {"repos:\n  - id: acme\n", `repos.yaml:2: repos entry 1: id "acme": want owner/name, or a regular expression between slashes`},
		"bad override":    {"repos:\n  - id: a/b\n    allowed_overrides: [workflow]\n", `repos.yaml:3: repos entry "a/b": allowed_overrides: "workflow" is not a safety key: want apply_requirements or apply_trigger`},
		"bad trigger":     {"repos:\n  - id: a/b\n    apply_trigger: push\n", `repos.yaml:3: repos entry "a/b": apply_trigger "push": want comment or merge`},
		"bad requirement": {"repos:\n  - id: a/b\n    apply_requirements: [reviewed]\n", `repos.yaml:3: repos entry "a/b": apply_requirements: "reviewed": want approved or mergeable`},
		"syntax":          {"repos:\n  - id: a/b\n\tapply_trigger: merge\n", "repos.yaml:3: "},
		"two documents":   {"repos:\n  - id: a/b\n---\nrepos: []\n", "repos.yaml:3: a second YAML document starts here (---): repos.yaml is one document"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseServer([]byte(tc.src), "repos.yaml")
			var ce *Error
			if !errors.As(err, &ce) || !strings.HasPrefix(strings.Join(ce.Problems, "\n"), tc.want) {
				t.Fatalf("ParseServer = %v\nwant a problem starting %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "invalid repos.yaml: ") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

// TestOnRevertFromBase: on_revert is a safety key (ADR 0046, ADR 0040):
// a pull request cannot turn the default branch's fail into warn, may
// turn warn into fail, inherits fail by leaving the key out, and a
// project stored before the key ("") is tightened to its base at apply.
func TestOnRevertFromBase(t *testing.T) {
	t.Parallel()
	base := BaseOf(mustParse(t, "version: 1\non_revert: fail\nprojects:\n  - name: prod\n    state: acme/prod\n", ""))
	_, err := Merge(mustParse(t, "version: 1\nprojects:\n  - name: prod\n    state: acme/prod\n    on_revert: warn\n", ""), base)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Merge of on_revert: warn over fail = %v, want a problem", err)
	}
	want := []string{`kl.yaml:5: project "prod": on_revert warn loosens fail set by the default branch's kl.yaml (line 2): ` +
		`a pull request may only move it along warn → fail, not back; change it on the default branch first`}
	if d := cmp.Diff(want, ce.Problems); d != "" {
		t.Fatalf("problems (-want +got):\n%s", d)
	}
	got, err := Merge(mustParse(t, "version: 1\nprojects:\n  - name: prod\n    state: acme/prod\n", ""), base)
	if err != nil || got.Projects[0].OnRevert != RevertFail {
		t.Fatalf("on_revert left out: %v, %+v; want fail from the base", err, got)
	}
	warnBase := BaseOf(mustParse(t, "version: 1\nprojects:\n  - name: prod\n    state: acme/prod\n", ""))
	got, err = Merge(mustParse(t, "version: 1\nprojects:\n  - name: prod\n    state: acme/prod\n    on_revert: fail\n", ""), warnBase)
	if err != nil || got.Projects[0].OnRevert != RevertFail {
		t.Fatalf("on_revert: fail over warn: %v, %+v; want fail (tighter)", err, got)
	}
	if p := Tighten(Project{Name: "prod", State: "acme/prod"}, base); p.OnRevert != RevertFail {
		t.Fatalf("Tighten of a project stored without on_revert = %q, want fail", p.OnRevert)
	}
	if p := Tighten(Project{Name: "prod", State: "acme/prod"}, warnBase); p.OnRevert != RevertWarn {
		t.Fatalf("Tighten of a project stored without on_revert under a warn base = %q, want warn", p.OnRevert)
	}
}

// TestMergeQueueFromBase: merge_queue is a safety key (ADR 0058, ADR
// 0040): a pull request cannot turn the default branch's true off, may
// turn it on, inherits it by leaving the key out, and a value that is not
// a boolean is a problem naming the key.
func TestMergeQueueFromBase(t *testing.T) {
	t.Parallel()
	base := BaseOf(mustParse(t, "version: 1\nmerge_queue: true\nprojects:\n  - name: prod\n    state: acme/prod\n", ""))
	_, err := Merge(mustParse(t, "version: 1\nprojects:\n  - name: prod\n    state: acme/prod\n    merge_queue: false\n", ""), base)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Merge of merge_queue: false over true = %v, want a problem", err)
	}
	want := []string{`kl.yaml:5: project "prod": merge_queue false loosens true set by the default branch's kl.yaml (line 2): ` +
		`a pull request may turn it on, not off; change it on the default branch first`}
	if d := cmp.Diff(want, ce.Problems); d != "" {
		t.Fatalf("problems (-want +got):\n%s", d)
	}
	got, err := Merge(mustParse(t, "version: 1\nprojects:\n  - name: prod\n    state: acme/prod\n", ""), base)
	if err != nil || !got.Projects[0].MergeQueue {
		t.Fatalf("merge_queue left out: %v, %+v; want true from the base", err, got)
	}
	offBase := BaseOf(mustParse(t, "version: 1\nprojects:\n  - name: prod\n    state: acme/prod\n", ""))
	if got, err := Merge(mustParse(t, "version: 1\nprojects:\n  - name: prod\n    state: acme/prod\n    merge_queue: true\n", ""), offBase); err != nil || !got.Projects[0].MergeQueue {
		t.Fatalf("merge_queue: true over the default: %v, %+v; want true (tighter)", err, got)
	}
	if p := Tighten(Project{Name: "prod", State: "acme/prod"}, base); !p.MergeQueue {
		t.Fatalf("Tighten under a merge_queue: true base = %v, want true", p.MergeQueue)
	}
	_, err = Parse([]byte("version: 1\nprojects:\n  - name: prod\n    state: acme/prod\n    merge_queue: yes please\n"), "")
	if !errors.As(err, &ce) || len(ce.Problems) != 1 || !strings.Contains(ce.Problems[0], `kl.yaml:5: project "prod": merge_queue: want true or false`) {
		t.Fatalf("merge_queue: yes please = %v, want one problem naming the key", err)
	}
}

// TestLaneAndValidateFromBase: lane and validate are safety keys (ADR
// 0070, ADR 0040): under the default branch's defaults (lane terraform,
// validate merge) a pull request cannot ask for the native or auto lane
// nor validate: never, may ask for validate: always; under lane: native it
// may ask for auto or terraform; a key left out is the base's, a project
// stored before the keys is tightened to its base at apply, and a bad
// value is a problem naming the key and the value.
func TestLaneAndValidateFromBase(t *testing.T) {
	t.Parallel()
	const pr = "version: 1\nprojects:\n  - name: prod\n    state: acme/prod\n"
	defaults := BaseOf(mustParse(t, pr, ""))
	_, err := Merge(mustParse(t, pr+"    lane: native\n    validate: never\n", ""), defaults)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Merge of lane: native, validate: never over the defaults = %v, want problems", err)
	}
	want := []string{
		`kl.yaml:5: project "prod": lane native loosens terraform (klbot's default: the default branch's kl.yaml does not set it): ` +
			`a pull request may only move it along native → auto → terraform, not back; change it on the default branch first`,
		`kl.yaml:6: project "prod": validate never loosens merge (klbot's default: the default branch's kl.yaml does not set it): ` +
			`a pull request may only move it along never → merge → always, not back; change it on the default branch first`,
	}
	if d := cmp.Diff(want, ce.Problems); d != "" {
		t.Fatalf("problems (-want +got):\n%s", d)
	}
	got, err := Merge(mustParse(t, pr+"    validate: always\n", ""), defaults)
	if err != nil || got.Projects[0].Lane != engine.LaneChoiceTerraform || got.Projects[0].Validate != ValidateAlways {
		t.Fatalf("validate: always over the defaults: %v, %+v; want lane terraform, validate always", err, got)
	}
	native := BaseOf(mustParse(t, "version: 1\nlane: native\nprojects:\n  - name: prod\n    state: acme/prod\n", ""))
	for _, lane := range []engine.LaneChoice{engine.LaneChoiceAuto, engine.LaneChoiceTerraform} {
		got, err := Merge(mustParse(t, pr+"    lane: "+string(lane)+"\n", ""), native)
		if err != nil || got.Projects[0].Lane != lane {
			t.Fatalf("lane: %s over native: %v, %+v; want %s (tighter)", lane, err, got, lane)
		}
	}
	if got, err := Merge(mustParse(t, pr, ""), native); err != nil || got.Projects[0].Lane != engine.LaneChoiceNative {
		t.Fatalf("lane left out under a native base: %v, %+v; want native", err, got)
	}
	if p := Tighten(Project{Name: "prod", State: "acme/prod"}, defaults); p.Lane != engine.LaneChoiceTerraform || p.Validate != ValidateMerge {
		t.Fatalf("Tighten of a project stored without the keys = %q, %q; want terraform, merge", p.Lane, p.Validate)
	}
	if p := Tighten(Project{Name: "prod", State: "acme/prod", Lane: engine.LaneChoiceNative, Validate: ValidateNever}, defaults); p.Lane != engine.LaneChoiceTerraform || p.Validate != ValidateMerge {
		t.Fatalf("Tighten of native, never under the defaults = %q, %q; want terraform, merge", p.Lane, p.Validate)
	}
	_, err = Parse([]byte("version: 1\nlane: fast\nprojects:\n  - name: prod\n    state: acme/prod\n    validate: sometimes\n"), "")
	want = []string{`kl.yaml:2: lane "fast": want terraform or native or auto`,
		`kl.yaml:6: project "prod": validate "sometimes": want merge or always or never`}
	if !errors.As(err, &ce) {
		t.Fatalf("bad lane and validate = %v, want problems", err)
	}
	if d := cmp.Diff(want, ce.Problems); d != "" {
		t.Fatalf("problems (-want +got):\n%s", d)
	}
}
