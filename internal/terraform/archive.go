package terraform

// Configuration archives.
//
// A plan copies the configuration it plans into the run's work dir and keeps
// that exact copy as PlanResult.Config, so that an apply (and a re-plan)
// runs against byte-for-byte the same files. The copy is the common ancestor
// directory of the root module and of every local module it calls,
// transitively (`source = "../modules/vpc"` must keep resolving), so the
// root module sits at a sub-path of the copy.
//
// The archive is a gzip-compressed tar (PAX) whose entries are sorted by
// name, with zero mtimes (the Unix epoch), uid/gid 0, no owner names and
// normalized modes (0755 for directories and executables, 0644 otherwise),
// so that the same tree always gives the same bytes. Besides the tree it
// holds:
//
//	.kl-root               the root module's slash-separated path inside the
//	                       archive ("." or "envs/prod")
//	.kl-varfiles/NNN-BASE  the plan's -var-file files, in the order given
//	                       (NNN = 000, 001, ...), so a re-plan from the
//	                       archive alone uses the same variables
//
// Entries are directories, regular files and symlinks whose relative,
// clean target stays inside the tree. Restoring refuses anything else
// (absolute names, "..", links out, entries below a link, other entry types)
// and caps the size (maxConfigBytes, maxConfigEntries).

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/terraform-config-inspect/tfconfig"

	"github.com/kilolock/kilolock/internal/engine"
)

const (
	// archiveRootEntry names the archive entry holding the root module's
	// sub-path.
	archiveRootEntry = ".kl-root"
	// archiveVarFileDir is the archive directory holding the -var-file files.
	archiveVarFileDir = ".kl-varfiles"
	// maxConfigBytes caps the uncompressed file content of a configuration
	// archive, both when building and when restoring one.
	maxConfigBytes = 256 << 20
	// maxConfigEntries caps the number of entries of a configuration archive.
	maxConfigEntries = 100_000
)

// archiveEpoch is the mtime of every archive entry.
var archiveEpoch = time.Unix(0, 0).UTC()

// excluded reports whether a tree entry is left out of the copy: Terraform's
// own data (.terraform/), VCS and Kilolock dirs (.git/, .kl/), state files
// and saved plans (*.tfstate, *.tfstate.*, terraform.tfstate.d/, *.tfplan),
// and Kilolock's backend override (written afresh into every work dir).
func excluded(name string, isDir bool) bool {
	switch name {
	case ".terraform", ".git", ".kl", "terraform.tfstate.d":
		return isDir
	case overrideFileName:
		return !isDir
	}
	if strings.HasSuffix(name, ".tfstate") || strings.Contains(name, ".tfstate.") {
		return true
	}
	return !isDir && strings.HasSuffix(name, ".tfplan")
}

