package plandiff

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"sort"
)

// side is one side of a value being diffed: the value (as decoded from the
// plan JSON: map[string]any, []any, string, json.Number, bool or nil),
// whether it is there at all, and its marks. unk is set on the after side
// only: Terraform leaves an unknown value out of "after" and marks it in
// "after_unknown".
type side struct {
	v       any
	present bool
	sens    *mark
	unk     *mark
}

// child is the side of member k of an object side.
func (s side) key(k string) side {
	m, _ := s.v.(map[string]any)
	v, ok := m[k]
	return side{v: v, present: ok, sens: s.sens.key(k), unk: s.unk.key(k)}
}

// elem is the side of element i of an array side.
func (s side) elem(i int) side {
	a, _ := s.v.([]any)
	if i >= len(a) {
		return side{sens: s.sens.elem(i), unk: s.unk.elem(i)}
	}
	return side{v: a[i], present: true, sens: s.sens.elem(i), unk: s.unk.elem(i)}
}

func (s side) unknown() bool { return s.unk.isAll() }
func (s side) null() bool    { return !s.unknown() && (!s.present || s.v == nil) }

// state is what node found.
type state int

const (
	bothNull  state = iota // nothing either side: not shown, not counted
	unchanged              // equal: hidden, counted
	changed
)

// step names a node: an object key or an array index.
type step struct {
	key   *string
	index *int
}

func keyStep(k string) step { return step{key: &k} }
func indexStep(i int) step  { return step{index: &i} }

func (s step) on(ns []Node) []Node {
	for i := range ns {
		ns[i].Key, ns[i].Index = s.key, s.index
	}
	return ns
}

// node diffs one value (Build's rules, package doc): masked leaves first,
// then unknowns, then containers of one kind member by member, then
// scalars. It returns the nodes for the value — two when an object became
// an array or the reverse — and what it found.
func (b *builder) node(st step, bs, as side) ([]Node, state) {
	if bs.null() && as.null() {
		return nil, bothNull
	}
	if b.masked(bs) || b.masked(as) {
		if !as.unknown() && equal(bs.v, as.v) && bs.sens.isAll() == as.sens.isAll() {
			return nil, unchanged
		}
		n := Node{Action: actionOf(bs, as)}
		if !bs.null() {
			n.Before = &Value{Sensitive: true}
		}
		switch {
		case as.unknown():
			n.After = &Value{Unknown: true}
		case !as.null():
			n.After = &Value{Sensitive: true}
		}
		return st.on([]Node{n}), changed
	}
	if as.unknown() {
		if bs.null() {
			return st.on([]Node{{Action: Create, After: &Value{Unknown: true}}}), changed
		}
		if kindOf(bs.v) != "" && !empty(bs.v) {
			n := b.one(Delete, bs)
			n.Action, n.After = Update, &Value{Unknown: true}
			return st.on([]Node{n}), changed
		}
		return st.on([]Node{{Action: Update, Before: val(bs.v), After: &Value{Unknown: true}}}), changed
	}
	switch {
	case bs.null():
		return st.on([]Node{b.one(Create, as)}), changed
	case as.null():
		return st.on([]Node{b.one(Delete, bs)}), changed
	}
	return b.both(st, bs, as)
}

// both diffs two non-null, unmasked, known values.
func (b *builder) both(st step, bs, as side) ([]Node, state) {
	bk, ak := kindOf(bs.v), kindOf(as.v)
	switch {
	case bk != "" && bk == ak:
		var ch []Node
		var n int
		if bk == kindObject {
			ch, n = b.objectChildren(bs, as)
		} else {
			ch, n = b.arrayChildren(bs, as)
		}
		if len(ch) == 0 {
			return nil, unchanged
		}
		return st.on([]Node{{Action: Update, Kind: bk, Changes: ch, Unchanged: n}}), changed
	case bk == "" && ak == "":
		if equal(bs.v, as.v) {
			return nil, unchanged
		}
		return st.on([]Node{{Action: Update, Before: val(bs.v), After: val(as.v)}}), changed
	case bk != "" && ak == "" && !empty(bs.v):
		n := b.one(Delete, bs)
		n.Action, n.After = Update, val(as.v)
		return st.on([]Node{n}), changed
	case bk == "" && ak != "" && !empty(as.v):
		n := b.one(Create, as)
		n.Action, n.Before = Update, val(bs.v)
		return st.on([]Node{n}), changed
	case bk == "" || ak == "": // a scalar and an empty container
		return st.on([]Node{{Action: Update, Before: val(bs.v), After: val(as.v)}}), changed
	}
	return st.on([]Node{b.one(Delete, bs), b.one(Create, as)}), changed
}

