package terraform

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// hclLoader finds and parses module directories on demand, for
// ExtractOptions.ConfigDir: locals are not in plan JSON (docs/terraform.md
// "Plan JSON"), so they are read from the configuration itself.
type hclLoader struct {
	rootDir     string
	manifest    map[string]string // module key → directory
	manifestErr error
	mods        map[string]*hclModule
	errs        map[string]error
}

// hclModule is what one module directory declares: each local's traversals
// and each block's traversals, keyed "resource.T.N", "data.T.N",
// "ephemeral.T.N", "output.N", "module.N", "provider.NAME[.ALIAS]" (a data
// source scoped to a check block is keyed like any data source). A name
// defined twice (an override file) keeps the traversals of both definitions.
type hclModule struct {
	dir    string
	locals map[string][]hcl.Traversal
	blocks map[string][]hcl.Traversal
}

// modulesManifest is TF_DATA_DIR/modules/modules.json as `terraform init`
// writes it.
type modulesManifest struct {
	Modules []struct {
		Key    string `json:"Key"`
		Source string `json:"Source"`
		Dir    string `json:"Dir"`
	} `json:"Modules"`
}

func newHCLLoader(opts ExtractOptions) *hclLoader {
	l := &hclLoader{rootDir: opts.ConfigDir, mods: map[string]*hclModule{}, errs: map[string]error{}}
	path := opts.ModulesManifest
	if path == "" {
		def := filepath.Join(opts.ConfigDir, ".terraform", "modules", "modules.json")
		if _, err := os.Stat(def); err != nil {
			return l
		}
		path = def
	}
	l.manifest, l.manifestErr = readModulesManifest(path, opts.ConfigDir)
	return l
}

// readModulesManifest maps module keys to directories; a relative Dir is
// relative to the root module directory.
func readModulesManifest(path, rootDir string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading modules manifest: %w", err)
	}
	var mf modulesManifest
	if err := json.Unmarshal(b, &mf); err != nil {
		return nil, fmt.Errorf("reading modules manifest %s: %w", path, err)
	}
	out := make(map[string]string, len(mf.Modules))
	for _, m := range mf.Modules {
		dir := m.Dir
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(rootDir, dir)
		}
		out[m.Key] = dir
	}
	return out, nil
}

// module returns the parsed directory of m, or why it cannot be read.
func (l *hclLoader) module(m *module) (*hclModule, error) {
	if hm, ok := l.mods[m.path]; ok {
		return hm, nil
	}
	if err, ok := l.errs[m.path]; ok {
		return nil, err
	}
	hm, err := l.load(m)
	if err != nil {
		l.errs[m.path] = err
		return nil, err
	}
	l.mods[m.path] = hm
	return hm, nil
}

func (l *hclLoader) load(m *module) (*hclModule, error) {
	dir, err := l.dirOf(m)
	if err != nil {
		return nil, err
	}
	return parseModuleDir(dir)
}

// dirOf finds a module's directory: the root is ConfigDir; a child comes
// from the modules manifest, else from a local source path relative to its
// parent's directory.
func (l *hclLoader) dirOf(m *module) (string, error) {
	if m.parent == nil {
		return l.rootDir, nil
	}
	if dir, ok := l.manifest[m.key]; ok {
		return dir, nil
	}
	src := ""
	if m.call != nil {
		src = m.call.Source
	}
	if isLocalSource(src) {
		parent, err := l.dirOf(m.parent)
		if err != nil {
			return "", err
		}
		return filepath.Join(parent, filepath.FromSlash(src)), nil
	}
	why := "no modules manifest was found"
	switch {
	case l.manifestErr != nil:
		why = l.manifestErr.Error()
	case l.manifest != nil:
		why = fmt.Sprintf("the modules manifest has no entry %q", m.key)
	}
	return "", fmt.Errorf("finding the directory of %s: source %q is not a local path and %s", m.path, src, why)
}

