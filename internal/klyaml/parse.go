package klyaml

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/kilolock/kilolock/internal/engine"
)

// Keys kl.yaml accepts, at the top level and in a project.
var (
	topKeys     = []string{"version", "apply_trigger", "apply_requirements", "on_revert", "merge_queue", "lane", "validate", "plan_drafts", "projects"}
	projectKeys = []string{"name", "dir", "state", "workspace", "when_modified", "apply_trigger", "apply_requirements", "on_revert", "merge_queue", "lane", "validate"}
)

// extensionPrefix starts the top-level keys kl.yaml ignores, as docker
// compose does: "x-base: &base {...}" holds anchors the projects use.
const extensionPrefix = "x-"

var (
	projectNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	lineRE        = regexp.MustCompile(`^line (\d+): `)
)

// Parse parses kl.yaml strictly (unknown keys are errors) and
// validates it; repo ("owner/name") is only used in messages. Every
// problem is reported, in line order, as "kl.yaml:LINE: what" in a
// *Error, LINE being the line of the offending key or value; only a
// YAML syntax error stops at the first (its LINE: syntaxProblem). Rules:
// one YAML document; version must be 1; at least one project; project
// names unique, 1–64 letters, digits, '.', '_', '-'; dir relative and
// inside the repository; state a valid Kilolock state name
// (engine.ValidateStateName) used by one project only (one state is one
// Terraform configuration); workspace empty or "default"; when_modified
// globs valid; names, dirs, states and globs of printable characters only
// (unicode.IsPrint: no control, format or bidirectional characters);
// apply_trigger comment or merge; apply_requirements approved or
// mergeable; on_revert warn or fail; merge_queue and plan_drafts true or false;
// lane terraform, native or auto; validate merge, always or never; top-level keys starting with "x-"
// are ignored (a place for shared anchors). Defaults: dir ".", workspace
// "default", when_modified DefaultWhenModified, apply_trigger,
// apply_requirements, on_revert, merge_queue, lane and validate from the top level (whose defaults are
// defaultTrigger — KLBOT_APPLY_TRIGGER; "" is comment — and none). A null
// value ("dir:" with nothing) is the same as leaving the key out.
// Anchors, aliases and merge keys ("<<") work as in YAML.
func Parse(data []byte, defaultTrigger Trigger) (*Config, error) {
	root, p, err := parseDocument(data, File, "version: 1 and projects")
	if err != nil {
		return nil, err
	}
	var cfg *Config
	if root != nil {
		cfg = p.config(root, defaultTrigger)
	}
	if err := p.err(File); err != nil {
		return nil, err
	}
	cfg.sites = p.sites
	return cfg, nil
}

// parseDocument decodes data, the file name (as in messages), as one YAML
// document: its root (aliases resolved; nil when the file is empty, which
// is a problem: want says what it should hold) and a parser holding the
// problems found so far, or the *Error of a YAML syntax error.
func parseDocument(data []byte, name, want string) (*yaml.Node, *parser, error) {
	doc, second, err := decodeYAML(data)
	if err != nil {
		return nil, nil, &Error{File: name, Problems: []string{syntaxProblem(data, err, name)}}
	}
	p := &parser{budget: maxPairs, sites: map[siteKey]int{}}
	if second > 0 {
		p.bad(second, "a second YAML document starts here (---): %s is one document; remove this line or what follows it", name)
	}
	if doc == nil || len(doc.Content) == 0 || doc.Content[0].ShortTag() == "!!null" {
		p.bad(1, "the file is empty: want at least %s", want)
		return nil, p, nil
	}
	return resolve(doc.Content[0]), p, nil
}

// err is the parser's problems as an *Error, in line order, each
// "NAME:LINE: what" (name: the file's name); nil when there are none.
func (p *parser) err(name string) error {
	if len(p.problems) == 0 {
		return nil
	}
	sort.SliceStable(p.problems, func(i, j int) bool { return p.problems[i].line < p.problems[j].line })
	out := make([]string, len(p.problems))
	for i, pr := range p.problems {
		out[i] = fmt.Sprintf("%s:%d: %s", name, pr.line, pr.msg)
	}
	return &Error{File: name, Problems: out}
}

