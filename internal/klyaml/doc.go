// Package klyaml reads kl.yaml, a repository's Kilolock configuration
// (docs/kl-yaml.md): which Terraform root modules ("projects") klbot plans
// and applies, against which Kilolock state, when a pull request changes
// which files, and what an apply needs.
//
// Its one job is to turn the file's bytes into a Config or into every
// problem with its line (Parse, Error), to say which projects a set of
// changed files touches (Select, Project.Touches), and to hold a pull
// request's kl.yaml to the base of its safety keys — the default branch's
// kl.yaml (BaseOf) or klbot's server-side file KLBOT_REPO_CONFIG
// (ParseServer, ServerConfig.Base) — at plan (Merge) and at apply
// (Tighten), ADR 0040. It does no I/O, and knows nothing of GitHub or of
// the engine's runs. The rules it implements:
//
//   - strict YAML: one document, unknown keys are errors, a key set twice
//     is an error, top-level keys starting with "x-" are ignored (a place
//     for shared anchors); anchors, aliases and merge keys work as in YAML,
//     bounded so that a small file cannot expand without end;
//   - version 1; at least one project; project names unique and valid
//     (ValidProjectName); dir relative and inside the repository; state a
//     valid Kilolock state name (engine.ValidateStateName) used by one
//     project only — one state is one Terraform configuration;
//   - names, dirs, states and globs of printable characters only
//     (engine.TextProblem);
//   - apply_trigger comment or merge (Trigger); apply_requirements approved
//     or mergeable (Requirement); defaults from the top level, whose own
//     defaults are the operator's (KLBOT_APPLY_TRIGGER) and none;
//   - when_modified globs: path.Match per segment, "**" a whole segment
//     for any number of directories, relative to the project's dir
//     ("../modules/**" reaches a sibling);
//   - every problem is reported as "kl.yaml:LINE: what", in line order,
//     LINE being the line of the offending key or value;
//   - the safety keys (SafetyKeys: apply_requirements, apply_trigger) a
//     pull request's kl.yaml leaves out are its base's; one it sets may be
//     as tight or tighter (apply_requirements a superset, apply_trigger
//     comment → merge), or anything where KLBOT_REPO_CONFIG's
//     allowed_overrides lists it; a looser one is a problem naming the
//     key, both values and where the base's came from.
//
// A repository without kl.yaml has Default: one project in the root.
package klyaml
