package closure

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
)

// FileScope scopes a plan to changed files (issue 17 §1): changed are paths
// relative to the root module directory, slash-separated, as a pull request
// lists them; baseDir is the root module directory of the base (the
// checkout the change is made against), from which each file's old content
// is read. The targets are the resources and data sources the changed
// files declare, plus every resource and data source that depends —
// through references, replace_triggered_by, module calls, providers — on
// a block of those files that changed (a resource, a variable default, a
// local, an output, a module call, a provider block) or is new, however
// many steps away: Terraform plans a change of each.
//
// What the slice cannot see returns a *Fallback with the reason: no
// changed files; a file that is not `.tf` (a `.tfvars` file, the
// dependency lock file, a `.tf.json` file, anything else); a `.tf` file in
// a directory no module of the configuration is loaded from; a deleted
// file or a block the base has and the change deleted; a changed
// `terraform` or `check` block; a moved, import or removed block whose
// address the configuration does not declare; and changes that reach no
// resource. Errors wrap ErrInvalid for a path that is absolute, leaves
// the root module directory or is in neither tree (a mistyped path), and
// name the file of a parse error.
func FileScope(cfg *Config, baseDir string, changed []string) (*Scope, error) {
	if len(changed) == 0 {
		return nil, fallback("the scope has no changed files: an empty target set is never \"nothing to plan\"")
	}
	roots := map[node]bool{}
	var touched []node
	for _, p := range changed {
		clean := path.Clean(filepath.ToSlash(p))
		if path.IsAbs(clean) {
			return nil, fmt.Errorf("scoping to changed files: %w: %q is absolute: give it relative to the root module directory (kl plan -C)", ErrInvalid, p)
		}
		if p == "" || clean == ".." || strings.HasPrefix(clean, "../") {
			return nil, fmt.Errorf("scoping to changed files: %w: %q is not a path inside the root module directory", ErrInvalid, p)
		}
		base := path.Base(clean)
		switch {
		case base == ".terraform.lock.hcl":
			return nil, fallback("%s changed: the dependency lock file selects the providers of every resource", clean)
		case strings.HasSuffix(base, ".tfvars") || strings.HasSuffix(base, ".tfvars.json"):
			return nil, fallback("%s changed: a variable file sets values the configuration does not show", clean)
		case strings.HasSuffix(base, ".tf.json"):
			return nil, fallback("%s changed: the slice cannot read a JSON configuration file", clean)
		case !strings.HasSuffix(base, ".tf"):
			return nil, fallback("%s changed: it is not a Terraform configuration file, so the closure cannot tell what it affects", clean)
		}
		dir := path.Dir(clean)
		var mods []*Module
		for _, mp := range cfg.paths {
			if m := cfg.modules[mp]; m.Rel == dir {
				mods = append(mods, m)
			}
		}
		if len(mods) == 0 {
			return nil, fallback("%s changed: no module of the configuration is loaded from %s", clean, dir)
		}
		if _, err := os.Stat(filepath.Join(cfg.Dir, filepath.FromSlash(clean))); errors.Is(err, fs.ErrNotExist) {
			if _, err := os.Stat(filepath.Join(baseDir, filepath.FromSlash(clean))); errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("scoping to changed files: %w: %s is neither in the configuration nor in the base: not a file the change touched", ErrInvalid, clean)
			}
			return nil, fallback("%s was deleted: the resources it declared are no longer in the configuration", clean)
		}
		old, err := oldBlocks(filepath.Join(baseDir, filepath.FromSlash(clean)), base)
		if err != nil {
			return nil, err
		}
		for _, m := range mods {
			nodes, reached, err := fileChanges(m, base, clean, old)
			if err != nil {
				return nil, err
			}
			touched = append(touched, reached...)
			for n, isRoot := range nodes {
				if isRoot {
					roots[n] = true
				} else {
					touched = append(touched, n)
				}
			}
		}
	}
	for _, n := range cfg.dependents(touched) {
		roots[n] = true
	}
	s := &Scope{How: "changed-files"}
	for n := range roots {
		s.roots = append(s.roots, n)
		s.Targets = append(s.Targets, joinPath(n.path, n.key))
	}
	if len(s.Targets) == 0 {
		return nil, fallback("the changed files change no resource: an empty target set is never \"nothing to plan\"")
	}
	sort.Strings(s.Targets)
	return s, nil
}

// blockID names a block for comparing a file's old and new blocks: its Key,
// or for a block without a name its type and text (its position may move).
func blockID(b *Block) string {
	if strings.Contains(b.Key, "#") {
		return b.Kind + "#" + string(b.Source)
	}
	return b.Key
}

// oldBlocks returns the blocks of the base's version of a file by blockID;
// none for a file the base does not have.
func oldBlocks(file, name string) (map[string]*Block, error) {
	src, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]*Block{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the base's %s: %w", file, err)
	}
	f, diags := hclparse.NewParser().ParseHCL(src, file)
	if diags.HasErrors() {
		return nil, fmt.Errorf("parsing the base's %s: %w", file, diags)
	}
	seq := 0
	bs, err := fileBlocks(name, src, f, &seq)
	if err != nil {
		return nil, fmt.Errorf("reading the base's %s: %w", file, err)
	}
	out := map[string]*Block{}
	for _, b := range bs {
		if !b.empty {
			out[blockID(b)] = b
		}
	}
	return out, nil
}

