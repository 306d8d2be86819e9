package api

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kilolock/kilolock/internal/token"
)

// tfRun runs terraform args in dir with the backend's token as
// TF_HTTP_PASSWORD and returns its combined output and error.
func tfRun(t *testing.T, dir, password string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("terraform", args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TF_CLI_CONFIG_FILE=/dev/null", "CHECKPOINT_DISABLE=1",
		"TF_IN_AUTOMATION=1", "TF_INPUT=0", "TF_HTTP_PASSWORD=" + password}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// requests returns "METHOD status" of each backend request of the log
// since mark bytes.
func (f *fixture) requests(mark int) []string {
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(f.log.String()[mark:]), "\n") {
		var rec struct {
			Method, Path string
			Status       int
		}
		if json.Unmarshal([]byte(line), &rec) == nil && strings.HasPrefix(rec.Path, BackendPath) {
			out = append(out, rec.Method+" "+strconv.Itoa(rec.Status))
		}
	}
	return out
}

// TestTerraformClient pins what Terraform's http backend client (the
// terraform on PATH) sends and prints, which the backend is built on
// (docs/terraform.md "The http backend"): the requests of init, apply and
// plan; an apply whose resources take longer than Terraform's 20 s
// persist interval writes more than once under one lock; the Operation
// of a plan's lock; what a 423 and a 409 print; force-unlock's empty
// UNLOCK. The backend behind the API is the fake: the engine's side is
// tested with real Terraform in internal/cli.
func TestTerraformClient(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Terraform for 25 s")
	}
	if _, err := exec.LookPath("terraform"); err != nil {
		t.Skip("terraform not on PATH")
	}
	t.Parallel()
	f, fb := backendFixture(t, Options{})
	tok := f.mint("bob", nil)
	dir := t.TempDir()
	addr := f.url + BackendPath + "acme/prod"
	cfg := `terraform {
  backend "http" {
    address        = "` + addr + `"
    lock_address   = "` + addr + `"
    unlock_address = "` + addr + `"
    username       = "bob"
  }
}

resource "terraform_data" "fast" {
  input = "fast"
}

resource "terraform_data" "slow" {
  input = "slow"
  provisioner "local-exec" {
    command = "sleep 21"
  }
}

resource "terraform_data" "after" {
  input      = "after"
  depends_on = [terraform_data.slow]
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(want bool, args ...string) string {
		t.Helper()
		out, err := tfRun(t, dir, tok, args...)
		if (err == nil) != want {
			t.Fatalf("terraform %s: %v (want success %v)\n%s", strings.Join(args, " "), err, want, out)
		}
		return out
	}
	mark := len(f.log.String())
	run(true, "init", "-no-color")
	if got := f.requests(mark); strings.Join(got, ",") != "GET 200" {
		t.Errorf("terraform init sent %v, want one GET", got)
	}

	mark = len(f.log.String())
	run(true, "apply", "-auto-approve", "-no-color")
	got := f.requests(mark)
	posts := strings.Count(strings.Join(got, ","), "POST 200")
	if len(got) < 4 || got[0] != "LOCK 200" || got[len(got)-1] != "UNLOCK 200" || posts < 2 {
		t.Errorf("terraform apply of a 21 s resource sent %v; want LOCK, GET, at least two POSTs, UNLOCK", got)
	}
	t.Logf("terraform apply sent %v", got)
	calls := fb.log()
	var lockID string
	for _, c := range calls {
		if strings.HasPrefix(c, "lock acme/prod write ") {
			lockID = strings.TrimPrefix(c, "lock acme/prod write ")
		}
	}
	for _, c := range calls {
		if strings.HasPrefix(c, "write ") && c != "write acme/prod "+lockID {
			t.Errorf("a POST's ?ID= is not the LOCK's LockInfo ID %s: %s", lockID, c)
		}
	}

	mark = len(f.log.String())
	run(true, "plan", "-no-color")
	if got := f.requests(mark); strings.Join(got, ",") != "LOCK 200,GET 200,UNLOCK 200" {
		t.Errorf("terraform plan sent %v, want LOCK, GET, UNLOCK", got)
	}
	if c := fb.log(); !strings.HasPrefix(c[len(c)-2], "lock acme/prod read ") {
		t.Errorf("terraform plan's lock was not a read lock (Operation %s): %v", OperationPlan, c)
	}

	// Held: Terraform prints the holder's ID, nothing else of the answer.
	if code, body, _ := f.send("LOCK", BackendPath+"acme/prod", "Bearer "+tok, lockInfo("other", "OperationTypeApply"), nil); code != 200 {
		t.Fatalf("LOCK: %d %s", code, body)
	}
	out := run(false, "apply", "-auto-approve", "-no-color")
	holder := regexp.MustCompile(`run-\d+`).FindString(fb.log()[len(fb.log())-2] + " " + out)
	if !strings.Contains(out, "HTTP remote state already locked: ID="+holder) || holder == "" {
		t.Errorf("terraform apply on a held lock printed:\n%s\nwant \"HTTP remote state already locked: ID=run-N\"", out)
	}
	t.Logf("terraform apply on a held lock printed:\n%s", out)

	// force-unlock: an UNLOCK with an empty body; the ID is not sent.
	run(true, "force-unlock", "-force", holder)
	if u := fb.lastUnlock(); !u.Force || u.LockID != "" {
		t.Errorf("terraform force-unlock %s made UNLOCK %+v, want an empty body (Force, no lock id)", holder, u)
	}

	// Refused UNLOCK, LOCK and GET: Terraform prints their status only.
	out = run(false, "force-unlock", "-force", holder) // not locked now: 409
	if !strings.Contains(out, "Unexpected HTTP response code 409") {
		t.Errorf("terraform force-unlock of no lock printed:\n%s", out)
	}
	t.Logf("terraform force-unlock refused with 409 printed:\n%s", out)
	reader := f.mint("consumer", func(n *token.New) { n.ReadOnly = true })
	if out, err := tfRun(t, dir, reader, "apply", "-auto-approve", "-no-color"); err == nil || !strings.Contains(out, "HTTP remote state endpoint invalid auth") {
		t.Errorf("terraform apply with a read-only token (403): %v\n%s", err, out)
	}
	if out, err := tfRun(t, dir, "", "plan", "-no-color"); err == nil || !strings.Contains(out, "HTTP remote state endpoint requires auth") {
		t.Errorf("terraform plan without a password (401): %v\n%s", err, out)
	}

	// A refused POST prints only its status.
	other := filepath.Join(dir, "other.tfstate")
	if err := os.WriteFile(other, []byte(`{"version":4,"terraform_version":"1.11.4","serial":99,"lineage":"L2","outputs":{},"resources":[]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out = run(false, "state", "push", "-force", "-no-color", other)
	if !strings.Contains(out, "HTTP error: 409") {
		t.Errorf("terraform state push -force of another lineage printed:\n%s\nwant HTTP error: 409", out)
	}
	t.Logf("terraform state push -force of another lineage printed:\n%s", out)
}
