// Package version says which build of kl or klbot is running: its release
// version (semantic versioning, https://semver.org), the commit it was
// built from, the Go release that built it, and the store it speaks — the
// newest schema version it migrates a store to and the store compatibility
// level it follows. `kl version` and `klbot version` print it
// (internal/report renders it).
//
// A release sets Version, Commit, Date and Dirty at link time
// (.goreleaser.yaml, the Makefile):
//
//	-ldflags "-X github.com/kilolock/kilolock/internal/version.Version=0.1.0
//	          -X github.com/kilolock/kilolock/internal/version.Commit=<40 hex>
//	          -X github.com/kilolock/kilolock/internal/version.Date=<RFC 3339>"
//
// Any other build says what Go recorded in it (runtime/debug.ReadBuildInfo):
// the module's version when installed with `go install …@v0.1.0`, else
// Next + "-dev"; and the commit from Go's VCS stamping (vcs.revision,
// vcs.time, vcs.modified), which Go records only when it builds in a git
// checkout whose .git is a directory (not a worktree) with -buildvcs on.
package version

import (
	"fmt"
	"io/fs"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/pressly/goose/v3"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"

	"github.com/kilolock/kilolock/internal/store"
	"github.com/kilolock/kilolock/migrations"
)

// Set at link time by a release build (-ldflags -X); empty otherwise.
var (
	// Version is the release version, a semantic version without a
	// leading "v" ("0.1.0", "0.2.0-rc.1", "0.1.1-dev+1a2b3c4").
	Version = ""
	// Commit is the full hex id of the commit built.
	Commit = ""
	// Date is the commit's time, RFC 3339.
	Date = ""
	// Dirty is "true" when the tree built had uncommitted changes.
	Dirty = ""
)

// Next is the release the development tree leads to: a build that is not a
// release calls itself Next + "-dev". Raise it when a release is tagged
// (CHANGELOG.md, "Releasing").
const Next = "0.1.0"

// Info is what `kl version` prints.
type Info struct {
	// Version is a semantic version without "v": the one set at link
	// time ("0.1.0"; a snapshot's "0.1.0-dev+1a2b3c4"), the module version
	// of `go install …@v0.1.0`, or Next + "-dev".
	Version string
	// Commit is the full hex id of the commit built; "" when unknown.
	Commit string
	// Modified: the tree built had uncommitted changes.
	Modified bool
	// CommitTime is the commit's time, UTC; zero when unknown.
	CommitTime time.Time
	// Go is the Go release that built the binary (runtime.Version), and
	// Platform its GOOS/GOARCH.
	Go, Platform string
	// Store is the store this binary speaks.
	Store Store
}

// Store is what a binary knows of the store: the newest schema version
// among its embedded migrations (a store it opens is migrated up to it; a
// store at a newer one is refused), and the compatibility level it follows
// (store.CompatLevel).
type Store struct {
	Schema      int64
	CompatLevel int
}

// Get returns this binary's Info. It fails when a value set at link time
// is not what it must be (Version a semantic version, Commit hex, Date RFC
// 3339), naming the variable and the value, and when the embedded
// migrations of the SQLite and PostgreSQL stores end at different schema
// versions (they describe one schema: migrations/embed.go).
func Get() (Info, error) {
	bi, _ := debug.ReadBuildInfo()
	return resolve(bi, linked{Version, Commit, Date, Dirty})
}

// linked are the values set at link time.
type linked struct{ version, commit, date, dirty string }

