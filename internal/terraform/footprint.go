package terraform

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/go-version"
	tfjson "github.com/hashicorp/terraform-json"

	"github.com/kilolock/kilolock/internal/engine"
)

// ExtractOptions tunes ExtractFootprint. The zero value reads the plan JSON
// alone, which does not export locals: every `local.X` then widens the read
// set to its module prefix (docs/terraform.md "Plan JSON"); nor what
// dynamic blocks, lifecycle conditions and replace_triggered_by, and
// provisioner connection blocks reference: where plan JSON leaves a trace of
// them the module widens, and the footprint is marked Unverified unless
// widenings cover it (trace.go, ADR 0036).
type ExtractOptions struct {
	// ConfigDir is the root module directory the plan was made from. When
	// set, locals are resolved exactly by parsing the module's .tf and
	// .tf.json files with hashicorp/hcl/v2, and each block the plan JSON
	// summarizes (resources, data sources, outputs, provider blocks) is read
	// whole as well, which adds the references plan JSON leaves out: dynamic
	// blocks, lifecycle (replace_triggered_by, pre/postconditions),
	// provisioner connection blocks, and ephemeral resources.
	ConfigDir string
	// ModulesManifest is the modules manifest `terraform init` writes
	// (TF_DATA_DIR/modules/modules.json): it maps module keys ("app",
	// "app.db") to directories relative to ConfigDir. Empty means
	// ConfigDir/.terraform/modules/modules.json when that file exists;
	// without a manifest entry, a module call whose source is a local path
	// ("./…", "../…") is found from its source. A module whose directory
	// cannot be found or parsed is widened to its prefix, with the reason.
	ModulesManifest string
	// RefreshOnly says the plan was made with -refresh-only, which its
	// JSON does not say (docs/terraform.md; RefreshOnlyView): PlanFootprint
	// then takes its write set from its resource_drift and counts those
	// objects as Summary.Refresh (ADR 0045). ExtractFootprint ignores it:
	// its caller passes the view.
	RefreshOnly bool
}

// Footprint parses planJSON (`terraform show -json PLANFILE`) and returns
// its footprint and summary: ParsePlanJSON and PlanFootprint in one call.
// Errors wrap engine.ErrInvalid for anything that is not a readable plan
// (malformed JSON, a state file, an unsupported format_version).
func Footprint(planJSON []byte, opts ExtractOptions) (engine.Footprint, engine.PlanSummary, error) {
	plan, err := ParsePlanJSON(planJSON)
	if err != nil {
		return engine.Footprint{}, engine.PlanSummary{}, err
	}
	return PlanFootprint(plan, opts)
}

// PlanFootprint is plan's footprint (ExtractFootprint) and summary
// (Summarize), as `kl footprint` and the Runner derive them: with
// opts.RefreshOnly, of RefreshOnlyView(plan), the drifted objects counted
// as Summary.Refresh (ADR 0045). Errors are ExtractFootprint's, and with
// opts.RefreshOnly one wrapping engine.ErrInvalid when plan's
// resource_changes hold a change (NotRefreshOnly): Terraform writes none
// in a -refresh-only plan, and the drift view would leave those changes
// out of the write set.
func PlanFootprint(plan *tfjson.Plan, opts ExtractOptions) (engine.Footprint, engine.PlanSummary, error) {
	view := plan
	if opts.RefreshOnly {
		if err := NotRefreshOnly(plan); err != nil {
			return engine.Footprint{}, engine.PlanSummary{}, err
		}
		view = RefreshOnlyView(plan)
	}
	fp, err := ExtractFootprint(view, opts)
	if err != nil {
		return engine.Footprint{}, engine.PlanSummary{}, err
	}
	sum := Summarize(plan)
	if opts.RefreshOnly {
		sum.Refresh = DriftCount(plan)
	}
	return fp, sum, nil
}

