package plandiff

import (
	"encoding/json"
	"slices"
	"strings"
)

// mark is a tree of boolean marks over a value — what is sensitive, or
// unknown — as the plan JSON writes them (before_sensitive, after_unknown:
// true at a leaf or a whole container, objects of marks for objects, arrays
// for arrays) and as a state's sensitive_attributes paths name them. A nil
// *mark marks nothing.
type mark struct {
	all   bool
	keys  map[string]*mark
	elems map[int]*mark
}

// markOf reads a plan JSON mark. true marks all; false, null and an empty
// container mark nothing; an object or array marks its members. Any other
// value (a shape Terraform does not write) marks all: a wrong guess masks
// too much, never too little.
func markOf(v any) *mark {
	switch x := v.(type) {
	case nil:
		return nil
	case bool:
		if x {
			return &mark{all: true}
		}
		return nil
	case map[string]any:
		var m *mark
		for k, e := range x {
			if sub := markOf(e); sub != nil {
				if m == nil {
					m = &mark{keys: map[string]*mark{}}
				}
				if m.keys == nil {
					m.keys = map[string]*mark{}
				}
				m.keys[k] = sub
			}
		}
		return m
	case []any:
		var m *mark
		for i, e := range x {
			if sub := markOf(e); sub != nil {
				if m == nil {
					m = &mark{}
				}
				if m.elems == nil {
					m.elems = map[int]*mark{}
				}
				m.elems[i] = sub
			}
		}
		return m
	}
	return &mark{all: true}
}

// key is the mark of member k of an object.
func (m *mark) key(k string) *mark {
	if m == nil {
		return nil
	}
	if m.all {
		return m
	}
	return m.keys[k]
}

// elem is the mark of element i of an array.
func (m *mark) elem(i int) *mark {
	if m == nil {
		return nil
	}
	if m.all {
		return m
	}
	return m.elems[i]
}

// isAll reports whether m marks the whole value.
func (m *mark) isAll() bool { return m != nil && m.all }

// union returns a mark of what a or b marks.
func union(a, b *mark) *mark {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.all || b.all:
		return &mark{all: true}
	}
	out := &mark{}
	for k := range a.keys {
		out.setKey(k, union(a.keys[k], b.keys[k]))
	}
	for k := range b.keys {
		if _, done := a.keys[k]; !done {
			out.setKey(k, b.keys[k])
		}
	}
	for i := range a.elems {
		out.setElem(i, union(a.elems[i], b.elems[i]))
	}
	for i := range b.elems {
		if _, done := a.elems[i]; !done {
			out.setElem(i, b.elems[i])
		}
	}
	return out
}

func (m *mark) setKey(k string, sub *mark) {
	if sub == nil {
		return
	}
	if m.keys == nil {
		m.keys = map[string]*mark{}
	}
	m.keys[k] = sub
}

func (m *mark) setElem(i int, sub *mark) {
	if sub == nil {
		return
	}
	if m.elems == nil {
		m.elems = map[int]*mark{}
	}
	m.elems[i] = sub
}

// statePathStep is one step of a state v4 sensitive_attributes path:
// {"type":"get_attr","value":"input"} or {"type":"index","value":{"value":0,"type":"number"}}.
type statePathStep struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// markOfPaths reads a state instance's sensitive_attributes (a list of
// paths) into a mark. A path with a step it cannot read marks everything
// from the step before it down: masking too much, never too little.
func markOfPaths(raw json.RawMessage) *mark {
	if len(raw) == 0 {
		return nil
	}
	var paths []json.RawMessage
	if err := json.Unmarshal(raw, &paths); err != nil {
		return &mark{all: true}
	}
	root := &mark{}
	marked := false
	for _, p := range paths {
		var steps []statePathStep
		if err := json.Unmarshal(p, &steps); err != nil {
			return &mark{all: true}
		}
		markPath(root, steps)
		marked = true
	}
	if !marked {
		return nil
	}
	return root
}

