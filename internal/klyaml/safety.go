package klyaml

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// safetyKey is a kl.yaml key that makes a rule of the apply looser or
// tighter (ADR 0040), with what "tighter" means for it.
type safetyKey struct {
	name string
	// atLeast reports whether p's value is at least as tight as base's.
	atLeast func(p, base *Project) bool
	// join sets p's value to the loosest one at least as tight as p's and
	// base's both.
	join func(p *Project, base Project)
	// take sets p's value to base's.
	take func(p *Project, base Project)
	// show is p's value as kl.yaml writes it.
	show func(p *Project) string
	// rule says what a pull request may do to the key, for messages.
	rule string
}

// safetyKeys are the kl.yaml keys a pull request's own kl.yaml must not
// loosen (ADR 0040): the rules of the apply. A key that only says what to
// plan (dir, state, when_modified, plan_drafts) is not one: a plan changes
// no infrastructure, and an apply's rules hold whatever a plan covers. A
// new key that loosens or tightens a rule is a Project field (read in
// parser.rules, defaulted from the top level) and one line here.
var safetyKeys = []safetyKey{
	supersetKey("apply_requirements", func(p *Project) *[]Requirement { return &p.ApplyRequirements }),
	orderedKey("apply_trigger", func(p *Project) *Trigger { return &p.ApplyTrigger }, TriggerComment, TriggerMerge),
	orderedKey("on_revert", func(p *Project) *OnRevert { return &p.OnRevert }, RevertWarn, RevertFail),
	boolKey("merge_queue", func(p *Project) *bool { return &p.MergeQueue }),
	// ADR 0070: the terraform lane plans the whole configuration; auto
	// takes the native lane only for a small closure.
	orderedKey("lane", func(p *Project) *engine.LaneChoice { return &p.Lane },
		engine.LaneChoiceNative, engine.LaneChoiceAuto, engine.LaneChoiceTerraform),
	orderedKey("validate", func(p *Project) *Validate { return &p.Validate }, ValidateNever, ValidateMerge, ValidateAlways),
}

// SafetyKeys lists the names of the safety keys (ADR 0040), in the order
// they are checked: apply_requirements, apply_trigger, on_revert,
// merge_queue, lane, validate.
func SafetyKeys() []string {
	out := make([]string, len(safetyKeys))
	for i, k := range safetyKeys {
		out[i] = k.name
	}
	return out
}

// supersetKey is a key whose value is a set of conditions: a superset is
// tighter (a pull request may add conditions, never leave one out).
func supersetKey[T ~string](name string, field func(*Project) *[]T) safetyKey {
	return safetyKey{
		name: name,
		atLeast: func(p, base *Project) bool {
			for _, v := range *field(base) {
				if !slices.Contains(*field(p), v) {
					return false
				}
			}
			return true
		},
		join: func(p *Project, base Project) {
			out := slices.Clone(*field(p))
			for _, v := range *field(&base) {
				if !slices.Contains(out, v) {
					out = append(out, v)
				}
			}
			*field(p) = out
		},
		take: func(p *Project, base Project) { *field(p) = append([]T{}, *field(&base)...) },
		show: func(p *Project) string {
			vs := make([]string, len(*field(p)))
			for i, v := range *field(p) {
				vs[i] = string(v)
			}
			return "[" + strings.Join(vs, ", ") + "]"
		},
		rule: "a pull request may add to the list, not leave out what its base has",
	}
}

// orderedKey is a key whose values are ordered from the loosest to the
// tightest: a later value is tighter (a pull request may move the key
// along loosestFirst, never back).
func orderedKey[T ~string](name string, field func(*Project) *T, loosestFirst ...T) safetyKey {
	rank := func(p *Project) int { return slices.Index(loosestFirst, *field(p)) }
	order := make([]string, len(loosestFirst))
	for i, v := range loosestFirst {
		order[i] = string(v)
	}
	return safetyKey{
		name:    name,
		atLeast: func(p, base *Project) bool { return rank(p) >= rank(base) },
		join: func(p *Project, base Project) {
			if rank(&base) > rank(p) {
				*field(p) = *field(&base)
			}
		},
		take: func(p *Project, base Project) { *field(p) = *field(&base) },
		show: func(p *Project) string { return string(*field(p)) },
		rule: "a pull request may only move it along " + strings.Join(order, " → ") + ", not back",
	}
}