// masked reports whether a side's value is masked: marked sensitive
// (whole), or a leaf equal to a secret, or an object whose keys hold one.
func (b *builder) masked(s side) bool {
	if s.null() || s.unknown() {
		return !s.null() && s.sens.isAll()
	}
	return s.sens.isAll() || b.secret(s.v)
}

// secret reports whether v is a leaf equal to (or holding) a secret, or an
// object whose keys are or hold one (they would show it): the plan's
// secrets, or the instance's own.
func (b *builder) secret(v any) bool {
	return b.sec.leaf(v) || b.local.leaf(v) || b.sec.keys(v) || b.local.keys(v)
}

// actionOf is Create when before is null, Delete when after is, Update
// otherwise.
func actionOf(bs, as side) Action {
	switch {
	case bs.null():
		return Create
	case as.null():
		return Delete
	}
	return Update
}

// one is a value that only one side has (a: Create for after, Delete for
// before): a leaf with its value, or a container whose members are each
// created or deleted (null members left out, as Terraform does).
func (b *builder) one(a Action, s side) Node {
	k := kindOf(s.v)
	if k == "" || empty(s.v) && !s.unk.any() {
		n := Node{Action: a}
		if a == Create {
			n.After = val(s.v)
		} else {
			n.Before = val(s.v)
		}
		return n
	}
	n := Node{Action: a, Kind: k}
	none := side{}
	pair := func(c side) (side, side) {
		if a == Create {
			return none, c
		}
		return c, none
	}
	if k == kindObject {
		for _, key := range memberKeys(s, side{}) {
			bs, as := pair(s.key(key))
			ns, _ := b.node(keyStep(key), bs, as)
			n.Changes = append(n.Changes, ns...)
		}
		return n
	}
	arr, _ := s.v.([]any)
	for i := range arr {
		bs, as := pair(s.elem(i))
		ns, _ := b.node(indexStep(i), bs, as)
		n.Changes = append(n.Changes, ns...)
	}
	return n
}

// objectChildren diffs two objects member by member, keys sorted (those
// only after_unknown names included). It returns the changed members and
// the count of unchanged ones.
func (b *builder) objectChildren(bs, as side) ([]Node, int) {
	var out []Node
	n := 0
	for _, k := range memberKeys(bs, as) {
		ns, st := b.node(keyStep(k), bs.key(k), as.key(k))
		switch st {
		case changed:
			out = append(out, ns...)
		case unchanged:
			n++
		}
	}
	return out, n
}

