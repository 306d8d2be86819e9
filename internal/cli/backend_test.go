package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// prodConfig is a configuration of terraform_data resources named by
// names (input = the name) with an output "a" when a is among them.
func prodConfig(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "resource \"terraform_data\" %q {\n  input = %q\n}\n\n", n, n)
		if n == "a" {
			b.WriteString("output \"a\" {\n  value = terraform_data.a.output\n}\n\n")
		}
	}
	return b.String()
}

// flat is Terraform's output with its line wrapping undone (it wraps
// diagnostics at 78 columns).
func flat(out string) string { return strings.Join(strings.Fields(out), " ") }

// TestBackendTerraform is plain Terraform on a Kilolock state through kl
// serve, on both stores: init, apply, state list, output, state mv,
// state rm, an import block, terraform_remote_state from a second
// configuration with a read-only token, a plan with a read-only token;
// a read-only token writing and no token at all are refused. Every write
// is one version whose provenance names the token's actor.
func TestBackendTerraform(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	for kind, newKit := range kits {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			k := newKit(t)
			k.ok("state", "init", "acme/prod")
			writer, reader := k.tokens()
			s := serveBackend(t, k)
			dir := filepath.Join(k.dir, "prod")
			write(t, filepath.Join(dir, "backend.tf"), s.backendBlock("acme/prod"))
			write(t, filepath.Join(dir, "main.tf"), prodConfig("a", "b"))
			bob := tf{k, dir, writer}
			versions := func() int { return len(k.history("acme/prod")) }

			bob.ok("init", "-no-color")
			before := versions()
			mark := s.mark()
			bob.ok("apply", "-auto-approve", "-no-color")
			if got := s.requests(mark); got[0] != "LOCK OK" || got[len(got)-1] != "UNLOCK OK" {
				t.Errorf("terraform apply's requests: %v", got)
			}
			h := k.history("acme/prod")
			if len(h) != before+1 {
				t.Fatalf("terraform apply made %d versions, want 1: %+v", len(h)-before, h)
			}
			if p := h[0].Provenance; p["commit_mode"] != "push" || p["actor"] != "bob" {
				t.Errorf("the apply's version's provenance = %v, want commit mode push by bob", p)
			}
			if got := bob.ok("state", "list"); got != "terraform_data.a\nterraform_data.b\n" {
				t.Errorf("terraform state list = %q", got)
			}
			if got := bob.ok("output", "-raw", "a"); got != "a" {
				t.Errorf("terraform output -raw a = %q", got)
			}

			bob.ok("state", "mv", "terraform_data.b", "terraform_data.c")
			write(t, filepath.Join(dir, "main.tf"), prodConfig("a", "c"))
			if _, addrs := k.pull("acme/prod"); !slices.Equal(addrs, []string{"terraform_data.a", "terraform_data.c"}) {
				t.Errorf("after terraform state mv, the head holds %v", addrs)
			}
			bob.ok("state", "rm", "terraform_data.c")
			write(t, filepath.Join(dir, "main.tf"), prodConfig("a"))
			if _, addrs := k.pull("acme/prod"); !slices.Equal(addrs, []string{"terraform_data.a"}) {
				t.Errorf("after terraform state rm, the head holds %v", addrs)
			}
			write(t, filepath.Join(dir, "import.tf"), "import {\n  to = terraform_data.imp\n  id = \"imported-1\"\n}\n\nresource \"terraform_data\" \"imp\" {}\n")
			bob.ok("apply", "-auto-approve", "-no-color")
			doc, addrs := k.pull("acme/prod")
			if !slices.Contains(addrs, "terraform_data.imp") {
				t.Errorf("after an import block's apply, the head holds %v", addrs)
			}
			for _, r := range doc.Resources {
				if r.Name == "imp" && r.Instances[0].Attributes["id"] != "imported-1" {
					t.Errorf("the imported instance: %v", r.Instances[0].Attributes)
				}
			}
			h = k.history("acme/prod")
			if len(h) != before+4 {
				t.Errorf("apply, state mv, state rm, import: %d versions, want 4", len(h)-before)
			}
			for _, v := range h[:len(h)-before] {
				if v.Provenance["actor"] != "bob" {
					t.Errorf("version %d's provenance names actor %v, want bob", v.Serial, v.Provenance["actor"])
				}
			}

			// A consumer reads the outputs with a read-only token.
			consumer := filepath.Join(k.dir, "consumer")
			write(t, filepath.Join(consumer, "main.tf"), `variable "token" {
  type      = string
  sensitive = true
}

data "terraform_remote_state" "prod" {
  backend = "http"
  config = {
    address  = "`+s.address("acme/prod")+`"
    username = "consumer"
    password = var.token
  }
}

output "a" {
  value = data.terraform_remote_state.prod.outputs.a
}
`)
			c := tf{k, consumer, ""}
			c.ok("init", "-no-color")
			c.ok("apply", "-auto-approve", "-no-color", "-var", "token="+reader)
			if got := c.ok("output", "-raw", "a"); got != "a" {
				t.Errorf("terraform_remote_state's output a = %q, want a", got)
			}

			// A read-only token plans (a read lock) but does not write.
			ro := tf{k, dir, reader}
			ro.ok("plan", "-no-color")
			if out := ro.fails("apply", "-auto-approve", "-no-color"); !strings.Contains(out, "HTTP remote state endpoint invalid auth") {
				t.Errorf("terraform apply with a read-only token printed:\n%s", out)
			}
			if !strings.Contains(s.log(), "is read-only: it may read state acme/prod but not lock or write it") {
				t.Errorf("the request log does not say why the read-only token's LOCK was refused:\n%s", s.log())
			}
			// No token: Terraform sends Basic auth with an empty password.
			if out := (tf{k, dir, ""}).fails("plan", "-no-color"); !strings.Contains(out, "HTTP remote state endpoint requires auth") {
				t.Errorf("terraform plan without a token printed:\n%s", out)
			}
			if code, body := s.do("GET", "acme/prod", "", ""); code != 401 || !strings.Contains(body, "no token") {
				t.Errorf("GET without a token: %d %s", code, body)
			}
			if n := len(k.history("acme/prod")); n != len(h) {
				t.Errorf("plans and refused writes made %d versions", n-len(h))
			}
		})
	}
}

