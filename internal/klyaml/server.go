package klyaml

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Keys of KLBOT_REPO_CONFIG, at the top level and in an entry of repos
// (besides the safety keys).
var (
	serverTopKeys   = []string{"repos"}
	serverEntryKeys = []string{"id", "allowed_overrides"}
)

// ServerConfig is klbot's server-side repository configuration, the file
// KLBOT_REPO_CONFIG names (docs/kl-yaml.md "Safety keys"; Atlantis's
// server-side repo config): per repository, the safety keys its pull
// requests start from and the keys their kl.yaml may change as it likes.
type ServerConfig struct {
	name  string // the file's name, as in messages
	repos []serverEntry
}

// serverEntry is one entry of repos.
type serverEntry struct {
	id      string
	re      *regexp.Regexp // id "/REGEX/"; nil for an exact owner/name
	rules   Project        // the safety keys the entry sets (sites)
	sites   map[string]int // key → line, for the safety keys it sets
	allowed []string       // allowed_overrides; nil when it sets none
}

// ParseServer parses a KLBOT_REPO_CONFIG file, name being the file's name
// in messages ("repos.yaml"). Its shape:
//
//	repos:
//	  - id: /.*/                       # an exact owner/name, or /REGEX/
//	    apply_requirements: [approved] # safety keys, as in kl.yaml
//	    apply_trigger: comment
//	    allowed_overrides: [apply_requirements]
//
// Rules: strict YAML as kl.yaml (one document, unknown keys and keys set
// twice are errors, top-level "x-" keys ignored, anchors and merge keys
// work); repos a non-empty list; id required, either owner/name (matched
// without regard to case, as GitHub names are) or a Go regular expression
// between slashes, matched unanchored against owner/name as Atlantis
// matches its ids; the safety keys valid as in kl.yaml; allowed_overrides a
// list of safety keys (SafetyKeys). Every problem is reported, in line
// order, as "NAME:LINE: what" in a *Error.
func ParseServer(data []byte, name string) (*ServerConfig, error) {
	root, p, err := parseDocument(data, name, "repos: with one entry")
	if err != nil {
		return nil, err
	}
	s := &ServerConfig{name: name}
	if root != nil {
		p.server(root, s)
	}
	if err := p.err(name); err != nil {
		return nil, err
	}
	return s, nil
}

// server walks a KLBOT_REPO_CONFIG document's root into s.
func (p *parser) server(root *yaml.Node, s *ServerConfig) {
	if root.Kind != yaml.MappingNode {
		p.bad(root.Line, "want repos: with a list of entries, got %s", describe(root))
		return
	}
	top := p.fields(root, serverTopKeys, "at the top level", true)
	f, ok := top["repos"]
	switch {
	case !ok:
		p.bad(root.Line, "no repos: list at least one entry (- id: owner/name) under repos")
		return
	case f.val.Kind != yaml.SequenceNode:
		p.bad(f.val.Line, "repos: want a list of entries (- id: owner/name), got %s", describe(f.val))
		return
	case len(f.val.Content) == 0:
		p.bad(f.key.Line, "no repos: list at least one entry (- id: owner/name) under repos")
		return
	}
	for i, item := range f.val.Content {
		if e, ok := p.serverEntry(resolve(item), i+1); ok {
			s.repos = append(s.repos, e)
		}
	}
}

// serverEntry walks the i-th (from 1) entry of repos.
func (p *parser) serverEntry(n *yaml.Node, i int) (serverEntry, bool) {
	e := serverEntry{sites: map[string]int{}}
	if n.Kind != yaml.MappingNode {
		p.bad(n.Line, "repos entry %d: want keys such as id: owner/name, got %s", i, describe(n))
		return e, false
	}
	fs := p.fields(n, append(slices.Clone(serverEntryKeys), SafetyKeys()...), "in a repos entry", false)
	who := fmt.Sprintf("repos entry %d", i)
	ok := p.serverID(n, fs, who, &e)
	if ok {
		who = fmt.Sprintf("repos entry %q", e.id)
	}
	e.rules = defaultRules("")
	p.rules(fs, who+": ", &e.rules)
	for _, k := range SafetyKeys() {
		if f, set := fs[k]; set {
			e.sites[k] = f.key.Line
		}
	}
	if f, set := fs["allowed_overrides"]; set {
		e.allowed = p.overrides(f, who+": ")
	}
	return e, ok
}

