package plandiff

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"

	tfjson "github.com/hashicorp/terraform-json"

	"github.com/kilolock/kilolock/internal/tfstate"
)

// Options are Build's inputs besides the plan.
type Options struct {
	// PriorState is the Terraform state v4 document the plan was made
	// against (the run's snapshot; nil for none). The sensitive_attributes
	// of its instances mark what they name, in the instance the plan
	// changes and, by value, everywhere (docs/terraform.md: Terraform's plan
	// JSON alone leaves terraform_data's copy of a sensitive input
	// unmarked); the values of its sensitive outputs are masked too.
	PriorState []byte
	// Secrets are more values to mask wherever they appear, alone or
	// within a longer string: the TF_VAR_* values kl handed Terraform,
	// which kl masks in everything it takes from Terraform (ADR 0037),
	// whether or not the configuration declares them sensitive. Values
	// shorter than 8 bytes are ignored, as kl's TF_VAR masking ignores
	// them.
	Secrets []string
	// RefreshOnly says the plan is a refresh-only plan (terraform plan
	// -refresh-only, ADR 0045): its resource_changes are empty, and what
	// its apply records is its resource_drift — the objects the refresh
	// found changed or gone outside Terraform — which Build then lists
	// as the Resources, each with Drift set.
	RefreshOnly bool
}

// Build makes the diff of plan, which should come from
// terraform.ParsePlanJSON (numbers as json.Number, so that they print as
// Terraform wrote them). Resource instances whose action is no-op are left
// out unless they move or are imported; deletes come first, then
// replacements, then the rest in the plan's order (Terraform's: by
// address). Outputs whose action is no-op are left out.
//
// Every value a plan or opts.PriorState marks sensitive, and every leaf
// equal to such a value, is kept only as Value.Sensitive (package doc).
//
// Errors: a nil plan; a PriorState that is not a Terraform state v4
// document (tfstate.Parse's error). Any shape of marks, values or paths
// the plan JSON holds is read, never refused: a mark of an unexpected
// shape masks the value whole.
func Build(plan *tfjson.Plan, opts Options) (*Diff, error) {
	if plan == nil {
		return nil, errors.New("building plan diff: no plan")
	}
	b := &builder{sec: &secrets{min: minContained}}
	for _, v := range opts.Secrets {
		b.sec.addLeaf(v)
	}
	if err := b.readState(opts.PriorState); err != nil {
		return nil, err
	}
	b.collect(plan)
	d := &Diff{Format: Format, Resources: []Resource{}, Outputs: []Node{}}
	changes := plan.ResourceChanges
	if opts.RefreshOnly {
		changes = plan.ResourceDrift
	}
	for _, rc := range changes {
		if r, ok := b.resource(rc); ok {
			r.Drift = opts.RefreshOnly
			d.Resources = append(d.Resources, r)
		}
	}
	sort.SliceStable(d.Resources, func(i, j int) bool { return rank(d.Resources[i]) < rank(d.Resources[j]) })
	names := make([]string, 0, len(plan.OutputChanges))
	for name := range plan.OutputChanges {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		d.Outputs = append(d.Outputs, b.output(name, plan.OutputChanges[name])...)
	}
	return d, nil
}

// rank orders deletes first, then replacements, then the rest.
func rank(r Resource) int {
	switch r.Action {
	case Delete:
		return 0
	case Replace:
		return 1
	}
	return 2
}

// builder holds what Build learns from the whole plan before it diffs
// any resource: the state's marks per instance and the secret values.
type builder struct {
	// stateMarks are the sensitive_attributes of the prior state's
	// instances by instance address ("/deposed/KEY" appended for a deposed
	// object).
	stateMarks map[string]*mark
	// sensitiveOutputs are the root outputs something marks sensitive.
	sensitiveOutputs map[string]bool
	// sec are the plan's secrets of at least minContained bytes, masked
	// everywhere; local those of the resource instance or output being
	// diffed, of any length, masked in it.
	sec, local *secrets
}