func isLocalSource(src string) bool {
	return strings.HasPrefix(src, "./") || strings.HasPrefix(src, "../") ||
		strings.HasPrefix(src, `.\`) || strings.HasPrefix(src, `..\`)
}

var moduleFileSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "locals"},
		{Type: "resource", LabelNames: []string{"type", "name"}},
		{Type: "data", LabelNames: []string{"type", "name"}},
		{Type: "ephemeral", LabelNames: []string{"type", "name"}},
		{Type: "output", LabelNames: []string{"name"}},
		{Type: "module", LabelNames: []string{"name"}},
		{Type: "provider", LabelNames: []string{"name"}},
		{Type: "check", LabelNames: []string{"name"}},
	},
}

// checkSchema finds the data sources scoped to a check block (Terraform
// 1.5+): they are read on every plan but are not in plan JSON's
// configuration.
var checkSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "data", LabelNames: []string{"type", "name"}}},
}

var aliasSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "alias"}}}

// parseModuleDir parses the .tf and .tf.json files of one module directory
// (not its subdirectories), as Terraform loads a module.
func parseModuleDir(dir string) (*hclModule, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading module dir: %w", err)
	}
	hm := &hclModule{dir: dir, locals: map[string][]hcl.Traversal{}, blocks: map[string][]hcl.Traversal{}}
	p := hclparse.NewParser()
	var names []string
	for _, en := range entries {
		n := en.Name()
		if en.IsDir() || strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".tf") || strings.HasSuffix(n, ".tf.json")) {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		path := filepath.Join(dir, n)
		f, err := parseConfigFile(p, path)
		if err != nil {
			return nil, err
		}
		if err := hm.add(f.Body); err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
	}
	return hm, nil
}

func (hm *hclModule) add(body hcl.Body) error {
	content, _, diags := body.PartialContent(moduleFileSchema)
	if diags.HasErrors() {
		return diags
	}
	for _, b := range content.Blocks {
		switch b.Type {
		case "locals":
			attrs, diags := b.Body.JustAttributes()
			if diags.HasErrors() {
				return diags
			}
			for name, a := range attrs {
				hm.locals[name] = append(hm.locals[name], a.Expr.Variables()...)
			}
		case "provider":
			key := "provider." + b.Labels[0]
			if c, _, diags := b.Body.PartialContent(aliasSchema); !diags.HasErrors() {
				if a, ok := c.Attributes["alias"]; ok {
					v, diags := a.Expr.Value(nil)
					if diags.HasErrors() || !v.IsKnown() || v.IsNull() || !v.Type().Equals(cty.String) {
						return errors.New("provider " + b.Labels[0] + ": alias is not a literal string")
					}
					key += "." + v.AsString()
				}
			}
			hm.blocks[key] = append(hm.blocks[key], blockTraversals(b.Body)...)
		case "check":
			c, _, diags := b.Body.PartialContent(checkSchema)
			if diags.HasErrors() {
				return diags
			}
			for _, d := range c.Blocks {
				key := "data." + strings.Join(d.Labels, ".")
				hm.blocks[key] = append(hm.blocks[key], blockTraversals(d.Body)...)
			}
		default:
			key := b.Type + "." + strings.Join(b.Labels, ".")
			hm.blocks[key] = append(hm.blocks[key], blockTraversals(b.Body)...)
		}
	}
	return nil
}

// metaArguments are top-level arguments of a resource, module or output
// block that name configuration objects rather than read values; plan JSON
// carries depends_on exactly.
var metaArguments = map[string]bool{"depends_on": true, "provider": true, "providers": true, "source": true, "version": true}

// blockTraversals returns every traversal in a block body, nested blocks
// included. In native syntax the iterator of a dynamic block is left out;
// in JSON syntax it is left to resolve, which ignores names that are not
// declared objects.
func blockTraversals(body hcl.Body) []hcl.Traversal {
	if sb, ok := body.(*hclsyntax.Body); ok {
		return syntaxTraversals(sb, nil, true)
	}
	attrs, _ := body.JustAttributes()
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []hcl.Traversal
	for _, n := range names {
		if metaArguments[n] {
			continue
		}
		out = append(out, attrs[n].Expr.Variables()...)
	}
	return out
}

func syntaxTraversals(b *hclsyntax.Body, iterators map[string]bool, top bool) []hcl.Traversal {
	var out []hcl.Traversal
	names := make([]string, 0, len(b.Attributes))
	for n := range b.Attributes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if top && metaArguments[n] {
			continue
		}
		for _, t := range b.Attributes[n].Expr.Variables() {
			if !iterators[t.RootName()] {
				out = append(out, t)
			}
		}
	}
	for _, blk := range b.Blocks {
		inner := iterators
		if blk.Type == "dynamic" && len(blk.Labels) > 0 {
			it := blk.Labels[0]
			if a, ok := blk.Body.Attributes["iterator"]; ok {
				if t, diags := hcl.AbsTraversalForExpr(a.Expr); !diags.HasErrors() {
					it = t.RootName()
				}
			}
			inner = make(map[string]bool, len(iterators)+1)
			for k := range iterators {
				inner[k] = true
			}
			inner[it] = true
		}
		out = append(out, syntaxTraversals(blk.Body, inner, false)...)
	}
	return out
}

// parseConfigFile parses one Terraform configuration file with p: the JSON
// syntax for a ".tf.json" file, native HCL otherwise (Terraform's own
// rule). Its error names the file.
func parseConfigFile(p *hclparse.Parser, path string) (*hcl.File, error) {
	var f *hcl.File
	var diags hcl.Diagnostics
	if strings.HasSuffix(path, ".json") {
		f, diags = p.ParseJSONFile(path)
	} else {
		f, diags = p.ParseHCLFile(path)
	}
	if diags.HasErrors() {
		return nil, fmt.Errorf("parsing %s: %w", path, diags)
	}
	return f, nil
}