func markPath(root *mark, steps []statePathStep) {
	m := root
	for _, s := range steps {
		if m.all {
			return
		}
		var next *mark
		switch s.Type {
		case "get_attr":
			var k string
			if json.Unmarshal(s.Value, &k) != nil {
				break
			}
			if next = m.keys[k]; next == nil {
				next = &mark{}
				m.setKey(k, next)
			}
		case "index":
			var v struct {
				Value json.RawMessage `json:"value"`
				Type  string          `json:"type"`
			}
			if json.Unmarshal(s.Value, &v) != nil {
				break
			}
			var i int
			var k string
			switch {
			case v.Type == "number" && json.Unmarshal(v.Value, &i) == nil:
				if next = m.elems[i]; next == nil {
					next = &mark{}
					m.setElem(i, next)
				}
			case v.Type == "string" && json.Unmarshal(v.Value, &k) == nil:
				if next = m.keys[k]; next == nil {
					next = &mark{}
					m.setKey(k, next)
				}
			}
		}
		if next == nil {
			*m = mark{all: true}
			return
		}
		m = next
	}
	*m = mark{all: true}
}

// minContained is the shortest secret that masks values it does not mark:
// everywhere in the plan a value equal to it, and a longer string holding
// it (a connection string built from a password). A shorter one masks
// only where it is marked and in the same resource instance (terraform_data
// copies its input to its output there): masked plan-wide, a sensitive
// "prod" would mask every "prod". The floor is the one kl's TF_VAR masking
// uses (internal/terraform redact.go, after GitLab's masked variables).
const minContained = 8

// secrets are values that are sensitive somewhere: a leaf equal to one of
// them is masked, and a string that holds one of at least minContained
// bytes — as it is or in one of its JSON string encodings (Encodings: a
// secret that went through jsonencode). Values shorter than min are not
// kept.
type secrets struct {
	min      int
	exact    map[string]bool
	contains []string // every form (Encodings) of values
	values   []string // the values of at least minContained bytes, raw (Secrets)
}

// add collects every leaf of v (strings and numbers; not booleans, null or
// empty strings, which say nothing, nor object keys, which name the
// secret's parts: "password").
func (s *secrets) add(v any) {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			s.add(e)
		}
	case []any:
		for _, e := range x {
			s.add(e)
		}
	case string:
		s.addLeaf(x)
	case json.Number:
		s.addLeaf(x.String())
	}
}

func (s *secrets) addLeaf(v string) {
	if v == "" || len(v) < s.min || s.exact[v] {
		return
	}
	if s.exact == nil {
		s.exact = map[string]bool{}
	}
	s.exact[v] = true
	if len(v) < minContained {
		return
	}
	s.values = append(s.values, v)
	for _, f := range Encodings(v) {
		s.exact[f] = true
		if !slices.Contains(s.contains, f) {
			s.contains = append(s.contains, f)
		}
	}
}

// addMarked collects the leaves of v that m marks.
func (s *secrets) addMarked(v any, m *mark) {
	if m == nil {
		return
	}
	if m.all {
		s.add(v)
		return
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			s.addMarked(e, m.keys[k])
		}
	case []any:
		for i, e := range x {
			s.addMarked(e, m.elems[i])
		}
	}
}

// leaf reports whether scalar v is, or holds, a secret. A nil s holds none.
func (s *secrets) leaf(v any) bool {
	if s == nil {
		return false
	}
	var t string
	switch x := v.(type) {
	case string:
		t = x
	case json.Number:
		t = x.String()
	default:
		return false
	}
	if t == "" {
		return false
	}
	if s.exact[t] {
		return true
	}
	for _, c := range s.contains {
		if len(t) > len(c) && strings.Contains(t, c) {
			return true
		}
	}
	return false
}

// keys reports whether an object's keys hold a secret: its keys would
// show it, so the whole object is masked.
func (s *secrets) keys(v any) bool {
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for k := range m {
		if s.leaf(k) {
			return true
		}
	}
	return false
}