// readState reads the prior state's marks and secrets.
func (b *builder) readState(raw []byte) error {
	b.stateMarks = map[string]*mark{}
	b.sensitiveOutputs = map[string]bool{}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	st, err := tfstate.Parse(raw)
	if err != nil {
		return fmt.Errorf("building plan diff: reading the prior state: %w", err)
	}
	for name, o := range st.Outputs {
		if o.Sensitive {
			b.sensitiveOutputs[name] = true
			b.sec.add(decode(o.Value))
		}
	}
	for i := range st.Resources {
		r := &st.Resources[i]
		insts, err := r.Instances()
		if err != nil {
			return fmt.Errorf("building plan diff: reading the prior state: %w", err)
		}
		for _, raw := range insts {
			b.readInstance(r, raw)
		}
	}
	return nil
}

// stateInstance is what readInstance needs of a state v4 instance object.
type stateInstance struct {
	IndexKey            json.RawMessage `json:"index_key"`
	Deposed             string          `json:"deposed"`
	Attributes          json.RawMessage `json:"attributes"`
	SensitiveAttributes json.RawMessage `json:"sensitive_attributes"`
}

func (b *builder) readInstance(r *tfstate.Resource, raw json.RawMessage) {
	var inst stateInstance
	if json.Unmarshal(raw, &inst) != nil {
		return // tfstate.Parse checked the entry's JSON
	}
	m := markOfPaths(inst.SensitiveAttributes)
	if m == nil {
		return
	}
	addr := instanceAddress(r, inst.IndexKey)
	if inst.Deposed != "" {
		addr += "/deposed/" + inst.Deposed
	}
	b.stateMarks[addr] = m
	b.sec.addMarked(decode(inst.Attributes), m)
}

// instanceAddress spells a state instance's address as the plan JSON does:
// `module.app["eu"].terraform_data.web[0]`, `data.x.y["k"]`.
func instanceAddress(r *tfstate.Resource, key json.RawMessage) string {
	addr := r.Type + "." + r.Name
	if r.Mode == tfstate.ModeData {
		addr = "data." + addr
	}
	if r.Module != "" {
		addr = r.Module + "." + addr
	}
	var s string
	var n json.Number
	switch {
	case len(key) == 0 || string(key) == "null":
	case json.Unmarshal(key, &s) == nil:
		addr += "[" + strconv.Quote(s) + "]"
	case json.Unmarshal(key, &n) == nil:
		addr += "[" + n.String() + "]"
	}
	return addr
}

// decode reads raw JSON with numbers as json.Number (nil for bad JSON).
func decode(raw json.RawMessage) any {
	if len(raw) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}

// stateMark is the state's mark of rc's object: at its previous address
// for a move (the state knows only that one).
func (b *builder) stateMark(rc *tfjson.ResourceChange) *mark {
	addr := rc.Address
	if rc.PreviousAddress != "" {
		addr = rc.PreviousAddress
	}
	if rc.DeposedKey != "" {
		addr += "/deposed/" + rc.DeposedKey
	}
	return b.stateMarks[addr]
}

// collect gathers the plan's secret values: the marked leaves of every
// resource change (drift too) and output change, the values of outputs
// marked sensitive anywhere in the plan, and of sensitive root variables.
func (b *builder) collect(plan *tfjson.Plan) {
	for _, rcs := range [][]*tfjson.ResourceChange{plan.ResourceChanges, plan.ResourceDrift} {
		for _, rc := range rcs {
			if rc == nil || rc.Change == nil {
				continue
			}
			ch := rc.Change
			b.sec.addMarked(ch.Before, union(markOf(ch.BeforeSensitive), b.stateMark(rc)))
			b.sec.addMarked(ch.After, markOf(ch.AfterSensitive))
		}
	}
	b.collectOutputs(plan)
	if plan.Config != nil && plan.Config.RootModule != nil {
		for name, v := range plan.Config.RootModule.Variables {
			if v != nil && v.Sensitive {
				if pv := plan.Variables[name]; pv != nil {
					b.sec.add(pv.Value)
				}
				b.sec.add(v.Default)
			}
		}
	}
}

