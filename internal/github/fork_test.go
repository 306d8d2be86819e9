package github

import "testing"

// TestIsFork: a head repository other than the base is a fork, in any
// letter case of the base; so is an unknown head — GitHub sends
// head.repo null once a fork is deleted — which must never pass for the
// repository's own branch.
func TestIsFork(t *testing.T) {
	t.Parallel()
	base := Repo{Owner: "acme", Name: "infra"}
	for head, want := range map[string]bool{
		"acme/infra":     false,
		"ACME/Infra":     false,
		"stranger/infra": true,
		"acme/infra2":    true,
		"":               true,
	} {
		if got := isFork(head, base); got != want {
			t.Errorf("isFork(%q, %s) = %v, want %v", head, base, got, want)
		}
	}
}
