package bot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kilolock/kilolock/internal/engine"
)

// ConfigFile is the repository configuration's path at the repository root.
const ConfigFile = "kl.yaml"

// Trigger says what applies a project's plan: a "/kl apply" comment (or the
// check run's Apply button), or the pull request's merge.
type Trigger string

// Triggers.
const (
	TriggerComment Trigger = "comment"
	TriggerMerge   Trigger = "merge"
)

// Requirement is a condition an apply needs besides write permission and a
// plan for the pull request's current head (DESIGN.md apply step 1).
type Requirement string

// Requirements.
const (
	// RequireApproved: someone approved the pull request and nobody's latest
	// review requests changes (GitHub's reviews).
	RequireApproved Requirement = "approved"
	// RequireMergeable: GitHub computed the pull request as mergeable.
	RequireMergeable Requirement = "mergeable"
)

// DefaultWhenModified is the when_modified of a project that sets none:
// Terraform files and var files in the project directory and below it.
var DefaultWhenModified = []string{"*.tf", "*.tfvars", "**/*.tf", "**/*.tfvars"}

// RepoConfig is kl.yaml (docs/kl-yaml.md): the projects of a repository,
// each one Terraform root module planned and applied against one state.
type RepoConfig struct {
	Version int
	// PlanDrafts plans draft pull requests too (default: drafts are skipped).
	PlanDrafts bool
	Projects   []Project
	// Default is true when the repository has no kl.yaml and Projects is the
	// default project.
	Default bool
}

// Project is one kl.yaml project with the top-level defaults applied.
type Project struct {
	Name string `json:"name"`
	// Dir is the root module's directory, relative to the repository root,
	// cleaned ("." for the root); never absolute, never above the root.
	Dir   string `json:"dir"`
	State string `json:"state"`
	// Workspace is "default": Kilolock owns one state per project.
	Workspace string `json:"workspace"`
	// WhenModified are globs relative to Dir ("**" crosses directories,
	// "../modules/**" reaches outside it); a changed file matching one
	// touches the project.
	WhenModified      []string      `json:"when_modified"`
	ApplyTrigger      Trigger       `json:"apply_trigger"`
	ApplyRequirements []Requirement `json:"apply_requirements"`
}

// ConfigError is an invalid kl.yaml: each problem as "kl.yaml:LINE: what".
type ConfigError struct {
	Problems []string
}

func (e *ConfigError) Error() string {
	return "invalid " + ConfigFile + ": " + strings.Join(e.Problems, "; ")
}

// DefaultConfig is the configuration of a repository without kl.yaml: one
// project "default" in the repository root on state "<owner>/<repo>",
// planned when a .tf or .tfvars file changes, applied by trigger (""
// is comment), no extra requirements.
func DefaultConfig(repo string, trigger Trigger) *RepoConfig {
	if trigger == "" {
		trigger = TriggerComment
	}
	return &RepoConfig{Version: 1, Default: true, Projects: []Project{{
		Name: "default", Dir: ".", State: repo, Workspace: "default",
		WhenModified: DefaultWhenModified, ApplyTrigger: trigger, ApplyRequirements: []Requirement{},
	}}}
}

// fileConfig and fileProject are kl.yaml as written; pointers tell an
// absent key from an empty one.
type fileConfig struct {
	Version           int            `yaml:"version"`
	ApplyTrigger      *Trigger       `yaml:"apply_trigger"`
	ApplyRequirements *[]Requirement `yaml:"apply_requirements"`
	PlanDrafts        bool           `yaml:"plan_drafts"`
	Projects          []fileProject  `yaml:"projects"`
}

type fileProject struct {
	Name              string         `yaml:"name"`
	Dir               string         `yaml:"dir"`
	State             string         `yaml:"state"`
	Workspace         string         `yaml:"workspace"`
	WhenModified      *[]string      `yaml:"when_modified"`
	ApplyTrigger      *Trigger       `yaml:"apply_trigger"`
	ApplyRequirements *[]Requirement `yaml:"apply_requirements"`
}

// UnmarshalYAML accepts "comment" or "merge", saying the line otherwise.
func (t *Trigger) UnmarshalYAML(n *yaml.Node) error {
	switch Trigger(n.Value) {
	case TriggerComment, TriggerMerge:
		*t = Trigger(n.Value)
		return nil
	}
	return fmt.Errorf("line %d: apply_trigger %q: want comment or merge", n.Line, n.Value)
}

// UnmarshalYAML accepts "approved" or "mergeable", saying the line otherwise.
func (r *Requirement) UnmarshalYAML(n *yaml.Node) error {
	switch Requirement(n.Value) {
	case RequireApproved, RequireMergeable:
		*r = Requirement(n.Value)
		return nil
	}
	return fmt.Errorf("line %d: apply_requirements: %q: want approved or mergeable", n.Line, n.Value)
}

var (
	projectNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	lineRE        = regexp.MustCompile(`line (\d+): `)
	unknownRE     = regexp.MustCompile(`field (\S+) not found in type bot\.file(\w+)`)
)