// resolve builds the Info of a binary with build info bi (nil when none
// was recorded) and link-time values l.
func resolve(bi *debug.BuildInfo, l linked) (Info, error) {
	info := Info{Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil && bi.GoVersion != "" {
		info.Go = bi.GoVersion
	}
	var err error
	if info.Version, err = releaseVersion(bi, l.version); err != nil {
		return Info{}, err
	}
	if info.Commit, info.Modified, info.CommitTime, err = commit(bi, l); err != nil {
		return Info{}, err
	}
	if info.Store.Schema, err = Schema(); err != nil {
		return Info{}, err
	}
	info.Store.CompatLevel = store.CompatLevel
	return info, nil
}

// releaseVersion is the version set at link time, else the module version
// Go recorded when it is a release or pre-release (not a pseudo-version,
// not "(devel)"), else Next-dev.
func releaseVersion(bi *debug.BuildInfo, set string) (string, error) {
	if set != "" {
		v := "v" + strings.TrimPrefix(set, "v")
		if !semver.IsValid(v) || semver.Canonical(v) != strings.TrimSuffix(v, semver.Build(v)) {
			return "", fmt.Errorf("this binary was built with version %q (-X %s.Version): not a semantic version MAJOR.MINOR.PATCH (e.g. 0.1.0, 0.2.0-rc.1)", set, pkgPath)
		}
		return v[1:], nil
	}
	if bi != nil {
		v := bi.Main.Version
		if semver.IsValid(v) && !module.IsPseudoVersion(v) && semver.Build(v) == "" {
			return v[1:], nil
		}
	}
	return Next + "-dev", nil
}

// commit is the commit set at link time, else the one Go's VCS stamping
// recorded.
func commit(bi *debug.BuildInfo, l linked) (string, bool, time.Time, error) {
	var rev, date, modified string
	if bi != nil {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.time":
				date = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
	}
	if l.commit != "" {
		rev, date, modified = l.commit, l.date, l.dirty
	}
	if rev != "" && strings.Trim(strings.ToLower(rev), "0123456789abcdef") != "" {
		return "", false, time.Time{}, fmt.Errorf("this binary was built with commit %q (-X %s.Commit): not a hexadecimal commit id", rev, pkgPath)
	}
	var at time.Time
	if date != "" {
		t, err := time.Parse(time.RFC3339, date)
		if err != nil {
			return "", false, time.Time{}, fmt.Errorf("this binary was built with commit time %q (-X %s.Date): not an RFC 3339 time (e.g. 2026-12-02T03:06:00Z)", date, pkgPath)
		}
		at = t.UTC()
	}
	if modified != "" && modified != "true" && modified != "false" {
		return "", false, time.Time{}, fmt.Errorf("this binary was built with dirty %q (-X %s.Dirty): not true or false", modified, pkgPath)
	}
	return strings.ToLower(rev), modified == "true", at, nil
}

const pkgPath = "github.com/kilolock/kilolock/internal/version"

// Schema is the newest schema version among the store migrations this
// binary embeds: the SQL files of migrations/ (goose's numbering: the
// number that starts the file name) and the Go migrations of
// store.GoMigrations. The SQLite and PostgreSQL sets are numbered alike;
// Schema fails when their newest versions differ.
func Schema() (int64, error) {
	lite, err := newest(migrations.SQLite, "sqlite", store.SQLite)
	if err != nil {
		return 0, err
	}
	pg, err := newest(migrations.Postgres, "postgres", store.Postgres)
	if err != nil {
		return 0, err
	}
	if lite != pg {
		return 0, fmt.Errorf("the embedded store migrations disagree: SQLite ends at schema version %d, PostgreSQL at %d", lite, pg)
	}
	return lite, nil
}

// newest is the highest version among the .sql files of dir in fsys and
// the Go migrations of dialect d.
func newest(fsys fs.FS, dir string, d store.Dialect) (int64, error) {
	files, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return 0, fmt.Errorf("listing the %s migrations: %w", dir, err)
	}
	var top int64
	for _, f := range files {
		v, err := goose.NumericComponent(f)
		if err != nil {
			return 0, fmt.Errorf("migration %s: %w", f, err)
		}
		top = max(top, v)
	}
	for _, m := range store.GoMigrations(d) {
		top = max(top, m.Version)
	}
	return top, nil
}

// Stamp sets store.BinaryVersion — the version a store records with a
// compatibility level this binary's migrations raise, and names in a
// refusal (ADR 0048) — to this binary's version, unless the linker set it
// (-X, as the rolling-upgrade test does) or the version cannot be read
// (Get's error; the store then says "dev"). kl and klbot call it first;
// it stamps once per process, so that calls of kl's Run in parallel (the
// tests) do not race on the variable.
func Stamp() {
	stampOnce.Do(func() {
		if store.BinaryVersion != "dev" {
			return
		}
		if info, err := Get(); err == nil {
			store.BinaryVersion = info.Version
		}
	})
}

var stampOnce sync.Once