// serverID reads an entry's id: owner/name or /REGEX/.
func (p *parser) serverID(n *yaml.Node, fs map[string]field, who string, e *serverEntry) bool {
	f, ok := fs["id"]
	if !ok {
		p.bad(n.Line, "%s: id is required (owner/name, or /REGEX/ for several repositories)", who)
		return false
	}
	id, ok := p.string(f, who+": ")
	if !ok {
		return false
	}
	e.id = id
	if len(id) >= 2 && strings.HasPrefix(id, "/") && strings.HasSuffix(id, "/") {
		re, err := regexp.Compile(id[1 : len(id)-1])
		if err != nil {
			p.bad(f.val.Line, "%s: id %q: not a regular expression: %v", who, id, err)
			return false
		}
		e.re = re
		return true
	}
	if p.unprintable(f.val.Line, who+": id", id) {
		return false
	}
	if owner, name, cut := strings.Cut(id, "/"); !cut || owner == "" || name == "" || strings.Contains(name, "/") {
		p.bad(f.val.Line, "%s: id %q: want owner/name, or a regular expression between slashes (/acme/.*/)", who, id)
		return false
	}
	return true
}

// overrides reads allowed_overrides: safety keys.
func (p *parser) overrides(f field, where string) []string {
	if f.val.Kind != yaml.SequenceNode {
		p.bad(f.val.Line, "%sallowed_overrides: want a list of keys such as [apply_requirements], got %s", where, describe(f.val))
		return nil
	}
	out := []string{}
	for _, it := range f.val.Content {
		it = resolve(it)
		switch {
		case it.Kind != yaml.ScalarNode:
			p.bad(it.Line, "%sallowed_overrides: want a key name, got %s", where, describe(it))
		case !slices.Contains(SafetyKeys(), it.Value):
			p.bad(it.Line, "%sallowed_overrides: %q is not a safety key: want %s", where, it.Value, strings.Join(SafetyKeys(), " or "))
		case !slices.Contains(out, it.Value):
			out = append(out, it.Value)
		}
	}
	return out
}

// matches reports whether the entry is repo's ("owner/name").
func (e serverEntry) matches(repo string) bool {
	if e.re != nil {
		return e.re.MatchString(repo)
	}
	return strings.EqualFold(e.id, repo)
}

// Base is the base of repo ("owner/name") from the entries matching it, in
// file order, a later entry's keys replacing an earlier one's (Atlantis's
// rule); a key no entry sets is klbot's default (apply_trigger
// defaultTrigger, KLBOT_APPLY_TRIGGER; no apply_requirements), and
// allowed_overrides is the last matching entry's that sets it. false when
// no entry matches: the default branch's kl.yaml is the base then.
func (s *ServerConfig) Base(repo string, defaultTrigger Trigger) (*Base, bool) {
	if s == nil {
		return nil, false
	}
	b := &Base{server: defaultRules(defaultTrigger), serverSites: map[string]int{}, allowed: map[string]bool{},
		remedy: "ask klbot's operator to allow it (KLBOT_REPO_CONFIG allowed_overrides) or change it there",
		setBy:  func(line int) string { return fmt.Sprintf("set by KLBOT_REPO_CONFIG (%s line %d)", s.name, line) },
		unset:  fmt.Sprintf("(klbot's default: no KLBOT_REPO_CONFIG entry for %s sets it)", repo)}
	matched := false
	for _, e := range s.repos {
		if !e.matches(repo) {
			continue
		}
		matched = true
		for _, k := range safetyKeys {
			if line, ok := e.sites[k.name]; ok {
				k.take(&b.server, e.rules)
				b.serverSites[k.name] = line
			}
		}
		if e.allowed != nil {
			b.allowed = map[string]bool{}
			for _, k := range e.allowed {
				b.allowed[k] = true
			}
		}
	}
	return b, matched
}
