package terraform

import (
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/kilolock/kilolock/internal/engine"
)

// lockFileName is Terraform's dependency lock file, in the root module.
const lockFileName = ".terraform.lock.hcl"

// lockedProvider is one provider block of a dependency lock file.
type lockedProvider struct {
	// Source is the provider's full source address, as the lock file
	// writes it: HOSTNAME/NAMESPACE/TYPE.
	Source string
	// Version is the exact version selected ("5.31.0").
	Version string
	// H1 are the block's "h1:" hashes (dirhash.Hash1 of an unpacked
	// package, one per platform the lock file was made for); zh: hashes
	// (of the zip archives) are not kept: a cached package is a directory.
	H1 []string
	// Block is the provider block's own source text, as written.
	Block []byte
}

// path is Source/Version as a relative path of Terraform's unpacked
// plugin cache layout (HOSTNAME/NAMESPACE/TYPE/VERSION).
func (p lockedProvider) path() string { return p.Source + "/" + p.Version }

// hasH1 reports whether h is one of p's h1: hashes.
func (p lockedProvider) hasH1(h string) bool {
	for _, x := range p.H1 {
		if x == h {
			return true
		}
	}
	return false
}

// parseLockFile reads the provider blocks of a dependency lock file
// (Terraform's `provider "HOST/NS/TYPE" { version, constraints, hashes }`,
// internal/depsfile in hashicorp/terraform). Errors wrap engine.ErrInvalid:
// a syntax error, a block without one label, a source that is not
// HOSTNAME/NAMESPACE/TYPE, a version or hashes that are not literals.
func parseLockFile(src []byte, name string) ([]lockedProvider, error) {
	f, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, engine.Errorf(engine.ErrInvalid, "reading dependency lock file: %s", diags.Error())
	}
	body, ok := f.Body.(*hclsyntax.Body)
	if !ok {
		return nil, engine.Errorf(engine.ErrInvalid, "reading dependency lock file %s: not native HCL syntax", name)
	}
	var out []lockedProvider
	for _, b := range body.Blocks {
		if b.Type != "provider" {
			continue
		}
		if len(b.Labels) != 1 || strings.Count(b.Labels[0], "/") != 2 || strings.Contains(b.Labels[0], "..") {
			return nil, engine.Errorf(engine.ErrInvalid, "reading dependency lock file %s: provider block %q: want one label HOSTNAME/NAMESPACE/TYPE", name, b.Labels)
		}
		p := lockedProvider{Source: b.Labels[0]}
		rng := b.Range()
		p.Block = src[rng.Start.Byte:rng.End.Byte]
		if a, ok := b.Body.Attributes["version"]; ok {
			v, diags := a.Expr.Value(nil)
			if diags.HasErrors() || v.Type() != cty.String || v.IsNull() {
				return nil, engine.Errorf(engine.ErrInvalid, "reading dependency lock file %s: provider %s: version is not a string", name, p.Source)
			}
			p.Version = v.AsString()
		}
		if p.Version == "" || strings.ContainsAny(p.Version, `/\`) || p.Version == "." || p.Version == ".." {
			return nil, engine.Errorf(engine.ErrInvalid, "reading dependency lock file %s: provider %s: version %q", name, p.Source, p.Version)
		}
		if a, ok := b.Body.Attributes["hashes"]; ok {
			v, diags := a.Expr.Value(nil)
			if diags.HasErrors() || !(v.Type().IsTupleType() || v.Type().IsListType()) || v.IsNull() {
				return nil, engine.Errorf(engine.ErrInvalid, "reading dependency lock file %s: provider %s: hashes is not a list of strings", name, p.Source)
			}
			for it := v.ElementIterator(); it.Next(); {
				_, h := it.Element()
				if h.Type() != cty.String || h.IsNull() {
					return nil, engine.Errorf(engine.ErrInvalid, "reading dependency lock file %s: provider %s: hashes is not a list of strings", name, p.Source)
				}
				if s := h.AsString(); strings.HasPrefix(s, "h1:") {
					p.H1 = append(p.H1, s)
				}
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// readLockFile reads and parses the lock file at path; (nil, false, nil)
// when there is none.
func readLockFile(path string) ([]lockedProvider, bool, error) {
	src, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading dependency lock file: %w", err)
	}
	ps, err := parseLockFile(src, lockFileName)
	return ps, true, err
}