// NotRefreshOnly returns an error wrapping engine.ErrInvalid when plan
// cannot have been made with -refresh-only: its resource_changes hold
// entries whose actions are not no-op (Terraform 1.11 writes no
// resource_changes at all for `plan -refresh-only`: docs/terraform.md,
// RefreshOnlyView). The error counts them and names the first three with
// their actions. Nil for a plan without such entries, and for nil.
func NotRefreshOnly(plan *tfjson.Plan) error {
	if plan == nil {
		return nil
	}
	var named []string
	n := 0
	for _, rc := range plan.ResourceChanges {
		if rc == nil || rc.Change == nil || rc.Change.Actions.NoOp() {
			continue
		}
		if n++; n <= 3 {
			var as []string
			for _, a := range rc.Change.Actions {
				as = append(as, string(a))
			}
			named = append(named, rc.Address+" ("+strings.Join(as, ", ")+")")
		}
	}
	if n == 0 {
		return nil
	}
	more := ""
	if n > 3 {
		more = fmt.Sprintf(" and %d more", n-3)
	}
	return engine.Errorf(engine.ErrInvalid, "the plan is not a refresh-only plan: its resource_changes hold %d change(s) — %s%s —, and Terraform writes none for plan -refresh-only; "+
		"its write set is its resource_changes: leave out --refresh-only", n, strings.Join(named, ", "), more)
}

// ExtractFootprint derives a plan's write set and read set (docs/design.md
// "write set", "read set"; docs/terraform.md "Plan JSON").
//
// Write: every resource_changes entry whose actions are not no-op (data
// source reads included), both addresses of a move (previous_address, even
// when no-op), an import (change.importing, even when no-op), and
// "output.NAME" for every root output_changes entry that is not no-op; each
// as the instance Terraform names (engine.ParseInstanceAddress, ADR 0065:
// `x.y["k"]`, `module.m[0].x.y`). A refresh-only plan writes what
// its resource_drift lists: pass RefreshOnlyView(plan) (ADR 0045).
//
// Read (resource-level addresses, or one instance where a reference names
// one with a literal key: `x.y["k"].id` reads `x.y["k"]`, ADR 0065): for
// each written resource, the references of its configuration (expressions
// and nested blocks, count/for_each, depends_on, provisioners, and the
// provider configuration it uses), the count/for_each/depends_on of
// every enclosing module call; for a resource whose configuration is gone
// (a delete, the old address of a move), its depends_on in prior_state. For
// a configured resource prior_state's depends_on is not read: it is
// transitive (docs/terraform.md "Plan JSON"), while a planned value depends only
// on the state of what its configuration references directly — a deeper
// dependency reaches it only through a resource that is itself written, and
// whose own references are then read. Reading it would widen the read set to
// whole dependency chains and turn independent versions into re-plans. For each
// changed root output, its expression and depends_on. References resolve as
// in the table of resolve (references.go): resources become addresses, data
// sources are followed transitively, module outputs and variables across
// module calls, locals through ExtractOptions. What cannot be resolved is
// widened to a module prefix (engine.ModulePrefix; "*" in the root module)
// and recorded once per prefix in Widened: the read set is never narrower
// than the truth. Without opts.ConfigDir, the modules whose configuration
// was needed, not read and not covered by a widening are named in
// Unverified (trace.go); with it, Unverified is always empty. Read may
// overlap Write; callers subtract.
//
// Plans should come from ParsePlanJSON: a terraform-json decoding elsewhere
// drops single, group and map nested blocks, and their references with them.
// Errors wrap engine.ErrInvalid: a nil plan, a resource change whose
// address does not parse, or an opts.ConfigDir that is missing, not a
// directory, or holds no .tf or .tf.json file.
func ExtractFootprint(plan *tfjson.Plan, opts ExtractOptions) (engine.Footprint, error) {
	if plan == nil {
		return engine.Footprint{}, engine.Errorf(engine.ErrInvalid, "extracting footprint: no plan")
	}
	if err := checkRootModuleDir(opts.ConfigDir); err != nil {
		return engine.Footprint{}, err
	}
	e := newExtractor(plan, opts)
	if err := e.run(plan); err != nil {
		return engine.Footprint{}, fmt.Errorf("extracting footprint: %w", err)
	}
	return e.footprint(), nil
}