// TestBackendAdoption: a state Terraform kept locally moves onto an
// empty state of `kl state init` with `terraform init -migrate-state`;
// the head then has its lineage, serial and resources, and Terraform plans
// no change.
func TestBackendAdoption(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	for kind, newKit := range kits {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			k := newKit(t)
			dir := filepath.Join(k.dir, "legacy")
			write(t, filepath.Join(dir, "main.tf"), prodConfig("a", "b"))
			local := tf{k, dir, ""}
			local.ok("init", "-no-color")
			local.ok("apply", "-auto-approve", "-no-color")
			raw, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
			if err != nil {
				t.Fatal(err)
			}
			var old stateDoc
			if err := json.Unmarshal(raw, &old); err != nil {
				t.Fatal(err)
			}

			k.ok("state", "init", "legacy")
			writer, _ := k.tokens()
			s := serveBackend(t, k)
			write(t, filepath.Join(dir, "backend.tf"), s.backendBlock("legacy"))
			bob := tf{k, dir, writer}
			bob.ok("init", "-migrate-state", "-force-copy", "-no-color")
			head, addrs := k.pull("legacy")
			if head.Lineage != old.Lineage || head.Serial < old.Serial || !slices.Equal(addrs, []string{"terraform_data.a", "terraform_data.b"}) {
				t.Errorf("adopted head: lineage %s serial %d %v; the old state: lineage %s serial %d", head.Lineage, head.Serial, addrs, old.Lineage, old.Serial)
			}
			h := k.history("legacy")
			if h[0].Lineage != old.Lineage || h[0].Provenance["actor"] != "bob" {
				t.Errorf("the adoption's version: %+v", h[0])
			}
			t.Logf("the adoption's version: %+v", h[0])
			if out, err := bob.run("plan", "-detailed-exitcode", "-no-color"); err != nil {
				t.Errorf("terraform plan after the adoption: %v (exit 2: changes)\n%s", err, out)
			}
			// kl plan on the adopted state: the versions the adoption
			// skipped (below its serial) were never Kilolock's, and what
			// the adoption brought is no one's change to undo.
			edit := filepath.Join(k.dir, "edit")
			write(t, filepath.Join(edit, "main.tf"), strings.Replace(prodConfig("a", "b"), `input = "a"`, `input = "a2"`, 1))
			if r := k.run("plan", "--state", "legacy", "-C", edit); r.err != nil {
				t.Errorf("kl plan after the adoption: %v\n%s", r.err, r.errOut)
			} else if strings.Contains(r.out, "would undo") {
				t.Errorf("kl plan after the adoption says it would undo the adoption:\n%s", r.out)
			}
			// Another lineage is refused now that the state has a history.
			other := filepath.Join(k.dir, "other.tfstate")
			write(t, other, `{"version":4,"terraform_version":"1.11.4","serial":50,"lineage":"another-lineage","outputs":{},"resources":[]}`)
			if out := bob.fails("state", "push", "-force", "-no-color", other); !strings.Contains(out, "HTTP error: 409") {
				t.Errorf("terraform state push -force of another lineage printed:\n%s", out)
			}
			if !strings.Contains(s.log(), "another-lineage") {
				t.Errorf("the request log does not say which lineage was refused:\n%s", s.log())
			}
		})
	}
}

