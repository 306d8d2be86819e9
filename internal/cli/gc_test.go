package cli_test

import (
	"encoding/json"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// gcDoc is `kl gc --json` (docs/json.md kilolock/gc/v1).
type gcDoc struct {
	Schema    string `json:"schema"`
	DryRun    bool   `json:"dry_run"`
	Retention string `json:"retention"`
	Deleted   []struct {
		Run      string `json:"run"`
		Kind     string `json:"kind"`
		Artifact string `json:"artifact"`
		Bytes    int64  `json:"bytes"`
		Why      string `json:"why"`
	} `json:"deleted"`
	Runs  int    `json:"runs"`
	Bytes int64  `json:"bytes"`
	Text  string `json:"text"`
}

// deletions lists a gc document's deletions as "run artifact why".
func (d gcDoc) deletions() []string {
	out := []string{}
	for _, x := range d.Deleted {
		if x.Bytes <= 0 {
			out = append(out, "no size: "+x.Run+" "+x.Artifact)
		}
		out = append(out, x.Run+" "+x.Artifact+" "+x.Why)
	}
	sort.Strings(out)
	return out
}

// TestGC: an apply's state artifacts are gone with its commit (a gc with
// retention off finds nothing); after KL_RETENTION the applied and the
// discarded plans lose their saved plan and configuration archive, listed
// first by --dry-run, which deletes nothing; the open plan keeps them and
// still applies; and kl run show of the applied plan still tells its story,
// saying when retention deleted what (ADR 0063).
func TestGC(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	k := setup(t)
	cfg := filepath.Join(k.dir, "cfg")
	write(t, filepath.Join(cfg, "main.tf"), `
resource "terraform_data" "a" { input = "a" }
`)
	k.ok("state", "init", "prod")
	applied := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg))
	apply := reULID.FindString(k.ok("apply", applied))
	write(t, filepath.Join(cfg, "main.tf"), `
resource "terraform_data" "a" { input = "b" }
`)
	discarded := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg))
	k.ok("run", "discard", discarded, "--reason", "replaced")
	open := reULID.FindString(k.ok("plan", "--state", "prod", "-C", cfg))

	env := func(v string) []string { return append(append([]string{}, k.env...), "KL_RETENTION="+v) }
	var doc gcDoc
	k.jsonOf(&doc, "gc", "--dry-run")
	if doc.Schema != "kilolock/gc/v1" || !doc.DryRun || doc.Retention != "30d" || len(doc.Deleted) != 0 {
		t.Fatalf("kl gc --dry-run right after the apply: %+v; want the default 30d and nothing: the commit deleted the apply's state artifacts", doc)
	}
	if r := k.runWith(env("off"), "", "gc"); r.err != nil || !strings.Contains(r.out, "Deleted 0 artifacts of 0 runs: 0 B freed") || !strings.Contains(r.out, "Retention: off") {
		t.Fatalf("kl gc with KL_RETENTION=off: %v\n%s%s", r.err, r.out, r.errOut)
	}

	time.Sleep(1100 * time.Millisecond)
	want := []string{
		applied + " config.tar.gz retention", applied + " plan.tfplan retention",
		discarded + " config.tar.gz retention", discarded + " plan.tfplan retention",
	}
	sort.Strings(want)
	for range 2 { // a dry run deletes nothing: the second lists the same
		r := k.runWith(env("1s"), "", "gc", "--dry-run", "--json")
		if r.err != nil {
			t.Fatalf("kl gc --dry-run: %v\n%s", r.err, r.errOut)
		}
		doc = gcDoc{}
		if err := json.Unmarshal([]byte(r.out), &doc); err != nil {
			t.Fatalf("kl gc --dry-run --json: %v\n%s", err, r.out)
		}
		if diff := cmp.Diff(want, doc.deletions()); diff != "" || doc.Runs != 2 || !strings.HasPrefix(doc.Text, "Would delete 4 artifacts of 2 runs: ") {
			t.Fatalf("kl gc --dry-run with KL_RETENTION=1s (-want +got):\n%s\n%+v", diff, doc)
		}
	}
	r := k.runWith(env("1s"), "", "gc")
	if r.err != nil || !strings.Contains(r.out, "Deleted 4 artifacts of 2 runs: ") || !strings.Contains(r.out, " freed") {
		t.Fatalf("kl gc: %v\n%s%s", r.err, r.out, r.errOut)
	}
	for _, w := range want {
		f := strings.Fields(w)
		if !strings.Contains(r.out, f[0]) || !strings.Contains(r.out, f[1]) {
			t.Errorf("kl gc does not list %s:\n%s", w, r.out)
		}
	}
	show := k.ok("run", "show", applied)
	for _, w := range []string{"deleted by retention on 20", "the saved plan (plan.tfplan), the configuration archive (config.tar.gz)", "kept 1s after the run closed"} {
		if !strings.Contains(show, w) {
			t.Errorf("kl run show of the applied plan does not say %q:\n%s", w, show)
		}
	}
	for _, w := range []string{"terraform_data.a", "applied"} {
		if !strings.Contains(show, w) {
			t.Errorf("kl run show of the applied plan lost %q of its story:\n%s", w, show)
		}
	}
	if s := k.ok("run", "show", apply); !strings.Contains(s, "Apply complete!") {
		t.Errorf("kl run show of the apply lost its apply log:\n%s", s)
	}
	// The open plan kept what its apply needs.
	if out := k.ok("apply", open); !strings.Contains(out, "1 changed") {
		t.Errorf("kl apply of the open plan after the gc:\n%s", out)
	}
}