// checkRootModuleDir refuses a config dir that is not a root module directory:
// missing, not a directory, or without .tf and .tf.json files (a mistyped
// path would otherwise only widen). Errors wrap engine.ErrInvalid.
func checkRootModuleDir(dir string) error {
	if dir == "" {
		return nil
	}
	st, err := os.Stat(dir)
	if err != nil {
		return engine.Errorf(engine.ErrInvalid, "config dir: %w", err)
	}
	if !st.IsDir() {
		return engine.Errorf(engine.ErrInvalid, "config dir %s is not a directory", dir)
	}
	tf, _ := filepath.Glob(filepath.Join(dir, "*.tf"))
	tfJSON, _ := filepath.Glob(filepath.Join(dir, "*.tf.json"))
	if len(tf)+len(tfJSON) == 0 {
		return engine.Errorf(engine.ErrInvalid, "config dir %s holds no .tf or .tf.json files: not a Terraform root module", dir)
	}
	return nil
}

// module is one module of the configuration, addressed by its module path
// without instance keys ("" for the root, "module.a.module.b").
type module struct {
	path     string
	key      string // modules manifest key: "a.b"
	cfg      *tfjson.ConfigModule
	parent   *module
	call     *tfjson.ModuleCall // the call in parent; nil for the root
	callName string
	children map[string]*module
	res      map[string]*tfjson.ConfigResource // "T.N" and "data.T.N"
}

func (m *module) where() string {
	if m.path == "" {
		return "root"
	}
	return m.path
}

// providerEntry is one provider_config entry. Entries are grouped under
// their normalized key "<module path>|<local name[.alias]>": Terraform
// versions spell module keys differently ("foo:aws", "module.foo:aws").
type providerEntry struct {
	raw   string // the provider_config key as written
	mod   string
	local string
	cfg   *tfjson.ProviderConfig
}

type priorEntry struct {
	mod      string
	relative bool // Terraform 0.12 wrote module-relative addresses
	deps     []string
}

type wideningAcc struct {
	froms   map[string]bool
	reasons map[string]bool
}

type extractor struct {
	grouped bool // references are unwound per traversal step (format ≥ 0.2)
	// exactProviderKeys: provider_config_key names the configuration used
	// (Terraform ≥ 1.3; see readProvider).
	exactProviderKeys bool
	root              *module
	mods              map[string]*module
	providers         map[string][]*providerEntry // by normalized key, raw keys sorted
	provOrder         []string                    // normalized keys, sorted
	prior             map[engine.Address][]priorEntry
	write             map[engine.Address]bool
	read              map[engine.Address]bool
	widened           map[engine.Address]*wideningAcc
	widenedMods       map[string]bool // modules widened to their prefix, call arguments read
	done              map[string]bool
	hcl               *hclLoader
	// Without a config dir (trace.go): modules whose configuration was
	// needed, planned values by resource, and what has conditions.
	unread     map[string]bool
	values     map[engine.Address][]instanceValues
	conditions map[string]bool // "module.a.T.N", "data.T.N", "output.N"
}

func newExtractor(plan *tfjson.Plan, opts ExtractOptions) *extractor {
	e := &extractor{
		mods:      map[string]*module{},
		providers: map[string][]*providerEntry{},
		prior:     map[engine.Address][]priorEntry{},
		write:     map[engine.Address]bool{},
		read:      map[engine.Address]bool{},
		widened:   map[engine.Address]*wideningAcc{},
		done:      map[string]bool{},

		widenedMods: map[string]bool{},
		unread:      map[string]bool{},
		values:      map[engine.Address][]instanceValues{},
		conditions:  map[string]bool{},
	}
	if v, err := version.NewVersion(plan.FormatVersion); err == nil {
		e.grouped = !v.LessThan(version.Must(version.NewVersion("0.2")))
	}
	if v, err := version.NewVersion(plan.TerraformVersion); err == nil {
		e.exactProviderKeys = !v.LessThan(version.Must(version.NewVersion("1.3.0")))
	}
	if plan.Config != nil && plan.Config.RootModule != nil {
		e.root = e.addModule(nil, "", plan.Config.RootModule, nil)
	}
	if plan.Config != nil {
		raws := make([]string, 0, len(plan.Config.ProviderConfigs))
		for raw, pc := range plan.Config.ProviderConfigs {
			if pc != nil {
				raws = append(raws, raw)
			}
		}
		sort.Strings(raws)
		for _, raw := range raws {
			mod, local := splitProviderKey(raw)
			k := mod + "|" + local
			if e.providers[k] == nil {
				e.provOrder = append(e.provOrder, k)
			}
			e.providers[k] = append(e.providers[k], &providerEntry{raw: raw, mod: mod, local: local, cfg: plan.Config.ProviderConfigs[raw]})
		}
		sort.Strings(e.provOrder)
	}
	if plan.PriorState != nil && plan.PriorState.Values != nil {
		e.indexPrior(plan.PriorState.Values.RootModule)
	}
	if opts.ConfigDir != "" {
		e.hcl = newHCLLoader(opts)
	} else {
		e.indexTraces(plan)
	}
	return e
}