// decodeYAML decodes every YAML document of data: the first (nil when
// there is none), the line of the second's start (0 when there is none),
// or the first syntax error.
func decodeYAML(data []byte) (*yaml.Node, int, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var first, next yaml.Node
	switch err := dec.Decode(&first); {
	case errors.Is(err, io.EOF):
		return nil, 0, nil
	case err != nil:
		return nil, 0, err
	}
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
		return &first, 0, nil
	case err != nil:
		return nil, 0, err
	}
	line := next.Line
	if line < 1 {
		line = 1
	}
	return &first, line, nil
}

// Bounds of syntaxProblem's search for a syntax error's line.
const (
	maxSyntaxProbes     = 2_000
	maxSyntaxProbeBytes = 4 << 20 // 4 decodes of a 1 MiB kl.yaml (MaxBytes), about 2 s
)

// syntaxProblem rewrites a YAML syntax error of the file name as
// "NAME:LINE: what" (kl.yaml:LINE: what).
// yaml.v3's own "line N" cannot be used as LINE: it is the line where the
// enclosing construct (a block mapping or list, a scalar) starts when
// there is one, else the problem's, and for a parser error (not a
// scanner's) it is one less (yaml.v3 prints a 0-based line there); some
// errors have none. N is never after the problem, though. So LINE is found
// by decoding the file's first N, N+1, ... lines: LINE is the first k
// whose first k lines do not decode. Every shorter prefix from N on
// decoding, the problem is on line k or after it; it is on line k when the
// k lines fail with the same error as the whole file, unless line k ends
// inside an unclosed [...], {...} or quoted string, whose end of file can
// fail like a later line of it does (docs/kl-yaml.md says so). When the
// errors differ, or the search is too long, the message says "on this
// line or a later one".
func syntaxProblem(data []byte, err error, name string) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	from := 1
	if sm := lineRE.FindStringSubmatch(msg); sm != nil {
		msg = strings.TrimPrefix(msg, sm[0])
		if n, err := strconv.Atoi(sm[1]); err == nil && n > 1 {
			from = n
		}
	}
	later := func(line int) string {
		return fmt.Sprintf("%s:%d: YAML syntax error on this line or a later one: %s", name, line, msg)
	}
	// ends[k-1] is the end of line k (after its newline).
	var ends []int
	for i, b := range data {
		if b == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	from = min(from, len(ends))
	spent := 0
	for k := from; k <= len(ends) && k < from+maxSyntaxProbes; k++ {
		prefix := data[:ends[k-1]]
		if spent += len(prefix); spent > maxSyntaxProbeBytes {
			break
		}
		_, _, perr := decodeYAML(prefix)
		switch {
		case perr == nil:
			continue
		case perr.Error() == err.Error():
			return fmt.Sprintf("%s:%d: %s", name, k, msg)
		default:
			return later(k)
		}
	}
	return later(from)
}

// maxPairs bounds the key/value pairs one kl.yaml may expand to
// through merge keys, so that a small file cannot make the walk
// exponential (the YAML decoder's "excessive aliasing" guard, which a
// node walk does not get).
const maxPairs = 100_000

// parser walks kl.yaml's node tree, collecting every problem with
// its line.
type parser struct {
	problems []lineProblem
	budget   int             // pairs left to expand (maxPairs)
	sites    map[siteKey]int // the line of each key set, by project (Config.sites)
}

type lineProblem struct {
	line int
	msg  string
}

func (p *parser) bad(line int, format string, args ...any) {
	p.problems = append(p.problems, lineProblem{line: line, msg: fmt.Sprintf(format, args...)})
}

