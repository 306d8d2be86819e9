package version

import (
	"context"
	"database/sql"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/store"
	"github.com/kilolock/kilolock/internal/store/sqlite"
)

// TestResolve covers where each fact comes from: link-time values first,
// then what Go recorded (the module version of `go install …@vX.Y.Z`, VCS
// stamping), then Next-dev; and refuses link-time values that are not
// what they must be, naming the variable and the value.
func TestResolve(t *testing.T) {
	t.Parallel()
	const rev = "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d"
	stamped := func(mainVersion string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/kilolock/kilolock", Version: mainVersion}}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	vcs := []string{"vcs", "git", "vcs.revision", rev, "vcs.time", "2026-12-02T03:06:00Z", "vcs.modified", "true"}
	at := time.Date(2026, 12, 2, 3, 6, 0, 0, time.UTC)
	for name, tc := range map[string]struct {
		bi       *debug.BuildInfo
		l        linked
		version  string
		commit   string
		modified bool
		at       time.Time
		err      string
	}{
		"release":                {bi: stamped("(devel)"), l: linked{"0.1.0", rev, "2026-12-02T04:06:00+01:00", "false"}, version: "0.1.0", commit: rev, at: at},
		"release with v":         {bi: stamped("(devel)"), l: linked{"v0.2.0-rc.1", rev, "", ""}, version: "0.2.0-rc.1", commit: rev},
		"snapshot":               {bi: stamped("(devel)"), l: linked{"0.1.0-dev+1a2b3c4", rev, "", "true"}, version: "0.1.0-dev+1a2b3c4", commit: rev, modified: true},
		"link time over vcs":     {bi: stamped("(devel)", vcs...), l: linked{"", "abcdef0", "", ""}, version: "0.1.0-dev", commit: "abcdef0"},
		"go install at a tag":    {bi: stamped("v0.1.0"), version: "0.1.0"},
		"go build with vcs":      {bi: stamped("v0.0.0-20261202030600-1a2b3c4d5e6f+dirty", vcs...), version: Next + "-dev", commit: rev, modified: true, at: at},
		"pseudo-version":         {bi: stamped("v0.1.1-0.20261202030600-1a2b3c4d5e6f"), version: Next + "-dev"},
		"tag, modified tree":     {bi: stamped("v0.1.0+dirty"), version: Next + "-dev"},
		"no build info":          {version: Next + "-dev"},
		"upper-case commit":      {l: linked{"", strings.ToUpper(rev), "", ""}, version: Next + "-dev", commit: rev},
		"not semver":             {l: linked{"banana", "", "", ""}, err: `this binary was built with version "banana" (-X github.com/kilolock/kilolock/internal/version.Version): not a semantic version`},
		"short semver":           {l: linked{"1.2", "", "", ""}, err: `version "1.2"`},
		"describe, not a semver": {l: linked{"dfc09e9-dirty", "", "", ""}, err: `version "dfc09e9-dirty"`},
		"commit not hex":         {l: linked{"", "main", "", ""}, err: `commit "main" (-X github.com/kilolock/kilolock/internal/version.Commit): not a hexadecimal commit id`},
		"date not RFC 3339":      {l: linked{"", rev, "Wed Dec 2 03:06:00 2026", ""}, err: `commit time "Wed Dec 2 03:06:00 2026" (-X github.com/kilolock/kilolock/internal/version.Date): not an RFC 3339 time`},
		"dirty not a bool":       {l: linked{"", rev, "", "yes"}, err: `dirty "yes" (-X github.com/kilolock/kilolock/internal/version.Dirty): not true or false`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := resolve(tc.bi, tc.l)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("resolve: %v, want an error containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Version != tc.version || got.Commit != tc.commit || got.Modified != tc.modified || !got.CommitTime.Equal(tc.at) {
				t.Errorf("resolve = version %q commit %q modified %v time %v; want %q %q %v %v",
					got.Version, got.Commit, got.Modified, got.CommitTime, tc.version, tc.commit, tc.modified, tc.at)
			}
			if got.Store.CompatLevel != store.CompatLevel || got.Store.Schema == 0 || got.Go == "" || got.Platform == "" {
				t.Errorf("resolve: store %+v, go %q, platform %q", got.Store, got.Go, got.Platform)
			}
		})
	}
}

// TestSchemaIsWhatAStoreIsMigratedTo: the schema version printed is the
// one a new SQLite store is migrated to (goose's version table).
func TestSchemaIsWhatAStoreIsMigratedTo(t *testing.T) {
	t.Parallel()
	want, err := Schema()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "kl.db")
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path) // modernc.org/sqlite, as the store
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var got int64
	if err := db.QueryRowContext(ctx, `SELECT max(version_id) FROM goose_db_version`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("Schema() = %d, but a new store is migrated to version %d", want, got)
	}
}

// TestStamp: Stamp gives the store this binary's version to record and
// name (ADR 0048), and leaves a version the linker set.
func TestStamp(t *testing.T) {
	old := store.BinaryVersion
	t.Cleanup(func() { store.BinaryVersion = old })
	info, err := Get()
	if err != nil {
		t.Fatal(err)
	}
	store.BinaryVersion = "dev"
	Stamp()
	if store.BinaryVersion != info.Version || info.Version == "dev" {
		t.Errorf("after Stamp, store.BinaryVersion = %q, want this binary's %q", store.BinaryVersion, info.Version)
	}
	store.BinaryVersion = "0.9.0"
	Stamp()
	if store.BinaryVersion != "0.9.0" {
		t.Errorf("Stamp replaced the version the linker set: %q", store.BinaryVersion)
	}
}
