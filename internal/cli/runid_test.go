package cli_test

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRunIDInLowerCase: a run id pasted in lower case names the same run
// (ULIDs are Crockford base32, which reads lower case as upper case): kl
// run show, kl why and kl apply take it.
func TestRunIDInLowerCase(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), "resource \"terraform_data\" \"a\" {\n  input = \"a\"\n}\n")
	k.ok("state", "init", "prod")
	id := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg))
	lower := strings.ToLower(id)
	if out := k.ok("run", "show", lower); !strings.Contains(out, id) {
		t.Fatalf("kl run show %s:\n%s\nwant the story of %s", lower, out, id)
	}
	if out := k.ok("why", lower); !strings.Contains(out, id) {
		t.Fatalf("kl why %s:\n%s", lower, out)
	}
	if out := k.ok("apply", lower); !strings.Contains(out, "version 1") {
		t.Fatalf("kl apply %s:\n%s\nwant version 1 committed", lower, out)
	}
}
