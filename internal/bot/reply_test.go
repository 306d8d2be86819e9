package bot

import (
	"testing"

	"github.com/kilolock/kilolock/internal/github"
)

// TestPermissionWhy: a refusal says in words what the user may do and what
// the command needs — never "has none permission".
func TestPermissionWhy(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		perm github.Permission
		verb string
		want string
	}{
		"none":    {github.PermissionNone, "/kl apply", "@stranger has no permission on acme/infra; /kl apply needs write"},
		"unknown": {"", "/kl plan", "@stranger has no permission on acme/infra; /kl plan needs write"},
		"read":    {github.PermissionRead, "the Apply button", "@stranger has read permission on acme/infra; the Apply button needs write"},
		"triage":  {github.PermissionTriage, "/kl apply", "@stranger has triage permission on acme/infra; /kl apply needs write"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if got := permissionWhy("stranger", "acme/infra", tc.perm, tc.verb); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestCodeListOr(t *testing.T) {
	t.Parallel()
	if got := codeListOr(nil, "none"); got != "none" {
		t.Errorf("empty: %q", got)
	}
	if got := codeListOr([]string{"a", "b"}, "none"); got != "`a`, `b`" {
		t.Errorf("two: %q", got)
	}
}