func (e *extractor) addModule(parent *module, name string, cfg *tfjson.ConfigModule, call *tfjson.ModuleCall) *module {
	m := &module{cfg: cfg, parent: parent, call: call, callName: name, children: map[string]*module{}, res: map[string]*tfjson.ConfigResource{}}
	if parent != nil {
		m.path = joinPath(parent.path, "module."+name)
		m.key = name
		if parent.key != "" {
			m.key = parent.key + "." + name
		}
	}
	if m.cfg == nil {
		m.cfg = &tfjson.ConfigModule{}
	}
	e.mods[m.path] = m
	for _, r := range m.cfg.Resources {
		if r == nil {
			continue
		}
		key := r.Type + "." + r.Name
		if r.Mode == tfjson.DataResourceMode {
			key = "data." + key
		}
		m.res[key] = r
	}
	names := make([]string, 0, len(m.cfg.ModuleCalls))
	for n := range m.cfg.ModuleCalls {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		mc := m.cfg.ModuleCalls[n]
		if mc == nil {
			mc = &tfjson.ModuleCall{}
		}
		m.children[n] = e.addModule(m, n, mc.Module, mc)
	}
	return m
}

func (e *extractor) indexPrior(sm *tfjson.StateModule) {
	if sm == nil {
		return
	}
	for _, r := range sm.Resources {
		if r == nil {
			continue
		}
		a, relative := r.Address, false
		if sm.Address != "" && !strings.HasPrefix(a, sm.Address+".") {
			a, relative = sm.Address+"."+a, true
		}
		addr, err := engine.ParseAddress(a)
		if err != nil || len(r.DependsOn) == 0 {
			continue
		}
		e.prior[addr] = append(e.prior[addr], priorEntry{mod: addr.Module(), relative: relative, deps: r.DependsOn})
	}
	for _, c := range sm.ChildModules {
		e.indexPrior(c)
	}
}

func (e *extractor) run(plan *tfjson.Plan) error {
	for _, rc := range plan.ResourceChanges {
		if rc == nil {
			continue
		}
		if err := e.addResourceChange(rc); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(plan.OutputChanges))
	for n := range plan.OutputChanges {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ch := plan.OutputChanges[n]
		if ch != nil && ch.Actions.NoOp() {
			continue
		}
		e.addOutputChange(n, ch)
	}
	return nil
}

// isWrite reports whether a resource change writes state Kilolock owns:
// any action other than no-op, a move, or an import, of a managed resource.
// A data source read at apply time writes nothing: Terraform reads data
// sources again at every plan (tfstate never counts them as changed).
func isWrite(rc *tfjson.ResourceChange) bool {
	if rc.Mode == tfjson.DataResourceMode {
		return false
	}
	if rc.PreviousAddress != "" {
		return true
	}
	if rc.Change == nil {
		return true
	}
	return !rc.Change.Actions.NoOp() || rc.Change.Importing != nil
}

// removesOnly reports whether actions only take the object out of state.
func removesOnly(ch *tfjson.Change) bool {
	if ch == nil || len(ch.Actions) == 0 {
		return false
	}
	for _, a := range ch.Actions {
		if a != tfjson.ActionDelete && a != tfjson.ActionForget {
			return false
		}
	}
	return true
}

