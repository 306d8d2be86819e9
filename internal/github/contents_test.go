package github_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/github"
	"github.com/kilolock/kilolock/internal/github/githubfake"
)

// TestGetFile reads files through the contents API of the fake, which
// answers like GitHub: without a ref the default branch, a directory as
// its entries, nothing as 404.
func TestGetFile(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("# a comment line of kl.yaml\n", 100) // 2,800 bytes: base64 wrapped over many lines
	tests := map[string]struct {
		path, ref string
		max       int64
		want      github.File
		err       error
	}{
		"default branch":   {path: "kl.yaml", want: github.File{Path: "kl.yaml", Type: "file", Size: int64(len(big)), Content: []byte(big)}},
		"at a commit":      {path: "kl.yaml", ref: headSHA, want: github.File{Path: "kl.yaml", Type: "file", Size: 8, Content: []byte("version:")}},
		"at the cap":       {path: "kl.yaml", max: int64(len(big)), want: github.File{Path: "kl.yaml", Type: "file", Size: int64(len(big)), Content: []byte(big)}},
		"over the cap":     {path: "kl.yaml", max: int64(len(big)) - 1, err: github.ErrTooLarge},
		"a directory":      {path: "infra", want: github.File{Path: "infra", Type: "dir"}},
		"nothing there":    {path: "absent.yaml", err: github.ErrNotFound},
		"no such ref":      {path: "kl.yaml", ref: "nope", err: github.ErrNotFound},
		"path above root":  {path: "../kl.yaml", err: github.ErrValidation},
		"absolute path":    {path: "/kl.yaml", err: github.ErrValidation},
		"ref with a query": {path: "kl.yaml", ref: "main?x=1", err: github.ErrValidation},
		"nested file":      {path: "infra/main.tf", want: github.File{Path: "infra/main.tf", Type: "file", Size: 2, Content: []byte("#\n")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			e.f.SetFile(repoStr, githubfake.DefaultBranch, "kl.yaml", []byte(big))
			e.f.SetFile(repoStr, githubfake.DefaultBranch, "infra/main.tf", []byte("#\n"))
			e.f.SetFile(repoStr, headSHA, "kl.yaml", []byte("version:"))
			max := tc.max
			if max == 0 {
				max = 1 << 20
			}
			got, err := e.c.GetFile(ctx(t), repo, tc.path, tc.ref, max)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Path != tc.want.Path || got.Type != tc.want.Type || got.Size != tc.want.Size || string(got.Content) != string(tc.want.Content) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