// config walks the document's root.
func (p *parser) config(root *yaml.Node, defaultTrigger Trigger) *Config {
	cfg := &Config{}
	if root.Kind != yaml.MappingNode {
		p.bad(root.Line, "want keys such as version: 1 and projects, got %s", describe(root))
		return cfg
	}
	top := p.fields(root, topKeys, "at the top level", true)
	if v, ok := top["version"]; !ok {
		p.bad(root.Line, "version is required: add version: 1")
	} else if n, ok := p.int(v, "version"); ok {
		cfg.Version = n
		if n != 1 {
			p.bad(v.val.Line, "version %d: want version: 1", n)
		}
	}
	if f, ok := top["plan_drafts"]; ok {
		cfg.PlanDrafts = p.bool(f, "plan_drafts")
	}
	cfg.top = defaultRules(defaultTrigger)
	p.rules(top, "", &cfg.top)
	p.site("", top)
	f, ok := top["projects"]
	switch {
	case !ok:
		p.bad(root.Line, "no projects: list at least one under projects")
		return cfg
	case f.val.Kind != yaml.SequenceNode:
		p.bad(f.val.Line, "projects: want a list of projects (- name: ...), got %s", describe(f.val))
		return cfg
	case len(f.val.Content) == 0:
		p.bad(f.key.Line, "no projects: list at least one under projects")
		return cfg
	}
	seen := map[string]int{}         // project name → line
	states := map[string]stateUser{} // state → its first project
	for i, item := range f.val.Content {
		cfg.Projects = append(cfg.Projects, p.project(resolve(item), i+1, cfg.top, seen, states))
	}
	return cfg
}

// stateUser is the first project naming a state: who (as in messages),
// the line of its state and its dir.
type stateUser struct {
	who  string
	line int
	dir  string
}

// project walks the i-th (from 1) item of projects. A project is named
// in messages as project "NAME", or "project I (no name)" when it has
// none.
func (p *parser) project(n *yaml.Node, i int, top Project, seen map[string]int, states map[string]stateUser) Project {
	pr := Project{Dir: ".", Workspace: "default", WhenModified: DefaultWhenModified, ApplyTrigger: top.ApplyTrigger,
		ApplyRequirements: top.ApplyRequirements, OnRevert: top.OnRevert, MergeQueue: top.MergeQueue, Lane: top.Lane, Validate: top.Validate}
	if n.Kind != yaml.MappingNode {
		p.bad(n.Line, "project %d: want keys such as name and state, got %s", i, describe(n))
		return pr
	}
	fs := p.fields(n, projectKeys, "in a project", false)
	who := p.projectName(n, i, fs, &pr, seen)
	where := who + ": "
	p.projectDir(fs, where, &pr)
	stateLine, stateOK := p.projectState(n, fs, where, &pr)
	if f, ok := fs["workspace"]; ok {
		if ws, ok := p.string(f, where); ok && ws != "" && ws != "default" {
			p.bad(f.val.Line, "%sworkspace %q: only \"default\" is supported (Kilolock owns one state per project: use another project and state)", where, ws)
		}
	}
	if stateOK {
		p.stateOnce(n, stateLine, who, pr, states)
	}
	if f, ok := fs["when_modified"]; ok {
		pr.WhenModified = p.globs(f, where)
	}
	p.rules(fs, where, &pr)
	if pr.Name != "" {
		p.site(pr.Name, fs)
	}
	return pr
}

// defaultRules are the rules of the apply before kl.yaml says any:
// apply_trigger defaultTrigger (KLBOT_APPLY_TRIGGER; "" is comment), no
// apply_requirements, on_revert warn, lane terraform, validate merge.
func defaultRules(defaultTrigger Trigger) Project {
	if defaultTrigger == "" {
		defaultTrigger = TriggerComment
	}
	return Project{ApplyTrigger: defaultTrigger, ApplyRequirements: []Requirement{}, OnRevert: RevertWarn,
		Lane: engine.LaneChoiceTerraform, Validate: ValidateMerge}
}

// rules reads the keys that say how a project's plan is applied — those
// the top level, a project and a KLBOT_REPO_CONFIG entry share, the
// safety keys among them (safetyKeys) — from fs into pr, whose values are
// kept where a key is absent or invalid. where starts messages
// (`project "a": `).
func (p *parser) rules(fs map[string]field, where string, pr *Project) {
	if f, ok := fs["apply_trigger"]; ok {
		pr.ApplyTrigger = p.trigger(f, where, pr.ApplyTrigger)
	}
	if f, ok := fs["apply_requirements"]; ok {
		pr.ApplyRequirements = p.requirements(f, where, pr.ApplyRequirements)
	}
	if f, ok := fs["on_revert"]; ok {
		pr.OnRevert = p.onRevert(f, where, pr.OnRevert)
	}
	if f, ok := fs["merge_queue"]; ok {
		pr.MergeQueue = p.bool(f, where+"merge_queue")
	}
	if f, ok := fs["lane"]; ok {
		pr.Lane = oneOf(p, f, where, "lane", pr.Lane, engine.LaneChoiceTerraform, engine.LaneChoiceNative, engine.LaneChoiceAuto)
	}
	if f, ok := fs["validate"]; ok {
		pr.Validate = oneOf(p, f, where, "validate", pr.Validate, ValidateMerge, ValidateAlways, ValidateNever)
	}
}

