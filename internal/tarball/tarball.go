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
// directory ("owner-repo-sha/"). It refuses — docs/github.md "Extract
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
	x := &extraction{root: root, lim: lim.withDefaults(), tr: tar.NewReader(zr)}
	for {
		h, err := x.tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("extracting repository archive: reading: %w", err)
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue
		}
		if err := x.entry(h); err != nil {
			return err
		}
	}
}

// extraction is one Extract under way: where, the caps, and what the
// archive has used of them so far.
type extraction struct {
	root    string // absolute, symbolic links resolved
	lim     Limits
	tr      *tar.Reader
	top     string // the archive's top-level directory, once seen
	entries int
	total   int64 // bytes of the files written
}

// refuse is Extract's refusal of the entry name.
func refuse(name, format string, args ...any) error {
	return fmt.Errorf("extracting repository archive: entry %q: %s: %w", name, fmt.Sprintf(format, args...), ErrUnsafe)
}

// entry checks one entry and writes it under root.
func (x *extraction) entry(h *tar.Header) error {
	if x.entries++; x.entries > x.lim.MaxEntries {
		return refuse(h.Name, "more than %d entries", x.lim.MaxEntries)
	}
	rel, err := x.relative(h)
	if err != nil || rel == "" {
		return err
	}
	dst := filepath.Join(x.root, filepath.FromSlash(rel))
	if err := safeParent(x.root, dst); err != nil {
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
		return nil
	case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // TypeRegA is what old tar writers emit
		return x.file(h, dst)
	case tar.TypeSymlink:
		return symlink(h, rel, dst)
	case tar.TypeLink:
		return x.hardLink(h, dst)
	}
	return refuse(h.Name, "special file (type %q)", string(h.Typeflag))
}

// relative checks an entry's name — relative, no "..", under the one
// top-level directory — and returns it without that directory: "" for the
// directory itself.
func (x *extraction) relative(h *tar.Header) (string, error) {
	name := strings.TrimPrefix(h.Name, "./")
	if name == "" || path.IsAbs(name) || strings.HasPrefix(h.Name, "/") || strings.Contains(name, `\`) {
		return "", refuse(h.Name, "absolute or empty name")
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == ".." {
			return "", refuse(h.Name, "name holds \"..\"")
		}
	}
	first, rest, _ := strings.Cut(strings.TrimSuffix(name, "/"), "/")
	if x.top == "" {
		x.top = first
	} else if first != x.top {
		return "", refuse(h.Name, "a second top-level directory (want exactly one, %q)", x.top)
	}
	if rest == "" {
		if h.Typeflag != tar.TypeDir {
			return "", refuse(h.Name, "the top level must be one directory")
		}
		return "", nil
	}
	return path.Clean(rest), nil
}

// file writes a regular file within the caps.
func (x *extraction) file(h *tar.Header, dst string) error {
	if h.Size > x.lim.MaxFileBytes {
		return refuse(h.Name, "%d bytes, over the %d-byte cap per file", h.Size, x.lim.MaxFileBytes)
	}
	if x.total += h.Size; x.total > x.lim.MaxTotalBytes {
		return refuse(h.Name, "the archive unpacks to more than %d bytes", x.lim.MaxTotalBytes)
	}
	if err := writeFile(dst, io.LimitReader(x.tr, h.Size), h.FileInfo().Mode()); err != nil {
		return fmt.Errorf("extracting repository archive: %w", err)
	}
	return nil
}

// symlink makes a symbolic link whose target, relative, stays inside the
// repository (rel is the link's own path in it).
func symlink(h *tar.Header, rel, dst string) error {
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
	return nil
}

// hardLink copies the regular file, already extracted inside the
// repository, that a hard link names (never linking it), within the caps.
func (x *extraction) hardLink(h *tar.Header, dst string) error {
	t := strings.TrimPrefix(h.Linkname, "./")
	tFirst, tRest, _ := strings.Cut(t, "/")
	if path.IsAbs(t) || tFirst != x.top || tRest == "" || strings.Contains("/"+t+"/", "/../") {
		return refuse(h.Name, "hard link to %q outside the repository", h.Linkname)
	}
	src := filepath.Join(x.root, filepath.FromSlash(path.Clean(tRest)))
	if err := safeParent(x.root, src); err != nil {
		return refuse(h.Name, "hard link: %v", err)
	}
	fi, err := os.Lstat(src)
	if err != nil || !fi.Mode().IsRegular() {
		return refuse(h.Name, "hard link to %q, which is not an extracted regular file", h.Linkname)
	}
	if x.total += fi.Size(); x.total > x.lim.MaxTotalBytes {
		return refuse(h.Name, "the archive unpacks to more than %d bytes", x.lim.MaxTotalBytes)
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
	return nil
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
