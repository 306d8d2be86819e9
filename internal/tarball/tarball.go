package tarball

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Limits caps what one repository tarball may unpack to.
type Limits struct {
	MaxEntries    int   // entries (files, dirs, links); default 20000
	MaxFileBytes  int64 // one file; default 64 MiB
	MaxTotalBytes int64 // all files; default 512 MiB
}

func (l Limits) withDefaults() Limits {
	if l.MaxEntries <= 0 {
		l.MaxEntries = 20000
	}
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = 64 << 20
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = 512 << 20
	}
	return l
}

// ErrUnsafe is wrapped by every refusal of Extract.
var ErrUnsafe = errors.New("unsafe repository archive")

// Extract unpacks a GitHub repository tarball (.tar.gz) into root,
// which must exist and be empty, stripping the archive's single top-level
// directory ("owner-repo-sha/"). It refuses — shared/GITHUB.md "Extract
// tarballs refusing absolute paths, .., links leaving the root, and
// oversize entries" — with an error wrapping ErrUnsafe:
//
//   - absolute names and names with a ".." segment;
//   - more than one top-level directory;
//   - symbolic links whose target is absolute or resolves outside root;
//   - hard links whose target is outside root or not yet extracted (an
//     inside one is copied, never linked);
//   - writing through a symbolic link (an entry whose parent resolves
//     outside root, or that would replace a link);
//   - devices, FIFOs and other special files;
//   - more than lim.MaxEntries entries, a file over lim.MaxFileBytes, or
//     more than lim.MaxTotalBytes in all.
//
// GitHub's pax global header (the commit id) is skipped. Files get mode
// 0644 (0755 when executable), directories 0755.
func Extract(data []byte, root string, lim Limits) error {
	lim = lim.withDefaults()
	root, err := filepath.Abs(root)
	if err != nil {
		return fmt.Errorf("extracting repository archive: %w", err)
	}
	if root, err = filepath.EvalSymlinks(root); err != nil {
		return fmt.Errorf("extracting repository archive: %w", err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("extracting repository archive: not gzip: %w", err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	refuse := func(name, format string, args ...any) error {
		return fmt.Errorf("extracting repository archive: entry %q: %s: %w", name, fmt.Sprintf(format, args...), ErrUnsafe)
	}
	top := ""
	var entries int
	var total int64
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("extracting repository archive: reading: %w", err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		entries++
		if entries > lim.MaxEntries {
			return refuse(h.Name, "more than %d entries", lim.MaxEntries)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if name == "" || path.IsAbs(name) || strings.HasPrefix(h.Name, "/") || strings.Contains(name, `\`) {
			return refuse(h.Name, "absolute or empty name")
		}
		for _, seg := range strings.Split(name, "/") {
			if seg == ".." {
				return refuse(h.Name, "name holds \"..\"")
			}
		}
		first, rest, _ := strings.Cut(strings.TrimSuffix(name, "/"), "/")
		if top == "" {
			top = first
		} else if first != top {
			return refuse(h.Name, "a second top-level directory (want exactly one, %q)", top)
		}
		if rest == "" {
			if h.Typeflag != tar.TypeDir {
				return refuse(h.Name, "the top level must be one directory")
			}
			continue
		}
		rel := path.Clean(rest)
		dst := filepath.Join(root, filepath.FromSlash(rel))
		if err := safeParent(root, dst); err != nil {
			return refuse(h.Name, "%v", err)
		}
		if fi, err := os.Lstat(dst); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return refuse(h.Name, "would replace a symbolic link")
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return fmt.Errorf("extracting repository archive: %w", err)
			}
		case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // TypeRegA is what old tar writers emit
			if h.Size > lim.MaxFileBytes {
				return refuse(h.Name, "%d bytes, over the %d-byte cap per file", h.Size, lim.MaxFileBytes)
			}
			total += h.Size
			if total > lim.MaxTotalBytes {
				return refuse(h.Name, "the archive unpacks to more than %d bytes", lim.MaxTotalBytes)
			}
			if err := writeFile(dst, io.LimitReader(tr, h.Size), h.FileInfo().Mode()); err != nil {
				return fmt.Errorf("extracting repository archive: %w", err)
			}
		case tar.TypeSymlink:
			t := h.Linkname
			if t == "" || path.IsAbs(t) || strings.HasPrefix(t, "/") || strings.Contains(t, `\`) {
				return refuse(h.Name, "symbolic link to absolute target %q", t)
			}
			resolved := path.Join(path.Dir(rel), t)
			if resolved == ".." || strings.HasPrefix(resolved, "../") {
				return refuse(h.Name, "symbolic link %q leaves the repository", t)
			}
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return fmt.Errorf("extracting repository archive: %w", err)
			}
			if err := os.Symlink(t, dst); err != nil {
				return fmt.Errorf("extracting repository archive: %w", err)
			}
		case tar.TypeLink:
			t := strings.TrimPrefix(h.Linkname, "./")
			tFirst, tRest, _ := strings.Cut(t, "/")
			if path.IsAbs(t) || tFirst != top || tRest == "" || strings.Contains("/"+t+"/", "/../") {
				return refuse(h.Name, "hard link to %q outside the repository", h.Linkname)
			}
			src := filepath.Join(root, filepath.FromSlash(path.Clean(tRest)))
			if err := safeParent(root, src); err != nil {
				return refuse(h.Name, "hard link: %v", err)
			}
			fi, err := os.Lstat(src)
			if err != nil || !fi.Mode().IsRegular() {
				return refuse(h.Name, "hard link to %q, which is not an extracted regular file", h.Linkname)
			}
			total += fi.Size()
			if total > lim.MaxTotalBytes {
				return refuse(h.Name, "the archive unpacks to more than %d bytes", lim.MaxTotalBytes)
			}
			f, err := os.Open(src)
			if err != nil {
				return fmt.Errorf("extracting repository archive: %w", err)
			}
			err = writeFile(dst, f, fi.Mode())
			f.Close()
			if err != nil {
				return fmt.Errorf("extracting repository archive: %w", err)
			}
		default:
			return refuse(h.Name, "special file (type %q)", string(h.Typeflag))
		}
	}
}

// safeParent checks that dst's parent directory, with every symbolic link
// resolved, lies inside root (so no entry is written through a link).
func safeParent(root, dst string) error {
	dir := filepath.Dir(dst)
	// Resolve the longest existing prefix.
	probe := dir
	for {
		if _, err := os.Lstat(probe); err == nil {
			break
		}
		if probe == root || len(probe) <= len(root) {
			break
		}
		probe = filepath.Dir(probe)
	}
	real, err := filepath.EvalSymlinks(probe)
	if err != nil {
		return fmt.Errorf("resolving %s: %v", probe, err)
	}
	if real != root && !strings.HasPrefix(real, root+string(filepath.Separator)) {
		return fmt.Errorf("its directory resolves outside the repository (through a symbolic link)")
	}
	return nil
}

func writeFile(dst string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	perm := os.FileMode(0o644)
	if mode&0o111 != 0 {
		perm = 0o755
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