// boolKey is a key that turns a check on: true is tighter (a pull
// request may turn it on, never off).
func boolKey(name string, field func(*Project) *bool) safetyKey {
	return safetyKey{
		name:    name,
		atLeast: func(p, base *Project) bool { return *field(p) || !*field(base) },
		join:    func(p *Project, base Project) { *field(p) = *field(p) || *field(&base) },
		take:    func(p *Project, base Project) { *field(p) = *field(&base) },
		show:    func(p *Project) string { return fmt.Sprint(*field(p)) },
		rule:    "a pull request may turn it on, not off",
	}
}

// Base is where the safety keys of a repository's pull requests come from
// (ADR 0040): the default branch's kl.yaml (BaseOf) or the repository's
// entries of KLBOT_REPO_CONFIG (ServerConfig.Base).
type Base struct {
	// file is the default branch's kl.yaml (or Default); nil for a
	// KLBOT_REPO_CONFIG base.
	file *Config
	// server is a KLBOT_REPO_CONFIG base's values, for every project, and
	// serverSites the line of each key its entries set.
	server      Project
	serverSites map[string]int
	// allowed are the keys a pull request may change as it likes
	// (KLBOT_REPO_CONFIG allowed_overrides).
	allowed map[string]bool
	// setBy says where a key set on line came from; unset where a key
	// nobody set did; remedy what to do instead of loosening it.
	setBy  func(line int) string
	unset  string
	remedy string
}

// BaseOf is the base of a repository whose default branch has kl.yaml cfg
// (as Parse read it), or none (Default): per state, the values of the
// project of that state; for a state no project names, the top level's.
func BaseOf(cfg *Config) *Base {
	b := &Base{file: cfg, remedy: "change it on the default branch first",
		setBy: func(line int) string { return fmt.Sprintf("set by the default branch's %s (line %d)", File, line) },
		unset: "(klbot's default: the default branch's " + File + " does not set it)"}
	if cfg.Default {
		b.unset = "(klbot's default: the default branch has no " + File + ")"
	}
	return b
}

// rules is the base's values for a project of state and, for each key,
// where that value came from.
func (b *Base) rules(state string) (Project, func(key string) string) {
	if b.file == nil {
		return b.server, func(key string) string {
			if line := b.serverSites[key]; line > 0 {
				return b.setBy(line)
			}
			return b.unset
		}
	}
	base, name := b.file.top, ""
	for _, p := range b.file.Projects {
		if p.State == state {
			base, name = p, p.Name
			break
		}
	}
	return base, func(key string) string {
		if line := b.file.site(name, key); line > 0 {
			return b.setBy(line)
		}
		return b.unset
	}
}

// Merge is the configuration pull request kl.yaml pr takes effect with
// (ADR 0040): pr, with each safety key of each project checked against
// base's value for the project's state (the base project of that state,
// else the base's top level). A key pr does not set (for the project or at
// its top level) takes base's value. One pr sets may be as tight as base's
// or tighter (apply_requirements: a superset; apply_trigger: comment →
// merge); a key base allows (KLBOT_REPO_CONFIG allowed_overrides) may be
// anything. A looser one is an *Error with one problem per project and
// key, "kl.yaml:LINE: project "P": KEY PR loosens BASE set by WHERE:
// rule; remedy", LINE being pr's line of the key.
func Merge(pr *Config, base *Base) (*Config, error) {
	out := *pr
	out.Projects = make([]Project, len(pr.Projects))
	p := &parser{}
	for i, proj := range pr.Projects {
		floor, from := base.rules(proj.State)
		for _, k := range safetyKeys {
			line := pr.site(proj.Name, k.name)
			switch {
			case line == 0:
				k.take(&proj, floor)
			case base.allowed[k.name], k.atLeast(&proj, &floor):
			default:
				p.bad(line, "project %q: %s %s loosens %s %s: %s; %s", proj.Name, k.name, k.show(&proj), k.show(&floor),
					from(k.name), k.rule, base.remedy)
			}
		}
		out.Projects[i] = proj
	}
	if err := p.err(File); err != nil {
		return nil, err
	}
	return &out, nil
}

// Tighten is project p, as a plan stored it, with base's values joined in
// (ADR 0040): each safety key base does not allow to be changed becomes
// the loosest value at least as tight as both p's and base's for p's state
// — the rules an apply checks, read again at the apply since the default
// branch may have changed since the plan. A base loosened since then does
// not loosen p (p's own value was at least as tight as the base of its
// plan); a new plan takes the new base.
func Tighten(p Project, base *Base) Project {
	floor, _ := base.rules(p.State)
	for _, k := range safetyKeys {
		if !base.allowed[k.name] {
			k.join(&p, floor)
		}
	}
	return p
}