// TestBackendRefusals: over-large bodies (413), concurrent LOCKs (exactly
// one wins, the others get 423 naming the winner), and force-unlock of a
// backend lock left by a Terraform that died, on both stores.
func TestBackendRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	for kind, newKit := range kits {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			k := newKit(t)
			k.ok("state", "init", "acme/prod")
			writer, reader := k.tokens()
			s := serveBackend(t, k, "--max-body-mib", "1")
			dir := filepath.Join(k.dir, "prod")
			write(t, filepath.Join(dir, "backend.tf"), s.backendBlock("acme/prod"))
			write(t, filepath.Join(dir, "main.tf"), prodConfig("a"))
			bob := tf{k, dir, writer}
			bob.ok("init", "-no-color")
			bob.ok("apply", "-auto-approve", "-no-color")
			head, _ := k.pull("acme/prod")

			// A state over the cap.
			big := filepath.Join(k.dir, "big.tfstate")
			write(t, big, fmt.Sprintf(`{"version":4,"terraform_version":"1.11.4","serial":%d,"lineage":%q,"outputs":{"big":{"value":%q,"type":"string"}},"resources":[]}`,
				head.Serial+1, head.Lineage, strings.Repeat("x", 1<<20)))
			if out := bob.fails("state", "push", "-no-color", big); !strings.Contains(out, "HTTP error: 413") {
				t.Errorf("terraform state push of a state over 1 MiB printed:\n%s", out)
			}
			// Terraform shows only the status: the push's lock says why.
			var runs struct {
				Runs []struct {
					ID string `json:"id"`
				} `json:"runs"`
			}
			k.jsonOf(&runs, "runs", "--state", "acme/prod")
			if len(runs.Runs) == 0 {
				t.Fatal("kl runs lists no run")
			}
			for _, view := range [][]string{{"run", "show", runs.Runs[0].ID}, {"why", runs.Runs[0].ID}} {
				if out := flat(k.ok(view...)); !strings.Contains(out, "HTTP 413 to a POST by bob: request body too large: the limit is 1 MiB") {
					t.Errorf("kl %s of the state push's lock does not say why Terraform got 413:\n%s", strings.Join(view, " "), out)
				}
			}

			// Concurrent LOCKs: one wins.
			const n = 8
			codes := make([]int, n)
			bodies := make([]string, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					info := fmt.Sprintf(`{"ID":"lock-%d","Operation":"OperationTypeApply","Who":"w%d","Version":"1.11.4","Created":"2026-12-01T10:00:00Z","Path":""}`, i, i)
					codes[i], bodies[i] = s.do("LOCK", "acme/prod", writer, info)
				}()
			}
			wg.Wait()
			var won []int
			var holders []string
			for i := range n {
				switch codes[i] {
				case 200:
					won = append(won, i)
				case 423:
					var h struct{ ID string }
					_ = json.Unmarshal([]byte(bodies[i]), &h)
					holders = append(holders, h.ID)
				default:
					t.Errorf("LOCK %d: %d %s", i, codes[i], bodies[i])
				}
			}
			if len(won) != 1 || len(holders) != n-1 {
				t.Fatalf("%d concurrent LOCKs: %d won (%v), %d got 423", n, len(won), won, len(holders))
			}
			for _, h := range holders[1:] {
				if h != holders[0] || h == "" {
					t.Errorf("the 423s name the holders %v, want one run", holders)
				}
			}
			// The winner's Terraform "died": Terraform prints the run id,
			// and force-unlock lifts the lock.
			out := flat(bob.fails("apply", "-auto-approve", "-no-color"))
			if !strings.Contains(out, "HTTP remote state already locked: ID="+holders[0]) {
				t.Errorf("terraform apply on a held backend lock printed:\n%s\nwant the holder's run id %s", out, holders[0])
			}
			// A read-only token's force-unlock (an empty UNLOCK) is refused
			// naming the lock and what may release it.
			consumer := tf{k, dir, reader}
			if out := consumer.fails("force-unlock", "-force", holders[0]); !strings.Contains(out, "Unexpected HTTP response code 403") {
				t.Errorf("terraform force-unlock with a read-only token printed:\n%s", out)
			}
			for _, want := range []string{"(actor consumer) is read-only: unlocking state acme/prod without a lock ID (an empty UNLOCK, which is all `terraform force-unlock` sends)",
				"it is held by backend lock run " + holders[0] + " (terraform apply by bob), a write lock",
				"`terraform force-unlock` needs a token that may write state acme/prod"} {
				if !strings.Contains(s.log(), want) {
					t.Errorf("kl serve's log does not say %q:\n%s", want, s.log())
				}
			}
			bob.ok("force-unlock", "-force", holders[0])
			bob.ok("apply", "-auto-approve", "-no-color")
		})
	}
}

