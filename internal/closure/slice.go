package closure

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
)

// WriteSlice writes the slice's configuration (issue 17 §3) under dir,
// which must not exist or be empty: each module directory the closure
// calls, at its path relative to the root module, holding each of its files
// with only the closure's blocks — the `terraform` blocks always, a
// `locals` block with only the closure's locals — copied token for token
// with hclwrite (no string surgery), and the root's `.terraform.lock.hcl`
// when there is one. A file left without blocks is not written.
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
	lock := filepath.Join(c.cfg.Dir, ".terraform.lock.hcl")
	if b, err := os.ReadFile(lock); err == nil {
		if err := os.WriteFile(filepath.Join(dir, ".terraform.lock.hcl"), b, 0o644); err != nil {
			return fmt.Errorf("writing slice: %w", err)
		}
	} else if !os.IsNotExist(err) {
		return fmt.Errorf("writing slice: %w", err)
	}
	return nil
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
		case blk.Type() == "terraform":
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
