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
	return fmt.Errorf("restoring configuration archive: "+format+": %w", append(args, engine.ErrInvalid)...)
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
	var out restoredConfig
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return out, invalidArchive("not a gzip stream (%v)", err)
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return out, fmt.Errorf("restoring configuration archive: %w", err)
	}
	defer root.Close()

	tr := tar.NewReader(zr)
	var total int64
	var rootSub []byte
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return out, invalidArchive("reading entry %d (%v)", n, err)
		}
		if n >= maxConfigEntries {
			return out, invalidArchive("more than %d entries", maxConfigEntries)
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		if err := checkEntryName(name); err != nil {
			return out, err
		}
		if err := checkNoLinkParent(root, name); err != nil {
			return out, err
		}
		if dir := path.Dir(name); dir != "." {
			if err := root.MkdirAll(dir, 0o700); err != nil {
				return out, fmt.Errorf("restoring configuration archive entry %s: %w", name, err)
			}
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.Mkdir(name, 0o700); err != nil {
				if fi, serr := root.Lstat(name); serr != nil || !fi.IsDir() {
					return out, fmt.Errorf("restoring configuration archive entry %s: %w", name, err)
				}
			}
		case tar.TypeReg:
			total += hdr.Size
			if hdr.Size < 0 || total > maxConfigBytes {
				return out, invalidArchive("content larger than %d MiB", maxConfigBytes>>20)
			}
			perm := os.FileMode(0o600)
			if hdr.Mode&0o100 != 0 {
				perm = 0o700
			}
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
			if err != nil {
				if errors.Is(err, fs.ErrExist) {
					return out, invalidArchive("duplicate entry %s", name)
				}
				return out, fmt.Errorf("restoring configuration archive entry %s: %w", name, err)
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
				return out, invalidArchive("reading entry %s (%v)", name, cerr)
			}
			if name == archiveRootEntry {
				rootSub = rootBuf.Bytes()
			}
			if strings.HasPrefix(name, archiveVarFileDir+"/") {
				out.VarFiles = append(out.VarFiles, name)
			}
		case tar.TypeSymlink:
			if err := checkLinkTarget(name, hdr.Linkname); err != nil {
				return out, err
			}
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				if errors.Is(err, fs.ErrExist) {
					return out, invalidArchive("duplicate entry %s", name)
				}
				return out, fmt.Errorf("restoring configuration archive entry %s: %w", name, err)
			}
		default:
			return out, invalidArchive("entry %s has unsupported type %q", name, hdr.Typeflag)
		}
	}
	if rootSub == nil {
		return out, invalidArchive("no %s entry: not a Kilolock configuration archive", archiveRootEntry)
	}
	out.RootSub = string(rootSub)
	if out.RootSub != "." {
		if err := checkEntryName(out.RootSub); err != nil {
			return out, invalidArchive("root module path %q (%v)", out.RootSub, err)
		}
	}
	fi, err := root.Lstat(out.RootSub)
	if err != nil || !fi.IsDir() {
		return out, invalidArchive("root module path %q is not a directory of the archive", out.RootSub)
	}
	if err := checkNoLinkParent(root, out.RootSub+"/x"); err != nil {
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
