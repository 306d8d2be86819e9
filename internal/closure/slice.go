package closure

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
)

// WriteSlice writes the slice's configuration (issue 17 §3) under dir,
// which must not exist or be empty: each module directory the closure
// calls, at its path relative to the root module, holding each of its files
// with only the closure's blocks — the `terraform` blocks always, a
// `locals` block with only the closure's locals, and every variable of
// the root module — copied token for token
// with hclwrite (no string surgery), and the root's `.terraform.lock.hcl`
// when there is one. A file left without blocks is not written. Every
// other file under the root module directory is copied as it is (var files
// Terraform loads by itself — terraform.tfvars, *.auto.tfvars — templates
// and files the configuration reads with file() or templatefile()), except
// Terraform's and Kilolock's own directories (.terraform, .git, .kl,
// terraform.tfstate.d), state files, and the `.tf` files of the loaded
// modules, which are the sliced ones: the slice plans against the same
// inputs as the full configuration.
func (c *Closure) WriteSlice(dir string) error {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("writing slice: %w: %s is not empty", ErrInvalid, dir)
	}
	written := map[string]bool{}
	for _, p := range c.cfg.paths {
		m := c.cfg.modules[p]
		if m.call != nil && !c.sel[node{m.parent.Path, "module." + m.call.Name}] {
			continue
		}
		if written[m.Dir] {
			continue
		}
		written[m.Dir] = true
		out := filepath.Join(dir, filepath.FromSlash(m.Rel))
		if err := os.MkdirAll(out, 0o755); err != nil {
			return fmt.Errorf("writing slice: %w", err)
		}
		for _, name := range m.Files {
			b, ok, err := c.sliceFile(m, name)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
				return fmt.Errorf("writing slice: %w", err)
			}
		}
	}
	return c.copyOthers(dir)
}

// copyOthers copies every file under the root module directory that the
// slice does not write itself into dir (WriteSlice), keeping modes.
func (c *Closure) copyOthers(dir string) error {
	sliced := map[string]bool{}
	for _, m := range c.cfg.modules {
		for _, name := range m.Files {
			sliced[filepath.Join(m.Dir, name)] = true
		}
	}
	err := filepath.WalkDir(c.cfg.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if notConfig(d) {
				return filepath.SkipDir
			}
			return nil
		}
		if sliced[p] || notConfig(d) {
			return nil
		}
		rel, err := filepath.Rel(c.cfg.Dir, p)
		if err != nil {
			return err
		}
		return copyFile(p, filepath.Join(dir, rel))
	})
	if err != nil {
		return fmt.Errorf("writing slice: %w", err)
	}
	return nil
}

// notConfig reports whether an entry of a root module directory is not
// part of its configuration: Terraform's data dir, a VCS or Kilolock dir,
// workspaces' and local states, anything not a regular file or directory.
func notConfig(d fs.DirEntry) bool {
	name := d.Name()
	if d.IsDir() {
		return name == ".terraform" || name == ".git" || name == ".kl" || name == "terraform.tfstate.d"
	}
	return !d.Type().IsRegular() || strings.HasSuffix(name, ".tfstate") || strings.HasSuffix(name, ".tfstate.backup")
}

// copyFile copies the regular file src to dst, creating dst's directory,
// with src's permission bits.
func copyFile(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, st.Mode().Perm())
}

// Outputs are the names of the root module's outputs the closure holds,
// sorted: the slice's state keeps only these (SliceState), since
// Terraform plans the removal of a root output its configuration lacks.
func (c *Closure) Outputs() []string {
	var out []string
	for n := range c.sel {
		if name, ok := strings.CutPrefix(n.key, "output."); ok && n.path == "" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// sliceFile returns one file of m with only the closure's blocks, and
// whether any block is left.
func (c *Closure) sliceFile(m *Module, name string) ([]byte, bool, error) {
	path := filepath.Join(m.Dir, name)
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, false, fmt.Errorf("writing slice: %w", err)
	}
	f, diags := hclwrite.ParseConfig(src, path, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, false, fmt.Errorf("writing slice: parsing %s: %w", path, diags)
	}
	blocks := f.Body().Blocks()
	layout := m.layout[name]
	if len(blocks) != len(layout) {
		return nil, false, fmt.Errorf("writing slice: %s: hclwrite found %d blocks, hclsyntax %d", path, len(blocks), len(layout))
	}
	// Kept blocks are appended to a new file (RemoveBlock on the parsed one
	// is linear per call: quadratic on a file of thousands of blocks).
	out := hclwrite.NewEmptyFile()
	kept := 0
	for i, blk := range blocks {
		e := layout[i]
		keep := false
		switch {
		case blk.Type() == "terraform", blk.Type() == "variable" && m.Path == "":
			// Every root variable: the var files copied beside the slice
			// (terraform.tfvars, *.auto.tfvars) set them all, and Terraform
			// warns of a value for an undeclared one. The full plan needs
			// the same values, so declaring them adds no requirement.
			keep = true
		case blk.Type() == "locals":
			for _, k := range e.locals {
				if k == "" {
					continue
				}
				if c.sel[node{m.Path, k}] {
					keep = true
				} else {
					blk.Body().RemoveAttribute(k[len("local."):])
				}
			}
		default:
			keep = c.sel[node{m.Path, e.key}]
		}
		if keep {
			if kept > 0 {
				out.Body().AppendNewline()
			}
			out.Body().AppendBlock(blk)
			kept++
		}
	}
	return out.Bytes(), kept > 0, nil
}
