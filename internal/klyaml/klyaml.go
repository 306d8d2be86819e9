package klyaml

import (
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// File is the repository configuration's path at the repository root.
const File = "kl.yaml"

// Trigger says what applies a project's plan: a "/kl apply" comment (or the
// check run's Apply button), or the pull request's merge.
type Trigger string

// Triggers.
const (
	TriggerComment Trigger = "comment"
	TriggerMerge   Trigger = "merge"
)

// Requirement is a condition an apply needs besides write permission and a
// plan for the pull request's current head (docs/design.md apply step 1).
type Requirement string

// Requirements.
const (
	// RequireApproved: someone approved the pull request and nobody's latest
	// review requests changes (GitHub's reviews).
	RequireApproved Requirement = "approved"
	// RequireMergeable: GitHub computed the pull request as mergeable.
	RequireMergeable Requirement = "mergeable"
)

// OnRevert says what a plan that would undo an earlier version's change
// does to its plan check run (ADR 0046): warn says so in it, fail also
// fails it and refuses the plan's apply.
type OnRevert string

// OnRevert values, loosest first.
const (
	RevertWarn OnRevert = "warn"
	RevertFail OnRevert = "fail"
)

// Validate says which applies of a native-lane plan first run its
// validation re-plan (the whole configuration in the terraform lane, ADR
// 0069 §9; engine.ApplyInput.Validate): the apply at merge only, every
// apply, or none. A safety key (ADR 0040): never is the loosest, always
// the tightest.
type Validate string

// Validate values, loosest first.
const (
	ValidateNever  Validate = "never"
	ValidateMerge  Validate = "merge"
	ValidateAlways Validate = "always"
)

// DefaultWhenModified is the when_modified of a project that sets none:
// Terraform files and var files in the project directory and below it.
var DefaultWhenModified = []string{"*.tf", "*.tfvars", "**/*.tf", "**/*.tfvars"}

// Config is kl.yaml (docs/kl-yaml.md): the projects of a repository,
// each one Terraform root module planned and applied against one state.
type Config struct {
	Version int
	// PlanDrafts plans draft pull requests too (default: drafts are skipped).
	PlanDrafts bool
	Projects   []Project
	// Default is true when the repository has no kl.yaml and Projects is the
	// default project.
	Default bool

	// top holds the top-level rules (apply_trigger, apply_requirements)
	// with their defaults: a project's, unless it sets its own.
	top Project
	// sites is the line of each key the file sets, by project name ("":
	// the top level); empty for Default. Merge tells a key a pull request
	// sets from one it leaves to its base by it.
	sites map[siteKey]int
}

// siteKey is a key of a project ("" for the top level) of kl.yaml.
type siteKey struct{ project, key string }

// site is the line kl.yaml sets key for project on — the project's own
// key, else the top level's — or 0 when it sets none.
func (c *Config) site(project, key string) int {
	if line := c.sites[siteKey{project, key}]; line > 0 {
		return line
	}
	return c.sites[siteKey{"", key}]
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
	// OnRevert is what a plan that would undo an earlier version's change
	// does (ADR 0046); "" (a project stored before the key) is warn.
	OnRevert OnRevert `json:"on_revert,omitempty"`
	// MergeQueue makes klbot judge the project's plans in the merge
	// groups of GitHub's merge queue (ADR 0058): a pull request whose plan
	// conflicts with one ahead of it in the group fails the group's "kl"
	// check run. Default false: the group's "kl" check run passes, saying
	// it judged nothing. A safety key: true is the tighter value.
	MergeQueue bool `json:"merge_queue,omitempty"`
	// Lane is the lane a pull request's plan asks for (ADR 0069, ADR
	// 0070): terraform (default), native or auto. A safety key: native
	// is the loosest, terraform the tightest; "" (a project stored
	// before the key) is terraform.
	Lane engine.LaneChoice `json:"lane,omitempty"`
	// Validate is when an apply of a native-lane plan validates it first
	// (ADR 0069 §9): merge (default), always or never. A safety key; ""
	// (stored before the key) is merge.
	Validate Validate `json:"validate,omitempty"`
}

// Error is an invalid kl.yaml (or KLBOT_REPO_CONFIG file, or a pull
// request's kl.yaml loosening a safety key: Merge): each problem as
// "kl.yaml:LINE: what".
type Error struct {
	// File is the file's name as in Problems ("" is kl.yaml).
	File     string
	Problems []string
}

func (e *Error) Error() string {
	name := e.File
	if name == "" {
		name = File
	}
	return "invalid " + name + ": " + strings.Join(e.Problems, "; ")
}

// Default is the configuration of a repository without kl.yaml: one
// project "default" in the repository root on state "<owner>/<repo>",
// planned when a .tf or .tfvars file changes, applied by trigger (""
// is comment), no extra requirements.
func Default(repo string, trigger Trigger) *Config {
	top := defaultRules(trigger)
	return &Config{Version: 1, Default: true, top: top, Projects: []Project{{
		Name: "default", Dir: ".", State: repo, Workspace: "default",
		WhenModified: DefaultWhenModified, ApplyTrigger: top.ApplyTrigger, ApplyRequirements: []Requirement{}, OnRevert: top.OnRevert,
		Lane: top.Lane, Validate: top.Validate,
	}}}
}

// MaxBytes caps kl.yaml: a larger file is refused before it is parsed
// (the reader's rule; it also bounds syntaxProblem's search).
const MaxBytes = 1 << 20

// ValidProjectName reports whether name is a valid project name: 1–64
// letters, digits, '.', '_', '-', starting with a letter or digit (the
// rule of kl.yaml's name, and of "/kl … -p PROJECT").
func ValidProjectName(name string) bool { return projectNameRE.MatchString(name) }

// Project returns the named project.
func (c *Config) Project(name string) (Project, bool) {
	for _, p := range c.Projects {
		if p.Name == name {
			return p, true
		}
	}
	return Project{}, false
}

// Names lists the project names in file order.
func (c *Config) Names() []string {
	out := make([]string, len(c.Projects))
	for i, p := range c.Projects {
		out[i] = p.Name
	}
	return out
}