// memberKeys are the keys of either side's object and of the after side's
// unknown marks, sorted.
func memberKeys(bs, as side) []string {
	seen := map[string]bool{}
	for _, s := range []side{bs, as} {
		m, _ := s.v.(map[string]any)
		for k := range m {
			seen[k] = true
		}
		if s.unk != nil && !s.unk.all {
			for k := range s.unk.keys {
				seen[k] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// lcsCells bounds the longest-common-subsequence table of arrayChildren;
// longer arrays are compared by common prefix and suffix only.
const lcsCells = 1 << 20

// arrayChildren diffs two arrays: elements equal on both sides (a longest
// common subsequence) are unchanged; between them, a removed and an added
// container of one kind at the same place are one updated element, other
// removed elements are deleted and added ones created.
func (b *builder) arrayChildren(bs, as side) ([]Node, int) {
	bv, _ := bs.v.([]any)
	av, _ := as.v.([]any)
	eq := func(i, j int) bool {
		return as.unk.elem(j) == nil && equal(bv[i], av[j]) && bs.sens.elem(i).isAll() == as.sens.elem(j).isAll()
	}
	pairs := matches(len(bv), len(av), eq)
	var out []Node
	i, j := 0, 0
	for _, p := range append(pairs, [2]int{len(bv), len(av)}) {
		out = append(out, b.gap(bs, as, i, p[0], j, p[1])...)
		i, j = p[0]+1, p[1]+1
	}
	return out, len(pairs)
}

// gap diffs before[i0:i1] against after[j0:j1], which share no equal
// element, position by position: a pair that is one element changed (two
// containers of one kind, or a value that becomes unknown) is diffed as
// one; otherwise the before element is deleted and the after one created.
func (b *builder) gap(bs, as side, i0, i1, j0, j1 int) []Node {
	var out []Node
	for k := 0; i0+k < i1 || j0+k < j1; k++ {
		i, j := i0+k, j0+k
		hasB, hasA := i < i1, j < j1
		if hasB && hasA && pairable(bs.elem(i), as.elem(j)) {
			if ns, st := b.node(indexStep(j), bs.elem(i), as.elem(j)); st == changed {
				out = append(out, ns...)
			}
			continue
		}
		if hasB {
			ns, _ := b.node(indexStep(i), bs.elem(i), side{})
			out = append(out, ns...)
		}
		if hasA {
			ns, _ := b.node(indexStep(j), side{}, as.elem(j))
			out = append(out, ns...)
		}
	}
	return out
}

func pairable(bs, as side) bool {
	if bs.null() || as.null() {
		return false
	}
	k := kindOf(bs.v)
	return as.unknown() || k != "" && k == kindOf(as.v)
}

// matches returns the index pairs (i, j) of a longest common subsequence
// of two sequences of lengths n and m under eq, in order. Past lcsCells it
// matches the common prefix and suffix only.
func matches(n, m int, eq func(i, j int) bool) [][2]int {
	var pre [][2]int
	for len(pre) < n && len(pre) < m && eq(len(pre), len(pre)) {
		pre = append(pre, [2]int{len(pre), len(pre)})
	}
	var suf [][2]int
	for p := len(pre); n-len(suf) > p && m-len(suf) > p && eq(n-1-len(suf), m-1-len(suf)); {
		suf = append(suf, [2]int{n - 1 - len(suf), m - 1 - len(suf)})
	}
	p := len(pre)
	bn, bm := n-len(suf)-p, m-len(suf)-p
	var mid [][2]int
	if bn > 0 && bm > 0 && bn*bm <= lcsCells {
		// table[x][y]: LCS length of before[p+x:] and after[p+y:] (middle).
		table := make([][]int32, bn+1)
		for x := range table {
			table[x] = make([]int32, bm+1)
		}
		for x := bn - 1; x >= 0; x-- {
			for y := bm - 1; y >= 0; y-- {
				switch {
				case eq(p+x, p+y):
					table[x][y] = table[x+1][y+1] + 1
				case table[x+1][y] >= table[x][y+1]:
					table[x][y] = table[x+1][y]
				default:
					table[x][y] = table[x][y+1]
				}
			}
		}
		for x, y := 0, 0; x < bn && y < bm; {
			switch {
			case eq(p+x, p+y):
				mid = append(mid, [2]int{p + x, p + y})
				x, y = x+1, y+1
			case table[x+1][y] >= table[x][y+1]:
				x++
			default:
				y++
			}
		}
	}
	out := append(pre, mid...)
	for k := len(suf) - 1; k >= 0; k-- {
		out = append(out, suf[k])
	}
	return out
}

// Container kinds (Node.Kind).
const (
	kindObject = "object"
	kindArray  = "array"
)

func kindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return kindObject
	case []any:
		return kindArray
	}
	return ""
}

func empty(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

func scalar(v any) bool { return kindOf(v) == "" }

// any reports whether m marks anything.
func (m *mark) any() bool { return m != nil }

// equal compares two decoded JSON values.
func equal(a, b any) bool { return reflect.DeepEqual(a, b) }

// val is the Value of a scalar or an empty container.
func val(v any) *Value {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte("null") // decoded JSON always encodes
	}
	return &Value{JSON: b}
}

func strPtr(s string) *string { return &s }

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