// TestBackendLockIsAReservation: a terraform apply through the backend
// holds the whole state; a disjoint kl apply is refused (--wait 0) or
// waits for it, and is recorded as waiting on the backend lock's run;
// the apply's POSTs (more than one: its resource takes longer than
// Terraform's 20 s persist interval) are one version. Then, while a kl
// apply runs, a terraform plan through the backend (a read lock) is
// refused naming the kl run, and waits with -lock-timeout; force-unlock
// of the kl run is refused.
func TestBackendLockIsAReservation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform for a minute")
	}
	t.Parallel()
	for kind, newKit := range kits {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			k := newKit(t)
			k.ok("state", "init", "shared")
			writer, _ := k.tokens()
			s := serveBackend(t, k)
			klDir := func(name, kv string, extra string) string {
				d := filepath.Join(k.dir, name)
				write(t, filepath.Join(d, "main.tf"), fmt.Sprintf("resource \"terraform_data\" \"k\" {\n  input = %q\n}\n%s", kv, extra))
				return d
			}
			k.ok("apply", reULID.FindString(k.ok("plan", "--state", "shared", "-C", klDir("k1", "v1", ""))))
			plan := reULID.FindString(k.ok("plan", "--state", "shared", "-C", klDir("k2", "v2", "")))

			// terraform apply through the backend: k unchanged, t created
			// slowly (two POSTs).
			dir := filepath.Join(k.dir, "tf")
			write(t, filepath.Join(dir, "backend.tf"), s.backendBlock("shared"))
			write(t, filepath.Join(dir, "main.tf"), "resource \"terraform_data\" \"k\" {\n  input = \"v1\"\n}\n\n"+
				"resource \"terraform_data\" \"fast\" {\n  input = \"fast\"\n}\n\n"+
				"resource \"terraform_data\" \"t\" {\n  input = \"t\"\n  provisioner \"local-exec\" {\n    command = \"sleep 21\"\n  }\n}\n\n"+
				"resource \"terraform_data\" \"after\" {\n  input      = \"after\"\n  depends_on = [terraform_data.t]\n}\n")
			bob := tf{k, dir, writer}
			bob.ok("init", "-no-color")
			before := len(k.history("shared"))
			mark := s.mark()
			apply := bob.start("apply", "-auto-approve", "-no-color")
			if !poll(30*time.Second, 100*time.Millisecond, func() bool { return slices.Contains(s.requests(mark), "LOCK OK") }) {
				t.Fatalf("terraform apply did not lock within 30s:\n%s", s.log())
			}
			refused := k.run("apply", plan, "--wait", "0")
			if refused.code() != 3 || !strings.Contains(refused.err.Error(), "bob") {
				t.Errorf("kl apply --wait 0 beside a backend lock: exit %d, %v; want a refusal naming bob", refused.code(), refused.err)
			}
			plan = reULID.FindString(k.ok("plan", "--state", "shared", "-C", klDir("k3", "v2", "")))
			var story storyDoc
			k.jsonOf(&story, "apply", plan, "--wait", "2m")
			if out, err := apply.wait(t, 2*time.Minute); err != nil {
				t.Fatalf("terraform apply: %v\n%s", err, out)
			}
			got := s.requests(mark)
			if posts := strings.Count(strings.Join(got, ","), "POST OK"); posts < 2 {
				t.Errorf("terraform apply of a 21 s resource: %d POSTs (%v), want at least 2", posts, got)
			}
			waited := false
			for _, m := range story.Markers {
				waited = waited || m.Kind == "waited" && m.OtherRun != ""
				// Its record names the lock's operator, Terraform's
				// operation and Who (issue 14 review F8), not a bare run.
				if want := "backend lock " + m.OtherRun + " by bob (terraform apply (OperationTypeApply), Terraform "; m.Kind == "waited" && !strings.Contains(m.Text, want) {
					t.Errorf("kl apply --wait's waited marker reads %q, want it to name %q…", m.Text, want)
				}
			}
			if shown := k.ok("run", "show", story.Run.ID); !strings.Contains(shown, "by bob (terraform apply (OperationTypeApply), Terraform ") {
				t.Errorf("kl run show of the apply that waited on the backend lock:\n%s", shown)
			}
			if story.Run.Status != "applied" || !waited {
				t.Errorf("kl apply --wait 2m beside the backend lock: %s, markers %+v; want it to succeed after waiting", story.Run.Status, story.Markers)
			}
			h := k.history("shared")
			if len(h) != before+2 {
				t.Errorf("the terraform apply and the kl apply made %d versions, want 2 (one per run, however many POSTs)", len(h)-before)
			}
			_, addrs := k.pull("shared")
			if !slices.Equal(addrs, []string{"terraform_data.after", "terraform_data.fast", "terraform_data.k", "terraform_data.t"}) {
				t.Errorf("the head holds %v", addrs)
			}

			// A kl apply runs; Terraform through the backend waits for it.
			slow := reULID.FindString(k.ok("plan", "--state", "shared", "-C", klDir("k4", "v4",
				"resource \"terraform_data\" \"fast\" {\n  input = \"fast\"\n}\n\n"+
					"resource \"terraform_data\" \"t\" {\n  input = \"t\"\n}\n\nresource \"terraform_data\" \"after\" {\n  input = \"after\"\n}\n\n"+
					"resource \"terraform_data\" \"slow\" {\n  input = \"s\"\n  provisioner \"local-exec\" {\n    command = \"sleep 8\"\n  }\n}\n")))
			klApply := make(chan result, 1)
			go func() { klApply <- k.run("apply", slow) }()
			if !poll(30*time.Second, 100*time.Millisecond, func() bool { return strings.Contains(k.ok("status"), slow) }) {
				t.Fatalf("kl apply %s did not start within 30s", slow)
			}
			time.Sleep(time.Second) // its reservations are taken
			write(t, filepath.Join(dir, "main.tf"), "resource \"terraform_data\" \"k\" {\n  input = \"v4\"\n}\n\n"+
				"resource \"terraform_data\" \"fast\" {\n  input = \"fast\"\n}\n\n"+
				"resource \"terraform_data\" \"t\" {\n  input = \"t\"\n}\n\nresource \"terraform_data\" \"after\" {\n  input = \"after\"\n}\n\n"+
				"resource \"terraform_data\" \"slow\" {\n  input = \"s\"\n}\n")
			// Terraform prints the holding run's id: the kl apply of plan slow.
			out := flat(bob.fails("plan", "-no-color"))
			holder := regexp.MustCompile(`HTTP remote state already locked: ID=(\S+)`).FindStringSubmatch(out)
			if holder == nil {
				t.Fatalf("terraform plan beside the kl apply of plan %s printed:\n%s", slow, out)
			}
			var shown storyDoc
			k.jsonOf(&shown, "run", "show", holder[1])
			if shown.Run.Kind != "apply" || shown.Run.PlanRun != slow {
				t.Errorf("terraform plan named the holder %s: a %s run of plan %q, want the kl apply of plan %s", holder[1], shown.Run.Kind, shown.Run.PlanRun, slow)
			}
			if out := bob.fails("force-unlock", "-force", holder[1]); !strings.Contains(out, "409") {
				t.Errorf("terraform force-unlock of kl apply %s printed:\n%s", holder[1], out)
			}
			waiting := bob.start("plan", "-lock-timeout=2m", "-detailed-exitcode", "-no-color")
			if r := <-klApply; r.err != nil {
				t.Fatalf("kl apply %s: %v\n%s", slow, r.err, r.errOut)
			}
			if out, err := waiting.wait(t, 2*time.Minute); err != nil {
				t.Errorf("terraform plan -lock-timeout=2m after the kl apply: %v (exit 2: changes)\n%s", err, out)
			}
		})
	}
}