// ParseConfig parses kl.yaml strictly (unknown keys are errors) and
// validates it; repo ("owner/name") is only used in messages. Every
// problem is reported as "kl.yaml:LINE: what" in a *ConfigError. Rules: version
// must be 1; at least one project; project names unique, 1–64 letters,
// digits, '.', '_', '-'; dir relative and inside the repository; state a
// valid Kilolock state name (engine.ValidateStateName); workspace empty or
// "default"; when_modified globs valid; apply_trigger comment or merge;
// apply_requirements approved or mergeable. Defaults: dir ".", workspace
// "default", when_modified DefaultWhenModified, apply_trigger and
// apply_requirements from the top level (whose defaults are defaultTrigger
// — KLBOT_APPLY_TRIGGER; "" is comment — and none).
func ParseConfig(data []byte, defaultTrigger Trigger) (*RepoConfig, error) {
	var fc fileConfig
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&fc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &ConfigError{Problems: []string{ConfigFile + ":1: the file is empty: want at least version: 1 and projects"}}
		}
		return nil, &ConfigError{Problems: yamlProblems(err)}
	}
	lines := projectLines(data)
	var problems []string
	bad := func(line int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: %s", ConfigFile, line, fmt.Sprintf(format, args...)))
	}
	if fc.Version != 1 {
		bad(keyLine(data, "version"), "version %d: want version: 1", fc.Version)
	}
	if len(fc.Projects) == 0 {
		bad(keyLine(data, "projects"), "no projects: list at least one under projects")
	}
	topTrigger := defaultTrigger
	if topTrigger == "" {
		topTrigger = TriggerComment
	}
	if fc.ApplyTrigger != nil {
		topTrigger = *fc.ApplyTrigger
	}
	topReqs := []Requirement{}
	if fc.ApplyRequirements != nil {
		topReqs = *fc.ApplyRequirements
	}
	cfg := &RepoConfig{Version: fc.Version, PlanDrafts: fc.PlanDrafts}
	seen := map[string]int{}
	for i, fp := range fc.Projects {
		line := 0
		if i < len(lines) {
			line = lines[i]
		}
		p := Project{Name: fp.Name, Dir: fp.Dir, State: fp.State, Workspace: fp.Workspace,
			WhenModified: DefaultWhenModified, ApplyTrigger: topTrigger, ApplyRequirements: topReqs}
		if fp.WhenModified != nil {
			p.WhenModified = *fp.WhenModified
		}
		if fp.ApplyTrigger != nil {
			p.ApplyTrigger = *fp.ApplyTrigger
		}
		if fp.ApplyRequirements != nil {
			p.ApplyRequirements = *fp.ApplyRequirements
		}
		switch {
		case p.Name == "":
			bad(line, "project %d: name is required", i+1)
		case !projectNameRE.MatchString(p.Name):
			bad(line, "project name %q: use 1-64 letters, digits, '.', '_', '-', starting with a letter or digit", p.Name)
		case seen[p.Name] > 0:
			bad(line, "project name %q is used twice (first on line %d)", p.Name, seen[p.Name])
		default:
			seen[p.Name] = line
		}
		if p.Dir == "" {
			p.Dir = "."
		}
		clean := path.Clean(p.Dir)
		if path.IsAbs(p.Dir) || clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains(p.Dir, `\`) {
			bad(line, "project %q: dir %q must be a relative path inside the repository", p.Name, p.Dir)
		}
		p.Dir = clean
		if p.State == "" {
			bad(line, "project %q: state is required (the Kilolock state it plans against, e.g. acme/infra/prod)", p.Name)
		} else if err := engine.ValidateStateName(p.State); err != nil {
			bad(line, "project %q: state %q: use at most %d characters in segments separated by single '/', each of letters, digits, '.', '_', '-', "+
				"starting with a letter or digit and not ending in '.'", p.Name, p.State, engine.MaxStateName)
		}
		if p.Workspace == "" {
			p.Workspace = "default"
		}
		if p.Workspace != "default" {
			bad(line, "project %q: workspace %q: only \"default\" is supported (Kilolock owns one state per project: use another project and state)", p.Name, p.Workspace)
		}
		if len(p.WhenModified) == 0 {
			bad(line, "project %q: when_modified is empty: the project would never be planned (leave it out for the default)", p.Name)
		}
		for _, g := range p.WhenModified {
			if err := validGlob(g); err != nil {
				bad(line, "project %q: when_modified %q: %v", p.Name, g, err)
			}
		}
		cfg.Projects = append(cfg.Projects, p)
	}
	if len(problems) > 0 {
		return nil, &ConfigError{Problems: problems}
	}
	return cfg, nil
}

// Project returns the named project.
func (c *RepoConfig) Project(name string) (Project, bool) {
	for _, p := range c.Projects {
		if p.Name == name {
			return p, true
		}
	}
	return Project{}, false
}

// Names lists the project names in file order.
func (c *RepoConfig) Names() []string {
	out := make([]string, len(c.Projects))
	for i, p := range c.Projects {
		out[i] = p.Name
	}
	return out
}

// yamlProblems rewrites the YAML decoder's errors as "kl.yaml:LINE: what".
func yamlProblems(err error) []string {
	var te *yaml.TypeError
	msgs := []string{err.Error()}
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	out := make([]string, 0, len(msgs))
	for _, m := range msgs {
		m = strings.TrimPrefix(m, "yaml: ")
		line := "1"
		if sm := lineRE.FindStringSubmatch(m); sm != nil {
			line = sm[1]
			m = strings.Replace(m, sm[0], "", 1)
		}
		if sm := unknownRE.FindStringSubmatch(m); sm != nil {
			where := "at the top level"
			if sm[2] == "Project" {
				where = "in a project"
			}
			m = fmt.Sprintf("unknown field %q %s (see docs/kl-yaml.md)", sm[1], where)
		}
		out = append(out, ConfigFile+":"+line+": "+m)
	}
	return out
}

// projectLines returns the line of each item of the top-level "projects"
// sequence.
func projectLines(data []byte) []int {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return nil
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "projects" && m.Content[i+1].Kind == yaml.SequenceNode {
			var out []int
			for _, it := range m.Content[i+1].Content {
				out = append(out, it.Line)
			}
			return out
		}
	}
	return nil
}

// keyLine returns the line of a top-level key (1 when absent).
func keyLine(data []byte, key string) int {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return 1
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i].Line
		}
	}
	return 1
}
