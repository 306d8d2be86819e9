package closure

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// ErrInvalid marks bad input: a path or address that does not parse, a
// root module directory that is missing or holds no configuration.
var ErrInvalid = errors.New("invalid input")

// Fallback says the native lane cannot plan this change and the terraform
// lane must (issue 17 §1, ADR 0033 D4): Reason is plain words for the
// `fell-back` marker. Functions of this package return it as an error;
// callers find it with errors.As.
type Fallback struct {
	// Reason says, in plain words, what the slice cannot see or write.
	Reason string
}

func (f *Fallback) Error() string { return "falling back to the terraform lane: " + f.Reason }

func fallback(format string, args ...any) error {
	return &Fallback{Reason: fmt.Sprintf(format, args...)}
}

// Config is a root module directory and the local modules it calls, parsed
// as Terraform loads a module: every `.tf` file of a directory, not its
// subdirectories, dot files left out.
type Config struct {
	// Dir is the root module directory, absolute.
	Dir     string
	modules map[string]*Module // by module path: "" for the root, "module.a.module.b"
	paths   []string           // module paths, sorted
}

// Module is one module of the configuration, at one module path (a
// directory called twice is two Modules sharing Dir).
type Module struct {
	// Path is the module path without instance keys: "" for the root,
	// "module.app.module.db".
	Path string
	// Dir is the module's directory, absolute; Rel is it relative to the
	// root module directory, slash-separated ("." for the root).
	Dir, Rel string
	// Files are the `.tf` file names of Dir, sorted.
	Files  []string
	blocks map[string]*Block // by Key
	keys   []string          // Keys in file order
	calls  map[string]*Call  // by call name
	parent *Module
	call   *Call                  // the call of this module in parent; nil for the root
	seq    int                    // top-level blocks seen, numbering unnamed ones
	layout map[string][]fileEntry // file name → its top-level blocks in order
}

// fileEntry is one top-level block of a file: its Key, or for a locals
// block the Keys of its locals.
type fileEntry struct {
	key    string
	locals []string
}

// Call is one module call (`module "NAME" {}`).
type Call struct {
	Name, Source string
	// Child is the called module when Source is a local path inside the
	// root module directory; nil otherwise, and Why says why.
	Child *Module
	Why   string
}

// Block is one top-level block of a module, or one local value of a
// `locals` block.
type Block struct {
	// Key names the block within its module: "terraform_data.web",
	// "data.T.N", "ephemeral.T.N", "var.X", "local.X", "output.X",
	// "module.C", "provider.NAME" or "provider.NAME.ALIAS", "terraform#N",
	// "moved#N", "import#N", "removed#N", "check.NAME" (N: the block's
	// 1-based position in the module, for blocks without a name).
	Key string
	// Kind is the block type ("resource", "data", "variable", "output",
	// "module", "provider", "terraform", "moved", "import", "removed",
	// "check", "ephemeral"), or "local" for one local value.
	Kind string
	// File is the file name holding the block, within its module directory.
	File string
	// Source is the block's text (for a local, its attribute's), used to
	// tell a changed block from an unchanged one.
	Source []byte
	body   *hclsyntax.Body      // nil for a local
	attr   *hclsyntax.Attribute // a local's attribute
	first  bool                 // the first local of its locals block
	empty  bool                 // stands for a locals block without locals
}

// Load parses the root module directory dir and, recursively, the local
// modules it calls. Errors wrap ErrInvalid for a dir that is missing or
// holds no `.tf` file, and name the file of a parse error or of a block
// declared twice. A configuration the slice cannot represent returns a
// *Fallback: a `.tf.json` file or an override file (`override.tf`,
// `*_override.tf`: Terraform merges them into other blocks) in a module.
// A module whose source is not a local path inside dir (a registry or Git
// module, `../shared`) is loaded as a Call without Child; only a closure
// that reaches it falls back.
func Load(dir string) (*Config, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("loading configuration: %w", err)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("loading configuration: %w: %w", ErrInvalid, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("loading configuration: %w: %s is not a directory", ErrInvalid, dir)
	}
	cfg := &Config{Dir: abs, modules: map[string]*Module{}}
	root, err := cfg.load("", abs, nil, nil)
	if err != nil {
		return nil, err
	}
	if len(root.Files) == 0 {
		return nil, fmt.Errorf("loading configuration: %w: %s holds no .tf files: not a Terraform root module", ErrInvalid, dir)
	}
	for p := range cfg.modules {
		cfg.paths = append(cfg.paths, p)
	}
	sort.Strings(cfg.paths)
	return cfg, nil
}

