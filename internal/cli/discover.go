package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// The default store is DIR/.kl/kl.db, DIR found as git finds .git.
const (
	storeDirName  = ".kl"
	storeFileName = "kl.db"
)

// defaultStore is the SQLite store kl uses when neither --store nor
// KL_STORE names one.
type defaultStore struct {
	// path is DIR/.kl/kl.db, absolute; it need not exist (kl state init
	// creates it).
	path string
	// above: DIR is a parent of the working directory (the search found
	// it); otherwise DIR is the working directory.
	above bool
	// found: DIR/.kl exists; otherwise path is the working directory's,
	// where kl state init creates a new store.
	found bool
	// unused is a .kl/ beyond where the search stopped (stop: the
	// directory it did not enter; why: the rule), which kl does not use;
	// all "" when there is none.
	stop, why, unused string
}

// klAbove is the nearest .kl directory at or above dir, "" for none: one
// the search stopped short of, which the notice names so that nobody
// wonders why it is not used.
func klAbove(dir string) string {
	for {
		if fi, err := os.Stat(filepath.Join(dir, storeDirName)); err == nil && fi.IsDir() {
			return filepath.Join(dir, storeDirName)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// discovery is the search for the default store (ADR 0049): from wd
// upward, the nearest directory holding a .kl/ directory. The search does
// not enter a directory whose owner differs from wd's, one everyone may
// write to (mode o+w: /tmp, where as root every owner is the same), one
// of ceilings, or one it cannot stat, and ends at the filesystem root; a .kl/ owned by
// neither wd's owner nor euid is refused (git's safe.directory rule,
// CVE-2022-24765: a store in a shared parent such as /tmp could have been
// put there by another user).
type discovery struct {
	wd       string   // absolute, clean
	ceilings []string // absolute, clean
	euid     int      // os.Geteuid(); -1 where there is none
	// owner is the uid owning the file at path (fi is its os.Stat); ok is
	// false where the platform has no owners (the owner rule is then not
	// applied). Injectable for tests.
	owner func(path string, fi fs.FileInfo) (uid int, ok bool)
}

// newDiscovery is the search from the process's working directory, under
// the ceilings given and the parent of home (when absolute: the search
// stays within $HOME when it starts there).
func newDiscovery(ceilings []string, home string) (discovery, error) {
	wd, err := os.Getwd()
	if err != nil {
		return discovery{}, fmt.Errorf("finding the default store: reading the working directory: %w", err)
	}
	// Paths are compared resolved, as git resolves its ceilings: a
	// symbolic link in the working directory, a ceiling or $HOME (macOS's
	// /tmp is /private/tmp) must not carry the search past a boundary.
	d := discovery{wd: realPath(wd), euid: os.Geteuid(), owner: fileOwner}
	for _, c := range ceilings {
		d.ceilings = append(d.ceilings, realPath(c))
	}
	if filepath.IsAbs(home) {
		d.ceilings = append(d.ceilings, filepath.Dir(realPath(home)))
	}
	return d, nil
}

// realPath is path with its symbolic links resolved, cleaned; path itself,
// cleaned, when it cannot be resolved (it need not exist).
func realPath(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return filepath.Clean(r)
	}
	return filepath.Clean(path)
}

// find returns the default store; an error when the nearest .kl/ is not
// trusted (its owner), naming it and how to use it anyway.
func (d discovery) find() (defaultStore, error) {
	here := defaultStore{path: filepath.Join(d.wd, storeDirName, storeFileName)}
	fi, err := os.Stat(d.wd)
	if err != nil {
		return here, fmt.Errorf("finding the default store: %w", err)
	}
	wdOwner, owned := d.owner(d.wd, fi)
	for dir := d.wd; ; {
		kl := filepath.Join(dir, storeDirName)
		fi, err := os.Stat(kl)
		switch {
		case err == nil && fi.IsDir():
			if err := d.trusted(kl, fi, wdOwner, owned, dir != d.wd); err != nil {
				return here, err
			}
			return defaultStore{path: filepath.Join(kl, storeFileName), above: dir != d.wd, found: true}, nil
		case err != nil && !errors.Is(err, fs.ErrNotExist):
			return here, nil // a directory kl may not search: a boundary
		}
		parent := filepath.Dir(dir)
		stop := func(why string) (defaultStore, error) {
			if above := klAbove(parent); above != "" {
				here.stop, here.why, here.unused = parent, why, above
			}
			return here, nil
		}
		if parent == dir {
			return here, nil
		}
		if slices.Contains(d.ceilings, parent) {
			return stop("a ceiling: KL_CEILING_DIRECTORIES or the parent of $HOME")
		}
		pfi, err := os.Stat(parent)
		if err != nil {
			return stop("kl cannot read it")
		}
		if uid, ok := d.owner(parent, pfi); owned && ok && uid != wdOwner {
			return stop(fmt.Sprintf("owned by uid %d, not by the working directory's owner", uid)) // a shared parent
		}
		if pfi.Mode().Perm()&0o002 != 0 {
			// Writable by everyone (/tmp, /var/tmp, /dev/shm): anyone may
			// have made its .kl/, and as root every owner is the same.
			return stop("everyone may write to it")
		}
		dir = parent
	}
}

// trusted reports an error unless the .kl/ directory kl (fi its stat)
// belongs to the working directory's owner or to the user running kl.
func (d discovery) trusted(kl string, fi fs.FileInfo, wdOwner int, owned, above bool) error {
	uid, ok := d.owner(kl, fi)
	if !ok || !owned || uid == wdOwner || uid == d.euid {
		return nil
	}
	hint := ""
	if above {
		hint = fmt.Sprintf(", or KL_CEILING_DIRECTORIES=%s to search no higher (kl state init then starts a store in the working directory)", filepath.Dir(kl))
	}
	return fmt.Errorf("not using the store in %s: it belongs to uid %d, neither to you (uid %d) nor to the owner of the working directory (uid %d), "+
		"and a store another user put in a shared directory could feed your runs (git's safe.directory rule, CVE-2022-24765); "+
		"set KL_STORE=%s to use it anyway%s", kl, uid, d.euid, wdOwner, filepath.Join(kl, storeFileName), hint)
}

// where says, in words, how the search chose the store's directory.
func (s defaultStore) where() string {
	switch {
	case !s.found && s.unused != "":
		return fmt.Sprintf("no .kl/ in the working directory or above it; %s is not used: the search does not enter %s (%s)", s.unused, s.stop, s.why)
	case !s.found:
		return "no .kl/ in the working directory or above it"
	case s.above:
		return "the nearest .kl/ above the working directory"
	}
	return "the .kl/ of the working directory"
}
