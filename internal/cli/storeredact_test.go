package cli_test

import (
	"strings"
	"testing"
)

// TestUnknownStoreShowsNoPassword (issue 15 §4, "never print a store
// value"): a KL_STORE with "://" that kl does not take for PostgreSQL or
// SQLite fails as an unknown store kind without its password — also when
// Go cannot parse it as a URL (a blank before the scheme, as a secret
// pasted with one has, or inside the password), when the password is a
// query value, and it names a leading or trailing blank.
func TestUnknownStoreShowsNoPassword(t *testing.T) {
	const pw = "st0re-pw-5520"
	k := setup(t)
	for _, tc := range []struct{ store, want string }{
		{" postgres://kl:" + pw + "@127.0.0.1:1/kl", "starts or ends with a blank"},
		{"\tpostgres://kl:" + pw + "@db/kl", "starts or ends with a blank"},
		{"postgres ://kl:" + pw + "@db/kl", "unknown store kind"},
		{"mysql://kl:pw " + pw + "@db/kl", "unknown store kind"},
		{"mysql://db/kl?password=" + pw, "opening store mysql://db/kl?…"},
		{"mysql://kl:" + pw + "@db/kl", "opening store mysql://kl:xxxxx@db/kl"},
	} {
		r := k.runWith(envWith(k.env, "KL_STORE="+tc.store), "", "state", "list")
		if r.err == nil {
			t.Fatalf("kl state list with store %q succeeded:\n%s", tc.store, r.out)
		}
		for what, s := range map[string]string{"error": r.err.Error(), "stdout": r.out, "stderr": r.errOut} {
			if strings.Contains(s, pw) {
				t.Errorf("store %q: %s shows the password: %s", tc.store, what, s)
			}
		}
		if !strings.Contains(r.err.Error(), tc.want) || !strings.Contains(r.err.Error(), "unknown store kind") {
			t.Errorf("store %q: error %q, want it to say %q", tc.store, r.err, tc.want)
		}
	}
}
