package terraform

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kilolock/kilolock/internal/engine"
)

var discard = slog.New(slog.DiscardHandler)

// writeTree writes files (slash-separated relative name → content) below dir.
// A content starting with "->" makes a symlink to the rest.
func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree lists dir: relative name → content ("->target" for symlinks,
// "/" for directories).
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "->" + target
		case d.IsDir():
			out[rel] = "/"
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// monorepo is a root module at envs/prod calling ../../modules/vpc, which
// calls ../sg: the copied tree is the repo, the root sub-path envs/prod.
var monorepo = map[string]string{
	"envs/prod/main.tf":                                   "module \"vpc\" {\n  source = \"../../modules/vpc\"\n}\n",
	"envs/prod/prod.auto.tfvars":                          "x = 1\n",
	"envs/prod/link.tf":                                   "->../../modules/vpc/main.tf",
	"envs/prod/hook.sh":                                   "#!/bin/sh\n",
	"modules/vpc/main.tf":                                 "module \"sg\" {\n  source = \"../sg\"\n}\n",
	"modules/sg/main.tf":                                  "resource \"terraform_data\" \"sg\" {}\n",
	"docs/README.md":                                      "docs\n",
	"envs/prod/.terraform/x":                              "cache",
	"envs/prod/terraform.tfstate":                         "{}",
	"envs/prod/terraform.tfstate.backup":                  "{}",
	"envs/prod/errored.tfstate":                           "{}",
	"envs/prod/old.tfplan":                                "zip",
	"envs/prod/terraform.tfstate.d/dev/terraform.tfstate": "{}",
	"envs/prod/" + overrideFileName:                       "terraform {}\n",
	".git/config":                                         "git",
	".kl/runs/x/snapshot.tfstate":                         "{}",
	"modules/vpc/.terraform/modules/modules.json":         "{}",
}

func setupMonorepo(t *testing.T) (repo string) {
	t.Helper()
	repo = filepath.Join(t.TempDir(), "repo")
	writeTree(t, repo, monorepo)
	if err := os.Chmod(filepath.Join(repo, "envs/prod/hook.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	return repo
}

func TestConfigArchiveRoundTrip(t *testing.T) {
	t.Parallel()
	repo := setupMonorepo(t)
	varFile := filepath.Join(t.TempDir(), "prod.tfvars")
	if err := os.WriteFile(varFile, []byte("env = \"prod\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	archive, err := buildConfigArchive(filepath.Join(repo, "envs/prod"), []string{varFile, "prod.auto.tfvars"}, discard)
	if err != nil {
		t.Fatalf("buildConfigArchive: %v", err)
	}
	dst := t.TempDir()
	rc, err := restoreConfigArchive(archive, dst)
	if err != nil {
		t.Fatalf("restoreConfigArchive: %v", err)
	}
	if rc.RootSub != "envs/prod" {
		t.Errorf("RootSub = %q, want envs/prod", rc.RootSub)
	}
	wantVar := []string{".kl-varfiles/000-prod.tfvars", ".kl-varfiles/001-prod.auto.tfvars"}
	if strings.Join(rc.VarFiles, ",") != strings.Join(wantVar, ",") {
		t.Errorf("VarFiles = %v, want %v", rc.VarFiles, wantVar)
	}
	got := readTree(t, dst)
	want := map[string]string{
		".kl-root":                          "envs/prod",
		".kl-varfiles":                      "/",
		".kl-varfiles/000-prod.tfvars":      "env = \"prod\"\n",
		".kl-varfiles/001-prod.auto.tfvars": "x = 1\n",
		"docs":                              "/",
		"docs/README.md":                    "docs\n",
		"envs":                              "/",
		"envs/prod":                         "/",
		"envs/prod/hook.sh":                 "#!/bin/sh\n",
		"envs/prod/link.tf":                 "->../../modules/vpc/main.tf",
		"envs/prod/main.tf":                 monorepo["envs/prod/main.tf"],
		"envs/prod/prod.auto.tfvars":        "x = 1\n",
		"modules":                           "/",
		"modules/sg":                        "/",
		"modules/sg/main.tf":                monorepo["modules/sg/main.tf"],
		"modules/vpc":                       "/",
		"modules/vpc/main.tf":               monorepo["modules/vpc/main.tf"],
	}
	if strings.Join(keys(got), "\n") != strings.Join(keys(want), "\n") {
		t.Fatalf("restored tree:\n%s\nwant:\n%s", strings.Join(keys(got), "\n"), strings.Join(keys(want), "\n"))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	// Through the symlink, the module file is reachable.
	if b, err := os.ReadFile(filepath.Join(dst, "envs/prod/link.tf")); err != nil || string(b) != monorepo["modules/vpc/main.tf"] {
		t.Errorf("reading through restored symlink: %q, %v", b, err)
	}
	modes := map[string]os.FileMode{"envs/prod/hook.sh": 0o700, "envs/prod/main.tf": 0o600, "envs/prod": 0o700 | fs.ModeDir}
	for name, want := range modes {
		fi, err := os.Lstat(filepath.Join(dst, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("mode of %s = %v, want %v", name, fi.Mode(), want)
		}
	}
}

func TestConfigArchiveDeterministic(t *testing.T) {
	t.Parallel()
	repo := setupMonorepo(t)
	root := filepath.Join(repo, "envs/prod")
	a, err := buildConfigArchive(root, nil, discard)
	if err != nil {
		t.Fatal(err)
	}
	// Other mtimes, other permission bits that are not the exec bit.
	later := time.Now().Add(time.Hour)
	for _, name := range []string{"envs/prod/main.tf", "modules/sg/main.tf", "docs"} {
		if err := os.Chtimes(filepath.Join(repo, name), later, later); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(repo, "docs/README.md"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := buildConfigArchive(root, nil, discard)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("same tree gave different archive bytes")
	}
	// And the archive reflects content changes.
	if err := os.WriteFile(filepath.Join(repo, "modules/sg/main.tf"), []byte("# changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := buildConfigArchive(root, nil, discard)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, c) {
		t.Fatal("changed module gave the same archive bytes")
	}
}

func TestBuildConfigArchiveRefuses(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		files map[string]string
		root  string
		want  string
	}{
		"symlink out of the tree": {
			files: map[string]string{"cfg/main.tf": "", "cfg/secrets.tf": "->/etc/hostname"},
			root:  "cfg",
			want:  "points outside the copied tree",
		},
		"symlinked dir out of the tree": {
			files: map[string]string{"cfg/main.tf": "", "cfg/etc": "->/etc"},
			root:  "cfg",
			want:  "points outside the copied tree",
		},
		"modules reaching the filesystem root": {
			files: map[string]string{"cfg/main.tf": "module \"m\" {\n  source = \"" + strings.Repeat("../", 40) + "opt/m\"\n}\n"},
			root:  "cfg",
			want:  "filesystem root",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeTree(t, dir, tc.files)
			_, err := buildConfigArchive(filepath.Join(dir, tc.root), nil, discard)
			if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("buildConfigArchive() error = %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
}

func TestBuildConfigArchiveSymlinkInsideParentModule(t *testing.T) {
	t.Parallel()
	// A symlink to a sibling module is inside the ancestor of root and
	// modules: allowed, stored as a relative link.
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"root/main.tf":        "module \"m\" {\n  source = \"../shared\"\n}\n",
		"lib/m/main.tf":       "resource \"terraform_data\" \"x\" {}\n",
		"shared":              "->lib/m",
		"root/data/file.json": "{}",
		"root/alias.json":     "->data/file.json",
	})
	archive, err := buildConfigArchive(filepath.Join(dir, "root"), nil, discard)
	if err != nil {
		t.Fatalf("buildConfigArchive: %v", err)
	}
	dst := t.TempDir()
	rc, err := restoreConfigArchive(archive, dst)
	if err != nil {
		t.Fatalf("restoreConfigArchive: %v", err)
	}
	if rc.RootSub != "root" {
		t.Errorf("RootSub = %q", rc.RootSub)
	}
	got := readTree(t, dst)
	if got["shared"] != "->lib/m" || got["root/alias.json"] != "->data/file.json" {
		t.Errorf("links not kept: shared=%q alias=%q", got["shared"], got["root/alias.json"])
	}
	if _, err := os.Stat(filepath.Join(dst, "root/../shared/main.tf")); err != nil {
		t.Errorf("module through link not reachable: %v", err)
	}
}

type tarEntry struct {
	hdr  tar.Header
	data string
}

func makeTarGz(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		h := e.hdr
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag == tar.TypeReg && h.Size == 0 {
			h.Size = int64(len(e.data))
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.data)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRestoreConfigArchiveRefuses(t *testing.T) {
	t.Parallel()
	rootEntry := tarEntry{hdr: tar.Header{Name: archiveRootEntry}, data: "."}
	file := func(name string) tarEntry { return tarEntry{hdr: tar.Header{Name: name}, data: "x"} }
	link := func(name, target string) tarEntry {
		return tarEntry{hdr: tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target}}
	}
	// A gzip stream that is not a tar, and a header whose size exceeds the cap.
	var notTar bytes.Buffer
	zw := gzip.NewWriter(&notTar)
	_, _ = zw.Write([]byte(strings.Repeat("not a tar ", 100)))
	_ = zw.Close()
	var huge bytes.Buffer
	zw = gzip.NewWriter(&huge)
	tw := tar.NewWriter(zw)
	_ = tw.WriteHeader(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Size: maxConfigBytes + 1, Mode: 0o644})
	_ = zw.Close()

	tests := map[string]struct {
		archive []byte
		want    string
	}{
		"not gzip":             {archive: []byte("PK\x03\x04 definitely not gzip"), want: "not a gzip stream"},
		"not tar":              {archive: notTar.Bytes(), want: "reading entry"},
		"dot dot":              {archive: makeTarGz(t, rootEntry, file("../evil")), want: "unsafe entry name"},
		"dot dot inside":       {archive: makeTarGz(t, rootEntry, file("a/../../evil")), want: "unsafe entry name"},
		"absolute":             {archive: makeTarGz(t, rootEntry, file("/tmp/evil")), want: "unsafe entry name"},
		"backslash":            {archive: makeTarGz(t, rootEntry, file(`..\evil`)), want: "unsafe entry name"},
		"absolute link":        {archive: makeTarGz(t, rootEntry, link("l", "/etc/passwd")), want: "unsafe target"},
		"link out":             {archive: makeTarGz(t, rootEntry, link("a/l", "../../x")), want: "points outside"},
		"unclean link":         {archive: makeTarGz(t, rootEntry, link("l", "s/../../x")), want: "unsafe target"},
		"write below link":     {archive: makeTarGz(t, rootEntry, tarEntry{hdr: tar.Header{Name: "sub/", Typeflag: tar.TypeDir}}, link("l", "sub"), file("l/x")), want: "not a directory"},
		"write through dot":    {archive: makeTarGz(t, rootEntry, link("d", "."), link("d/l", "../x")), want: "not a directory"},
		"hard link":            {archive: makeTarGz(t, rootEntry, tarEntry{hdr: tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: ".kl-root"}}), want: "unsupported type"},
		"device":               {archive: makeTarGz(t, rootEntry, tarEntry{hdr: tar.Header{Name: "dev", Typeflag: tar.TypeChar}}), want: "unsupported type"},
		"duplicate":            {archive: makeTarGz(t, rootEntry, file("a"), file("a")), want: "duplicate entry"},
		"no root entry":        {archive: makeTarGz(t, file("main.tf")), want: "no .kl-root entry"},
		"root entry escapes":   {archive: makeTarGz(t, tarEntry{hdr: tar.Header{Name: archiveRootEntry}, data: "../.."}), want: "root module path"},
		"root entry not a dir": {archive: makeTarGz(t, tarEntry{hdr: tar.Header{Name: archiveRootEntry}, data: "main.tf"}, file("main.tf")), want: "not a directory"},
		"too large":            {archive: huge.Bytes(), want: "larger than"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			parent := t.TempDir()
			dst := filepath.Join(parent, "dst")
			if err := os.Mkdir(dst, 0o700); err != nil {
				t.Fatal(err)
			}
			_, err := restoreConfigArchive(tc.archive, dst)
			if !errors.Is(err, engine.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("restoreConfigArchive() error = %v, want ErrInvalid containing %q", err, tc.want)
			}
			// Nothing was written next to dst.
			if ents, _ := os.ReadDir(parent); len(ents) != 1 {
				t.Errorf("restore wrote outside dst: %v", ents)
			}
		})
	}
}

func TestExcluded(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		name  string
		isDir bool
		want  bool
	}{
		"terraform dir":         {".terraform", true, true},
		"git dir":               {".git", true, true},
		"kl dir":                {".kl", true, true},
		"state":                 {"terraform.tfstate", false, true},
		"state backup":          {"terraform.tfstate.backup", false, true},
		"state dir":             {"terraform.tfstate.d", true, true},
		"plan":                  {"prod.tfplan", false, true},
		"override":              {overrideFileName, false, true},
		"tf file":               {"main.tf", false, false},
		"lock file":             {".terraform.lock.hcl", false, false},
		"tfvars":                {"prod.tfvars", false, false},
		"file named .terraform": {".terraform", false, false},
		"dir named x.tfplan":    {"x.tfplan", true, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := excluded(tc.name, tc.isDir); got != tc.want {
				t.Errorf("excluded(%q, %v) = %v, want %v", tc.name, tc.isDir, got, tc.want)
			}
		})
	}
}

func TestBuildConfigArchiveDirIsSymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"releases/v2/main.tf": "resource \"terraform_data\" \"x\" {}\n",
		"current":             "->releases/v2",
	})
	archive, err := buildConfigArchive(filepath.Join(dir, "current"), nil, discard)
	if err != nil {
		t.Fatalf("buildConfigArchive: %v", err)
	}
	dst := t.TempDir()
	rc, err := restoreConfigArchive(archive, dst)
	if err != nil {
		t.Fatal(err)
	}
	if got := readTree(t, dst); rc.RootSub != "." || got["main.tf"] == "" {
		t.Errorf("root %q, tree %v: want main.tf at the top", rc.RootSub, keys(got))
	}
}