func (e *extractor) addResourceChange(rc *tfjson.ResourceChange) error {
	if !isWrite(rc) && !(rc.Mode == tfjson.DataResourceMode && rc.Change != nil && !rc.Change.Actions.NoOp()) {
		return nil
	}
	// The write set names the instance (ADR 0065); reads and the
	// configuration are looked up at resource level.
	inst, err := engine.ParseInstanceAddress(rc.Address)
	if err != nil {
		return engine.Errorf(engine.ErrInvalid, "resource change: %w", err)
	}
	addr := inst.Resource()
	if rc.Mode != tfjson.DataResourceMode {
		// A data source read at apply writes nothing Kilolock owns
		// (tfstate: never a change); what it reads is followed below.
		e.write[inst] = true
	}
	var prev engine.Address
	if rc.PreviousAddress != "" {
		prevInst, err := engine.ParseInstanceAddress(rc.PreviousAddress)
		if err != nil {
			return engine.Errorf(engine.ErrInvalid, "resource change %s: previous address: %w", rc.Address, err)
		}
		e.write[prevInst] = true
		prev = prevInst.Resource()
	}

	mod := addr.Module()
	key := strings.TrimPrefix(string(addr), mod+".") // "T.N" or "data.T.N"
	m := e.mods[mod]
	var cfg *tfjson.ConfigResource
	if m != nil {
		cfg = m.res[key]
	}
	switch {
	case cfg != nil:
		e.readResourceConfig(m, cfg)
		for a := m; a != nil && a.call != nil; a = a.parent {
			e.readRepetition(a)
		}
	case m != nil && strings.HasPrefix(key, "data.") && e.readScopedData(m, key):
		// A data source scoped to a check block, read from its HCL.
	case removesOnly(rc.Change):
		// The configuration is gone: what is read is the provider that
		// deletes it and what it depended on when last applied.
		e.readProviderFallback(e.nearest(mod))
		e.readPriorDeps(addr)
	default:
		e.widenPath(mod, rc.Address, "the resource has no configuration in the plan")
		e.readPriorDeps(addr)
	}
	// The old address of a move has no configuration of its own.
	if prev != "" && prev != addr {
		e.readPriorDeps(prev)
	}
	return nil
}

// readScopedData reads, with a config dir, a data source that plan JSON's
// configuration does not list (one scoped to a check block) from its HCL
// block. It reports false when there is no such block to read.
func (e *extractor) readScopedData(m *module, key string) bool {
	if e.hcl == nil {
		return false
	}
	hm, err := e.hcl.module(m)
	if err != nil {
		return false
	}
	trs, ok := hm.blocks[key]
	if !ok {
		return false
	}
	e.resolveTraversals(m, trs)
	e.readProviderFallback(m)
	for a := m; a != nil && a.call != nil; a = a.parent {
		e.readRepetition(a)
	}
	return true
}

func (e *extractor) addOutputChange(name string, ch *tfjson.Change) {
	e.write[engine.Address("output."+name)] = true
	var cfg *tfjson.ConfigOutput
	if e.root != nil {
		cfg = e.root.cfg.Outputs[name]
	}
	if cfg == nil {
		if !removesOnly(ch) {
			e.widenPath("", "output."+name, "the output has no configuration in the plan")
		}
		return
	}
	e.readExpr(e.root, cfg.Expression)
	e.readDependsOn(e.root, cfg.DependsOn)
	e.readHCLBlock(e.root, "output."+name)
}

func (e *extractor) readPriorDeps(addr engine.Address) {
	for _, p := range e.prior[addr] {
		for _, d := range p.deps {
			if p.relative && p.mod != "" {
				d = p.mod + "." + d
			}
			e.readDependsOnAddress(p.mod, d, "depends_on of "+string(addr)+" in prior state")
		}
	}
}

// readResourceConfig reads what a resource's (or data source's)
// configuration references: its expressions with nested blocks,
// provisioners, count/for_each, depends_on, provider configuration and,
// with a config dir, the whole HCL block.
func (e *extractor) readResourceConfig(m *module, r *tfjson.ConfigResource) {
	kind := "resource."
	if r.Mode == tfjson.DataResourceMode {
		kind = "data."
	}
	key := kind + r.Type + "." + r.Name
	if !e.once("res|" + m.path + "|" + key) {
		return
	}
	e.readExprs(m, r.Expressions)
	for _, p := range r.Provisioners {
		if p != nil {
			e.readExprs(m, p.Expressions)
		}
	}
	e.readExpr(m, r.CountExpression)
	e.readExpr(m, r.ForEachExpression)
	e.readDependsOn(m, r.DependsOn)
	e.readProvider(m, r.ProviderConfigKey)
	e.readHCLBlock(m, key)
}