// TestBackendLockWords (issue 14, a fresh-eyes review of real Terraform
// against kl serve, F1, F2, F4): a terraform plan through the backend
// takes a read lock, and once it unlocks, kl runs, kl run show and kl
// why say it was a read lock of terraform plan that was released — never
// applied, allowed or "no changes" — and its JSON kind is backend-lock; a
// terraform state push whose every POST was refused (another lineage)
// was released with no version written, naming the refused write; kl
// status shows a held read lock as reading, with no writes line.
func TestBackendLockWords(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform")
	}
	t.Parallel()
	for kind, newKit := range kits {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			k := newKit(t)
			k.ok("state", "init", "acme/prod")
			writer, _ := k.tokens()
			s := serveBackend(t, k)
			dir := filepath.Join(k.dir, "prod")
			write(t, filepath.Join(dir, "backend.tf"), s.backendBlock("acme/prod"))
			write(t, filepath.Join(dir, "main.tf"), prodConfig("a"))
			bob := tf{k, dir, writer}
			bob.ok("init", "-no-color")
			bob.ok("apply", "-auto-approve", "-no-color")
			type row struct {
				ID, Kind, Status, Reason, What string
				BackendLock                    struct{ Operation, Mode string } `json:"backend_lock"`
			}
			latest := func() row {
				var doc struct{ Runs []row }
				k.jsonOf(&doc, "runs", "--state", "acme/prod")
				return doc.Runs[0]
			}
			check := func(what string, r row, want ...string) {
				t.Helper()
				var line string // its row in kl runs
				for _, l := range strings.Split(k.ok("runs", "--state", "acme/prod"), "\n") {
					if strings.Contains(l, r.ID) {
						line = l
					}
				}
				own := line + "\n" + k.ok("run", "show", r.ID) + k.ok("why", r.ID)
				var why struct{ Verdict, Text string }
				k.jsonOf(&why, "why", r.ID)
				if r.Kind != "backend-lock" || r.Status != "released" || why.Verdict != "released" {
					t.Errorf("%s: kind %s, status %s, why %s; want backend-lock, released, released", what, r.Kind, r.Status, why.Verdict)
				}
				for _, w := range want {
					if !strings.Contains(own, w) {
						t.Errorf("%s: the views do not say %q:\n%s", what, w, own)
					}
				}
				for _, w := range []string{"applied", "allowed", "no changes"} {
					if strings.Contains(own, w) {
						t.Errorf("%s: the views say %q:\n%s", what, w, own)
					}
				}
			}

			bob.ok("plan", "-no-color")
			plan := latest()
			if plan.BackendLock.Operation != "OperationTypePlan" || plan.BackendLock.Mode != "read" {
				t.Fatalf("the plan's run: %+v", plan)
			}
			check("terraform plan", plan, "the read lock of terraform plan (OperationTypePlan) ended at UNLOCK by bob: a read lock writes nothing",
				"released at UNLOCK: a read lock writes nothing")

			other := filepath.Join(k.dir, "other.tfstate")
			write(t, other, `{"version":4,"terraform_version":"1.11.4","serial":50,"lineage":"another-lineage","outputs":{},"resources":[]}`)
			if out := bob.fails("state", "push", "-force", "-no-color", other); !strings.Contains(out, "HTTP error: 409") {
				t.Fatalf("terraform state push of another lineage printed:\n%s", out)
			}
			check("a refused terraform state push", latest(), "with no version written: Kilolock refused its write", "the document has lineage another-lineage",
				"released with no version written: 1 write refused")

			// A read lock held (as terraform plan holds it while it plans).
			info := `{"ID":"plan-1","Operation":"OperationTypePlan","Who":"bob@laptop","Version":"1.11.4","Created":"2026-12-02T10:00:00Z","Path":""}`
			if code, body := s.do("LOCK", "acme/prod", writer, info); code != 200 {
				t.Fatalf("LOCK of a plan: %d %s", code, body)
			}
			st := k.ok("status")
			if !strings.Contains(st, "reading (terraform plan through the backend)") || strings.Contains(st, "applying") || strings.Contains(st, "checkpoints, committed") {
				t.Errorf("kl status of a held read lock:\n%s", st)
			}
			if code, body := s.do("UNLOCK", "acme/prod", writer, info); code != 200 {
				t.Fatalf("UNLOCK of the plan: %d %s", code, body)
			}
		})
	}
}

