package cli

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDiscoveryOwners tests the owner rule of the search for the default
// store (ADR 0049) on real directories with injected owners, so that it
// runs without root too (TestStoreStopsAtOwnerChange gives directories to
// another uid for real, as root).
func TestDiscoveryOwners(t *testing.T) {
	t.Parallel()
	const me, other = 1000, 2000
	base := t.TempDir()
	wd := filepath.Join(base, "shared", "mine", "sub")
	for _, d := range []string{wd, filepath.Join(base, "shared", ".kl"), filepath.Join(base, "shared", "mine", ".kl")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rel := func(p string) string { r, _ := filepath.Rel(base, p); return r }
	for name, tc := range map[string]struct {
		owners   map[string]int // by path under base; unlisted: me
		euid     int
		want     string // the store's directory under base
		above    bool
		wantErr  string
		ceilings []string
	}{
		"own tree: the nearest .kl/ above":    {euid: me, want: "shared/mine/.kl", above: true},
		"parent of another owner not entered": {euid: me, owners: map[string]int{"shared/mine": other, "shared/mine/.kl": other, "shared": other}, want: "shared/mine/sub/.kl"},
		"a .kl/ of another owner refused": {euid: me, owners: map[string]int{"shared/mine/.kl": other},
			wantErr: "not using the store in " + filepath.Join(base, "shared/mine/.kl") + ": it belongs to uid 2000, neither to you (uid 1000) nor to the owner of the working directory (uid 1000)"},
		"a .kl/ of the user running kl (root), in another uid's tree":   {euid: 0, owners: map[string]int{"shared/mine/.kl": 0}, want: "shared/mine/.kl", above: true},
		"a ceiling is not entered":                                      {euid: me, ceilings: []string{filepath.Join(base, "shared", "mine")}, want: "shared/mine/sub/.kl"},
		"the owner change alone stops, before a .kl/ of the user's own": {euid: me, owners: map[string]int{"shared/mine": other}, want: "shared/mine/sub/.kl"},
	} {
		t.Run(name, func(t *testing.T) {
			d := discovery{wd: wd, euid: tc.euid, ceilings: tc.ceilings, owner: func(path string, _ fs.FileInfo) (int, bool) {
				if uid, ok := tc.owners[rel(path)]; ok {
					return uid, true
				}
				return me, true
			}}
			got, err := d.find()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("find: err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rel(got.path) != filepath.Join(tc.want, "kl.db") || got.above != tc.above {
				t.Errorf("find: %s (above %v), want %s/kl.db (above %v)", rel(got.path), got.above, tc.want, tc.above)
			}
		})
	}
}
