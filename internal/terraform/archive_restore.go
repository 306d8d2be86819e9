package terraform

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/kilolock/kilolock/internal/engine"
)

// restoredConfig is what restoreConfigArchive found in an archive.
type restoredConfig struct {
	RootSub  string   // slash-separated root module path ("." or "envs/prod")
	VarFiles []string // archive names of the var files, in order
}

// invalidArchive returns an error wrapping engine.ErrInvalid.
func invalidArchive(format string, args ...any) error {
	return engine.Errorf(engine.ErrInvalid, "restoring configuration archive: "+format, args...)
}

// restoreConfigArchive extracts a configuration archive into the empty
// directory dst through an os.Root (no write can leave dst). Directories are
// created 0700, files 0600 (0700 when executable): the copy may hold secrets.
// It refuses, wrapping engine.ErrInvalid: a corrupted archive, a name that is
// absolute, unclean or has "..", an entry below a symlink, a symlink whose
// target is absolute, unclean or leads outside the tree, an entry type other
// than directory, file and symlink, duplicate entries, more than
// maxConfigBytes of content or maxConfigEntries entries, and a missing or
// invalid .kl-root entry.
func restoreConfigArchive(archive []byte, dst string) (restoredConfig, error) {
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return restoredConfig{}, invalidArchive("not a gzip stream (%v)", err)
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return restoredConfig{}, fmt.Errorf("restoring configuration archive: %w", err)
	}
	defer root.Close()

	x := &extraction{root: root}
	tr := tar.NewReader(zr)
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return x.out, invalidArchive("reading entry %d (%v)", n, err)
		}
		if n >= maxConfigEntries {
			return x.out, invalidArchive("more than %d entries", maxConfigEntries)
		}
		if err := x.extract(tr, hdr); err != nil {
			return x.out, err
		}
	}
	return x.finish()
}

// extraction is one restoreConfigArchive in progress.
type extraction struct {
	root    *os.Root
	total   int64  // bytes of file content so far
	rootSub []byte // the .kl-root entry's content, once read
	out     restoredConfig
}

// extract restores the entry hdr (its content read from tr) below x.root,
// after checking its name and that no parent of it is a symlink.
func (x *extraction) extract(tr *tar.Reader, hdr *tar.Header) error {
	name := strings.TrimSuffix(hdr.Name, "/")
	if err := checkEntryName(name); err != nil {
		return err
	}
	if err := checkNoLinkParent(x.root, name); err != nil {
		return err
	}
	if dir := path.Dir(name); dir != "." {
		if err := x.root.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("restoring configuration archive entry %s: %w", name, err)
		}
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		if err := x.root.Mkdir(name, 0o700); err != nil {
			if fi, serr := x.root.Lstat(name); serr != nil || !fi.IsDir() {
				return fmt.Errorf("restoring configuration archive entry %s: %w", name, err)
			}
		}
		return nil
	case tar.TypeReg:
		return x.extractFile(tr, hdr, name)
	case tar.TypeSymlink:
		if err := checkLinkTarget(name, hdr.Linkname); err != nil {
			return err
		}
		if err := x.root.Symlink(hdr.Linkname, name); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return invalidArchive("duplicate entry %s", name)
			}
			return fmt.Errorf("restoring configuration archive entry %s: %w", name, err)
		}
		return nil
	default:
		return invalidArchive("entry %s has unsupported type %q", name, hdr.Typeflag)
	}
}

// extractFile writes the regular file entry name (0600, 0700 when
// executable; never over an existing one) within maxConfigBytes in all,
// and notes the .kl-root content and the var files.
func (x *extraction) extractFile(tr *tar.Reader, hdr *tar.Header, name string) error {
	x.total += hdr.Size
	if hdr.Size < 0 || x.total > maxConfigBytes {
		return invalidArchive("content larger than %d MiB", maxConfigBytes>>20)
	}
	perm := os.FileMode(0o600)
	if hdr.Mode&0o100 != 0 {
		perm = 0o700
	}
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return invalidArchive("duplicate entry %s", name)
		}
		return fmt.Errorf("restoring configuration archive entry %s: %w", name, err)
	}
	var w io.Writer = f
	var rootBuf bytes.Buffer
	if name == archiveRootEntry {
		w = io.MultiWriter(f, &rootBuf)
	}
	_, cerr := io.CopyN(w, tr, hdr.Size)
	if err := f.Close(); cerr == nil {
		cerr = err
	}
	if cerr != nil {
		return invalidArchive("reading entry %s (%v)", name, cerr)
	}
	if name == archiveRootEntry {
		x.rootSub = rootBuf.Bytes()
	}
	if strings.HasPrefix(name, archiveVarFileDir+"/") {
		x.out.VarFiles = append(x.out.VarFiles, name)
	}
	return nil
}

// finish checks the .kl-root entry — present, a clean path to a directory
// of the archive with no symlink on the way — and returns what the archive
// held, the var files sorted.
func (x *extraction) finish() (restoredConfig, error) {
	out := x.out
	if x.rootSub == nil {
		return out, invalidArchive("no %s entry: not a Kilolock configuration archive", archiveRootEntry)
	}
	out.RootSub = string(x.rootSub)
	if out.RootSub != "." {
		if err := checkEntryName(out.RootSub); err != nil {
			return out, invalidArchive("root module path %q (%v)", out.RootSub, err)
		}
	}
	fi, err := x.root.Lstat(out.RootSub)
	if err != nil || !fi.IsDir() {
		return out, invalidArchive("root module path %q is not a directory of the archive", out.RootSub)
	}
	if err := checkNoLinkParent(x.root, out.RootSub+"/x"); err != nil {
		return out, err
	}
	sort.Strings(out.VarFiles)
	return out, nil
}

// checkEntryName refuses a name that is empty, absolute, unclean, has ".."
// or a backslash.
func checkEntryName(name string) error {
	if name == "" || name == "." || strings.Contains(name, `\`) || path.IsAbs(name) ||
		path.Clean(name) != name || !filepath.IsLocal(filepath.FromSlash(name)) {
		return invalidArchive("unsafe entry name %q", name)
	}
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return invalidArchive("unsafe entry name %q", name)
		}
	}
	return nil
}

// checkNoLinkParent refuses an entry whose parent directories include a
// symlink already restored: writing through it could leave the tree.
func checkNoLinkParent(root *os.Root, name string) error {
	dir := path.Dir(name)
	if dir == "." {
		return nil
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		fi, err := root.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("restoring configuration archive entry %s: %w", name, err)
		}
		if !fi.IsDir() {
			return invalidArchive("entry %s is below %s, which is not a directory", name, p)
		}
	}
	return nil
}

// checkLinkTarget refuses a symlink target that is absolute, unclean, or
// leads outside the tree. A clean relative target has its ".." elements
// first; since the link's parents are real directories (checkNoLinkParent),
// resolving them lexically is exact.
func checkLinkTarget(name, target string) error {
	if target == "" || strings.Contains(target, `\`) || path.IsAbs(target) || path.Clean(target) != target {
		return invalidArchive("symlink %s has unsafe target %q", name, target)
	}
	if j := path.Join(path.Dir(name), target); j != "." && !filepath.IsLocal(filepath.FromSlash(j)) {
		return invalidArchive("symlink %s points outside the tree (to %q)", name, target)
	}
	return nil
}