// isLocalModuleSource reports whether a module source is a local path, by
// Terraform's rule: it starts with "./" or "../" (or their Windows forms).
func isLocalModuleSource(src string) bool {
	for _, p := range []string{"./", "../", `.\`, `..\`} {
		if strings.HasPrefix(src, p) {
			return true
		}
	}
	return false
}

// moduleDirs returns root and the directories of every local module it
// calls, transitively, as clean absolute paths (root first). Module calls are
// read with terraform-config-inspect; a module that does not load is left to
// `terraform init` to report.
func moduleDirs(root string, log *slog.Logger) []string {
	seen := map[string]bool{root: true}
	out := []string{root}
	for i := 0; i < len(out); i++ {
		dir := out[i]
		if !tfconfig.IsModuleDir(dir) {
			continue
		}
		mod, diags := tfconfig.LoadModule(dir)
		if diags.HasErrors() {
			log.Debug("reading module calls", "dir", dir, "diagnostics", diags.Error())
		}
		if mod == nil {
			continue
		}
		names := make([]string, 0, len(mod.ModuleCalls))
		for n := range mod.ModuleCalls {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			src := mod.ModuleCalls[n].Source
			if !isLocalModuleSource(src) {
				continue
			}
			d := filepath.Join(dir, filepath.FromSlash(src))
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	return out
}

// commonDir returns the deepest directory containing every path (all clean
// and absolute).
func commonDir(paths []string) string {
	common := paths[0]
	for _, p := range paths[1:] {
		for !within(common, p) {
			common = filepath.Dir(common)
		}
	}
	return common
}

// within reports whether p is dir or below it (both clean and absolute).
func within(dir, p string) bool {
	if dir == p {
		return true
	}
	if !strings.HasSuffix(dir, string(filepath.Separator)) {
		dir += string(filepath.Separator)
	}
	return strings.HasPrefix(p, dir)
}

// archiveEntry is one entry of a configuration archive before writing.
type archiveEntry struct {
	name   string // slash-separated, relative
	typ    byte   // tar.TypeDir, tar.TypeReg or tar.TypeSymlink
	exec   bool
	data   []byte // TypeReg: contents (read lazily from src when nil)
	src    string // TypeReg: file to read
	target string // TypeSymlink
}

// buildConfigArchive copies the configuration rooted at dir — the common
// ancestor of dir and its local modules, minus excluded entries — and the
// var files (relative paths resolve against dir) into a deterministic
// configuration archive (see the top of this file). It refuses, wrapping
// engine.ErrInvalid: a tree whose common ancestor is the filesystem root, a
// symlink that resolves outside the copied tree, and a tree or var file
// larger than maxConfigBytes or maxConfigEntries.
func buildConfigArchive(dir string, varFiles []string, log *slog.Logger) ([]byte, error) {
	t, err := locateConfigTree(dir, log)
	if err != nil {
		return nil, err
	}
	es := &archiveEntries{top: t.top}
	if err := es.addTree(t, log); err != nil {
		return nil, err
	}
	if err := es.add(archiveEntry{name: archiveRootEntry, typ: tar.TypeReg, data: []byte(filepath.ToSlash(t.rootSub))}, 0); err != nil {
		return nil, err
	}
	if err := es.addVarFiles(t.root, varFiles); err != nil {
		return nil, err
	}
	return writeArchive(es.entries)
}

// configTree is where a configuration's copy comes from.
type configTree struct {
	root    string // the root module dir, absolute
	top     string // the common ancestor of root and its local modules
	physTop string // top with symlinks resolved, the dir walked
	rootSub string // root relative to top ("." or "envs/prod")
}

// locateConfigTree finds the tree to copy for the root module dir: the
// common ancestor of dir and its local modules (moduleDirs), refused
// (engine.ErrInvalid) when that is the filesystem root.
func locateConfigTree(dir string, log *slog.Logger) (configTree, error) {
	root, err := filepath.Abs(dir)
	if err != nil {
		return configTree{}, fmt.Errorf("resolving configuration dir %s: %w", dir, err)
	}
	if fi, err := os.Stat(root); err != nil {
		return configTree{}, fmt.Errorf("reading configuration dir: %w", err)
	} else if !fi.IsDir() {
		return configTree{}, engine.Errorf(engine.ErrInvalid, "reading configuration dir %s: not a directory", root)
	}
	dirs := moduleDirs(root, log)
	top := commonDir(dirs)
	if filepath.Dir(top) == top {
		return configTree{}, engine.Errorf(engine.ErrInvalid, "copying configuration %s: its local modules (%s) share no directory but the filesystem root",
			root, strings.Join(dirs[1:], ", "))
	}
	physTop, err := filepath.EvalSymlinks(top)
	if err != nil {
		return configTree{}, fmt.Errorf("resolving configuration tree %s: %w", top, err)
	}
	rootSub, err := filepath.Rel(top, root)
	if err != nil {
		return configTree{}, fmt.Errorf("locating root module in %s: %w", top, err)
	}
	return configTree{root: root, top: top, physTop: physTop, rootSub: rootSub}, nil
}

// archiveEntries collects the entries of an archive of the tree top,
// within maxConfigBytes and maxConfigEntries.
type archiveEntries struct {
	top     string
	entries []archiveEntry
	total   int64 // bytes of file content so far
}

// add adds e, of size bytes of file content, or refuses (engine.ErrInvalid)
// once the archive would be too large.
func (es *archiveEntries) add(e archiveEntry, size int64) error {
	es.total += size
	if es.total > maxConfigBytes || len(es.entries) >= maxConfigEntries {
		return engine.Errorf(engine.ErrInvalid, "copying configuration tree %s: larger than %d MiB or %d entries",
			es.top, maxConfigBytes>>20, maxConfigEntries)
	}
	es.entries = append(es.entries, e)
	return nil
}

// addTree adds the directories, regular files and symlinks of t, minus
// excluded entries; a dangling symlink or a special file is skipped with a
// warning, a symlink out of the tree refused (engine.ErrInvalid).
func (es *archiveEntries) addTree(t configTree, log *slog.Logger) error {
	physTop := t.physTop
	// Walk the resolved top: WalkDir does not enter a root that is a symlink.
	err := filepath.WalkDir(physTop, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == physTop {
			return nil
		}
		rel, err := filepath.Rel(physTop, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		if excluded(d.Name(), d.IsDir()) || name == archiveRootEntry || name == archiveVarFileDir {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch typ := d.Type(); {
		case typ.IsDir():
			return es.add(archiveEntry{name: name, typ: tar.TypeDir}, 0)
		case typ.IsRegular():
			fi, err := d.Info()
			if err != nil {
				return err
			}
			return es.add(archiveEntry{name: name, typ: tar.TypeReg, src: p, exec: fi.Mode().Perm()&0o100 != 0}, fi.Size())
		case typ&fs.ModeSymlink != 0:
			resolved, err := filepath.EvalSymlinks(p)
			if err != nil {
				log.Warn("skipping dangling symlink in configuration", "path", p, "error", err)
				return nil
			}
			if !within(physTop, resolved) {
				return engine.Errorf(engine.ErrInvalid, "copying configuration: symlink %s points outside the copied tree %s (to %s)",
					p, t.top, resolved)
			}
			target, err := filepath.Rel(filepath.Join(physTop, filepath.Dir(rel)), resolved)
			if err != nil {
				return err
			}
			return es.add(archiveEntry{name: name, typ: tar.TypeSymlink, target: filepath.ToSlash(target)}, 0)
		default:
			log.Warn("skipping special file in configuration", "path", p, "mode", typ.String())
			return nil
		}
	})
	if err != nil {
		if errors.Is(err, engine.ErrInvalid) {
			return err
		}
		return fmt.Errorf("copying configuration tree %s: %w", t.top, err)
	}
	return nil
}

// addVarFiles adds the var files, in order, under archiveVarFileDir
// (varFileEntry); a relative path resolves against root. An unreadable
// file's error names it as given.
func (es *archiveEntries) addVarFiles(root string, varFiles []string) error {
	if len(varFiles) > 0 {
		if err := es.add(archiveEntry{name: archiveVarFileDir, typ: tar.TypeDir}, 0); err != nil {
			return err
		}
	}
	for i, vf := range varFiles {
		p := vf
		if !filepath.IsAbs(p) {
			p = filepath.Join(root, p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			// Name the file as given (the path error names it resolved),
			// so a run's stored reason says which one.
			var pe *fs.PathError
			if errors.As(err, &pe) {
				return fmt.Errorf("var file %s: %w", vf, pe.Err)
			}
			return fmt.Errorf("var file %s: %w", vf, err)
		}
		e := archiveEntry{name: varFileEntry(i, vf), typ: tar.TypeReg, data: data}
		if err := es.add(e, int64(len(data))); err != nil {
			return err
		}
	}
	return nil
}

// varFileEntry names the archive entry of the i-th var file.
func varFileEntry(i int, varFile string) string {
	return fmt.Sprintf("%s/%03d-%s", archiveVarFileDir, i, filepath.Base(varFile))
}

// writeArchive writes entries sorted by name as a deterministic tar.gz.
func writeArchive(entries []archiveEntry) ([]byte, error) {
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hdr := &tar.Header{
			Typeflag: e.typ,
			Name:     e.name,
			ModTime:  archiveEpoch,
			Format:   tar.FormatPAX,
		}
		switch e.typ {
		case tar.TypeDir:
			hdr.Name += "/"
			hdr.Mode = 0o755
		case tar.TypeSymlink:
			hdr.Mode = 0o777
			hdr.Linkname = e.target
		case tar.TypeReg:
			hdr.Mode = 0o644
			if e.exec {
				hdr.Mode = 0o755
			}
			data := e.data
			if data == nil {
				if data, err = os.ReadFile(e.src); err != nil {
					return nil, fmt.Errorf("copying configuration: %w", err)
				}
			}
			hdr.Size = int64(len(data))
			e.data = data
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("writing configuration archive entry %s: %w", e.name, err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write(e.data); err != nil {
				return nil, fmt.Errorf("writing configuration archive entry %s: %w", e.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("writing configuration archive: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("writing configuration archive: %w", err)
	}
	return buf.Bytes(), nil
}
