package tarball

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// entry is one crafted tar entry.
type entry struct {
	name, link string
	typ        byte
	body       string
	size       int64 // header size when body is not written (oversize)
}

func tgz(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header",
		PAXRecords: map[string]string{"comment": strings.Repeat("a", 40)}}); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
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

const top = "acme-infra-0123456/"

func TestExtract(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	data := tgz(t,
		entry{name: top, typ: tar.TypeDir},
		entry{name: top + "kl.yaml", body: "version: 1\n"},
		entry{name: top + "infra/", typ: tar.TypeDir},
		entry{name: top + "infra/main.tf", body: "resource \"terraform_data\" \"a\" {}\n"},
		entry{name: top + "infra/copy.tf", link: top + "infra/main.tf", typ: tar.TypeLink},
		entry{name: top + "infra/link.tf", link: "main.tf", typ: tar.TypeSymlink},
		entry{name: top + "shared", link: "infra", typ: tar.TypeSymlink},
	)
	if err := Extract(data, root, Limits{}); err != nil {
		t.Fatalf("Extract: %v", err)
	}
	for _, f := range []string{"kl.yaml", "infra/main.tf", "infra/copy.tf", "infra/link.tf", "shared/main.tf"} {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if fi, err := os.Lstat(filepath.Join(root, "infra/copy.tf")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("a hard link inside the root is copied as a regular file: %v %v", fi, err)
	}
}

func TestExtractRefusals(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 2048)
	for name, tc := range map[string]struct {
		entries []entry
		lim     Limits
		want    string
	}{
		"absolute path":       {[]entry{{name: "/etc/passwd", body: "x"}}, Limits{}, "absolute"},
		"dot dot":             {[]entry{{name: top, typ: tar.TypeDir}, {name: top + "../../evil.tf", body: "x"}}, Limits{}, `".."`},
		"dot dot at top":      {[]entry{{name: "../evil.tf", body: "x"}}, Limits{}, `".."`},
		"symlink absolute":    {[]entry{{name: top, typ: tar.TypeDir}, {name: top + "etc", link: "/etc", typ: tar.TypeSymlink}}, Limits{}, "absolute target"},
		"symlink out":         {[]entry{{name: top, typ: tar.TypeDir}, {name: top + "a/up", link: "../../..", typ: tar.TypeSymlink}}, Limits{}, "leaves the repository"},
		"write through link":  {[]entry{{name: top, typ: tar.TypeDir}, {name: top + "d", link: ".", typ: tar.TypeSymlink}, {name: top + "d", body: "x"}}, Limits{}, "would replace a symbolic link"},
		"hardlink out":        {[]entry{{name: top, typ: tar.TypeDir}, {name: top + "passwd", link: "/etc/passwd", typ: tar.TypeLink}}, Limits{}, "hard link"},
		"hardlink dot dot":    {[]entry{{name: top, typ: tar.TypeDir}, {name: top + "passwd", link: top + "../x", typ: tar.TypeLink}}, Limits{}, "hard link"},
		"hardlink missing":    {[]entry{{name: top, typ: tar.TypeDir}, {name: top + "x", link: top + "nothing", typ: tar.TypeLink}}, Limits{}, "not an extracted regular file"},
		"oversize file":       {[]entry{{name: top, typ: tar.TypeDir}, {name: top + "big.tf", body: big}}, Limits{MaxFileBytes: 1024}, "cap per file"},
		"oversize total":      {[]entry{{name: top, typ: tar.TypeDir}, {name: top + "a.tf", body: big}, {name: top + "b.tf", body: big}}, Limits{MaxTotalBytes: 3000}, "unpacks to more than"},
		"too many entries":    {[]entry{{name: top, typ: tar.TypeDir}, {name: top + "a", body: "x"}, {name: top + "b", body: "x"}}, Limits{MaxEntries: 2}, "more than 2 entries"},
		"two top directories": {[]entry{{name: top, typ: tar.TypeDir}, {name: "other/x.tf", body: "x"}}, Limits{}, "second top-level"},
		"fifo":                {[]entry{{name: top, typ: tar.TypeDir}, {name: top + "p", typ: tar.TypeFifo}}, Limits{}, "special file"},
		"device":              {[]entry{{name: top, typ: tar.TypeDir}, {name: top + "sda", typ: tar.TypeBlock}}, Limits{}, "special file"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			parent := t.TempDir()
			root := filepath.Join(parent, "repo")
			if err := os.Mkdir(root, 0o700); err != nil {
				t.Fatal(err)
			}
			err := Extract(tgz(t, tc.entries...), root, tc.lim)
			if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want a refusal mentioning %q, got %v", tc.want, err)
			}
			// Nothing was written outside the root.
			ents, _ := os.ReadDir(parent)
			if len(ents) != 1 {
				t.Fatalf("something was written beside the root: %v", ents)
			}
		})
	}
}
