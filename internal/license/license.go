// Package license gathers the licence and notice texts of the third-party
// code linked into kl and klbot, for the THIRD_PARTY_NOTICES file that a
// release ships beside the binaries (README "License"). Binaries hold the
// code of every Go module they link; the MIT and BSD licences require
// their copyright notices in a binary distribution's documentation too,
// and Apache-2.0 §4(d) the text of a module's NOTICE file.
package license

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Module is one body of third-party code: a Go module, or Go's standard
// library (Path "std"), with its licence and notice files.
type Module struct {
	Path, Version string
	Files         []File
}

// File is one licence or notice file of a module, verbatim.
type File struct {
	Name string
	Text []byte
}

// noticeFile matches the files a module's licence terms live in, at its
// root: LICENSE, LICENCE, COPYING, NOTICE and PATENTS (golang.org/x's
// patent grant), with any extension.
var noticeFile = regexp.MustCompile(`(?i)^(licen[cs]e|copying|notice|patents)([._-].*)?$`)

// Collect returns the modules whose packages the main packages pkgs link
// on each platform ("linux/amd64"), as `go list -deps` of goBin run in dir
// with CGO_ENABLED=0 finds them (the main module itself excluded), and
// Go's standard library; sorted by path, each once. It fails when go list
// fails, or when a module has no licence file at its root — a release must
// not ship code whose terms it cannot reproduce.
func Collect(ctx context.Context, goBin, dir string, platforms, pkgs []string) ([]Module, error) {
	found := map[string]Module{}
	for _, p := range platforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok {
			return nil, fmt.Errorf("platform %q: want GOOS/GOARCH, e.g. linux/amd64", p)
		}
		if err := list(ctx, goBin, dir, goos, goarch, pkgs, found); err != nil {
			return nil, err
		}
	}
	mods := make([]Module, 0, len(found))
	for _, m := range found {
		mods = append(mods, m)
	}
	slices.SortFunc(mods, func(a, b Module) int { return strings.Compare(a.Path, b.Path) })
	return mods, nil
}

// list adds to found the modules pkgs link on goos/goarch.
func list(ctx context.Context, goBin, dir, goos, goarch string, pkgs []string, found map[string]Module) error {
	const format = `{{if .Standard}}std{{else if .Module}}{{if not .Module.Main}}{{.Module.Path}}	{{.Module.Version}}	{{.Module.Dir}}{{end}}{{end}}`
	cmd := exec.CommandContext(ctx, goBin, append([]string{"list", "-deps", "-f", format}, pkgs...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list -deps %s (%s/%s): %w: %s", strings.Join(pkgs, " "), goos, goarch, err, strings.TrimSpace(stderr.String()))
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		path, version, modDir := "std", "", ""
		if line != "std" {
			f := strings.Split(line, "\t")
			if len(f) != 3 {
				return fmt.Errorf("go list printed %q: want path, version and directory", line)
			}
			path, version, modDir = f[0], f[1], f[2]
		}
		if _, ok := found[path]; ok {
			continue
		}
		m, err := module(ctx, goBin, dir, path, version, modDir)
		if err != nil {
			return err
		}
		found[path] = m
	}
	return sc.Err()
}

// module reads the licence files of one module ("std": Go's, at GOROOT).
func module(ctx context.Context, goBin, dir, path, version, modDir string) (Module, error) {
	if path == "std" {
		root, err := goEnv(ctx, goBin, dir, "GOROOT")
		if err != nil {
			return Module{}, err
		}
		v, err := goEnv(ctx, goBin, dir, "GOVERSION")
		if err != nil {
			return Module{}, err
		}
		path, version, modDir = "std", v, root
	}
	entries, err := os.ReadDir(modDir)
	if err != nil {
		return Module{}, fmt.Errorf("reading module %s %s: %w", path, version, err)
	}
	m := Module{Path: path, Version: version}
	for _, e := range entries {
		if e.Type().IsRegular() && noticeFile.MatchString(e.Name()) {
			b, err := os.ReadFile(filepath.Join(modDir, e.Name()))
			if err != nil {
				return Module{}, fmt.Errorf("reading the licence of module %s %s: %w", path, version, err)
			}
			m.Files = append(m.Files, File{Name: e.Name(), Text: b})
		}
	}
	if len(m.Files) == 0 {
		return Module{}, fmt.Errorf("module %s %s has no licence file (LICENSE, COPYING, NOTICE) in %s: its terms cannot be shipped with the binaries", path, version, modDir)
	}
	return m, nil
}

func goEnv(ctx context.Context, goBin, dir, key string) (string, error) {
	cmd := exec.CommandContext(ctx, goBin, "env", key)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", key, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// Write writes the THIRD_PARTY_NOTICES text of mods: a header naming what
// (programs) they are linked into, an index, then each module's files
// verbatim under its path and version.
func Write(w io.Writer, programs string, mods []Module) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Third-party software in %s\n\n", programs)
	fmt.Fprintf(&b, "%s are Kilolock's (Apache License 2.0: LICENSE, NOTICE). They link the\n", programs)
	b.WriteString("Go modules below, each under its own licence, reproduced here verbatim. The source\n")
	b.WriteString("of each is its Go module at the version named (`go mod download PATH@VERSION`);\n")
	b.WriteString("\"std\" is Go's standard library and runtime.\n\n")
	for _, m := range mods {
		fmt.Fprintf(&b, "  %s %s\n", m.Path, m.Version)
	}
	for _, m := range mods {
		fmt.Fprintf(&b, "\n%s\n%s %s\n", strings.Repeat("=", 78), m.Path, m.Version)
		for _, f := range m.Files {
			fmt.Fprintf(&b, "\n---- %s\n\n", f.Name)
			b.Write(bytes.TrimRight(f.Text, "\n"))
			b.WriteString("\n")
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}