// onRevert reads on_revert; def is kept when it is invalid.
func (p *parser) onRevert(f field, where string, def OnRevert) OnRevert {
	return oneOf(p, f, where, "on_revert", def, RevertWarn, RevertFail)
}

// oneOf reads key's scalar value f as one of allowed; an invalid value is
// an error naming the key and what it wants ("want warn or fail"), and def
// is kept.
func oneOf[T ~string](p *parser, f field, where, key string, def T, allowed ...T) T {
	names := make([]string, len(allowed))
	for i, a := range allowed {
		names[i] = string(a)
	}
	want := strings.Join(names, " or ")
	switch v := T(f.val.Value); {
	case f.val.Kind != yaml.ScalarNode:
		p.bad(f.val.Line, "%s%s: want %s, got %s", where, key, want, describe(f.val))
	case slices.Contains(allowed, v):
		return v
	default:
		p.bad(f.val.Line, "%s%s %q: want %s", where, key, f.val.Value, want)
	}
	return def
}

// site records the line of each key of fs, set for project ("" for the
// top level).
func (p *parser) site(project string, fs map[string]field) {
	for k, f := range fs {
		p.sites[siteKey{project, k}] = f.key.Line
	}
}

// projectName reads the i-th project's name into pr, checking it against
// the names seen before (name → line), and returns how messages name the
// project.
func (p *parser) projectName(n *yaml.Node, i int, fs map[string]field, pr *Project, seen map[string]int) string {
	who := fmt.Sprintf("project %d (no name)", i)
	if f, ok := fs["name"]; ok {
		pr.Name, _ = p.string(f, who+": ")
	}
	switch f, ok := fs["name"]; {
	case pr.Name == "":
		if !ok || f.val.Kind == yaml.ScalarNode {
			p.bad(n.Line, "%s: name is required", who)
		}
	case p.unprintable(f.val.Line, fmt.Sprintf("project %d: name", i), pr.Name):
	case !projectNameRE.MatchString(pr.Name):
		p.bad(f.val.Line, "project name %q: use 1-64 letters, digits, '.', '_', '-', starting with a letter or digit", pr.Name)
	case seen[pr.Name] > 0:
		p.bad(f.val.Line, "project name %q is used twice (first on line %d)", pr.Name, seen[pr.Name])
	default:
		seen[pr.Name] = f.val.Line
	}
	if pr.Name != "" {
		who = fmt.Sprintf("project %q", pr.Name)
	}
	return who
}