// fileChanges returns the nodes of one changed file of m: true for a root
// (a resource or data source it declares, the resource a changed moved or
// import block names), false for a changed or new block whose dependents
// are roots. A resource or data source that changed or is new is both: a
// root, and a block whose dependents are roots (a resource reading its
// attributes plans a change too, and one whose replace_triggered_by names
// it is replaced) — reachedBy lists them.
func fileChanges(m *Module, name, shown string, old map[string]*Block) (out map[node]bool, reachedBy []node, err error) {
	out = map[node]bool{}
	now := map[string]bool{}
	for _, k := range m.keys {
		b := m.blocks[k]
		if b.File != name {
			continue
		}
		id := blockID(b)
		now[id] = true
		ob, had := old[id]
		same := had && string(ob.Source) == string(b.Source)
		switch b.Kind {
		case "resource", "data":
			out[node{m.Path, k}] = true
			if !same {
				reachedBy = append(reachedBy, node{m.Path, k})
			}
		case "terraform", "check":
			if !same {
				return nil, nil, fallback("%s: a %s block changed, which the slice does not scope", shown, b.Kind)
			}
		case "moved", "import", "removed":
			if same {
				continue
			}
			a, ok := b.body.Attributes["to"]
			if !ok {
				return nil, nil, fallback("%s: a %s block changed whose resource the configuration no longer declares", shown, b.Kind)
			}
			t, diags := hcl.AbsTraversalForExpr(a.Expr)
			key := keyless(t)
			if diags.HasErrors() || m.blocks[key] == nil {
				return nil, nil, fallback("%s: a %s block changed whose address %s is not a resource of the module", shown, b.Kind, keyless(t))
			}
			out[node{m.Path, key}] = true
		case "ephemeral":
			out[node{m.Path, k}] = false
		default:
			if !same {
				out[node{m.Path, k}] = false
			}
		}
	}
	ids := make([]string, 0, len(old))
	for id := range old {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if !now[id] {
			what := old[id].Key
			if strings.Contains(what, "#") {
				what = "a " + old[id].Kind + " block"
			} else if kind := relocatedBy(m, what); kind != "" {
				return nil, nil, fallback("%s: %s is named by a %s block, which the slice does not plan", shown, what, kind)
			}
			return nil, nil, fallback("%s: %s was deleted, which the slice cannot plan (its objects are not in the configuration)", shown, what)
		}
	}
	return out, reachedBy, nil
}

// dependents returns every resource and data source whose closure holds one
// of from (a reverse walk of the dependency graph Compute walks forward).
func (c *Config) dependents(from []node) []node {
	if len(from) == 0 {
		return nil
	}
	rev := map[node][]node{}
	for _, p := range c.paths {
		for _, k := range c.modules[p].keys {
			n := node{p, k}
			for _, d := range c.deps(n) {
				rev[d] = append(rev[d], n)
			}
		}
	}
	seen := map[node]bool{}
	queue := append([]node(nil), from...)
	for _, n := range from {
		seen[n] = true
	}
	var out []node
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if k := c.modules[n.path].blocks[n.key].Kind; k == "resource" || k == "data" {
			out = append(out, n)
		}
		for _, d := range rev[n] {
			if !seen[d] {
				seen[d] = true
				queue = append(queue, d)
			}
		}
	}
	return out
}

// Unlisted returns the first file (slash-separated, relative to the root
// module directory, sorted) that is not the same under headDir and baseDir
// and is not among changed (paths as FileScope takes them); "" when every
// difference is listed. A plan scoped to a list of changed files that
// leaves one out would miss its change: the caller falls back. Entries
// that are not configuration (Terraform's data dir, .git, .kl, local
// states) are not compared. Errors name the directory that could not be
// read.
func Unlisted(headDir, baseDir string, changed []string) (string, error) {
	listed := map[string]bool{}
	for _, p := range changed {
		listed[path.Clean(filepath.ToSlash(p))] = true
	}
	head, err := treeFiles(headDir)
	if err != nil {
		return "", err
	}
	base, err := treeFiles(baseDir)
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(head)+len(base))
	for n := range head {
		names = append(names, n)
	}
	for n := range base {
		if _, ok := head[n]; !ok {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if listed[n] {
			continue
		}
		h, inHead := head[n]
		b, inBase := base[n]
		if !inHead || !inBase {
			return n, nil
		}
		same, err := sameFile(h, b)
		if err != nil {
			return "", err
		}
		if !same {
			return n, nil
		}
	}
	return "", nil
}

// treeFiles lists the configuration's files under dir: relative
// slash-separated path → absolute path.
func treeFiles(dir string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if notConfig(d) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = p
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("comparing the configuration with the base: %w", err)
	}
	return out, nil
}

// sameFile reports whether two files hold the same bytes.
func sameFile(a, b string) (bool, error) {
	x, err := os.ReadFile(a)
	if err != nil {
		return false, fmt.Errorf("comparing the configuration with the base: %w", err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		return false, fmt.Errorf("comparing the configuration with the base: %w", err)
	}
	return bytes.Equal(x, y), nil
}

// relocatedBy is the kind of the moved or removed block of m whose from
// names the resource key (a resource deleted from the configuration but
// moved or removed from the state by it), "" when none does.
func relocatedBy(m *Module, key string) string {
	for _, k := range m.keys {
		b := m.blocks[k]
		if b.Kind != "moved" && b.Kind != "removed" {
			continue
		}
		a, ok := b.body.Attributes["from"]
		if !ok {
			continue
		}
		if t, diags := hcl.AbsTraversalForExpr(a.Expr); !diags.HasErrors() && keyless(t) == key {
			return b.Kind
		}
	}
	return ""
}