func (b *builder) collectOutputs(plan *tfjson.Plan) {
	for _, sv := range []*tfjson.StateValues{plan.PlannedValues, priorValues(plan)} {
		if sv == nil {
			continue
		}
		for name, o := range sv.Outputs {
			if o != nil && o.Sensitive {
				b.sensitiveOutputs[name] = true
				b.sec.add(o.Value)
			}
		}
	}
	if plan.Config != nil && plan.Config.RootModule != nil {
		for name, o := range plan.Config.RootModule.Outputs {
			if o != nil && o.Sensitive {
				b.sensitiveOutputs[name] = true
			}
		}
	}
	for name, ch := range plan.OutputChanges {
		if ch == nil {
			continue
		}
		bm, am := markOf(ch.BeforeSensitive), markOf(ch.AfterSensitive)
		if b.sensitiveOutputs[name] {
			bm, am = &mark{all: true}, &mark{all: true}
		}
		b.sec.addMarked(ch.Before, bm)
		b.sec.addMarked(ch.After, am)
	}
}

func priorValues(plan *tfjson.Plan) *tfjson.StateValues {
	if plan.PriorState == nil {
		return nil
	}
	return plan.PriorState.Values
}

// resource diffs one resource change; false when it is left out (no-op,
// neither moved nor imported; or no change at all).
func (b *builder) resource(rc *tfjson.ResourceChange) (Resource, bool) {
	if rc == nil || rc.Change == nil {
		return Resource{}, false
	}
	ch := rc.Change
	r := Resource{
		Address: rc.Address, PreviousAddress: rc.PreviousAddress, Deposed: rc.DeposedKey,
		Mode: string(rc.Mode), Type: rc.Type, Name: rc.Name, Reason: string(rc.ActionReason),
	}
	r.Action, r.CreateFirst = action(ch.Actions)
	if r.Action == NoOp && r.PreviousAddress == "" && ch.Importing == nil {
		return Resource{}, false
	}
	bs := side{v: ch.Before, present: ch.Before != nil, sens: union(markOf(ch.BeforeSensitive), b.stateMark(rc))}
	as := side{v: ch.After, present: ch.After != nil, sens: markOf(ch.AfterSensitive), unk: markOf(ch.AfterUnknown)}
	b.local = &secrets{min: 1}
	b.local.addMarked(bs.v, bs.sens)
	b.local.addMarked(as.v, as.sens)
	if ch.Importing != nil {
		id := ch.Importing.ID
		if b.sec.leaf(id) || b.local.leaf(id) {
			id = "" // an id is no secret; a value that is one is masked all the same
		}
		r.Import = &Import{ID: id}
	}
	if _, ok := bs.v.(map[string]any); !ok {
		bs = side{v: map[string]any{}, present: bs.present, sens: bs.sens}
	}
	if _, ok := as.v.(map[string]any); !ok {
		as.v = map[string]any{}
	}
	r.Changes, r.Unchanged = b.attributes(r.Action, bs, as)
	for _, p := range replacePaths(ch.ReplacePaths) {
		if b.secretPath(p) {
			continue // a map key that is a secret would show it
		}
		r.ReplacePaths = append(r.ReplacePaths, p)
		markForcing(r.Changes, p)
	}
	return r, true
}

// attributes diffs a resource's top-level attributes: all of them created
// (create, read) or deleted (delete: after is null), none changed (forget:
// after is null too, but the object stays), or changed; and for an object
// that stays, its unchanged id and name as context (Terraform shows them
// to identify the object).
func (b *builder) attributes(a Action, bs, as side) ([]Node, int) {
	switch a {
	case Create, Read:
		bs = side{v: map[string]any{}, present: true}
	case Delete:
		as = side{v: map[string]any{}, present: true}
	case Forget:
		// Terraform writes after: null; the object stays as it is, only
		// out of the state.
		as = side{v: bs.v, present: true, sens: bs.sens}
	}
	changes, unchanged := b.objectChildren(bs, as)
	if a == Create || a == Read || a == Delete {
		return changes, unchanged
	}
	bm, am := bs.v.(map[string]any), as.v.(map[string]any)
	for _, k := range []string{"id", "name"} {
		v, ok := bm[k]
		if !ok || hasKey(changes, k) || !scalar(v) || v == nil || !equal(v, am[k]) ||
			bs.sens.key(k).isAll() || as.sens.key(k).isAll() || as.unk.key(k) != nil || b.secret(v) {
			continue
		}
		changes = append(changes, Node{Key: strPtr(k), Action: NoOp, Before: val(v), After: val(v)})
		unchanged--
	}
	sort.SliceStable(changes, func(i, j int) bool { return *changes[i].Key < *changes[j].Key })
	return changes, unchanged
}