// OutsideSources are the directories (absolute, cleaned, sorted, each
// once) of the local module calls whose source is outside the root
// module directory: modules the slice cannot write, whose files a change
// may touch although no changed file of the directory shows it.
func (c *Config) OutsideSources() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range c.paths {
		m := c.modules[p]
		for _, cl := range m.calls {
			if cl.Child != nil || !isLocalSource(cl.Source) {
				continue
			}
			if d := filepath.Clean(filepath.Join(m.Dir, filepath.FromSlash(cl.Source))); !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Module returns the module at path ("" for the root), or nil.
func (c *Config) Module(path string) *Module { return c.modules[path] }

// maxDepth bounds module nesting: a module that calls itself would
// otherwise recurse forever.
const maxDepth = 32

func (c *Config) load(path, dir string, parent *Module, call *Call) (*Module, error) {
	if strings.Count(path, "module.") > maxDepth {
		return nil, fmt.Errorf("loading configuration: %w: module %s nests more than %d calls deep (a module that calls itself?)", ErrInvalid, path, maxDepth)
	}
	rel, err := filepath.Rel(c.Dir, dir)
	if err != nil {
		return nil, fmt.Errorf("loading module %s: %w", where(path), err)
	}
	m := &Module{Path: path, Dir: dir, Rel: filepath.ToSlash(rel), blocks: map[string]*Block{}, calls: map[string]*Call{}, parent: parent, call: call}
	if err := m.parse(); err != nil {
		return nil, err
	}
	c.modules[path] = m
	names := make([]string, 0, len(m.calls))
	for n := range m.calls {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		cl := m.calls[n]
		if !isLocalSource(cl.Source) {
			cl.Why = fmt.Sprintf("module %s has source %q, which is not a local path: the slice cannot write a remote module", where(joinPath(path, "module."+n)), cl.Source)
			continue
		}
		cdir := filepath.Join(dir, filepath.FromSlash(cl.Source))
		if r, err := filepath.Rel(c.Dir, cdir); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			cl.Why = fmt.Sprintf("module %s has source %q, outside the root module directory: the slice cannot write it", where(joinPath(path, "module."+n)), cl.Source)
			continue
		}
		child, err := c.load(joinPath(path, "module."+n), cdir, m, cl)
		if err != nil {
			return nil, err
		}
		cl.Child = child
	}
	return m, nil
}

// isLocalSource is Terraform's rule for a local module path.
func isLocalSource(src string) bool {
	return strings.HasPrefix(src, "./") || strings.HasPrefix(src, "../") ||
		strings.HasPrefix(src, `.\`) || strings.HasPrefix(src, `..\`)
}

// isOverride is Terraform's rule for an override file.
func isOverride(name string) bool {
	base := strings.TrimSuffix(strings.TrimSuffix(name, ".json"), ".tf")
	return base == "override" || strings.HasSuffix(base, "_override")
}

func (m *Module) parse() error {
	entries, err := os.ReadDir(m.Dir)
	if err != nil {
		return fmt.Errorf("loading module %s: %w: %w", where(m.Path), ErrInvalid, err)
	}
	p := hclparse.NewParser()
	for _, en := range entries {
		n := en.Name()
		if en.IsDir() || strings.HasPrefix(n, ".") {
			continue
		}
		switch {
		case strings.HasSuffix(n, ".tf.json"):
			return fallback("module %s has the JSON configuration file %s, which the slice cannot write with hclwrite", where(m.Path), n)
		case !strings.HasSuffix(n, ".tf"):
			continue
		case isOverride(n):
			return fallback("module %s has the override file %s: Terraform merges it into other blocks, which the closure does not model", where(m.Path), n)
		}
		m.Files = append(m.Files, n)
	}
	sort.Strings(m.Files)
	for _, n := range m.Files {
		path := filepath.Join(m.Dir, n)
		src, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("loading module %s: %w", where(m.Path), err)
		}
		f, diags := p.ParseHCL(src, path)
		if diags.HasErrors() {
			return fmt.Errorf("parsing %s: %w", path, diags)
		}
		if err := m.add(n, src, f); err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
	}
	return nil
}

// fileBlocks returns the blocks of one parsed file, in order, keyed as
// Block.Key; seq numbers unnamed blocks from n.
func fileBlocks(name string, src []byte, f *hcl.File, seq *int) ([]*Block, error) {
	body, ok := f.Body.(*hclsyntax.Body)
	if !ok {
		return nil, fmt.Errorf("%w: not native HCL syntax", ErrInvalid)
	}
	if len(body.Attributes) > 0 {
		for n := range body.Attributes {
			return nil, fmt.Errorf("%w: argument %q outside any block", ErrInvalid, n)
		}
	}
	var out []*Block
	text := func(r hcl.Range) []byte { return append([]byte(nil), r.SliceBytes(src)...) }
	for _, b := range body.Blocks {
		*seq++
		blk := &Block{Kind: b.Type, File: name, Source: text(b.Range()), body: b.Body}
		switch b.Type {
		case "resource", "data", "ephemeral":
			if len(b.Labels) != 2 {
				return nil, fmt.Errorf("%w: %s block needs two labels (type, name)", ErrInvalid, b.Type)
			}
			blk.Key = b.Labels[0] + "." + b.Labels[1]
			if b.Type != "resource" {
				blk.Key = b.Type + "." + blk.Key
			}
		case "variable", "output", "module", "check":
			if len(b.Labels) != 1 {
				return nil, fmt.Errorf("%w: %s block needs one label (name)", ErrInvalid, b.Type)
			}
			prefix := b.Type
			if b.Type == "variable" {
				prefix = "var"
			}
			blk.Key = prefix + "." + b.Labels[0]
		case "provider":
			if len(b.Labels) != 1 {
				return nil, fmt.Errorf("%w: provider block needs one label (name)", ErrInvalid)
			}
			blk.Key = "provider." + b.Labels[0]
			if a, ok := b.Body.Attributes["alias"]; ok {
				v, diags := a.Expr.Value(nil)
				if diags.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type().FriendlyName() != "string" {
					return nil, fmt.Errorf("%w: provider %s: alias is not a literal string", ErrInvalid, b.Labels[0])
				}
				blk.Key += "." + v.AsString()
			}
		case "locals":
			names := make([]string, 0, len(b.Body.Attributes))
			for n := range b.Body.Attributes {
				names = append(names, n)
			}
			sort.Slice(names, func(i, j int) bool {
				return b.Body.Attributes[names[i]].SrcRange.Start.Byte < b.Body.Attributes[names[j]].SrcRange.Start.Byte
			})
			if len(names) == 0 {
				out = append(out, &Block{Kind: "local", File: name, first: true, empty: true})
			}
			for i, n := range names {
				a := b.Body.Attributes[n]
				out = append(out, &Block{Key: "local." + n, Kind: "local", File: name, Source: text(a.SrcRange), attr: a, first: i == 0})
			}
			continue
		default: // terraform, moved, import, removed and blocks of later releases
			blk.Key = fmt.Sprintf("%s#%d", b.Type, *seq)
		}
		out = append(out, blk)
	}
	return out, nil
}

func (m *Module) add(name string, src []byte, f *hcl.File) error {
	blocks, err := fileBlocks(name, src, f, &m.seq)
	if err != nil {
		return err
	}
	if m.layout == nil {
		m.layout = map[string][]fileEntry{}
	}
	for _, b := range blocks {
		if b.Kind == "local" {
			if b.first || len(m.layout[name]) == 0 {
				m.layout[name] = append(m.layout[name], fileEntry{})
			}
			e := &m.layout[name][len(m.layout[name])-1]
			e.locals = append(e.locals, b.Key)
		} else {
			m.layout[name] = append(m.layout[name], fileEntry{key: b.Key})
		}
		if b.empty {
			continue
		}
		if prev, ok := m.blocks[b.Key]; ok {
			return fmt.Errorf("%w: %s is declared twice (also in %s)", ErrInvalid, b.Key, prev.File)
		}
		m.blocks[b.Key] = b
		m.keys = append(m.keys, b.Key)
		if b.Kind == "module" {
			src := ""
			if a, ok := b.body.Attributes["source"]; ok {
				v, diags := a.Expr.Value(nil)
				if diags.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type().FriendlyName() != "string" {
					return fmt.Errorf("%w: %s: source is not a literal string", ErrInvalid, b.Key)
				}
				src = v.AsString()
			}
			name := strings.TrimPrefix(b.Key, "module.")
			m.calls[name] = &Call{Name: name, Source: src}
		}
	}
	return nil
}

func joinPath(mod, rest string) string {
	if mod == "" {
		return rest
	}
	return mod + "." + rest
}

func where(mod string) string {
	if mod == "" {
		return "root"
	}
	return mod
}