// projectDir reads dir into pr, cleaned: relative, inside the repository.
func (p *parser) projectDir(fs map[string]field, where string, pr *Project) {
	f, ok := fs["dir"]
	if !ok {
		return
	}
	if dir, ok := p.string(f, where); ok && dir != "" && !p.unprintable(f.val.Line, where+"dir", dir) {
		clean := path.Clean(dir)
		if path.IsAbs(dir) || clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains(dir, `\`) {
			p.bad(f.val.Line, "%sdir %q must be a relative path inside the repository", where, dir)
		}
		pr.Dir = clean
	}
}

// projectState reads state into pr and returns its line (the project's
// when it has none) and whether it is a valid state name.
func (p *parser) projectState(n *yaml.Node, fs map[string]field, where string, pr *Project) (int, bool) {
	line := n.Line
	if f, ok := fs["state"]; ok {
		pr.State, _ = p.string(f, where)
		line = f.val.Line
	}
	switch f, ok := fs["state"]; {
	case pr.State == "":
		if !ok || f.val.Kind == yaml.ScalarNode {
			p.bad(n.Line, "%sstate is required (the Kilolock state it plans against, e.g. acme/infra/prod)", where)
		}
	case p.unprintable(line, where+"state", pr.State):
	case engine.ValidateStateName(pr.State) != nil:
		p.bad(line, "%sstate %q: use at most %d characters in segments separated by single '/', each of letters, digits, '.', '_', '-', "+
			"starting with a letter or digit and not ending in '.'", where, pr.State, engine.MaxStateName)
	default:
		return line, true
	}
	return line, false
}

// stateOnce records pr (named who in messages, its state on stateLine) as
// its state's user, or reports the project that has the state already.
// One state is one Terraform configuration: planning dir A against a
// state holding dir B's resources would plan to destroy them. Two
// projects with the same dir and state would be one project twice
// (workspace is always "default"), their plans making each other's stale.
func (p *parser) stateOnce(n *yaml.Node, stateLine int, who string, pr Project, states map[string]stateUser) {
	where := who + ": "
	line := stateLine
	if first, dup := states[pr.State]; dup && first.line == line {
		line = n.Line // the same value, merged or aliased: name the project
	}
	switch first, dup := states[pr.State]; {
	case !dup:
		states[pr.State] = stateUser{who: who, line: stateLine, dir: pr.Dir}
	case first.dir != pr.Dir:
		p.bad(line, "%sstate %q is also %s's (line %d): one state is one configuration (dir)", where, pr.State, first.who, first.line)
	default:
		p.bad(line, "%sstate %q is also %s's (line %d), with the same dir %q: one state is one project", where, pr.State, first.who, first.line, pr.Dir)
	}
}

// unprintable reports a value (what: `project "a": dir`) that
// engine.TextProblem refuses — not valid UTF-8, or a character that is not
// printable (no control character, newline, tab, format character such as
// U+200B, bidirectional override such as U+202E, or other space), as kl -C
// does: such text shows one thing and is another, or breaks the lines it is
// printed on.
func (p *parser) unprintable(line int, what, s string) bool {
	if problem := engine.TextProblem(s); problem != "" {
		p.bad(line, "%s %q %s", what, s, problem)
		return true
	}
	return false
}

// field is one key of a mapping with its value (aliases resolved).
type field struct{ key, val *yaml.Node }

// fields returns m's keys, reporting unknown keys (where: "at the top
// level", "in a project") and keys set twice. A key whose value is null
// is left out, as if absent. With extensions, keys starting with "x-" are
// ignored whatever their values (a place for shared anchors).
func (p *parser) fields(m *yaml.Node, known []string, where string, extensions bool) map[string]field {
	out := map[string]field{}
	for _, f := range p.pairs(m, map[*yaml.Node]bool{}) {
		if f.key.Kind != yaml.ScalarNode {
			p.bad(f.key.Line, "want a field name as the key, got %s", describe(f.key))
			continue
		}
		name := f.key.Value
		if extensions && strings.HasPrefix(name, extensionPrefix) {
			continue
		}
		if !slices.Contains(known, name) {
			p.bad(f.key.Line, "unknown field %q %s (see docs/kl-yaml.md)", name, where)
			continue
		}
		if prev, dup := out[name]; dup {
			p.bad(f.key.Line, "%s is set twice (first on line %d)", name, prev.key.Line)
			continue
		}
		out[name] = f
	}
	for name, f := range out {
		if f.val.Kind == yaml.ScalarNode && f.val.ShortTag() == "!!null" {
			delete(out, name)
		}
	}
	return out
}

// pairs lists m's key/value pairs, those of merge keys ("<<: *base")
// after m's own and only when m does not set the key itself. visiting
// guards against a mapping merging itself.
func (p *parser) pairs(m *yaml.Node, visiting map[*yaml.Node]bool) []field {
	if visiting[m] {
		return nil
	}
	visiting[m] = true
	defer delete(visiting, m)
	var own, merged []field
	set := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if p.budget--; p.budget < 0 {
			if p.budget == -1 {
				p.bad(m.Line, "too many aliases: the file expands to more than %d keys", maxPairs)
			}
			return nil
		}
		k, v := m.Content[i], resolve(m.Content[i+1])
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			srcs := []*yaml.Node{v}
			if v.Kind == yaml.SequenceNode {
				srcs = v.Content
			}
			for _, src := range srcs {
				if src = resolve(src); src.Kind != yaml.MappingNode {
					p.bad(src.Line, "<<: want a mapping or a list of mappings to merge, got %s", describe(src))
					continue
				}
				merged = append(merged, p.pairs(src, visiting)...)
			}
			continue
		}
		own = append(own, field{k, v})
		if k.Kind == yaml.ScalarNode {
			set[k.Value] = true
		}
	}
	for _, f := range merged {
		if !set[f.key.Value] {
			set[f.key.Value] = true
			own = append(own, f)
		}
	}
	return own
}

// int reads a whole number.
func (p *parser) int(f field, name string) (int, bool) {
	var n int
	if f.val.Kind != yaml.ScalarNode || f.val.ShortTag() != "!!int" || f.val.Decode(&n) != nil {
		p.bad(f.val.Line, "%s: want a whole number, got %s", name, describe(f.val))
		return 0, false
	}
	return n, true
}

// bool reads true or false.
func (p *parser) bool(f field, name string) bool {
	var b bool
	if f.val.Kind != yaml.ScalarNode || f.val.ShortTag() != "!!bool" || f.val.Decode(&b) != nil {
		p.bad(f.val.Line, "%s: want true or false, got %s", name, describe(f.val))
	}
	return b
}

// string reads a scalar as written ("name: 2024" is the name "2024").
func (p *parser) string(f field, where string) (string, bool) {
	if f.val.Kind != yaml.ScalarNode {
		p.bad(f.val.Line, "%s%s: want a string, got %s", where, f.key.Value, describe(f.val))
		return "", false
	}
	return f.val.Value, true
}

// trigger reads apply_trigger; def is kept when it is invalid.
func (p *parser) trigger(f field, where string, def Trigger) Trigger {
	return oneOf(p, f, where, "apply_trigger", def, TriggerComment, TriggerMerge)
}

// requirements reads apply_requirements; def is kept when it is not a list.
func (p *parser) requirements(f field, where string, def []Requirement) []Requirement {
	if f.val.Kind != yaml.SequenceNode {
		p.bad(f.val.Line, "%sapply_requirements: want a list such as [approved], got %s", where, describe(f.val))
		return def
	}
	out := []Requirement{}
	for _, it := range f.val.Content {
		it = resolve(it)
		switch r := Requirement(it.Value); {
		case it.Kind != yaml.ScalarNode:
			p.bad(it.Line, "%sapply_requirements: want approved or mergeable, got %s", where, describe(it))
		case r == RequireApproved || r == RequireMergeable:
			out = append(out, r)
		default:
			p.bad(it.Line, "%sapply_requirements: %q: want approved or mergeable", where, it.Value)
		}
	}
	return out
}

// globs reads when_modified.
func (p *parser) globs(f field, where string) []string {
	if f.val.Kind != yaml.SequenceNode {
		p.bad(f.val.Line, "%swhen_modified: want a list of globs such as [\"*.tf\"], got %s", where, describe(f.val))
		return DefaultWhenModified
	}
	if len(f.val.Content) == 0 {
		p.bad(f.key.Line, "%swhen_modified is empty: the project would never be planned (leave it out for the default)", where)
	}
	out := []string{}
	for _, it := range f.val.Content {
		if it = resolve(it); it.Kind != yaml.ScalarNode {
			p.bad(it.Line, "%swhen_modified: want a glob, got %s", where, describe(it))
			continue
		}
		if p.unprintable(it.Line, where+"when_modified", it.Value) {
			continue
		}
		if err := validGlob(it.Value); err != nil {
			p.bad(it.Line, "%swhen_modified %q: %v", where, it.Value, err)
		}
		out = append(out, it.Value)
	}
	return out
}

// resolve follows an alias to its anchored node.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// describe names a value for a person: `the string "1"`, "the number 2",
// "a list".
func describe(n *yaml.Node) string {
	switch n = resolve(n); n.Kind {
	case yaml.MappingNode:
		return "a mapping (key: value lines)"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return fmt.Sprintf("the string %q", n.Value)
		case "!!int", "!!float":
			return "the number " + n.Value
		case "!!bool":
			return n.Value
		case "!!null":
			return "nothing"
		case "!!timestamp":
			return "the date " + n.Value
		}
		return fmt.Sprintf("%q", n.Value)
	}
	return "nothing"
}