// readRepetition reads the count/for_each and depends_on of the call of
// module m (in the parent's scope): they decide every instance inside it.
func (e *extractor) readRepetition(m *module) {
	if m.call == nil || !e.once("rep|"+m.path) {
		return
	}
	e.readExpr(m.parent, m.call.CountExpression)
	e.readExpr(m.parent, m.call.ForEachExpression)
	e.readDependsOn(m.parent, m.call.DependsOn)
}

// readDependsOn reads configuration depends_on entries of module m.
func (e *extractor) readDependsOn(m *module, deps []string) {
	for _, d := range deps {
		e.readDependsOnAddress(m.path, joinPath(m.path, d), "depends_on "+d+" in "+m.where())
	}
}

// readDependsOnAddress reads one absolute depends_on address: a resource or
// data source is read as itself; a module call means everything in it, so
// its prefix is read and recorded as a widening.
func (e *extractor) readDependsOnAddress(mod, abs, from string) {
	st, ok := parseSteps(abs)
	if ok {
		i := 0
		for i+1 < len(st) && st[i].name == "module" && !st[i].index && !st[i+1].index {
			i += 2
			if i < len(st) && st[i].index {
				i++
			}
		}
		if i == len(st) && i > 0 {
			path := modulePathOf(st)
			e.widen(engine.ModulePrefix(path), from, "depends_on names a whole module call: everything in it is read")
			return
		}
	}
	addr, err := engine.ParseAddress(abs)
	if err != nil || addr.IsPrefix() || addr.IsOutput() {
		e.widenPath(mod, from, "the depends_on entry is not a resource address")
		return
	}
	e.read[addr] = true
}

// widen adds prefix to the read set and records why, once per prefix.
func (e *extractor) widen(prefix engine.Address, from, reason string) {
	e.read[prefix] = true
	w := e.widened[prefix]
	if w == nil {
		w = &wideningAcc{froms: map[string]bool{}, reasons: map[string]bool{}}
		e.widened[prefix] = w
	}
	w.froms[from] = true
	w.reasons[reason] = true
}

// widenModule widens to m's prefix. What is unresolved in m may also read
// m's input variables, whose values come from outside the prefix: all of
// m's call arguments are read in the parent's scope as well.
func (e *extractor) widenModule(m *module, from, reason string) {
	e.widen(engine.ModulePrefix(m.path), from, reason)
	e.widenedMods[m.path] = true
	if m.call == nil || !e.once("inputs|"+m.path) {
		return
	}
	names := make([]string, 0, len(m.call.Expressions))
	for n := range m.call.Expressions {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e.readExpr(m.parent, m.call.Expressions[n])
	}
	e.readRepetition(m)
}

// widenPath widens to the nearest module of path that has configuration
// (the whole state when there is none).
func (e *extractor) widenPath(path, from, reason string) {
	if m := e.nearest(path); m != nil {
		e.widenModule(m, from, reason)
		return
	}
	e.widen(engine.AllAddresses, from, reason)
}

func (e *extractor) nearest(path string) *module {
	for {
		if m := e.mods[path]; m != nil {
			return m
		}
		if path == "" {
			return nil
		}
		path = parentPath(path)
	}
}

func (e *extractor) once(key string) bool {
	if e.done[key] {
		return false
	}
	e.done[key] = true
	return true
}

func (e *extractor) footprint() engine.Footprint {
	var fp engine.Footprint
	w := make([]engine.Address, 0, len(e.write))
	for a := range e.write {
		w = append(w, a)
	}
	r := make([]engine.Address, 0, len(e.read))
	for a := range e.read {
		if a.IsInstance() && e.read[a.Resource()] {
			continue // the whole resource is read as well
		}
		r = append(r, a)
	}
	fp.Write = engine.NewAddressSet(w...)
	fp.Read = engine.NewAddressSet(r...)
	for a, acc := range e.widened {
		fp.Widened = append(fp.Widened, engine.Widening{Address: a, From: joinSorted(acc.froms, ", "), Reason: joinSorted(acc.reasons, "; ")})
	}
	sort.Slice(fp.Widened, func(i, j int) bool { return fp.Widened[i].Address < fp.Widened[j].Address })
	fp.Unverified = e.unverified()
	return fp
}

func joinSorted(set map[string]bool, sep string) string {
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return strings.Join(out, sep)
}
