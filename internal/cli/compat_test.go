package cli_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/store"
)

// TestOlderKlOnARaisedStore (ADR 0048): on a store whose compatibility
// level a newer kl raised — its read level unchanged — this kl reads:
// history, runs, run show, why, status and state list print what is
// stored (the lease sweep, a write, is skipped with a warning); and every
// command that writes is refused, naming this kl's version and level, the
// store's level, who raised it and what to do, with the store left exactly
// as it was.
func TestOlderKlOnARaisedStore(t *testing.T) {
	t.Parallel()
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), "resource \"terraform_data\" \"a\" {\n  input = \"a\"\n}\n")
	k.ok("state", "init", "prod")
	applied := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg))
	k.ok("apply", applied)
	write(t, filepath.Join(cfg, "main.tf"), "resource \"terraform_data\" \"a\" {\n  input = \"b\"\n}\n")
	open := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg))

	db, err := sql.Open("sqlite", k.store)
	if err != nil {
		t.Fatal(err)
	}
	// What a newer kl's raising migration leaves (store.LevelMigration).
	if _, err := db.Exec(`UPDATE kl_compat SET level = ?, raised_by = '0.3.0', why = 'fence rules changed'`, store.CompatLevel+1); err != nil {
		t.Fatalf("raising the level as a newer kl would: %v", err)
	}
	db.Close()
	before := k.dump()

	reads := map[string]struct {
		args []string
		want string
	}{
		"history":    {[]string{"history", "--state", "prod"}, "version 1"},
		"runs":       {[]string{"runs"}, open},
		"run show":   {[]string{"run", "show", applied}, applied},
		"why":        {[]string{"why", applied}, "allowed"},
		"status":     {[]string{"status"}, open},
		"state list": {[]string{"state", "list"}, "prod"},
	}
	for name, tc := range reads {
		r := k.run(tc.args...)
		if r.err != nil {
			t.Errorf("kl %s on a store at a higher level: %v; want it to read", name, r.err)
			continue
		}
		if !strings.Contains(r.out, tc.want) {
			t.Errorf("kl %s on a store at a higher level printed\n%s\nwant it to show %q", name, r.out, tc.want)
		}
	}
	writes := map[string][]string{
		"plan":        {"plan", "--state", "prod", "-C", cfg},
		"apply":       {"apply", open},
		"state init":  {"state", "init", "other"},
		"run discard": {"run", "discard", open, "--reason", "stale"},
	}
	for name, args := range writes {
		r := k.run(args...)
		if r.code() != 1 {
			t.Errorf("kl %s on a store at a higher level: exit code %d (%v), want 1", name, r.code(), r.err)
			continue
		}
		for _, want := range []string{fmt.Sprintf("(version %s, compatibility level %d) must not write to this store", store.BinaryVersion, store.CompatLevel),
			fmt.Sprintf("its compatibility level is %d, raised by version 0.3.0", store.CompatLevel+1), "(fence rules changed)", "upgrade to version 0.3.0 or later"} {
			if !strings.Contains(r.err.Error(), want) {
				t.Errorf("kl %s: %q does not say %q", name, r.err, want)
			}
		}
	}
	if after := k.dump(); after != before {
		t.Errorf("the store changed under the refused commands:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