func hasKey(ns []Node, k string) bool {
	for _, n := range ns {
		if n.Key != nil && *n.Key == k {
			return true
		}
	}
	return false
}

// action maps Terraform's actions; CreateFirst for create_before_destroy.
func action(a tfjson.Actions) (Action, bool) {
	switch {
	case a.NoOp():
		return NoOp, false
	case a.Create():
		return Create, false
	case a.Read():
		return Read, false
	case a.Update():
		return Update, false
	case a.Delete():
		return Delete, false
	case a.DestroyBeforeCreate():
		return Replace, false
	case a.CreateBeforeDestroy():
		return Replace, true
	case a.Forget():
		return Forget, false
	}
	var b bytes.Buffer
	for i, x := range a {
		if i > 0 {
			b.WriteByte('+')
		}
		b.WriteString(string(x))
	}
	return Action(b.String()), false
}

// replacePaths reads change.replace_paths: each a list of keys (strings)
// and indices (numbers).
func replacePaths(raw []any) []Path {
	var out []Path
	for _, p := range raw {
		steps, _ := p.([]any)
		if path := toPath(steps); len(path) > 0 {
			out = append(out, path)
		}
	}
	return out
}

// toPath reads one path; a step of another type ends it there.
func toPath(steps []any) Path {
	var path Path
	for _, s := range steps {
		switch x := s.(type) {
		case string:
			path = append(path, Step{Key: x})
		case json.Number:
			i, err := x.Int64()
			if err != nil {
				return path
			}
			path = append(path, Step{Index: int(i), IsIndex: true})
		case float64:
			path = append(path, Step{Index: int(x), IsIndex: true})
		default:
			return path
		}
	}
	return path
}

// secretPath reports whether a step of p is a key equal to a secret.
func (b *builder) secretPath(p Path) bool {
	for _, s := range p {
		if !s.IsIndex && (b.sec.leaf(s.Key) || b.local.leaf(s.Key)) {
			return true
		}
	}
	return false
}

// markForcing sets ForcesReplacement on the deepest node along p.
func markForcing(ns []Node, p Path) {
	var hit *Node
	for _, s := range p {
		var next *Node
		for i := range ns {
			n := &ns[i]
			if !s.IsIndex && n.Key != nil && *n.Key == s.Key || s.IsIndex && n.Index != nil && *n.Index == s.Index {
				next = n
				break
			}
		}
		if next == nil {
			break
		}
		hit, ns = next, next.Changes
	}
	if hit != nil {
		hit.ForcesReplacement = true
	}
}

// output diffs one root output change (none for a no-op). An output marked
// sensitive anywhere in the plan or the prior state is masked whole.
func (b *builder) output(name string, ch *tfjson.Change) []Node {
	if ch == nil || ch.Actions.NoOp() {
		return nil
	}
	bs := side{v: ch.Before, present: ch.Before != nil, sens: markOf(ch.BeforeSensitive)}
	as := side{v: ch.After, present: ch.After != nil, sens: markOf(ch.AfterSensitive), unk: markOf(ch.AfterUnknown)}
	if b.sensitiveOutputs[name] {
		bs.sens, as.sens = &mark{all: true}, &mark{all: true}
	}
	b.local = &secrets{min: 1}
	b.local.addMarked(bs.v, bs.sens)
	b.local.addMarked(as.v, as.sens)
	ns, st := b.node(keyStep(name), bs, as)
	if st == changed {
		return ns
	}
	// Terraform says it changes, yet the values are equal (an output it
	// re-creates, or one that stays null): show it as its action says.
	a, _ := action(ch.Actions)
	n := Node{Key: strPtr(name), Action: a}
	if a == Create || a == Update {
		n.After = b.leafValue(as)
	}
	if a == Delete || a == Update {
		n.Before = b.leafValue(bs)
	}
	return []Node{n}
}

// leafValue is one side of a leaf: unknown, masked when anything marks
// it, a scalar or an empty container as it is — and nothing for a
// container, which a fallback does not dump.
func (b *builder) leafValue(s side) *Value {
	switch {
	case s.unk.isAll():
		return &Value{Unknown: true}
	case s.sens.isAll() || b.secret(s.v):
		return &Value{Sensitive: true}
	case scalar(s.v) || empty(s.v):
		return val(s.v)
	}
	return nil
}
