package cli_test

import (
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/store/pgtest"
)

// prPlanDoc is the part of a kl plan --json document these tests read.
type prPlanDoc struct {
	Run struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"run"`
	Envelope struct {
		PlanDigest     string `json:"plan_digest"`
		CommitSHA      string `json:"commit_sha"`
		PlannedAtMerge bool   `json:"planned_at_merge"`
	} `json:"envelope"`
	Overlaps []struct {
		Run string `json:"run"`
	} `json:"overlaps"`
}

// runStatus is the status `kl run show RUN --json` gives run id.
func (k *kit) runStatus(id string) string {
	k.t.Helper()
	var doc struct {
		Run struct {
			Status string `json:"status"`
		} `json:"run"`
	}
	k.jsonOf(&doc, "run", "show", id)
	return doc.Run.Status
}

// TestPlanSupersedesOwnOlderPlan (issue 15 §4): a newer plan of the same
// pull request, state and directory closes the pull request's older open
// plan (superseded by a newer plan, as klbot does) instead of listing it
// as an overlap that "both write"; a plan of another pull request, or of
// another directory, stays open and is listed.
func TestPlanSupersedesOwnOlderPlan(t *testing.T) {
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), reportConfig("v1"))
	k.ok("state", "init", "prod")
	c1, c2 := strings.Repeat("a1", 20), strings.Repeat("b2", 20)

	var other, old, newer prPlanDoc
	k.jsonOf(&other, "plan", "--state", "prod", "-C", cfg, "--pr", "acme/infra#8", "--commit", strings.Repeat("c3", 20))
	k.jsonOf(&old, "plan", "--state", "prod", "-C", cfg, "--pr", "acme/infra#7", "--commit", c1)
	if len(old.Overlaps) != 1 || old.Overlaps[0].Run != other.Run.ID {
		t.Errorf("first plan of #7: overlaps %+v, want the plan of #8 (%s)", old.Overlaps, other.Run.ID)
	}
	write(t, filepath.Join(cfg, "main.tf"), reportConfig("v2"))
	k.jsonOf(&newer, "plan", "--state", "prod", "-C", cfg, "--pr", "acme/infra#7", "--commit", c2)
	var got []string
	for _, o := range newer.Overlaps {
		got = append(got, o.Run)
	}
	if len(got) != 1 || got[0] != other.Run.ID {
		t.Errorf("newer plan of #7: overlaps %v, want only the plan of #8 (%s), not #7's own older plan %s", got, other.Run.ID, old.Run.ID)
	}
	if s := k.runStatus(old.Run.ID); s != "superseded" {
		t.Errorf("older plan of #7 is %s, want superseded by the newer plan", s)
	}
	out := k.ok("run", "show", old.Run.ID)
	if !strings.Contains(out, "superseded by a newer plan of acme/infra#7 at "+c2[:7]) {
		t.Errorf("kl run show of the older plan does not say what superseded it:\n%s", out)
	}
	if s := k.runStatus(other.Run.ID); s != "planned" {
		t.Errorf("the plan of #8 is %s, want planned (another pull request's plan stays open)", s)
	}
}

// TestStoreKeyValueDSN (issue 15 §4): a libpq key=value KL_STORE is a
// PostgreSQL store, not a SQLite path; an error opening it never shows
// the password.
func TestStoreKeyValueDSN(t *testing.T) {
	const password = "kv-s3cret-pw-9137"
	k := setup(t)
	// Unreachable (port 1): the error names PostgreSQL and the server,
	// not the password, and no SQLite file named after the DSN appears.
	for _, bad := range []string{
		"host=127.0.0.1 port=1 user=kl dbname=kl connect_timeout=5 password=" + password,
		"dbname=kl password='" + password + "' port=notaport", // pgx cannot parse it
		"postgres://kl:" + password + "@127.0.0.1:1/kl?connect_timeout=5",
	} {
		r := k.runWith(envWith(k.env, "KL_STORE="+bad), "", "state", "list")
		if r.err == nil {
			t.Fatalf("kl state list with store %q succeeded:\n%s", bad, r.out)
		}
		for what, s := range map[string]string{"error": r.err.Error(), "stdout": r.out, "stderr": r.errOut} {
			if strings.Contains(s, password) {
				t.Errorf("%s shows the store's password: %s", what, s)
			}
		}
		if !strings.Contains(r.err.Error(), "PostgreSQL") || strings.Contains(r.err.Error(), "kl state init") {
			t.Errorf("error %q: want it to name a PostgreSQL store, not suggest creating a SQLite one", r.err)
		}
	}

	// A reachable one in key=value form: the store works.
	u, err := url.Parse(pgtest.DSN(t))
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Skipf("the test DSN is not a postgres:// URL (%v)", err)
	}
	kv := []string{"host=" + u.Hostname(), "dbname=" + strings.TrimPrefix(u.Path, "/")}
	if p := u.Port(); p != "" {
		kv = append(kv, "port="+p)
	}
	if u.User != nil {
		kv = append(kv, "user="+u.User.Username())
		if pw, ok := u.User.Password(); ok {
			kv = append(kv, "password='"+pw+"'")
		}
	}
	for key, vals := range u.Query() {
		kv = append(kv, key+"='"+vals[0]+"'")
	}
	env := envWith(k.env, "KL_STORE="+strings.Join(kv, " "))
	if r := k.runWith(env, "", "state", "init", "kvprod"); r.err != nil {
		t.Fatalf("kl state init with a key=value store: %v\n%s", r.err, r.errOut)
	}
	if r := k.runWith(env, "", "state", "list"); r.err != nil || !strings.Contains(r.out, "kvprod") {
		t.Errorf("kl state list with a key=value store: %v\n%s", r.err, r.out)
	}
}