// TestBackendLeaseWords (issue 14 review F5, F6, F7): with
// KL_BACKEND_LOCK_TTL=1m, a terraform apply through the backend that
// outlives its lease and then unlocks reads as a lease that ran out
// without an UNLOCK, whose UNLOCK came after and committed; a LOCK of an
// apply left to lapse without a write is a fence whose words name the
// lease, Terraform's operation and Who, and offer an unfence — not a
// recover (it wrote no checkpoint) — and never "stopped renewing" (the
// holder is kl serve, alive).
func TestBackendLeaseWords(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform past a one-minute lease")
	}
	t.Parallel()
	for kind, newKit := range kits {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			k := newKit(t)
			k.ok("state", "init", "slow")
			k.ok("state", "init", "other")
			writer, _ := k.tokens()
			k.env = append(k.env, "KL_BACKEND_LOCK_TTL=1m")
			s := serveBackend(t, k)
			dir := filepath.Join(k.dir, "slow")
			write(t, filepath.Join(dir, "backend.tf"), s.backendBlock("slow"))
			write(t, filepath.Join(dir, "main.tf"), "resource \"terraform_data\" \"slow\" {\n  input = \"s\"\n  provisioner \"local-exec\" {\n    command = \"sleep 68\"\n  }\n}\n")
			bob := tf{k, dir, writer}
			bob.ok("init", "-no-color")
			apply := bob.start("apply", "-auto-approve", "-no-color")
			info := `{"ID":"gone-1","Operation":"OperationTypeApply","Who":"carol@box","Version":"1.11.4","Created":"2026-12-02T10:00:00Z","Path":""}`
			if code, body := s.do("LOCK", "other", writer, info); code != 200 {
				t.Fatalf("LOCK: %d %s", code, body)
			}
			if out, err := apply.wait(t, 3*time.Minute); err != nil {
				t.Fatalf("terraform apply past its lease: %v\n%s", err, out)
			}
			var runs struct{ Runs []struct{ ID, State string } }
			k.jsonOf(&runs, "runs")
			ids := map[string]string{}
			for _, r := range runs.Runs {
				ids[r.State] = r.ID
			}

			late := k.ok("run", "show", ids["slow"]) + k.ok("why", ids["slow"]) + k.ok("runs", "--state", "slow")
			for _, w := range []string{"KL_BACKEND_LOCK_TTL", "without an UNLOCK", "its UNLOCK arrived after the lease ran out", "nothing more is needed", "committed version 1"} {
				if !strings.Contains(late, w) {
					t.Errorf("the apply whose UNLOCK came after its lease: the views do not say %q:\n%s", w, late)
				}
			}
			if strings.Contains(late, "stopped renewing") || strings.Contains(late, "mid-apply (fenced)") {
				t.Errorf("the apply whose UNLOCK came after its lease: false words:\n%s", late)
			}

			fence := k.ok("status") + k.ok("run", "show", ids["other"]) + k.ok("why", ids["other"])
			for _, w := range []string{"KL_BACKEND_LOCK_TTL", "without an UNLOCK", "terraform apply (OperationTypeApply)", "carol@box", "bob",
				"nothing to recover", "kl run unfence " + ids["other"]} {
				if !strings.Contains(fence, w) {
					t.Errorf("the lapsed lock's fence: the views do not say %q:\n%s", w, fence)
				}
			}
			if strings.Contains(fence, "stopped renewing") || strings.Contains(fence, "kl run recover") {
				t.Errorf("the lapsed lock's fence: false words:\n%s", fence)
			}
			if r := k.run("run", "recover", ids["other"]); r.err == nil || !strings.Contains(r.err.Error(), "nothing to recover") {
				t.Errorf("kl run recover of a lock that wrote nothing: %v", r.err)
			}
		})
	}
}
